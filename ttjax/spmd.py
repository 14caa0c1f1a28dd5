"""torch-xla's SPMD annotations (``torch_xla.distributed.spmd``) on ``jax.sharding``.

Annotate tensors with a partition spec over a named device mesh and let XLA insert the
collectives (GSPMD), instead of writing them as TT-NN's CCL calls:

>>> import ttjax.spmd as xs
>>> mesh = xs.Mesh(np.arange(8), (1, 8), ("batch", "model"))
>>> w = xs.mark_sharding(w, mesh, ("model", None))     # column-parallel weight
>>> y = jax.jit(lambda w, x: x @ w.T)(w, x)            # XLA adds the all-gather / all-reduce

Entries of a partition spec are mesh-axis names, integer mesh-axis indices, ``None``
(replicated) or tuples of those (one tensor dim over several mesh axes); as in torch-xla the spec
has exactly one entry per tensor dim, and a mesh built without ``axis_names`` takes indices only.
A dim that does not divide by its mesh axes is sharded unevenly, as torch-xla and XLA do: blocks of
``ceil(n / k)``, the last ones padded with zeros. Inside ``jax.jit`` XLA pads the shards and keeps
the logical shape; a concrete array comes back as an :class:`XLAShardedTensor` (a ``jax.Array``
cannot hold uneven shards), stored padded, whose ``local_shards`` are torch-xla's. On a concrete array
``mark_sharding`` places it (``NamedSharding``) and returns it; inside ``jax.jit`` it constrains
it (``with_sharding_constraint``). It also takes ttjax mesh tensors (returned with the matching
TT-NN placements), Flax ``nnx`` variables (updated in place, like torch-xla's in-place
annotation), and torch tensors / ``nn.Parameter``s on the JAX device (torchax, see
``ttjax.torchxla``): annotated in place too, and a parameter's gradient follows its sharding.
"""

from __future__ import annotations

import collections
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import AxisType, NamedSharding, PartitionSpec

import ttjax
from ttjax.errors import MeshMismatchError, MeshShapeError, ShardingError
from ttjax.mesh import available_devices
from ttjax.padded import PaddedStorage, blocks, padded_dim
from ttjax.placements import PlacementReplicate, PlacementShard
from ttjax.plan import ROLES, LogicalAxes, ParallelDims
from ttjax.tensor import Tensor

_state = threading.local()


def _ints(values: Any, what: str) -> tuple[int, ...]:
    if _torchax_tensor(values):  # a torch tensor on the JAX device
        values = values._elem
    try:
        out = tuple(int(v) for v in np.asarray(values).reshape(-1))
    except (TypeError, ValueError):
        raise MeshShapeError(
            f"spmd.Mesh: {what}={values!r} is not a sequence of ints.\nfix: e.g. {what}=(2, 4)."
        ) from None
    return out


