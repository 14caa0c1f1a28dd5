"""The numerics policy: how every sum across devices (all-reduce, reduce-scatter) is ordered.

The implementation of :mod:`ttjax.numerics`, whose docstring says more.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ttjax._src.core import policy as _policy
from ttjax._src.core.errors import CCLError

MODES = ("fast", "deterministic")

# Thread-local when set through Policy; part of every jit/trace cache key.
_setting = _policy.Setting("ttjax.numerics", MODES, "fast")
Policy = _policy.Policy


def set_numerics(mode: str) -> Policy:
    """Set this thread's policy (``"fast"`` or ``"deterministic"``); usable as a context manager."""
    return Policy(_setting, mode)


def mode() -> str:
    """The policy in effect in this thread: ``"fast"`` or ``"deterministic"``."""
    return _setting.mode()


def deterministic() -> bool:
    """True when sums across devices use the fixed device-index order."""
    return mode() == "deterministic"


# ---------------------------------------------------------------------------------------------
# Reductions inside shard_map
# ---------------------------------------------------------------------------------------------


def _axes(axis_name: Any) -> tuple[Any, ...]:
    """``axis_name`` as a tuple, sorted into mesh order (so 2x4 over both axes = row-major)."""
    axes = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    names = tuple(jax.sharding.get_abstract_mesh().axis_names)
    unknown = [a for a in axes if a not in names]
    if unknown:
        raise CCLError(
            f"ttjax.numerics: axis name(s) {unknown} are not axes of the enclosing shard_map "
            f"(its mesh has {names}).\nfix: reduce over one of {names}, inside jax.shard_map."
        )
    return tuple(sorted(axes, key=names.index))


def group_size(axes: Sequence[Any]) -> int:
    """Devices in the group spanned by mesh ``axes`` (inside shard_map)."""
    return int(np.prod([lax.axis_size(a) for a in axes], dtype=np.int64))


def accumulation_dtype(dtype: Any) -> Any:
    """The dtype sums of ``dtype`` accumulate in: float32 for float16/bfloat16, else ``dtype``.

    >>> ttjax.numerics.accumulation_dtype(np.float16)
    dtype('float32')
    """
    d = jnp.dtype(dtype)
    if jnp.issubdtype(d, jnp.floating) and d.itemsize < 4:
        return jnp.dtype(jnp.float32)
    return d


_acc_dtype = accumulation_dtype


def ordered_sum(rows: Any, dtype: Any = None) -> Any:
    """``rows[0] + rows[1] + ... + rows[n-1]``, left to right, over the leading axis.

    float16/bfloat16 accumulate in float32 and round once at the end. This is the order the
    deterministic policy uses; tests compare against it computed on one device.
    """
    out_dtype = rows.dtype if dtype is None else dtype
    acc_dtype = _acc_dtype(rows.dtype)
    acc = rows[0].astype(acc_dtype)
    for i in range(1, rows.shape[0]):
        acc = acc + rows[i].astype(acc_dtype)
    return acc.astype(out_dtype)


def _ordered_scatter(x: Any, axes: tuple[Any, ...], n: int) -> Any:
    """x [n, m] per device -> [m]: row j of the result lives on device j, summed in device order."""
    received = lax.all_to_all(x, axes, 0, 0, tiled=True)  # row i = device i's piece for me
    return ordered_sum(received)


def _varying(x: Any) -> set[Any]:
    """Mesh axes along which shard_map types ``x`` as varying (empty without check_vma)."""
    aval = jax.typeof(x)
    mat = getattr(aval, "manual_axis_type", None)
    return set(getattr(mat, "varying", None) or getattr(aval, "vma", None) or ())


