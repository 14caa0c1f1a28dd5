"""TTML's modules: defaults as TTML's constructors have them, and values and per-device gradients
equal to the dense layer (numpy)."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from ttjax.plan import ParallelDims
from ttjax.ttml import cp
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.modules import (
    Attention,
    ColumnParallelLinear,
    Positions,
    RowParallelLinear,
    Stack,
    stack_blocks,
)
from ttjax.ttml.ops.ring_attention import load_balance_order

TP = 4


@pytest.fixture(scope="module")
def par() -> ParallelismContext:
    return ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(1, TP)), None, 1)


def test_defaults_are_ttmls():
    """TTML: ``RowParallelLinear(in, out, has_bias=true, input_is_parallel=false)`` and
    ``ColumnParallelLinear(in, out, has_bias=true, gather_output=false)``."""
    row = inspect.signature(RowParallelLinear).parameters
    assert list(row)[:4] == ["in_features", "out_features", "has_bias", "input_is_parallel"]
    assert (row["has_bias"].default, row["input_is_parallel"].default) == (True, False)
    col = inspect.signature(ColumnParallelLinear).parameters
    assert list(col)[:4] == ["in_features", "out_features", "has_bias", "gather_output"]
    assert (col["has_bias"].default, col["gather_output"].default) == (True, False)


def _run(layer: RowParallelLinear, par: ParallelismContext, w, b, x, c, x_spec):
    """Each device's ``(y, dL/dx, dL/dW_local)`` for ``L = sum(c * layer(x))``."""
    specs = layer.specs(par)

    def body(params, x, c):
        def loss(params, x):
            return jnp.sum(c * layer(params, x))

        y = layer(params, x)
        gp, gx = jax.grad(loss, argnums=(0, 1))(params, x)
        return y[None], gx[None], gp["weight"][None]

    fn = jax.shard_map(
        body,
        mesh=par.jax_mesh,
        in_specs=(specs, x_spec, P()),
        out_specs=(P("tp"), P("tp"), P("tp")),
        check_vma=False,
    )
    y, gx, gw = jax.jit(fn)({"weight": jnp.asarray(w), "bias": jnp.asarray(b)}, x, c)
    return np.asarray(y), np.asarray(gx), np.asarray(gw)