class Mesh:
    """torch-xla's ``Mesh(device_ids, mesh_shape, axis_names)``: a logical grid of device ids.

    >>> mesh = Mesh(np.arange(8), (2, 4), ("batch", "model"))
    >>> mesh.shape()          # OrderedDict([('batch', 2), ('model', 4)])
    """

    def __init__(
        self,
        device_ids: Sequence[int] | np.ndarray,
        mesh_shape: Sequence[int],
        axis_names: Sequence[str] | None = None,
    ) -> None:
        """``axis_names=None`` keeps the axes unnamed (``axis_names is None``), as torch-xla does:
        partition specs then name mesh axes by index."""
        ids = _ints(device_ids, "device_ids")
        shape = _ints(mesh_shape, "mesh_shape")
        if any(s <= 0 for s in shape) or int(np.prod(shape)) != len(ids):
            raise MeshShapeError(
                f"spmd.Mesh: mesh_shape={shape} holds {int(np.prod(shape))} devices but "
                f"device_ids has {len(ids)}.\nfix: make the product of mesh_shape equal "
                f"len(device_ids), e.g. mesh_shape=(1, {len(ids)})."
            )
        if len(set(ids)) != len(ids):
            dups = sorted({i for i in ids if ids.count(i) > 1})
            raise MeshShapeError(
                f"spmd.Mesh: device_ids names {dups} more than once.\nfix: list each id once."
            )
        by_id = {d.id: d for d in available_devices()}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise MeshShapeError(
                f"spmd.Mesh: device ids {missing} do not exist; this process has "
                f"{len(by_id)} devices with ids {sorted(by_id)[:8]}{'...' if len(by_id) > 8 else ''}."
                "\nfix: use ids from ttjax.get_device_ids(), or raise TTJAX_NUM_DEVICES."
            )
        names = None if axis_names is None else tuple(axis_names)
        if names is not None and (len(names) != len(shape) or len(set(names)) != len(names)):
            raise MeshShapeError(
                f"spmd.Mesh: axis_names={names!r} must hold {len(shape)} distinct names, one per "
                f"dim of mesh_shape={shape}.\nfix: e.g. axis_names=('batch', 'model'), or leave "
                "it out (the axes are then named by index)."
            )
        self.device_ids = np.asarray(ids).reshape(shape)
        self.mesh_shape = shape
        self.axis_names: tuple[str, ...] | None = names
        # jax.sharding.Mesh needs names: unnamed axes get private ones, never shown to the user.
        self._jax_names = names if names is not None else tuple(f"_{i}" for i in range(len(shape)))
        devices = np.array([by_id[i] for i in ids], dtype=object).reshape(shape)
        self.jax_mesh = jax.sharding.Mesh(
            devices, self._jax_names, axis_types=(AxisType.Auto,) * len(shape)
        )

    def shape(self) -> collections.OrderedDict[Any, int]:
        """Axis name (or index, on an unnamed mesh) -> size, in mesh order."""
        keys = self.axis_names if self.axis_names is not None else range(len(self.mesh_shape))
        return collections.OrderedDict(zip(keys, self.mesh_shape))

    def _axis_size(self, jax_name: str) -> int:
        return self.mesh_shape[self._jax_names.index(jax_name)]

    def size(self) -> int:
        """Number of devices."""
        return int(self.device_ids.size)

    def get_logical_mesh(self) -> np.ndarray:
        """The device ids laid out in ``mesh_shape``."""
        return self.device_ids.copy()

    def get_axis_name_idx(self, name: str) -> int | None:
        """Mesh-axis index of ``name``; None when the mesh has no such axis (torch-xla's answer)."""
        if self.axis_names is None or name not in self.axis_names:
            return None
        return self.axis_names.index(name)

    @classmethod
    def from_mesh_device(cls, mesh_device: ttjax.MeshDevice) -> Mesh:
        """The spmd view of a ttjax ``MeshDevice`` (same devices, shape and axis names)."""
        return cls(
            mesh_device.get_device_ids(),
            tuple(mesh_device.shape),
            tuple(mesh_device.jax_mesh.axis_names),
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Mesh)
            and self.axis_names == other.axis_names
            and np.array_equal(self.device_ids, other.device_ids)
        )

    def __hash__(self) -> int:
        return hash((self.axis_names, self.device_ids.tobytes(), self.mesh_shape))

    def __repr__(self) -> str:
        return (
            f"Mesh(device_ids={self.device_ids.ravel().tolist()}, mesh_shape={self.mesh_shape}, "
            f"axis_names={self.axis_names})"
        )


def get_1d_mesh(axis_name: str | None = None) -> Mesh:
    """torch-xla's helper: every device of this process (or job) on one axis, named
    ``axis_name`` or unnamed.

    >>> get_1d_mesh("data").shape()     # OrderedDict([('data', 8)])
    """
    ids = [d.id for d in available_devices()]
    return Mesh(ids, (len(ids),), None if axis_name is None else (axis_name,))


def set_global_mesh(mesh: Mesh | None) -> None:
    """Make ``mesh`` the default of ``mark_sharding(..., mesh=None)`` in this thread."""
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ShardingError(
            f"set_global_mesh: expected an spmd.Mesh, got {type(mesh).__name__}.\n"
            "fix: build one with ttjax.spmd.Mesh(device_ids, mesh_shape, axis_names)."
        )
    _state.mesh = mesh


def get_global_mesh() -> Mesh | None:
    """The mesh set by :func:`set_global_mesh` (None if none)."""
    return getattr(_state, "mesh", None)


