"""matmul and linear: every device multiplies its own local tensors (no communication).

The numpy reference multiplies each device's shards; a replicated activation times a
column-sharded weight gives each device its slice of the output columns, and a K-sharded pair
gives each device a partial sum, which the per-device reference states directly.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from _op_testing import (
    BF16,
    F32,
    MATMUL_TOL,
    REPLICATED,
    Layout,
    check,
    device_arrays,
    layouts,
    mesh_of,
    mesh_shapes,
    put_local,
    reference,
    seeds,
)
from _reference import pcc, shard
from hypothesis import example, given
from hypothesis import strategies as st

import ttjax as ttnn

M, K, N = 25, 16, 12  # M = 8 * 3 + 1: an uneven-looking row count

_erf = np.vectorize(math.erf)


def gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


ACTIVATIONS = {None: lambda y: y, "gelu": gelu, "relu": lambda y: np.maximum(y, 0.0)}


@st.composite
def matmul_cases(draw):
    mesh_shape = draw(mesh_shapes)
    return (
        mesh_shape,
        draw(layouts(4)),
        draw(layouts(4)),
        draw(st.booleans()),  # transpose_a
        draw(st.booleans()),  # transpose_b
        draw(st.sampled_from([1, 2])),  # b's batch (1 broadcasts)
        draw(st.sampled_from([F32, F32, BF16])),
        draw(seeds),
    )


@given(case=matmul_cases())
@example(case=((1, 1), REPLICATED, Layout("2d", (None, 3)), False, False, 2, F32, 0))
def test_matmul_per_device(case):
    mesh_shape, la, lb, ta, tb, b_batch, dtype, seed = case
    rng = np.random.default_rng(seed)
    a_local = (1, 2, K, M) if ta else (1, 2, M, K)
    b_local = (1, b_batch, N, K) if tb else (1, b_batch, K, N)
    a, as_ = put_local(rng, a_local, mesh_shape, la, dtype)
    b, bs = put_local(rng, b_local, mesh_shape, lb, dtype)
    out = ttnn.matmul(a, b, transpose_a=ta, transpose_b=tb)
    assert out.shape == (1, 2, M, N) and out.dtype == dtype

    def ref(x, y):
        x = np.swapaxes(x, -1, -2) if ta else x
        y = np.swapaxes(y, -1, -2) if tb else y
        return x @ y

    check(out, reference(ref, as_, bs), tol=MATMUL_TOL)
    if not (ta or tb):
        check(a @ b, reference(ref, as_, bs), tol=MATMUL_TOL)


@st.composite
def linear_cases(draw):
    return (
        draw(mesh_shapes),
        draw(layouts(4)),
        draw(layouts(2)),
        draw(st.sampled_from([None, *draw(st.lists(layouts(2), min_size=1, max_size=1))])),
        draw(st.booleans()),  # transpose_b
        draw(st.sampled_from([None, "gelu", "relu"])),
        draw(st.sampled_from([F32, F32, BF16])),
        draw(seeds),
    )


@given(case=linear_cases())
@example(case=((1, 1), REPLICATED, REPLICATED, REPLICATED, False, "gelu", F32, 0))
def test_linear_per_device(case):
    mesh_shape, la, lw, lbias, tb, act, dtype, seed = case
    rng = np.random.default_rng(seed)
    x, xs = put_local(rng, (1, 1, M, K), mesh_shape, la, dtype)
    w, ws = put_local(rng, (N, K) if tb else (K, N), mesh_shape, lw, dtype)
    bias, biases = (
        put_local(rng, (1, N), mesh_shape, lbias, dtype) if lbias is not None else (None, None)
    )
    out = ttnn.linear(x, w, bias=bias, transpose_b=tb, activation=act)
    assert out.shape == (1, 1, M, N) and out.dtype == dtype

    def ref(xv, wv, *bv):
        y = xv @ (wv.T if tb else wv)
        if bv:
            y = y + bv[0].reshape(-1)
        return ACTIVATIONS[act](y)

    want = reference(ref, xs, ws, *([biases] if bias is not None else []))
    check(out, want, tol=MATMUL_TOL)


def test_matmul_doc_example_column_sharded_1x2():
    """TT-NN's doc example: replicated A [1,1,128,128] times B [1,1,128,256] sharded on dim 3 over
    a 1x2 mesh: device i holds A @ B[..., 128i:128(i+1)]."""
    mesh = mesh_of((1, 2))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 1, 128, 128)).astype(np.float32)
    b = rng.standard_normal((1, 1, 128, 256)).astype(np.float32)
    ta = ttnn.from_torch(a, layout=ttnn.TILE_LAYOUT, device=mesh)
    tb = ttnn.from_torch(
        b, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3)
    )
    assert tb.shape == (1, 1, 128, 128)
    out = ttnn.matmul(ta, tb)
    assert out.shape == (1, 1, 128, 128)
    got = device_arrays(out)
    for i in range(2):
        want = a.astype(np.float64) @ b[..., 128 * i : 128 * (i + 1)].astype(np.float64)
        np.testing.assert_allclose(got[(0, i)], want, rtol=1e-4, atol=1e-3)
    full = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    np.testing.assert_allclose(full, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_matmul_row_parallel_gives_partial_sums():
    """K split over the 8 devices of a 2x4 mesh: each device holds its partial product, and the
    partials add up to the full product."""
    mesh = mesh_of((2, 4))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    b = rng.standard_normal((1, 1, 256, 64)).astype(np.float32)
    ta = ttnn.from_torch(a, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    tb = ttnn.from_torch(b, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=2))
    got = device_arrays(ttnn.matmul(ta, tb))
    partials = [a[..., 32 * k : 32 * (k + 1)] @ b[..., 32 * k : 32 * (k + 1), :] for k in range(8)]
    for k, arr in enumerate(got.values()):
        np.testing.assert_allclose(arr, partials[k], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sum(got.values()), a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (2, 4)], ids=["1x1", "2x4"])
@pytest.mark.parametrize(
    ("block", "min_pcc"), [(ttnn.bfloat8_b, 0.99), (ttnn.bfloat4_b, 0.9)], ids=["bfp8", "bfp4"]
)
def test_linear_block_float_weights(mesh_shape, block, min_pcc):
    """bfloat16 activations times block-float weights (column-sharded) match the float32
    product at TT-NN's observed PCC figures."""
    mesh = mesh_of(mesh_shape)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 1, 32, 256)).astype(np.float32)
    w = rng.standard_normal((256, 32 * mesh_shape[1])).astype(np.float32)
    bias = rng.standard_normal((1, 32 * mesh_shape[1])).astype(np.float32)
    mapper = ttnn.ShardTensor2dMesh(mesh, mesh_shape=mesh_shape, dims=(None, 1))
    tx = ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    tw = ttnn.from_torch(w, dtype=block, device=mesh, mesh_mapper=mapper)
    tbias = ttnn.from_torch(bias, dtype=ttnn.bfloat16, device=mesh, mesh_mapper=mapper)
    assert tw.dtype == block and tw.layout == ttnn.TILE_LAYOUT and tw.shape == (256, 32)
    out = ttnn.linear(tx, tw, bias=tbias)
    assert out.dtype == ttnn.bfloat16 and out.shape == (1, 1, 32, 32)
    ws, bs = shard(w, mesh_shape, (None, 1)), shard(bias, mesh_shape, (None, 1))
    for c, arr in device_arrays(out).items():
        want = x.astype(np.float64) @ ws[c] + bs[c]
        assert pcc(arr.astype(np.float64), want) >= min_pcc, c
    # Quantization is lossy but not wild: bfloat8_b is much closer than bfloat4_b.
    q = device_arrays(ttnn.typecast(tw, ttnn.float32))
    rel = max(np.abs(q[c] - ws[c]).max() / np.abs(ws[c]).max() for c in q)
    assert 0 < rel < (0.02 if block == ttnn.bfloat8_b else 0.2)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 8)], ids=["1x1", "1x8"])
def test_matmul_output_dtype_and_activation(mesh_shape):
    rng = np.random.default_rng(4)
    a, as_ = put_local(rng, (1, 1, 8, 16), mesh_shape, REPLICATED, F32)
    b, bs = put_local(rng, (1, 1, 16, 8), mesh_shape, Layout("1d", (3, 3)), F32)
    out = ttnn.matmul(a, b, dtype=ttnn.bfloat16, activation="relu")
    assert out.dtype == ttnn.bfloat16
    want = reference(lambda x, y: np.maximum(x @ y, 0.0), as_, bs)
    want = {
        c: v.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
        for c, v in want.items()
    }
    check(out, want, tol=MATMUL_TOL)
