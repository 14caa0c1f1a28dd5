"""Memory configs and lifetime, called the way tt-metal's model code calls them: a tensor carries
its memory config, ops' ``memory_config=`` set it, sharded configs are validated against the
per-device padded shape, the ``_partial`` ops move row slices, deallocated tensors refuse use.
Values are compared with numpy per device."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _op_testing import Layout, check, device_arrays, mesh_of, put, rounded
from _reference import coords

import ttjax as ttnn

WIDTH_1D = Layout("1d", (3, 3))
ROWS_2D = Layout("2d", (2, 3))


def _width_cfg(rows: int, width: int, cores: int) -> ttnn.MemoryConfig:
    return ttnn.create_sharded_memory_config(
        (1, 1, rows, width), ttnn.CoreGrid(y=1, x=cores), ttnn.ShardStrategy.WIDTH
    )


@pytest.mark.parametrize("mesh_shape,layout", [((1, 8), WIDTH_1D), ((2, 4), ROWS_2D)])
def test_to_memory_config_sets_config_keeps_values_and_casts(mesh_shape, layout):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(layout.global_shape((1, 1, 32, 64), mesh_shape)).astype(np.float32)
    t, want = put(x, mesh_shape, layout, dtype=ttnn.float32)
    assert t.memory_config() == ttnn.DRAM_MEMORY_CONFIG and not t.is_sharded()
    l1 = ttnn.to_memory_config(t, ttnn.L1_MEMORY_CONFIG, dtype=ttnn.bfloat16)
    assert l1.memory_config() == ttnn.L1_MEMORY_CONFIG and l1.dtype == ttnn.bfloat16
    check(
        l1,
        {c: w.astype(np.float32).astype("bfloat16").astype(np.float64) for c, w in want.items()},
        exact=True,
    )
    cfg = _width_cfg(32, 64, 2)
    sharded = ttnn.to_memory_config(l1, memory_config=cfg)
    assert sharded.is_sharded() and sharded.memory_config() == cfg
    assert sharded.memory_config().shard_spec.shape == (32, 32)
    back = ttnn.sharded_to_interleaved(sharded, ttnn.L1_MEMORY_CONFIG, ttnn.float32)
    assert back.memory_config() == ttnn.L1_MEMORY_CONFIG and back.dtype == ttnn.float32
    check(back, device_arrays(l1), exact=True)


def test_op_memory_config_kwarg_sets_output_config_and_default_inherits():
    rng = np.random.default_rng(1)
    a, wa = put(rng.standard_normal((1, 1, 32, 64)).astype(np.float32), (1, 8), dtype=ttnn.float32)
    w, ww = put(
        rng.standard_normal((64, 256)).astype(np.float32),
        (1, 8),
        Layout("1d", (1, 1)),
        ttnn.float32,
    )
    cfg = _width_cfg(32, 32, 1)
    y = ttnn.matmul(a, w, memory_config=cfg)
    assert y.memory_config() == cfg
    check(y, {c: wa[c] @ ww[c] for c in wa}, tol=(1e-4, 1e-4))
    lin = ttnn.linear(a, w, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert lin.memory_config() == ttnn.L1_MEMORY_CONFIG
    # matmul/linear without memory_config= write DRAM interleaved (TT-NN's matmul.cpp).
    a_l1 = ttnn.to_memory_config(a, ttnn.L1_MEMORY_CONFIG)
    assert ttnn.matmul(a_l1, w).memory_config() == ttnn.DRAM_MEMORY_CONFIG
    s = ttnn.add(a, a, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert s.memory_config() == ttnn.L1_MEMORY_CONFIG
    # No memory_config=: the output keeps its input's (TT-NN's value_or(input.memory_config())).
    assert ttnn.gelu(s).memory_config() == ttnn.L1_MEMORY_CONFIG
    # A sharded input whose shard spec does not fit a reshaped output: the output is interleaved.
    sh = ttnn.to_memory_config(a, _width_cfg(32, 64, 2))
    r = ttnn.reshape(sh, (1, 1, 64, 32))
    assert r.memory_config() == ttnn.L1_MEMORY_CONFIG


def test_create_sharded_memory_config_matches_ttnn_arithmetic():
    grid = ttnn.CoreGrid(y=2, x=4)
    h = ttnn.create_sharded_memory_config((2, 1, 64, 128), grid, ttnn.ShardStrategy.HEIGHT)
    assert h.memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    assert h.buffer_type == ttnn.BufferType.L1 and h.shard_spec.shape == (128 // 8, 128)
    b = ttnn.create_sharded_memory_config((1, 1, 64, 256), grid, ttnn.ShardStrategy.BLOCK)
    assert b.shard_spec.shape == (32, 64) and b.shard_spec.num_cores() == 8
    own = ttnn.create_sharded_memory_config(
        (32, 96), grid, ttnn.ShardStrategy.WIDTH, use_height_and_width_as_shard_shape=True
    )
    assert own.shard_spec.shape == (32, 96)
    with pytest.raises(ttnn.MemoryConfigError, match="Invalid sharding core_grid"):
        ttnn.create_sharded_memory_config((1, 1, 32, 100), grid, ttnn.ShardStrategy.WIDTH)


@pytest.mark.parametrize(
    "cfg,match",
    [
        (_width_cfg(64, 64, 2), "Shard height 64 must match physical height 32"),
        (_width_cfg(32, 32, 1), "Number of shards along width 2 must not exceed number of cores 1"),
        (
            ttnn.MemoryConfig(
                ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
                ttnn.BufferType.L1,
                ttnn.ShardSpec(
                    ttnn.num_cores_to_corerangeset(4, ttnn.CoreCoord(8, 8), True), [16, 64]
                ),
            ),
            "must be tile",
        ),
    ],
)
def test_sharded_config_that_does_not_fit_raises_with_shapes_and_fix(cfg, match):
    t, _ = put(np.ones((1, 1, 32, 64), np.float32), (1, 8))
    with pytest.raises(ttnn.MemoryConfigError, match=match) as info:
        ttnn.to_memory_config(t, cfg)
    msg = str(info.value)
    assert "[1, 1, 32, 64]" in msg and "\nfix: " in msg
    with pytest.raises(ttnn.MemoryConfigError):
        ttnn.add(t, t, memory_config=cfg)
    with pytest.raises(ttnn.MemoryConfigError, match="must have Shard Spec"):
        ttnn.to_memory_config(t, ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)


def test_interleaved_to_sharded_grid_form_fills_cores_row_wise():
    t, want = put(
        np.arange(8 * 128 * 64, dtype=np.float32).reshape(8, 1, 128, 64),
        (2, 4),
        Layout("1d", (0, 0)),
        ttnn.float32,
    )
    s = ttnn.interleaved_to_sharded(
        t,
        ttnn.CoreCoord(8, 4),
        [32, 64],
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
        ttnn.ShardOrientation.ROW_MAJOR,
    )
    spec = s.memory_config().shard_spec
    assert spec.shape == (32, 64) and spec.num_cores() == 4
    assert spec.grid == ttnn.CoreRangeSet(
        {ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(3, 0))}
    )
    check(s, want, exact=True)
    s2 = ttnn.interleaved_to_sharded(
        t,
        _cfg_h := ttnn.create_sharded_memory_config(
            (128, 64), ttnn.CoreGrid(y=1, x=1), ttnn.ShardStrategy.HEIGHT
        ),
    )
    assert s2.memory_config() == _cfg_h


@pytest.mark.parametrize("mesh_shape", [(1, 8), (2, 4)])
def test_partial_slices_move_row_slices_per_device(mesh_shape):
    rng = np.random.default_rng(2)
    n_dev = int(np.prod(mesh_shape))
    x = rng.standard_normal((n_dev, 2, 64, 32)).astype(np.float32)
    t, want = put(x, mesh_shape, Layout("1d", (0, 0)), ttnn.float32)
    cache, cache_want = put(np.zeros_like(x), mesh_shape, Layout("1d", (0, 0)), ttnn.float32)
    num_slices = 4
    rows = 2 * 64 // num_slices
    for k in range(num_slices):
        part = ttnn.interleaved_to_sharded_partial(
            t,
            ttnn.CoreCoord(8, 8),
            [32, 32],
            num_slices,
            k,
            ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
            ttnn.ShardOrientation.ROW_MAJOR,
        )
        assert tuple(part.shape) == (1, 1, rows, 32) and part.is_sharded()
        check(
            part,
            {
                c: w.reshape(-1, 32)[k * rows : (k + 1) * rows].reshape(1, 1, rows, 32)
                for c, w in want.items()
            },
            exact=True,
        )
        out = ttnn.sharded_to_interleaved_partial(
            part, cache, num_slices, k, memory_config=ttnn.DRAM_MEMORY_CONFIG
        )
        assert out is cache
        for c in cache_want:
            cache_want[c].reshape(-1, 32)[k * rows : (k + 1) * rows] = want[c].reshape(-1, 32)[
                k * rows : (k + 1) * rows
            ]
        check(cache, cache_want, exact=True)
    with pytest.raises(ttnn.ShapeMismatchError, match="Slice index and num_slices"):
        ttnn.interleaved_to_sharded_partial(
            t,
            ttnn.CoreCoord(8, 8),
            [32, 32],
            4,
            4,
            ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
            ttnn.ShardOrientation.ROW_MAJOR,
        )


def test_deallocated_tensor_refuses_every_use():
    t, _ = put(np.ones((1, 1, 32, 32), np.float32), (1, 8))
    u = ttnn.add(t, 1.0)
    ttnn.deallocate(t)
    assert not t.is_allocated() and u.is_allocated()
    with pytest.raises(
        ttnn.DeallocatedTensorError, match="Operands need to be allocated in buffers on device"
    ) as info:
        ttnn.add(t, u)
    assert "\nfix: " in str(info.value)
    with pytest.raises(ttnn.DeallocatedTensorError):
        ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(t.mesh_device, dim=0))
    with pytest.raises(ttnn.DeallocatedTensorError):
        ttnn.to_memory_config(t, ttnn.L1_MEMORY_CONFIG)
    u.deallocate(True)
    with pytest.raises(ttnn.DeallocatedTensorError):
        ttnn.matmul(u, u)
    host = ttnn.from_torch(np.ones((2, 2), np.float32))
    ttnn.deallocate(host, force=True)
    with pytest.raises(ttnn.DeallocatedTensorError):
        ttnn.to_numpy(host)
    with pytest.raises(ttnn.DeallocatedTensorError):
        ttnn.to_device(host, t.mesh_device)


def test_record_event_waits_for_work_dispatched_before_it():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    try:
        t = ttnn.from_torch(np.full((1, 1, 32, 32), 2.0, np.float32), device=mesh)
        y = ttnn.multiply(t, t)
        event = ttnn.record_event(mesh, 0)
        ttnn.event_synchronize(event)
        ttnn.wait_for_event(0, event)
        assert event.mesh_device is mesh and event.cq_id == 0
        assert {tuple(a.shape) for a in event._outputs} and all(
            a.is_ready() for a in event._outputs
        )
        got = device_arrays(y)
        for c in coords((1, 8)):
            np.testing.assert_array_equal(got[c], np.full((1, 1, 32, 32), 4.0, np.float32))
    finally:
        ttnn.close_mesh_device(mesh)


def test_creation_ops_take_memory_config_and_like_forms_keep_it():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
    try:
        z = ttnn.zeros(
            (1, 1, 32, 64),
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
            memory_config=ttnn.L1_MEMORY_CONFIG,
        )
        assert z.memory_config() == ttnn.L1_MEMORY_CONFIG
        assert ttnn.ones_like(z).memory_config() == ttnn.L1_MEMORY_CONFIG
        o = ttnn.full_like(z, 2.5, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        assert o.memory_config() == ttnn.DRAM_MEMORY_CONFIG
        for got in device_arrays(o).values():
            np.testing.assert_array_equal(
                got.astype(np.float32), np.full((1, 1, 32, 64), 2.5, np.float32)
            )
        host = ttnn.from_torch(np.ones((1, 1, 32, 64), np.float32), layout=ttnn.TILE_LAYOUT)
        cfg = _width_cfg(32, 64, 2)
        placed = ttnn.to_device(host, mesh, memory_config=cfg)
        assert placed.memory_config() == cfg and placed.is_sharded()
        with pytest.raises(ttnn.MemoryConfigError):
            ttnn.from_torch(
                np.ones((1, 1, 32, 64), np.float32),
                layout=ttnn.TILE_LAYOUT,
                device=mesh,
                memory_config=_width_cfg(64, 64, 2),
            )
    finally:
        ttnn.close_mesh_device(mesh)


def test_block_sharded_config_is_checked_against_its_grid():
    t, want = put(np.ones((1, 1, 64, 128), np.float32), (1, 8), dtype=ttnn.float32)
    grid = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(3, 1))})
    ok = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(grid, [32, 32])
    )
    check(ttnn.to_memory_config(t, ok), want, exact=True)
    small = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(1, 1))})
    too_small = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(small, [32, 32])
    )
    with pytest.raises(ttnn.MemoryConfigError, match="2 x 4 shards do not fit the 2 x 2 core grid"):
        ttnn.to_memory_config(t, too_small)
    two = ttnn.CoreRangeSet(
        {
            ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(3, 0)),
            ttnn.CoreRange(ttnn.CoreCoord(0, 1), ttnn.CoreCoord(3, 1)),
        }
    )
    split = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.BLOCK_SHARDED, ttnn.BufferType.L1, ttnn.ShardSpec(two, [32, 32])
    )
    with pytest.raises(ttnn.MemoryConfigError, match="one full rectangular grid"):
        ttnn.to_memory_config(t, split)


def test_partial_write_of_per_device_slices_into_a_replicated_cache():
    # The cache starts replicated; each device writes its own rows: the result differs per device.
    rng = np.random.default_rng(13)
    x = rng.standard_normal((8, 1, 32, 32)).astype(np.float32)
    t, want = put(x, (2, 4), Layout("1d", (0, 0)), ttnn.float32)
    cache, cache_want = put(np.zeros((1, 1, 64, 32), np.float32), (2, 4), dtype=ttnn.float32)
    ttnn.sharded_to_interleaved_partial(t, cache, 2, 1)
    cache_want = {c: v.copy() for c, v in cache_want.items()}  # replicated shards share memory
    for c in cache_want:
        cache_want[c][0, 0, 32:] = want[c][0, 0]
    check(cache, cache_want, exact=True)


def test_reshard_and_reallocate():
    rng = np.random.default_rng(14)
    x = rng.standard_normal((1, 1, 64, 128)).astype(np.float32)
    t, want = put(x, (1, 8), dtype=ttnn.float32)
    width = ttnn.to_memory_config(t, _width_cfg(64, 128, 4))
    height = ttnn.create_sharded_memory_config(
        (64, 128), ttnn.CoreGrid(y=1, x=2), ttnn.ShardStrategy.HEIGHT
    )
    r = ttnn.reshard(width, height)
    assert r.memory_config() == height and r.memory_config().shard_spec.shape == (32, 128)
    check(r, want, exact=True)
    dst = ttnn.to_memory_config(ttnn.zeros_like(t), height)
    assert ttnn.reshard(width, height, dst) is dst
    check(dst, want, exact=True)
    with pytest.raises(ttnn.MemoryConfigError, match="interleaved"):
        ttnn.reshard(width, ttnn.L1_MEMORY_CONFIG)
    moved = ttnn.reallocate(r)
    assert not r.is_allocated() and moved.memory_config() == height
    check(moved, want, exact=True)
    to_dram = ttnn.reallocate(moved, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    assert to_dram.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    with pytest.raises(ttnn.DeallocatedTensorError):
        ttnn.reallocate(moved)


@pytest.mark.parametrize(
    "grid",
    [
        ttnn.CoreGrid(y=2, x=4),
        ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(3, 1)),
        ttnn.CoreRangeSet(
            [
                ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 0)),
                ttnn.CoreRange(ttnn.CoreCoord(0, 1), ttnn.CoreCoord(1, 1)),
            ]
        ),
    ],
)
def test_memory_config_json_round_trip(grid) -> None:
    """MemoryConfig.to_json / from_json (model code caches weight configs as JSON)."""
    cfg = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(grid, (32, 64), ttnn.ShardOrientation.COL_MAJOR),
    )
    assert {"buffer_type", "memory_layout", "created_with_nd_shard_spec"} <= set(
        json.loads(cfg.to_json())
    )  # TT-NN's field names (deepseek_v3 recognises a saved config by them)
    back = ttnn.MemoryConfig.from_json(cfg.to_json())
    assert back == cfg and type(back.shard_spec.grid) is type(grid)
    assert ttnn.MemoryConfig.from_json(ttnn.DRAM_MEMORY_CONFIG.to_json()) == ttnn.DRAM_MEMORY_CONFIG
    with pytest.raises(ttnn.MemoryConfigError, match="fix:"):
        ttnn.MemoryConfig.from_json('{"memory_layout": "NOPE"}')


def test_sharded_config_without_spec_takes_the_sharded_input_spec() -> None:
    """An eltwise op given ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG (no shard spec) writes with the
    shard spec of its sharded input, a's else b's (TT-NN's binary_ng output spec)."""
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    cfg = ttnn.create_sharded_memory_config(
        (1, 1, 32, 256), ttnn.CoreGrid(y=1, x=8), ttnn.ShardStrategy.WIDTH
    )
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 256)).astype(np.float32)
    a = ttnn.from_torch(x, layout=ttnn.TILE_LAYOUT, device=mesh)
    b = ttnn.from_torch(x, layout=ttnn.TILE_LAYOUT, device=mesh, memory_config=cfg)
    out = ttnn.mul(a, b, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    assert out.memory_config() == cfg
    np.testing.assert_allclose(ttnn.to_torch(out).float().numpy(), x * x, rtol=1e-6)
    plain = ttnn.mul(a, a, memory_config=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    assert plain.memory_config() == ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG


def _prefetch_setup(mesh, shard_w=64, receivers=2):
    """A Galaxy-style prefetch: one DRAM width-sharded weight, its address table, a global CB."""
    dram = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(1, 0))})
    mc = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.WIDTH_SHARDED,
        ttnn.BufferType.DRAM,
        ttnn.ShardSpec(dram, (64, shard_w), ttnn.ShardOrientation.ROW_MAJOR),
    )
    w_host = np.random.default_rng(9).standard_normal((1, 1, 64, 2 * shard_w)).astype(np.float32)
    w = ttnn.from_torch(w_host, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh,
                        memory_config=mc)  # fmt: skip
    addr_mc = ttnn.MemoryConfig(
        ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
        ttnn.BufferType.L1,
        ttnn.ShardSpec(dram, (1, 1), ttnn.ShardOrientation.ROW_MAJOR),
    )
    addrs = ttnn.as_tensor(np.array([[w.buffer_address()]] * 2, np.uint32), device=mesh,
                           dtype=ttnn.uint32, memory_config=addr_mc)  # fmt: skip

    def recv(y):
        return ttnn.CoreRangeSet(
            {ttnn.CoreRange(ttnn.CoreCoord(2, y), ttnn.CoreCoord(1 + receivers, y))}
        )

    cb = ttnn.create_global_circular_buffer(
        mesh, [(ttnn.CoreCoord(0, 0), recv(0)), (ttnn.CoreCoord(1, 0), recv(1))], 64 * 1024
    )
    return w_host, w, addrs, cb


