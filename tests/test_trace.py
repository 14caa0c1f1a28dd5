"""Trace capture/replay: replays equal eager runs bit-exactly, pick up refreshed inputs, write
into the captured output tensors, span submeshes, and fail loudly when misused."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest
from conftest import mesh_of

import ttjax as ttnn
from ttjax._src.ttnn import trace as _trace  # the captured programs (private)

SHAPE = (1, 1, 32, 64)


def _host(x, mesh):
    return ttnn.from_torch(
        x, layout=ttnn.TILE_LAYOUT, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )


def _model(w):
    def run(x):
        h = ttnn.gelu(ttnn.linear(x, w))
        h = ttnn.all_gather(h, dim=3, cluster_axis=1)
        return ttnn.add(ttnn.sum(h, dim=3, keepdim=True), 1.0)

    return run


def _per_device(t):
    return np.stack([ttnn.to_numpy(d) for d in ttnn.get_device_tensors(t)])


@pytest.fixture
def setup(t3000):
    rng = np.random.default_rng(0)
    w = ttnn.from_torch(
        rng.standard_normal((64, 64)).astype(np.float32) / 8,
        device=t3000,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=ttnn.ShardTensorToMesh(t3000, dim=-1),
    )
    w_small = ttnn.reshape(w, (64, 8))  # each device's [64, 8] column block
    x_dev = ttnn.allocate_tensor_on_device(ttnn.Shape(SHAPE), ttnn.float32, ttnn.TILE_LAYOUT, t3000)
    batch = (8, *SHAPE[1:])
    return t3000, _model(w_small), x_dev, batch, rng


def test_replay_matches_eager_and_picks_up_refreshed_inputs(setup):
    mesh, run, x_dev, batch, rng = setup
    ttnn.copy_host_to_device_tensor(_host(rng.random(batch, np.float32), mesh), x_dev)
    run(x_dev)  # warm-up compiles every op, as in TT-NN
    tid = ttnn.begin_trace_capture(mesh, cq_id=0)
    out = run(x_dev)
    ttnn.end_trace_capture(mesh, tid, cq_id=0)
    assert repr(tid) == f"MeshTraceId({int(tid)})"
    for _ in range(3):
        x = rng.random(batch, np.float32)
        ttnn.copy_host_to_device_tensor(_host(x, mesh), x_dev)
        ttnn.execute_trace(mesh, tid, cq_id=0, blocking=False)
        replayed = _per_device(out)
        eager = _per_device(run(x_dev))
        np.testing.assert_array_equal(replayed, eager)
    ttnn.release_trace(mesh, tid)


def test_each_captured_op_names_its_instructions(setup):
    # A trace program's HLO says which captured op made each instruction (op_name metadata, the
    # profiler's scopes): benchmarks/_profile.py splits a replay's time by them.
    mesh, run, x_dev, batch, rng = setup
    ttnn.copy_host_to_device_tensor(_host(rng.random(batch, np.float32), mesh), x_dev)
    run(x_dev)
    tid = ttnn.begin_trace_capture(mesh, cq_id=0)
    out = run(x_dev)
    ttnn.end_trace_capture(mesh, tid, cq_id=0)
    (group,) = _trace._traces[int(tid)].groups
    program = jax.jit(_trace._program(group)).lower(*[t._data for t in group.in_tensors])
    scopes = set(re.findall(r'"jit\(program\)/(\w+)/', program.as_text(debug_info=True)))
    assert {"linear", "gelu", "all_gather", "sum", "add_scalar"} <= scopes
    assert out.is_allocated()
    ttnn.release_trace(mesh, tid)


def test_replay_writes_into_the_same_output_objects(setup):
    mesh, run, x_dev, batch, _ = setup
    ttnn.copy_host_to_device_tensor(_host(np.zeros(batch, np.float32), mesh), x_dev)
    tid = ttnn.begin_trace_capture(mesh)
    out = run(x_dev)
    ttnn.end_trace_capture(mesh, tid)
    before = _per_device(out)
    ttnn.copy_host_to_device_tensor(_host(np.ones(batch, np.float32), mesh), x_dev)
    ttnn.execute_trace(mesh, tid, blocking=True)
    after = _per_device(out)
    assert not np.array_equal(before, after)
    info = ttnn.trace.trace_info(tid)
    assert info["programs"][0]["ops"] == ["linear", "gelu", "all_gather", "sum", "add_scalar"]
    assert info["programs"][0]["outputs"] == 1  # intermediates nobody kept are not written back
    ttnn.release_trace(mesh, tid)


def test_jit_equals_eager_bit_exactly(setup):
    mesh, run, x_dev, batch, rng = setup
    ttnn.copy_host_to_device_tensor(_host(rng.random(batch, np.float32), mesh), x_dev)
    np.testing.assert_array_equal(_per_device(jax.jit(run)(x_dev)), _per_device(run(x_dev)))


def test_kv_cache_updated_in_place_across_replays(t3000):
    b, nkv, s, d = 2, 1, 8, 32
    cache = ttnn.from_torch(np.zeros((b, nkv, s, d), np.float32), device=t3000)
    pos = ttnn.from_torch(np.zeros((b,), np.int32), device=t3000)
    new = ttnn.allocate_tensor_on_device(
        ttnn.Shape([1, b, nkv, d]), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT, t3000
    )
    tid = ttnn.begin_trace_capture(t3000)
    ttnn.experimental.paged_update_cache(cache, new, update_idxs_tensor=pos)
    ttnn.end_trace_capture(t3000, tid)
    for step in range(3):
        ttnn.copy_host_to_device_tensor(
            ttnn.from_torch(np.full((1, b, nkv, d), step + 1.0, np.float32)), new
        )
        ttnn.copy_host_to_device_tensor(ttnn.from_torch(np.full((b,), step, np.int32)), pos)
        ttnn.execute_trace(t3000, tid)
    got = ttnn.to_numpy(ttnn.get_device_tensors(cache)[0])
    want = np.zeros((b, nkv, s, d), np.float32)
    for step in range(3):
        want[:, :, step] = step + 1.0
    np.testing.assert_array_equal(got, want)
    ttnn.release_trace(t3000, tid)


def test_replay_donates_only_the_buffers_it_overwrites(t3000):
    """The cache (read, then updated in place) is donated: XLA aliases it to its result and the
    old array is consumed; an input the trace only reads keeps its buffer."""
    cache = ttnn.from_torch(np.zeros((2, 1, 8, 32), np.float32), device=t3000)
    pos = ttnn.from_torch(np.zeros((2,), np.int32), device=t3000)
    new = ttnn.from_torch(np.ones((1, 2, 1, 32), np.float32), device=t3000)
    tid = ttnn.begin_trace_capture(t3000)
    ttnn.experimental.paged_update_cache(cache, new, update_idxs_tensor=pos)
    total = ttnn.sum(cache, dim=-1)
    ttnn.add(pos, 1, output_tensor=pos)
    ttnn.end_trace_capture(t3000, tid)
    (program,) = ttnn.trace.compiled_programs(tid)
    assert program.as_text().count("may-alias") == 2  # cache and pos, not `new`
    for _ in range(3):  # (a host read of the cache would pin its buffer: XLA would copy)
        old_cache, old_new = cache.value, new.value
        ttnn.execute_trace(t3000, tid)
        assert old_cache.is_deleted() and not old_new.is_deleted()
    want = np.zeros((2, 1, 8, 32), np.float32)
    want[:, :, :4] = 1.0  # the captured run wrote position 0, the replays 1, 2 and 3
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(cache)[0]), want)
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(pos)[0]), 4)
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(total)[0]), want.sum(-1))
    ttnn.release_trace(t3000, tid)


def test_submesh_trace_replays_every_submesh_in_one_execute(galaxy):
    subs = galaxy.create_submeshes(ttnn.MeshShape(2, 4))
    rng = np.random.default_rng(1)
    xs, hosts = [], []
    for sub in subs:
        x = rng.random((8, 1, 32, 32)).astype(np.float32)
        xs.append(ttnn.from_torch(x, device=sub, mesh_mapper=ttnn.ShardTensorToMesh(sub, dim=0)))

    def run(x):
        return ttnn.all_reduce(ttnn.exp(x), cluster_axis=1)

    tid = ttnn.begin_trace_capture(galaxy, cq_id=0)
    outs = [run(x) for x in xs]
    ttnn.end_trace_capture(galaxy, tid, cq_id=0)
    info = ttnn.trace.trace_info(tid)
    assert len(info["programs"]) == 4
    for sub, x in zip(subs, xs):
        new = rng.random((8, 1, 32, 32)).astype(np.float32)
        hosts.append(new)
        ttnn.copy_host_to_device_tensor(
            ttnn.from_torch(new, mesh_mapper=ttnn.ShardTensorToMesh(sub, dim=0)), x
        )
    ttnn.execute_trace(galaxy, tid, blocking=True)
    for out, new in zip(outs, hosts):
        per_dev = np.stack([ttnn.to_numpy(d) for d in ttnn.get_device_tensors(out)])
        rows = np.exp(new.astype(np.float64)).reshape(2, 4, 1, 32, 32).sum(1)
        want = np.repeat(rows, 4, axis=0)
        np.testing.assert_allclose(per_dev[:, 0], want, rtol=1e-5)
    ttnn.release_trace(galaxy, tid)


def test_misuse_raises_trace_errors(setup):
    mesh, run, x_dev, batch, _ = setup
    host = _host(np.zeros(batch, np.float32), mesh)
    tid = ttnn.begin_trace_capture(mesh)
    with pytest.raises(ttnn.TraceError, match=r"still being captured"):
        ttnn.begin_trace_capture(mesh)
    out = run(x_dev)
    with pytest.raises(ttnn.TraceError, match="Reads are not supported during trace capture"):
        ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))
    with pytest.raises(ttnn.TraceError, match="Writes are not supported during trace capture"):
        ttnn.copy_host_to_device_tensor(host, x_dev)
    with pytest.raises(ttnn.TraceError, match="Writes are not supported"):
        ttnn.from_torch(np.zeros((2, 2), np.float32), device=mesh)
    with pytest.raises(ttnn.TraceError, match=r"jax\.jit-compiled function"):
        jax.jit(run)(x_dev)
    ttnn.end_trace_capture(mesh, tid)
    with pytest.raises(ttnn.TraceError, match="is not being captured"):
        ttnn.end_trace_capture(mesh, tid)
    ttnn.release_trace(mesh, tid)
    with pytest.raises(ttnn.TraceError, match=r"(?s)no trace MeshTraceId\(\d+\).*fix:"):
        ttnn.execute_trace(mesh, tid)
    with pytest.raises(ttnn.TraceError, match="no trace"):
        ttnn.release_trace(mesh, tid)


def test_replay_with_a_different_input_layout_raises(setup):
    mesh, run, x_dev, batch, _ = setup
    ttnn.copy_host_to_device_tensor(_host(np.zeros(batch, np.float32), mesh), x_dev)
    tid = ttnn.begin_trace_capture(mesh)
    run(x_dev)
    ttnn.end_trace_capture(mesh, tid)
    replicated = ttnn.from_torch(np.zeros(SHAPE, np.float32), layout=ttnn.TILE_LAYOUT)
    ttnn.copy_host_to_device_tensor(replicated, x_dev)  # same per-device shape, new placements
    with pytest.raises(ttnn.TraceError, match=r"(?s)captured with an input.*placements"):
        ttnn.execute_trace(mesh, tid)
    ttnn.release_trace(mesh, tid)


def test_disable_trace_capture_env(monkeypatch, n300):
    monkeypatch.setenv("TTNN_DISABLE_TRACE_CAPTURE", "1")
    tid = ttnn.begin_trace_capture(n300)
    assert int(tid) == 0
    ttnn.end_trace_capture(n300, tid)
    ttnn.execute_trace(n300, tid)
    ttnn.release_trace(n300, tid)


def test_ops_on_other_meshes_are_not_recorded(t3000):
    other = mesh_of((1, 2))
    a = ttnn.from_torch(np.ones((2, 2), np.float32), device=other)
    x = ttnn.from_torch(np.ones((2, 2), np.float32), device=t3000)
    tid = ttnn.begin_trace_capture(t3000)
    ttnn.neg(a)
    ttnn.exp(x)
    ttnn.end_trace_capture(t3000, tid)
    assert ttnn.trace.trace_info(tid)["programs"][0]["ops"] == ["exp"]
    ttnn.release_trace(t3000, tid)


def test_an_error_inside_a_capture_says_so_and_stays_visible():
    mesh = mesh_of((1, 2))
    x = ttnn.from_torch(np.ones((1, 4), np.float32), device=mesh)
    tid = ttnn.begin_trace_capture(mesh)
    try:
        with pytest.raises(ttnn.ShapeMismatchError) as first:
            ttnn.matmul(x, x)
        assert "raised while trace" in "\n".join(first.value.__notes__)
        with pytest.raises(
            ttnn.TraceError, match="still being captured: an earlier error"
        ) as later:
            ttnn.from_torch(np.ones((1, 4), np.float32), device=mesh)
        assert later.value.__cause__ is first.value  # the original error is chained, not lost
        assert "ShapeMismatchError: ttnn.matmul" in str(later.value)
    finally:
        ttnn.release_trace(mesh, tid)
    ttnn.from_torch(np.ones((1, 4), np.float32), device=mesh)  # released: writes work again


def test_outputs_keep_the_last_replay_after_release():
    """Documented: release_trace frees the program; the output tensors stay readable and hold
    the last replay's values (TT-NN frees the trace buffer, not the tensors)."""
    mesh = mesh_of((1, 2))
    x = ttnn.from_torch(np.zeros((1, 4), np.float32), device=mesh)
    tid = ttnn.begin_trace_capture(mesh)
    y = ttnn.add(x, 1.0)
    ttnn.end_trace_capture(mesh, tid)
    ttnn.copy_host_to_device_tensor(ttnn.from_torch(np.full((1, 4), 2.0, np.float32)), x)
    ttnn.execute_trace(mesh, tid)
    ttnn.release_trace(mesh, tid)
    composer = ttnn.ConcatMeshToTensor(mesh, dim=0)
    np.testing.assert_array_equal(ttnn.to_numpy(y, mesh_composer=composer), np.full((2, 4), 3.0))
    with pytest.raises(ttnn.TraceError):
        ttnn.execute_trace(mesh, tid)


