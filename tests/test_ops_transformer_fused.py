"""TT-NN's fused transformer ops called the way tt-metal's models/tt_transformers and the
Mixtral demo call them (QKV head split/concat, Llama rotary with the transformation matrix,
paged KV caches and paged/chunked attention, distributed RMSNorm, fast_reduce_nc, moe), each
against an independent torch reference: HF-style rotary, torch SDPA, torch RMSNorm over the
full hidden dim, the paged cache read back through its page table."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _op_testing import F32, Layout, device_arrays, mesh_of, put

import ttjax as ttnn

D = 32  # head_dim: TT-NN's fused ops work on whole 32-wide tiles


def per_device(t: ttnn.Tensor) -> list[np.ndarray]:
    return [a.astype(np.float64) for a in device_arrays(t).values()]


def close(got: np.ndarray, want, tol: float = 1e-5) -> None:
    np.testing.assert_allclose(got, np.asarray(want, np.float64), rtol=tol, atol=tol)


def from_torch(x: torch.Tensor, mesh, dtype=ttnn.float32, **kw) -> ttnn.Tensor:
    return ttnn.from_torch(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh, **kw)


def page_table_for(users: int, blocks_per_user: int, seed: int) -> torch.Tensor:
    """A shuffled page table: user u's block i lives at a random block of the cache."""
    perm = torch.randperm(users * blocks_per_user, generator=torch.Generator().manual_seed(seed))
    return perm.reshape(users, blocks_per_user).to(torch.int32)


def to_paged(cache: torch.Tensor, table: torch.Tensor, block: int) -> torch.Tensor:
    """Contiguous [b, nkv, S, d] -> paged [b*S/block, nkv, block, d] placed by ``table``."""
    b, nkv, s, d = cache.shape
    blocks = cache.reshape(b, nkv, s // block, block, d).transpose(1, 2)  # [b, nblk, nkv, blk, d]
    paged = torch.zeros(b * (s // block), nkv, block, d)
    paged[table.reshape(-1).long()] = blocks.reshape(-1, nkv, block, d)
    return paged


def from_paged(paged: np.ndarray, table: torch.Tensor) -> np.ndarray:
    """The contiguous [b, nkv, S, d] view of a paged cache, read through ``table``."""
    g = paged[table.numpy()]  # [b, nblk, nkv, blk, d]
    b, nblk, nkv, blk, d = g.shape
    return g.transpose(0, 2, 1, 3, 4).reshape(b, nkv, nblk * blk, d)


# ---------------------------------------------------------------------------------------------
# QKV heads
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 8)], ids=["1x1", "1x8"])
def test_nlp_create_qkv_heads_prefill_per_device(mesh_shape):
    """attention.py's prefill: the QKV matmul output, columns split per device (each device's
    [q heads | k heads | v heads]), -> q/k/v heads [1, heads, S, d]."""
    mesh = mesh_of(mesh_shape)
    n = mesh_shape[1]
    nh, nkv, s = 4, 2, 32
    w = (nh + 2 * nkv) * D
    x = torch.randn(1, 1, s, n * w)
    xt = from_torch(x, mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        xt, num_heads=nh, num_kv_heads=nkv, transpose_k_heads=False, memory_config=None
    )
    assert q.shape == (1, nh, s, D) and k.shape == (1, nkv, s, D) and v.shape == (1, nkv, s, D)
    _, kt, _ = ttnn.experimental.nlp_create_qkv_heads(xt, num_heads=nh, num_kv_heads=nkv)
    assert kt.shape == (1, nkv, D, s)
    for dev, (gq, gk, gv, gkt) in enumerate(zip(*(per_device(t) for t in (q, k, v, kt)))):
        local = x[..., dev * w : (dev + 1) * w]
        rq, rk, rv = torch.split(local, [nh * D, nkv * D, nkv * D], dim=-1)
        heads = lambda t, h: t.reshape(1, s, h, D).transpose(1, 2)  # noqa: E731
        close(gq, heads(rq, nh))
        close(gk, heads(rk, nkv))
        close(gv, heads(rv, nkv))
        close(gkt, heads(rk, nkv).transpose(-1, -2))


def test_nlp_create_qkv_heads_with_separate_kv():
    """input_kv= (llama_cross_attention's call): q heads from ``input``, k then v from
    ``input_kv`` ([B, 1, S, 2*nkv*d]: all k heads, then all v heads)."""
    mesh = mesh_of((1, 2))
    nh, nkv, s = 4, 2, 32
    xq, xkv = torch.randn(1, 1, s, nh * D), torch.randn(1, 1, s, 2 * nkv * D)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        from_torch(xq, mesh),
        from_torch(xkv, mesh),
        num_heads=nh,
        num_kv_heads=nkv,
        transpose_k_heads=False,
    )
    heads = lambda t, h: t.reshape(1, s, h, D).transpose(1, 2)  # noqa: E731
    close(per_device(q)[0], heads(xq, nh), 0)
    close(per_device(k)[1], heads(xkv[..., : nkv * D], nkv), 0)
    close(per_device(v)[1], heads(xkv[..., nkv * D :], nkv), 0)