def test_row_parallel_default_scatters_a_replicated_input(par):
    """Default (TTML's): the whole input on every device; the layer keeps its own slice."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((16, 8), np.float32), rng.standard_normal(8).astype(np.float32)
    x, c = rng.standard_normal((3, 16), np.float32), rng.standard_normal((3, 8), np.float32)
    y, gx, gw = _run(RowParallelLinear(16, 8), par, w, b, jnp.asarray(x), jnp.asarray(c), P())
    for d in range(TP):
        np.testing.assert_allclose(y[d], x @ w + b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gx[d], c @ w.T, rtol=1e-5, atol=1e-5)  # the whole gradient
        rows = slice(d * 4, (d + 1) * 4)
        np.testing.assert_allclose(gw[d], x[:, rows].T @ c, rtol=1e-5, atol=1e-5)


def test_row_parallel_with_parallel_input_takes_the_slices(par):
    """``input_is_parallel=True`` (after a column-parallel layer): each device holds its slice."""
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((16, 8), np.float32), rng.standard_normal(8).astype(np.float32)
    x, c = rng.standard_normal((3, 16), np.float32), rng.standard_normal((3, 8), np.float32)
    layer = RowParallelLinear(16, 8, input_is_parallel=True)
    y, gx, gw = _run(layer, par, w, b, jnp.asarray(x), jnp.asarray(c), P(None, "tp"))
    for d in range(TP):
        rows = slice(d * 4, (d + 1) * 4)
        np.testing.assert_allclose(y[d], x @ w + b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gx[d], (c @ w.T)[:, rows], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gw[d], x[:, rows].T @ c, rtol=1e-5, atol=1e-5)


# -- the strategy hooks: Attention, Positions, Stack --------------------------------------------


def _np_attention(q, k, v, causal=True):
    """Causal GQA attention in numpy, [B, T, H, D] q and [B, T, KV, D] k, v -> [B, T, H * D]."""
    b, t, h, d = q.shape
    k, v = (np.repeat(a, h // a.shape[2], axis=2) for a in (k, v))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d)
    if causal:
        s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, t, h * d)


def _np_rope(x, pos):
    """A rotate-half RoPE of x [B, T, H, D] at positions ``pos`` [T] (numpy)."""
    d = x.shape[-1]
    ang = np.outer(pos, 1.0 / 100.0 ** (np.arange(0, d, 2) / d))
    cos, sin = (np.concatenate([f(ang)] * 2, -1)[None, :, None, :] for f in (np.cos, np.sin))
    x1, x2 = np.split(x, 2, axis=-1)
    return x * cos + np.concatenate([-x2, x1], -1) * sin


def _rope(x, pos):
    d = x.shape[-1]
    ang = jnp.outer(pos.astype(jnp.float32), 1.0 / 100.0 ** (jnp.arange(0, d, 2) / d))
    cos, sin = (jnp.concatenate([f(ang)] * 2, -1)[None, :, None, :] for f in (jnp.cos, jnp.sin))
    x1, x2 = jnp.split(x, 2, axis=-1)
    return x * cos + jnp.concatenate([-x2, x1], -1) * sin


def _qkv(t=16, h=4, kv=2, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((2, t, n, d)).astype(np.float32) for n in (h, kv, kv))


def test_attention_is_causal_gqa_attention_with_its_rope_hook():
    """Outside shard_map nothing splits: numpy's causal GQA attention, RoPE at 0..T-1."""
    q, k, v = _qkv()
    np.testing.assert_allclose(
        np.asarray(Attention()(q, k, v)), _np_attention(q, k, v), rtol=1e-5, atol=1e-5
    )
    pos = np.arange(q.shape[1])
    want = _np_attention(_np_rope(q, pos), _np_rope(k, pos), v)
    got = np.asarray(Attention(rope=_rope)(q, k, v))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    full = _np_attention(q, k, v, causal=False)
    np.testing.assert_allclose(np.asarray(Attention(causal=False)(q, k, v)), full, atol=1e-5)


@pytest.mark.slow
def test_attention_under_cp_is_the_unsplit_attention():
    """cp=2 splits the sequence (load-balanced): ring attention with RoPE at each token's global
    position gives the unsplit run's output and gradients."""
    dims = ParallelDims.from_sizes(cp=2)
    mesh = dims.jax_mesh(np.array(jax.devices()[:2]))
    q, k, v = _qkv(t=8, seed=1)
    attn = Attention(rope=_rope)

    def loss(q, k, v):
        return jnp.sum(jnp.sin(attn(q, k, v)))

    seq = P(None, "cp")
    fn = jax.jit(
        jax.shard_map(
            lambda *a: (attn(*a), jax.grad(loss, argnums=(0, 1, 2))(*a)),
            mesh=mesh,
            in_specs=(seq, seq, seq),
            out_specs=(seq, (seq, seq, seq)),
            check_vma=False,
        )
    )
    y, grads = fn(*(cp.place_sequence(a, dims, axis=1) for a in (q, k, v)))
    want_y = jax.jit(attn)(q, k, v)
    want_g = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v)
    np.testing.assert_allclose(
        np.asarray(cp.restore_sequence(y, dims)), np.asarray(want_y), rtol=1e-5, atol=1e-5
    )
    # Each device's gradient covers its own tokens; restored, they are the unsplit gradient.
    for g, w in zip(grads, want_g, strict=True):
        got = np.asarray(cp.restore_sequence(g, dims))
        np.testing.assert_allclose(got, np.asarray(w), rtol=1e-4, atol=1e-5)


