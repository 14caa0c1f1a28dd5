"""TT-NN's Collective Communication Library on ``jax.lax`` collectives inside ``jax.shard_map``.

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