def test_nlp_create_qkv_heads_decode_and_concat_decode():
    """Decode: [1, 1, batch, width] -> q [1, batch, nh, d], k/v [1, batch, nkv, d]; the
    attention output goes back through nlp_concat_heads_decode as [1, 1, 32, nh*d]."""
    mesh = mesh_of((1, 2))
    nh, nkv, batch = 8, 2, 5
    x = torch.randn(1, 1, batch, (nh + 2 * nkv) * D)
    xt = from_torch(x, mesh, dtype=ttnn.bfloat16)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads_decode(
        xt, num_heads=nh, num_kv_heads=nkv, memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG
    )
    xr = x.to(torch.bfloat16).float()
    want_q = xr[0, 0, :, : nh * D].reshape(1, batch, nh, D)
    want_k = xr[0, 0, :, nh * D : (nh + nkv) * D].reshape(1, batch, nkv, D)
    want_v = xr[0, 0, :, (nh + nkv) * D :].reshape(1, batch, nkv, D)
    for got, want in ((q, want_q), (k, want_k), (v, want_v)):
        assert got.shape == tuple(want.shape) and got.dtype == ttnn.bfloat16
        for g in per_device(got):
            close(g, want, 0)

    cat = ttnn.experimental.nlp_concat_heads_decode(q, num_heads=nh)
    assert cat.shape == (1, 1, 32, nh * D)  # TT-NN pads the users to 32 rows
    for g in per_device(cat):
        close(g[0, 0, :batch], want_q.reshape(batch, nh * D), 0)
        assert not g[0, 0, batch:].any()

    # num_heads may reach into the heads' tile padding (Mixtral's hard-coded num_heads=4).
    wide = ttnn.experimental.nlp_concat_heads_decode(k, num_heads=4)
    for g in per_device(wide):
        close(g[0, 0, :batch, : nkv * D], want_k.reshape(batch, nkv * D), 0)
        assert not g[0, 0, :, nkv * D :].any()

    # TT-NN's output spec, whatever memory_config= says: L1 width-sharded, one head per core
    # ([32, d] shards) on the first nh cores of the grid row by row (compute_output_specs).
    mc = cat.memory_config()
    assert mc.memory_layout == ttnn.TensorMemoryLayout.WIDTH_SHARDED
    assert mc.buffer_type == ttnn.BufferType.L1
    assert tuple(mc.shard_spec.shape) == (32, D) and mc.shard_spec.grid.num_cores() == nh
    assert mc.shard_spec.grid == ttnn.num_cores_to_corerangeset(nh, ttnn.CoreCoord(8, 8), True)
    # An input sharded on a sub-grid away from (0, 0): the output's cores start at its first.
    sub = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 1))])
    q_sub = ttnn.to_memory_config(
        q,
        ttnn.create_sharded_memory_config(
            (32, D), sub, ttnn.ShardStrategy.HEIGHT, use_height_and_width_as_shard_shape=True
        ),
    )
    on_sub = ttnn.experimental.nlp_concat_heads_decode(q_sub, num_heads=4)
    want_cores = [(1, 0), (2, 0), (3, 0), (1, 1)]
    got_cores = [
        (x, y)
        for r in on_sub.memory_config().shard_spec.grid.ranges()
        for y in range(r.start.y, r.end.y + 1)
        for x in range(r.start.x, r.end.x + 1)
    ]
    assert sorted(got_cores, key=lambda c: (c[1], c[0])) == want_cores
    close(per_device(on_sub)[0][0, 0, :batch], want_q.reshape(batch, nh * D)[:, : 4 * D], 0)

    # batch_offset (a device tensor) + slice_size keep users 2..4.
    off = ttnn.from_torch(torch.tensor([2], dtype=torch.int32), dtype=ttnn.int32, device=mesh)
    q2, _, v2 = ttnn.experimental.nlp_create_qkv_heads_decode(
        xt, num_heads=nh, num_kv_heads=nkv, batch_offset=off, slice_size=3
    )
    assert q2.shape == (1, 3, nh, D)
    close(per_device(q2)[0], want_q[:, 2:5], 0)
    close(per_device(v2)[1], want_v[:, 2:5], 0)


def test_nlp_concat_heads_prefill():
    mesh = mesh_of((1, 2))
    x = torch.randn(1, 4, 32, D)
    out = ttnn.experimental.nlp_concat_heads(from_torch(x, mesh), memory_config=None)
    assert out.shape == (1, 1, 32, 4 * D)
    close(per_device(out)[0], x.transpose(1, 2).reshape(1, 1, 32, 4 * D), 0)


# ---------------------------------------------------------------------------------------------
# rotary_embedding_llama
# ---------------------------------------------------------------------------------------------


def rot_transformation_mat() -> torch.Tensor:
    """The model code's transformation matrix: one 32x32 tile mapping (x0, x1) -> (-x1, x0)."""
    t = torch.zeros(1, 1, 32, 32)
    t[..., torch.arange(0, 32, 2), torch.arange(1, 32, 2)] = 1
    t[..., torch.arange(1, 32, 2), torch.arange(0, 32, 2)] = -1
    return t


