"""The mesh tensor: its data (a global JAX array) plus a frozen :class:`TensorSpec`.

The implementation of :mod:`ttjax.tensor`, whose docstring says more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

import jax
import numpy as np
from jax.experimental import multihost_utils

from ttjax._src.core import blockfloat as _blockfloat, capture as _capture, specs as _specs
from ttjax._src.core.enums import TILE_SIZE, DataType, Layout, StorageType
from ttjax._src.core.errors import (
    DeallocatedTensorError,
    DeviceClosedError,
    MeshMismatchError,
    ShapeMismatchError,
    ShapeTypeError,
    ShardingError,
    TTJaxError,
)
from ttjax._src.core.hardware import DRAM_MEMORY_CONFIG, MemoryConfig
from ttjax._src.core.mesh import MeshCoordinate, MeshCoordinateRange, MeshDevice, MeshShape
from ttjax._src.core.placements import Placement, PlacementReplicate, placements_str

_UNSET: Any = object()  # an argument not given to Tensor(...)


class Shape(Sequence[int]):
    """TT-NN's ``ttnn.Shape``: a sequence of ints that prints as ``Shape([1, 1, 32, 32])``.

    Like TT-NN's (a pybind class, ttnn/cpp/ttnn-pybind/types.cpp), it is neither a tuple nor a
    list: code that walks configs treats it as one value (deepseek_v3's ``run_config`` merges
    tuples element-wise but keeps a Shape whole). It indexes, iterates, compares equal to tuples
    and lists of the same ints, and slices (to a tuple) as model code uses it.

    >>> Shape([1, 32]) == (1, 32), isinstance(Shape([1, 32]), tuple)
    (True, False)
    """

    __slots__ = ("_dims",)

    def __init__(self, dims: Iterable[int] = ()) -> None:
        dims = tuple(dims)
        bad = [d for d in dims if isinstance(d, bool) or not isinstance(d, (int, np.integer))]
        if bad:  # pybind's SmallVector<uint32_t> conversion refuses None, floats, ...
            raise ShapeTypeError(
                f"ttnn.Shape({list(dims)}): every dim must be an int, got {bad[0]!r}.\n"
                "fix: pass a list or tuple of ints."
            )
        self._dims = tuple(int(d) for d in dims)

    def __repr__(self) -> str:
        return f"Shape({list(self._dims)})"

    __str__ = __repr__

    @property
    def rank(self) -> int:
        return len(self._dims)

    def __len__(self) -> int:
        return len(self._dims)

    def __iter__(self) -> Iterator[int]:
        return iter(self._dims)

    def __getitem__(self, index: Any) -> Any:
        # TT-NN's Shape is stored padded to rank 4 with leading ones: Shape([n])[-2] is 1.
        if isinstance(index, (int, np.integer)) and -4 <= index < -len(self._dims):
            return 1
        return self._dims[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Shape, list, tuple)):
            return self._dims == tuple(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self._dims)

    def __add__(self, other: Sequence[int]) -> tuple[int, ...]:
        return self._dims + tuple(other)

    def __radd__(self, other: Sequence[int]) -> tuple[int, ...]:
        return tuple(other) + self._dims

    def __reduce__(self) -> tuple[Any, ...]:
        return (Shape, (self._dims,))

    def with_tile_padding(self) -> Shape:
        return Shape(tile_padded(self._dims))

    def to_rank(self, new_rank: int) -> Shape:
        """TT-NN's ``Shape.to_rank``: leading ones added, or leading ones dropped."""
        extra = len(self._dims) - new_rank
        if extra > 0 and any(d != 1 for d in self._dims[:extra]):
            raise ShapeMismatchError(
                f"{self!r}.to_rank({new_rank}): Can't convert shape rank (dims {list(self._dims[:extra])}"
                " would be dropped).\nfix: a rank that keeps every dim above 1."
            )
        return Shape((1,) * max(-extra, 0) + self._dims[max(extra, 0) :])


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


