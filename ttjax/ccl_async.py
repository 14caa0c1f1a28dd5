"""TT-NN's ``ttnn.experimental.*_async`` collectives, called exactly as Tenstorrent's model code calls them.

Each op takes the arguments TT-NN's binding takes, in TT-NN's order, resolving overloads as
pybind does (``resolve.py``), and checks the hardware-only arguments (semaphores, sub-device
ids, links, persistent buffers) as TT-NN does (``checks.py``); like TT-NN, the kernel-specific
checks apply only where TT-NN runs its native kernel. The values come from the one collective
floor in :mod:`ttjax.ccl`. One module per op family.

>>> cores = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 7))})
>>> sems = [ttnn.create_global_semaphore(mesh, cores, 0) for _ in range(2)]
>>> y = ttnn.experimental.all_gather_async(
...     x, persistent_output_buffer=None, dim=3, multi_device_global_semaphore=sems,
...     num_links=1, cluster_axis=1, topology=ttnn.Topology.Linear,
...     chunks_per_sync=10, num_workers_per_link=2, num_buffers_per_channel=2)
>>> y.shape
Shape([1, 1, 32, 128])

Public names only; the implementation is the package :mod:`ttjax._src.ttnn.ccl_async`, one module
per op family.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ccl_async import (
    GlobalSemaphoreArg as GlobalSemaphoreArg,
    all_gather_async as all_gather_async,
    all_gather_async_reversed as all_gather_async_reversed,
    all_gather_concat as all_gather_concat,
    all_gather_matmul_async as all_gather_matmul_async,
    all_reduce_async as all_reduce_async,
    all_reduce_create_qkv_heads as all_reduce_create_qkv_heads,
    all_to_all_async as all_to_all_async,
    fused_rms_1_1_32_8192 as fused_rms_1_1_32_8192,
    llama_reduce_scatter as llama_reduce_scatter,
    llama_rs_create_heads as llama_rs_create_heads,
    llama_rs_matmul as llama_rs_matmul,
    neighbor_pad_async as neighbor_pad_async,
    reduce_scatter_async as reduce_scatter_async,
    reduce_scatter_minimal_async as reduce_scatter_minimal_async,
    slice_reshard_async as slice_reshard_async,
)

_publish(
    globals(),
    "ttjax._src.ttnn.ccl_async",
    "ttjax._src.ttnn.ccl_async.all_gather",
    "ttjax._src.ttnn.ccl_async.all_gather_concat",
    "ttjax._src.ttnn.ccl_async.all_reduce",
    "ttjax._src.ttnn.ccl_async.all_to_all",
    "ttjax._src.ttnn.ccl_async.halo",
    "ttjax._src.ttnn.ccl_async.matmul",
    "ttjax._src.ttnn.ccl_async.reduce_scatter",
    "ttjax._src.ttnn.ccl_async.resolve",
    "ttjax._src.ttnn.ccl_async.rms_norm",
)
