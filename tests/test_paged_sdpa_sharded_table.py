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


def test_paged_fused_update_cache_is_one_program():
    """The row-major fused K/V update of the Galaxy decode (Llama-70B shapes: 8 rows of 128 per
    user, K and V on disjoint cores) is one program cache entry, as TT-NN's one device operation
    (``paged_cache_operation.cpp`` ``compute_program_hash``: its inputs, not the positions); each
    step writes each user's first row at its position, -1 skipping the user."""
    rng = np.random.default_rng(5)
    users, rows, d, block, per_user = 8, 8, 128, 32, 2
    mesh = mesh_of((1, 1))
    table = rng.permutation(users * per_user).reshape(users, per_user).astype(np.int32)
    caches = [rng.standard_normal((users * per_user, 1, block, d)).astype(np.float32)
              for _ in range(2)]  # fmt: skip
    tt_caches = [ttnn.from_torch(c, layout=ttnn.TILE_LAYOUT, device=mesh) for c in caches]
    tt_table = ttnn.from_torch(table, dtype=ttnn.int32, device=mesh)

    def on_cores(x, y):
        grid = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, y), ttnn.CoreCoord(7, y))])
        spec = ttnn.ShardSpec(grid, (rows, d), ttnn.ShardOrientation.ROW_MAJOR)
        mem = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)
        return ttnn.from_torch(x, dtype=ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT, device=mesh,
                               memory_config=mem)  # fmt: skip

    mesh.clear_program_cache()
    for positions in ([0, 17, 34, 51, -1, 5, 63, 40], [1, 18, 35, 52, 9, -1, 62, 41]):
        steps = [rng.standard_normal((1, users, rows, d)).astype(np.float32) for _ in range(2)]
        pos = ttnn.from_torch(np.asarray(positions, np.int32), dtype=ttnn.int32, device=mesh)
        ttnn.experimental.paged_fused_update_cache(
            tt_caches[0], on_cores(steps[0], 0), tt_caches[1], on_cores(steps[1], 1),
            update_idxs_tensor=pos, page_table=tt_table,
        )  # fmt: skip
        for cache, step in zip(caches, steps):
            for u, p in enumerate(positions):
                if p >= 0:
                    cache[table[u, p // block], 0, p % block] = step[0, u, 0]
        for cache, got in zip(caches, tt_caches):
            np.testing.assert_array_equal(ttnn.to_numpy(got), cache)
    assert mesh.num_program_cache_entries() == 1
