"""TTML's ``ttml.core``."""

from ttjax.ttml.core import distributed

__all__ = ["distributed"]