def test_dram_prefetcher_checks_tt_nn_rules_and_matmuls_read_the_weights():
    mesh = mesh_of((1, 2))
    w_host, w, addrs, cb = _prefetch_setup(mesh)
    assert w.buffer_address() == w.buffer_address() != addrs.buffer_address()
    placeholder = ttnn.dram_prefetcher([w, addrs], num_layers=1, global_cb=cb)
    assert placeholder.shape == (32, 32) and placeholder.dtype == ttnn.bfloat16
    x = np.random.default_rng(10).standard_normal((1, 1, 32, 64)).astype(np.float32)
    xt = ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    out = ttnn.matmul(xt, w, global_cb=cb)
    want = rounded(x, ttnn.bfloat16) @ rounded(w_host, ttnn.bfloat16)
    for got in device_arrays(out).values():
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2, atol=5e-2)
    ttnn.deallocate(placeholder)
    with pytest.raises(ttnn.MemoryConfigError, match="at least 1 layer"):
        ttnn.dram_prefetcher([w, addrs], num_layers=0, global_cb=cb)
    with pytest.raises(ttnn.MemoryConfigError, match="width sharded in DRAM"):
        ttnn.dram_prefetcher([ttnn.to_memory_config(w, ttnn.DRAM_MEMORY_CONFIG), addrs], 1, cb)
    _, w3, addrs3, cb3 = _prefetch_setup(mesh, shard_w=64, receivers=3)
    with pytest.raises(ttnn.MemoryConfigError, match="divisible by the number of receiver"):
        ttnn.dram_prefetcher([w3, addrs3], num_layers=1, global_cb=cb3)
    with pytest.raises(ttnn.MemoryConfigError, match="Tensor containing addresses"):
        ttnn.dram_prefetcher([w, w], num_layers=1, global_cb=cb)


