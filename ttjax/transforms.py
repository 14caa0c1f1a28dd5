"""JAX transforms that understand mesh tensors: ``scan`` over stacked per-layer tensors.

``jax.lax.scan`` slices the leading axis of every leaf, but a mesh tensor's metadata (per-device
shape, placements) must follow the slice. :func:`scan` does that bookkeeping so a model can keep
its layers stacked ([n_layers, ...] per device) and compile one layer body instead of n: an
80-layer model then compiles as fast as a 1-layer one.

>>> def body(x, layer):
...     return ttnn.add(x, ttnn.linear(x, layer["w"])), None
>>> stacked_w = ttnn.from_torch(torch.rand(3, 32, 32) / 32, device=mesh)   # [n_layers, d, d]
>>> h, _ = ttjax.scan(body, ttnn.from_torch(torch.rand(1, 32), device=mesh), {"w": stacked_w})
>>> h.shape
Shape([1, 32])

Public names only; the implementation is :mod:`ttjax._src.ttnn.transforms`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.transforms import (
    scan as scan,
)

_publish(globals(), "ttjax._src.ttnn.transforms")