def hf_rotary(x: torch.Tensor, pos: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Hugging Face Llama's apply_rotary_pos_emb (rotate_half) at positions ``pos`` (x [..., S, d])."""
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2).double() / d)
    ang = pos.double()[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x.double() * emb.cos() + torch.cat([-x2, x1], dim=-1).double() * emb.sin()


def meta_cos_sin(pos: torch.Tensor, d: int, theta: float = 10000.0):
    """cos/sin as tt_transformers builds them for the Meta layout: [c0, c0, c1, c1, ...]."""
    inv = 1.0 / theta ** (torch.arange(0, d, 2).double() / d)
    ang = pos.double()[:, None] * inv[None, :]
    rep = lambda a: torch.stack([a, a], dim=-1).flatten(-2).float()  # noqa: E731
    return rep(ang.cos()), rep(ang.sin())


def to_meta(x: torch.Tensor) -> torch.Tensor:
    """HF head layout [a0..a(d/2-1), b0..] -> Meta's interleaved [a0, b0, a1, b1, ...] (what the
    model's reverse permute of the q/k weights produces)."""
    d = x.shape[-1]
    return x.reshape(*x.shape[:-1], 2, d // 2).transpose(-1, -2).reshape(x.shape)


def test_rotary_embedding_llama_prefill_matches_hf_rotary():
    mesh = mesh_of((1, 8))
    nh, s, d = 2, 40, 64
    x_hf = torch.randn(1, nh, s, d)
    cos, sin = meta_cos_sin(torch.arange(s), d)
    trans = from_torch(rot_transformation_mat(), mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))
    out = ttnn.experimental.rotary_embedding_llama(
        from_torch(to_meta(x_hf), mesh),
        from_torch(cos[None, None], mesh),
        from_torch(sin[None, None], mesh),
        trans,
        is_decode_mode=False,
    )
    assert out.shape == (1, nh, s, d)
    want = to_meta(hf_rotary(x_hf, torch.arange(s)).float())
    for g in per_device(out):
        close(g, want, 2e-5)


def test_rotary_embedding_llama_decode_per_user_positions():
    """Decode: x [1, batch, heads, d], cos/sin [1, batch, 1, d] gathered at each user's position,
    trans_mat one tile per user [1, 1, 32*batch, 32] (RotarySetup's decode matrix)."""
    mesh = mesh_of((1, 2))
    batch, nh, d = 3, 4, 64
    pos = torch.tensor([0, 7, 19])
    x_hf = torch.randn(1, batch, nh, d)
    cos, sin = meta_cos_sin(pos, d)  # [batch, d]
    trans = rot_transformation_mat().repeat(1, 1, batch, 1)
    out = ttnn.experimental.rotary_embedding_llama(
        from_torch(to_meta(x_hf), mesh, dtype=ttnn.bfloat16),
        from_torch(cos[None, :, None], mesh, dtype=ttnn.bfloat16),
        from_torch(sin[None, :, None], mesh, dtype=ttnn.bfloat16),
        from_torch(trans, mesh, dtype=ttnn.bfloat16),
        is_decode_mode=True,
    )
    assert out.shape == (1, batch, nh, d) and out.dtype == ttnn.bfloat16
    want = torch.stack(
        [hf_rotary(x_hf[0, b][:, None], pos[b : b + 1])[:, 0] for b in range(batch)]
    )[None]
    for g in per_device(out):
        np.testing.assert_allclose(g, to_meta(want.float()).numpy(), rtol=3e-2, atol=3e-2)


def test_rotary_embedding_llama_uses_the_given_matrix():
    """The op multiplies by whatever trans_mat it gets (as TT-NN's kernel does): the identity
    gives x * (cos + sin)."""
    mesh = mesh_of((1, 1))
    x = torch.randn(1, 1, 32, D)
    cos, sin = torch.rand(1, 1, 32, D), torch.rand(1, 1, 32, D)
    eye = torch.eye(32)[None, None]
    out = ttnn.experimental.rotary_embedding_llama(
        from_torch(x, mesh), from_torch(cos, mesh), from_torch(sin, mesh), from_torch(eye, mesh)
    )
    close(per_device(out)[0], x * (cos + sin), 1e-6)


# ---------------------------------------------------------------------------------------------
# Paged KV caches
# ---------------------------------------------------------------------------------------------


def test_paged_fill_then_update_cache_through_page_table():
    """attention.py: paged_fill_cache per user in prefill, then paged_update_cache with
    update_idxs_tensor and page_table every decode step; read back through the page table the
    cache equals the contiguous writes."""
    mesh = mesh_of((1, 2))
    users, nkv, block, blocks = 2, 2, 8, 4  # 32 positions per user
    table = page_table_for(users, blocks, seed=3)
    tt_table = ttnn.from_torch(table, dtype=ttnn.int32, device=mesh)
    cache = ttnn.zeros((users * blocks, nkv, block, D), dtype=ttnn.float32, device=mesh)
    want = torch.zeros(users, nkv, blocks * block, D)

    prompt = torch.randn(1, nkv, 11, D)
    user_table = ttnn.from_torch(table[1:2], dtype=ttnn.int32, device=mesh)
    assert (
        ttnn.experimental.paged_fill_cache(cache, from_torch(prompt, mesh), user_table, batch_idx=0)
        is cache
    )
    want[1, :, :11] = prompt[0]
    prompt0 = torch.randn(1, nkv, 9, D)
    first_user = ttnn.from_torch(
        torch.tensor([0], dtype=torch.int32), dtype=ttnn.int32, device=mesh
    )
    ttnn.experimental.paged_fill_cache(
        cache, from_torch(prompt0, mesh), tt_table, batch_idx_tensor=first_user
    )
    want[0, :, :9] = prompt0[0]

    for positions in ([9, 11], [10, -1], [31, 12]):
        new = torch.randn(1, users, nkv, D)
        cur = ttnn.from_torch(
            torch.tensor(positions, dtype=torch.int32), dtype=ttnn.int32, device=mesh
        )
        ttnn.experimental.paged_update_cache(
            cache, from_torch(new, mesh), update_idxs_tensor=cur, page_table=tt_table
        )
        for u, p in enumerate(positions):
            if p >= 0:  # -1: TT-NN skips the user
                want[u, :, p] = new[0, u]
    for g in per_device(cache):
        close(from_paged(g, table), want, 0)


def test_kv_cache_module_fill_and_update():
    mesh = mesh_of((1, 2))
    cache = ttnn.zeros((2, 1, 16, D), dtype=ttnn.float32, device=mesh)
    x = torch.randn(1, 1, 5, D)
    assert ttnn.kv_cache.fill_cache_for_user_(cache, from_torch(x, mesh), 1) is cache
    tok = torch.randn(1, 1, 2, D)
    ttnn.kv_cache.update_cache_for_token_(cache, from_torch(tok, mesh), 7)
    want = torch.zeros(2, 1, 16, D)
    want[1, :, :5] = x[0]
    want[:, :, 7] = tok[0].transpose(0, 1)
    for g in per_device(cache):
        close(g, want, 0)


# ---------------------------------------------------------------------------------------------
# Attention: prefill, decode (plain and paged), chunked prefill
# ---------------------------------------------------------------------------------------------


def torch_gqa(q, k, v, **kw):
    g = q.shape[1] // k.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), **kw
    )


