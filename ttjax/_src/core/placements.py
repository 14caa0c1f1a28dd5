"""Placements: how a mesh tensor's per-device data relates along one mesh axis.

The implementation of :mod:`ttjax.placements`, whose docstring says more.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PlacementShard:
    """Tensor dim ``dim`` is split across the mesh axis."""

    dim: int

    def __repr__(self) -> str:
        return f"PlacementShard({self.dim})"

    def __str__(self) -> str:
        return f"S({self.dim})"

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim

    def is_replicate(self) -> bool:
        return False

    def is_local(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class PlacementReplicate:
    """Every device along the mesh axis holds the same values."""

    def __repr__(self) -> str:
        return "PlacementReplicate()"

    def __str__(self) -> str:
        return "R"

    def is_shard(self, dim: int | None = None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return True

    def is_local(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class PlacementLocal:
    """Devices along the mesh axis hold values that are not slices of one tensor.

    The result of a row-parallel matmul (partial sums) or of an op that mixes shards is such a
    tensor; TT-NN would just call it "a tensor on each device". The global array stores it on a
    hidden leading axis, one entry per device along the mesh axis.
    """

    def __repr__(self) -> str:
        return "PlacementLocal()"

    def __str__(self) -> str:
        return "L"

    def is_shard(self, dim: int | None = None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_local(self) -> bool:
        return True


Placement = PlacementShard | PlacementReplicate | PlacementLocal

REPLICATE = PlacementReplicate()
LOCAL = PlacementLocal()


def placements_str(placements: tuple[Placement, ...]) -> str:
    """Short human form, e.g. ``[R, S(3)]``."""
    return "[" + ", ".join(map(str, placements)) + "]"


__all__ = [
    "LOCAL",
    "REPLICATE",
    "Placement",
    "PlacementLocal",
    "PlacementReplicate",
    "PlacementShard",
    "placements_str",
]
