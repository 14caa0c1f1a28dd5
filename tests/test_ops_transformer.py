"""Transformer ops per device: attention (prefill and decode, GQA), rotary embeddings and the
in-place KV-cache updates. With heads (or users) split over devices, every device works on its
own heads; the numpy reference runs the textbook formula on each device's shards."""

from __future__ import annotations

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
    rounded,
    seeds,
)
from hypothesis import example, given
from hypothesis import strategies as st

import ttjax as ttnn

B, NH, S, D = 1, 4, 8, 16
ATTN_TOL = {F32: (1e-4, 1e-5), BF16: (3e-2, 3e-2)}

# Realistic layouts of attention operands: heads (dim 1) or batch (dim 0) split over devices.
head_layouts = layouts(4, dims=(0, 1))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention(q, k, v, *, causal=False, mask=None, scale=None):
    """q [b, nh, s, d], k/v [b, nkv, t, d]; query head h uses kv head h // (nh / nkv)."""
    groups = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.swapaxes(-1, -2) * scale
    s, t = scores.shape[-2:]
    if causal:
        allowed = np.arange(t)[None, :] <= np.arange(s)[:, None] + (t - s)
        scores = np.where(allowed, scores, -np.inf)
    if mask is not None:
        scores = scores + mask
    return softmax(scores) @ v


@st.composite
def sdpa_cases(draw):
    return (
        draw(mesh_shapes),
        tuple(draw(head_layouts) for _ in range(4)),  # q, k, v, mask
        draw(st.sampled_from([4, 2, 1])),  # kv heads per device (GQA when < NH)
        draw(st.sampled_from(["causal", "mask", "none"])),
        draw(st.sampled_from([F32, F32, BF16])),
        draw(seeds),
    )


@given(case=sdpa_cases())
@example(case=((1, 1), (REPLICATED,) * 4, 2, "causal", F32, 0))
def test_sdpa_per_device(case):
    mesh_shape, (lq, lk, lv, lm), nkv, mode, dtype, seed = case
    rng = np.random.default_rng(seed)
    q, qs = put_local(rng, (B, NH, S, D), mesh_shape, lq, dtype)
    k, ks = put_local(rng, (B, nkv, S, D), mesh_shape, lk, dtype)
    v, vs = put_local(rng, (B, nkv, S, D), mesh_shape, lv, dtype)
    if mode == "mask":
        mask_host = np.where(
            rng.random(lm.global_shape((B, 1, S, S), mesh_shape)) < 0.3, -1e9, 0.0
        ).astype(np.float32)
        mask_host[..., 0] = 0.0  # every query sees at least one key
        m, ms = put(mask_host, mesh_shape, lm, dtype)
        out = ttnn.transformer.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=False)
        want = reference(lambda a, b, c, mm: attention(a, b, c, mask=mm), qs, ks, vs, ms)
    else:
        causal = mode == "causal"
        out = ttnn.transformer.scaled_dot_product_attention(q, k, v, is_causal=causal)
        want = reference(lambda a, b, c: attention(a, b, c, causal=causal), qs, ks, vs)
    assert out.shape == (B, NH, S, D) and out.dtype == dtype
    check(out, want, tol=ATTN_TOL)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (2, 4)], ids=["1x1", "2x4"])
