"""Transformer ops, per device: scaled-dot-product attention (prefill and decode), rotary
embeddings, and KV-cache updates.

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.transformer` (attention) and
:mod:`ttjax._src.ttnn.ops.kv_cache` (the cache writes).
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.kv_cache import (
    fill_cache as fill_cache,
    paged_fill_cache as paged_fill_cache,
    paged_fused_update_cache as paged_fused_update_cache,
    paged_update_cache as paged_update_cache,
    update_cache as update_cache,
)
from ttjax._src.ttnn.ops.transformer import (
    chunked_scaled_dot_product_attention as chunked_scaled_dot_product_attention,
    concat_heads as concat_heads,
    concatenate_heads as concatenate_heads,
    flash_mla_prefill as flash_mla_prefill,
    flash_multi_latent_attention_decode as flash_multi_latent_attention_decode,
    paged_flash_multi_latent_attention_decode as paged_flash_multi_latent_attention_decode,
    paged_scaled_dot_product_attention_decode as paged_scaled_dot_product_attention_decode,
    rotary_embedding as rotary_embedding,
    scaled_dot_product_attention as scaled_dot_product_attention,
    scaled_dot_product_attention_decode as scaled_dot_product_attention_decode,
    split_heads as split_heads,
    split_query_key_value_and_split_heads as split_query_key_value_and_split_heads,
    windowed_scaled_dot_product_attention as windowed_scaled_dot_product_attention,
)

_publish(globals(), "ttjax._src.ttnn.ops.transformer", "ttjax._src.ttnn.ops.kv_cache")