def _as_mesh(mesh: Any) -> Mesh:
    if mesh is None:
        mesh = get_global_mesh()
        if mesh is None:
            raise ShardingError(
                "mark_sharding: mesh=None and no global mesh is set.\n"
                "fix: pass a mesh, or call ttjax.spmd.set_global_mesh(mesh) first."
            )
    if isinstance(mesh, ttjax.MeshDevice):
        return Mesh.from_mesh_device(mesh)
    if not isinstance(mesh, Mesh):
        raise ShardingError(
            f"mark_sharding: mesh={mesh!r} is not an spmd.Mesh or ttjax.MeshDevice.\n"
            "fix: ttjax.spmd.Mesh(device_ids, mesh_shape, axis_names)."
        )
    return mesh


@dataclass(frozen=True)
class ShardingSpec:
    """A validated partition spec: mesh axis names per tensor dim (resolved from names/indices)."""

    dims: tuple[tuple[str, ...], ...]

    def partition_spec(self) -> PartitionSpec:
        return PartitionSpec(*(None if not a else (a[0] if len(a) == 1 else a) for a in self.dims))


def _axis(mesh: Mesh, entry: Any, spec: Any) -> str:
    """The jax mesh-axis name of one partition-spec entry (a name or an index)."""
    n = len(mesh.mesh_shape)
    if isinstance(entry, str):
        idx = mesh.get_axis_name_idx(entry)
        if idx is None:
            axes = "(its axes are unnamed)" if mesh.axis_names is None else str(mesh.axis_names)
            raise ShardingError(
                f"mark_sharding: axis name {entry!r} in partition spec {spec!r} is not in the "
                f"mesh's axes {axes}.\nfix: use "
                + (f"one of {mesh.axis_names} or " if mesh.axis_names is not None else "")
                + f"an index in 0..{n - 1}."
            )
        return mesh._jax_names[idx]
    if isinstance(entry, (int, np.integer)) and not isinstance(entry, bool):
        if not 0 <= int(entry) < n:
            raise ShardingError(
                f"mark_sharding: mesh-axis index {entry} in partition spec {spec!r} is out of "
                f"range for a {n}-D mesh {mesh.axis_names or mesh.mesh_shape}.\n"
                f"fix: use an index in 0..{n - 1}"
                + (" or an axis name." if mesh.axis_names is not None else ".")
            )
        return mesh._jax_names[int(entry)]
    raise ShardingError(
        f"mark_sharding: partition spec entry {entry!r} in {spec!r} is not an axis name, an "
        "index, None or a tuple of those.\nfix: e.g. ('model', None)."
    )


def resolve_spec(
    mesh: Mesh, partition_spec: Any, shape: Sequence[int], *, uneven: bool = False
) -> ShardingSpec:
    """Check ``partition_spec`` against ``mesh`` and a tensor ``shape``; jax axis names per dim.

    Raises ``ShardingError`` naming the bad entry (unknown axis, a spec whose length is not the
    rank, a mesh axis used twice, a dim that does not divide by its axes' size unless
    ``uneven``) and the fix.
    """
    spec = tuple(partition_spec) if isinstance(partition_spec, (tuple, list)) else None
    if spec is None:
        raise ShardingError(
            f"mark_sharding: partition_spec={partition_spec!r} is not a tuple.\n"
            "fix: one entry per tensor dim, e.g. ('model', None)."
        )
    rank = len(shape)
    if len(spec) != rank:
        raise ShardingError(
            f"mark_sharding: Partition spec length ({len(spec)}) should be equal to the input "
            f"rank ({rank}): partition spec {spec!r} has {len(spec)} entries but the tensor has "
            f"rank {rank} (shape {tuple(shape)}).\nfix: give exactly {rank} entries, one per "
            "dim (None replicates a dim)."
        )
    dims: list[tuple[str, ...]] = []
    used: dict[str, int] = {}
    for d, entry in enumerate((*spec, *([None] * (rank - len(spec))))):
        group = () if entry is None else entry if isinstance(entry, (tuple, list)) else (entry,)
        names = tuple(_axis(mesh, e, spec) for e in group if e is not None)
        for name in names:
            if name in used:
                raise ShardingError(
                    f"mark_sharding: mesh axis {name!r} shards both dim {used[name]} and dim {d} "
                    f"in {spec!r}.\nfix: use each mesh axis at most once."
                )
            used[name] = d
        n = int(np.prod([mesh._axis_size(a) for a in names], dtype=np.int64))
        if shape[d] % n and not uneven:
            raise ShardingError(
                f"mark_sharding: dim {d} of shape {tuple(shape)} has size {shape[d]}, which does "
                f"not divide by the size {n} of mesh axes {names} (partition spec {spec!r}); "
                "this tensor is one jax.Array of its own shape (a torch tensor on the JAX "
                "device, or a ttjax Tensor, which keeps TT-NN's even split), and a jax.Array "
                "cannot hold uneven shards.\n"
                f"fix: pad dim {d} to a multiple of {n}, replicate it (None), annotate inside "
                "jax.jit / torchxla.compile (XLA pads the shards, as torch-xla does), or mark "
                "a numpy/jax array (an XLAShardedTensor, stored padded)."
            )
        dims.append(names)
    return ShardingSpec(tuple(dims))


