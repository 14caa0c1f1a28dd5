"""JAX transforms that understand mesh tensors: ``scan`` over stacked per-layer tensors.

The implementation of :mod:`ttjax.transforms`, whose docstring says more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import jax

from ttjax._src.core.errors import ShardingError
from ttjax._src.core.placements import Placement, PlacementLocal, PlacementShard
from ttjax._src.core.tensor import Tensor, TensorSpec


def _is_tensor(x: Any) -> bool:
    return isinstance(x, Tensor)


def _shift(placements: tuple[Placement, ...], by: int) -> tuple[Placement, ...]:
    return tuple(
        PlacementShard(p.dim + by) if isinstance(p, PlacementShard) else p for p in placements
    )


def _check_stacked(t: Tensor, length: int | None, path: str) -> int:
    if not t._shape:
        raise ShardingError(
            f"scan: {path} is a scalar tensor; stacked tensors need a leading axis."
        )
    for i, p in enumerate(t._placements):
        if isinstance(p, PlacementLocal) or (isinstance(p, PlacementShard) and p.dim == 0):
            raise ShardingError(
                f"scan: {path} has placement {p!r} on mesh axis {i}; the leading (layer) axis must "
                "be unsharded and the tensor must not hold per-device values.\n"
                "fix: stack per-layer tensors on a new, replicated leading axis "
                "(e.g. ShardTensorToMesh on dim + 1)."
            )
    if length is not None and t._shape[0] != length:
        raise ShardingError(
            f"scan: {path} has {t._shape[0]} entries on its leading axis, others have {length}.\n"
            "fix: stack the same number of layers everywhere."
        )
    return t._shape[0]


def _unstacked(spec: TensorSpec) -> TensorSpec:
    """The spec of one slice along the leading (layer) axis."""
    return spec.replace(placements=_shift(spec.placements, -1), shape=spec.shape[1:])


def _stacked(spec: TensorSpec, n: int) -> TensorSpec:
    """The spec of ``n`` slices stacked on a new leading axis."""
    return spec.replace(placements=_shift(spec.placements, 1), shape=(n, *spec.shape))


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any,
    length: int | None = None,
    unroll: int | bool = 1,
) -> tuple[Any, Any]:
    """``jax.lax.scan`` where ``xs`` and the per-step outputs may hold ttjax Tensors.

    Tensors in ``xs`` are sliced along their leading (per-device) axis; Tensors ``f`` returns as
    per-step outputs are stacked into new Tensors with a leading axis. The carry keeps its
    metadata, so every step must return the carry with the same shapes and placements.
    """
    leaves, treedef = jax.tree_util.tree_flatten(xs, is_leaf=_is_tensor)
    n = length
    metas: list[TensorSpec | None] = []
    raw: list[Any] = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            n = _check_stacked(leaf, n, f"xs leaf {i}")
            metas.append(_unstacked(leaf.spec))
            raw.append(leaf._data)
        else:
            metas.append(None)
            raw.append(leaf)
    out_info: dict[str, Any] = {}

    def body(carry: Any, raw_slice: list[Any]) -> tuple[Any, Any]:
        sliced = [
            leaf if meta is None else Tensor(leaf, meta) for leaf, meta in zip(raw_slice, metas)
        ]
        new_carry, ys = f(carry, jax.tree_util.tree_unflatten(treedef, sliced))
        y_leaves, y_def = jax.tree_util.tree_flatten(ys, is_leaf=_is_tensor)
        out_info["treedef"] = y_def
        out_info["metas"] = [y.spec if isinstance(y, Tensor) else None for y in y_leaves]
        return new_carry, [y._data if isinstance(y, Tensor) else y for y in y_leaves]

    carry, ys_raw = jax.lax.scan(body, init, raw, length=n, unroll=unroll)
    ys = [
        y if meta is None else Tensor(y, _stacked(meta, cast(int, n)))
        for y, meta in zip(ys_raw, out_info["metas"])
    ]
    return carry, jax.tree_util.tree_unflatten(out_info["treedef"], ys)


__all__ = ["scan"]
