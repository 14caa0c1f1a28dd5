"""Ring attention (CP) equals single-device causal attention (``jax.nn.dot_product_attention``),
values and gradients, on 1x8 (cp 8), 2x4 (cp 4, batch over the other axis) and 1x2 (cp 2: one
hop, an empty scan); layout helpers against numpy; bad input raises ttjax errors."""

from __future__ import annotations

import doctest
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from tests.conftest import mesh_of
from ttjax.errors import ShapeMismatchError, ShardingError
from ttjax.ttml.ops import ring_attention as ring_attention_module
from ttjax.ttml.ops.ring_attention import (
    inverse_load_balance_order,
    load_balance_order,
    local_positions,
    ring_attention,
)

B, T, H, HK, D = 2, 32, 4, 2, 8  # GQA: 4 query heads over 2 KV heads; T = 8 x the 1x8 chunk


def _qkvw(seed: int = 0) -> tuple[jax.Array, ...]:
    rng = np.random.default_rng(seed)
    shapes = [(B, T, H, D), (B, T, HK, D), (B, T, HK, D), (B, T, H, D)]
    return tuple(jnp.asarray(rng.standard_normal(s), jnp.float32) for s in shapes)


def _reference(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool = True) -> jax.Array:
    return jax.nn.dot_product_attention(q, k, v, is_causal=causal)


def _ring(shape: tuple[int, int], load_balanced: bool, causal: bool = True) -> Callable[..., Any]:
    """Global ``f(q, k, v)``: permute, shard batch over mesh axis 0 and T over axis 1, ring, unpermute."""
    mesh = mesh_of(shape)
    dp, cp = mesh.jax_mesh.axis_names
    n = mesh.jax_mesh.shape[cp]
    order = load_balance_order(T, n) if load_balanced else np.arange(T)
    inverse = inverse_load_balance_order(T, n) if load_balanced else np.arange(T)
    spec = P(dp, cp)
    local = jax.shard_map(
        lambda q, k, v: ring_attention(q, k, v, cp, causal=causal, load_balanced=load_balanced),
        mesh=mesh.jax_mesh,
        in_specs=(spec, spec, spec),
        out_specs=spec,
    )
    return lambda q, k, v: local(q[:, order], k[:, order], v[:, order])[:, inverse]


# cp = 8 (1x8) compiles the longest: `make test-all`; 2x4 (cp 4) and 1x2 run both layouts'
# forward and backward, and the tests below run cp = 8's balanced forward.
@pytest.mark.parametrize(
    ("shape", "load_balanced"),
    [
        pytest.param((1, 8), True, marks=pytest.mark.slow),
        pytest.param((1, 8), False, marks=pytest.mark.slow),
        ((2, 4), True),
        pytest.param((2, 4), False, marks=pytest.mark.slow),
        pytest.param((1, 2), True, marks=pytest.mark.slow),
    ],
    ids=["1x8-balanced", "1x8-plain", "2x4-balanced", "2x4-plain", "1x2-balanced"],
)
def test_ring_attention_matches_full_causal_attention_and_its_gradients(
    shape: tuple[int, int], load_balanced: bool
) -> None:
    q, k, v, w = _qkvw()
    ring = _ring(shape, load_balanced)
    np.testing.assert_allclose(jax.jit(ring)(q, k, v), _reference(q, k, v), atol=1e-5, rtol=1e-5)

    def grads(f: Callable[..., Any]) -> Callable[..., Any]:
        return jax.jit(jax.grad(lambda q, k, v: jnp.sum(f(q, k, v) * w), argnums=(0, 1, 2)))

    for name, got, want in zip("qkv", grads(ring)(q, k, v), grads(_reference)(q, k, v)):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5, err_msg=f"d loss / d {name}")


def test_ring_attention_without_causal_mask() -> None:
    q, k, v, _ = _qkvw(1)
    got = jax.jit(_ring((1, 8), load_balanced=True, causal=False))(q, k, v)
    np.testing.assert_allclose(got, _reference(q, k, v, causal=False), atol=1e-5, rtol=1e-5)


def test_axis_none_is_plain_causal_attention_with_scale() -> None:
    q, k, v, _ = _qkvw(2)
    want = jax.nn.dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    got = jax.jit(lambda q, k, v: ring_attention(q, k, v, None, scale=0.3))(q, k, v)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_array_equal(local_positions(T, None), np.arange(T))


def test_bfloat16_inputs_combine_in_float32() -> None:
    q, k, v, _ = (x.astype(jnp.bfloat16) for x in _qkvw(3))
    got = jax.jit(_ring((1, 8), load_balanced=True))(q, k, v)
    assert got.dtype == jnp.bfloat16
    want = _reference(*(x.astype(jnp.float32) for x in (q, k, v)))
    np.testing.assert_allclose(got.astype(jnp.float32), want, atol=2e-2)


def test_kv_blocks_travel_in_one_scan_not_unrolled() -> None:
    q, k, v, _ = _qkvw()
    jaxpr = str(jax.make_jaxpr(_ring((1, 8), load_balanced=True))(q, k, v))
    # cp = 8 steps: the first hop, then one scan whose body sends the block on (k and v) while
    # it folds it in (remat'd), then the last block; 2 ppermutes before the scan, 2 inside it
    assert jaxpr.count("scan[") == 1, jaxpr
    assert jaxpr.count("ppermute[") == 4, jaxpr
    scan = jaxpr.index("scan[")
    assert jaxpr[:scan].count("ppermute[") == 2 and "length=6" in jaxpr[scan:], jaxpr
    assert "remat" in jaxpr or "checkpoint" in jaxpr, jaxpr


