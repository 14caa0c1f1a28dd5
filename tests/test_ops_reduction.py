"""Reductions and normalizations over each device's local tensor.

A reduction over a sharded dim gives each device the reduction of *its* shard (a partial result,
as in TT-NN, where an all_reduce combines them); the numpy reference states exactly that.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
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
    put_local,
    reference,
    seeds,
)
from hypothesis import example, given
from hypothesis import strategies as st

import ttjax as ttnn

LOCAL_SHAPES = [(1, 2, 8, 12), (2, 1, 3, 25)]
DIMS = [-1, 2, 0, (1, 3), None]


@st.composite
def cases(draw, dtypes=(F32, F32, BF16)):
    return (
        draw(mesh_shapes),
        draw(st.sampled_from(LOCAL_SHAPES)),
        draw(layouts(4)),
        draw(st.sampled_from(DIMS)),
        draw(st.booleans()),
        draw(st.sampled_from(dtypes)),
        draw(seeds),
    )


ONE_BY_ONE = ((1, 1), LOCAL_SHAPES[0], Layout("2d", (2, 3)), -1, True, F32, 0)


def _axis(dim):
    return tuple(dim) if isinstance(dim, tuple) else dim


@given(case=cases())
@example(case=ONE_BY_ONE)
def test_sum_mean_max_per_device(case):
    mesh_shape, local, layout, dim, keepdim, dtype, seed = case
    rng = np.random.default_rng(seed)
    x, xs = put_local(rng, local, mesh_shape, layout, dtype)
    ax = _axis(dim)
    for op, ref in [(ttnn.sum, np.sum), (ttnn.mean, np.mean), (ttnn.max, np.max)]:
        y = op(x, dim=dim, keepdim=keepdim)
        assert y.dtype == dtype
        want = reference(lambda s, ref=ref: ref(s, axis=ax, keepdims=keepdim), xs)
        # bfloat16 sums of up to 300 values: allow a few bfloat16 steps of the result.
        check(y, want, tol=(1.6e-2, 6e-2) if dtype == BF16 else (1e-5, 1e-5))


@given(case=cases(dtypes=(F32,)))
@example(case=ONE_BY_ONE)
def test_argmax_per_device(case):
    mesh_shape, local, layout, dim, keepdim, _, seed = case
    rng = np.random.default_rng(seed)
    x, xs = put_local(rng, local, mesh_shape, layout, F32)
    d = dim if not isinstance(dim, tuple) else -1
    y = ttnn.argmax(x, dim=d, keepdim=keepdim)
    assert y.dtype == ttnn.uint32
    want = reference(lambda s: np.argmax(s, axis=d, keepdims=keepdim), xs)
    check(y, want, exact=True)
    for arr in device_arrays(y).values():
        assert arr.dtype == np.uint32


@given(case=cases())
@example(case=ONE_BY_ONE)
def test_softmax_per_device(case):
    mesh_shape, local, layout, dim, _, dtype, seed = case
    rng = np.random.default_rng(seed)
    x, xs = put_local(rng, local, mesh_shape, layout, dtype, -4.0, 4.0)
    d = dim if isinstance(dim, int) else -1

    def ref(s):
        e = np.exp(s - s.max(axis=d, keepdims=True))
        return e / e.sum(axis=d, keepdims=True)

    y = ttnn.softmax(x, dim=d)
    assert y.dtype == dtype and y.shape == x.shape
    check(y, reference(ref, xs))


def _layer_norm(x, eps, w=None, b=None, res=None):
    x = x + res if res is not None else x
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return (y * w.reshape(-1) if w is not None else y) + (b.reshape(-1) if b is not None else 0.0)


def _rms_norm(x, eps, w=None, b=None, res=None):
    x = x + res if res is not None else x
    y = x / np.sqrt((x**2).mean(-1, keepdims=True) + eps)
    return (y * w.reshape(-1) if w is not None else y) + (b.reshape(-1) if b is not None else 0.0)


@st.composite
def norm_cases(draw):
    optional = st.sampled_from([None, *draw(st.lists(layouts(1), min_size=1, max_size=1))])
    return (
        draw(mesh_shapes),
        draw(layouts(4, dims=(0, 1, 2))),
        draw(optional),  # weight
        draw(optional),  # bias
        draw(st.sampled_from([None, *draw(st.lists(layouts(4), min_size=1, max_size=1))])),
        draw(st.sampled_from([F32, F32, BF16])),
        draw(seeds),
    )


@given(case=norm_cases())
@example(case=((1, 1), REPLICATED, REPLICATED, REPLICATED, REPLICATED, F32, 0))
def test_layer_norm_and_rms_norm_per_device(case):
    mesh_shape, lx, lw, lb, lres, dtype, seed = case
    rng = np.random.default_rng(seed)
    local = (1, 2, 8, 25)
    x, xs = put_local(rng, local, mesh_shape, lx, dtype)
    kwargs, refs = {}, {}
    for name, lay, shape in [("weight", lw, (25,)), ("bias", lb, (25,))]:
        if lay is not None:
            kwargs[name], refs[name[0]] = put_local(rng, shape, mesh_shape, lay, dtype)
    if lres is not None:
        kwargs["residual_input_tensor"], refs["res"] = put_local(
            rng, local, mesh_shape, lres, dtype
        )
    eps = 1e-5
    names = list(refs)
    for op, ref in [(ttnn.layer_norm, _layer_norm), (ttnn.rms_norm, _rms_norm)]:
        y = op(x, epsilon=eps, **kwargs)
        assert y.dtype == dtype and y.shape == x.shape

        def per_device(s, *extra, ref=ref):
            return ref(s, eps, **dict(zip(names, extra)))

        want = reference(per_device, xs, *[refs[n] for n in names])
        tol = (1e-4, 1e-4) if dtype == F32 else (2e-2, 3e-2)
        check(y, want, tol=tol)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (2, 4)], ids=["1x1", "2x4"])
def test_norms_over_width_sharded_input_are_per_device(mesh_shape):
    """Width sharded over columns, with TT-NN's [1, 1, W/32, 32] gamma layout: every device
    normalizes its own slice of the width."""
    mesh = mesh_of(mesh_shape)
    rng = np.random.default_rng(5)
    cols = mesh_shape[1]
    x_host = rng.standard_normal((1, 1, 32, 64 * cols)).astype(np.float32)
    g_host = rng.standard_normal((1, 1, 2 * cols, 32)).astype(np.float32)
    lx, lg = Layout("2d", (None, 3)), Layout("2d", (None, 2))
    x = ttnn.from_torch(x_host, device=mesh, mesh_mapper=lx.mapper(mesh))
    g = ttnn.from_torch(g_host, device=mesh, mesh_mapper=lg.mapper(mesh))
    xs, gs = lx.split(x_host.astype(np.float64), mesh_shape), lg.split(g_host, mesh_shape)
    check(
        ttnn.rms_norm(x, epsilon=1e-6, weight=g),
        reference(lambda s, w: _rms_norm(s, 1e-6, w), xs, gs),
        tol=(1e-4, 1e-4),
    )
    check(
        ttnn.layer_norm(x, weight=g),
        reference(lambda s, w: _layer_norm(s, 1e-12, w), xs, gs),
        tol=(1e-4, 1e-4),
    )


def test_layer_norm_reads_the_first_row_of_a_tile_high_gamma():
    """tt-metal's TtLayerNorm copies gamma and beta down a tile ([1, 32, W]); TT-NN reads row 0
    of that tile (rows differ here, so reading another row or the whole tile would show)."""
    mesh = mesh_of((1, 2))
    rng = np.random.default_rng(7)
    x_host = rng.standard_normal((1, 64, 96)).astype(np.float32)
    g_host = rng.standard_normal((1, 32, 96)).astype(np.float32)
    b_host = rng.standard_normal((1, 32, 96)).astype(np.float32)
    put = lambda a: ttnn.from_torch(a, device=mesh, layout=ttnn.TILE_LAYOUT)  # noqa: E731
    y = ttnn.layer_norm(put(x_host), epsilon=1e-6, weight=put(g_host), bias=put(b_host))
    want = _layer_norm(x_host.astype(np.float64), 1e-6, g_host[0, 0], b_host[0, 0])
    for got in device_arrays(y).values():
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_sum_over_sharded_dim_then_adding_partials_gives_total():
    mesh = mesh_of((8, 4))
    x = np.random.default_rng(6).standard_normal((1, 1, 32, 32 * 8)).astype(np.float32)
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    s = ttnn.sum(t, dim=np.int64(3), keepdim=True)  # numpy ints work as dims too
    assert s.shape == (1, 1, 32, 1)
    partials = list(device_arrays(s).values())
    np.testing.assert_allclose(sum(partials), x.sum(axis=3, keepdims=True), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "kernel, stride, padding, ceil_mode, include_pad",
    [
        ((4, 4), (4, 4), (0, 0), False, True),  # gemma3's projector: 64x64 patches to 16x16
        ((3, 2), (2, 2), (1, 1), True, True),
        ((3, 3), (2, 1), (1, 0, 1, 1), False, False),
    ],
)
def test_avg_pool2d_matches_torch(kernel, stride, padding, ceil_mode, include_pad):
    """[1, 1, N*H*W, C] in, [1, 1, N*Hout*Wout, C] out, as torch's avg_pool2d of the NCHW form."""
    import torch

    n, c, h, w = 2, 8, 9, 7
    rng = np.random.default_rng(8)
    x = torch.from_numpy(rng.standard_normal((n, c, h, w)).astype(np.float32))
    flat = x.permute(0, 2, 3, 1).reshape(1, 1, n * h * w, c)
    mesh = mesh_of((1, 2))
    t = ttnn.from_torch(flat, device=mesh, dtype=ttnn.float32)
    y = ttnn.avg_pool2d(
        t, n, h, w, c, kernel, stride, padding, ceil_mode=ceil_mode,
        count_include_pad=include_pad, dtype=ttnn.float32,
    )  # fmt: skip
    pt = padding if len(padding) == 4 else (padding[0], padding[0], padding[1], padding[1])
    if pt[0] == pt[1] and pt[2] == pt[3]:
        want = torch.nn.functional.avg_pool2d(
            x, kernel, stride, (pt[0], pt[2]), ceil_mode=ceil_mode,
            count_include_pad=include_pad,
        )  # fmt: skip
    else:  # torch takes symmetric padding only: pad by hand, count the real elements
        padded = torch.nn.functional.pad(x, (pt[2], pt[3], pt[0], pt[1]))
        ones = torch.nn.functional.pad(torch.ones(1, 1, h, w), (pt[2], pt[3], pt[0], pt[1]))
        pool = lambda a: torch.nn.functional.avg_pool2d(a, kernel, stride, ceil_mode=ceil_mode)  # noqa: E731
        want = pool(padded) / pool(ones)
    assert y.layout == ttnn.ROW_MAJOR_LAYOUT and y.dtype == ttnn.float32
    ho, wo = want.shape[2:]
    assert y.shape == (1, 1, n * ho * wo, c)
    expect = want.permute(0, 2, 3, 1).reshape(1, 1, n * ho * wo, c).numpy()
    for got in device_arrays(y).values():
        np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)