@dataclass
class XLAShard:
    """One device's shard, as torch-xla's ``XLAShard``: ``data`` is the device's block with its
    padding (a host copy), ``indices`` where the block lies in the global tensor (padding not
    counted; ``Ellipsis`` when replicated), ``replica_id`` its rank among the devices holding the
    same block (0 when tiled, the device's position when fully replicated)."""

    data: np.ndarray
    indices: Any
    shard_device: str
    replica_id: int

    @property
    def unpadded_data(self) -> np.ndarray:
        """``data`` without the padding."""
        if self.indices is Ellipsis:
            return self.data
        return self.data[tuple(slice(0, s.stop - s.start) for s in self.indices)]


def local_shards(x: Any) -> list[XLAShard]:
    """torch-xla's ``local_shards`` of a placed array (``jax.Array`` or
    :class:`XLAShardedTensor`): one :class:`XLAShard` per device, in device-id order.

    >>> [s.data.shape for s in local_shards(mark_sharding(np.arange(9.0), mesh8, (0,)))]
    [(2,), (2,), (2,), (2,), (2,), (2,), (2,), (2,)]      # the 5th holds [8, 0], the rest zeros
    """
    storage, shape = (x.storage, x.shape) if isinstance(x, XLAShardedTensor) else (x, np.shape(x))
    sharding = getattr(storage, "sharding", None)
    if _is_tracer(storage) or not isinstance(sharding, NamedSharding):
        raise ShardingError(
            f"local_shards: expected an array placed by mark_sharding, got {type(x).__name__}."
            "\nfix: call it on mark_sharding's result, outside jax.jit."
        )
    mesh, spec = sharding.mesh, sharding.spec
    names = list(mesh.axis_names)
    entries = [*spec, *[None] * (len(shape) - len(spec))]
    split = [() if e is None else (e,) if isinstance(e, str) else tuple(e) for e in entries]
    used = {a for axes in split for a in axes}
    rest = [a for a in names if a not in used]
    data = {s.device.id: s.data for s in storage.addressable_shards}
    out: list[tuple[int, XLAShard]] = []
    for coord in np.ndindex(*mesh.devices.shape):
        device: Any = mesh.devices[coord]
        at = dict(zip(names, coord))
        indices = []
        for n, axes in zip(shape, split):
            k, b = 1, 0
            for a in axes:  # major axis first
                k, b = k * mesh.shape[a], b * mesh.shape[a] + at[a]
            indices.append(blocks(int(n), k)[b] if axes else slice(0, int(n), 1))
        replica = 0
        for a in rest:
            replica = replica * mesh.shape[a] + at[a]
        block = np.asarray(data[device.id])
        out.append(
            (device.id, XLAShard(block, indices if used else Ellipsis, str(device), replica))
        )
    return [shard for _, shard in sorted(out, key=lambda p: p[0])]


