r"""One parallelism plan: which mesh axis plays which role, and one table from logical axes to roles.

A role is a way of splitting work: ``dp`` (data), ``fsdp`` (data, with parameters sharded too),
``cp`` (the sequence), ``tp`` (tensors), ``pp`` (pipeline stages), ``ep`` (experts).
:class:`ParallelDims` names each mesh axis by its role (torchtitan's ``ParallelDims``), so
``PartitionSpec``\ s, HLO and ``ttjax.inspect`` say ``tp``, not ``x``. Models state the logical
axes of their parameters once (:class:`LogicalAxes`: ``"vocab"``, ``"embed"``, ``"heads"``, ...);
:data:`LOGICAL_AXIS_RULES` maps them to roles, as MaxText's ``logical_axis_rules`` does, and
:meth:`ParallelDims.spec` turns them into a ``PartitionSpec`` for the roles in use.

>>> dims = ParallelDims.from_sizes(dp=2, tp=4)
>>> dims, dims.axis_names
(ParallelDims(dp=2, tp=4), ('dp', 'tp'))
>>> dims.spec(LogicalAxes("embed", "mlp"))
P(None, 'tp')

Every cross-role rule lives here, checked once: roles take distinct mesh axes, the batch
divides by the data-parallel sizes, a sharded dimension divides by its roles' sizes.

Public names only; the implementation is :mod:`ttjax._src.core.plan` and
:mod:`ttjax._src.core.fsdp` (FSDP's gather and gradient average).
"""

from ttjax._src.core.fsdp import (
    average_gradients as average_gradients,
    gather_sharded as gather_sharded,
    sharded_dim as sharded_dim,
    spec_axes as spec_axes,
)
from ttjax._src.core.plan import (
    LOGICAL_AXIS_RULES as LOGICAL_AXIS_RULES,
    ROLES as ROLES,
    SEQUENCE_PARALLEL_RULE as SEQUENCE_PARALLEL_RULE,
    LogicalAxes as LogicalAxes,
    ParallelDims as ParallelDims,
    is_logical as is_logical,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.plan", "ttjax._src.core.fsdp")
