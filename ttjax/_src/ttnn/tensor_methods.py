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
from collections.abc import Sequence
from typing import Any

import numpy as np

from ttjax._src.core import coresets as _coresets
from ttjax._src.core.enums import DataType, Layout, StorageType
from ttjax._src.core.errors import ShapeMismatchError, TTJaxError, UnsupportedDTypeError
from ttjax._src.core.hardware import MemoryConfig, Tile
from ttjax._src.core.host import is_torch, to_host_array
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


def _volume(self: Tensor) -> int:
    """TT-NN's ``Tensor.volume()``: the physical volume, tile padding included (pytensor.cpp)."""
    return int(np.prod(self.padded_shape, dtype=np.int64))


def _logical_volume(self: Tensor) -> int:
    return int(np.prod(self._shape, dtype=np.int64))


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
    "volume": _volume,
    "logical_volume": _logical_volume,
    "buffer_address": _buffer_address,
}


# ---------------------------------------------------------------------------------------------
# TT-NN's Python constructors (ttnn-pybind/pytensor.cpp)
# ---------------------------------------------------------------------------------------------

# parse_py_tensor: the element type a torch / numpy array gets when no data_type is given
_TORCH_DEFAULT = {
    "float32": DataType.FLOAT32, "float16": DataType.BFLOAT16, "bfloat16": DataType.BFLOAT16,
    "int64": DataType.UINT32, "int32": DataType.INT32, "int16": DataType.UINT16,
    "uint8": DataType.UINT8,
}  # fmt: skip
_NUMPY_DEFAULT = {
    "float32": DataType.FLOAT32, "int64": DataType.UINT32, "int32": DataType.INT32,
    "int16": DataType.UINT16, "uint8": DataType.UINT8,
}  # fmt: skip
# ... and the container it is cast to before its bytes are read as that type
_CONTAINER = {
    DataType.UINT8: "uint8", DataType.UINT16: "int16", DataType.INT32: "int32",
    DataType.UINT32: "int32", DataType.FLOAT32: "float32", DataType.BFLOAT8_B: "float32",
    DataType.BFLOAT4_B: "float32", DataType.BFLOAT16: "bfloat16",
}  # fmt: skip
_REINTERPRET = {DataType.UINT16: np.uint16, DataType.UINT32: np.uint32}


def _unsupported(dtype: Any, what: str, fix: str = "") -> UnsupportedDTypeError:
    return UnsupportedDTypeError(
        f"ttnn.Tensor({what}): Unsupported DataType: {dtype!r}.\n"
        + (fix or "fix: pass data_type= (e.g. ttnn.bfloat16 or ttnn.float32), or convert the "
           "array to float32 / int32 first.")
    )  # fmt: skip


def _python_array(tensor: Any, data_type: DataType | None) -> tuple[np.ndarray, DataType]:
    """``parse_py_tensor``: the array cast (torch's ``.to`` / numpy's ``astype``) to the
    container of its TT-NN type, whose bytes the tensor then holds (int16 as UINT16, ...)."""
    if data_type is not None and not isinstance(data_type, DataType):
        raise _unsupported(data_type, "tensor, data_type")
    if is_torch(tensor):
        import torch

        name = str(tensor.dtype).removeprefix("torch.")
        dt = data_type or _TORCH_DEFAULT.get(name)
        if dt is None:
            raise _unsupported(tensor.dtype, f"torch.{name} tensor")
        arr = to_host_array(tensor.contiguous().to(getattr(torch, _CONTAINER[dt])))
    elif isinstance(tensor, np.ndarray):
        dt = data_type or _NUMPY_DEFAULT.get(tensor.dtype.name)
        if dt is None or dt is DataType.BFLOAT16:  # TT-NN's numpy path has no bfloat16 case
            raise _unsupported(
                dt or tensor.dtype, f"numpy.{tensor.dtype.name} array",
                "fix: TT-NN converts numpy arrays to float32, int32, uint32, uint16, uint8 and "
                "block floats only; pass torch.from_numpy(array) for bfloat16, or data_type=.",
            )  # fmt: skip
        arr = np.ascontiguousarray(tensor).astype(_CONTAINER[dt], copy=False)
    else:
        raise TTJaxError(
            f"ttnn.Tensor({type(tensor).__name__}): The argument must be of type torch.Tensor or "
            "numpy.ndarray!\nfix: pass a torch tensor or numpy array, or a flat list with its "
            "shape, data_type and layout: ttnn.Tensor([1.0, 2.0], [1, 2], ttnn.float32, "
            "ttnn.ROW_MAJOR_LAYOUT)."
        )
    kind = _REINTERPRET.get(dt)
    return (arr.view(kind) if kind is not None else arr), dt


