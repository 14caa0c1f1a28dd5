"""Abstract mesh tensors: shape, dtype and placement without data, for compiling full-size models.

An abstract tensor holds a ``jax.ShapeDtypeStruct`` (with its ``NamedSharding``) instead of an
array. Passing abstract tensors to ``jax.jit(f).lower(...)`` or :func:`ttjax.inspect.inspect`
compiles the real program, so a 70B-parameter model on an 8x4 Galaxy is inspected without
materializing a single weight.

>>> w = ttjax.abstract_tensor((8192, 28672), ttnn.bfloat8_b, device=mesh,
...                           mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(None, 1)))
>>> w.shape                                # per device; no memory is allocated
Shape([8192, 7168])

Public names only; the implementation is :mod:`ttjax._src.ttnn.abstract`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.abstract import (
    abstract_tensor as abstract_tensor,
)

_publish(globals(), "ttjax._src.ttnn.abstract")
