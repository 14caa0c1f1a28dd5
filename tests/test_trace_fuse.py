"""What a trace capture (and ``jax.jit``) leaves out of the compiled program without changing a
value: memory-config moves, and the second collective of TT-NN model code's reduce-scatter +
all-gather all-reduce. Each replay is checked bit for bit against the eager op-by-op run, and
the program by its HLO collectives."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest
from conftest import mesh_of

import ttjax as ttnn
from ttjax._src.tools.hlo import count_collectives


def _per_device(t):
    return np.stack([ttnn.to_numpy(d).astype(np.float32) for d in ttnn.get_device_tensors(t)])


def _sharded(mesh, x, dtype=ttnn.bfloat16, on_device=True):
    """[n_devices, ...] host array -> one slice per device (a host tensor with ``on_device=False``)."""
    return ttnn.from_torch(
        x,
        dtype=dtype,
        layout=ttnn.TILE_LAYOUT,
        device=mesh if on_device else None,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )


def _collectives(tid):
    text = "\n".join(c.as_text() for c in ttnn.trace.compiled_programs(tid))
    counts = count_collectives(text)
    return {k: counts.get(k, 0) for k in ("all-reduce", "reduce-scatter", "all-gather")}


def _residual_model(weights):
    """tt_transformers' T3000 decode pattern: the residual stream stays scattered over the row
    (dim 3), each layer's partial sums are reduce-scattered, added to it, and all-gathered for the
    next layer, with memory-config moves in between."""

    def run(h):
        g = ttnn.all_gather(h, dim=3, cluster_axis=1)
        for w in weights:
            a = ttnn.multiply(g, w)  # per-device partial sums
            r = ttnn.reduce_scatter(a, dim=3, cluster_axis=1)
            r = ttnn.to_memory_config(r, ttnn.L1_MEMORY_CONFIG)
            h = ttnn.add(r, h)
            h = ttnn.to_memory_config(h, ttnn.DRAM_MEMORY_CONFIG)
            g = ttnn.all_gather(h, dim=3, cluster_axis=1)
        return g

    return run


def _capture(mesh, run, x):
    run(x)  # compiles every op, as TT-NN's warm-up does
    tid = ttnn.begin_trace_capture(mesh, cq_id=0)
    out = run(x)
    ttnn.end_trace_capture(mesh, tid, cq_id=0)
    return tid, out


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "as-captured"])
def test_scattered_residual_all_reduce_is_one_collective_and_same_values(fuse, monkeypatch):
    if not fuse:
        monkeypatch.setenv("TTJAX_TRACE_FUSE", "0")
    mesh = mesh_of((2, 4))
    rng = np.random.default_rng(0)
    weights = [
        _sharded(mesh, rng.standard_normal((8, 1, 32, 128)).astype(np.float32)) for _ in range(2)
    ]
    run = _residual_model(weights)
    x = _sharded(mesh, rng.standard_normal((8, 1, 32, 32)).astype(np.float32))
    tid, out = _capture(mesh, run, x)
    ops = [o for p in ttnn.trace.trace_info(tid)["programs"] for o in p["ops"]]
    assert "to_memory_config" not in ops  # moves of captured results are nothing
    if fuse:
        assert "reduce_scatter" not in ops
        assert _collectives(tid) == {"all-reduce": 2, "reduce-scatter": 0, "all-gather": 1}
    else:
        assert _collectives(tid) == {"all-reduce": 0, "reduce-scatter": 2, "all-gather": 3}
    for _ in range(2):
        fresh = rng.standard_normal((8, 1, 32, 32)).astype(np.float32)
        fresh = _sharded(mesh, fresh, on_device=False)
        ttnn.copy_host_to_device_tensor(fresh, x)
        ttnn.execute_trace(mesh, tid, cq_id=0, blocking=True)
        np.testing.assert_array_equal(_per_device(out), _per_device(run(x)))  # bit for bit


def test_reduce_scatter_then_all_gather_is_one_all_reduce():
    mesh = mesh_of((1, 8))
    rng = np.random.default_rng(1)

    def run(a):
        r = ttnn.reduce_scatter(a, dim=3)
        return ttnn.all_gather(ttnn.to_memory_config(r, ttnn.L1_MEMORY_CONFIG), dim=3)

    host = rng.standard_normal((8, 1, 32, 256)).astype(np.float32)
    x = _sharded(mesh, host, ttnn.float32)
    tid, out = _capture(mesh, run, x)
    assert _collectives(tid) == {"all-reduce": 1, "reduce-scatter": 0, "all-gather": 0}
    ttnn.execute_trace(mesh, tid, cq_id=0, blocking=True)
    got = _per_device(out)
    np.testing.assert_array_equal(got, _per_device(run(x)))
    np.testing.assert_allclose(got, np.broadcast_to(host.sum(0), got.shape), rtol=1e-5, atol=1e-5)


def test_gather_along_another_dim_is_left_alone():
    mesh = mesh_of((1, 8))
    x = _sharded(mesh, np.ones((8, 1, 32, 256), np.float32), ttnn.float32)

    def run(a):
        return ttnn.all_gather(ttnn.reduce_scatter(a, dim=3), dim=2)

    tid, out = _capture(mesh, run, x)
    assert _collectives(tid) == {"all-reduce": 0, "reduce-scatter": 1, "all-gather": 1}
    ttnn.execute_trace(mesh, tid, cq_id=0, blocking=True)
    np.testing.assert_array_equal(_per_device(out), _per_device(run(x)))


def _moves(x):
    y = ttnn.interleaved_to_sharded(
        x,
        ttnn.create_sharded_memory_config(
            (32, 64),
            ttnn.CoreGrid(y=1, x=1),
            ttnn.ShardStrategy.HEIGHT,
            use_height_and_width_as_shard_shape=True,
        ),
    )
    y = ttnn.sharded_to_interleaved(y, ttnn.L1_MEMORY_CONFIG)
    return ttnn.to_memory_config(y, ttnn.DRAM_MEMORY_CONFIG, dtype=x.dtype)


@pytest.mark.parametrize("dtype", [ttnn.bfloat16, ttnn.bfloat8_b])
def test_memory_config_moves_are_nothing_under_jit(dtype):
    mesh = mesh_of((1, 8))
    x = _sharded(mesh, np.random.default_rng(2).standard_normal((8, 1, 32, 64)), dtype)
    jaxpr = jax.make_jaxpr(_moves)(x)
    assert not jaxpr.eqns  # no program at all: no copy, no resharding, no block-float re-encode
    y = jax.jit(_moves)(x)
    assert y.memory_config() == ttnn.DRAM_MEMORY_CONFIG and y.dtype == dtype
    np.testing.assert_array_equal(_per_device(y), _per_device(x))
    eager = _moves(x)  # eagerly the op still runs: a fresh buffer, as TT-NN gives
    assert eager.value is not x.value
    np.testing.assert_array_equal(_per_device(eager), _per_device(x))
    cast = jax.make_jaxpr(lambda t: ttnn.to_memory_config(t, ttnn.L1_MEMORY_CONFIG, ttnn.float32))
    assert cast(x).eqns  # a dtype change is a real op


def test_moving_a_trace_input_stays_an_op_so_replays_refresh_it():
    mesh = mesh_of((1, 8))
    rng = np.random.default_rng(3)
    x = _sharded(mesh, rng.standard_normal((8, 1, 32, 64)).astype(np.float32), ttnn.float32)

    def run(t):
        moved = ttnn.to_memory_config(t, ttnn.L1_MEMORY_CONFIG)  # of an input: recorded
        return ttnn.to_memory_config(ttnn.add(moved, 1.0), ttnn.DRAM_MEMORY_CONFIG)  # not

    tid, out = _capture(mesh, run, x)
    ops = ttnn.trace.trace_info(tid)["programs"][0]["ops"]
    assert ops == ["to_memory_config", "add_scalar"]
    assert out.memory_config() == ttnn.DRAM_MEMORY_CONFIG
    fresh = rng.standard_normal((8, 1, 32, 64)).astype(np.float32)
    ttnn.copy_host_to_device_tensor(_sharded(mesh, fresh, ttnn.float32, on_device=False), x)
    ttnn.execute_trace(mesh, tid, cq_id=0, blocking=True)
    np.testing.assert_allclose(_per_device(out), (fresh + 1.0)[:, None], rtol=1e-6)


def test_a_cache_written_per_device_keeps_no_hidden_axis_and_its_step_no_copy():
    mesh = mesh_of((1, 8))
    rng = np.random.default_rng(4)
    cache = ttnn.from_torch(
        np.zeros((32, 1, 32, 32), np.float32),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    pos = ttnn.from_torch(
        np.full(32, 3, np.int32),
        dtype=ttnn.int32,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    k = _sharded(mesh, rng.standard_normal((8, 32, 1, 32)).astype(np.float32))  # per device
    k = ttnn.reshape(k, (1, 32, 1, 32))

    def step(key):
        ttnn.experimental.paged_update_cache(cache, key, update_idxs_tensor=pos)
        return ttnn.sum(cache, dim=2, keepdim=True)  # a reader of the updated cache

    step(k)
    assert cache.placements == (ttnn.PlacementReplicate(), ttnn.PlacementShard(0))
    tid, out = _capture(mesh, step, k)
    entry = "\n".join(c.as_text() for c in ttnn.trace.compiled_programs(tid)).split("ENTRY")[1]
    copy = re.compile(r"\s*(ROOT )?%\S*copy\S* = bf16\[(1,)?32,1,32,32\]")
    cache_copies = [ln for ln in entry.splitlines() if copy.match(ln)]
    assert not cache_copies  # the updated cache is written once, where the readers read it
    ttnn.execute_trace(mesh, tid, cq_id=0, blocking=True)
    written = _per_device(cache)[:, :, 0, 3]  # [device, user, d] at position 3
    np.testing.assert_array_equal(written, _per_device(k)[:, 0, :, 0])
    np.testing.assert_array_equal(
        _per_device(out), _per_device(ttnn.sum(cache, dim=2, keepdim=True))
    )
