"""``ttnn.experimental``: TT-NN's experimental ops that model code relies on.

The implementation of :mod:`ttjax.experimental`, whose docstring says more.
"""

from __future__ import annotations

from ttjax._src.ttnn.ccl_async import (
    GlobalSemaphoreArg,
    all_gather_async,
    all_gather_async_reversed,
    all_gather_concat,
    all_gather_matmul_async,
    all_reduce_async,
    all_reduce_create_qkv_heads,
    all_to_all_async,
    llama_reduce_scatter,
    llama_rs_create_heads,
    llama_rs_matmul,
    neighbor_pad_async,
    reduce_scatter_async,
    reduce_scatter_minimal_async,
    slice_reshard_async,
)
from ttjax._src.ttnn.conv3d import conv3d
from ttjax._src.ttnn.ops.attention import (
    nlp_kv_cache_load_slice,
    split_fused_qkv_and_split_heads as split_query_key_value_and_split_heads,
)
from ttjax._src.ttnn.ops.data_movement import broadcast_to
from ttjax._src.ttnn.ops.fused import (
    fast_reduce_nc,
    nlp_concat_heads,
    nlp_concat_heads_decode,
    nlp_create_qkv_heads,
    nlp_create_qkv_heads_decode,
    nlp_create_qkv_heads_falcon7b,
    nlp_create_qkv_heads_segformer,
    repeat_and_interleave_eltwise_mul,
    rotary_embedding_llama,
    rotary_embedding_llama_fused_qk,
)
from ttjax._src.ttnn.ops.kv_cache import (
    paged_fill_cache,
    paged_fused_update_cache,
    paged_update_cache,
)
from ttjax._src.ttnn.ops.matmul import attn_matmul, attn_matmul_from_cache, group_attn_matmul
from ttjax._src.ttnn.ops.pointwise import experimental_typecast as typecast
from ttjax._src.ttnn.ops.transformer import rotary_embedding

__all__ = [
    "GlobalSemaphoreArg",
    "all_gather_async",
    "all_gather_async_reversed",
    "all_gather_concat",
    "all_gather_matmul_async",
    "all_reduce_async",
    "all_reduce_create_qkv_heads",
    "all_to_all_async",
    "attn_matmul",
    "attn_matmul_from_cache",
    "broadcast_to",
    "conv3d",
    "fast_reduce_nc",
    "group_attn_matmul",
    "llama_reduce_scatter",
    "llama_rs_create_heads",
    "llama_rs_matmul",
    "neighbor_pad_async",
    "nlp_concat_heads",
    "nlp_concat_heads_decode",
    "nlp_create_qkv_heads",
    "nlp_create_qkv_heads_decode",
    "nlp_create_qkv_heads_falcon7b",
    "nlp_create_qkv_heads_segformer",
    "nlp_kv_cache_load_slice",
    "paged_fill_cache",
    "paged_fused_update_cache",
    "paged_update_cache",
    "reduce_scatter_async",
    "reduce_scatter_minimal_async",
    "repeat_and_interleave_eltwise_mul",
    "rotary_embedding",
    "rotary_embedding_llama",
    "rotary_embedding_llama_fused_qk",
    "slice_reshard_async",
    "split_query_key_value_and_split_heads",
    "typecast",
]
