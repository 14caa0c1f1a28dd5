"""TTML's losses (``ttml.ops.loss``) for local code inside ``shard_map``; vocab-parallel under TP.

With the vocabulary split over the TP axis each device holds logits for its slice of the
vocabulary only; the softmax normaliser and the target's logit are summed over the axis (three
small all-reduces of ``[B, T]``), so the ``[B, T, vocab]`` logits are never gathered.

The TP axis is the plan's (``ttjax.plan.ParallelDims.current``): inside the step's role-named
mesh the logits are read as split over ``tp``; elsewhere they are whole.

>>> loss = cross_entropy_loss(logits_local, targets)   # mean over this device's tokens
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from ttjax.plan import ParallelDims
from ttjax.ttml.ops.distributed import all_reduce


def cross_entropy_loss(logits: Any, targets: Any) -> Any:
    """Mean token cross-entropy of ``logits`` [..., V] (this device's vocab slice under TP).

    ``targets`` [...] hold global token ids; device ``r`` of the TP axis owns ids
    ``[r * V, (r + 1) * V)``.
    """
    axis = ParallelDims.current().name("tp")
    z = logits.astype(jnp.float32)
    m = lax.stop_gradient(jnp.max(z, axis=-1, keepdims=True))  # for stability only
    if axis is not None:
        m = lax.pmax(m, axis)
    z = z - m
    sumexp = all_reduce(jnp.sum(jnp.exp(z), axis=-1), axis)
    local = targets
    if axis is not None:
        local = targets - lax.axis_index(axis) * z.shape[-1]
    inside = (local >= 0) & (local < z.shape[-1])
    picked = jnp.take_along_axis(z, jnp.clip(local, 0, z.shape[-1] - 1)[..., None], axis=-1)
    picked = all_reduce(jnp.where(inside, picked[..., 0], 0.0), axis)
    return jnp.mean(jnp.log(sumexp) - picked)


__all__ = ["cross_entropy_loss"]
