"""Pure layout math: placements <-> PartitionSpec, global <-> per-device shapes, per-device blocks.

Nothing here touches a device; every function takes plain shapes (and numpy or jax.numpy as
``xp``), so the layout rules are cheap to test on their own.

The global array of a mesh tensor has one hidden leading axis per ``PlacementLocal`` mesh axis
(in mesh-axis order), then the tensor dims, where dim ``d`` is the concatenation of the device
blocks along every mesh axis that shards it (mesh axis 0 major, i.e. row-major device order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jax.sharding import PartitionSpec

from ttjax._src.core.placements import Placement, PlacementLocal, PlacementReplicate, PlacementShard


def normalize_dim(dim: int, rank: int) -> int | None:
    """``dim`` made non-negative for a tensor of ``rank``, or None when out of range."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        return None
    d = int(dim)
    if d < 0:
        d += rank
    return d if 0 <= d < rank else None


def local_axes(placements: Sequence[Placement]) -> list[int]:
    """Mesh axes whose data live on a hidden leading axis (``PlacementLocal``)."""
    return [i for i, p in enumerate(placements) if type(p) is PlacementLocal]


def axes_sharding(placements: Sequence[Placement], dim: int) -> list[int]:
    """Mesh axes that shard tensor dim ``dim``, major first."""
    return [i for i, p in enumerate(placements) if type(p) is PlacementShard and p.dim == dim]


def partition_spec(
    placements: Sequence[Placement], axis_names: Sequence[str], rank: int
) -> PartitionSpec:
    """The ``PartitionSpec`` that gives every device its block of the global array."""
    per_dim: list[list[str]] = [[] for _ in range(rank)]
    hidden: list[str] = []
    for i, p in enumerate(placements):
        if type(p) is PlacementShard:
            per_dim[p.dim].append(axis_names[i])
        elif type(p) is PlacementLocal:
            hidden.append(axis_names[i])
    entries: list[Any] = [None if not a else (a[0] if len(a) == 1 else tuple(a)) for a in per_dim]
    return PartitionSpec(*hidden, *entries)


def global_shape(
    local_shape: Sequence[int], placements: Sequence[Placement], mesh_shape: Sequence[int]
) -> tuple[int, ...]:
    """Shape of the global array that holds per-device blocks of ``local_shape``."""
    dims = list(local_shape)
    hidden = []
    for i, p in enumerate(placements):
        if type(p) is PlacementShard:
            dims[p.dim] *= mesh_shape[i]
        elif type(p) is PlacementLocal:
            hidden.append(mesh_shape[i])
    return (*hidden, *dims)


def shard_count(placements: Sequence[Placement], mesh_shape: Sequence[int], dim: int) -> int:
    """How many pieces tensor dim ``dim`` is split into."""
    return int(np.prod([mesh_shape[i] for i in axes_sharding(placements, dim)], dtype=np.int64))


def local_blocks(
    xp: Any,
    arr: Any,
    placements: Sequence[Placement],
    mesh_shape: Sequence[int],
    local_shape: Sequence[int],
) -> Any:
    """Every device's block, as one array of shape ``mesh_shape + local_shape``.

    Replicated mesh axes are broadcast (a view, no copy, with numpy).
    """
    mesh_shape = tuple(mesh_shape)
    local_shape = tuple(local_shape)
    rank = len(local_shape)
    labels: list[tuple[str, int]] = [("m", i) for i in local_axes(placements)]
    new_shape: list[int] = [mesh_shape[i] for i in local_axes(placements)]
    for d in range(rank):
        for a in axes_sharding(placements, d):
            labels.append(("m", a))
            new_shape.append(mesh_shape[a])
        labels.append(("t", d))
        new_shape.append(local_shape[d])
    r = xp.reshape(arr, tuple(new_shape))
    missing = [i for i in range(len(mesh_shape)) if ("m", i) not in labels]
    if missing:
        r = xp.reshape(r, r.shape + (1,) * len(missing))
        labels += [("m", i) for i in missing]
    perm = [labels.index(("m", i)) for i in range(len(mesh_shape))]
    perm += [labels.index(("t", d)) for d in range(rank)]
    r = xp.transpose(r, perm)
    return xp.broadcast_to(r, mesh_shape + local_shape)


def from_local_blocks(
    xp: Any, blocks: Any, placements: Sequence[Placement], mesh_shape: Sequence[int]
) -> Any:
    """Inverse of :func:`local_blocks`: the global array from ``mesh_shape + local_shape`` blocks.

    Replicated axes take the block at index 0 (callers guarantee the copies are equal).
    """
    mesh_shape = tuple(mesh_shape)
    m = len(mesh_shape)
    local_shape = tuple(blocks.shape[m:])
    rank = len(local_shape)
    index = tuple(0 if type(p) is PlacementReplicate else slice(None) for p in placements)
    b = blocks[index]
    kept = [i for i, p in enumerate(placements) if type(p) is not PlacementReplicate]
    labels = [("m", i) for i in kept] + [("t", d) for d in range(rank)]
    target: list[tuple[str, int]] = [("m", i) for i in local_axes(placements)]
    for d in range(rank):
        target += [("m", a) for a in axes_sharding(placements, d)] + [("t", d)]
    b = xp.transpose(b, [labels.index(t) for t in target])
    return xp.reshape(b, global_shape(local_shape, placements, mesh_shape))


def concat_blocks(
    blocks: np.ndarray, mesh_rank: int, dist_shape: Sequence[int], dims: Sequence[int]
) -> np.ndarray:
    """TT-NN's composer: concatenate device blocks (row-major over ``dist_shape``) along ``dims``.

    ``blocks`` has shape ``mesh_shape + local`` (``mesh_rank`` leading axes); mesh dim ``i`` of
    ``dist_shape`` is concatenated along tensor dim ``dims[i]``, innermost mesh dim first.
    """
    dist_shape = tuple(dist_shape)
    b = np.reshape(blocks, dist_shape + tuple(blocks.shape[mesh_rank:]))
    for i in reversed(range(len(dist_shape))):
        d = dims[i]
        b = np.moveaxis(b, i, i + d)
        s = b.shape
        b = np.reshape(b, s[: i + d] + (s[i + d] * s[i + d + 1],) + s[i + d + 2 :])
    return b


def placement_from_dims(dims: Sequence[int | None]) -> tuple[Placement, ...]:
    """``[None, 3]`` -> ``(PlacementReplicate(), PlacementShard(3))``."""
    return tuple(PlacementReplicate() if d is None else PlacementShard(int(d)) for d in dims)
