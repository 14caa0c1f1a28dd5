"""``ttnn.kv_cache``: TT-NN's in-place KV-cache writes under their kv_cache names.

The implementation of :mod:`ttjax.kv_cache`, whose docstring says more.
"""

from __future__ import annotations

from typing import Any

from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.kv_cache import fill_cache, update_cache


def fill_cache_for_user_(cache: Tensor, input: Tensor, batch_index: int) -> Tensor:
    """Write a prefill's k or v [1, nkv, s, d] into ``cache[batch_index, :, :s]`` in place."""
    return fill_cache(cache, input, batch_index)


def update_cache_for_token_(
    cache: Tensor,
    input: Tensor,
    update_index: int,
    batch_offset: int = 0,
    compute_kernel_config: Any = None,
) -> Tensor:
    """Write one decode token's k or v [1, nkv, b, d] at position ``update_index``, in place."""
    return update_cache(cache, input, update_index, batch_offset)


__all__ = ["fill_cache_for_user_", "update_cache_for_token_"]