def test_positions_are_the_load_balanced_global_positions():
    assert np.asarray(Positions()(5)).tolist() == [0, 1, 2, 3, 4]
    assert Positions().length(5) == 5
    dims = ParallelDims.from_sizes(dp=2, cp=2)
    mesh = dims.jax_mesh(np.array(jax.devices()[:4]))
    table = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)

    def body(x):
        return Positions()(4)[None], Positions().rows(table, 4)[None], Positions().length(4) + x

    pos, rows, length = jax.jit(
        jax.shard_map(
            body, mesh=mesh, in_specs=P(), out_specs=(P("cp"), P("cp"), P()), check_vma=False
        )
    )(jnp.zeros((), jnp.int32))
    order = load_balance_order(8, 2)  # device 0: chunks 0, 3; device 1: chunks 1, 2
    assert np.asarray(pos).tolist() == [order[:4].tolist(), order[4:].tolist()]
    np.testing.assert_array_equal(np.asarray(rows), table[order].reshape(2, 4, 3))
    assert int(length) == 8


def _stack(policy="full"):
    layers = {"fc": ColumnParallelLinear(8, 16), "proj": RowParallelLinear(16, 8, True, True)}

    def block(p, x):
        return x + layers["proj"](p["proj"], jax.nn.gelu(layers["fc"](p["fc"], x)))

    keys = jax.random.split(jax.random.key(3), 6)
    blocks = [{n: m.init(k) for (n, m), k in zip(layers.items(), keys[2 * i :])} for i in range(3)]
    blocks = [jax.tree.map(lambda a, i=i: a + 0.1 * i, b) for i, b in enumerate(blocks)]
    return Stack(block, layers, policy), block, stack_blocks(blocks)


@pytest.mark.parametrize("policy", ["full", "none"])
def test_stack_is_the_loop_over_its_blocks(policy):
    stack, block, stacked = _stack(policy)
    x = np.random.default_rng(4).standard_normal((2, 5, 8)).astype(np.float32)

    def loop(stacked, x):
        for i in range(3):
            x = block(jax.tree.map(lambda a, i=i: a[i], stacked), x)
        return x

    want = jax.jit(loop)(stacked, x)
    np.testing.assert_allclose(np.asarray(jax.jit(stack)(stacked, x)), np.asarray(want), rtol=1e-5)
    assert stack.axes()["fc"]["weight"].names == ("layers", "embed", "mlp")


def test_stack_under_fsdp_gathers_each_block_and_equals_the_unsplit_run():
    """fsdp=4 shards every block on its embed dim; the Stack gathers one block where it runs:
    the output is the unsplit run's and each device's gradient shard, summed over the fsdp
    devices by the gather's transpose, is its slice of 4 x the unsplit gradient (the input is
    the same on every device here)."""
    stack, _, stacked = _stack()
    dims = ParallelDims.from_sizes(fsdp=4)
    mesh = dims.jax_mesh(np.array(jax.devices()[:4]))
    specs = dims.specs(stack.axes(), stacked)
    assert specs["fc"]["weight"] == P(None, "fsdp") and specs["proj"]["weight"] == P(
        None, None, "fsdp"
    )
    x = np.random.default_rng(5).standard_normal((2, 5, 8)).astype(np.float32)

    def loss(p, x):
        return jnp.sum(jnp.sin(stack(p, x)))

    fn = jax.jit(
        jax.shard_map(
            lambda p, x: (stack(p, x), jax.grad(loss)(p, x)),
            mesh=mesh,
            in_specs=(specs, P()),
            out_specs=(P(), specs),
            check_vma=False,
        )
    )
    y, grads = fn(stacked, x)
    want_y, want = jax.jit(lambda p, x: (stack(p, x), jax.grad(loss)(p, x)))(stacked, x)
    np.testing.assert_allclose(np.asarray(y), np.asarray(want_y), rtol=1e-5, atol=1e-6)
    flat_specs = jax.tree.leaves(specs, is_leaf=lambda s: isinstance(s, P))
    for g, w, spec in zip(jax.tree.leaves(grads), jax.tree.leaves(want), flat_specs, strict=True):
        n = 4 if "fsdp" in tuple(spec) else 1  # a replicated leaf keeps this device's gradient
        np.testing.assert_allclose(np.asarray(g), n * np.asarray(w), rtol=1e-4, atol=1e-5)
