"""Paged SDPA decode with a height-sharded page table (the Galaxy's ``test_llama_ops``): each
core's shard holds the whole [batch, blocks] table, as ``sdpa_decode_op.cpp`` checks it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import mesh_of

import ttjax as ttnn


def test_sharded_uint16_page_table_reads_like_the_interleaved_one():
    rng = np.random.default_rng(3)
    users, nh, nkv, d, block, per_user = 2, 4, 1, 32, 32, 2
    mesh = mesh_of((1, 1))
    q = rng.standard_normal((1, users, nh, d)).astype(np.float32)
    table = np.asarray([[3, 0], [1, 2]], np.int32)
    k = rng.standard_normal((4, nkv, block, d)).astype(np.float32)
    v = rng.standard_normal((4, nkv, block, d)).astype(np.float32)
    positions = [40, 7]

    def put(x):
        return ttnn.from_torch(x, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh)

    pos = ttnn.from_torch(np.asarray(positions, np.int32), dtype=ttnn.int32, device=mesh)
    grid = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(2, 0))])
    spec = ttnn.ShardSpec(grid, (users, per_user), ttnn.ShardOrientation.ROW_MAJOR)
    sharded = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)
    tt_table = ttnn.as_tensor(np.tile(table, (3, 1)), device=mesh, dtype=ttnn.uint16,
                              layout=ttnn.ROW_MAJOR_LAYOUT, memory_config=sharded)  # fmt: skip
    out = ttnn.transformer.paged_scaled_dot_product_attention_decode(
        put(q), put(k), put(v), tt_table, cur_pos_tensor=pos, scale=0.5
    )
    want = np.zeros_like(q)
    for u, p in enumerate(positions):
        ku = np.concatenate([k[b] for b in table[u]], axis=1)[0, : p + 1]
        vu = np.concatenate([v[b] for b in table[u]], axis=1)[0, : p + 1]
        for h in range(nh):
            s = ku @ q[0, u, h] * 0.5
            e = np.exp(s - s.max())
            want[0, u, h] = (e / e.sum()) @ vu
    np.testing.assert_allclose(ttnn.to_numpy(out), want, rtol=1e-4, atol=1e-5)
    wrong = ttnn.as_tensor(np.tile(table, (2, 1)), device=mesh, dtype=ttnn.uint16,
                           layout=ttnn.ROW_MAJOR_LAYOUT, memory_config=sharded)  # fmt: skip
    with pytest.raises(ttnn.ShapeMismatchError, match="shard height batch size 2 equal to Q on 3"):
        ttnn.transformer.paged_scaled_dot_product_attention_decode(
            put(q), put(k), put(v), wrong, cur_pos_tensor=pos
        )


def test_paged_update_cache_with_sharded_table_and_positions():
    """paged_cache_operation.cpp: a sharded UINT16 table (height / cores == batch) and sharded
    positions ([cores, batch], every core all users') write where the interleaved ones do."""
    rng = np.random.default_rng(4)
    users, nkv, d, block = 2, 1, 32, 32
    mesh = mesh_of((1, 1))
    table = np.asarray([[3, 0], [1, 2]], np.int32)
    positions = np.asarray([33, 5], np.int32)
    step = rng.standard_normal((1, users, nkv, d)).astype(np.float32)
    grid = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(1, 0))])

    def sharded(x, dtype):
        spec = ttnn.ShardSpec(grid, (x.shape[0] // 2, x.shape[1]), ttnn.ShardOrientation.ROW_MAJOR)
        mem = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)
        return ttnn.as_tensor(x, device=mesh, dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT,
                              memory_config=mem)  # fmt: skip

    cache = ttnn.from_torch(np.zeros((4, nkv, block, d), np.float32), device=mesh)
    ttnn.experimental.paged_update_cache(
        cache,
        ttnn.from_torch(step, device=mesh),
        update_idxs_tensor=sharded(np.tile(positions, (2, 1)), ttnn.int32),
        page_table=sharded(np.tile(table, (2, 1)), ttnn.uint16),
    )
    want = np.zeros((4, nkv, block, d), np.float32)
    for u, p in enumerate(positions):  # position p of user u: block table[u, p // 32], row p % 32
        want[table[u, p // block], :, p % block] = step[0, u]
    np.testing.assert_array_equal(ttnn.to_numpy(cache), want)