def _ordered_psum_leaf(x: Any, axes: tuple[Any, ...]) -> Any:
    n = group_size(axes)
    if n == 1:
        return x
    flat = jnp.reshape(x, (-1,))
    pad = (-flat.shape[0]) % n
    if pad:
        flat = jnp.pad(flat, (0, pad))
    mine = _ordered_scatter(jnp.reshape(flat, (n, -1)), axes, n)  # [m]
    if set(axes) & _varying(mine):
        # shard_map checks replication (check_vma): share the reduced pieces with a psum in which
        # each element has one non-zero contributor (exact), so the result is typed replicated.
        idx = lax.axis_index(axes)
        onehot = jnp.zeros((n, mine.shape[0]), mine.dtype)
        full = lax.psum(lax.dynamic_update_index_in_dim(onehot, mine, idx, 0), axes)
    else:  # no replication typing (check_vma=False, as ttjax's ops run): a cheaper all-gather
        full = lax.all_gather(mine, axes, axis=0, tiled=False)
    full = jnp.reshape(full, (-1,))
    return jnp.reshape(full[: full.shape[0] - pad] if pad else full, x.shape)


def _vma_checked(axes: tuple[Any, ...]) -> bool:
    """True inside a ``shard_map(check_vma=True)``: device indices are typed varying there."""
    return bool(set(axes) & _varying(lax.axis_index(axes)))


def _differentiable(x: Any) -> bool:
    return bool(jnp.issubdtype(jnp.result_type(x), jnp.inexact))


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _ordered_psum_nvma(x: Any, axes: tuple[Any, ...]) -> Any:
    """The ordered psum without replication typing; its backward is the ordered psum again (what
    ``lax.psum`` transposes to there), not the reduce-scatter that autodiff of the gather gives."""
    return _ordered_psum_leaf(x, axes)


def _ordered_psum_nvma_fwd(x: Any, axes: tuple[Any, ...]) -> tuple[Any, None]:
    return _ordered_psum_leaf(x, axes), None


def _ordered_psum_nvma_bwd(axes: tuple[Any, ...], _: None, g: Any) -> tuple[Any]:
    return (_ordered_psum_nvma(g, axes),)


_ordered_psum_nvma.defvjp(_ordered_psum_nvma_fwd, _ordered_psum_nvma_bwd)


def _ordered_psum(x: Any, axes: tuple[Any, ...]) -> Any:
    # With check_vma, autodiff of the ordered psum moves pieces only (exact); without it, the
    # backward must be summed, in order, by the custom VJP.
    if group_size(axes) == 1 or not _differentiable(x) or _vma_checked(axes):
        return _ordered_psum_leaf(x, axes)
    return _ordered_psum_nvma(x, axes)


def psum(x: Any, axis_name: Any) -> Any:
    """``lax.psum`` under the numerics policy (deterministic: summed in device-index order).

    ``x`` may be a pytree (e.g. gradients). Call inside ``jax.shard_map``.
    """
    axes = _axes(axis_name)
    if not deterministic():
        return lax.psum(x, axes)
    return jax.tree.map(lambda leaf: _ordered_psum(leaf, axes), x)


reduce_sum = psum


