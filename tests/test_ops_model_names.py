"""TT-NN names tt-metal's model code uses (ttnn.bcast, experimental.typecast, the decode attention
matmuls, windowed SDPA, in-place and smaller ops), each compared per device with torch."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _op_testing import REPLICATED, Layout, check, put

import ttjax as ttnn
import ttjax._src.ttnn.ops.transformer

MESH = (1, 2)
ROWS = Layout("1d", (0, 0))


def _t(shards: dict) -> dict:
    return {c: torch.from_numpy(np.asarray(v, np.float64)) for c, v in shards.items()}


def _rand(seed, shape, layout=REPLICATED, dtype=ttnn.float32):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return put(x, MESH, layout, dtype)


@pytest.mark.parametrize(
    "dim,b_shape,pick",
    [
        (ttnn.BcastOpDim.H, (1, 1, 1, 64), lambda b: b[..., :1, :]),
        (ttnn.BcastOpDim.W, (2, 1, 32, 1), lambda b: b[..., :, :1]),
        (ttnn.BcastOpDim.HW, (1, 1, 1, 1), lambda b: b[..., :1, :1]),
    ],
)
@pytest.mark.parametrize(
    "math,fn",
    [
        (ttnn.BcastOpMath.ADD, np.add),
        (ttnn.BcastOpMath.SUB, np.subtract),
        (ttnn.BcastOpMath.MUL, np.multiply),
    ],
)
def test_bcast(dim, b_shape, pick, math, fn):
    a, wa = _rand(0, (4, 1, 32, 64), ROWS)  # [2, 1, 32, 64] per device
    b, wb = _rand(1, b_shape)
    y = ttnn.bcast(a, b, math_op=math, dim=dim)
    check(y, {c: fn(wa[c], pick(wb[c])) for c in wa}, tol=(1e-6, 1e-6))


def test_bcast_checks_the_broadcast_dims():
    a, _ = _rand(0, (2, 1, 32, 64))
    b, _ = _rand(1, (1, 1, 1, 32))
    with pytest.raises(ttnn.ShapeMismatchError, match="dim H needs b as wide as a"):
        ttnn.bcast(a, b, ttnn.BcastOpMath.ADD, ttnn.BcastOpDim.H)


def test_experimental_typecast():
    a, wa = _rand(2, (2, 1, 32, 32))
    y = ttnn.experimental.typecast(a, ttnn.bfloat16)
    assert y.dtype == ttnn.bfloat16
    check(y, {c: v.astype(np.float32).astype("bfloat16").astype(np.float64) for c, v in wa.items()},
          exact=True)  # fmt: skip


def _grouped(a, b):
    """TT-NN's doc formula: torch.matmul(A.transpose(0, 2), B).transpose(0, 2), B's kv heads
    repeated over their query-head groups."""
    groups = a.shape[1] // b.shape[1]
    return torch.matmul(a.transpose(0, 2), b.repeat_interleave(groups, 1)).transpose(0, 2)


def test_group_attn_matmul_and_attn_matmul():
    a, wa = _rand(3, (1, 8, 32, 64))  # [1, q_heads, batch, head_dim]
    b, wb = _rand(4, (32, 2, 64, 96))  # [batch, kv_heads, head_dim, kv_len]
    grid = ttnn.CoreCoord(8, 8)
    y = ttnn.experimental.group_attn_matmul(a, b, compute_with_storage_grid_size=grid)
    ta, tb = _t(wa), _t(wb)
    check(y, {c: _grouped(ta[c], tb[c]).numpy() for c in wa}, tol=(1e-4, 1e-4))
    b1, wb1 = _rand(5, (32, 1, 64, 96))
    y = ttnn.experimental.attn_matmul(a, b1, compute_with_storage_grid_size=grid)
    tb1 = _t(wb1)
    check(y, {c: _grouped(ta[c], tb1[c]).numpy() for c in wa}, tol=(1e-4, 1e-4))
    with pytest.raises(ttnn.ShapeMismatchError, match="kv_heads must be 1"):
        ttnn.experimental.attn_matmul(a, b, compute_with_storage_grid_size=grid)


def test_attn_matmul_from_cache_reads_num_tokens():
    q, wq = _rand(6, (1, 8, 32, 64))
    cache, wc = _rand(7, (32, 1, 96, 64))  # [batch, 1, max_len, head_dim]
    tq, tc = _t(wq), _t(wc)
    scores = ttnn.experimental.attn_matmul_from_cache(
        q, cache, num_tokens=64, transpose_hw=True, compute_with_storage_grid_size=(8, 8)
    )
    want = {c: _grouped(tq[c], tc[c][:, :, :64, :].transpose(-1, -2)).numpy() for c in wq}
    check(scores, want, tol=(1e-4, 1e-4))
    probs, wp = _rand(8, (1, 8, 32, 64))
    out = ttnn.experimental.attn_matmul_from_cache(
        probs, cache, num_tokens=64, transpose_hw=False, compute_with_storage_grid_size=(8, 8)
    )
    tp = _t(wp)
    check(out, {c: _grouped(tp[c], tc[c][:, :, :64, :]).numpy() for c in wp}, tol=(1e-4, 1e-4))
    with pytest.raises(ttnn.ShapeMismatchError, match="multiple of 32"):
        ttnn.experimental.attn_matmul_from_cache(
            q, cache, num_tokens=40, transpose_hw=True, compute_with_storage_grid_size=(8, 8)
        )


@pytest.mark.parametrize("rows", [None, 12], ids=["dense", "12-rows-at-a-time"])
@pytest.mark.parametrize("windows", [[0, 4, 20, 32], [0, 16, 20], [3, 32]])
def test_windowed_sdpa_matches_the_block_diagonal_mask(windows, rows, monkeypatch):
    if rows is not None:  # long sequences go a few query rows at a time (padded at the end)
        monkeypatch.setattr(ttjax._src.ttnn.ops.transformer, "_ROWS", rows)
    q, wq = _rand(9, (1, 4, 32, 32))
    k, wk = _rand(10, (1, 2, 32, 32))
    v, wv = _rand(11, (1, 2, 32, 32))
    cu = ttnn.from_torch(
        torch.tensor(windows, dtype=torch.int32), dtype=ttnn.int32, device=q.mesh_device
    )
    y = ttnn.transformer.windowed_scaled_dot_product_attention(q, k, v, cu, scale=0.1)
    mask = torch.full((32, 32), float("-inf"), dtype=torch.float64)
    inside = torch.zeros(32, dtype=torch.bool)
    for s, e in itertools.pairwise(windows):
        mask[s:e, s:e] = 0.0
        inside[s:e] = True
    want = {}
    for c, tq in _t(wq).items():
        tk, tv = _t(wk)[c].repeat_interleave(2, 1), _t(wv)[c].repeat_interleave(2, 1)
        ref = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask, scale=0.1)
        want[c] = torch.where(inside[None, None, :, None], ref, 0.0).numpy()
    check(y, want, tol=(1e-4, 1e-4))


def test_small_elementwise_names():
    a, wa = _rand(12, (2, 1, 32, 32))
    b, wb = _rand(13, (2, 1, 32, 32))
    ta, tb = _t(wa), _t(wb)
    check(ttnn.logical_and(a, ttnn.gt(b, 0.0)),
          {c: ((wa[c] != 0) & (wb[c] > 0)).astype(np.float64) for c in wa}, exact=True)  # fmt: skip
    check(ttnn.atan2(a, b), {c: torch.atan2(ta[c], tb[c]).numpy() for c in wa}, tol=(1e-5, 1e-5))
    check(ttnn.hardsigmoid(a), {c: F.hardsigmoid(ta[c]).numpy() for c in wa}, tol=(1e-6, 1e-6))
    check(ttnn.softplus(a, beta=2.0, threshold=1.0),
          {c: F.softplus(ta[c], 2.0, 1.0).numpy() for c in wa}, tol=(1e-5, 1e-5))  # fmt: skip
    check(ttnn.sigmoid_accurate(a), {c: torch.sigmoid(ta[c]).numpy() for c in wa}, tol=(1e-6, 1e-6))
    check(ttnn.cumsum(a, 2), {c: torch.cumsum(ta[c], 2).numpy() for c in wa}, tol=(1e-5, 1e-5))
    c2 = ttnn.clone(a)
    assert ttnn.mul_(c2, 2.0) is c2
    check(c2, {c: 2 * wa[c] for c in wa}, tol=(1e-6, 1e-6))
    check(ttnn.bmm(a, b), {c: (ta[c] @ tb[c]).numpy() for c in wa}, tol=(1e-4, 1e-4))


def test_scale_mask_softmax_in_place_and_untilize_with_unpadding():
    x, wx = _rand(14, (2, 2, 32, 64))
    m, wm = _rand(15, (2, 1, 1, 64))
    y = ttnn.scale_mask_softmax_in_place(x, 0.5, m)
    assert y is x
    want = {c: torch.softmax(_t(wx)[c] * 0.5 + _t(wm)[c], -1).numpy() for c in wx}
    check(y, want, tol=(1e-5, 1e-5))
    z = ttnn.untilize_with_unpadding(y, output_tensor_end=(1, 1, 9, 47))
    assert z.layout == ttnn.ROW_MAJOR_LAYOUT
    check(z, {c: w[:, :, :10, :48] for c, w in want.items()}, tol=(1e-5, 1e-5))


def test_storage_and_tile_shape_helpers():
    h = ttnn.from_torch(torch.arange(64, dtype=torch.float32).reshape(2, 32))
    d, _ = _rand(16, (2, 32))
    assert ttnn.is_tensor_storage_on_device(d) and not ttnn.is_tensor_storage_on_device(h)
    assert not ttnn.is_sharded(d)
    assert ttnn.pad_to_tile_shape([1, 1, 7, 33]) == [1, 1, 32, 64]


def test_falcon7b_qkv_heads_and_causal_hw_softmax():
    x, wx = _rand(17, (1, 1, 32, 4672))
    q, k, v = ttnn.experimental.nlp_create_qkv_heads_falcon7b(x)
    tx = {c: w[:, 0].reshape(1, 32, 73, 64).transpose(0, 2, 1, 3) for c, w in wx.items()}
    check(q, {c: w[:, :71] for c, w in tx.items()}, exact=True)
    check(k, {c: w[:, 71:72] for c, w in tx.items()}, exact=True)
    check(v, {c: w[:, 72:73] for c, w in tx.items()}, exact=True)
    s, ws = _rand(18, (1, 2, 32, 32))
    causal = np.triu(np.full((32, 32), -1e9, np.float32), 1)[None, None]
    m, wm = put(causal, MESH, REPLICATED, ttnn.float32)
    y = ttnn.scale_causal_mask_hw_dims_softmax_in_place(s, 0.125, m)
    want = {c: torch.softmax(_t(ws)[c] * 0.125 + _t(wm)[c], -1).numpy() for c in ws}
    check(y, want, tol=(1e-5, 1e-5))
    with pytest.raises(ttnn.ShapeMismatchError, match="last two dims"):
        ttnn.scale_causal_mask_hw_dims_softmax_in_place(s, 0.125, None)


def test_causal_hw_softmax_reads_the_mask_rows_cyclically():
    """Falcon-7B's sliced prefill: 3 heads' [S, S] scores stacked as [1, 1, 3 * S, S] take one
    [S, S] mask, row r adding mask row r mod S (TT-NN's mask tile wrap), against torch per head."""
    s, ws = _rand(19, (1, 1, 3 * 64, 64))
    mask = np.random.default_rng(20).standard_normal((1, 1, 64, 64)).astype(np.float32)
    m, wm = put(mask, MESH, REPLICATED, ttnn.float32)
    y = ttnn.scale_causal_mask_hw_dims_softmax_in_place(s, 0.5, m)
    want = {
        c: torch.softmax(_t(ws)[c].reshape(3, 64, 64) * 0.5 + _t(wm)[c][0], -1)
        .reshape(1, 1, 192, 64)
        .numpy()
        for c in ws
    }
    check(y, want, tol=(1e-5, 1e-5))
    with pytest.raises(ttnn.ShapeMismatchError, match="Scale value is required"):
        ttnn.scale_causal_mask_hw_dims_softmax_in_place(s, None, m)


def test_scale_mask_softmax_takes_a_row_major_mask_in_tile_wide_rows():
    """TT-NN's ROW_MAJOR mask form [N, 1, W / 32, 32] is one [W] row per batch (Falcon-7B's
    L1-sharded decode), broadcast over heads and rows; other ROW_MAJOR shapes are refused."""
    x, wx = _rand(21, (2, 3, 32, 64))
    row = np.random.default_rng(22).standard_normal((2, 1, 1, 64)).astype(np.float32)
    m, wm = put(row.reshape(2, 1, 2, 32), MESH, REPLICATED, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    y = ttnn.scale_mask_softmax_in_place(x, 0.5, m)
    want = {
        c: torch.softmax(_t(wx)[c] * 0.5 + _t(wm)[c].reshape(2, 1, 1, 64), -1).numpy() for c in wx
    }
    check(y, want, tol=(1e-5, 1e-5))
    bad, _ = put(row, MESH, REPLICATED, ttnn.bfloat16, ttnn.ROW_MAJOR_LAYOUT)
    with pytest.raises(ttnn.ShapeMismatchError, match=r"must have shape \[2, 1, 2, 32\]"):
        ttnn.scale_mask_softmax_in_place(x, 0.5, bad)


# ---------------------------------------------------------------------------------------------
# Names from other model families: broadcast_to, fill_rm, Mamba's SSM multiply, embeddings
# types, host tensors, ttnn.CONFIG / fallbacks, dot_access, MatmulProgramConfig
# ---------------------------------------------------------------------------------------------


def test_experimental_broadcast_to_follows_numpy_per_device():
    t, shards = _rand(30, (4, 1, 32, 1), ROWS)
    out = ttnn.experimental.broadcast_to(t, ttnn.Shape([2, 3, 32, 64]))
    check(out, {c: np.broadcast_to(v, (2, 3, 32, 64)) for c, v in shards.items()}, exact=True)
    with pytest.raises(ttnn.ShapeMismatchError, match="cannot be broadcast"):
        ttnn.experimental.broadcast_to(t, [2, 3, 16, 64])


def test_fill_rm_and_fill_ones_rm_fill_a_corner_of_each_plane():
    anyt, _ = _rand(31, (1, 1, 32, 32), REPLICATED, ttnn.bfloat16)
    out = ttnn.fill_rm(2, 1, 32, 64, 3, 5, anyt, 7.0, -1.0)
    want = np.full((2, 1, 32, 64), -1.0)
    want[:, :, :3, :5] = 7.0
    assert out.layout == ttnn.ROW_MAJOR_LAYOUT and out.dtype == ttnn.bfloat16
    check(out, {c: want for c in ((0, 0), (0, 1))}, exact=True)
    ones = ttnn.fill_ones_rm(1, 2, 32, 32, 1, 1, anyt)
    want1 = np.zeros((1, 2, 32, 32))
    want1[..., 0, 0] = 1
    check(ones, {c: want1 for c in ((0, 0), (0, 1))}, exact=True)
    with pytest.raises(ttnn.ShapeMismatchError, match="hOnes <= H"):
        ttnn.fill_rm(1, 1, 32, 32, 33, 1, anyt, 1.0, 0.0)


@pytest.mark.parametrize("a_full", [False, True], ids=["a32", "a_full"])
def test_repeat_and_interleave_eltwise_mul_matches_torch(a_full):
    width = 5120 * 32
    rng = np.random.default_rng(32)
    a = rng.standard_normal((1, 1, 32, width if a_full else 32)).astype(np.float32)
    b = rng.standard_normal((1, 1, 32, 5120)).astype(np.float32)
    ta, _ = put(a, MESH, REPLICATED, ttnn.float32)
    tb, _ = put(b, MESH, REPLICATED, ttnn.float32)
    out = ttnn.experimental.repeat_and_interleave_eltwise_mul(ta, tb)
    ra = torch.from_numpy(a) if a_full else torch.from_numpy(a).repeat(1, 1, 1, 5120)
    want = (ra * torch.from_numpy(b).repeat_interleave(32, dim=-1)).numpy()
    check(out, {c: want for c in ((0, 0), (0, 1))}, tol=(1e-6, 1e-6))
    with pytest.raises(ttnn.ShapeMismatchError, match="Use eltwise mul"):
        ttnn.experimental.repeat_and_interleave_eltwise_mul(tb, tb)


def test_embeddings_type_rules_and_binary_lookup():
    table = np.random.default_rng(33).standard_normal((2, 64)).astype(np.float32)
    w, _ = put(table, MESH, REPLICATED, ttnn.float32, ttnn.ROW_MAJOR_LAYOUT)
    ids = np.array([[1, 0, 1, 1]], np.uint32)
    ti = ttnn.from_torch(torch.from_numpy(ids.astype(np.int32)), dtype=ttnn.uint32,
                         device=w.mesh_device)  # fmt: skip
    out = ttnn.embedding(ti, w, embeddings_type=ttnn.EmbeddingsType.BINARY)
    check(out, {c: table[ids[0]][None] for c in ((0, 0), (0, 1))}, exact=True)
    with pytest.raises(ttnn.TTJaxError, match="Pad token must be specified"):
        ttnn.embedding(ti, w, embeddings_type=ttnn.EmbeddingsType.PADDED)
    w3, _ = put(
        np.zeros((3, 64), np.float32), MESH, REPLICATED, ttnn.float32, ttnn.ROW_MAJOR_LAYOUT
    )
    with pytest.raises(ttnn.ShapeMismatchError, match="2 embeddings for BINARY"):
        ttnn.embedding(ti, w3, embeddings_type=ttnn.EmbeddingsType.BINARY)


def test_allocate_tensor_on_host_receives_a_device_tensor():
    t, shards = _rand(34, (2, 1, 32, 32), ROWS)
    host = ttnn.allocate_tensor_on_host(t.shape, t.dtype, t.layout, t.mesh_device)
    assert host.storage_type() == ttnn.StorageType.HOST
    ttnn.copy_device_to_host_tensor(t, host)
    for c, piece in zip(((0, 0), (0, 1)), ttnn.get_device_tensors(host)):
        np.testing.assert_array_equal(ttnn.to_numpy(piece), shards[c])


def test_config_fallback_dot_access_and_matmul_program_config_names():
    assert ttnn.CONFIG.enable_comparison_mode is False
    with ttnn.manage_config("throw_exception_on_fallback", True):
        assert ttnn.CONFIG.throw_exception_on_fallback is True
    assert ttnn.CONFIG.throw_exception_on_fallback is False
    with pytest.raises(ttnn.ConfigError, match="no setting 'enable_magic'"):
        ttnn.CONFIG.enable_magic = True
    t, shards = _rand(35, (2, 1, 32, 64), ROWS)
    out = ttnn.get_fallback_function(ttnn.reshape)(t, (1, 32, 64))
    check(out, {c: v.reshape(1, 32, 64) for c, v in shards.items()}, exact=True)

    from ttjax.dot_access import DotAccessDict, make_dot_access_dict

    cfg = make_dot_access_dict({"core_grid": {"x": 8}, "heads": 12})
    assert isinstance(cfg.core_grid, DotAccessDict) and cfg.core_grid.x == 8 and cfg.heads == 12
    pc = ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(in0_block_w=2, per_core_M=1)
    assert isinstance(pc, ttnn.MatmulProgramConfig)


@pytest.mark.parametrize(
    "name,ref",
    [
        ("relu6", lambda t: F.relu6(t)),
        ("hardswish", lambda t: F.hardswish(t)),
        ("swish", lambda t: F.silu(t)),
    ],
)
def test_relu6_hardswish_swish_match_torch(name, ref):
    x = np.random.default_rng(36).uniform(-8, 8, (2, 1, 32, 64)).astype(np.float32)
    t, shards = put(x, MESH, ROWS, ttnn.float32)
    out = getattr(ttnn, name)(t)
    check(out, {c: ref(torch.from_numpy(v)).numpy() for c, v in shards.items()}, tol=(1e-6, 1e-6))


def test_remainder_bitwise_and_tril_match_torch():
    rng = np.random.default_rng(37)
    a, b = rng.uniform(-9, 9, (2, 2, 32, 32)), rng.uniform(1, 4, (2, 2, 32, 32))
    b = b * np.where(rng.random(b.shape) < 0.5, -1, 1)
    ta, sa = put(a.astype(np.float32), MESH, ROWS, ttnn.float32)
    tb, sb = put(b.astype(np.float32), MESH, ROWS, ttnn.float32)
    rem = ttnn.remainder(ta, tb)
    want = {
        c: torch.remainder(torch.from_numpy(sa[c]), torch.from_numpy(sb[c])).numpy() for c in sa
    }
    check(rem, want, tol=(1e-5, 1e-5))
    ia = rng.integers(0, 1 << 20, (2, 1, 32, 32)).astype(np.int32)
    ib = rng.integers(0, 1 << 20, (2, 1, 32, 32)).astype(np.int32)
    ta, sa = put(ia, MESH, ROWS, ttnn.int32)
    tb, sb = put(ib, MESH, ROWS, ttnn.int32)
    check(ttnn.bitwise_and(ta, tb), {c: sa[c].astype(np.int64) & sb[c].astype(np.int64) for c in sa},
          exact=True)  # fmt: skip
    check(ttnn.bitwise_or(ta, tb), {c: sa[c].astype(np.int64) | sb[c].astype(np.int64) for c in sa},
          exact=True)  # fmt: skip
    tt, st = put(a.astype(np.float32), MESH, ROWS, ttnn.float32)
    check(ttnn.tril(tt, diagonal=-1), {c: np.tril(v, -1) for c, v in st.items()}, exact=True)
