"""Mesh mappers and composers: how a host tensor is split over a mesh, and how shards come back.

The implementation of :mod:`ttjax.distribute`, whose docstring says more.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np

from ttjax._src.core import capture as _capture, host as _host, specs as _specs
from ttjax._src.core.enums import StorageType
from ttjax._src.core.errors import MeshMismatchError, ShardingError, TTJaxError
from ttjax._src.core.mesh import MeshDevice, MeshShape
from ttjax._src.core.placements import Placement, PlacementReplicate, PlacementShard
from ttjax._src.core.plan import LogicalAxes, ParallelDims
from ttjax._src.core.tensor import Tensor, check_live, fetch, host_blocks

# ---------------------------------------------------------------------------------------------
# Configs (TT-NN names and reprs)
# ---------------------------------------------------------------------------------------------


class MeshMapperConfig:
    """Placements per mesh dimension, optionally over a distribution shape other than the mesh's.

    ``MeshMapperConfig(placements=[PlacementReplicate(), PlacementShard(3)])`` or the 2-D form
    ``MeshMapperConfig(row_dim=None, col_dim=3)`` (an int shards, None replicates).
    """

    def __init__(
        self,
        placements: Sequence[Placement] | int | None = None,
        col_dim: int | None = None,
        mesh_shape_override: Any = None,
        *,
        row_dim: int | None = None,
    ) -> None:
        if isinstance(placements, (list, tuple)):
            pl = tuple(placements)
            for i, p in enumerate(pl):
                if not isinstance(p, (PlacementShard, PlacementReplicate)):
                    raise ShardingError(
                        f"MeshMapperConfig placement {i} is {p!r}; a mapper takes PlacementShard(dim) "
                        "or PlacementReplicate().\nfix: e.g. placements=[ttnn.PlacementReplicate(), "
                        "ttnn.PlacementShard(3)]."
                    )
            self.placements = pl
            self.mesh_shape_override = (
                MeshShape(mesh_shape_override) if mesh_shape_override is not None else None
            )
        else:
            # The 2-D convenience form; like TT-NN, it ignores mesh_shape_override.
            row = cast(int | None, placements) if placements is not None else row_dim
            self.placements = _specs.placement_from_dims([row, col_dim])
            self.mesh_shape_override = None

    def __repr__(self) -> str:
        s = f"MeshMapperConfig(placements: {list(self.placements)!r}"
        if self.mesh_shape_override is not None:
            s += f", mesh_shape_override={self.mesh_shape_override!r}"
        return s + ")"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MeshMapperConfig)
            and self.placements == other.placements
            and self.mesh_shape_override == other.mesh_shape_override
        )

    __hash__ = None  # type: ignore[assignment]


class MeshComposerConfig:
    """Tensor dim to concatenate along, per mesh dimension of the distribution shape."""

    def __init__(
        self,
        dims: Sequence[int] | int | None = None,
        col_dim: int | None = None,
        mesh_shape_override: Any = None,
        *,
        row_dim: int | None = None,
    ) -> None:
        if isinstance(dims, (list, tuple)):
            self.dims = tuple(int(d) for d in dims)
        else:
            row = cast(int | None, dims) if dims is not None else row_dim
            if row is None or col_dim is None:
                raise ShardingError(
                    f"MeshComposerConfig(row_dim={row!r}, col_dim={col_dim!r}) needs both dims.\n"
                    "fix: composers always concatenate; e.g. MeshComposerConfig(0, 3)."
                )
            self.dims = (int(row), int(col_dim))
        self.mesh_shape_override = (
            MeshShape(mesh_shape_override) if mesh_shape_override is not None else None
        )

    def __repr__(self) -> str:
        s = f"MeshComposerConfig(dims: {list(self.dims)}"
        if self.mesh_shape_override is not None:
            s += f", mesh_shape_override={self.mesh_shape_override!r}"
        return s + ")"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, MeshComposerConfig)
            and self.dims == other.dims
            and self.mesh_shape_override == other.mesh_shape_override
        )

    __hash__ = None  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------
# Distribution shape -> mesh axes
# ---------------------------------------------------------------------------------------------


def _axis_groups(dist: MeshShape, mesh: MeshShape) -> list[list[int]] | None:
    """Which mesh axes each distribution axis covers, row-major, or None if they don't line up.

    ``MeshShape(8)`` over a 2x4 mesh gives ``[[0, 1]]``; ``(1, 8)`` over 2x4 gives ``[[], [0, 1]]``.
    """
    mesh_dims = list(mesh)
    groups: list[list[int]] = []
    j = 0
    for size in dist:
        group: list[int] = []
        prod = 1
        while prod < size and j < len(mesh_dims):
            prod *= mesh_dims[j]
            group.append(j)
            j += 1
        if prod != size:
            return None
        groups.append(group)
    while j < len(mesh_dims) and mesh_dims[j] == 1:
        j += 1
    return groups if j == len(mesh_dims) else None


def _submesh_mode(mesh: MeshShape, override: MeshShape | None) -> bool:
    """TT-NN's distribution mode (``compute_distribution_mode``, distribution_mode.cpp): a
    distribution shape of the mesh's rank that fits inside it keeps its coordinates (SUBMESH);
    any other is laid out over the mesh in row-major order (ROW_MAJOR)."""
    if override is None:
        return True
    return override.dims() == mesh.dims() and all(a <= b for a, b in zip(override, mesh))


def first_devices_block(mesh: MeshShape, count: int) -> tuple[int, ...] | None:
    """The shape of the block the first ``count`` devices of ``mesh`` (row-major) make up, at
    the origin; None when they make up no block (e.g. 6 devices of a 2x4 mesh)."""
    coords = list(np.ndindex(*mesh))[:count]
    hi = np.array(coords).max(axis=0)
    shape = tuple(int(h) + 1 for h in hi)
    return shape if list(np.ndindex(*shape)) == coords else None


def distribution_block(
    mesh: MeshShape, dist: MeshShape, override: MeshShape | None, count: int
) -> tuple[int, ...] | None:
    """The block (at the origin) of ``mesh`` that the first ``count`` positions of the
    distribution ``dist`` reach, or None when they make up no block.

    TT-NN places shard ``i`` at distribution coordinate ``i`` and maps coordinates to the mesh
    as they are (SUBMESH mode) or in row-major order (``get_remap_fn``, distributed_tensor.cpp);
    a 1-D distribution with fewer chunks than positions fills only its first ``count``.
    """
    if _submesh_mode(mesh, override) and count == dist.mesh_size():
        return tuple(dist)
    return first_devices_block(mesh, count)


def placements_over(
    block: tuple[int, ...], placements: Sequence[Placement], dist: MeshShape
) -> tuple[Placement, ...] | None:
    """``placements`` (one per dim of the distribution ``dist``) as one per axis of the mesh
    block of shape ``block`` the distribution fills, or None when it does not line up."""
    shape = MeshShape(list(block))
    if tuple(dist) == block:
        return canonical(tuple(placements), block)
    groups = _axis_groups(dist, shape)
    if groups is None:
        return None
    out: list[Placement] = [PlacementReplicate()] * len(block)
    for p, group in zip(placements, groups):
        for axis in group:
            out[axis] = p
    return canonical(tuple(out), block)


def resolve_mapper_placements(
    mesh: MeshDevice, placements: Sequence[Placement], override: MeshShape | None
) -> tuple[tuple[int, ...], tuple[Placement, ...]]:
    """A mapper config as the block of ``mesh`` its distribution fills (the whole mesh unless
    the distribution shape is smaller) and one placement per axis of that block."""
    dist = override if override is not None else mesh.shape
    if len(placements) != dist.dims():
        raise ShardingError(
            f"The number of dimensions in the mesh shape {dist!r} does not match the number of "
            f"placements in the config {list(placements)!r}.\n"
            f"fix: give exactly {dist.dims()} placements, one per mesh dimension."
        )
    if dist.mesh_size() > mesh.shape.mesh_size():
        raise ShardingError(
            f"The size of the supplied mesh shape {dist!r} does not match the device shape size "
            f"{mesh.shape!r}.\nfix: use a distribution shape with at most "
            f"{mesh.shape.mesh_size()} devices."
        )
    sharded = [p.dim for p in placements if isinstance(p, PlacementShard)]
    if len(set(sharded)) != len(sharded):
        raise ShardingError(
            f"dims must be unique: placements {list(placements)!r} shard the same tensor dim on "
            "two mesh dimensions.\nfix: shard different tensor dims, or use "
            "ShardTensorToMesh(mesh, dim) to split one dim over every device."
        )
    block = distribution_block(mesh.shape, dist, override, dist.mesh_size())
    if block is None:
        raise ShardingError(
            f"A distribution over {dist!r} reaches the first {dist.mesh_size()} devices of the "
            f"{mesh.shape!r} mesh (row-major), which make up no block of it; ttjax holds a "
            "tensor on a block of a mesh.\n"
            f"fix: open or cut a submesh (mesh_device.create_submesh) and distribute over it, "
            f"or use a distribution shape such as {mesh.shape!r}."
        )
    out = placements_over(block, placements, dist)
    if out is None:
        raise ShardingError(
            f"A distribution over {dist!r} does not line up with the {mesh.shape!r} mesh: each "
            "distribution dim must cover whole consecutive mesh dims (row-major).\n"
            f"fix: reshape the mesh (mesh_device.reshape(ttnn.MeshShape({list(dist)}))), or use "
            f"a distribution shape such as {mesh.shape!r} or MeshShape([{mesh.shape.mesh_size()}])."
        )
    return block, out


def canonical(
    placements: tuple[Placement, ...], mesh_shape: Sequence[int]
) -> tuple[Placement, ...]:
    """Size-1 mesh axes split nothing: their placement is always ``PlacementReplicate``."""
    if all(s != 1 for s in mesh_shape):
        return placements
    return tuple(PlacementReplicate() if s == 1 else p for p, s in zip(placements, mesh_shape))


def _normalize_dims(
    shape: tuple[int, ...], placements: Sequence[Placement], what: str
) -> tuple[Placement, ...]:
    """Shard dims made non-negative for a tensor of ``shape``; out-of-range dims raise."""
    rank = len(shape)
    norm: list[Placement] = []
    for i, p in enumerate(placements):
        if isinstance(p, PlacementShard):
            d = _specs.normalize_dim(p.dim, rank)
            if d is None:
                raise ShardingError(
                    f"{what}: Invalid dimension index; got dims: {p.dim}, tensor dimension: {rank} "
                    f"(tensor shape {list(shape)}, mesh axis {i}).\n"
                    f"fix: pick a dim in [{-rank}, {rank - 1}]."
                )
            norm.append(PlacementShard(d))
        else:
            norm.append(p)
    return tuple(norm)


def _check_divisible(
    shape: tuple[int, ...], placements: tuple[Placement, ...], mesh: MeshDevice, what: str
) -> tuple[Placement, ...]:
    """Normalize shard dims against ``shape`` and check every sharded dim divides evenly."""
    out = _normalize_dims(shape, placements, what)
    for d in sorted({p.dim for p in out if isinstance(p, PlacementShard)}):
        n = _specs.shard_count(out, tuple(mesh.shape), d)
        if shape[d] % n:
            axes = _specs.axes_sharding(out, d)
            names = [f"{mesh.axis_names[a]}({mesh.shape[a]})" for a in axes]
            raise ShardingError(
                f"{what}: tensor dim {d} of shape {list(shape)} has size {shape[d]}, which does not "
                f"split evenly into {n} shards over mesh axes {names} of {mesh.shape!r} "
                f"(Shard shape mismatch: {shape[d]} % {n} = {shape[d] % n}).\n"
                f"fix: pad dim {d} to a multiple of {n}, shard another dim, or replicate it."
            )
    return out


def device_block(
    placements: Sequence[Placement],
    mesh_shape: Sequence[int],
    local_shape: Sequence[int],
    coord: Sequence[int],
) -> tuple[Any, ...]:
    """Where the block of the device at ``coord`` lies in the global array of ``local_shape``
    blocks under ``placements`` (hidden ``PlacementLocal`` axes first), as
    :func:`ttjax._src.core.specs.local_blocks` lays them out: an index that takes one device's
    block without touching the others'.

    >>> device_block((PlacementReplicate(), PlacementShard(1)), (2, 4), (8, 2), (1, 3))
    (slice(0, 8, None), slice(6, 8, None))
    """
    idx: list[Any] = [int(coord[i]) for i in _specs.local_axes(placements)]
    for d, size in enumerate(local_shape):
        k = 0
        for a in _specs.axes_sharding(placements, d):
            k = k * int(mesh_shape[a]) + int(coord[a])
        idx.append(slice(k * size, (k + 1) * size))
    return tuple(idx)


# ---------------------------------------------------------------------------------------------
# Mappers
# ---------------------------------------------------------------------------------------------


def _check_mesh(mesh_device: Any, what: str) -> MeshDevice:
    if not isinstance(mesh_device, MeshDevice):
        raise ShardingError(
            f"{what} needs a MeshDevice, got {type(mesh_device).__name__} ({mesh_device!r}).\n"
            "fix: pass the mesh from ttnn.open_mesh_device(...)."
        )
    return mesh_device


class TensorToMesh:
    """A mesh mapper: splits or replicates a host tensor over ``mesh_device``.

    ``placements`` are per axis of the block the distribution fills: the whole mesh unless its
    distribution shape is smaller (then the block at the origin, as TT-NN places it).
    """

    def __init__(self, mesh_device: MeshDevice, config: MeshMapperConfig) -> None:
        _check_mesh(mesh_device, type(self).__name__)
        self.mesh_device = mesh_device
        self._config = config
        self._dist = config.mesh_shape_override or mesh_device.shape
        self._block, self.placements = resolve_mapper_placements(
            mesh_device, config.placements, config.mesh_shape_override
        )

    def config(self) -> MeshMapperConfig:
        return self._config

    def placements_for(self, shape: tuple[int, ...]) -> tuple[Placement, ...]:
        """Placements for a host tensor of ``shape`` over :meth:`placed_on`'s mesh."""
        return self.placed_on(shape)[1]

    def placed_on(self, shape: tuple[int, ...]) -> tuple[MeshDevice, tuple[Placement, ...]]:
        """The mesh a host tensor of ``shape`` lands on (``mesh_device``, or the block of its
        first devices the shards fill) and its placements there (dims normalized, sizes checked).

        TT-NN cuts a sharded dim of size ``s`` into chunks of ``ceil(s / n)`` over ``n``
        positions (``chunk_ndim``, xtensor/partition.cpp): a 1-D distribution may get fewer
        chunks than devices, which then go to its first positions only (distributed_tensor.cpp);
        an N-D one needs one chunk per position.
        """
        what = type(self).__name__
        given = _normalize_dims(shape, self._config.placements, what)
        dims = [p.dim for p in given if isinstance(p, PlacementShard)]
        if len(set(dims)) != len(dims):
            # Shard(3) and Shard(-1) name the same dim of a rank-4 tensor: TT-NN normalizes
            # negative dims before its uniqueness check, so this is not a nested split.
            raise ShardingError(
                f"{what}: dims must be unique: placements {list(self._config.placements)!r} both "
                f"shard tensor dim {max(dims, key=dims.count)} of shape {list(shape)}.\n"
                "fix: shard different tensor dims, or use ShardTensorToMesh(mesh, dim) to split "
                "one dim over every device."
            )
        mesh, block, placements = self.mesh_device, self._block, self.placements
        first = given[0] if len(given) == 1 else None
        if isinstance(first, PlacementShard) and shape[first.dim] % self._dist[0]:
            block, placements = self._fewer_chunks(shape, first.dim, what)
        if block != tuple(mesh.shape):
            mesh = mesh._block_view((0,) * len(block), block)
        return mesh, _check_divisible(shape, placements, mesh, what)

    def _fewer_chunks(
        self, shape: tuple[int, ...], dim: int, what: str
    ) -> tuple[tuple[int, ...], tuple[Placement, ...]]:
        """The block and placements of a 1-D split of ``dim`` whose size the distribution's
        ``n`` positions do not divide: ``ceil(s / n)``-sized chunks on the first positions."""
        n, s = self._dist[0], shape[dim]
        size = -(-s // n) if s else 0
        if s == 0 or s % size:
            # Uneven chunks: TT-NN's "Shard shape mismatch"; _check_divisible says so.
            return self._block, self.placements
        count = s // size
        mesh = self.mesh_device.shape
        block = first_devices_block(mesh, count)
        placements = (
            placements_over(block, [PlacementShard(dim)], MeshShape(count))
            if block is not None
            else None
        )
        if block is None or placements is None:
            full = _normalize_dims(shape, self.placements, what)
            names = [
                f"{self.mesh_device.axis_names[a]}({mesh[a]})"
                for a in _specs.axes_sharding(full, dim)
            ]
            raise ShardingError(
                f"{what}: tensor dim {dim} of shape {list(shape)} has size {s}, which does not "
                f"split evenly into {n} shards over mesh axes {names} of {mesh!r}: TT-NN cuts "
                f"it into {count} chunks of {size} for the first {count} devices (row-major), "
                "which make up no block of the mesh, and ttjax holds a tensor on a block.\n"
                f"fix: pad dim {dim} to a multiple of {n}, shard a dim whose chunks fill whole "
                "mesh rows, or reshape the mesh "
                f"(mesh_device.reshape(ttnn.MeshShape([1, {mesh.mesh_size()}])))."
            )
        return block, placements

    def map(self, tensor: Any) -> list[np.ndarray]:
        """The per-device shards of ``tensor`` in row-major device order (for inspection); only
        the devices of :meth:`placed_on`'s mesh get one."""
        arr = _host.to_host_array(tensor)
        mesh, pl = self.placed_on(arr.shape)
        mesh_shape = tuple(mesh.shape)
        local = tuple(s // _specs.shard_count(pl, mesh_shape, d) for d, s in enumerate(arr.shape))
        # views of ``arr``, one per device: no stacked copy of every shard
        return [arr[device_block(pl, mesh_shape, local, c)] for c in np.ndindex(*mesh_shape)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mesh_device!r}, {self._config!r})"


class ShardTensorToMesh(TensorToMesh):
    """Split tensor dim ``dim`` over every device of the mesh, in row-major device order."""

    def __init__(self, mesh_device: MeshDevice, dim: int) -> None:
        n = MeshShape(_check_mesh(mesh_device, type(self).__name__).get_num_devices())
        super().__init__(
            mesh_device, MeshMapperConfig([PlacementShard(dim)], mesh_shape_override=n)
        )
        self.shard_dim = dim


class ReplicateTensorToMesh(TensorToMesh):
    """Copy the whole tensor to every device of the mesh."""

    def __init__(self, mesh_device: MeshDevice) -> None:
        n = MeshShape(_check_mesh(mesh_device, type(self).__name__).get_num_devices())
        super().__init__(
            mesh_device, MeshMapperConfig([PlacementReplicate()], mesh_shape_override=n)
        )

    def unwrap(self) -> ReplicateTensorToMesh:
        return self


class ShardTensor2dMesh(TensorToMesh):
    """``dims=(row_dim, col_dim)``: shard ``row_dim`` down the rows and ``col_dim`` across columns.

    ``None`` replicates along that mesh dimension.
    """

    def __init__(
        self, mesh_device: MeshDevice, mesh_shape: Any, dims: Sequence[int | None]
    ) -> None:
        dims = tuple(dims)
        if len(dims) != 2:
            raise ShardingError(
                f"ShardTensor2dMesh dims={dims!r} must have two entries (row_dim, col_dim).\n"
                "fix: e.g. dims=(None, 3) to shard dim 3 across columns."
            )
        _check_mesh(mesh_device, "ShardTensor2dMesh")
        shape = MeshShape(mesh_shape)
        if shape.dims() != 2 or any(a > b for a, b in zip(shape, mesh_device.shape)):
            raise ShardingError(
                f"Device mesh shape {mesh_device.shape!r} does not match the provided mesh shape "
                f"{shape!r}.\nfix: pass mesh_shape=tuple(mesh_device.shape)."
            )
        super().__init__(
            mesh_device,
            MeshMapperConfig(_specs.placement_from_dims(dims), mesh_shape_override=shape),
        )
        self.dims = dims


def shard_tensor_to_mesh_mapper(mesh_device: MeshDevice, dim: int) -> TensorToMesh:
    return ShardTensorToMesh(mesh_device, dim)


def replicate_tensor_to_mesh_mapper(mesh_device: MeshDevice) -> TensorToMesh:
    return ReplicateTensorToMesh(mesh_device)


def create_mesh_mapper(
    mesh_device: MeshDevice, config: MeshMapperConfig, mesh_shape: Any = None
) -> TensorToMesh:
    """A mapper from a :class:`MeshMapperConfig` (TT-NN's N-D mapper).

    >>> mapper = create_mesh_mapper(mesh, MeshMapperConfig([PlacementReplicate(), PlacementShard(3)]))
    """
    if not isinstance(config, MeshMapperConfig):
        raise ShardingError(
            f"create_mesh_mapper needs a MeshMapperConfig, got {type(config).__name__}.\n"
            "fix: ttnn.create_mesh_mapper(mesh, ttnn.MeshMapperConfig(placements=[...]))."
        )
    if mesh_shape is not None:
        config = MeshMapperConfig(list(config.placements), mesh_shape_override=mesh_shape)
    return TensorToMesh(mesh_device, config)


# ---------------------------------------------------------------------------------------------
# Composers
# ---------------------------------------------------------------------------------------------


class MeshToTensor:
    """A mesh composer: concatenates per-device shards back into one host tensor."""

    def __init__(self, mesh_device: MeshDevice, config: MeshComposerConfig) -> None:
        self.mesh_device = _check_mesh(mesh_device, type(self).__name__)
        self._config = config
        dist = config.mesh_shape_override or mesh_device.shape
        if len(config.dims) != dist.dims():
            raise ShardingError(
                f"The number of dimensions in the mesh shape {dist!r} does not match the number of "
                f"dimensions in the config {list(config.dims)}.\n"
                f"fix: give {dist.dims()} concat dims, one per mesh dimension."
            )
        if dist.mesh_size() > mesh_device.shape.mesh_size():
            raise ShardingError(
                f"The size of the supplied mesh shape {dist!r} does not match the device shape "
                f"size {mesh_device.shape!r}.\nfix: use a distribution shape with at most "
                f"{mesh_device.shape.mesh_size()} devices."
            )
        self.dist_shape = dist

    def config(self) -> MeshComposerConfig:
        return self._config

    def concat_dims(self, rank: int) -> list[int]:
        dims = []
        for d in self._config.dims:
            n = _specs.normalize_dim(d, rank)
            if n is None:
                raise ShardingError(
                    f"{type(self).__name__}: concat dim {d} is out of range for per-device rank {rank}.\n"
                    f"fix: pick a dim in [{-rank}, {rank - 1}]."
                )
            dims.append(n)
        return dims

    def fast_placements(self, rank: int) -> tuple[Placement, ...] | None:
        """Placements whose global array *is* this composer's result (no copy needed), if any."""
        dims = self.concat_dims(rank)
        groups = _axis_groups(self.dist_shape, self.mesh_device.shape)
        if groups is None:
            return None
        out: list[Placement] = [PlacementReplicate()] * self.mesh_device.shape.dims()
        for d, group in zip(dims, groups):
            for axis in group:
                out[axis] = PlacementShard(d)
        return canonical(tuple(out), self.mesh_device.shape)

    def compose(self, tensor: Any) -> np.ndarray:
        """The composed host array (numpy): every device's shard, concatenated in TT-NN's order."""
        t = tensor
        if not isinstance(t, Tensor):
            raise TTJaxError(
                f"{type(self).__name__}.compose expects a ttnn Tensor, got {type(t).__name__}.\n"
                "fix: pass the tensor itself, e.g. ttnn.to_torch(t, mesh_composer=composer)."
            )
        mesh = t._mesh
        if mesh is None:
            return fetch(t._data)
        if t._storage is StorageType.DEVICE:
            _capture.forbid_host_io("Reads")
            check_live(t, "to_torch")
        rank = len(t._shape)
        if self.mesh_device.shape != mesh.shape:
            if mesh._offset is None or not self.mesh_device.same_mesh(mesh._parent):
                raise MeshMismatchError(
                    f"The composer was built for {self.mesh_device!r} but the tensor lives on "
                    f"{mesh!r}.\nfix: build the composer with the tensor's mesh (t.mesh_device)."
                )
            return self._compose_part(t, mesh, tuple(mesh._offset), rank)
        if self.dist_shape.mesh_size() != mesh.shape.mesh_size():
            return self._compose_part(t, mesh, (0,) * mesh.shape.dims(), rank)
        fast = self.fast_placements(rank)
        if (
            fast is not None
            and not t._dtype.is_block_float
            and fast == canonical(t._placements, tuple(mesh.shape))
        ):
            return fetch(t._data)
        blocks = host_blocks(t)
        return _specs.concat_blocks(
            blocks, mesh.shape.dims(), self.dist_shape, self.concat_dims(rank)
        )

    def _compose_part(
        self, t: Tensor, block: MeshDevice, offset: tuple[int, ...], rank: int
    ) -> np.ndarray:
        """TT-NN's composer where its distribution and the tensor's devices differ: position
        ``i`` of the distribution reads the device at its coordinates (SUBMESH mode) or at the
        ``i``-th coordinate of the mesh, row-major (``get_remap_fn``); a 1-D composer
        concatenates the shards found there, an N-D one needs all of them
        (``MeshToTensor::Impl::compose``, distributed_tensor.cpp). ``block`` is the tensor's
        mesh, at ``offset`` of the composer's."""
        mesh = self.mesh_device.shape
        dist = self.dist_shape
        if _submesh_mode(mesh, self._config.mesh_shape_override):
            positions = list(np.ndindex(*dist))
        else:
            positions = list(np.ndindex(*mesh))[: dist.mesh_size()]
        blocks = host_blocks(t)
        inside = [
            tuple(c - o for c, o in zip(pos, offset))
            for pos in positions
            if all(o <= c < o + n for c, o, n in zip(pos, offset, block.shape))
        ]
        dims = self.concat_dims(rank)
        if len(dims) == 1 and inside:
            shards = np.stack([blocks[c] for c in inside])
            return _specs.concat_blocks(shards, 1, (len(inside),), dims)
        if len(inside) != dist.mesh_size():
            raise ShardingError(
                f"ND composition requires the number of tensors {len(inside)} to match the mesh "
                f"shape {dist!r}: the tensor lives on the {block.shape!r} block at {list(offset)} "
                f"of {self.mesh_device!r}.\nfix: compose with ttnn.ConcatMeshToTensor(mesh, dim), "
                "or with a composer whose mesh_shape_override covers the tensor's devices "
                f"(e.g. ttnn.MeshShape({list(block.shape)}))."
            )
        return _specs.concat_blocks(np.stack([blocks[c] for c in inside]), 1, tuple(dist), dims)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mesh_device!r}, {self._config!r})"


