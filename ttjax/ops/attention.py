"""TT-NN's other attention ops, per device: ``attention_softmax(_)`` (BERT / ViT), joint
attention over two sequences (the diffusion transformers' ``joint_scaled_dot_product_attention``,
whose ring form gathers K/V in :mod:`ttjax.transformer`), BERT-large's fused-QKV head split and
the KV-cache slice load.

>>> probs = ttnn.transformer.attention_softmax(x, head_size=64)
>>> tuple(probs.shape)
(1, 1, 32, 32)

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.attention`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.attention import (
    attention_softmax as attention_softmax,
    attention_softmax_ as attention_softmax_,
    check_joint_inputs as check_joint_inputs,
    joint_attention as joint_attention,
    joint_scaled_dot_product_attention as joint_scaled_dot_product_attention,
    nlp_kv_cache_load_slice as nlp_kv_cache_load_slice,
    split_fused_qkv_and_split_heads as split_fused_qkv_and_split_heads,
)

_publish(globals(), "ttjax._src.ttnn.ops.attention")
