"""JAX transforms that understand mesh tensors: ``scan`` over stacked per-layer tensors.

Public names only; the implementation is :mod:`ttjax._src.ttnn.transforms`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.transforms import (
    scan as scan,
)

_publish(globals(), "ttjax._src.ttnn.transforms")
