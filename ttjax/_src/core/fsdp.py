"""FSDP's mechanics inside ``shard_map``: the parameter all-gather (:func:`gather_sharded`) and
the gradient average over the data-splitting axes (:func:`average_gradients`).

They apply a plan's ``PartitionSpec``\\ s through ``ttjax.numerics``; they sit apart from
:mod:`ttjax._src.core.plan` so the plan (roles, rules, checks) holds no collectives itself: its
``ParallelDims.gather`` calls :func:`gather_sharded`. Public under ``ttjax.plan``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import PartitionSpec as P

from ttjax._src.core import numerics
from ttjax._src.core.errors import ParallelPlanError


def sharded_dim(spec: P, axis: str) -> int | None:
    """The dimension ``spec`` shards over mesh axis ``axis`` alone (None: not sharded over it)."""
    for d, entry in enumerate(tuple(spec)):
        if entry == axis:
            return d
        if isinstance(entry, tuple) and axis in entry:
            raise ParallelPlanError(
                f"the parameter spec {spec} shards dim {d} over {entry}; FSDP gathers a dim "
                f"sharded over {axis!r} alone.\nfix: give {axis!r} its own dimension (the "
                'plan\'s rule ("embed", "fsdp")).'
            )
    return None


def spec_axes(spec: P) -> set[str]:
    """Every mesh axis name ``spec`` shards over."""
    out: set[str] = set()
    for entry in spec:
        if isinstance(entry, str):
            out.add(entry)
        elif isinstance(entry, tuple):
            out.update(entry)
    return out


def average_gradients(grads: Any, specs: Any, axes: Sequence[str]) -> Any:
    """Per-device gradients averaged over the data-splitting mesh ``axes``, inside ``shard_map``.

    A leaf whose spec shards it over one of ``axes`` (FSDP) was already summed over that axis
    by :func:`gather_sharded`'s transpose (a reduce-scatter), so that axis only divides; the
    other axes are summed through ``ttjax.numerics`` (TTML's ``synchronize_gradients``).
    """
    axes = tuple(axes)
    if not axes:
        return grads
    n = math.prod(jax.lax.axis_size(a) for a in axes)

    def one(spec: P, g: Any) -> Any:
        rest = tuple(a for a in axes if a not in spec_axes(spec))
        return (numerics.psum(g, rest) if rest else g) / n

    return jax.tree_util.tree_map(one, specs, grads, is_leaf=lambda x: isinstance(x, P))


def gather_sharded(tree: Any, specs: Any, axis: str | None) -> Any:
    """Each leaf of ``tree`` (one device's shard) made whole over ``axis`` where its spec
    (``specs``: a matching tree of ``PartitionSpec``) shards it, inside ``shard_map``; the
    transpose reduce-scatters the gradient (``ttjax.numerics.all_gather``)."""
    if axis is None:
        return tree

    def one(spec: P, x: Any) -> Any:
        d = sharded_dim(spec, axis)
        return x if d is None else numerics.all_gather(x, axis, axis=d, tiled=True)

    return jax.tree_util.tree_map(one, specs, tree, is_leaf=lambda x: isinstance(x, P))


__all__ = ["average_gradients", "gather_sharded", "sharded_dim", "spec_axes"]