class ConcatMeshToTensor(MeshToTensor):
    """Concatenate every device's shard along ``dim``, in row-major device order."""

    def __init__(self, mesh_device: MeshDevice, dim: int) -> None:
        n = MeshShape(_check_mesh(mesh_device, type(self).__name__).get_num_devices())
        super().__init__(mesh_device, MeshComposerConfig([dim], mesh_shape_override=n))
        self.concat_dim = dim


class ConcatMesh2dToTensor(MeshToTensor):
    """Concatenate within each row along ``dims[1]``, then the rows along ``dims[0]``."""

    def __init__(self, mesh_device: MeshDevice, mesh_shape: Any, dims: Sequence[int]) -> None:
        dims = tuple(dims)
        if len(dims) != 2 or any(d is None for d in dims):
            raise ShardingError(
                f"ConcatMesh2dToTensor dims={dims!r} must be two ints (row_dim, col_dim).\n"
                "fix: composers always concatenate; e.g. dims=(0, 3)."
            )
        if dims[0] == dims[1]:
            raise ShardingError(
                f"ConcatMesh2dToTensor dims={dims!r}: both mesh axes concatenate along dim "
                f"{dims[0]}; TT-NN refuses this (\"Dimensions in 'dims' must be different\").\n"
                "fix: two different tensor dims, e.g. dims=(0, 3), or ConcatMeshToTensor for one dim."
            )
        shape = MeshShape(mesh_shape)
        super().__init__(mesh_device, MeshComposerConfig(list(dims), mesh_shape_override=shape))
        self.dims = dims