def test_load_balance_order_docstring_example() -> None:
    (test,) = doctest.DocTestFinder().find(load_balance_order, globs=vars(ring_attention_module))
    result = doctest.DocTestRunner().run(test)
    assert result.attempted == 3 and result.failed == 0, result


def _numpy_order(seq_len: int, cp: int) -> np.ndarray:
    """Device i's tokens, device by device: the chunks i and 2cp-1-i of 2cp equal chunks."""
    c = seq_len // (2 * cp)
    return np.concatenate(
        [np.r_[i * c : (i + 1) * c, (2 * cp - 1 - i) * c : (2 * cp - i) * c] for i in range(cp)]
    )


@pytest.mark.parametrize(("seq_len", "cp"), [(2, 1), (8, 2), (32, 4), (48, 8), (64, 8)])
def test_load_balance_order_and_inverse(seq_len: int, cp: int) -> None:
    order = load_balance_order(seq_len, cp)
    np.testing.assert_array_equal(order, _numpy_order(seq_len, cp))
    np.testing.assert_array_equal(np.sort(order), np.arange(seq_len))
    inverse = inverse_load_balance_order(seq_len, cp)
    np.testing.assert_array_equal(order[inverse], np.arange(seq_len))
    np.testing.assert_array_equal(inverse[order], np.arange(seq_len))
    # the point of it: every device's queries see the same number of (query, key) causal pairs
    work = [int(np.sum(block + 1)) for block in order.reshape(cp, -1)]
    assert len(set(work)) == 1, work


@pytest.mark.parametrize("load_balanced", [True, False], ids=["balanced", "plain"])
def test_local_positions_are_each_devices_global_positions(load_balanced: bool) -> None:
    mesh = mesh_of((2, 4))
    _, cp = mesh.jax_mesh.axis_names
    t_local = 6
    f = jax.shard_map(
        lambda: local_positions(t_local, cp, load_balanced),
        mesh=mesh.jax_mesh,
        in_specs=(),
        out_specs=P(cp),
    )
    want = load_balance_order(4 * t_local, 4) if load_balanced else np.arange(4 * t_local)
    np.testing.assert_array_equal(jax.jit(f)(), want)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: load_balance_order(30, 4), "seq_len=30"),
        (lambda: load_balance_order(16, 0), "cp=0"),
        (lambda: inverse_load_balance_order(12, 4), "seq_len=12"),
        (lambda: load_balance_order(-8, 2), "seq_len=-8"),
    ],
)
def test_layout_errors(call: Callable[[], Any], words: str) -> None:
    with pytest.raises(ShardingError, match=words) as info:
        call()
    assert isinstance(info.value, ValueError) and "fix:" in str(info.value)


def test_shape_errors() -> None:
    q, k, v, _ = _qkvw()
    with pytest.raises(ShapeMismatchError, match="4 heads are not a multiple of k/v's 3") as e:
        ring_attention(q, k[:, :, :1].repeat(3, 2), v[:, :, :1].repeat(3, 2), None)
    assert "fix:" in str(e.value)
    with pytest.raises(ShapeMismatchError, match=r"'v': \(2, 32, 2\)"):
        ring_attention(q, k, v[..., 0], None)
    with pytest.raises(ShapeMismatchError, match="share batch, tokens"):
        ring_attention(q, k[:, :16], v[:, :16], None)


def test_axis_errors() -> None:
    q, k, v, _ = _qkvw()
    with pytest.raises(ShardingError, match="axis='cp' is not a mesh axis") as e:
        ring_attention(q, k, v, "cp")
    assert "fix:" in str(e.value)
    mesh = mesh_of((1, 8))
    cp = mesh.jax_mesh.axis_names[1]
    odd = jax.shard_map(
        lambda q, k, v: ring_attention(q, k, v, cp),
        mesh=mesh.jax_mesh,
        in_specs=P(None, cp),
        out_specs=P(None, cp),
    )
    with pytest.raises(ShardingError, match="T_local=3 is odd"):
        odd(q[:, :24], k[:, :24], v[:, :24])
    with pytest.raises(ShardingError, match="t_local=5 is odd"):
        jax.shard_map(
            lambda: local_positions(5, cp), mesh=mesh.jax_mesh, in_specs=(), out_specs=P(cp)
        )()


@pytest.mark.slow
def test_per_device_memory_falls_with_cp() -> None:
    """XLA's temp bytes of a forward+backward (abstract inputs): the [T_local, T_local] score
    blocks dominate, so going from cp 2 to cp 8 cuts them by far more than 4x."""
    seq, devices = 2048, np.asarray(mesh_of((1, 8)).jax_mesh.devices).reshape(-1)
    temp = {}
    for cp in (2, 8):
        mesh = jax.sharding.Mesh(devices[:cp], ("cp",))
        ring = jax.shard_map(
            lambda q, k, v: ring_attention(q, k, v, "cp"),
            mesh=mesh,
            in_specs=P(None, "cp"),
            out_specs=P(None, "cp"),
        )
        grad = jax.grad(lambda q, k, v: jnp.sum(ring(q, k, v)), argnums=(0, 1, 2))  # noqa: B023
        args = [jax.ShapeDtypeStruct((1, seq, h, 16), jnp.float32) for h in (2, 1, 1)]
        temp[cp] = jax.jit(grad).lower(*args).compile().memory_analysis().temp_size_in_bytes
    scores_cp8 = (seq // 8) ** 2 * 2 * 4  # one [T_local, T_local] f32 block, 2 heads
    assert temp[8] < temp[2] / 8, temp
    assert temp[8] < 8 * scores_cp8, (temp, scores_cp8)
