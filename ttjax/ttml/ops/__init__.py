"""TTML's ops namespace: ``distributed`` (collectives with TTML's backward pairs) and ``loss``."""

from ttjax.ttml.ops import distributed, loss

__all__ = ["distributed", "loss"]