def pmean(x: Any, axis_name: Any) -> Any:
    """The mean over the group under the numerics policy: the DDP gradient average.

    >>> import jax
    >>> from jax.sharding import Mesh, PartitionSpec as P
    >>> dp = Mesh(np.array(jax.devices()[:8]), ("dp",))
    >>> average = jax.shard_map(lambda g: ttjax.numerics.pmean(g, "dp"), mesh=dp,
    ...                         in_specs=P("dp"), out_specs=P())
    >>> average(np.arange(8.0, dtype=np.float32))
    Array([3.5], dtype=float32)
    """
    axes = _axes(axis_name)
    n = group_size(axes)
    return jax.tree.map(lambda s: (s / n).astype(s.dtype), psum(x, axes))


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, tiled: bool = False) -> Any:
    """``lax.psum_scatter`` under the numerics policy (same arguments and shapes); pieces go to
    the devices of ``axis_name`` in mesh order. Its backward is an all-gather (no sum)."""
    axes = _axes(axis_name)
    if not deterministic():
        return lax.psum_scatter(x, axes, scatter_dimension=scatter_dimension, tiled=tiled)
    n = group_size(axes)
    d = scatter_dimension % x.ndim
    size = x.shape[d]
    if (tiled and size % n) or (not tiled and size != n):
        raise CCLError(
            f"ttjax.numerics.psum_scatter: dim {d} of shape {list(x.shape)} has size {size}, "
            f"which does not split over the {n} devices of axes {axes}.\n"
            f"fix: make dim {d} {'a multiple of' if tiled else 'equal to'} {n}."
        )
    moved = jnp.moveaxis(x, d, 0)
    rows = jnp.reshape(moved, (n, size // n, *moved.shape[1:]))
    out = _ordered_scatter(rows, axes, n)  # [size // n, *rest]
    out = jnp.moveaxis(out, 0, d)
    return out if tiled else jnp.squeeze(out, d)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _ordered_gather(x: Any, axes: tuple[Any, ...], dim: int, tiled: bool) -> Any:
    """``lax.all_gather`` whose backward sums the cotangent pieces in device order."""
    return lax.all_gather(x, axes, axis=dim, tiled=tiled)


def _ordered_gather_fwd(x: Any, axes: tuple[Any, ...], dim: int, tiled: bool) -> tuple[Any, None]:
    return lax.all_gather(x, axes, axis=dim, tiled=tiled), None


def _ordered_gather_bwd(axes: tuple[Any, ...], dim: int, tiled: bool, _: None, g: Any) -> Any:
    return (psum_scatter(g, axes, scatter_dimension=dim, tiled=tiled),)


_ordered_gather.defvjp(_ordered_gather_fwd, _ordered_gather_bwd)


def all_gather(x: Any, axis_name: Any, *, axis: int = 0, tiled: bool = False) -> Any:
    """``lax.all_gather`` under the numerics policy (same arguments and shapes); pieces come from
    the devices of ``axis_name`` in mesh order.

    The gather itself moves data only; its backward is a sum of every device's cotangent piece,
    which the deterministic policy orders (:func:`psum_scatter`).
    """
    axes = _axes(axis_name)
    if not deterministic() or group_size(axes) == 1 or not _differentiable(x):
        return lax.all_gather(x, axes, axis=axis, tiled=tiled)
    return _ordered_gather(x, axes, axis % (x.ndim + (0 if tiled else 1)), tiled)


def psum_hierarchical(x: Any, axis_name: Any, local: Any) -> Any:
    """``psum(x, axis_name)`` in three stages, for a mesh whose ``local`` axis is intra-node and
    whose other axes of ``axis_name`` cross nodes: reduce-scatter over ``local``, psum of the
    ``1/local`` piece over the rest, all-gather over ``local``. Each stage follows the policy.

    Only ``1/local`` of the data crosses the node axis (the flat all-reduce sends all of it).
    Deterministic: each device's piece is summed over ``local`` in device order, then over the
    node axis in node order (not the flat order, so not bitwise the flat deterministic result).
    """
    axes, inner = _axes(axis_name), _axes(local)
    outer = tuple(a for a in axes if a not in inner)
    if not inner or set(inner) - set(axes):
        raise CCLError(
            f"ttjax.numerics.psum_hierarchical: local={inner} must be among the reduced axes "
            f"{axes}.\nfix: local= one of {axes} (the intra-node axis)."
        )
    n = group_size(inner)
    gather_to = "invarying" if _vma_checked(inner) else "varying"

    def leaf(v: Any) -> Any:
        flat = jnp.reshape(v, (-1,))
        pad = (-flat.shape[0]) % n
        if pad:
            flat = jnp.pad(flat, (0, pad))
        piece = psum_scatter(flat, inner, scatter_dimension=0, tiled=True)
        if outer:
            piece = psum(piece, outer)
        if gather_to == "invarying":  # inside shard_map(check_vma=True): typed replicated
            full = lax.all_gather(piece, inner, axis=0, tiled=True, to="invarying")
        else:
            full = all_gather(piece, inner, axis=0, tiled=True)
        return jnp.reshape(full[: full.shape[0] - pad] if pad else full, jnp.shape(v))

    return jax.tree.map(leaf, x)


_policy.make_callable(__name__, _setting)

__all__ = [
    "MODES",
    "Policy",
    "accumulation_dtype",
    "all_gather",
    "deterministic",
    "group_size",
    "mode",
    "ordered_sum",
    "pmean",
    "psum",
    "psum_hierarchical",
    "psum_scatter",
    "reduce_sum",
    "set_numerics",
]
