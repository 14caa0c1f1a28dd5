"""``ttnn.transformer``: attention and head-reshaping ops (per device)."""

from ttjax.ops.transformer import (
    concat_heads,
    scaled_dot_product_attention,
    scaled_dot_product_attention_decode,
    split_heads,
)

__all__ = [
    "concat_heads",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_decode",
    "split_heads",
]
