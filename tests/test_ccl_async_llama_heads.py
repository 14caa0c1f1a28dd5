"""The Galaxy Llama's fused collective + head-split ops (``ttjax/_src/ttnn/ccl_async/
llama_heads.py``) called as its ``llama_ccl.py`` calls them, against numpy per device: the decode
QKV partial sums of a mesh row summed, then cut into users and heads; and their TT-NN checks."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import mesh_of
from test_ccl import per_device_output

import ttjax as ttnn

NH, NKV, D, USERS = 8, 1, 32, 32
WIDTH = (NH + 2 * NKV) * D
# The Galaxy's attention sub-core grid (model_config.py sub_core_grids), 8 rows high to fit the
# test meshes' worker grids (8x8 or 8x9; the Galaxy's dispatch column leaves it 7x10).
SUB_CORES = ttnn.CoreRangeSet(
    [
        ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 7)),
        ttnn.CoreRange(ttnn.CoreCoord(5, 0), ttnn.CoreCoord(6, 7)),
    ]
)


def _grid(n):
    return ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(n - 1, 0))})


def _sharded(layout, grid, shape, buffer=ttnn.BufferType.L1):
    return ttnn.MemoryConfig(
        layout, buffer, ttnn.ShardSpec(grid, list(shape), ttnn.ShardOrientation.ROW_MAJOR)
    )


QKV_IN = _sharded(ttnn.TensorMemoryLayout.WIDTH_SHARDED, _grid(10), (32, WIDTH // 10))
HEADS = _sharded(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, SUB_CORES, (32, D))


def _qkv(mesh, seed):
    """Per-device partial sums of the fused QKV, [1, 1, 32, width] each, bfloat16-exact."""
    rng = np.random.default_rng(seed)
    rows, cols = tuple(mesh.shape)
    data = rng.integers(-8, 8, (rows, cols, USERS, WIDTH)).astype(np.float32) / 8
    t = ttnn.from_torch(
        data, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh, memory_config=QKV_IN,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(0, 1), mesh_shape=(rows, cols)),
    )  # fmt: skip
    return t, data


def _cores(t):
    return {
        (x, y)
        for r in t.memory_config().shard_spec.grid.ranges()
        for x in range(r.start.x, r.end.x + 1)
        for y in range(r.start.y, r.end.y + 1)
    }


def _packet(mesh):
    mc = _sharded(ttnn.TensorMemoryLayout.WIDTH_SHARDED, _grid(4), (32, 512))
    return ttnn.from_torch(
        np.zeros((1, 1, 32, 2048), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
        device=mesh, memory_config=mc, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )  # fmt: skip


def test_llama_rs_create_heads_sums_the_row_and_splits_users_and_heads():
    """As test_llama_reduce_scatter_create_heads_async_TG.py checks it: the row's sum reshaped to
    [users, 10 heads, d]; column j holds users 8j..8j+7, q = heads 0-7, k's and v's first head
    = heads 8 and 9 (the rest zeros); on the Galaxy's 8x4 mesh."""
    mesh = mesh_of((8, 4))
    t, data = _qkv(mesh, 0)
    sem = ttnn.create_global_semaphore(mesh, SUB_CORES, 0)
    q, k, v = ttnn.experimental.llama_rs_create_heads(
        input_tensor=t, intermediate_packet_buffer=_packet(mesh), dim=3, cross_device_semaphore=sem,
        subdevice_id=ttnn.SubDeviceId(0), cluster_axis=1, mesh_device=mesh,
        topology=ttnn.Topology.Linear, num_links=3, num_heads=NH, num_kv_heads=NKV,
        memory_config=HEADS, qkv_memory_config=HEADS, use_noc1_only=False,
        use_optimal_ccl_for_llama=True,
    )  # fmt: skip
    users = USERS // 4
    heads = data.sum(axis=1).reshape(8, USERS, NH + 2 * NKV, D)  # [row, user, head, d]
    for name, out in (("q", q), ("k", k), ("v", v)):
        assert tuple(out.shape) == (1, users, NH, D), name
        assert out.memory_config().memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    # TT-NN's specs: one user a core, q then k then v, row-wise through each range of the
    # sub-core grid in turn (work_split.cpp's num_cores_to_corerangeset_in_subcoregrids)
    row_wise = [(x, y) for y in range(8) for x in (1, 2, 3)]
    for i, out in enumerate((q, k, v)):
        assert _cores(out) == set(row_wise[8 * i : 8 * i + 8])
    got = {n: per_device_output(o) for n, o in (("q", q), ("k", k), ("v", v))}
    for (row, col), gq in got["q"].items():
        mine = heads[row, col * users : (col + 1) * users]
        np.testing.assert_array_equal(gq[0], mine[:, :NH])
        for name, head in (("k", NH), ("v", NH + 1)):
            g = got[name][(row, col)][0]
            np.testing.assert_array_equal(g[:, 0], mine[:, head])
            np.testing.assert_array_equal(g[:, 1:], 0)


