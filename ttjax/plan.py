"""One parallelism plan: which mesh axis plays which role, and one table from logical axes to roles.

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