def test_sdpa_heads_split_over_columns_with_scale(mesh_shape):
    """Tensor-parallel attention: q heads and kv heads split over the columns (GQA 8:2 per
    device), with an explicit scale."""
    mesh = mesh_of(mesh_shape)
    cols = mesh_shape[1]
    rng = np.random.default_rng(11)
    qh = rng.standard_normal((1, 8 * cols, S, D)).astype(np.float32)
    kh = rng.standard_normal((1, 2 * cols, S, D)).astype(np.float32)
    vh = rng.standard_normal((1, 2 * cols, S, D)).astype(np.float32)
    lay = Layout("2d", (None, 1))
    q, qs = put(qh, mesh_shape, lay)
    k, ks = put(kh, mesh_shape, lay)
    v, vs = put(vh, mesh_shape, lay)
    out = ttnn.transformer.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    assert out.shape == (1, 8, S, D)
    want = reference(lambda a, b, c: attention(a, b, c, causal=True, scale=0.3), qs, ks, vs)
    check(out, want, tol=ATTN_TOL)
    # The query heads of device (r, c) attend over kv heads 2c and 2c + 1 of the host tensors.
    full = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, mesh_shape, (0, 1)))
    np.testing.assert_allclose(
        full[:1], attention(qh, kh, vh, causal=True, scale=0.3), rtol=1e-4, atol=1e-5
    )


def decode_reference(q, k, v, positions):
    """q [1, b, nh, d] over caches k/v [b, nkv, S, d]; user i sees positions <= positions[i]."""
    qb = q.transpose(1, 2, 0, 3)  # [b, nh, 1, d]
    t = k.shape[2]
    allowed = np.arange(t)[None, :] <= np.asarray(positions)[:, None]
    mask = np.where(allowed, 0.0, -np.inf)[:, None, None, :]
    return attention(qb, k, v, mask=mask).transpose(2, 0, 1, 3)


@st.composite
def decode_cases(draw):
    return (
        draw(mesh_shapes),
        tuple(draw(head_layouts) for _ in range(3)),
        draw(st.sampled_from([4, 1])),  # kv heads per device
        draw(st.sampled_from(["list", "tensor"])),
        draw(st.sampled_from([F32, F32, BF16])),
        draw(seeds),
    )


@given(case=decode_cases())
@example(case=((1, 1), (REPLICATED,) * 3, 1, "list", F32, 0))
def test_sdpa_decode_per_device(case):
    mesh_shape, (lq, lk, lv), nkv, mode, dtype, seed = case
    rng = np.random.default_rng(seed)
    users = 2
    q, qs = put_local(rng, (1, users, NH, D), mesh_shape, lq, dtype)
    k, ks = put_local(rng, (users, nkv, S, D), mesh_shape, lk, dtype)
    v, vs = put_local(rng, (users, nkv, S, D), mesh_shape, lv, dtype)
    positions = [int(p) for p in rng.integers(0, S, users)]
    if mode == "list":
        out = ttnn.transformer.scaled_dot_product_attention_decode(q, k, v, cur_pos=positions)
    else:
        pos = ttnn.from_torch(
            np.asarray(positions, np.int32), dtype=ttnn.int32, device=mesh_of(mesh_shape)
        )
        out = ttnn.transformer.scaled_dot_product_attention_decode(q, k, v, cur_pos_tensor=pos)
    assert out.shape == (1, users, NH, D) and out.dtype == dtype
    want = reference(lambda a, b, c: decode_reference(a, b, c, positions), qs, ks, vs)
    check(out, want, tol=ATTN_TOL)


def test_sdpa_decode_position_tensor_sharded_by_user():
    """Users split over the rows of a 2x4 mesh: each device reads its own users' positions."""
    mesh_shape = (2, 4)
    mesh = mesh_of(mesh_shape)
    rng = np.random.default_rng(12)
    users = 2
    lay_q, lay_kv = Layout("2d", (1, 2)), Layout("2d", (0, 1))
    q, qs = put_local(rng, (1, users, NH, D), mesh_shape, lay_q)
    k, ks = put_local(rng, (users, 1, S, D), mesh_shape, lay_kv)
    v, vs = put_local(rng, (users, 1, S, D), mesh_shape, lay_kv)
    pos_host = np.asarray([1, 6, 3, 7], np.int32)
    pos_layout = Layout("2d", (0, None))
    pos = ttnn.from_torch(pos_host, device=mesh, mesh_mapper=pos_layout.mapper(mesh))
    pos_shards = pos_layout.split(pos_host, mesh_shape)
    out = ttnn.transformer.scaled_dot_product_attention_decode(q, k, v, cur_pos_tensor=pos)
    want = reference(lambda a, b, c, p: decode_reference(a, b, c, p), qs, ks, vs, pos_shards)
    check(out, want, tol=ATTN_TOL)


def rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


@given(mesh_shape=mesh_shapes, layout=head_layouts, seed=seeds)
@example(mesh_shape=(1, 1), layout=REPLICATED, seed=0)
def test_rotary_embedding_per_device(mesh_shape, layout, seed):
    rng = np.random.default_rng(seed)
    max_seq = 16
    x, xs = put_local(rng, (1, NH, S, D), mesh_shape, layout)
    angles = np.arange(max_seq)[:, None] * rng.uniform(0.1, 1.0, D // 2)[None, :]
    angles = np.concatenate([angles, angles], axis=-1)[None, None]
    cos, coss = put(np.cos(angles).astype(np.float32), mesh_shape)
    sin, sins = put(np.sin(angles).astype(np.float32), mesh_shape)
    out = ttnn.experimental.rotary_embedding(x, cos, sin)
    want = reference(
        lambda a, c, s: a * c[..., :S, :] + rotate_half(a) * s[..., :S, :], xs, coss, sins
    )
    check(out, want)
    # Decode: one token at position token_index.
    xt, xts = put_local(rng, (1, NH, 1, D), mesh_shape, layout)
    for idx in (0, 5, 13):
        out = ttnn.experimental.rotary_embedding(xt, cos, sin, idx)
        want = reference(
            lambda a, c, s, i=idx: a * c[..., i : i + 1, :] + rotate_half(a) * s[..., i : i + 1, :],
            xts,
            coss,
            sins,
        )
        check(out, want)


@pytest.mark.parametrize(
    "mesh_shape", [(1, 1), (1, 2), (2, 4), (8, 4)], ids=lambda s: f"{s[0]}x{s[1]}"
)
def test_kv_cache_updates_in_place(mesh_shape):
    """fill_cache, update_cache and paged_update_cache write into the cache tensor itself; every
    device updates its own heads."""
    rng = np.random.default_rng(13)
    users, nkv, max_seq = 2, 2, 8
    # Heads split over the columns; on a 2-D mesh users also split over the rows.
    two_d = mesh_shape[0] > 1 and mesh_shape[1] > 1
    cache_layout = Layout("2d", (0, 1)) if two_d else Layout("2d", (None, 1))
    glob = cache_layout.global_shape((users, nkv, max_seq, D), mesh_shape)
    cache, want = put(np.zeros(glob, np.float32), mesh_shape, cache_layout, F32)
    want = {c: w.copy() for c, w in want.items()}
    cache_id, placements = id(cache), cache.placements

    # Prefill user 1 with 5 tokens (heads split like the cache's heads).
    pre_layout = Layout("2d", (None, 1))
    pre, pres = put_local(rng, (1, nkv, 5, D), mesh_shape, pre_layout, F32)
    out = ttnn.fill_cache(cache, pre, 1)
    assert out is cache and id(cache) == cache_id
    for c in want:
        want[c][1, :, :5] = pres[c][0]
    check(cache, want, exact=True)

    # One decode step for every user at position 5: input [1, nkv, users, d].
    step, steps = put_local(rng, (1, nkv, users, D), mesh_shape, pre_layout, F32)
    assert ttnn.update_cache(cache, step, 5) is cache
    for c in want:
        want[c][:, :, 5] = steps[c][0].transpose(1, 0, 2)
    check(cache, want, exact=True)

    # Paged update: input [1, users, nkv, d], user i at its own position.
    paged_layout = Layout("2d", (None, 2))
    upd, upds = put_local(rng, (1, users, nkv, D), mesh_shape, paged_layout, F32)
    for positions in ([6, 2], [7, 0]):
        assert ttnn.experimental.paged_update_cache(cache, upd, update_idxs=positions) is cache
        for c in want:
            for u, p in enumerate(positions):
                want[c][u, :, p] = upds[c][0, u]
        check(cache, want, exact=True)
    pos = ttnn.from_torch(np.asarray([3, 4], np.int32), device=mesh_of(mesh_shape))
    assert ttnn.experimental.paged_update_cache(cache, upd, update_idxs_tensor=pos) is cache
    for c in want:
        want[c][0, :, 3] = upds[c][0, 0]
        want[c][1, :, 4] = upds[c][0, 1]
    check(cache, want, exact=True)
    # [batch, 1] positions (gpt_oss passes them so): TT-NN counts the indices along dim 0
    pos2 = ttnn.from_torch(np.asarray([[5], [1]], np.int32), device=mesh_of(mesh_shape))
    ttnn.experimental.paged_update_cache(cache, upd, update_idxs_tensor=pos2)
    for c in want:
        want[c][0, :, 5] = upds[c][0, 0]
        want[c][1, :, 1] = upds[c][0, 1]
    check(cache, want, exact=True)
    assert cache.dtype == F32 and cache.shape == (users, nkv, max_seq, D)
    assert cache.placements == placements  # the cache keeps its layout (trace replay needs it)


def test_kv_cache_keeps_its_dtype():
    """A float32 update written into a bfloat16 cache is rounded to the cache's dtype."""
    mesh_shape = (1, 2)
    cache = ttnn.zeros((2, 1, 8, D), dtype=ttnn.bfloat16, device=mesh_of(mesh_shape))
    x, _ = put(np.full((1, 1, 2, D), 1.0 + 2**-12, np.float32), mesh_shape)
    ttnn.update_cache(cache, x, 3)
    assert cache.dtype == ttnn.bfloat16
    for arr in device_arrays(cache).values():
        assert np.all(arr[:, :, 3].astype(np.float32) == 1.0)
        assert np.all(np.delete(arr, 3, axis=2).astype(np.float32) == 0.0)


def test_out_of_range_positions_raise_instead_of_clamping():
    """XLA clamps an out-of-range dynamic index, which would silently overwrite the last slot."""
    mesh_shape = (1, 2)
    cache = ttnn.zeros((2, 1, 8, D), dtype=ttnn.float32, device=mesh_of(mesh_shape))
    x, _ = put(np.ones((1, 1, 2, D), np.float32), mesh_shape)
    pre, _ = put(np.ones((1, 1, 4, D), np.float32), mesh_shape)
    with pytest.raises(ttnn.ShapeMismatchError, match="update_idx=8"):
        ttnn.update_cache(cache, x, 8)
    with pytest.raises(ttnn.ShapeMismatchError, match="batch_idx=2"):
        ttnn.fill_cache(cache, pre, 2)
    cos, _ = put(np.ones((1, 1, 8, D), np.float32), mesh_shape)
    xt, _ = put(np.ones((1, NH, 1, D), np.float32), mesh_shape)
    with pytest.raises(ttnn.ShapeMismatchError, match="token_index=8"):
        ttnn.experimental.rotary_embedding(xt, cos, cos, 8)
    for arr in device_arrays(cache).values():
        assert not arr.any()


def test_decode_steps_reuse_one_program():
    """A decode loop changes positions every step; that must not compile a program per step."""
    mesh_shape = (2, 4)
    mesh = mesh_of(mesh_shape)
    rng = np.random.default_rng(14)
    q, _ = put_local(rng, (1, 2, NH, D), mesh_shape)
    k, _ = put_local(rng, (2, 1, S, D), mesh_shape)
    cache = ttnn.zeros((2, 1, S, D), dtype=ttnn.float32, device=mesh)
    upd, _ = put_local(rng, (1, 2, 1, D), mesh_shape)
    cos, _ = put_local(rng, (1, 1, S, D), mesh_shape)
    xt, _ = put_local(rng, (1, NH, 1, D), mesh_shape)

    def step(p: int) -> None:
        ttnn.transformer.scaled_dot_product_attention_decode(q, k, k, cur_pos=[p, p + 1])
        ttnn.experimental.paged_update_cache(cache, upd, update_idxs=[p, p])
        ttnn.update_cache(cache, ttnn.reshape(upd, (1, 1, 2, D)), p)
        ttnn.fill_cache(cache, ttnn.reshape(upd, (1, 1, 2, D)), p % 2)
        ttnn.experimental.rotary_embedding(xt, cos, cos, p)

    step(0)
    before = mesh.num_program_cache_entries()
    for p in range(1, 5):
        step(p)
    assert mesh.num_program_cache_entries() == before


@pytest.mark.parametrize("paged", [False, True], ids=["fill_cache", "paged_fill_cache"])
def test_fill_cache_from_one_column_writes_that_column_only(paged):
    """tt-metal's Galaxy attention prefill (attention.py prefill_prepare_tensor_for_kv_cache)
    combines one mesh column's k/v device tensors and fills the cache with them: TT-NN runs the
    fill on that column's devices only, the other columns keep their cache."""
    mesh = mesh_of((8, 4))
    rng = np.random.default_rng(3)
    nkv, seq, block = 1, 8, 4
    shape = (4, nkv, block, D) if paged else (2, nkv, seq, D)  # paged: [blocks, nkv, block, D]
    old = rng.standard_normal(shape).astype(np.float32)
    cache = ttnn.from_torch(old, dtype=ttnn.float32, device=mesh)
    x = rng.standard_normal((32, nkv, 6, D)).astype(np.float32)  # one [1, nkv, 6, D] per device
    k = ttnn.from_torch(
        x, dtype=ttnn.float32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 0)
    )
    col = ttnn.combine_device_tensors(ttnn.get_device_tensors(k)[1::4])
    if paged:
        table = np.array([[3, 1], [0, 2]], np.int32)
        tt_table = ttnn.from_torch(table, dtype=ttnn.int32, device=mesh)
        assert ttnn.experimental.paged_fill_cache(cache, col, tt_table, batch_idx=0) is cache
    else:
        assert ttnn.fill_cache(cache, col, 1) is cache
    got = ttnn.get_device_tensors(cache)
    for i, (r, c) in enumerate(np.ndindex(8, 4)):
        want = old.copy()
        if c == 1:
            mine = x[4 * r + c]
            if paged:  # token t -> block table[0, t // block], row t % block
                for t in range(6):
                    want[table[0, t // block], :, t % block] = mine[:, t]
            else:
                want[1, :, :6] = mine
        np.testing.assert_array_equal(ttnn.to_numpy(got[i]), want, err_msg=f"device {(r, c)}")


def test_sdpa_decode_attention_sink_joins_the_softmax_denominator():
    """attention_sink ([heads, 32], sink logit in column 0, scaled like a score: gpt-oss's
    sinks): softmax(scores ++ sink) over the scores only, against numpy; paged gives the same."""
    rng = np.random.default_rng(7)
    users, nh, nkv, d, t, sc = 2, 8, 2, 32, 64, 0.25
    mesh = mesh_of((1, 1))
    qh = rng.standard_normal((1, users, nh, d)).astype(np.float32)
    kh = rng.standard_normal((users, nkv, t, d)).astype(np.float32)
    vh = rng.standard_normal((users, nkv, t, d)).astype(np.float32)
    sinks = rng.standard_normal(nh).astype(np.float32)
    positions = [5, 40]
    tile = np.zeros((32, 32), np.float32)
    tile[:nh, 0] = sinks / sc  # as gpt_oss's attention stores them

    def put(x, dtype=ttnn.float32):
        return ttnn.from_torch(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh)

    sink = put(tile, ttnn.bfloat16)
    pos = ttnn.from_torch(np.asarray(positions, np.int32), dtype=ttnn.int32, device=mesh)
    out = ttnn.transformer.scaled_dot_product_attention_decode(
        put(qh), put(kh), put(vh), cur_pos_tensor=pos, scale=sc, attention_sink=sink
    )
    want = np.zeros_like(qh)
    stored = ttnn.to_torch(sink).float().numpy()[:nh, 0] * sc
    for u, p in enumerate(positions):
        for h in range(nh):
            s = kh[u, h // (nh // nkv), : p + 1] @ qh[0, u, h] * sc
            e = np.exp(np.concatenate([s, [stored[h]]]) - max(s.max(), stored[h]))
            want[0, u, h] = (e[:-1] / e.sum()) @ vh[u, h // (nh // nkv), : p + 1]
    np.testing.assert_allclose(ttnn.to_torch(out).numpy(), want, rtol=1e-4, atol=1e-5)
    # paged: the same caches as 2 blocks of 32 per user, blocks in reverse order
    table = np.asarray([[3, 2], [1, 0]], np.int32)
    paged = np.zeros((4, nkv, 32, d), np.float32), np.zeros((4, nkv, 32, d), np.float32)
    for u in range(users):
        for j in range(2):
            paged[0][table[u, j]] = kh[u, :, 32 * j : 32 * (j + 1)]
            paged[1][table[u, j]] = vh[u, :, 32 * j : 32 * (j + 1)]
    out = ttnn.transformer.paged_scaled_dot_product_attention_decode(
        put(qh),
        put(paged[0]),
        put(paged[1]),
        ttnn.from_torch(table, dtype=ttnn.int32, device=mesh),
        cur_pos_tensor=pos,
        scale=sc,
        attention_sink=sink,
    )
    np.testing.assert_allclose(ttnn.to_torch(out).numpy(), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ttnn.ShapeMismatchError, match="same padded num heads"):
        ttnn.transformer.scaled_dot_product_attention_decode(
            put(qh),
            put(kh),
            put(vh),
            cur_pos_tensor=pos,
            attention_sink=put(np.zeros((64, 32), np.float32), ttnn.bfloat16),
        )


def test_paged_cache_writes_only_at_mesh_coords():
    """mesh_coords= (deepseek_v3's MLA): paged_update_cache / paged_fill_cache write the caches
    of those devices only; the others keep their values."""
    mesh = mesh_of((2, 2))
    nkv, d, blocks = 1, 32, 4
    cache = ttnn.from_torch(np.zeros((blocks, nkv, 32, d), np.float32), device=mesh)
    table = ttnn.from_torch(np.asarray([[2, 0]], np.int32), device=mesh)
    pos = ttnn.from_torch(np.asarray([33], np.int32), device=mesh)
    step = ttnn.from_torch(np.ones((1, 1, nkv, d), np.float32), device=mesh)
    only = {ttnn.MeshCoordinate(0, 1), ttnn.MeshCoordinate(1, 0)}
    ttnn.experimental.paged_update_cache(
        cache, step, update_idxs_tensor=pos, page_table=table, mesh_coords=only
    )
    for c, arr in device_arrays(cache).items():
        want = np.zeros((blocks, nkv, 32, d), np.float32)
        if c in ((0, 1), (1, 0)):
            want[0, :, 1] = 1.0  # position 33: block table[0][1] = 0, row 1
        np.testing.assert_array_equal(arr, want)
    fill = ttnn.from_torch(np.full((1, nkv, 32, d), 2.0, np.float32), device=mesh)
    ttnn.experimental.paged_fill_cache(
        cache, fill, table, batch_idx=0, mesh_coords={ttnn.MeshCoordinate(1, 1)}
    )
    got = device_arrays(cache)
    assert np.all(got[(1, 1)][2] == 2.0) and not np.any(got[(0, 0)])
    with pytest.raises(ttnn.ShapeMismatchError, match="mesh_coords"):
        ttnn.experimental.paged_update_cache(
            cache, step, update_idxs_tensor=pos, page_table=table, mesh_coords={(2, 0)}
        )


def test_flash_mla_decode_reads_values_from_the_latent_columns():
    """FlashMLA decode (deepseek_v3): one cache [b, 1, S, dk] is K, and its first head_dim_v
    columns are V; against numpy, plain and paged (blocks of 32 out of order)."""
    rng = np.random.default_rng(11)
    users, nh, dk, dv, t, sc = 2, 4, 96, 64, 64, 0.1
    mesh = mesh_of((1, 1))
    qh = rng.standard_normal((1, users, nh, dk)).astype(np.float32)
    kv = rng.standard_normal((users, 1, t, dk)).astype(np.float32)
    positions = [9, 50]

    def put(x, dtype=ttnn.float32):
        return ttnn.from_torch(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh)

    want = np.zeros((1, users, nh, dv), np.float32)
    for u, p in enumerate(positions):
        s = qh[0, u] @ kv[u, 0, : p + 1].T * sc  # [nh, p+1]
        e = np.exp(s - s.max(-1, keepdims=True))
        want[0, u] = (e / e.sum(-1, keepdims=True)) @ kv[u, 0, : p + 1, :dv]
    pos = ttnn.from_torch(np.asarray(positions, np.int32), dtype=ttnn.int32, device=mesh)
    out = ttnn.transformer.flash_multi_latent_attention_decode(
        put(qh), put(kv), dv, cur_pos_tensor=pos, scale=sc
    )
    np.testing.assert_allclose(ttnn.to_torch(out).numpy(), want, rtol=1e-4, atol=1e-5)
    table = np.asarray([[3, 1], [0, 2]], np.int32)
    paged = np.zeros((4, 1, 32, dk), np.float32)
    for u in range(users):
        for j in range(2):
            paged[table[u, j]] = kv[u, :, 32 * j : 32 * (j + 1)]
    out = ttnn.transformer.paged_flash_multi_latent_attention_decode(
        put(qh),
        put(paged),
        dv,
        ttnn.from_torch(table, dtype=ttnn.int32, device=mesh),
        cur_pos_tensor=pos,
        scale=sc,
    )
    np.testing.assert_allclose(ttnn.to_torch(out).numpy(), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ttnn.ShapeMismatchError, match="head_dim_v"):
        ttnn.transformer.flash_multi_latent_attention_decode(put(qh), put(kv), 200)


def test_flash_mla_prefill_is_causal_attention_with_latent_values():
    """FlashMLA prefill (deepseek_v3's MLA prefill): k [b, 1, s, dk] is K, its first head_dim_v
    columns V; causal by default; against numpy."""
    rng = np.random.default_rng(12)
    nh, dk, dv, s, sc = 4, 96, 64, 40, 0.1
    mesh = mesh_of((1, 1))
    q = rng.standard_normal((1, nh, s, dk)).astype(np.float32)
    kv = rng.standard_normal((1, 1, s, dk)).astype(np.float32)

    def put(x):
        return ttnn.from_torch(x, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh)

    scores = q[0] @ kv[0, 0].T * sc + np.triu(np.full((s, s), -np.inf), 1)  # [nh, s, s]
    e = np.exp(scores - scores.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)) @ kv[0, 0, :, :dv]
    out = ttnn.transformer.flash_mla_prefill(put(q), put(kv), head_dim_v=dv, scale=sc)
    np.testing.assert_allclose(ttnn.to_torch(out).numpy()[0], want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ttnn.ShapeMismatchError, match="head_dim_v"):
        ttnn.transformer.flash_mla_prefill(put(q), put(kv), 200)


def test_ring_distributed_sdpa_gives_each_ring_device_two_balanced_chunks():
    """ring_distributed_scaled_dot_product_attention (the Galaxy Llama's prefill over 1024
    tokens): on a 2x4 mesh with ring_size 4 the ring is mesh axis 1; column r holds the causal
    attention of query chunks r and 7 - r (of 8), against numpy on the bfloat16 inputs."""
    rng = np.random.default_rng(13)
    nh, nkv, s, d, ring = 4, 2, 256, 32, 4
    mesh = mesh_of((2, 4))
    host = [rng.standard_normal((1, n, s, d)).astype(np.float32) for n in (nh, nkv, nkv)]

    def put_bf16(x):
        return ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh,
                               mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))  # fmt: skip

    q, k, v = (rounded(x, ttnn.bfloat16) for x in host)
    full = attention(q, k, v, causal=True, scale=0.2)
    c = s // (2 * ring)
    out = ttnn.transformer.ring_distributed_scaled_dot_product_attention(
        *(put_bf16(x) for x in host), ring_size=ring, scale=0.2
    )
    assert tuple(out.shape) == (1, nh, s // ring, d)
    for (_, col), got in device_arrays(out).items():
        want = np.concatenate([full[:, :, col * c : (col + 1) * c],
                               full[:, :, (7 - col) * c : (8 - col) * c]], axis=2)  # fmt: skip
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=3e-2, atol=3e-2)
    fixed = ttnn.transformer.ring_distributed_scaled_dot_product_attention(
        *(put_bf16(x) for x in host), 4, 1, scale=0.2
    )
    for got in device_arrays(fixed).values():
        want = np.concatenate([full[:, :, c : 2 * c], full[:, :, 6 * c : 7 * c]], axis=2)
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=3e-2, atol=3e-2)
    with pytest.raises(ttnn.ShapeMismatchError, match="ring_size must be even"):
        ttnn.transformer.ring_distributed_scaled_dot_product_attention(
            *(put_bf16(x) for x in host), ring_size=3
        )
    with pytest.raises(ttnn.ShapeMismatchError, match="at least 2\\*ring_size"):
        short = [put_bf16(x[:, :, :128]) for x in host]
        ttnn.transformer.ring_distributed_scaled_dot_product_attention(*short, ring_size=4)
    mesh = mesh_of((1, 8))  # put_bf16 reads it: no mesh axis of 4 devices
    with pytest.raises(ttnn.ShapeMismatchError, match="doesn't match mesh dimensions"):
        ttnn.transformer.ring_distributed_scaled_dot_product_attention(
            *(put_bf16(x) for x in host), ring_size=4
        )


def test_paged_update_cache_writes_the_caches_heads_from_the_first_input_rows():
    """TT-NN's update kernels write the cache's nkv heads from each user's first input rows: the
    Galaxy's llama_rs_create_heads hands K over as [1, users, 8, d] whose row 0 is the head,
    for a cache of one kv head per device."""
    mesh = mesh_of((1, 1))
    d, blocks = 32, 4
    cache = ttnn.from_torch(np.zeros((blocks, 1, 32, d), np.float32), device=mesh)
    table = ttnn.from_torch(np.asarray([[3, 1], [0, 2]], np.int32), device=mesh)
    pos = ttnn.from_torch(np.asarray([5, 40], np.int32), device=mesh)
    k = np.random.default_rng(14).standard_normal((1, 2, 8, d)).astype(np.float32)
    ttnn.experimental.paged_update_cache(
        cache, ttnn.from_torch(k, device=mesh), update_idxs_tensor=pos, page_table=table
    )
    want = np.zeros((blocks, 1, 32, d), np.float32)
    want[3, 0, 5], want[2, 0, 8] = k[0, 0, 0], k[0, 1, 0]  # user 1: position 40 = block 1, row 8
    np.testing.assert_array_equal(ttnn.to_torch(cache).numpy(), want)