def test_llama_rs_create_heads_checks():
    mesh = mesh_of((8, 4))
    t, _ = _qkv(mesh, 1)
    sem = ttnn.create_global_semaphore(mesh, SUB_CORES, 0)
    kw = dict(
        intermediate_packet_buffer=_packet(mesh), cross_device_semaphore=sem,
        subdevice_id=ttnn.SubDeviceId(0), mesh_device=mesh, topology=ttnn.Topology.Linear,
        num_heads=NH, num_kv_heads=NKV, qkv_memory_config=HEADS,
    )  # fmt: skip
    with pytest.raises(ttnn.CCLError, match="dim must be 3"):
        ttnn.experimental.llama_rs_create_heads(input_tensor=t, dim=2, cluster_axis=1, **kw)
    with pytest.raises(ttnn.CCLError, match="cluster_axis must be 1"):
        ttnn.experimental.llama_rs_create_heads(input_tensor=t, dim=3, cluster_axis=0, **kw)
    bad = _sharded(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, SUB_CORES, (64, D))
    with pytest.raises(ttnn.MemoryConfigError, match="shard height must be 32"):
        ttnn.experimental.llama_rs_create_heads(
            input_tensor=t, dim=3, cluster_axis=1, **{**kw, "qkv_memory_config": bad}
        )
    on_8 = mesh_of((1, 8))
    t8 = ttnn.from_torch(np.zeros((1, 1, 32, WIDTH), np.float32), dtype=ttnn.bfloat16,
                         layout=ttnn.TILE_LAYOUT, device=on_8, memory_config=QKV_IN)  # fmt: skip
    with pytest.raises(ttnn.CCLError, match="ring_devices must be 4 or 2"):
        ttnn.experimental.llama_rs_create_heads(
            input_tensor=t8, dim=3, cluster_axis=1, **{
                **kw, "mesh_device": on_8, "intermediate_packet_buffer": t8,
                "cross_device_semaphore": ttnn.create_global_semaphore(on_8, SUB_CORES, 0)},
        )  # fmt: skip


def test_all_reduce_create_qkv_heads_reduces_then_slices_users():
    """The all-reduce over the mesh columns (returned), then q/k/v of users batch_offset ..
    batch_offset + 7 with batch_offset 8j on column j (as llama_attention.py sets it)."""
    mesh = mesh_of((8, 4))
    t, data = _qkv(mesh, 2)
    sem = ttnn.create_global_semaphore(mesh, SUB_CORES, 0)
    offsets = ttnn.from_torch(
        np.arange(0, 32, 8, dtype=np.int32).reshape(4, 1), dtype=ttnn.int32, device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, 0), mesh_shape=(8, 4)),
    )  # fmt: skip
    buf = ttnn.from_torch(
        np.zeros((1, 1, 32, 4 * WIDTH), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
        device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
        memory_config=_sharded(ttnn.TensorMemoryLayout.WIDTH_SHARDED, _grid(10), (32, 4 * WIDTH // 10)),
    )  # fmt: skip
    reduced, q, k, v = ttnn.experimental.all_reduce_create_qkv_heads(
        t, buf, offsets, 1, mesh, sem, NH, memory_config=QKV_IN, topology=ttnn.Topology.Linear,
        num_links=3, subdevice_id=ttnn.SubDeviceId(0), num_kv_heads=NKV, slice_size=8,
        final_memory_config=HEADS, dtype=ttnn.bfloat16,
    )  # fmt: skip
    sums = data.sum(axis=1)  # [row, users, width]
    assert tuple(q.shape) == (1, 8, NH, D) and tuple(k.shape) == (1, 8, NKV, D)
    assert reduced.memory_config() == QKV_IN
    got_r, got_q, got_k, got_v = (per_device_output(x) for x in (reduced, q, k, v))
    for (row, col), g in got_r.items():
        np.testing.assert_array_equal(g[0, 0], sums[row])
        mine = sums[row, 8 * col : 8 * col + 8].reshape(8, NH + 2 * NKV, D)
        np.testing.assert_array_equal(got_q[(row, col)][0], mine[:, :NH])
        np.testing.assert_array_equal(got_k[(row, col)][0], mine[:, NH : NH + NKV])
        np.testing.assert_array_equal(got_v[(row, col)][0], mine[:, NH + NKV :])
    with pytest.raises(ttnn.MemoryConfigError, match="must be height sharded"):
        ttnn.experimental.all_reduce_create_qkv_heads(
            t, buf, offsets, 1, mesh, sem, NH, memory_config=QKV_IN, num_kv_heads=NKV,
            final_memory_config=QKV_IN,
        )  # fmt: skip
    with pytest.raises(ttnn.MemoryConfigError, match="only bfloat16"):
        ttnn.experimental.all_reduce_create_qkv_heads(
            t, buf, offsets, 1, mesh, sem, NH, memory_config=QKV_IN, num_kv_heads=NKV,
            final_memory_config=HEADS, dtype=ttnn.float32,
        )  # fmt: skip