class XLAShardedTensor(PaddedStorage):
    """``mark_sharding``'s result for a concrete array with a dim that does not divide by its
    mesh axes (torch-xla's name): stored as XLA stores uneven shards, the global array padded
    with zeros to ``ceil(n / k) * k`` along each split dim and split evenly (``storage``), with
    the logical ``shape``. A pytree, so ``jax.jit`` takes it sharded; inside a program it reads
    as the logical array (``x @ w``, ``jnp.asarray(w)``), which XLA partitions unevenly. The
    wrapper is :class:`ttjax.padded.PaddedStorage`, shared with ``ttjax.dist.PaddedArray``.

    >>> w = mark_sharding(np.ones((10, 8)), mesh, ("model", None))   # 10 rows over 4: 3, 3, 3, 1
    >>> w.shape, w.storage.shape, [s.data.shape for s in w.local_shards][:1]
    ((10, 8), (12, 8), [(3, 8)])
    """

    local_shards = property(local_shards)

    @property
    def global_tensor(self) -> Any:
        """The logical array (outside a program a replicated copy)."""
        return self.value


def _place_padded(x: Any, mesh: Mesh, spec: ShardingSpec) -> XLAShardedTensor:
    """A concrete array split unevenly: padded with zeros on the last blocks, placed evenly."""
    shape = tuple(np.shape(x))
    ways = [
        int(np.prod([mesh._axis_size(a) for a in names], dtype=np.int64)) for names in spec.dims
    ]
    pads = [(0, padded_dim(n, k) - n) for n, k in zip(shape, ways)]
    sharding = NamedSharding(mesh.jax_mesh, spec.partition_spec())
    storage = jax.jit(lambda a: jax.numpy.pad(a, pads), out_shardings=sharding)(x)
    return XLAShardedTensor(storage, shape, mesh.jax_mesh, spec.partition_spec())


def _is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def _place(x: Any, mesh: Mesh, spec: ShardingSpec) -> Any:
    sharding = NamedSharding(mesh.jax_mesh, spec.partition_spec())
    if _is_tracer(x):
        return jax.lax.with_sharding_constraint(x, sharding)
    shape = np.shape(x)
    for n, names in zip(shape, spec.dims):
        if n % int(np.prod([mesh._axis_size(a) for a in names], dtype=np.int64)):
            return _place_padded(x, mesh, spec)
    return jax.device_put(x, sharding)


def _mark_tensor(t: ttjax.Tensor, mesh: Any, partition_spec: Any) -> ttjax.Tensor:
    md = t.mesh_device
    if md is None:
        raise ShardingError(
            "mark_sharding: this ttjax Tensor is on the host.\n"
            "fix: put it on a mesh first (ttjax.from_torch(..., device=mesh_device))."
        )
    m = Mesh.from_mesh_device(md) if mesh is None or mesh is md else _as_mesh(mesh)
    if not np.array_equal(m.get_logical_mesh(), np.asarray(md.get_device_ids()).reshape(md.shape)):
        raise MeshMismatchError(
            f"mark_sharding: {m!r} is not the mesh the tensor lives on ({md!r}, device ids "
            f"{md.get_device_ids()}).\nfix: pass the tensor's own mesh device, or move the tensor."
        )
    if any(p.is_local() for p in t.placements) or t.dtype.is_block_float:
        raise ShardingError(
            f"mark_sharding: the tensor's placements {t.placements} / dtype {t.dtype} do not hold "
            "one global array.\nfix: all_reduce partial values (or typecast block floats to "
            "bfloat16) first."
        )
    value = t.value
    spec = resolve_spec(m, partition_spec, value.shape)
    placements = []
    for name in m._jax_names:
        dim = next((d for d, names in enumerate(spec.dims) if name in names), None)
        placements.append(PlacementReplicate() if dim is None else PlacementShard(dim))
    for d, names in enumerate(spec.dims):
        if list(names) != sorted(names, key=m._jax_names.index):
            raise ShardingError(
                f"mark_sharding: dim {d} is split over mesh axes {names}, not in mesh order; a "
                f"ttjax Tensor's placements always split major axis first.\nfix: write "
                f"{tuple(sorted(names, key=m._jax_names.index))}."
            )
    local = tuple(
        s // int(np.prod([m._axis_size(a) for a in names], dtype=np.int64))
        for s, names in zip(value.shape, spec.dims)
    )
    return Tensor(
        _place(value, m, spec),
        t.spec.replace(mesh=md, placements=tuple(placements), shape=local),
    )


