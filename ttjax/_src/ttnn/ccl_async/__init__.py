"""TT-NN's ``ttnn.experimental.*_async`` collectives, called exactly as Tenstorrent's model code calls them.

The implementation of :mod:`ttjax.ccl_async`, whose docstring says more.
"""

from __future__ import annotations

from ttjax._src.ttnn.ccl_async.all_gather import all_gather_async, all_gather_async_reversed
from ttjax._src.ttnn.ccl_async.all_gather_concat import all_gather_concat
from ttjax._src.ttnn.ccl_async.all_reduce import all_reduce_async
from ttjax._src.ttnn.ccl_async.all_to_all import all_to_all_async
from ttjax._src.ttnn.ccl_async.halo import neighbor_pad_async, slice_reshard_async
from ttjax._src.ttnn.ccl_async.llama_heads import (
    all_reduce_create_qkv_heads,
    llama_rs_create_heads,
)
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
    "all_reduce_create_qkv_heads",
    "all_to_all_async",
    "fused_rms_1_1_32_8192",
    "llama_reduce_scatter",
    "llama_rs_create_heads",
    "llama_rs_matmul",
    "neighbor_pad_async",
    "reduce_scatter_async",
    "reduce_scatter_minimal_async",
    "slice_reshard_async",
]