def concat_mesh_to_tensor_composer(mesh_device: MeshDevice, dim: int) -> MeshToTensor:
    return ConcatMeshToTensor(mesh_device, dim)


def create_mesh_composer(mesh_device: MeshDevice, config: MeshComposerConfig) -> MeshToTensor:
    """A composer from a :class:`MeshComposerConfig` (TT-NN's N-D composer)."""
    if not isinstance(config, MeshComposerConfig):
        raise ShardingError(
            f"create_mesh_composer needs a MeshComposerConfig, got {type(config).__name__}.\n"
            "fix: ttnn.create_mesh_composer(mesh, ttnn.MeshComposerConfig(dims=[0, 3]))."
        )
    return MeshToTensor(mesh_device, config)


# TT-NN aliases of the C++ class names.
CppTensorToMesh = TensorToMesh
CppMeshToTensor = MeshToTensor

# ---------------------------------------------------------------------------------------------
# distribute(): default mapper/composer for a block of code
# ---------------------------------------------------------------------------------------------

_defaults = threading.local()


def default_mapper() -> TensorToMesh | None:
    return getattr(_defaults, "mapper", None)


def default_composer() -> MeshToTensor | None:
    return getattr(_defaults, "composer", None)


@contextlib.contextmanager
def distribute(default: TensorToMesh | MeshToTensor) -> Iterator[None]:
    """Make ``default`` the mapper of ``from_torch`` (or composer of ``to_torch``) inside the block.

    An explicit ``mesh_mapper=``/``mesh_composer=`` still wins, as in TT-NN.

    >>> with ttnn.distribute(ttnn.ShardTensorToMesh(mesh, dim=0)):
    ...     x = ttnn.from_torch(batch, device=mesh)
    """
    if isinstance(default, TensorToMesh):
        attr = "mapper"
    elif isinstance(default, MeshToTensor):
        attr = "composer"
    else:
        raise ShardingError(
            "Argument must be an instance of either TensorToMesh or MeshToTensor. "
            f"ttnn.distribute got {type(default).__name__} ({default!r}).\nfix: pass a mesh mapper such as "
            "ttnn.ShardTensorToMesh(mesh, dim=0) or a composer such as "
            "ttnn.ConcatMeshToTensor(mesh, dim=0)."
        )
    old = getattr(_defaults, attr, None)
    setattr(_defaults, attr, default)
    try:
        yield
    finally:
        setattr(_defaults, attr, old)


