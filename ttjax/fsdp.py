"""FSDP (ZeRO-3; TTML's ``enable_fsdp``): parameters, gradients and optimizer state sharded over
the plan's ``fsdp`` mesh axis, the batch split over it as DDP splits it.

Placing is the plan's job: its rules ``("embed", "fsdp")`` and ``("batch", "fsdp")`` shard each
parameter on its embed dimension (optimizer moments lie like their parameters) and split the
batch. What FSDP adds is one collective pair, here: a parameter is all-gathered where it is used
(:meth:`ttjax.plan.Axes.gather`, in forward and again in a rematerialized backward), and its
gradient, the gather's transpose, is reduce-scattered back onto the shard. That sum honours
:mod:`ttjax.numerics`: under ``"deterministic"`` it is added in device order.

>>> import jax
>>> from jax.sharding import Mesh, PartitionSpec as P
>>> line = Mesh(np.array(jax.devices()[:4]), ("fsdp",))
>>> whole = jax.shard_map(lambda shard: gather(shard, "fsdp", 1), mesh=line,
...                       in_specs=P(None, "fsdp"), out_specs=P(), check_vma=False)
>>> w = np.arange(8.0, dtype=np.float32).reshape(1, 8)    # 2 columns per device
>>> whole(w)
Array([[0., 1., 2., 3., 4., 5., 6., 7.]], dtype=float32)
>>> with ttjax.numerics("deterministic"):                  # d/dw sum(w * w), summed in order
...     jax.grad(lambda w: (whole(w) * w).sum())(w)
Array([[ 0.,  2.,  4.,  6.,  8., 10., 12., 14.]], dtype=float32)
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ttjax import numerics


def gather(x: Any, axis_name: str, dim: int) -> Any:
    """``x``'s shards over ``axis_name`` joined along ``dim`` (inside ``shard_map``); the gradient
    is reduce-scattered along ``dim`` under the numerics policy."""
    if not numerics.deterministic() or not jnp.issubdtype(x.dtype, jnp.inexact):
        return lax.all_gather(x, axis_name, axis=dim, tiled=True)  # transposes to psum_scatter
    return _ordered_gather(x, axis_name, dim)


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _ordered_gather(x: Any, axis_name: str, dim: int) -> Any:
    return lax.all_gather(x, axis_name, axis=dim, tiled=True)


def _fwd(x: Any, axis_name: str, dim: int) -> tuple[Any, None]:
    return lax.all_gather(x, axis_name, axis=dim, tiled=True), None


def _bwd(axis_name: str, dim: int, _: None, g: Any) -> tuple[Any]:
    return (numerics.psum_scatter(g, axis_name, scatter_dimension=dim, tiled=True),)


_ordered_gather.defvjp(_fwd, _bwd)

__all__ = ["gather"]
