"""The mesh tensor: its data (a global JAX array) plus a frozen :class:`TensorSpec`.

``tensor.shape`` is the per-device shape, as in TT-NN. The global array (``tensor.value``) is
what ``NamedSharding(mesh.jax_mesh, spec_from(placements))`` splits into each device's TT-NN
local tensor (see ``ttjax._src.core.specs``). Tensors are JAX pytrees whose aux data is the spec, so
functions of them can be jitted. This module imports nothing above the mesh: the operators and
conversion methods (``t + u``, ``t.to_torch()``) are attached by ``ttjax._src.ttnn.tensor_methods``.

>>> from ttjax.enums import DataType, Layout, StorageType
>>> spec = TensorSpec(None, (), DataType.FLOAT32, Layout.ROW_MAJOR, (2,), StorageType.HOST)
>>> Tensor(np.zeros(2, np.float32), spec).shape
Shape([2])

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