def test_dram_prefetcher_checks_receivers_of_the_first_num_readers_senders_only():
    """DramPrefetcher::validate (dram_prefetcher_op.cpp) compares the receiver sets' range
    counts of the first num_readers senders (the cores of the first weight's shard grid, 2 here):
    a third sender with other receivers passes (the Galaxy's mapping has 20 senders for 12
    readers), two receiver ranges of one core each against one range of two is refused."""
    mesh = mesh_of((1, 2))
    _, w, addrs, _ = _prefetch_setup(mesh)

    def rng(x0, x1, y):
        return ttnn.CoreRange(ttnn.CoreCoord(x0, y), ttnn.CoreCoord(x1, y))

    extra = ttnn.create_global_circular_buffer(mesh, [
        (ttnn.CoreCoord(0, 0), ttnn.CoreRangeSet({rng(2, 3, 0)})),
        (ttnn.CoreCoord(1, 0), ttnn.CoreRangeSet({rng(2, 3, 1)})),
        (ttnn.CoreCoord(0, 2), ttnn.CoreRangeSet({rng(2, 2, 2), rng(4, 6, 3)})),
    ], 64 * 1024)  # fmt: skip
    assert ttnn.dram_prefetcher([w, addrs], num_layers=1, global_cb=extra).shape == (32, 32)
    split = ttnn.create_global_circular_buffer(mesh, [
        (ttnn.CoreCoord(0, 0), ttnn.CoreRangeSet({rng(2, 3, 0)})),
        (ttnn.CoreCoord(1, 0), ttnn.CoreRangeSet({rng(2, 2, 1), rng(4, 4, 1)})),
    ], 64 * 1024)  # fmt: skip
    with pytest.raises(ttnn.MemoryConfigError, match="same number of receivers"):
        ttnn.dram_prefetcher([w, addrs], num_layers=1, global_cb=split)
    one = ttnn.create_global_circular_buffer(
        mesh, [(ttnn.CoreCoord(0, 0), ttnn.CoreRangeSet({rng(2, 3, 0)}))], 64 * 1024
    )
    with pytest.raises(ttnn.MemoryConfigError, match="fewer than the 2 readers"):
        ttnn.dram_prefetcher([w, addrs], num_layers=1, global_cb=one)
