"""Tensor's operators and conversion methods, attached from above (as JAX attaches jax.Array's).

``ttjax.tensor`` sits below the ops and host conversion that these methods call, so it cannot
import them; this module imports both and sets the methods on :class:`~ttjax.tensor.Tensor` once,
when ``ttjax`` is imported.

>>> import ttjax as ttnn
>>> device = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
>>> t = ttnn.from_torch(np.arange(3, dtype=np.float32), device=device)
>>> (t * 2 + 1).to_numpy()
array([1., 3., 5.], dtype=float32)
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import numpy as np

from ttjax._src.core.enums import Layout, StorageType
from ttjax._src.core.errors import ShapeMismatchError, TTJaxError
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import convert, ops


def _to(
    self: Tensor,
    device: MeshDevice | Layout | None = None,
    mem_config: Any = None,
    cq_id: int | None = None,
    *,
    memory_config: Any = None,
    target_layout: Layout | None = None,
) -> Tensor:
    """``t.to(mesh_device, mem_config=None, cq_id=None)`` moves it to the mesh;
    ``t.to(target_layout)`` converts its layout (TT-NN's two overloads, with the binding's
    argument names and order, ``ttnn-pybind/pytensor.cpp``: on the host, or through
    ``ttnn.to_layout`` for a device tensor). ``memory_config=`` is ttjax's spelling of
    ``mem_config``; ``cq_id`` names the queue, and ttjax's writes already follow dispatch order."""
    memory_config = mem_config if memory_config is None else memory_config
    if target_layout is not None:
        if device is not None:
            raise TTJaxError(
                f"Tensor.to got both a device ({device!r}) and target_layout={target_layout!r}.\n"
                "fix: move it and change its layout in two calls: t.to(mesh).to(layout)."
            )
        device = target_layout
    if isinstance(device, Layout):
        if self._storage is StorageType.HOST:
            return convert.host_to_layout(self, device)
        return ops.to_layout(self, device, memory_config=memory_config)
    if device is None:
        raise TTJaxError(
            "Tensor.to needs a mesh device or a layout.\n"
            "fix: t.to(mesh_device[, mem_config]) or t.to(ttnn.TILE_LAYOUT)."
        )
    return convert.to_device(self, device, memory_config)


def _cpu(self: Tensor, blocking: bool = True, cq_id: int | None = None) -> Tensor:
    """``t.cpu(blocking=True, cq_id=None)``: TT-NN's binding (``ttnn-pybind/pytensor.cpp``)
    takes the command queue to read through; ttjax's reads already follow dispatch order."""
    return convert.from_device(self, blocking=blocking)


def _to_torch(self: Tensor, mesh_composer: Any = None) -> Any:
    return convert.to_torch(self, mesh_composer=mesh_composer)


def _to_numpy(self: Tensor, mesh_composer: Any = None) -> np.ndarray:
    return convert.to_numpy(self, mesh_composer=mesh_composer)


def _numpy(self: Tensor) -> np.ndarray:
    return convert.to_numpy(self)


def _item(self: Tensor) -> Any:
    arr = convert.to_numpy(self)
    if arr.size != 1:
        raise ShapeMismatchError(
            f"item() needs a one-element tensor; this one has shape {self.shape!r}.\n"
            "fix: reduce it first, e.g. ttnn.sum(t)."
        )
    return arr.reshape(()).item()


def _to_layout(self: Tensor, layout: Any, **kwargs: Any) -> Tensor:
    return ops.to_layout(self, layout, **kwargs)


def _reshape(self: Tensor, *shape: Any) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    return ops.reshape(self, shape)


def _permute(self: Tensor, *dims: Any) -> Tensor:
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    return ops.permute(self, dims)


def _add(self: Tensor, other: Any) -> Tensor:
    return ops.add(self, other)


def _sub(self: Tensor, other: Any) -> Tensor:
    return ops.subtract(self, other)


def _rsub(self: Tensor, other: Any) -> Tensor:
    return ops.rsub(self, other)


def _mul(self: Tensor, other: Any) -> Tensor:
    return ops.multiply(self, other)


def _truediv(self: Tensor, other: Any) -> Tensor:
    return ops.divide(self, other)


def _rtruediv(self: Tensor, other: Any) -> Tensor:
    return ops.divide(other, self)


def _neg(self: Tensor) -> Tensor:
    return ops.neg(self)


def _pow(self: Tensor, exponent: Any) -> Tensor:
    return ops.pow(self, exponent)


def _matmul(self: Tensor, other: Tensor) -> Tensor:
    return ops.matmul(self, other)


def _getitem(self: Tensor, index: Any) -> Tensor:
    return ops.getitem(self, index)


# Stand-in DRAM buffer addresses, one per tensor (page-aligned, 32-bit like TT-Metal's).
_ADDRESSES: weakref.WeakKeyDictionary[Tensor, int] = weakref.WeakKeyDictionary()
_NEXT_ADDRESS = itertools.count(0x10000, 0x1000)


def _buffer_address(self: Tensor) -> int:
    """A stable, distinct number for this tensor's buffer (TT-NN's ``Tensor.buffer_address()``,
    its DRAM address): what the Galaxy prefetcher's address table records. ttjax has no DRAM
    allocator; the addresses only need to be distinct and fixed per tensor."""
    if self._storage is not StorageType.DEVICE:
        raise ShapeMismatchError(
            "buffer_address: the tensor is on the host, so it has no device buffer.\n"
            "fix: move it to the mesh first (ttnn.to_device / from_torch(device=mesh))."
        )
    if self not in _ADDRESSES:
        _ADDRESSES[self] = next(_NEXT_ADDRESS) & 0xFFFFFFFF
    return _ADDRESSES[self]


METHODS = {
    "to": _to,
    "cpu": _cpu,
    "to_torch": _to_torch,
    "to_numpy": _to_numpy,
    "numpy": _numpy,
    "item": _item,
    "to_layout": _to_layout,
    "reshape": _reshape,
    "permute": _permute,
    "__add__": _add,
    "__radd__": _add,
    "__sub__": _sub,
    "__rsub__": _rsub,
    "__mul__": _mul,
    "__rmul__": _mul,
    "__truediv__": _truediv,
    "__rtruediv__": _rtruediv,
    "__neg__": _neg,
    "__pow__": _pow,
    "__matmul__": _matmul,
    "__getitem__": _getitem,
    "buffer_address": _buffer_address,
}


def attach() -> None:
    """Set every method above on ``Tensor`` (idempotent)."""
    for name, fn in METHODS.items():
        setattr(Tensor, name, fn)


attach()

__all__ = ["METHODS", "attach"]
