"""TTML's ``ttml.core.distributed``: fabric set-up (and, from the training half, gradient sync)."""

from __future__ import annotations

from typing import Any

import jax
from jax import lax

import ttjax
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.mgd import MeshGraphDescriptor


def enable_fabric(num_devices: int) -> MeshGraphDescriptor:
    """Pick the mesh graph descriptor for ``num_devices``; call it before ``open_device``.

    ``TT_MESH_GRAPH_DESC_PATH`` (or ``TTJAX_MESH_GRAPH_DESC_PATH``) wins; otherwise 8 devices take
    the T3000 1x8 line and 32 the Galaxy 1x32 line.
    """
    return AutoContext.get_instance().enable_fabric(num_devices)


def synchronize_gradients(grads: Any, axis: str | None) -> Any:
    """DDP: average every gradient over the mesh axis ``axis`` (inside ``shard_map``).

    TTML's algorithm: all_reduce (sum), then multiply by ``1 / size`` ("all_reduce Mean is not
    supported"). The whole pytree goes in one call, so XLA may combine the per-parameter
    all-reduces. The sum follows ``ttjax.numerics``: under ``"deterministic"`` it adds the
    replicas in device order, bit for bit the same on every run. ``axis=None`` (DDP off) returns
    ``grads`` unchanged.

    >>> grads = synchronize_gradients(jax.grad(loss)(params, batch), "x")
    """
    if axis is None:
        return grads
    scale = 1.0 / lax.axis_size(axis)
    return jax.tree_util.tree_map(lambda g: g * scale, ttjax.numerics.psum(grads, axis))


__all__ = ["enable_fabric", "synchronize_gradients"]