@dataclasses.dataclass(frozen=True, slots=True)
class TensorSpec:
    """Everything about a tensor except its values: where it lives and how it is laid out.

    The spec is the tensor's pytree aux data, the key of the program cache and the signature a
    trace checks its inputs against. ``gen`` is the mesh's generation when the spec was made: a
    tensor made before its mesh was reshaped or closed no longer matches it.

    >>> TensorSpec(None, (), DataType.BFLOAT16, Layout.TILE, (32, 32), StorageType.HOST)
    TensorSpec(mesh=None, placements=(), dtype=DataType::BFLOAT16, layout=Layout::TILE,
               shape=(32, 32), storage=StorageType::HOST, gen=0)
    """

    mesh: MeshDevice | None
    placements: tuple[Placement, ...]
    dtype: DataType
    layout: Layout
    shape: tuple[int, ...]
    storage: StorageType
    memory_config: MemoryConfig = dataclasses.field(default=DRAM_MEMORY_CONFIG, repr=False)
    gen: int = dataclasses.field(init=False)
    _hash: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        gen = self.mesh._gen if self.mesh is not None else 0
        object.__setattr__(self, "gen", gen)
        fields = (
            self.mesh,
            self.placements,
            self.dtype,
            self.layout,
            self.shape,
            self.storage,
            self.memory_config,
            gen,
        )
        object.__setattr__(self, "_hash", hash(fields))

    def __hash__(self) -> int:
        return self._hash

    def replace(self, **changes: Any) -> TensorSpec:
        """A copy with some fields changed (``gen`` follows the mesh)."""
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        """``Shape([..]) DataType.X Layout.Y placements [..]``, for error messages."""
        return (
            f"{Shape(self.shape)!r} {self.dtype!r} {self.layout!r} placements "
            f"{placements_str(self.placements)}"
        )


