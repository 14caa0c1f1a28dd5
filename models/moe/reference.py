"""The dense single-device twin of the MoE layer, in plain JAX (differentiable, jit-able).

Every token runs through every expert; each token then keeps the outputs of its top-k experts
whose capacity it fitted, weighted by its gates. The capacity rule is the layer's (one group per
data device, first choices claim slots in token order, then second choices), but computed here
with ``lax.top_k`` and ``cumsum`` instead of the layer's argmax rounds and triangular matmuls.

>>> out = moe_reference(weights, x.reshape(groups, -1, dim), config)
>>> out.out.shape        # [groups, tokens per group, dim]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from models.moe.config import MoEConfig


class ReferenceOutput(NamedTuple):
    out: Any  # [G, T, D]
    routed: Any  # [G, E] choices per expert in each group
    kept: Any  # [G, E] choices that fitted the capacity
    kept_mask: Any  # [G, T, E] 1 where token t's choice of expert e fitted
    aux_loss: Any  # scalar: E * sum_e f_e P_e over all tokens


def moe_reference(weights: dict[str, Any], x: Any, config: MoEConfig) -> ReferenceOutput:
    """The MoE layer on groups of tokens ``x`` [G, T, D] (G = data-parallel devices)."""
    c = config
    g, t, _ = x.shape
    cap = c.capacity(t)
    hi = jax.lax.Precision.HIGHEST
    probs = jax.nn.softmax(jnp.einsum("gtd,de->gte", x, weights["router"], precision=hi), axis=-1)
    top, idx = jax.lax.top_k(probs, c.top_k)  # [G, T, k]
    gates = top / jnp.sum(top, -1, keepdims=True) if c.normalize_gates and c.top_k > 1 else top
    onehot = jax.nn.one_hot(idx, c.n_experts, dtype=x.dtype)  # [G, T, k, E]
    # Round-major order (all first choices by token, then all second choices): slot = prefix count.
    order = jnp.reshape(jnp.swapaxes(onehot, 1, 2), (g, c.top_k * t, c.n_experts))
    filled = jnp.swapaxes(jnp.reshape(jnp.cumsum(order, axis=1), (g, c.top_k, t, -1)), 1, 2)
    slot = jnp.sum(filled * onehot, -1) - 1  # [G, T, k]
    keep = (slot < cap).astype(x.dtype)
    # Every token through every expert: [G, T, E, D].
    gate_h = jnp.einsum("gtd,edf->gtef", x, weights["w_gate"], precision=hi)
    up_h = jnp.einsum("gtd,edf->gtef", x, weights["w_up"], precision=hi)
    expert_out = jnp.einsum(
        "gtef,efd->gted", jax.nn.silu(gate_h) * up_h, weights["w_down"], precision=hi
    )
    chosen = jnp.take_along_axis(expert_out, idx[..., None], axis=2)  # [G, T, k, D]
    out = jnp.sum(chosen * (gates * keep)[..., None], axis=2)
    routed = jnp.sum(onehot, axis=(1, 2))
    kept_mask = jnp.sum(onehot * keep[..., None], axis=2)
    kept = jnp.sum(kept_mask, axis=1)
    f = jnp.sum(routed, 0) / (g * t)
    p = jnp.mean(probs, axis=(0, 1))
    return ReferenceOutput(out, routed, kept, kept_mask, c.n_experts * jnp.sum(f * p))
