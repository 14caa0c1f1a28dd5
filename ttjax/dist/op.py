"""Tessera's ``op`` namespace: math on a device's local blocks (inside ``dist.local``, or anywhere).

>>> Y_local = op.matmul(W_local, X_local)
>>> loss = op.cross_entropy(logits, labels)
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def matmul(a: Any, b: Any) -> jax.Array:
    """``a @ b`` accumulated in float32 (bf16 inputs too), returned in the inputs' dtype."""
    out = jnp.result_type(a, b)
    return jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(out)


def cross_entropy(logits: Any, labels: Any) -> jax.Array:
    """Mean over every position of ``-log softmax(logits)[label]``, in float32.

    ``logits`` [..., V], integer ``labels`` [...].
    """
    logp = jax.nn.log_softmax(jnp.asarray(logits, jnp.float32), axis=-1)
    picked = jnp.take_along_axis(logp, jnp.asarray(labels)[..., None], axis=-1)[..., 0]
    return -jnp.mean(picked)


def gelu(x: Any) -> jax.Array:
    """Exact (erf) GELU."""
    return jax.nn.gelu(x, approximate=False)


def softmax(x: Any, axis: int = -1) -> jax.Array:
    """Softmax over ``axis`` computed in float32, returned in ``x``'s dtype."""
    x = jnp.asarray(x)
    return jax.nn.softmax(x.astype(jnp.float32), axis=axis).astype(x.dtype)


__all__ = ["cross_entropy", "gelu", "matmul", "softmax"]
