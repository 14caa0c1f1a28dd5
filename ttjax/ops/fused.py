"""TT-NN's fused transformer ops, per device, in TT-NN's layouts: QKV head splitting and head
concatenation (prefill and decode), Llama rotary embeddings through the transformation matrix,
distributed RMSNorm's two halves, ``fast_reduce_nc`` and the Mixtral ``moe`` gate.

Everything here is local to a device; the multi-device parts (all-gathering the RMSNorm
statistics, gathering expert outputs) are the model's own collectives.

>>> xqkv = ttnn.from_torch(torch.rand(1, 1, 32, (4 + 2 * 2) * 32), device=mesh)
>>> q, k, v = ttnn.experimental.nlp_create_qkv_heads(xqkv, num_heads=4, num_kv_heads=2,
...                                                   transpose_k_heads=False)
>>> q.shape, k.shape
(Shape([1, 4, 32, 32]), Shape([1, 2, 32, 32]))

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.fused`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.fused import (
    SSM_HIDDEN_SIZE as SSM_HIDDEN_SIZE,
    fast_reduce_nc as fast_reduce_nc,
    layer_norm_post_all_gather as layer_norm_post_all_gather,
    layer_norm_pre_all_gather as layer_norm_pre_all_gather,
    moe as moe,
    nlp_concat_heads as nlp_concat_heads,
    nlp_concat_heads_decode as nlp_concat_heads_decode,
    nlp_create_qkv_heads as nlp_create_qkv_heads,
    nlp_create_qkv_heads_decode as nlp_create_qkv_heads_decode,
    nlp_create_qkv_heads_falcon7b as nlp_create_qkv_heads_falcon7b,
    nlp_create_qkv_heads_segformer as nlp_create_qkv_heads_segformer,
    repeat_and_interleave_eltwise_mul as repeat_and_interleave_eltwise_mul,
    rms_norm_post_all_gather as rms_norm_post_all_gather,
    rms_norm_pre_all_gather as rms_norm_pre_all_gather,
    rotary_embedding_llama as rotary_embedding_llama,
    rotary_embedding_llama_fused_qk as rotary_embedding_llama_fused_qk,
)

_publish(globals(), "ttjax._src.ttnn.ops.fused")