class Tensor:
    """A TT-NN tensor: one shard per device of a mesh (``MeshTensor``), or a plain host tensor.

    A Tensor is its data plus its :class:`TensorSpec`. Build one with :func:`ttjax.from_torch`
    (or ``ttjax.zeros`` & co.), read it back with :func:`ttjax.to_torch` and a mesh composer.
    TT-NN's own constructors work too: ``Tensor(torch_tensor, dtype)``,
    ``Tensor([1.0, 2.0], [1, 2], dtype, layout)`` and ``Tensor(other)`` (see ``python_init``).
    """

    __slots__ = ("__weakref__", "_data", "_spec")

    _data: Any
    _spec: TensorSpec
    # TT-NN's Python constructor forms (ttnn-pybind/pytensor.cpp) convert host data, which lives
    # above the core: ttjax._src.ttnn.tensor_methods sets this to its overload resolver.
    python_init: ClassVar[Callable[..., Tensor] | None] = None

    def __init__(self, data: Any = _UNSET, spec: Any = _UNSET, *args: Any, **kwargs: Any) -> None:
        if isinstance(spec, TensorSpec) and not args and not kwargs:
            self._data = data
            self._spec = spec
            return
        given = tuple(a for a in (data, spec) if a is not _UNSET) + args
        if Tensor.python_init is None:
            raise TTJaxError(
                "Tensor(...) from Python data needs ttjax's TT-NN layer.\n"
                "fix: import ttjax (or use ttjax.from_torch)."
            )
        made = Tensor.python_init(*given, **kwargs)
        self._data = made._data
        self._spec = made._spec

    def assign(self, source: Tensor) -> Tensor:
        """Make this tensor hold ``source``'s data and spec, in place; returns this tensor.

        This is the one way to write into an existing tensor (``output_tensor=``, ``ttnn.copy``,
        refreshing trace inputs); an open trace capture is told, so a replay writes here too.
        """
        self._data = source._data
        self._spec = source._spec
        recorder = _capture.current()
        if recorder is not None:
            recorder.alias(source, self)
        return self

    # -- the spec's fields ---------------------------------------------------------------------

    @property
    def spec(self) -> TensorSpec:
        """Mesh, placements, dtype, layout, per-device shape and storage of this tensor."""
        return self._spec

    @property
    def _mesh(self) -> MeshDevice | None:
        return self._spec.mesh

    @property
    def _placements(self) -> tuple[Placement, ...]:
        return self._spec.placements

    @property
    def _dtype(self) -> DataType:
        return self._spec.dtype

    @property
    def _layout(self) -> Layout:
        return self._spec.layout

    @property
    def _shape(self) -> tuple[int, ...]:
        return self._spec.shape

    @property
    def _storage(self) -> StorageType:
        return self._spec.storage

    @property
    def _gen(self) -> int:
        return self._spec.gen

    # -- basic properties ------------------------------------------------------------------------

    @property
    def shape(self) -> Shape:
        """Per-device (logical) shape, as in TT-NN."""
        return Shape(self._spec.shape)

    def logical_shape(self) -> Shape:
        return Shape(self._spec.shape)

    @property
    def padded_shape(self) -> Shape:
        """Per-device shape with TILE padding (last two dims rounded up to 32 in TILE layout)."""
        shape = self._spec.shape
        return Shape(tile_padded(shape) if self._spec.layout is Layout.TILE else shape)

    @property
    def dtype(self) -> DataType:
        return self._spec.dtype

    def get_dtype(self) -> DataType:
        return self._spec.dtype

    @property
    def layout(self) -> Layout:
        return self._spec.layout

    def get_layout(self) -> Layout:
        return self._spec.layout

    @property
    def rank(self) -> int:
        return len(self._spec.shape)

    @property
    def ndim(self) -> int:
        return len(self._spec.shape)

    def storage_type(self) -> StorageType:
        return self._spec.storage

    def is_allocated(self) -> bool:
        return self._data is not None

    def memory_config(self) -> MemoryConfig:
        """The memory config this tensor was given (by ``from_torch``, an op's
        ``memory_config=``, ``to_memory_config``...); DRAM interleaved by default."""
        return self._spec.memory_config

    def is_sharded(self) -> bool:
        """Whether its memory config is height-, width- or block-sharded over cores."""
        return self._spec.memory_config.is_sharded()

    def shard_spec(self) -> Any:
        """The memory config's ShardSpec (None when interleaved)."""
        return self._spec.memory_config.shard_spec

    def buffer_type(self) -> Any:
        return self._spec.memory_config.buffer_type

    def deallocate(self, force: bool = False) -> None:
        """Free this tensor's buffers (TT-NN's ``Tensor.deallocate``); using it afterwards raises
        ``DeallocatedTensorError``. ttjax frees this tensor object's reference (tensors made
        from it by ops keep their own data), so ``force`` changes nothing here."""
        self._data = None

    def device(self) -> MeshDevice | None:
        """The mesh this tensor lives on (None for a host tensor)."""
        return self._spec.mesh if self._spec.storage is StorageType.DEVICE else None

    @property
    def mesh_device(self) -> MeshDevice | None:
        """The mesh this tensor is distributed over (also for a multi-shard host tensor)."""
        return self._spec.mesh

    @property
    def placements(self) -> tuple[Placement, ...]:
        """One placement per mesh axis."""
        return self._spec.placements

    @property
    def value(self) -> Any:
        """The global JAX array (``BlockFloatData`` for bfloat8_b/bfloat4_b; numpy on host)."""
        return self._data

    @property
    def sharding(self) -> jax.sharding.NamedSharding:
        """The ``NamedSharding`` of :attr:`value` on the mesh."""
        mesh = self._spec.mesh
        if mesh is None:
            raise ShardingError(
                f"Tensor.sharding: this host tensor ({self._spec.describe()}) is not on a mesh, "
                "so it has no NamedSharding.\nfix: place it first, e.g. "
                "ttnn.from_torch(x, device=mesh_device) or ttnn.to_device(t, mesh_device)."
            )
        spec = _specs.partition_spec(self._spec.placements, mesh.axis_names, self.rank)
        return jax.sharding.NamedSharding(mesh.jax_mesh, spec)

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

    def __len__(self) -> int:
        return self._shape[0] if self._shape else 0

    def __bool__(self) -> bool:
        # TT-NN's Tensor defines no __bool__, so every tensor is truthy (``if page_table:``
        # in tt-metal's model code tests "was one given").
        return True

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
        if is_traced(self):
            return (
                f"ttnn.Tensor(<traced>, shape={self.shape!r}, dtype={self._dtype!r}, "
                f"layout={self._layout!r}, placements={placements_str(self._placements)})"
            )
        blocks = host_blocks(self)
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


