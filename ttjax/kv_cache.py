"""``ttnn.kv_cache``: TT-NN's in-place KV-cache writes under their kv_cache names.

``fill_cache_for_user_`` is :func:`ttjax.fill_cache` (a prefill into one user's row) and
``update_cache_for_token_`` is :func:`ttjax.update_cache` (one decode token for every user).

Public names only; the implementation is :mod:`ttjax._src.ttnn.kv_cache`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.kv_cache import (
    fill_cache_for_user_ as fill_cache_for_user_,
    update_cache_for_token_ as update_cache_for_token_,
)

_publish(globals(), "ttjax._src.ttnn.kv_cache")