def _torchax_tensor(x: Any) -> bool:
    """Whether ``x`` is a torch tensor living on the JAX device (a torchax Tensor)."""
    torchax_tensor = sys.modules.get("torchax.tensor")
    return torchax_tensor is not None and isinstance(x, torchax_tensor.Tensor)


def _as_array(x: Any) -> Any:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):  # not on the JAX device: torch-xla's
        # RuntimeError, as a ShardingError (converting it would leave the caller's tensor as it was)
        kind = f"{x.device.type.upper()}{x.type().rsplit('.', 1)[-1].removesuffix('Tensor')}Type"
        where = f"{x.device}, not on the XLA device, so an annotation could not stay on it"
        if isinstance(x, torch.nn.Parameter):
            raise ShardingError(
                f"mark_sharding: Input tensor is not an XLA tensor: {kind}: this nn.Parameter "
                f"(shape {tuple(x.shape)}) is on {where}.\nfix: move the model first: "
                "model.to(torch_xla.device()) (ttjax.compat.install_as_torch_xla)."
            )
        raise ShardingError(
            f"mark_sharding: Input tensor is not an XLA tensor: {kind}: this tensor (shape "
            f"{tuple(x.shape)}) is on {where}.\nfix: move it first and annotate the moved "
            "tensor: t = t.to(torch_xla.device()); xs.mark_sharding(t, mesh, spec) (or pass "
            "t.numpy() for a new sharded jax.Array)."
        )
    return x


def _mark_torch(t: Any, mesh: Any, partition_spec: Any) -> Any:
    """Annotate a torchax tensor in place (its jax array is placed or constrained); returns it."""
    m = _as_mesh(mesh)
    elem = t._elem
    t._elem = _place(elem, m, resolve_spec(m, partition_spec, elem.shape, uneven=_is_tracer(elem)))
    if getattr(t, "_is_param", False) and t.requires_grad and not hasattr(t, "_ttjax_grad_hook"):
        t._ttjax_grad_hook = t.register_post_accumulate_grad_hook(follow_sharding)
    return t


def follow_sharding(param: Any) -> None:
    """Place a torch parameter's ``.grad`` with the parameter's own sharding (torch-xla's
    gradients come out sharded like their weights: XLA propagates the weight's annotation)."""
    grad: Any = getattr(param, "grad", None)
    sharding = getattr(getattr(param, "_elem", None), "sharding", None)
    if not (_torchax_tensor(grad) and isinstance(sharding, NamedSharding)):
        return
    if _is_tracer(grad._elem) or grad._elem.sharding == sharding:
        return
    grad._elem = jax.device_put(grad._elem, sharding)


def mark_sharding(x: Any, mesh: Mesh | ttjax.MeshDevice | None, partition_spec: Any) -> Any:
    """Shard ``x`` over ``mesh`` by ``partition_spec``; returns the placed (or constrained) array.

    ``nnx`` variables and torch tensors on the JAX device are updated in place and returned
    (a torch ``nn.Parameter``'s gradient then follows its sharding); a torch tensor elsewhere is
    refused, as torch-xla refuses it; ttjax Tensors come back with the TT-NN placements of the spec.

    >>> w = mark_sharding(w, mesh, ("model", None))    # split dim 0 over 'model'
    >>> x = mark_sharding(x, mesh, (None, None))       # replicated
    """
    if isinstance(x, nnx.Variable):
        x.set_value(mark_sharding(x.get_value(), mesh, partition_spec))
        return x
    if isinstance(x, ttjax.Tensor):
        return _mark_tensor(x, mesh, partition_spec)
    if _torchax_tensor(x):
        return _mark_torch(x, mesh, partition_spec)
    if isinstance(x, XLAShardedTensor):  # re-annotate its logical array
        x = x.global_tensor if _is_tracer(x.storage) else np.asarray(x)
    m = _as_mesh(mesh)
    x = _as_array(x)
    return _place(x, m, resolve_spec(m, partition_spec, np.shape(x), uneven=True))