def _from_list(data: Sequence[Any], shape: Any, data_type: Any, layout: Any, *rest: Any,
               **kwargs: Any) -> Tensor:  # fmt: skip
    """The three ``std::vector`` overloads: ``(data, shape, data_type, layout[, device]
    [, memory_config][, tile][, pad_value])``; a list of ints is read as int32, any other as
    float32 (pybind tries the float overload without conversion first), then converted to
    ``data_type`` (``Tensor::from_vector``)."""
    opts: dict[str, Any] = {"device": None, "memory_config": None, "tile": None, "pad_value": None}
    for value in rest:  # pybind picks the overload by the types given
        slot = next((k for k, t in (("device", MeshDevice), ("memory_config", MemoryConfig),
                                    ("tile", Tile), ("pad_value", (int, float)))
                     if isinstance(value, t)), None)  # fmt: skip
        if slot is None and value is not None:
            raise TTJaxError(
                f"ttnn.Tensor(data, shape, data_type, layout, ...): {value!r} is not a device, "
                "memory config, tile or pad value.\nfix: ttnn.Tensor(data, shape, data_type, "
                "layout, device=None, memory_config=..., tile=None, pad_value=0)."
            )
        if slot is not None:
            opts[slot] = value
    unknown = set(kwargs) - set(opts)
    if unknown:
        raise TTJaxError(
            f"ttnn.Tensor(data, shape, ...) got unexpected keyword(s) {sorted(unknown)}.\n"
            f"fix: use only {sorted(opts)}."
        )
    opts.update(kwargs)
    dims = tuple(int(d) for d in shape)
    values = list(data)
    ints = all(isinstance(v, (int, np.integer)) for v in values)
    arr = np.asarray(values, np.int32 if ints and _fits_int32(values) else np.float32)
    if arr.ndim != 1 or arr.size != int(np.prod(dims, dtype=np.int64)):
        raise ShapeMismatchError(
            f"ttnn.Tensor: Current buffer size is {arr.size} different from shape volume "
            f"{int(np.prod(dims, dtype=np.int64))} (shape {list(dims)}).\n"
            "fix: give a flat list with as many values as the shape holds."
        )
    if not isinstance(data_type, DataType):
        raise _unsupported(data_type, "data, shape, data_type, layout")
    if data_type.is_block_float and layout is not Layout.TILE:
        raise TTJaxError(
            f"ttnn.Tensor: Block float types are only supported in TILE layout (got {layout!r}).\n"
            "fix: pass ttnn.TILE_LAYOUT for bfloat8_b / bfloat4_b."
        )
    out = convert.from_torch(arr.reshape(dims), data_type, layout=layout, wrap_integers=True,
                             **{k: v for k, v in opts.items() if v is not None})  # fmt: skip
    assert out is not None
    return out


def _fits_int32(values: Sequence[Any]) -> bool:
    info = np.iinfo(np.int32)
    return all(info.min <= int(v) <= info.max for v in values)


def python_init(tensor: Any, *args: Any, **kwargs: Any) -> Tensor:
    """``ttnn.Tensor(...)``'s overloads, in the binding's order: a flat list with its shape,
    data_type and layout; another Tensor (shares its data); a torch tensor or numpy array with
    ``(data_type=None, device=None, layout=None, mem_config=None, tile=None, cq_id=None,
    pad_value=None, mesh_mapper=None)``: a host tensor unless a device is given, ROW_MAJOR
    unless a layout is (TILE for block floats), its type from the array's unless given.

    >>> ttnn.Tensor(torch.tensor([1.5, -2.0]), ttnn.bfloat16).to_torch()
    tensor([ 1.5000, -2.0000], dtype=torch.bfloat16)
    """
    if isinstance(tensor, (list, tuple)):
        return _from_list(tensor, *args, **kwargs)
    if isinstance(tensor, Tensor):
        if args or kwargs:
            raise TTJaxError(
                "ttnn.Tensor(tensor) copies a Tensor's handle and takes nothing else.\n"
                "fix: ttnn.Tensor(t), then convert it (t.to(layout), ttnn.typecast, ...)."
            )
        return Tensor(tensor._data, tensor._spec)
    names = ("data_type", "device", "layout", "mem_config", "tile", "cq_id", "pad_value",
             "mesh_mapper")  # fmt: skip
    if len(args) > len(names) or set(kwargs) - set(names):
        raise TTJaxError(
            f"ttnn.Tensor(tensor, ...) got {len(args)} more arguments and keywords "
            f"{sorted(kwargs)}.\nfix: ttnn.Tensor(tensor, data_type=None, device=None, "
            "layout=None, mem_config=None, tile=None, cq_id=None, pad_value=None, mesh_mapper=None)."
        )
    opts = dict(zip(names, args)) | kwargs
    arr, dt = _python_array(tensor, opts.get("data_type"))
    out = convert.from_torch(
        arr, dt, layout=opts.get("layout"), device=opts.get("device"),
        memory_config=opts.get("mem_config"), tile=opts.get("tile"),
        pad_value=opts.get("pad_value"), mesh_mapper=opts.get("mesh_mapper"), wrap_integers=True,
    )  # fmt: skip
    assert out is not None
    return out


def attach() -> None:
    """Set every method above on ``Tensor`` and its TT-NN constructors (idempotent)."""
    for name, fn in METHODS.items():
        setattr(Tensor, name, fn)
    Tensor.python_init = python_init
    _coresets.attach()  # CoreRangeSet.subtract / merge_ranges


attach()

__all__ = ["METHODS", "attach", "python_init"]
