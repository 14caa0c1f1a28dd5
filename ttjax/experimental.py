"""``ttnn.experimental``: TT-NN's experimental ops that model code relies on.

The ``*_async`` collectives (:mod:`ttjax.ccl_async`) take TT-NN's persistent buffers, global
semaphores and sub-device ids, check them as TT-NN does, and give the synchronous collective's
values, written into the persistent output buffer when one is given.

Public names only; the implementation is :mod:`ttjax._src.ttnn.experimental`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.experimental import (
    GlobalSemaphoreArg as GlobalSemaphoreArg,
    all_gather_async as all_gather_async,
    all_gather_async_reversed as all_gather_async_reversed,
    all_gather_concat as all_gather_concat,
    all_gather_matmul_async as all_gather_matmul_async,
    all_reduce_async as all_reduce_async,
    all_reduce_create_qkv_heads as all_reduce_create_qkv_heads,
    all_to_all_async as all_to_all_async,
    attn_matmul as attn_matmul,
    attn_matmul_from_cache as attn_matmul_from_cache,
    broadcast_to as broadcast_to,
    conv3d as conv3d,
    fast_reduce_nc as fast_reduce_nc,
    group_attn_matmul as group_attn_matmul,
    llama_reduce_scatter as llama_reduce_scatter,
    llama_rs_create_heads as llama_rs_create_heads,
    llama_rs_matmul as llama_rs_matmul,
    neighbor_pad_async as neighbor_pad_async,
    nlp_concat_heads as nlp_concat_heads,
    nlp_concat_heads_decode as nlp_concat_heads_decode,
    nlp_create_qkv_heads as nlp_create_qkv_heads,
    nlp_create_qkv_heads_decode as nlp_create_qkv_heads_decode,
    nlp_create_qkv_heads_falcon7b as nlp_create_qkv_heads_falcon7b,
    nlp_create_qkv_heads_segformer as nlp_create_qkv_heads_segformer,
    nlp_kv_cache_load_slice as nlp_kv_cache_load_slice,
    paged_fill_cache as paged_fill_cache,
    paged_fused_update_cache as paged_fused_update_cache,
    paged_update_cache as paged_update_cache,
    reduce_scatter_async as reduce_scatter_async,
    reduce_scatter_minimal_async as reduce_scatter_minimal_async,
    repeat_and_interleave_eltwise_mul as repeat_and_interleave_eltwise_mul,
    rotary_embedding as rotary_embedding,
    rotary_embedding_llama as rotary_embedding_llama,
    rotary_embedding_llama_fused_qk as rotary_embedding_llama_fused_qk,
    slice_reshard_async as slice_reshard_async,
    split_query_key_value_and_split_heads as split_query_key_value_and_split_heads,
    typecast as typecast,
)

_publish(globals(), "ttjax._src.ttnn.experimental")
