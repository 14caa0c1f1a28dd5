"""matmul and linear: per-device matrix products (no communication; see ttjax.ccl for that).

A replicated activation times a width-sharded weight gives each device its slice of the output
columns; a height-sharded activation times a height-sharded weight gives each device a partial
sum, which an ``all_reduce`` (or ``reduce_scatter``) then combines, as in TT-NN.

>>> y = ttnn.linear(x, w, bias=b, activation="gelu")

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.matmul`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.matmul import (
    attn_matmul as attn_matmul,
    attn_matmul_from_cache as attn_matmul_from_cache,
    bmm as bmm,
    group_attn_matmul as group_attn_matmul,
    linear as linear,
    matmul as matmul,
    sparse_matmul as sparse_matmul,
)

_publish(globals(), "ttjax._src.ttnn.ops.matmul")
