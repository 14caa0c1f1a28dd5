"""``ttnn.transformer``: attention (prefill, decode, paged decode, chunked prefill, joint and
ring-joint), ``attention_softmax`` and head-reshaping ops, per device.

Ring joint attention is the one op here that communicates: it all-gathers the sequence-sharded
K and V over the ring's mesh axis (TT-NN fuses that all-gather into the op), then attends
locally.

Public names only; the implementation is :mod:`ttjax._src.ttnn.transformer`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.transformer import (
    attention_softmax as attention_softmax,
    attention_softmax_ as attention_softmax_,
    chunked_scaled_dot_product_attention as chunked_scaled_dot_product_attention,
    concat_heads as concat_heads,
    concatenate_heads as concatenate_heads,
    flash_mla_prefill as flash_mla_prefill,
    flash_multi_latent_attention_decode as flash_multi_latent_attention_decode,
    joint_scaled_dot_product_attention as joint_scaled_dot_product_attention,
    paged_flash_multi_latent_attention_decode as paged_flash_multi_latent_attention_decode,
    paged_scaled_dot_product_attention_decode as paged_scaled_dot_product_attention_decode,
    ring_distributed_scaled_dot_product_attention as ring_distributed_scaled_dot_product_attention,
    ring_joint_scaled_dot_product_attention as ring_joint_scaled_dot_product_attention,
    scaled_dot_product_attention as scaled_dot_product_attention,
    scaled_dot_product_attention_decode as scaled_dot_product_attention_decode,
    split_heads as split_heads,
    split_query_key_value_and_split_heads as split_query_key_value_and_split_heads,
    windowed_scaled_dot_product_attention as windowed_scaled_dot_product_attention,
)

_publish(globals(), "ttjax._src.ttnn.transformer")
