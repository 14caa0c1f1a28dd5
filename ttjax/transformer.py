"""``ttnn.transformer``: attention (prefill, decode, paged decode, chunked prefill) and
head-reshaping ops, per device."""

from ttjax.ops.transformer import (
    chunked_scaled_dot_product_attention,
    concat_heads,
    concatenate_heads,
    flash_mla_prefill,
    flash_multi_latent_attention_decode,
    paged_flash_multi_latent_attention_decode,
    paged_scaled_dot_product_attention_decode,
    scaled_dot_product_attention,
    scaled_dot_product_attention_decode,
    split_heads,
    split_query_key_value_and_split_heads,
    windowed_scaled_dot_product_attention,
)

__all__ = [
    "chunked_scaled_dot_product_attention",
    "concat_heads",
    "concatenate_heads",
    "flash_mla_prefill",
    "flash_multi_latent_attention_decode",
    "paged_flash_multi_latent_attention_decode",
    "paged_scaled_dot_product_attention_decode",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_decode",
    "split_heads",
    "split_query_key_value_and_split_heads",
    "windowed_scaled_dot_product_attention",
]