def test_sdpa_prefill_causal_matches_torch():
    mesh = mesh_of((1, 2))
    q, k, v = torch.randn(1, 8, 40, D), torch.randn(1, 2, 40, D), torch.randn(1, 2, 40, D)
    out = ttnn.transformer.scaled_dot_product_attention(
        from_torch(q, mesh),
        from_torch(k, mesh),
        from_torch(v, mesh),
        is_causal=True,
        attn_mask=None,
        scale=0.2,
        compute_kernel_config=None,
        program_config=None,
    )
    close(per_device(out)[1], torch_gqa(q, k, v, is_causal=True, scale=0.2), 2e-5)

    # sliding_window_size=w: the last w keys (causal), keys within w//2 (non-causal).
    i, j = torch.arange(40)[:, None], torch.arange(40)[None, :]
    for causal, allowed in ((True, (j <= i) & (j > i - 8)), (False, (j - i).abs() <= 4)):
        out = ttnn.transformer.scaled_dot_product_attention(
            from_torch(q, mesh),
            from_torch(k, mesh),
            from_torch(v, mesh),
            is_causal=causal,
            sliding_window_size=8,
        )
        want = torch_gqa(q, k, v, attn_mask=torch.where(allowed, 0.0, float("-inf")))
        close(per_device(out)[0], want, 2e-5)


def test_sdpa_decode_modes_match_torch():
    """cur_pos_tensor (causal, -1 skips a user), a sliding window, and is_causal=False with
    TT-NN's decode mask [b, 1, nh, S]."""
    mesh = mesh_of((1, 2))
    b, nh, nkv, s = 3, 4, 2, 64
    q, k, v = torch.randn(1, b, nh, D), torch.randn(b, nkv, s, D), torch.randn(b, nkv, s, D)
    tq, tk, tv = (from_torch(t, mesh) for t in (q, k, v))
    pos = [5, -1, 63]
    cur = ttnn.from_torch(torch.tensor(pos, dtype=torch.int32), dtype=ttnn.int32, device=mesh)

    def want(mask):  # mask [b, nh, 1, s], added
        return torch_gqa(q.permute(1, 2, 0, 3), k, v, attn_mask=mask).permute(2, 0, 1, 3)

    def causal_mask(window=None):
        m = torch.full((b, nh, 1, s), float("-inf"))
        for i, p in enumerate(pos):
            lo = 0 if window is None else max(0, p - window + 1)
            m[i, :, :, lo : p + 1] = 0
        return m

    out = ttnn.transformer.scaled_dot_product_attention_decode(
        tq,
        tk,
        tv,
        cur_pos_tensor=cur,
        scale=D**-0.5,
        is_causal=True,
        attn_mask=None,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
    )
    got, ref = per_device(out)[0], want(causal_mask()).numpy()
    close(got[:, [0, 2]], ref[:, [0, 2]], 2e-5)
    assert not got[:, 1].any()  # the skipped user

    out = ttnn.transformer.scaled_dot_product_attention_decode(
        tq, tk, tv, cur_pos=pos, sliding_window_size=4
    )
    close(per_device(out)[0][:, [0, 2]], want(causal_mask(4)).numpy()[:, [0, 2]], 2e-5)

    mask = torch.where(torch.rand(b, nh, 1, s) < 0.3, -1e9, 0.0)
    mask[..., 0] = 0
    out = ttnn.transformer.scaled_dot_product_attention_decode(
        tq, tk, tv, is_causal=False, attn_mask=from_torch(mask.transpose(1, 2), mesh)
    )
    close(per_device(out)[1], want(mask), 2e-5)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (1, 8)], ids=["1x1", "1x8"])
