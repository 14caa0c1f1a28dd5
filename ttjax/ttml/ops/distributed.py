"""TTML's differentiable collectives (``ttml.ops.distributed``), for local code inside ``shard_map``.

Each op names its backward explicitly with ``jax.custom_vjp``, as TTML's ``comm_ops.cpp`` does
(the fairscale/Megatron pairs), so a per-device ``jax.grad`` gives per-device gradients:

============  ==========================  ================================
op            forward                     backward
============  ==========================  ================================
broadcast     identity                    all_reduce (sum over the axis)
all_reduce    sum over the axis           identity (``noop_backward``)
scatter       keep this device's slice    all_gather
all_gather    concatenate the slices      scatter (keep this device's slice)
============  ==========================  ================================

``axis`` is a mesh axis name (a ``str``); ``None`` makes every op the identity (no TP). Every sum,
forward or backward, goes through :mod:`ttjax.numerics`, so ``ttjax.numerics("deterministic")``
adds the devices' pieces in device order, bit for bit the same on every run.

>>> h = broadcast(x, "cols")            # enter a column-parallel region
>>> y = all_reduce(x @ w_row, "cols")   # leave a row-parallel one
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
from jax import lax

from ttjax import numerics


def _slice(x: Any, dim: int, axis: str) -> Any:
    n = lax.axis_size(axis)
    size = x.shape[dim] // n
    return lax.dynamic_slice_in_dim(x, lax.axis_index(axis) * size, size, axis=dim)


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _broadcast(x: Any, axis: str) -> Any:
    return x


def _broadcast_fwd(x: Any, axis: str) -> tuple[Any, None]:
    return x, None


def _broadcast_bwd(axis: str, _: None, g: Any) -> tuple[Any]:
    return (numerics.psum(g, axis),)


_broadcast.defvjp(_broadcast_fwd, _broadcast_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _all_reduce(x: Any, axis: str) -> Any:
    return numerics.psum(x, axis)


def _all_reduce_fwd(x: Any, axis: str) -> tuple[Any, None]:
    return numerics.psum(x, axis), None


def _all_reduce_bwd(axis: str, _: None, g: Any) -> tuple[Any]:
    return (g,)


_all_reduce.defvjp(_all_reduce_fwd, _all_reduce_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _all_gather(x: Any, dim: int, axis: str) -> Any:
    return numerics.all_gather(x, axis, axis=dim, tiled=True)


def _all_gather_fwd(x: Any, dim: int, axis: str) -> tuple[Any, None]:
    return numerics.all_gather(x, axis, axis=dim, tiled=True), None


def _all_gather_bwd(dim: int, axis: str, _: None, g: Any) -> tuple[Any]:
    return (_slice(g, dim, axis),)


_all_gather.defvjp(_all_gather_fwd, _all_gather_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _scatter(x: Any, dim: int, axis: str) -> Any:
    return _slice(x, dim, axis)


def _scatter_fwd(x: Any, dim: int, axis: str) -> tuple[Any, None]:
    return _slice(x, dim, axis), None


def _scatter_bwd(dim: int, axis: str, _: None, g: Any) -> tuple[Any]:
    return (numerics.all_gather(g, axis, axis=dim, tiled=True),)


_scatter.defvjp(_scatter_fwd, _scatter_bwd)


def broadcast(x: Any, axis: str | None) -> Any:
    """Identity forward; all_reduce of the gradient backward (the input of a column-parallel op)."""
    return x if axis is None else _broadcast(x, axis)


def all_reduce(x: Any, axis: str | None, noop_backward: bool = True) -> Any:
    """Sum over ``axis`` forward; identity backward (TTML's ``noop_backward=True``).

    ``noop_backward=False`` gives the all-reduce's plain transpose (the sum again), for an input
    that is not parallel (identical on every device).
    """
    if axis is None:
        return x
    return _all_reduce(x, axis) if noop_backward else numerics.psum(x, axis)


def all_gather(x: Any, dim: int, axis: str | None) -> Any:
    """Concatenate every device's ``x`` along ``dim``; the backward keeps this device's slice."""
    return x if axis is None else _all_gather(x, dim % x.ndim, axis)


def scatter(x: Any, dim: int, axis: str | None) -> Any:
    """Keep this device's slice of ``x`` along ``dim``; the backward all-gathers the gradient."""
    return x if axis is None else _scatter(x, dim % x.ndim, axis)


__all__ = ["all_gather", "all_reduce", "broadcast", "scatter"]
