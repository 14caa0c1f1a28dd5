"""The mesh tensor: its data (a global JAX array) plus a frozen :class:`TensorSpec`.

Public names only; the implementation is :mod:`ttjax._src.core.tensor`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.core.tensor import (
    Shape as Shape,
    Tensor as Tensor,
    TensorSpec as TensorSpec,
    TensorTopology as TensorTopology,
    check_live as check_live,
    deallocated_error as deallocated_error,
    fetch as fetch,
    host_blocks as host_blocks,
    is_traced as is_traced,
    tile_padded as tile_padded,
)

_publish(globals(), "ttjax._src.core.tensor")