def test_paged_sdpa_decode_matches_contiguous(mesh_shape):
    """attention.py's paged decode: users' caches scattered over blocks through a page table
    give the same attention as the contiguous caches (kv heads split over devices)."""
    mesh = mesh_of(mesh_shape)
    n = mesh_shape[1]
    b, nh, nkv, block, blocks = 2, 4, 1, 16, 4
    s = block * blocks
    table = page_table_for(b, blocks, seed=5)
    q = torch.randn(1, b, n * nh, D)
    k, v = torch.randn(b, n * nkv, s, D), torch.randn(b, n * nkv, s, D)
    heads = lambda t, dim: ttnn.from_torch(  # noqa: E731
        t, dtype=ttnn.float32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=dim)
    )
    pos = [17, 63]
    out = ttnn.transformer.paged_scaled_dot_product_attention_decode(
        heads(q, 2),
        heads(to_paged(k, table, block), 1),
        heads(to_paged(v, table, block), 1),
        cur_pos_tensor=ttnn.from_torch(
            torch.tensor(pos, dtype=torch.int32), dtype=ttnn.int32, device=mesh
        ),
        page_table_tensor=ttnn.from_torch(table, dtype=ttnn.int32, device=mesh),
        attn_mask=None,
        is_causal=True,
        scale=D**-0.5,
        program_config=None,
        compute_kernel_config=None,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
    )
    assert out.shape == (1, b, nh, D)
    mask = torch.full((b, 1, 1, s), float("-inf"))
    for i, p in enumerate(pos):
        mask[i, ..., : p + 1] = 0
    want = torch_gqa(q.permute(1, 2, 0, 3), k, v, attn_mask=mask).permute(2, 0, 1, 3)
    for dev, g in enumerate(per_device(out)):
        close(g, want[:, :, dev * nh : (dev + 1) * nh], 2e-5)


def test_chunked_sdpa_equals_causal_attention_over_the_whole_prompt():
    """Chunked prefill: the second chunk's queries attend over the first chunk's keys (already
    in the paged cache) and causally over their own."""
    mesh = mesh_of((1, 2))
    nh, nkv, block, blocks = 4, 2, 16, 4
    s = block * blocks
    table = page_table_for(1, blocks, seed=7)
    q, k, v = torch.randn(1, nh, s, D), torch.randn(1, nkv, s, D), torch.randn(1, nkv, s, D)
    full = torch_gqa(q, k, v, is_causal=True)
    start, chunk = 32, 32
    out = ttnn.transformer.chunked_scaled_dot_product_attention(
        input_tensor_q=from_torch(q[:, :, start : start + chunk], mesh),
        input_tensor_k=from_torch(to_paged(k, table, block), mesh),
        input_tensor_v=from_torch(to_paged(v, table, block), mesh),
        page_table_tensor=ttnn.from_torch(table, dtype=ttnn.int32, device=mesh),
        chunk_start_idx=start,
        compute_kernel_config=None,
        program_config=None,
    )
    close(per_device(out)[0], full[:, :, start : start + chunk], 2e-5)


# ---------------------------------------------------------------------------------------------
# Distributed RMSNorm, fast_reduce_nc, moe
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mesh_shape", [(1, 8), (2, 4)], ids=["1x8", "2x4"])
def test_distributed_rms_norm_equals_torch_rms_norm(mesh_shape):
    """ccl.py's tt_distributed_rmsnorm: pre_all_gather -> all_gather(stats, dim=3) over the
    devices splitting the hidden dim -> post_all_gather equals torch's RMSNorm on the full dim."""
    mesh = mesh_of(mesh_shape)
    cols = mesh_shape[1]
    hidden, eps = 64 * cols, 1e-5
    x = torch.randn(1, 1, 32, hidden) * 3
    gamma = torch.rand(hidden) + 0.5
    lay = Layout("2d", (None, 3))
    xt, _ = put(x.numpy(), mesh_shape, lay, F32)
    gt = ttnn.from_torch(
        gamma.reshape(1, 1, hidden // 32, 32),
        dtype=ttnn.float32,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, mesh_shape, dims=(None, 2)),
    )
    stats = ttnn.rms_norm_pre_all_gather(xt, compute_kernel_config=None, dtype=ttnn.float32)
    assert stats.shape == (1, 1, 32, 32)
    gathered = ttnn.all_gather(stats, dim=3, cluster_axis=1)
    out = ttnn.rms_norm_post_all_gather(
        xt, gathered, epsilon=eps, weight=gt, compute_kernel_config=None
    )
    want = torch.nn.functional.rms_norm(x, (hidden,), gamma, eps)
    got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, mesh_shape, dims=(0, 3)))
    close(got[:1].numpy(), want, 2e-5)


