"""Abstract mesh tensors: shape, dtype and placement without data, for compiling full-size models.

Public names only; the implementation is :mod:`ttjax._src.ttnn.abstract`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.abstract import (
    abstract_tensor as abstract_tensor,
)

_publish(globals(), "ttjax._src.ttnn.abstract")
