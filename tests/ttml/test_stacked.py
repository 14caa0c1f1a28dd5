"""Blocks stacked on a layer axis (``ttjax.ttml.stacked``): the scan equals a Python loop over the
same blocks, forward and gradients, under every remat policy; the stacked specs, the decay rule
and the program size do not depend on the depth.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from ttjax.errors import ConfigError
from ttjax.ttml.stacked import (
    REMAT_POLICIES,
    scan_blocks,
    stack_blocks,
    stacked_specs,
    unstack_blocks,
)
from ttjax.ttml.train import decay_matrices


def _block(p, x):
    """A residual MLP block with a norm: enough to make remat's recomputation matter."""
    h = x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-5) * p["g"]
    return x + jnp.tanh(h @ p["w1"] + p["b1"]) @ p["w2"]


def _blocks(n, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return [
        {
            "g": (1 + 0.1 * rng.standard_normal(d)).astype(np.float32),
            "w1": (0.3 * rng.standard_normal((d, 2 * d))).astype(np.float32),
            "b1": (0.1 * rng.standard_normal(2 * d)).astype(np.float32),
            "w2": (0.3 * rng.standard_normal((2 * d, d))).astype(np.float32),
        }
        for _ in range(n)
    ]


def _loop(blocks, x):
    for p in blocks:
        x = _block(p, x)
    return x


# The scan and the Python loop are the same sums compiled into different fusions, so XLA may add
# their terms in different orders (and does, on some CPUs: 1 element of 96 off by 1.8e-6 on one
# 2-core machine). Reordering a float32 sum of n terms moves it by at most about n * eps times
# the size of the terms, so each comparison allows TERMS * eps * (largest magnitude) absolutely:
# per block the norm's mean adds d terms, h @ w1 adds d and tanh(..) @ w2 adds 2d (4d in all);
# the backward pass runs the same reductions transposed, so gradients chain twice as many.
_EPS32 = float(np.finfo(np.float32).eps)


def _order_atol(want, blocks: int, d: int, passes: int) -> float:
    """Absolute tolerance for two summation orders of ``want`` (see the comment above)."""
    return passes * blocks * 4 * d * _EPS32 * float(np.max(np.abs(want)))


@pytest.mark.parametrize("policy", sorted(REMAT_POLICIES))
def test_scan_equals_the_python_loop_forward_and_gradients(policy):
    n, d = 5, 8
    blocks = _blocks(n, d)
    x = np.random.default_rng(1).standard_normal((3, 4, 8)).astype(np.float32)

    def scanned(stacked, x):
        return jnp.sum(jnp.sin(scan_blocks(_block, stacked, x, policy)))

    def looped(blocks, x):
        return jnp.sum(jnp.sin(_loop(blocks, x)))

    stacked = stack_blocks(blocks)
    want = _loop(blocks, x)
    np.testing.assert_allclose(
        jax.jit(lambda s, x: scan_blocks(_block, s, x, policy))(stacked, x),
        want,
        rtol=1e-5,
        atol=_order_atol(want, n, d, passes=1),
    )
    got = jax.jit(jax.grad(scanned, argnums=(0, 1)))(stacked, x)
    want_blocks, want_x = jax.jit(jax.grad(looped, argnums=(0, 1)))(blocks, x)
    np.testing.assert_allclose(got[1], want_x, rtol=1e-5, atol=_order_atol(want_x, n, d, 2))
    for i, (g, w) in enumerate(zip(unstack_blocks(got[0]), want_blocks)):
        for k in w:
            atol = _order_atol(w[k], n, d, passes=2)
            np.testing.assert_allclose(g[k], w[k], rtol=1e-5, atol=atol, err_msg=f"block {i} {k}")


def test_remat_recomputes_the_block_and_none_does_not():
    """``full`` saves no block activation for the backward pass; ``none`` saves them."""
    stacked = stack_blocks(_blocks(3))
    x = jnp.ones((2, 4, 8))

    def residuals(policy):
        f = lambda s: jnp.sum(scan_blocks(_block, s, x, policy))  # noqa: E731
        _, vjp = jax.vjp(f, stacked)
        return sum(int(np.prod(a.shape)) for a in jax.tree.leaves(vjp))

    assert residuals("full") < residuals("dots") <= residuals("none")


def test_stack_unstack_and_specs():
    blocks = _blocks(3)
    stacked = stack_blocks(blocks)
    assert stacked["w1"].shape == (3, 8, 16) and stacked["g"].shape == (3, 8)
    for got, want in zip(unstack_blocks(stacked), blocks):
        for k in want:
            np.testing.assert_array_equal(np.asarray(got[k]), want[k])
    specs = stacked_specs({"w": P(None, "x"), "b": P("x"), "g": P()})
    assert specs == {"w": P(None, None, "x"), "b": P(None, "x"), "g": P(None)}


def test_decay_judges_stacked_blocks_per_block():
    """Stacked biases and norms ([n_layer, d]) are not decayed; stacked matrices are."""
    params = {
        "blocks": stack_blocks(_blocks(2)),
        "wte": {"weight": np.zeros((4, 8))},
        "b": np.zeros(8),
    }
    mask = decay_matrices(params)
    assert mask["blocks"] == {"g": False, "b1": False, "w1": True, "w2": True}
    assert mask["wte"]["weight"] and not mask["b"]


def test_bad_policy_and_no_blocks_are_config_errors():
    with pytest.raises(ConfigError, match="remat_policy='all'") as info:
        scan_blocks(_block, stack_blocks(_blocks(1)), jnp.ones((1, 8)), "all")
    assert str(info.value).splitlines()[-1].startswith("fix: one of ['full', 'dots', 'none']")
    with pytest.raises(ConfigError, match="no blocks to stack"):
        stack_blocks([])


def test_program_size_does_not_grow_with_depth():
    """The lowered gradient program of 2 and 12 blocks is the same size: one block is traced."""

    def text(n):
        stacked = stack_blocks(_blocks(n))
        f = jax.grad(lambda s, x: jnp.sum(scan_blocks(_block, s, x)))
        return jax.jit(f).lower(stacked, jnp.ones((2, 8))).as_text()

    small, deep = text(2), text(12)
    assert small.count("dot_general") == deep.count("dot_general")
    assert abs(len(deep) - len(small)) < 0.02 * len(small)