# ---------------------------------------------------------------------------------------------
# Liveness and reading data back to the host
# ---------------------------------------------------------------------------------------------


def is_traced(t: Tensor) -> bool:
    """Whether ``t`` holds a JAX tracer (it is an argument or result inside ``jax.jit``)."""
    return isinstance(_blockfloat.primary(t._data), jax.core.Tracer)


def deallocated_error(what: str, t: Tensor) -> DeallocatedTensorError:
    return DeallocatedTensorError(
        f"{what}: Operands need to be allocated in buffers on device! This tensor "
        f"({t._spec.describe()}) was deallocated (ttnn.deallocate / Tensor.deallocate).\n"
        "fix: deallocate a tensor only after its last use, or keep a reference that was not "
        "deallocated (ops return new tensors)."
    )


def check_live(t: Tensor, what: str) -> None:
    """A device tensor whose mesh was closed (or reshaped since), or that was deallocated, has no
    readable buffers."""
    if t._data is None:
        raise deallocated_error(what, t)
    spec = t._spec
    mesh = spec.mesh
    if mesh is None or spec.storage is not StorageType.DEVICE or spec.gen == mesh._gen:
        return
    if is_traced(t):
        return
    if mesh._closed:
        raise DeviceClosedError(
            f"{what}: the tensor lives on {mesh!r}, which was closed.\n"
            "fix: read tensors back (ttnn.to_torch / ttnn.from_device) before "
            "ttnn.close_mesh_device, or re-create the tensor on an open mesh."
        )
    raise MeshMismatchError(
        f"{what}: the tensor was created before {mesh!r} was reshaped, so its shards no longer "
        "match the mesh.\nfix: read it back before mesh_device.reshape(...), or re-create it."
    )


def fetch(x: Any) -> np.ndarray:
    """A JAX (or numpy) array as numpy; refuses tracers, whose values do not exist yet."""
    if isinstance(x, jax.core.Tracer):
        raise TTJaxError(
            "Cannot read a tensor back to the host inside jax.jit (its values are not computed yet).\n"
            "fix: return the tensor from the jitted function and convert it outside."
        )
    if isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated:
        # A multi-process big mesh: every rank gathers the global array (a collective).
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def host_blocks(t: Tensor) -> np.ndarray:
    """Every device's logical local tensor, as one numpy array of shape ``mesh_shape + shape``."""
    spec = t._spec
    if spec.mesh is None:
        return fetch(t._data)
    mesh_shape = tuple(spec.mesh.shape)
    pl, shape = spec.placements, spec.shape
    if spec.storage is StorageType.HOST:
        return _specs.local_blocks(np, t._data, pl, mesh_shape, shape)
    if spec.dtype.is_block_float:
        m_shape, e_shape = _blockfloat.storage_shapes(spec.dtype, shape)
        mant = _specs.local_blocks(np, fetch(t._data.mantissa), pl, mesh_shape, m_shape)
        exp = _specs.local_blocks(np, fetch(t._data.exponent), pl, mesh_shape, e_shape)
        data = _blockfloat.BlockFloatData(mant, exp)
        return _blockfloat.decode(np, data, spec.dtype, mesh_shape + shape)
    return _specs.local_blocks(np, fetch(t._data), pl, mesh_shape, shape)


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


def _flatten(t: Tensor) -> tuple[tuple[Any], TensorSpec]:
    return (t._data,), t._spec


def _unflatten(spec: TensorSpec, children: Sequence[Any]) -> Tensor:
    t = object.__new__(Tensor)
    t._data = children[0]
    t._spec = spec
    return t


jax.tree_util.register_pytree_node(Tensor, _flatten, _unflatten)


__all__ = [
    "Shape",
    "Tensor",
    "TensorSpec",
    "TensorTopology",
    "check_live",
    "deallocated_error",
    "fetch",
    "host_blocks",
    "is_traced",
    "tile_padded",
]
