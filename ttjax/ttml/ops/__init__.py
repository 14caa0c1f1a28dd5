"""TTML's ops namespace: ``distributed`` (collectives with TTML's backward pairs), ``loss`` and
``ring_attention`` (context parallelism)."""

from ttjax.ttml.ops import distributed, loss, ring_attention

__all__ = ["distributed", "loss", "ring_attention"]
