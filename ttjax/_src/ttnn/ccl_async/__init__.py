"""TT-NN's ``ttnn.experimental.*_async`` collectives, called exactly as Tenstorrent's model code calls them.

Each op takes the arguments TT-NN's binding takes, in TT-NN's order, resolving overloads as
pybind does (:mod:`.resolve`), and checks the hardware-only arguments (semaphores, sub-device
ids, links, persistent buffers) as TT-NN does (:mod:`.checks`); like TT-NN, the kernel-specific
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
"""

from __future__ import annotations

from ttjax._src.ttnn.ccl_async.all_gather import all_gather_async, all_gather_async_reversed
from ttjax._src.ttnn.ccl_async.all_gather_concat import all_gather_concat
from ttjax._src.ttnn.ccl_async.all_reduce import all_reduce_async
from ttjax._src.ttnn.ccl_async.all_to_all import all_to_all_async
from ttjax._src.ttnn.ccl_async.halo import neighbor_pad_async, slice_reshard_async
from ttjax._src.ttnn.ccl_async.matmul import all_gather_matmul_async, llama_rs_matmul
from ttjax._src.ttnn.ccl_async.reduce_scatter import (
    llama_reduce_scatter,
    reduce_scatter_async,
    reduce_scatter_minimal_async,
)
from ttjax._src.ttnn.ccl_async.resolve import GlobalSemaphoreArg
from ttjax._src.ttnn.ccl_async.rms_norm import fused_rms_1_1_32_8192

__all__ = [
    "GlobalSemaphoreArg",
    "all_gather_async",
    "all_gather_async_reversed",
    "all_gather_concat",
    "all_gather_matmul_async",
    "all_reduce_async",
    "all_to_all_async",
    "fused_rms_1_1_32_8192",
    "llama_reduce_scatter",
    "llama_rs_matmul",
    "neighbor_pad_async",
    "reduce_scatter_async",
    "reduce_scatter_minimal_async",
    "slice_reshard_async",
]
