"""The parallelism plan in Tessera's names: a role-named ``dist.Mesh`` and the ``ShardSpec`` of a
tensor with logical axes (``ttjax.plan``'s rule table decides which dim splits over which role).

>>> mesh = dist.Mesh(axes=["dp", "tp"], devices=range(8), shape=(2, 4))
>>> dist.shard_spec(dist.plan_of(mesh), LogicalAxes("mlp", "embed"))   # rows over tp
ShardSpec(partition=(0,), mesh_axes=('tp',))
"""

from __future__ import annotations

from typing import Any

from ttjax.dist.layout import REPLICATED, ShardSpec
from ttjax.dist.mesh import Mesh
from ttjax.plan import ROLES, LogicalAxes, ParallelDims


def plan_of(mesh: Mesh) -> ParallelDims:
    """The plan of ``mesh``: an axis named by a role (``"dp"``, ``"tp"``, ``"pp"``, ...) plays
    it; any other axis plays none (tensors stay whole along it)."""
    return ParallelDims(mesh.shape, tuple(a if a in ROLES else None for a in mesh.axes))


def shard_spec(dims: ParallelDims, axes: LogicalAxes) -> Any:
    """The ``dist`` layout of a tensor whose dims have the logical ``axes`` under ``dims``: a
    :class:`ShardSpec` over the role-named mesh axes, or ``REPLICATED`` when no role splits it."""
    parts: list[int] = []
    mesh_axes: list[Any] = []
    for d, entry in enumerate(dims.spec(axes)):
        roles = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        if roles:
            parts.append(d)
            mesh_axes.append(roles[0] if len(roles) == 1 else roles)
    if not parts:
        return REPLICATED
    return ShardSpec(partition=tuple(parts), mesh_axes=tuple(mesh_axes))


__all__ = ["plan_of", "shard_spec"]