def clear_sharding(x: Any) -> Any:
    """Drop ``x``'s annotation: a concrete array comes back replicated on its mesh (torch-xla
    treats an unannotated tensor as replicated); inside ``jax.jit`` the constraint is dropped.
    A torch tensor on the JAX device is replicated in place and returned."""
    if isinstance(x, nnx.Variable):
        x.set_value(clear_sharding(x.get_value()))
        return x
    if isinstance(x, ttjax.Tensor):
        return _mark_tensor(x, None, (None,) * len(x.value.shape))
    if _torchax_tensor(x):
        x._elem = clear_sharding(x._elem)
        return x
    if isinstance(x, XLAShardedTensor):
        if _is_tracer(x.storage):
            return x.global_tensor
        return jax.device_put(np.asarray(x), NamedSharding(x.mesh, PartitionSpec()))
    if _is_tracer(x):
        return x
    sharding = getattr(x, "sharding", None)
    if isinstance(sharding, NamedSharding):
        return jax.device_put(x, NamedSharding(sharding.mesh, PartitionSpec()))
    return x


def get_partition_spec(x: Any) -> PartitionSpec | None:
    """The ``PartitionSpec`` a concrete array (nnx variable, torch tensor on the JAX device) is
    placed with, else None."""
    if isinstance(x, nnx.Variable):
        x = x.get_value()
    if _torchax_tensor(x):
        x = x._elem
    sharding = getattr(x, "sharding", None)
    return sharding.spec if isinstance(sharding, NamedSharding) else None


# ---------------------------------------------------------------------------------------------
# The parallelism plan as mark_sharding specs (a tensor's logical axes on a named mesh)
# ---------------------------------------------------------------------------------------------


def plan_of(mesh: Mesh, roles: Mapping[str, str] | None = None) -> ParallelDims:
    """The parallelism plan of ``mesh``: an axis named by a role (``"dp"``, ``"tp"``, ...) plays
    it; ``roles`` maps other names to roles (seed 004's ``{"batch": "dp", "model": "tp"}``); any
    other axis, and every axis of an unnamed mesh, plays none (tensors stay whole along it).

    >>> plan_of(Mesh(np.arange(8), (2, 4), ("batch", "model")), {"batch": "dp", "model": "tp"})
    ParallelDims(dp=2, tp=4)
    """
    names = mesh.axis_names or ()  # an unnamed mesh: no axis plays a role
    named: list[str | None] = [(roles or {}).get(n, n) for n in names]
    named = named or [None] * len(mesh.mesh_shape)
    return ParallelDims(mesh.mesh_shape, tuple(r if r in ROLES else None for r in named))


def mesh_axis_spec(
    mesh: Mesh, axes: LogicalAxes, roles: Mapping[str, str] | None = None
) -> tuple[Any, ...]:
    """The ``mark_sharding`` spec (one mesh axis name, tuple of names or None per tensor dim) of
    a tensor whose dims have the logical ``axes``, by the plan's rule table on ``mesh``'s roles
    (:func:`plan_of`; ``roles`` as there).

    >>> mesh = Mesh(np.arange(8), (2, 4), ("batch", "model"))
    >>> mesh_axis_spec(mesh, LogicalAxes("mlp", "embed"), {"batch": "dp", "model": "tp"})
    ('model', None)
    """
    dims = plan_of(mesh, roles)
    names: tuple[Any, ...] = mesh.axis_names or tuple(range(len(mesh.mesh_shape)))
    name_of = {r: n for r, n in zip(dims.roles, names, strict=True) if r is not None}
    spec = [*dims.spec(axes), *[None] * len(axes)][: len(axes)]
    out: list[Any] = []
    for entry in spec:
        mapped = tuple(name_of[r] for r in ((entry,) if isinstance(entry, str) else entry or ()))
        out.append(None if not mapped else mapped[0] if len(mapped) == 1 else mapped)
    return tuple(out)


__all__ = [
    "Mesh",
    "ShardingSpec",
    "XLAShard",
    "XLAShardedTensor",
    "clear_sharding",
    "follow_sharding",
    "get_1d_mesh",
    "get_global_mesh",
    "get_partition_spec",
    "local_shards",
    "mark_sharding",
    "mesh_axis_spec",
    "plan_of",
    "resolve_spec",
    "set_global_mesh",
]
