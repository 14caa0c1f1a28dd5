"""The mesh tensor: a global JAX array laid out with ``NamedSharding``, plus per-axis placements.

``tensor.shape`` is the per-device shape, as in TT-NN. The global array (``tensor.value``) is
what ``NamedSharding(mesh.jax_mesh, spec_from(placements))`` splits into each device's TT-NN
local tensor (see ``ttjax._specs``). Tensors are JAX pytrees, so functions of them can be jitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from ttjax import _blockfloat, _specs
from ttjax.enums import TILE_SIZE, DataType, Layout, StorageType
from ttjax.placements import Placement, PlacementReplicate, placements_str

if TYPE_CHECKING:
    from ttjax.mesh import MeshDevice


class Shape(tuple):
    """TT-NN's ``ttnn.Shape``: a tuple of ints that prints as ``Shape([1, 1, 32, 32])``."""

    def __new__(cls, dims: Iterable[int] = ()) -> Shape:
        return super().__new__(cls, (int(d) for d in dims))

    def __repr__(self) -> str:
        return f"Shape({list(self)})"

    __str__ = __repr__

    @property
    def rank(self) -> int:
        return len(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            other = tuple(other)
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__

    def with_tile_padding(self) -> Shape:
        return Shape(tile_padded(self))


def tile_padded(shape: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with its last two dims rounded up to multiples of 32."""
    s = list(shape)
    for k in (-1, -2):
        if len(s) >= -k:
            s[k] = -(-s[k] // TILE_SIZE) * TILE_SIZE
    return tuple(s)


class TensorTopology:
    """How a tensor is spread over its mesh: distribution shape, placements, device coordinates."""

    def __init__(self, mesh_shape: Any, placements: tuple[Placement, ...]) -> None:
        from ttjax.mesh import MeshCoordinate, MeshCoordinateRange, MeshShape

        self._shape = MeshShape(mesh_shape)
        self._placements = placements
        self._coords = [MeshCoordinate(c) for c in MeshCoordinateRange(self._shape)]

    def distribution_shape(self) -> Any:
        return self._shape

    def placements(self) -> list[Placement]:
        return list(self._placements)

    def mesh_coords(self) -> list[Any]:
        return list(self._coords)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TensorTopology)
            and self._shape == other._shape
            and self._placements == other._placements
        )

    def __hash__(self) -> int:
        return hash((self._shape, self._placements))

    def __repr__(self) -> str:
        return (
            f"TensorTopology(distribution_shape={self._shape!r}, "
            f"placements={list(self._placements)!r})"
        )


class Tensor:
    """A TT-NN tensor: one shard per device of a mesh (``MeshTensor``), or a plain host tensor.

    Build with :func:`ttjax.from_torch` (or ``ttjax.zeros`` & co.), read back with
    :func:`ttjax.to_torch` and a mesh composer.
    """

    __slots__ = (
        "__weakref__",
        "_data",
        "_dtype",
        "_gen",
        "_layout",
        "_mesh",
        "_placements",
        "_shape",
        "_storage",
    )

    _data: Any
    _mesh: MeshDevice | None
    _placements: tuple[Placement, ...]
    _dtype: DataType
    _layout: Layout
    _shape: tuple[int, ...]
    _storage: StorageType
    _gen: int

    # -- basic properties ------------------------------------------------------------------------

    @property
    def shape(self) -> Shape:
        """Per-device (logical) shape, as in TT-NN."""
        return Shape(self._shape)

    def logical_shape(self) -> Shape:
        return Shape(self._shape)

    @property
    def padded_shape(self) -> Shape:
        """Per-device shape with TILE padding (last two dims rounded up to 32 in TILE layout)."""
        return Shape(tile_padded(self._shape) if self._layout is Layout.TILE else self._shape)

    @property
    def dtype(self) -> DataType:
        return self._dtype

    def get_dtype(self) -> DataType:
        return self._dtype

    @property
    def layout(self) -> Layout:
        return self._layout

    def get_layout(self) -> Layout:
        return self._layout

    @property
    def rank(self) -> int:
        return len(self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def storage_type(self) -> StorageType:
        return self._storage

    def is_allocated(self) -> bool:
        return self._data is not None

    def device(self) -> MeshDevice | None:
        """The mesh this tensor lives on (None for a host tensor)."""
        return self._mesh if self._storage is StorageType.DEVICE else None

    @property
    def mesh_device(self) -> MeshDevice | None:
        """The mesh this tensor is distributed over (also for a multi-shard host tensor)."""
        return self._mesh

    @property
    def placements(self) -> tuple[Placement, ...]:
        """One placement per mesh axis."""
        return self._placements

    @property
    def value(self) -> Any:
        """The global JAX array (``BlockFloatData`` for bfloat8_b/bfloat4_b; numpy on host)."""
        return self._data

    @property
    def sharding(self) -> jax.sharding.NamedSharding:
        """The ``NamedSharding`` of :attr:`value` on the mesh."""
        assert self._mesh is not None
        spec = _specs.partition_spec(self._placements, self._mesh.axis_names, len(self._shape))
        return jax.sharding.NamedSharding(self._mesh.jax_mesh, spec)

    def tensor_topology(self) -> TensorTopology:
        shape = self._mesh.shape if self._mesh is not None else (1,)
        return TensorTopology(shape, self._placements or (PlacementReplicate(),))

    @property
    def num_shards(self) -> int:
        return self._mesh.get_num_devices() if self._mesh is not None else 1

    def nbytes_per_device(self) -> int:
        """Bytes one device holds for this tensor (block floats at their packed size)."""
        if self._dtype.is_block_float:
            shapes = _blockfloat.storage_shapes(self._dtype, self._shape)
            return int(sum(np.prod(s) for s in shapes))
        shape = tile_padded(self._shape) if self._layout is Layout.TILE else self._shape
        return int(np.prod(shape) * self._dtype.itemsize)

    # -- conversions (thin wrappers over ttjax.convert) ----------------------------------------------

    def to(self, device: MeshDevice, memory_config: Any = None) -> Tensor:
        from ttjax.convert import to_device

        return to_device(self, device, memory_config)

    def cpu(self, blocking: bool = True) -> Tensor:
        from ttjax.convert import from_device

        return from_device(self)

    def to_torch(self, mesh_composer: Any = None) -> Any:
        from ttjax.convert import to_torch

        return to_torch(self, mesh_composer=mesh_composer)

    def to_numpy(self, mesh_composer: Any = None) -> np.ndarray:
        from ttjax.convert import to_numpy

        return to_numpy(self, mesh_composer=mesh_composer)

    def numpy(self) -> np.ndarray:
        return self.to_numpy()

    def item(self) -> Any:
        arr = self.to_numpy()
        if arr.size != 1:
            from ttjax.errors import ShapeMismatchError

            raise ShapeMismatchError(
                f"item() needs a one-element tensor; this one has shape {self.shape!r}.\n"
                "fix: reduce it first, e.g. ttnn.sum(t)."
            )
        return arr.reshape(()).item()

    def to_layout(self, layout: Layout, **kwargs: Any) -> Tensor:
        from ttjax.ops import to_layout

        return to_layout(self, layout, **kwargs)

    def reshape(self, *shape: Any) -> Tensor:
        from ttjax.ops import reshape

        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        return reshape(self, shape)

    def permute(self, *dims: Any) -> Tensor:
        from ttjax.ops import permute

        if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
            dims = tuple(dims[0])
        return permute(self, dims)

    # -- operators ---------------------------------------------------------------------------------

    def __add__(self, other: Any) -> Tensor:
        from ttjax.ops import add

        return add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        from ttjax.ops import add

        return add(self, other)

    def __sub__(self, other: Any) -> Tensor:
        from ttjax.ops import subtract

        return subtract(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        from ttjax.ops import rsub

        return rsub(self, other)

    def __mul__(self, other: Any) -> Tensor:
        from ttjax.ops import multiply

        return multiply(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        from ttjax.ops import multiply

        return multiply(self, other)

    def __truediv__(self, other: Any) -> Tensor:
        from ttjax.ops import divide

        return divide(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        from ttjax.ops import divide

        return divide(other, self)

    def __neg__(self) -> Tensor:
        from ttjax.ops import neg

        return neg(self)

    def __pow__(self, exponent: Any) -> Tensor:
        from ttjax.ops import pow as _pow

        return _pow(self, exponent)

    def __matmul__(self, other: Tensor) -> Tensor:
        from ttjax.ops import matmul

        return matmul(self, other)

    def __getitem__(self, index: Any) -> Tensor:
        from ttjax.ops import getitem

        return getitem(self, index)

    def __len__(self) -> int:
        return self._shape[0] if self._shape else 0

    def __bool__(self) -> bool:
        from ttjax.errors import TTJaxError

        raise TTJaxError(
            "The truth value of a ttjax Tensor is ambiguous (it lives on several devices).\n"
            "fix: read it back with ttnn.to_torch(t, mesh_composer=...) and test that."
        )

    # -- printing ----------------------------------------------------------------------------------

    def __repr__(self) -> str:
        try:
            return self._format()
        except Exception as e:  # repr must never raise (e.g. inside jit, on a closed mesh)
            return (
                f"ttnn.Tensor(<unreadable: {type(e).__name__}>, shape={self.shape!r}, "
                f"dtype={self._dtype!r}, layout={self._layout!r})"
            )

    def _format(self) -> str:
        if isinstance(self._data, jax.core.Tracer) or (
            isinstance(self._data, _blockfloat.BlockFloatData)
            and isinstance(self._data.mantissa, jax.core.Tracer)
        ):
            return (
                f"ttnn.Tensor(<traced>, shape={self.shape!r}, dtype={self._dtype!r}, "
                f"layout={self._layout!r}, placements={placements_str(self._placements)})"
            )
        from ttjax.convert import _host_blocks

        blocks = _host_blocks(self)
        if self._mesh is None:
            return _format_shard(blocks.reshape(self._shape), self)
        ids = self._mesh.get_device_ids()
        flat = blocks.reshape((-1, *self._shape))
        parts = []
        for i, block in enumerate(flat):
            if self._storage is StorageType.DEVICE:
                parts.append(f"device_id:{ids[i]}")
            parts.append(_format_shard(block, self))
        return "\n".join(parts)

    __str__ = __repr__


def _format_shard(arr: np.ndarray, t: Tensor) -> str:
    prefix = "ttnn.Tensor("
    if arr.dtype.kind == "f" or arr.dtype == np.dtype("bfloat16"):
        body = np.array2string(
            np.asarray(arr, np.float32),
            precision=5,
            floatmode="fixed",
            separator=", ",
            threshold=64,
            edgeitems=2,
            prefix=prefix,
            suppress_small=False,
            sign=" ",
        )
    else:
        body = np.array2string(arr, separator=", ", threshold=64, edgeitems=2, prefix=prefix)
    return f"{prefix}{body}, shape={Shape(arr.shape)!r}, dtype={t._dtype!r}, layout={t._layout!r})"


def make_tensor(
    data: Any,
    *,
    mesh: MeshDevice | None,
    placements: tuple[Placement, ...],
    dtype: DataType,
    layout: Layout,
    shape: tuple[int, ...],
    storage: StorageType,
) -> Tensor:
    """Build a Tensor from its parts (no validation; callers own the invariants)."""
    t = object.__new__(Tensor)
    t._data = data
    t._mesh = mesh
    t._placements = placements
    t._dtype = dtype
    t._layout = layout
    t._shape = shape
    t._storage = storage
    t._gen = mesh._gen if mesh is not None else 0
    return t


def _flatten(t: Tensor) -> tuple[tuple[Any], tuple[Any, ...]]:
    return (t._data,), (t._mesh, t._placements, t._dtype, t._layout, t._shape, t._storage, t._gen)


def _unflatten(aux: tuple[Any, ...], children: Sequence[Any]) -> Tensor:
    t = object.__new__(Tensor)
    t._data = children[0]
    t._mesh, t._placements, t._dtype, t._layout, t._shape, t._storage, t._gen = aux
    return t


jax.tree_util.register_pytree_node(Tensor, _flatten, _unflatten)


__all__ = ["Shape", "Tensor", "TensorTopology", "make_tensor", "tile_padded"]
