"""``ttnn.experimental``: TT-NN's experimental ops that model code relies on."""

from ttjax.ops.transformer import paged_update_cache, rotary_embedding

__all__ = ["paged_update_cache", "rotary_embedding"]