def test_trace_input_keeps_its_memory_config_across_refresh_and_refuses_deallocation(t3000):
    # tt_transformers' generator: persistent L1 inputs refreshed with copy_host_to_device_tensor.
    host = np.arange(8 * 32 * 32, dtype=np.float32).reshape(8, 1, 32, 32)
    inp = ttnn.allocate_tensor_on_device(
        ttnn.Shape([1, 1, 32, 32]), ttnn.float32, ttnn.TILE_LAYOUT, t3000, ttnn.L1_MEMORY_CONFIG
    )
    assert inp.memory_config() == ttnn.L1_MEMORY_CONFIG
    ttnn.copy_host_to_device_tensor(ttnn.from_torch(host[:1], layout=ttnn.TILE_LAYOUT), inp)
    assert inp.memory_config() == ttnn.L1_MEMORY_CONFIG
    tid = ttnn.begin_trace_capture(t3000, cq_id=0)
    out = ttnn.multiply(inp, 2.0)
    ttnn.end_trace_capture(t3000, tid, cq_id=0)
    ttnn.copy_host_to_device_tensor(ttnn.from_torch(host[1:2], layout=ttnn.TILE_LAYOUT), inp)
    ttnn.execute_trace(t3000, tid, cq_id=0, blocking=True)
    for got in ttnn.get_device_tensors(out):
        np.testing.assert_array_equal(ttnn.to_numpy(got), host[1:2] * 2)
    ttnn.deallocate(inp)
    with pytest.raises(ttnn.DeallocatedTensorError, match="execute_trace"):
        ttnn.execute_trace(t3000, tid, cq_id=0, blocking=True)
    ttnn.release_trace(t3000, tid)