# ---------------------------------------------------------------------------------------------
# The parallelism plan as mesh mappers (a tensor's logical axes under a ParallelDims)
# ---------------------------------------------------------------------------------------------


def _entry_roles(entry: Any) -> tuple[str, ...]:
    """The roles of one ``PartitionSpec`` entry (None, a role, or a tuple of roles)."""
    return () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)


def shard_dims(dims: ParallelDims, axes: LogicalAxes) -> list[int | None]:
    """The tensor dim each mesh axis of ``dims`` shards (None: replicated along that axis).

    The placement per mesh axis (TT-NN's ``cluster_axis`` order) of a tensor whose dims have the
    logical ``axes``, by the plan's rule table (:data:`ttjax.plan.LOGICAL_AXIS_RULES`).

    >>> from ttjax.plan import LogicalAxes, ParallelDims
    >>> shard_dims(ParallelDims.from_sizes(dp=2, tp=4), LogicalAxes("embed", "mlp"))
    [None, 1]
    """
    out: list[int | None] = [None] * len(dims.shape)
    for d, entry in enumerate(dims.spec(axes)):
        for role in _entry_roles(entry):
            out[dims.roles.index(role)] = d
    return out


def plan_mesh_mapper(mesh: MeshDevice, dims: ParallelDims, axes: LogicalAxes) -> TensorToMesh:
    """TT-NN's mesh mapper for a host tensor whose dims have the logical ``axes`` under ``dims``.

    ``dims`` has either one axis over every device (TT-NN's flat ``ShardTensorToMesh``, in
    row-major device order) or the mesh's own 2-D shape (``ShardTensor2dMesh``, one tensor dim
    per mesh axis); a tensor no role splits is replicated.

    >>> from ttjax.plan import LogicalAxes, ParallelDims
    >>> dims = ParallelDims((2, 4), ("dp", "tp"))                 # the 2x4 mesh: dp rows, tp cols
    >>> plan_mesh_mapper(mesh, dims, LogicalAxes("embed", "mlp")).placements
    (PlacementReplicate(), PlacementShard(1))
    """
    per_axis = shard_dims(dims, axes)
    if all(d is None for d in per_axis):
        return ReplicateTensorToMesh(mesh)
    shape = tuple(int(s) for s in mesh.shape)
    if len(dims.shape) == 1 and dims.shape[0] == mesh.get_num_devices():
        (dim,) = per_axis
        assert dim is not None
        return ShardTensorToMesh(mesh, dim=dim)
    if dims.shape == shape and len(shape) == 2:
        return ShardTensor2dMesh(mesh, mesh_shape=shape, dims=per_axis)
    raise ShardingError(
        f"plan_mesh_mapper: the plan {dims!r} fits neither all {mesh.get_num_devices()} devices "
        f"of the mesh in one axis nor its shape {shape}.\n"
        "fix: give ParallelDims((n_devices,), (role,)) or the mesh's own 2-D shape."
    )


__all__ = [
    "ConcatMesh2dToTensor",
    "ConcatMeshToTensor",
    "CppMeshToTensor",
    "CppTensorToMesh",
    "MeshComposerConfig",
    "MeshMapperConfig",
    "MeshToTensor",
    "ReplicateTensorToMesh",
    "ShardTensor2dMesh",
    "ShardTensorToMesh",
    "TensorToMesh",
    "concat_mesh_to_tensor_composer",
    "create_mesh_composer",
    "create_mesh_mapper",
    "distribute",
    "plan_mesh_mapper",
    "replicate_tensor_to_mesh_mapper",
    "shard_dims",
    "shard_tensor_to_mesh_mapper",
]
