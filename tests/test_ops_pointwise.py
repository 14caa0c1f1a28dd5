"""Elementwise ops: every device's result equals numpy applied to that device's shard.

Inputs are laid out every way a TT-NN program lays them out (replicated with or without a
mapper, ShardTensorToMesh, ShardTensor2dMesh, create_mesh_mapper) over every mesh shape the suite
sweeps; the expectations only slice the host array with numpy (tests/_reference.py).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from _op_testing import (
    BF16,
    F32,
    REPLICATED,
    Layout,
    check,
    device_arrays,
    layouts,
    mesh_of,
    mesh_shapes,
    put,
    put_local,
    reference,
    seeds,
)
from conftest import MESH_SWEEP
from hypothesis import example, given
from hypothesis import strategies as st

import ttjax as ttnn

# One plain shape and one with uneven-looking dims (25 = 8 * 3 + 1): few shapes, few compiles.
LOCAL_SHAPES = [(1, 2, 8, 12), (2, 1, 3, 25)]

_erf = np.vectorize(math.erf)


def gelu_exact(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# name -> (ttnn op, numpy reference) over inputs of any sign ...
SIGNED = {
    "neg": (ttnn.neg, np.negative),
    "exp": (ttnn.exp, np.exp),
    "relu": (ttnn.relu, lambda x: np.maximum(x, 0.0)),
    "tanh": (ttnn.tanh, np.tanh),
    "sigmoid": (ttnn.sigmoid, sigmoid),
    "silu": (ttnn.silu, lambda x: x * sigmoid(x)),
    "gelu": (ttnn.gelu, gelu_exact),
    "gelu_fast": (lambda t: ttnn.gelu(t, fast_and_approximate_mode=True), gelu_tanh),
}
# ... and over positive inputs.
POSITIVE = {
    "log": (ttnn.log, np.log),
    "sqrt": (ttnn.sqrt, np.sqrt),
    "rsqrt": (ttnn.rsqrt, lambda x: 1.0 / np.sqrt(x)),
    "reciprocal": (ttnn.reciprocal, lambda x: 1.0 / x),
    "pow_scalar": (lambda t: ttnn.pow(t, 2.5), lambda x: x**2.5),
    "pow_tensor": (lambda t: ttnn.pow(t, t), lambda x: x**x),
    "pow_operator": (lambda t: t**2, lambda x: x**2),
}


@st.composite
def cases(draw, n_layouts: int = 1, dtypes=(F32, F32, BF16)):
    """(mesh shape, local shape, layouts, dtype, seed)."""
    mesh_shape = draw(mesh_shapes)
    local = draw(st.sampled_from(LOCAL_SHAPES))
    lays = tuple(draw(layouts(len(local))) for _ in range(n_layouts))
    return mesh_shape, local, lays, draw(st.sampled_from(dtypes)), draw(seeds)


ONE_BY_ONE = ((1, 1), LOCAL_SHAPES[0], (Layout("2d", (2, 3)),), F32, 0)


@given(case=cases())
@example(case=ONE_BY_ONE)
def test_unary_ops_per_device(case):
    mesh_shape, local, (layout,), dtype, seed = case
    rng = np.random.default_rng(seed)
    x, xs = put_local(rng, local, mesh_shape, layout, dtype, -3.0, 3.0)
    p, ps = put_local(rng, local, mesh_shape, layout, dtype, 0.25, 3.0)
    for name, (op, ref) in SIGNED.items():
        y = op(x)
        assert y.dtype == dtype and y.placements == x.placements, name
        check(y, reference(ref, xs))
    for name, (op, ref) in POSITIVE.items():
        y = op(p)
        assert y.dtype == dtype, name
        want = reference(ref, ps)
        if dtype == BF16 and name == "pow_tensor":
            # p**p reaches ~50: one bf16 ulp there is 0.25.
            check(y, want, tol=(3e-2, 3e-2))
        else:
            check(y, want)


@given(case=cases(n_layouts=3), broadcast=st.booleans())
@example(case=((1, 1), *ONE_BY_ONE[1:2], (REPLICATED,) * 3, F32, 0), broadcast=False)
def test_binary_ops_per_device(case, broadcast):
    mesh_shape, local, (la, lb, lc), dtype, seed = case
    rng = np.random.default_rng(seed)
    a, as_ = put_local(rng, local, mesh_shape, la, dtype)
    # b is bounded away from zero (it divides); with broadcast it has one row per device.
    b_local = (*local[:2], 1, local[3]) if broadcast else local
    b_mag = rng.uniform(0.5, 2.0, lb.global_shape(b_local, mesh_shape))
    b_sign = rng.choice([-1.0, 1.0], b_mag.shape)
    b, bs = put((b_mag * b_sign).astype(np.float32), mesh_shape, lb, dtype)
    c, cs = put_local(rng, local, mesh_shape, lc, dtype)
    for op, ref in [
        (ttnn.add, np.add),
        (ttnn.subtract, np.subtract),
        (ttnn.multiply, np.multiply),
        (ttnn.divide, np.divide),
    ]:
        y = op(a, b)
        assert y.dtype == dtype
        check(y, reference(ref, as_, bs))
        check(op(c, a), reference(ref, cs, as_))


@pytest.mark.parametrize("mesh_shape", MESH_SWEEP)
def test_scalar_operands_and_operators(mesh_shape):
    """Python scalars on either side of the binary ops, and the Tensor operators."""
    rng = np.random.default_rng(sum(mesh_shape))
    layout = Layout("2d", (2, 3))
    a, as_ = put_local(rng, (1, 2, 8, 12), mesh_shape, layout)
    b, bs = put_local(rng, (1, 2, 8, 12), mesh_shape, Layout("1d", (1, 1)), low=0.5, high=2.0)
    s = 0.75
    check(ttnn.add(a, s), reference(lambda x: x + s, as_))
    check(ttnn.add(s, a), reference(lambda x: s + x, as_))
    check(ttnn.subtract(a, s), reference(lambda x: x - s, as_))
    check(ttnn.subtract(s, a), reference(lambda x: s - x, as_))
    check(ttnn.multiply(s, a), reference(lambda x: s * x, as_))
    check(ttnn.divide(a, s), reference(lambda x: x / s, as_))
    check(ttnn.divide(s, b), reference(lambda x: s / x, bs))
    check(a + b, reference(np.add, as_, bs))
    check(a - b, reference(np.subtract, as_, bs))
    check(a * b, reference(np.multiply, as_, bs))
    check(a / b, reference(np.divide, as_, bs))
    check(2.0 - a, reference(lambda x: 2.0 - x, as_))
    check(3.0 * a, reference(lambda x: 3.0 * x, as_))
    check(1.0 + a, reference(lambda x: 1.0 + x, as_))
    check(-a, reference(np.negative, as_))
    check(2.0 / b, reference(lambda x: 2.0 / x, bs))


@given(case=cases(n_layouts=3))
@example(case=ONE_BY_ONE[:2] + ((REPLICATED,) * 3, F32, 0))
def test_where_and_clamp_per_device(case):
    mesh_shape, local, (lc, la, lb), dtype, seed = case
    rng = np.random.default_rng(seed)
    cond_global = rng.integers(0, 2, lc.global_shape(local, mesh_shape)).astype(np.float32)
    cond, conds = put(cond_global, mesh_shape, lc, dtype)
    a, as_ = put_local(rng, local, mesh_shape, la, dtype)
    b, bs = put_local(rng, local, mesh_shape, lb, dtype)
    check(ttnn.where(cond, a, b), reference(lambda c, x, y: np.where(c != 0, x, y), conds, as_, bs))
    check(ttnn.where(cond, a, 0.5), reference(lambda c, x: np.where(c != 0, x, 0.5), conds, as_))
    check(ttnn.where(cond, -1.0, b), reference(lambda c, y: np.where(c != 0, -1.0, y), conds, bs))
    check(ttnn.clamp(a, -0.5, 0.7), reference(lambda x: np.clip(x, -0.5, 0.7), as_))
    check(ttnn.clamp(a, min=0.1), reference(lambda x: np.maximum(x, 0.1), as_))
    check(ttnn.clamp(a, max=-0.2), reference(lambda x: np.minimum(x, -0.2), as_))


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 2)], ids=["1x1", "1x2"])
def test_where_keeps_the_branch_dtype(mesh_shape):
    """A bfloat16 predicate must not round float32 branch values."""
    lay = Layout("2d", (None, 3))
    cond, _ = put(np.ones((1, 1, 4, 8), np.float32), mesh_shape, lay, BF16)
    a, as_ = put(np.full((1, 1, 4, 8), 1.0 + 2**-20, np.float32), mesh_shape, lay)
    out = ttnn.where(cond, a, a)
    assert out.dtype == F32
    check(out, as_, exact=True)


@given(case=cases(dtypes=(F32,)))
@example(case=ONE_BY_ONE)
def test_typecast_per_device(case):
    mesh_shape, local, (layout,), _, seed = case
    rng = np.random.default_rng(seed)
    x, xs = put_local(rng, local, mesh_shape, layout, F32)
    y = ttnn.typecast(x, ttnn.bfloat16)
    assert y.dtype == ttnn.bfloat16 and y.shape == x.shape
    want = reference(lambda s: s.astype(np.float32).astype(ml_dtypes.bfloat16), xs)
    check(y, {c: w.astype(np.float64) for c, w in want.items()}, exact=True)
    back = ttnn.typecast(y, ttnn.float32)
    assert back.dtype == ttnn.float32
    check(back, {c: w.astype(np.float64) for c, w in want.items()}, exact=True)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (2, 4)], ids=["1x1", "2x4"])
@pytest.mark.parametrize("block", [ttnn.bfloat8_b, ttnn.bfloat4_b], ids=["bfp8", "bfp4"])
def test_typecast_block_float_round_trip(mesh_shape, block):
    """float32 -> block float -> float32: within one mantissa step of each 16-value block's
    shared scale (half a step when rounding, a full one where the block max saturates), and a
    second round trip changes nothing (the values are representable)."""
    bits = 7 if block == ttnn.bfloat8_b else 3
    rng = np.random.default_rng(3)
    layout = Layout("2d", (2, 3))
    x, xs = put_local(rng, (1, 1, 32, 64), mesh_shape, layout, F32)
    q = ttnn.typecast(x, block)
    assert q.dtype == block and q.layout == ttnn.TILE_LAYOUT and q.shape == x.shape
    back = ttnn.typecast(q, ttnn.float32)
    assert back.dtype == ttnn.float32
    got = device_arrays(back)
    for c, want in xs.items():
        groups = want.reshape(*want.shape[:-1], -1, 16)
        exp = np.frexp(np.abs(groups).max(axis=-1, keepdims=True))[1]
        step = np.ldexp(1.0, exp - bits)  # one mantissa step of the block
        err = np.abs(got[c].reshape(groups.shape) - groups)
        top = (2**bits - 1) * step  # the largest magnitude a block stores
        bound = np.maximum(step / 2, np.abs(groups) - top)
        assert np.all(err <= bound + 1e-12), (c, float((err / step).max()))
    again = ttnn.typecast(ttnn.typecast(back, block), ttnn.float32)
    for c, arr in device_arrays(again).items():
        np.testing.assert_array_equal(arr, got[c])


def test_gelu_doc_example_replicated_1x4():
    """TT-NN's doc example: a replicated [1, 1, 32, 128] tensor (from_torch with device= and no
    mapper); every device applies gelu to the whole tensor."""
    mesh = mesh_of((1, 4))
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 128)).astype(np.float32)
    t = ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    assert t.shape == (1, 1, 32, 128)
    y = ttnn.gelu(t)
    assert y.shape == (1, 1, 32, 128)
    want = gelu_exact(x.astype(ml_dtypes.bfloat16).astype(np.float64))
    arrays = device_arrays(y)
    assert len(arrays) == 4
    for arr in arrays.values():
        np.testing.assert_allclose(arr.astype(np.float64), want, rtol=1.6e-2, atol=1e-2)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (2, 4)], ids=["1x1", "2x4"])
def test_output_tensor_is_written_in_place(mesh_shape):
    host = np.linspace(-1, 1, 64 * 4, dtype=np.float32).reshape(1, 1, 16, 16)
    x, xs = put(host, mesh_shape, Layout("2d", (2, None)))
    out = ttnn.zeros_like(x)
    res = ttnn.exp(x, output_tensor=out)
    assert res is out
    check(out, reference(np.exp, xs))
    res = ttnn.add(x, 1.0, output_tensor=out)
    assert res is out
    check(out, reference(lambda v: v + 1.0, xs))