def test_avg_pool2d_rejects_a_shape_that_is_not_nhw_by_c():
    mesh = mesh_of((1, 1))
    t = ttnn.from_torch(np.zeros((1, 1, 60, 8), np.float32), device=mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match="N\\*H\\*W"):
        ttnn.avg_pool2d(t, 1, 8, 8, 8, [2, 2], [2, 2], [0, 0])


def test_sampling_is_greedy_at_k1_or_p0_and_draws_within_top_k():
    """TT-NN's on-device sampling for 32 users: k = 1 (or p = 0) takes each user's argmax; with
    k = 3 and p = 1 the draws stay in the top 3 and follow softmax(top-3 * temp)."""
    mesh = mesh_of((1, 2))
    rng = np.random.default_rng(50)
    logits = rng.standard_normal((1, 1, 32, 64)).astype(np.float32) * 3
    ids = rng.permutation(32 * 64).reshape(1, 1, 32, 64).astype(np.int32)

    def dev(a, dtype, layout):
        return ttnn.from_torch(torch.from_numpy(a), dtype=dtype, layout=layout, device=mesh)

    values = dev(logits, ttnn.bfloat16, ttnn.TILE_LAYOUT)
    index = dev(ids, ttnn.uint32, ttnn.ROW_MAJOR_LAYOUT)

    def users(x, dtype=ttnn.bfloat16):
        return dev(np.full(32, x, np.float32 if dtype == ttnn.bfloat16 else np.int32), dtype,
                   ttnn.ROW_MAJOR_LAYOUT)  # fmt: skip

    rounded_logits = ttnn.to_torch(ttnn.get_device_tensors(values)[0]).float().numpy()
    greedy = ids[0, 0, np.arange(32), rounded_logits[0, 0].argmax(-1)]
    for k, p in ((1, 1.0), (8, 0.0)):
        out = ttnn.sampling(values, index, k=users(k, ttnn.uint32), p=users(p), temp=users(1.0),
                            seed=7)  # fmt: skip
        assert out.shape == (1, 1, 1, 32) and out.dtype == ttnn.uint32
        for piece in ttnn.get_device_tensors(out):
            np.testing.assert_array_equal(ttnn.to_numpy(piece).reshape(32), greedy)
    top3 = np.argsort(-rounded_logits[0, 0], axis=-1)[:, :3]
    probs = np.exp(rounded_logits[0, 0, 0, top3[0]] * 0.5)
    probs /= probs.sum()
    counts = np.zeros(3)
    k3, p1, t = users(3, ttnn.uint32), users(1.0), users(0.5)
    for seed in range(300):
        got = ttnn.to_numpy(ttnn.get_device_tensors(
            ttnn.sampling(values, index, k=k3, p=p1, temp=t, seed=seed))[0]).reshape(32)  # fmt: skip
        allowed = ids[0, 0, np.arange(32)[:, None], top3]
        assert all(got[u] in allowed[u] for u in range(32))
        counts[list(allowed[0]).index(got[0])] += 1
    np.testing.assert_allclose(counts / counts.sum(), probs, atol=0.09)
    # seed != 0 reseeds the mesh's stream; seed 0 continues it (TT-NN's rand_tile_init rule)
    k32, flat = users(32, ttnn.uint32), users(0.05)

    def draw(seed):
        out = ttnn.sampling(values, index, k=k32, p=p1, temp=flat, seed=seed)
        return ttnn.to_numpy(ttnn.get_device_tensors(out)[0]).reshape(32)

    first, following = draw(5), draw(0)
    assert (first != following).any()
    np.testing.assert_array_equal(draw(5), first)
    np.testing.assert_array_equal(draw(0), following)
