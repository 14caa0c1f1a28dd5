"""TT-NN's Collective Communication Library on ``jax.lax`` collectives inside ``jax.shard_map``.

Data only moves between devices through these calls, exactly as in TT-NN. Each call is one
``jax.lax`` collective over the mesh axes of the group:

==============================  ==========================  =================================
TT-NN                           inside shard_map            result placement on group axes
==============================  ==========================  =================================
``all_gather(t, dim)``          ``lax.all_gather(tiled)``   Replicate (dim grows)
``reduce_scatter(t, dim)``      ``lax.psum_scatter``        Shard(dim)
``all_reduce(t)``               ``lax.psum/pmax/pmin``      Replicate
``point_to_point``, ``shift``   ``lax.ppermute``            per device
``all_to_all(t, in, out)``      ``lax.all_to_all``          Shard(out_dim)
==============================  ==========================  =================================

``cluster_axis=None`` groups all devices in row-major (ring) order; ``cluster_axis=0`` runs one
collective per column (the devices sharing a column index), ``cluster_axis=1`` one per row.
``Topology.Ring`` and ``Topology.Linear`` give identical values. ``lowering="topology"`` (or the
:func:`ccl_lowering` context) swaps XLA's native collective for the topology's own schedule built
from ``ppermute`` steps (ring: N-1 steps; line: bidirectional, N-1 steps) so it can be inspected
and costed. Sums follow the numerics policy (:mod:`ttjax.numerics`): under
``ttjax.numerics("deterministic")`` they add in device-index order whatever the lowering.

>>> gathered = ttnn.all_gather(x, dim=3, cluster_axis=0, mesh_device=mesh,
...                            topology=ttnn.Topology.Linear)

Public names only; the implementation is :mod:`ttjax._src.ttnn.ccl` (the MoE token routing in
:mod:`ttjax._src.ttnn.ccl_moe`).
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ccl import (
    GlobalSemaphore as GlobalSemaphore,
    all_gather as all_gather,
    all_reduce as all_reduce,
    all_to_all as all_to_all,
    broadcast as broadcast,
    ccl_lowering as ccl_lowering,
    create_global_semaphore as create_global_semaphore,
    mesh_partition as mesh_partition,
    point_to_point as point_to_point,
    reduce_scatter as reduce_scatter,
    shift as shift,
)
from ttjax._src.ttnn.ccl_moe import (
    all_to_all_combine as all_to_all_combine,
    all_to_all_dispatch as all_to_all_dispatch,
)

_publish(globals(), "ttjax._src.ttnn.ccl", "ttjax._src.ttnn.ccl_moe")