@pytest.mark.parametrize("mesh_shape", [(1, 8), (2, 4)], ids=["1x8", "2x4"])
@pytest.mark.parametrize("norm", ["layer", "rms"])
def test_distributed_norm_pair_equals_numpy_full_norm(mesh_shape, norm):
    """pre_all_gather per device -> all_gather(stats, dim=3) over the devices splitting the hidden
    dim -> post_all_gather equals the full LayerNorm / RMSNorm in numpy, with a residual."""
    mesh = mesh_of(mesh_shape)
    cols = mesh_shape[1]
    hidden, eps = 32 * cols, 1e-5
    rng = np.random.default_rng(3)
    x = rng.normal(1.5, 2.0, (1, 2, 32, hidden)).astype(np.float32)
    res = rng.normal(0.0, 1.0, x.shape).astype(np.float32)
    gamma = (rng.random(hidden) + 0.5).astype(np.float32)
    beta = rng.normal(0.0, 1.0, hidden).astype(np.float32)
    lay = Layout("2d", (None, 3))
    xt, _ = put(x, mesh_shape, lay, F32)
    rt, _ = put(res, mesh_shape, lay, F32)

    def rm(v):
        return ttnn.from_torch(
            torch.from_numpy(v.reshape(1, 1, hidden // 32, 32)),
            dtype=ttnn.float32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            device=mesh,
            mesh_mapper=ttnn.ShardTensor2dMesh(mesh, mesh_shape, dims=(None, 2)),
        )

    pre = getattr(ttnn, f"{norm}_norm_pre_all_gather")
    post = getattr(ttnn, f"{norm}_norm_post_all_gather")
    stats = pre(xt, residual_input_tensor=rt, dtype=ttnn.float32)
    assert stats.shape == (1, 2, 32, 64 if norm == "layer" else 32)
    gathered = ttnn.all_gather(stats, dim=3, cluster_axis=1)
    y = (x + res).astype(np.float64)
    if norm == "layer":
        out = post(ttnn.add(xt, rt), gathered, epsilon=eps, weight=rm(gamma), bias=rm(beta))
        mu = y.mean(-1, keepdims=True)
        want = (y - mu) / np.sqrt(y.var(-1, keepdims=True) + eps) * gamma + beta
    else:
        out = post(ttnn.add(xt, rt), gathered, epsilon=eps, weight=rm(gamma))
        want = y / np.sqrt((y * y).mean(-1, keepdims=True) + eps) * gamma
    for (_, c), got in device_arrays(out).items():
        close(got, want[..., c * 32 : (c + 1) * 32], 1e-4)
    if norm == "layer":
        with pytest.raises(ttnn.ShapeMismatchError, match="Beta tensor must be present"):
            post(xt, gathered, weight=rm(gamma))
        with pytest.raises(ttnn.ShapeMismatchError, match=r"(?s)last dim of 64 per device.*fix:"):
            post(xt, ttnn.slice(gathered, [0, 0, 0, 0], [1, 2, 32, 32 * (2 * cols - 1)]))


def test_fast_reduce_nc_and_moe():
    mesh = mesh_of((1, 2))
    x = torch.randn(1, 4, 32, 64)
    out = ttnn.experimental.fast_reduce_nc(
        from_torch(x, mesh), dims=[1], output=None, compute_kernel_config=None
    )
    close(per_device(out)[0], x.sum(1, keepdim=True), 1e-5)

    # Mixtral's gate: 8 experts padded to 64 columns, top-2 of the 32 largest.
    logits = torch.randn(1, 1, 32, 64)
    emask = torch.full((1, 1, 1, 64), torch.finfo(torch.float32).min)
    emask[..., :8] = 0
    tmask = torch.full((1, 1, 1, 32), torch.finfo(torch.float32).min)
    tmask[..., :2] = 0
    got = ttnn.moe(
        from_torch(logits + emask, mesh), from_torch(emask, mesh), from_torch(tmask, mesh), 32
    )
    vals, idx = torch.topk(logits + emask + emask, 32)
    want = (torch.softmax(vals + tmask, -1) * (idx == 0)).sum(-1, keepdim=True)
    assert got.shape == (1, 1, 32, 1)
    close(per_device(got)[0], want, 1e-5)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_fused_ops_reject_bad_inputs_with_a_fix():
    mesh = mesh_of((1, 2))
    qkv = from_torch(torch.randn(1, 1, 32, 7 * D), mesh)
    with pytest.raises(
        ttnn.ShapeMismatchError, match=r"not divisible by num_heads \+ 2\*num_kv_heads"
    ):
        ttnn.experimental.nlp_create_qkv_heads(qkv, num_heads=5, num_kv_heads=2)
    with pytest.raises(ttnn.ShapeMismatchError, match=r"head_dim 28 .* is not a multiple of 32"):
        ttnn.experimental.nlp_create_qkv_heads(qkv, num_heads=4, num_kv_heads=2)
    x = from_torch(torch.randn(1, 2, 32, D), mesh)
    cs = from_torch(torch.randn(1, 1, 32, D), mesh)
    with pytest.raises(
        ttnn.ShapeMismatchError, match=r"(?s)trans_mat has per-device shape \[1, 1, 32, 64\].*fix:"
    ):
        ttnn.experimental.rotary_embedding_llama(
            x, cs, cs, from_torch(torch.eye(D)[None, None].repeat(1, 1, 1, 2), mesh)
        )

    cache = ttnn.zeros((8, 1, 16, D), dtype=ttnn.float32, device=mesh)
    new = from_torch(torch.randn(1, 2, 1, D), mesh)
    bad_dtype = ttnn.from_torch(torch.zeros(2, 4), dtype=ttnn.float32, device=mesh)
    with pytest.raises(ttnn.UnsupportedDTypeError, match=r"page_table has dtype .*int32"):
        ttnn.experimental.paged_update_cache(cache, new, update_idxs=[0, 1], page_table=bad_dtype)
    bad_shape = ttnn.from_torch(torch.zeros(3, 4, dtype=torch.int32), dtype=ttnn.int32, device=mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match=r"page_table has per-device shape \[3, 4\]"):
        ttnn.experimental.paged_update_cache(cache, new, update_idxs=[0, 1], page_table=bad_shape)
    empty = ttnn.from_torch(torch.zeros(2, 0, dtype=torch.int32), dtype=ttnn.int32, device=mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match="no users or no blocks"):
        ttnn.experimental.paged_update_cache(cache, new, update_idxs=[0, 1], page_table=empty)
    table = ttnn.from_torch(torch.zeros(2, 4, dtype=torch.int32), dtype=ttnn.int32, device=mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match="update index 64 is beyond"):
        ttnn.experimental.paged_update_cache(cache, new, update_idxs=[0, 64], page_table=table)

    q = from_torch(torch.randn(1, 2, 4, D), mesh)
    k = from_torch(torch.randn(2, 1, 16, D), mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match="cur_pos 16 is beyond"):
        ttnn.transformer.scaled_dot_product_attention_decode(q, k, k, cur_pos=[3, 16])
    with pytest.raises(ttnn.ShapeMismatchError, match="Must have cur_pos tensor"):
        ttnn.transformer.paged_scaled_dot_product_attention_decode(
            q, cache, cache, page_table_tensor=table
        )
    k3 = from_torch(torch.randn(2, 3, 16, D), mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match="multiple of the"):
        ttnn.transformer.scaled_dot_product_attention_decode(q, k3, k3, cur_pos=[1, 1])

    x4 = from_torch(torch.randn(1, 1, 32, 64), mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match=r"(?s)stats has per-device shape.*fix:"):
        ttnn.rms_norm_post_all_gather(x4, from_torch(torch.randn(1, 1, 32, 20), mesh))


def test_traced_paged_decode_step_replays_with_new_positions():
    """The generator captures one paged decode step (paged_update_cache + paged SDPA decode with
    cur_pos_tensor and page_table) and replays it after writing new positions and inputs: every
    replay equals attention over the cache written so far."""
    mesh = mesh_of((1, 2))
    b, nh, nkv, block, blocks = 2, 2, 1, 8, 2
    table = page_table_for(b, blocks, seed=11)
    tt_table = ttnn.from_torch(table, dtype=ttnn.int32, device=mesh)
    k_cache = ttnn.zeros((b * blocks, nkv, block, D), dtype=ttnn.float32, device=mesh)
    pos = ttnn.from_torch(torch.zeros(b, dtype=torch.int32), dtype=ttnn.int32, device=mesh)
    q = from_torch(torch.zeros(1, b, nh, D), mesh)
    k_new = from_torch(torch.zeros(1, b, nkv, D), mesh)

    tid = ttnn.begin_trace_capture(mesh)
    ttnn.experimental.paged_update_cache(
        k_cache, k_new, update_idxs_tensor=pos, page_table=tt_table
    )
    out = ttnn.transformer.paged_scaled_dot_product_attention_decode(
        q, k_cache, k_cache, cur_pos_tensor=pos, page_table_tensor=tt_table
    )
    ttnn.end_trace_capture(mesh, tid)

    keys = torch.zeros(b, nkv, block * blocks, D)
    for step in range(4):
        qs, ks = torch.randn(1, b, nh, D), torch.randn(1, b, nkv, D)
        ttnn.copy_host_to_device_tensor(
            ttnn.from_torch(qs, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT), q
        )
        ttnn.copy_host_to_device_tensor(
            ttnn.from_torch(ks, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT), k_new
        )
        positions = torch.tensor([step, 2 * step + 1], dtype=torch.int32)
        ttnn.copy_host_to_device_tensor(ttnn.from_torch(positions, dtype=ttnn.int32), pos)
        ttnn.execute_trace(mesh, tid)
        mask = torch.full((b, 1, 1, block * blocks), float("-inf"))
        for u, p in enumerate(positions.tolist()):
            keys[u, :, p] = ks[0, u]
            mask[u, ..., : p + 1] = 0
        want = torch_gqa(qs.permute(1, 2, 0, 3), keys, keys, attn_mask=mask).permute(2, 0, 1, 3)
        close(per_device(out)[0], want, 2e-5)
    ttnn.release_trace(mesh, tid)


def test_nlp_create_qkv_heads_segformer_splits_heads_of_one_tile():
    mesh = mesh_of((1, 2))
    x = torch.randn(2, 1, 64, 3 * D)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads_segformer(
        from_torch(x, mesh), memory_config=ttnn.L1_MEMORY_CONFIG
    )
    assert q.shape == k.shape == v.shape == (2, 3, 64, D)
    close(per_device(q)[0], x.reshape(2, 64, 3, D).permute(0, 2, 1, 3), 0)
    with pytest.raises(ttnn.ShapeMismatchError, match="multiples of 32"):
        ttnn.experimental.nlp_create_qkv_heads_segformer(
            from_torch(torch.randn(1, 1, 32, 48), mesh)
        )


def test_paged_fused_update_cache_writes_k_and_v_at_each_users_position():
    """The Galaxy decode step: K and V, height-sharded on disjoint cores, written into their
    paged caches at each user's position in one op; read back through the page table."""
    mesh = mesh_of((1, 2))
    users, nkv, block, blocks = 2, 2, 8, 4
    table = page_table_for(users, blocks, seed=5)
    tt_table = ttnn.from_torch(table, dtype=ttnn.int32, device=mesh)
    caches = [ttnn.zeros((users * blocks, nkv, block, D), dtype=ttnn.float32, device=mesh)
              for _ in range(2)]  # fmt: skip

    def sharded(x, x0):
        cores = ttnn.CoreRangeSet(
            {ttnn.CoreRange(ttnn.CoreCoord(x0, 0), ttnn.CoreCoord(x0 + 1, 0))}
        )
        mc = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1,
                               ttnn.ShardSpec(cores, (32, D), ttnn.ShardOrientation.ROW_MAJOR))  # fmt: skip
        return from_torch(x, mesh, memory_config=mc)

    k, v = torch.randn(1, users, nkv, D), torch.randn(1, users, nkv, D)
    positions = [5, 30]
    cur = ttnn.from_torch(torch.tensor(positions, dtype=torch.int32), dtype=ttnn.int32, device=mesh)
    out = ttnn.experimental.paged_fused_update_cache(
        caches[0], sharded(k, 0), caches[1], sharded(v, 2), update_idxs_tensor=cur,
        page_table=tt_table,
    )  # fmt: skip
    assert out[0] is caches[0] and out[1] is caches[1]
    for cache, new in zip(caches, (k, v)):
        want = torch.zeros(users, nkv, blocks * block, D)
        for u, p in enumerate(positions):
            want[u, :, p] = new[0, u]
        for g in per_device(cache):
            close(from_paged(g, table), want, 0)
    with pytest.raises(ttnn.ShapeMismatchError, match="must not overlap"):
        ttnn.experimental.paged_fused_update_cache(
            caches[0], sharded(k, 0), caches[1], sharded(v, 1), update_idxs_tensor=cur,
            page_table=tt_table,
        )  # fmt: skip


def test_rotary_embedding_llama_fused_qk_rotates_q_and_k_at_each_users_position():
    """The Galaxy attention's fused RoPE: Q and K height-sharded on disjoint cores, cos/sin for
    Q's users then K's ([1, 2B, 1, d]); each equals HF's rotary at that user's position."""
    mesh = mesh_of((1, 2))
    batch, nh, nkv, d = 2, 4, 2, 64
    pos = torch.tensor([3, 11])
    q_hf, k_hf = torch.randn(1, batch, nh, d), torch.randn(1, batch, nkv, d)
    cos, sin = meta_cos_sin(torch.cat([pos, pos]), d)  # [2B, d]

    def sharded(x, x0):
        cores = ttnn.CoreRangeSet(
            {ttnn.CoreRange(ttnn.CoreCoord(x0, 0), ttnn.CoreCoord(x0 + 1, 0))}
        )
        mc = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1,
                               ttnn.ShardSpec(cores, (32, d), ttnn.ShardOrientation.ROW_MAJOR))  # fmt: skip
        return from_torch(to_meta(x), mesh, dtype=ttnn.bfloat16, memory_config=mc)

    args = (
        from_torch(cos[None, :, None], mesh, dtype=ttnn.bfloat16),
        from_torch(sin[None, :, None], mesh, dtype=ttnn.bfloat16),
        from_torch(rot_transformation_mat().repeat(1, 1, 2 * batch, 1), mesh, dtype=ttnn.bfloat16),
    )
    q, k = ttnn.experimental.rotary_embedding_llama_fused_qk(
        sharded(q_hf, 0), sharded(k_hf, 2), *args
    )
    for got, x in ((q, q_hf), (k, k_hf)):
        want = torch.stack(
            [hf_rotary(x[0, b][:, None], pos[b : b + 1])[:, 0] for b in range(batch)]
        )
        for g in per_device(got):
            np.testing.assert_allclose(g, to_meta(want[None].float()).numpy(), rtol=3e-2, atol=3e-2)
    with pytest.raises(ttnn.ShapeMismatchError, match="must not overlap"):
        ttnn.experimental.rotary_embedding_llama_fused_qk(sharded(q_hf, 0), sharded(k_hf, 1), *args)
