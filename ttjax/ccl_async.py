"""TT-NN's ``ttnn.experimental.*_async`` collectives, called exactly as Tenstorrent's model code calls them.

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
    all_to_all_async as all_to_all_async,
    fused_rms_1_1_32_8192 as fused_rms_1_1_32_8192,
    llama_reduce_scatter as llama_reduce_scatter,
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
