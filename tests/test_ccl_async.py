"""``ttnn.experimental.*_async`` collectives called the way tt-metal's model code calls them, against
a per-device numpy reference on 1x8 and 2x4 meshes; persistent buffers; the hardware arguments'
checks (semaphore mesh and count, sub-device ids, dims); and the sub-device host objects."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _op_testing import device_arrays
from conftest import mesh_of
from test_ccl import (
    assert_close,
    per_device_input,
    per_device_output,
    ref_all_gather,
    ref_all_reduce,
    ref_all_to_all,
    ref_reduce_scatter,
)

import ttjax as ttnn

MESHES = [(1, 8), (2, 4)]
AXES = [None, 0, 1]


def _group(shape, axis):
    return int(np.prod(shape)) if axis is None else shape[axis]


def _crs(mesh):
    g = mesh.compute_with_storage_grid_size()
    return ttnn.CoreRangeSet(
        {ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(g.x - 1, g.y - 1))}
    )


class _TTCCL:
    """The shape of tt_transformers' TT_CCL: ping-pong lists of 2 (gather) and 3 (scatter)."""

    def __init__(self, mesh):
        crs = _crs(mesh)
        self.barrier = ttnn.create_global_semaphore(mesh, crs, 0)
        self.ag = [ttnn.create_global_semaphore(mesh, crs, 0) for _ in range(2)]
        self.rs = [ttnn.create_global_semaphore(mesh, crs, 0) for _ in range(3)]


def _input(mesh, local, seed=0):
    return per_device_input(mesh, local, np.float32, ttnn.float32, seed)


def _tiled(mesh, local):
    """A TILE-layout tensor: TT-NN's native CCL kernels (and their checks) serve these."""
    n = mesh.get_num_devices()
    data = np.random.default_rng(0).standard_normal((n * local[0], *local[1:])).astype(np.float32)
    return ttnn.from_torch(
        data, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )


def _cases(axes):
    """(mesh shape, cluster_axis) pairs whose group has several devices (TT-NN's async CCLs
    refuse a group of one; tested below)."""
    return [
        pytest.param(s, a, id=f"{s[0]}x{s[1]}-axis{a}")
        for s in MESHES
        for a in axes
        if _group(s, a) > 1
    ]


# ---------------------------------------------------------------------------------------------
# Values, in the model code's call shapes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "axis"), _cases(AXES))
def test_all_gather_async_tt_transformers_form(shape, axis):
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 1, 4, 6))
    kwargs = {} if axis is None else {"cluster_axis": axis}
    out = ttnn.experimental.all_gather_async(
        t,
        persistent_output_buffer=None,
        dim=3,
        multi_device_global_semaphore=ccl.ag,
        num_links=2,
        topology=ttnn.Topology.Linear,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        barrier_semaphore=ccl.barrier,
        chunks_per_sync=10,
        num_workers_per_link=2,
        num_buffers_per_channel=2,
        **kwargs,
    )
    assert_close(per_device_output(out), ref_all_gather(data, shape, 3, axis), np.float32)


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_all_gather_async_mixtral_and_positional_forms(shape):
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 2, 4, 6), seed=1)
    # mixtral: dim=1, no topology (Ring by default), no cluster_axis
    out = ttnn.experimental.all_gather_async(
        t,
        persistent_output_buffer=None,
        dim=1,
        multi_device_global_semaphore=ccl.ag,
        num_links=1,
        barrier_semaphore=ccl.barrier,
        chunks_per_sync=10,
        num_workers_per_link=2,
        num_buffers_per_channel=2,
    )
    assert_close(per_device_output(out), ref_all_gather(data, shape, 1, None), np.float32)
    # overload 1: (input_tensor, dim, multi_device_global_semaphore)
    out = ttnn.experimental.all_gather_async(t, -1, ccl.ag, topology=ttnn.Topology.Ring)
    assert_close(per_device_output(out), ref_all_gather(data, shape, 3, None), np.float32)


@pytest.mark.parametrize("axis", [0, 1])
def test_all_gather_async_galaxy_form_writes_persistent_tensor(axis):
    shape = (2, 4)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 1, 4, 6), seed=2)
    n = shape[axis]
    buf = ttnn.from_torch(
        np.zeros((1, 1, 4, 6 * n), np.float32),
        dtype=ttnn.float32,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    out = ttnn.experimental.all_gather_async(
        t,
        3,
        cluster_axis=axis,
        mesh_device=mesh,
        topology=ttnn.Topology.Linear,
        multi_device_global_semaphore=ccl.ag,
        persistent_output_tensor=buf,
        num_links=1,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        subdevice_id=ttnn.SubDeviceId(0),
        use_optimal_ccl_for_llama=False,
    )
    assert out is buf
    assert_close(per_device_output(buf), ref_all_gather(data, shape, 3, axis), np.float32)


def test_all_gather_async_reversed_orders_devices_backwards():
    shape = (1, 8)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 1, 2, 3), seed=3)
    out = ttnn.experimental.all_gather_async_reversed(
        input_tensor=t,
        persistent_output_buffer=None,
        dim=3,
        multi_device_global_semaphore=ccl.ag,
        num_links=1,
        barrier_semaphore=ccl.barrier,
        topology=ttnn.Topology.Ring,
        cluster_axis=1,
    )
    pieces = [data[(0, k)] for k in reversed(range(8))]
    want = {c: np.concatenate(pieces, axis=3) for c in data}
    assert_close(per_device_output(out), want, np.float32)


@pytest.mark.parametrize(("shape", "axis"), _cases(AXES))
def test_reduce_scatter_minimal_async_mlp_form(shape, axis):
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    n = _group(shape, axis)
    t, data = _input(mesh, (1, 1, 4, 2 * n), seed=4)
    kwargs = {} if axis is None else {"cluster_axis": axis}
    out = ttnn.experimental.reduce_scatter_minimal_async(
        t,
        persistent_output_buffers=None,
        dim=3,
        multi_device_global_semaphore=ccl.rs,
        barrier_semaphore=ccl.barrier,
        num_links=1,
        memory_config=None,
        intermediate_memory_config=ttnn.DRAM_MEMORY_CONFIG,
        topology=ttnn.Topology.Linear,
        chunks_per_sync=10,
        num_workers_per_link=2,
        num_buffers_per_channel=2,
        **kwargs,
    )
    assert_close(per_device_output(out), ref_reduce_scatter(data, shape, 3, axis), np.float32)


def test_reduce_scatter_minimal_async_writes_persistent_output():
    shape = (2, 4)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 1, 4, 8), seed=5)
    rep = ttnn.ReplicateTensorToMesh(mesh)
    inter = ttnn.from_torch(np.zeros((2, 1, 4, 8), np.float32), device=mesh, mesh_mapper=rep)
    output = ttnn.from_torch(np.zeros((1, 1, 4, 2), np.float32), device=mesh, mesh_mapper=rep)
    out = ttnn.experimental.reduce_scatter_minimal_async(
        input_tensor=t,
        persistent_output_buffers=[inter, output],
        dim=3,
        multi_device_global_semaphore=ccl.rs,
        barrier_semaphore=ccl.barrier,
        num_links=1,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        topology=ttnn.Topology.Ring,
        subdevice_id=ttnn.SubDeviceId(0),
        cluster_axis=1,
        num_workers_per_link=1,
    )
    assert out is output
    assert_close(per_device_output(output), ref_reduce_scatter(data, shape, 3, 1), np.float32)


def test_tt_all_reduce_composite_form_is_an_all_reduce():
    """tt_all_reduce(use_composite=True) on a 2x4 mesh: reduce-scatter then all-gather."""
    shape = (2, 4)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 1, 4, 8), seed=6)
    rs = ttnn.experimental.reduce_scatter_minimal_async(
        t,
        persistent_output_buffers=None,
        dim=3,
        multi_device_global_semaphore=ccl.rs,
        barrier_semaphore=ccl.barrier,
        num_links=1,
        cluster_axis=0,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        intermediate_memory_config=ttnn.DRAM_MEMORY_CONFIG,
        topology=ttnn.Topology.Linear,
        chunks_per_sync=10,
        num_workers_per_link=2,
        num_buffers_per_channel=2,
    )
    out = ttnn.experimental.all_gather_async(
        rs,
        persistent_output_buffer=None,
        dim=3,
        multi_device_global_semaphore=ccl.ag,
        num_links=2,
        cluster_axis=0,
        topology=ttnn.Topology.Linear,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        barrier_semaphore=ccl.barrier,
        chunks_per_sync=10,
        num_workers_per_link=2,
        num_buffers_per_channel=2,
    )
    assert_close(per_device_output(out), ref_all_reduce(data, shape, 0), np.float32)


@pytest.mark.parametrize(("shape", "axis"), _cases([0, 1]))
def test_all_reduce_async_forms(shape, axis):
    mesh = mesh_of(shape)
    crs = _crs(mesh)
    t, data = _input(mesh, (1, 1, 4, 8), seed=7)
    want = ref_all_reduce(data, shape, axis)
    # the Galaxy Llama's form: a buffer tensor, one semaphore, a dtype
    buf = ttnn.from_torch(
        np.zeros((1, 1, 4, 8), np.float32),
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    out = ttnn.experimental.all_reduce_async(
        t,
        buf,
        cluster_axis=axis,
        mesh_device=mesh,
        multi_device_global_semaphore=ttnn.create_global_semaphore(mesh, crs, 0),
        num_links=1,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        dtype=ttnn.float32,
        topology=ttnn.Topology.Linear,
        subdevice_id=ttnn.SubDeviceId(0),
        use_noc1_only=False,
        use_optimal_ccl_for_llama=False,
    )
    assert_close(per_device_output(out), want, np.float32)
    # SD3.5's VAE form: from/to-remote and gather semaphores, math_op by keyword
    out = ttnn.experimental.all_reduce_async(
        input_tensor=t,
        cluster_axis=axis,
        mesh_device=mesh,
        from_remote_multi_device_global_semaphore=ttnn.create_global_semaphore(mesh, crs, 0),
        to_remote_multi_device_global_semaphore=ttnn.create_global_semaphore(mesh, crs, 0),
        gather_multi_device_global_semaphore=ttnn.create_global_semaphore(mesh, crs, 0),
        math_op=ttnn.ReduceType.Sum,
        num_links=1,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        topology=ttnn.Topology.Linear,
        subdevice_id=None,
    )
    assert_close(per_device_output(out), want, np.float32)
    # the composite form with barrier / rs / ag semaphore lists (2, 3, 2)
    ccl = _TTCCL(mesh)
    out = ttnn.experimental.all_reduce_async(
        t, axis, mesh, [ccl.barrier, ccl.barrier], ccl.rs, ccl.ag, ttnn.ReduceType.Max
    )
    assert_close(per_device_output(out), ref_all_reduce(data, shape, axis, "max"), np.float32)


def test_reduce_scatter_async_and_llama_reduce_scatter():
    shape = (2, 4)
    mesh = mesh_of(shape)
    crs = _crs(mesh)
    t, data = _input(mesh, (1, 1, 4, 8), seed=8)
    sem = [ttnn.create_global_semaphore(mesh, crs, 0) for _ in range(2)]
    out = ttnn.experimental.reduce_scatter_async(
        t,
        3,
        cluster_axis=1,
        mesh_device=mesh,
        from_remote_multi_device_global_semaphore=sem[0],
        to_remote_multi_device_global_semaphore=sem[1],
        math_op=ttnn.ReduceType.Sum,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        topology=ttnn.Topology.Linear,
        num_links=1,
        subdevice_id=ttnn.SubDeviceId(0),
        persistent_output_tensors=None,
    )
    assert_close(per_device_output(out), ref_reduce_scatter(data, shape, 3, 1), np.float32)
    packet = ttnn.from_torch(
        np.zeros((1, 1, 4, 8), np.float32),
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    out = ttnn.experimental.llama_reduce_scatter(
        t,
        packet,
        3,
        sem[0],
        ttnn.SubDeviceId(0),
        cluster_axis=1,
        mesh_device=mesh,
        num_links=1,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        topology=ttnn.Topology.Linear,
        use_noc1_only=False,
    )
    assert_close(per_device_output(out), ref_reduce_scatter(data, shape, 3, 1), np.float32)


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_all_to_all_async_writes_persistent_output(shape):
    mesh = mesh_of(shape)
    crs = _crs(mesh)
    t, data = _input(mesh, (1, 1, 8, 16), seed=9)
    rep = ttnn.ReplicateTensorToMesh(mesh)
    inter = ttnn.from_torch(np.zeros((1, 1, 8, 16), np.float32), device=mesh, mesh_mapper=rep)
    output = ttnn.from_torch(np.zeros((1, 1, 64, 2), np.float32), device=mesh, mesh_mapper=rep)
    out = ttnn.experimental.all_to_all_async(
        t, inter, output, 2, 3, ttnn.create_global_semaphore(mesh, crs, 0), num_links=1
    )
    assert out is output
    assert_close(per_device_output(out), ref_all_to_all(data, shape, 2, 3, None), np.float32)


def test_all_gather_matmul_async_returns_gather_and_matmul():
    shape = (1, 8)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 1, 4, 2), seed=10)
    w_np = np.random.default_rng(11).standard_normal((16, 5)).astype(np.float32)
    w = ttnn.from_torch(w_np, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))
    gathered, dense = ttnn.experimental.all_gather_matmul_async(
        t,
        w,
        persistent_output_buffer=None,
        dim=3,
        multi_device_global_semaphore=ccl.ag,
        all_gather_core_grid_offset=(0, 4),
        barrier_semaphore=ccl.barrier,
        num_links=1,
        memory_config_ag=ttnn.L1_MEMORY_CONFIG,
        memory_config_mm=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
        program_config=None,
        compute_kernel_config=None,
        chunks_per_sync=10,
        num_workers_per_link=2,
        num_buffers_per_channel=2,
    )
    want = ref_all_gather(data, shape, 3, None)
    assert_close(per_device_output(gathered), want, np.float32)
    assert_close(per_device_output(dense), {c: v @ w_np for c, v in want.items()}, np.float32)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def _ag(t, sems, **kw):
    return ttnn.experimental.all_gather_async(
        t,
        persistent_output_buffer=kw.pop("persistent_output_buffer", None),
        dim=kw.pop("dim", 3),
        multi_device_global_semaphore=sems,
        **kw,
    )


def test_semaphore_from_another_mesh_names_both_meshes():
    a, b = mesh_of((2, 4)), mesh_of((1, 8))
    t, _ = _input(a, (1, 1, 2, 2))
    with pytest.raises(
        ttnn.CCLError, match=r"created on mesh .*1x8.*tensor lives on mesh .*2x4(?s:.*)fix:"
    ):
        _ag(t, _TTCCL(b).ag)
    with pytest.raises(ttnn.CCLError, match=r"barrier_semaphore was created on mesh .*1x8"):
        _ag(t, _TTCCL(a).ag, barrier_semaphore=_TTCCL(b).barrier)


def test_semaphore_of_a_parent_mesh_serves_its_submeshes():
    parent = mesh_of((2, 4))
    sems = _TTCCL(parent).ag
    sub = parent.create_submesh(ttnn.MeshShape(1, 4), ttnn.MeshCoordinate(1, 0))
    t, data = _input(sub, (1, 1, 2, 3), seed=70)
    out = _ag(t, sems)
    assert_close(per_device_output(out), ref_all_gather(data, (1, 4), 3, None), np.float32)
    with pytest.raises(ttnn.CCLError, match=r"created on mesh .*1x4.*tensor lives on mesh .*2x4"):
        _ag(_input(parent, (1, 1, 2, 3))[0], _TTCCL(sub).ag)


def test_semaphore_of_a_closed_mesh():
    old = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    stale = _TTCCL(old).ag
    ttnn.close_mesh_device(old)
    t, _ = _input(mesh_of((1, 2)), (1, 1, 2, 2))
    with pytest.raises(ttnn.CCLError, match=r"created on mesh .*1x2.*which was closed(?s:.*)fix:"):
        _ag(t, stale)


def test_wrong_semaphore_count_raises_tt_nn_error():
    mesh = mesh_of((2, 4))
    ccl = _TTCCL(mesh)
    t = _tiled(mesh, (1, 1, 32, 256))  # tile-aligned: TT-NN's native kernels count semaphores
    with pytest.raises(ttnn.CCLError, match=r"semaphore size should be 2 but has 3(?s:.*)fix:"):
        _ag(t, ccl.rs)
    with pytest.raises(ttnn.CCLError, match=r"semaphore size should be 3 but has 2"):
        ttnn.experimental.reduce_scatter_minimal_async(
            t, persistent_output_buffers=None, dim=3, multi_device_global_semaphore=ccl.ag
        )
    # a single semaphore where TT-NN's binding takes a list: pybind's TypeError, every overload
    with pytest.raises(TypeError, match=r"incompatible function arguments(?s:.*)is not a list"):
        ttnn.experimental.reduce_scatter_minimal_async(
            t, persistent_output_buffers=None, dim=3, multi_device_global_semaphore=ccl.barrier
        )
    # a row-major tensor takes TT-NN's composite path, which uses no semaphores
    rm, data = _input(mesh, (1, 1, 2, 8))
    assert_close(
        per_device_output(_ag(rm, ccl.rs)), ref_all_gather(data, (2, 4), 3, None), np.float32
    )


def test_unknown_subdevice_id():
    mesh = mesh_of((2, 4))
    t, _ = _input(mesh, (1, 1, 2, 2))
    with pytest.raises(ttnn.SubDeviceError, match=r"SubDeviceId\(3\).*out of bounds 1(?s:.*)fix:"):
        _ag(t, _TTCCL(mesh).ag, subdevice_id=ttnn.SubDeviceId(3))
    with pytest.raises(TypeError, match=r"subdevice_id=0 is not a ttnn.SubDeviceId"):
        _ag(t, _TTCCL(mesh).ag, subdevice_id=0)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"dim": 4}, r"dim=4 is out of range"),
        ({"cluster_axis": 2}, r"cluster axis 2 is out of range"),
        ({"num_links": 0}, r"num_links should be more than 0 but has 0"),
        ({"num_links": 9}, r"num_links=9: Worker cores used by links are parallelized over rows"),
    ],
)
def test_bad_arguments(kw, match):
    mesh = mesh_of((2, 4))
    t = _tiled(mesh, (1, 1, 32, 32))
    with pytest.raises(ttnn.CCLError, match=match + r"(?s:.*)fix:"):
        _ag(t, _TTCCL(mesh).ag, **kw)


def test_reduce_scatter_dims_topology_and_single_device_group():
    mesh = mesh_of((1, 8))
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (8, 1, 2, 8))
    # an even split of dim 0 takes TT-NN's composite path (all-broadcast, add, mesh_partition)
    out = ttnn.experimental.reduce_scatter_minimal_async(t, None, 0, ccl.rs)
    assert_close(per_device_output(out), ref_reduce_scatter(data, (1, 8), 0, None), np.float32)
    # an uneven one goes to the native kernel, which scatters dims 1-3 only
    uneven = _tiled(mesh, (4, 1, 32, 32))
    with pytest.raises(ttnn.CCLError, match=r"only supports scattering on dim 1, 2, 3"):
        ttnn.experimental.reduce_scatter_minimal_async(uneven, None, 0, ccl.rs)
    with pytest.raises(ttnn.CCLError, match=r"topology must be Ring or Linear(?s:.*)fix:"):
        ttnn.experimental.reduce_scatter_minimal_async(
            _tiled(mesh, (1, 1, 32, 256)), None, 3, ccl.rs, topology=ttnn.Topology.Mesh
        )
    with pytest.raises(ttnn.CCLError, match=r"num_devices > 1, but has 1"):
        _ag(t, ccl.ag, cluster_axis=0)


def test_persistent_buffer_checks():
    mesh = mesh_of((1, 8))
    t, _ = _input(mesh, (1, 1, 2, 2))
    rep = ttnn.ReplicateTensorToMesh(mesh)
    wrong = ttnn.from_torch(np.zeros((1, 1, 2, 15), np.float32), device=mesh, mesh_mapper=rep)
    with pytest.raises(ttnn.CCLError, match=r"shape at dimension 3 should be 16 but has 15"):
        _ag(t, _TTCCL(mesh).ag, persistent_output_buffer=wrong)
    bf = ttnn.from_torch(
        np.zeros((1, 1, 2, 16), np.float32), dtype=ttnn.bfloat16, device=mesh, mesh_mapper=rep
    )
    with pytest.raises(ttnn.CCLError, match=r"dtype should be same as input tensor dtype"):
        _ag(t, _TTCCL(mesh).ag, persistent_output_buffer=bf)
    dram = ttnn.from_torch(np.zeros((1, 1, 2, 16), np.float32), device=mesh, mesh_mapper=rep)
    with pytest.raises(ttnn.CCLError, match=r"memory config should be same as output_mem_config"):
        _ag(t, _TTCCL(mesh).ag, persistent_output_buffer=dram, memory_config=ttnn.L1_MEMORY_CONFIG)


def test_output_memory_config_is_the_ops_memory_config():
    mesh = mesh_of((2, 4))
    ccl = _TTCCL(mesh)
    t, _ = _input(mesh, (1, 1, 2, 8))
    assert (
        _ag(t, ccl.ag, memory_config=ttnn.L1_MEMORY_CONFIG).memory_config() == ttnn.L1_MEMORY_CONFIG
    )
    assert _ag(t, ccl.ag).memory_config() == t.memory_config()  # value_or(input's)
    rs = ttnn.experimental.reduce_scatter_minimal_async(
        t, None, 3, ccl.rs, cluster_axis=1, memory_config=ttnn.L1_MEMORY_CONFIG
    )
    assert rs.memory_config() == ttnn.L1_MEMORY_CONFIG


def test_llama_reduce_scatter_needs_axis_1_of_2_or_4():
    mesh = mesh_of((1, 8))
    t, _ = _input(mesh, (1, 1, 2, 8))
    sem = ttnn.create_global_semaphore(mesh, _crs(mesh), 0)
    with pytest.raises(ttnn.CCLError, match=r"ring_devices must be 4 or 2, got 8"):
        ttnn.experimental.llama_reduce_scatter(t, t, 3, sem, ttnn.SubDeviceId(0), 1, mesh)


# ---------------------------------------------------------------------------------------------
# Host objects: sub-devices, semaphores, global circular buffers
# ---------------------------------------------------------------------------------------------


def _rect(x0, y0, x1, y1):
    return ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(x0, y0), ttnn.CoreCoord(x1, y1))})


def test_sub_device_manager_lifecycle_gates_ccl_subdevice_ids():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    try:
        ccl = _TTCCL(mesh)
        t, data = _input(mesh, (1, 1, 2, 2))
        assert mesh.get_sub_device_ids() == [ttnn.SubDeviceId(0)]
        prefetch, worker = ttnn.SubDevice([_rect(0, 0, 0, 7)]), ttnn.SubDevice([_rect(1, 0, 7, 7)])
        mid = mesh.create_sub_device_manager([prefetch, worker], 0)
        with pytest.raises(ttnn.SubDeviceError, match="out of bounds 1"):
            _ag(t, ccl.ag, subdevice_id=ttnn.SubDeviceId(1))
        mesh.load_sub_device_manager(mid)
        mesh.set_sub_device_stall_group([ttnn.SubDeviceId(0), ttnn.SubDeviceId(1)])
        assert mesh.get_sub_device_ids() == [ttnn.SubDeviceId(0), ttnn.SubDeviceId(1)]
        out = _ag(t, ccl.ag, subdevice_id=ttnn.SubDeviceId(1))
        assert_close(per_device_output(out), ref_all_gather(data, (1, 2), 3, None), np.float32)
        ttnn.synchronize_device(mesh, sub_device_ids=[ttnn.SubDeviceId(1)])
        with pytest.raises(ttnn.SubDeviceError, match="Cannot remove active sub device manager"):
            mesh.remove_sub_device_manager(mid)
        mesh.reset_sub_device_stall_group()
        mesh.clear_loaded_sub_device_manager()
        with pytest.raises(ttnn.SubDeviceError, match=r"SubDevice index 1 out of bounds 1"):
            ttnn.synchronize_device(mesh, sub_device_ids=[ttnn.SubDeviceId(1)])
        mesh.remove_sub_device_manager(mid)
        with pytest.raises(ttnn.SubDeviceError, match="does not exist"):
            mesh.load_sub_device_manager(mid)
    finally:
        ttnn.close_mesh_device(mesh)


@pytest.mark.parametrize(
    ("sub_devices", "l1", "match"),
    [
        (
            [ttnn.SubDevice([_rect(0, 0, 3, 3)]), ttnn.SubDevice([_rect(3, 3, 5, 5)])],
            0,
            "intersect",
        ),
        ([ttnn.SubDevice([_rect(0, 0, 8, 0)])], 0, r"must be within device grid"),
        ([ttnn.SubDevice([_rect(0, 0, 1, 1)])], 8, r"aligned to allocator L1 alignment 16"),
        (
            [ttnn.SubDevice([_rect(0, 0, 0, i)]) for i in range(17)],
            0,
            "max number of sub-devices 16",
        ),
    ],
)
def test_sub_device_manager_validation(sub_devices, l1, match):
    with pytest.raises(ttnn.SubDeviceError, match=match + r"(?s:.*)fix:"):
        mesh_of((1, 2)).create_sub_device_manager(sub_devices, l1)


def test_semaphores_and_global_circular_buffers():
    mesh = mesh_of((1, 2))
    crs = _crs(mesh)
    a, b = (ttnn.create_global_semaphore(mesh, crs, 5) for _ in range(2))
    assert a.value == 5
    assert ttnn.get_global_semaphore_address(a) != ttnn.get_global_semaphore_address(b)
    ttnn.reset_global_semaphore_value(a, 0)
    assert a.value == 0
    with pytest.raises(ttnn.SubDeviceError, match=r"initial_value=-1 is not a uint32"):
        ttnn.create_global_semaphore(mesh, crs, -1)
    with pytest.raises(ttnn.SubDeviceError, match=r"must be within device grid"):
        ttnn.create_global_semaphore(mesh, _rect(0, 0, 9, 9), 0)
    cb = ttnn.create_global_circular_buffer(
        mesh,
        [(ttnn.CoreCoord(0, 0), _rect(1, 0, 2, 0)), (ttnn.CoreCoord(0, 1), _rect(1, 1, 2, 1))],
        4096,
    )
    assert cb.size == 4096 and len(cb.sender_receiver_core_mapping) == 2
    with pytest.raises(ttnn.SubDeviceError, match="Duplicate receiver cores found"):
        ttnn.create_global_circular_buffer(
            mesh,
            [(ttnn.CoreCoord(0, 0), _rect(1, 0, 2, 0)), (ttnn.CoreCoord(0, 1), _rect(2, 0, 2, 0))],
            64,
        )
    with pytest.raises(ttnn.SubDeviceError, match="can only be created for L1 buffer types"):
        ttnn.create_global_circular_buffer(
            mesh, [(ttnn.CoreCoord(0, 0), _rect(1, 0, 1, 0))], 64, buffer_type=ttnn.BufferType.DRAM
        )


def test_traced_all_gather_async_rewrites_its_persistent_buffer_on_replay():
    """The decode pattern: capture the CCL into a trace once, replay it with new inputs."""
    shape = (2, 4)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, _ = _input(mesh, (1, 1, 2, 3))
    buf = ttnn.from_torch(
        np.zeros((1, 1, 2, 12), np.float32),
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    tid = ttnn.begin_trace_capture(mesh)
    ttnn.experimental.all_gather_async(
        t,
        buf,
        3,
        ccl.ag,
        cluster_axis=1,
        topology=ttnn.Topology.Linear,
        barrier_semaphore=ccl.barrier,
    )
    ttnn.end_trace_capture(mesh, tid)
    for seed in (20, 21):
        _, data = _input(mesh, (1, 1, 2, 3), seed=seed)
        ttnn.copy_host_to_device_tensor(
            ttnn.from_torch(
                np.concatenate([data[c] for c in sorted(data)]),
                mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
            ),
            t,
        )
        ttnn.execute_trace(mesh, tid)
        assert_close(per_device_output(buf), ref_all_gather(data, shape, 3, 1), np.float32)
    ttnn.release_trace(mesh, tid)


def test_sync_collectives_take_fabric_tuning_and_check_subdevice_id():
    """TT-NN's current ttnn.all_gather / reduce_scatter take the same tuning knobs and ids."""
    shape = (2, 4)
    mesh = mesh_of(shape)
    t, data = _input(mesh, (1, 1, 2, 8), seed=30)
    out = ttnn.all_gather(
        t,
        3,
        cluster_axis=1,
        subdevice_id=ttnn.SubDeviceId(0),
        chunks_per_sync=10,
        num_workers_per_link=2,
        num_buffers_per_channel=2,
        topology=ttnn.Topology.Linear,
    )
    assert_close(per_device_output(out), ref_all_gather(data, shape, 3, 1), np.float32)
    out = ttnn.reduce_scatter(t, 3, cluster_axis=1, chunks_per_sync=10, num_workers_per_link=2)
    assert_close(per_device_output(out), ref_reduce_scatter(data, shape, 3, 1), np.float32)
    with pytest.raises(ttnn.SubDeviceError, match=r"SubDevice index 2 out of bounds 1"):
        ttnn.reduce_scatter(t, 3, subdevice_id=ttnn.SubDeviceId(2))
    with pytest.raises(ttnn.CCLError, match=r"chunks_per_sync=-1 is not a non-negative int"):
        ttnn.all_gather(t, 3, chunks_per_sync=-1)


def _ref_neighbor_pad(data, shape, axis, dim, left, right, mode, secondary=None):
    """Per device: the neighbours' edge rows around its own rows, by loops over coordinates."""
    n = shape[axis]
    out = {}
    for c, x in data.items():
        k = c[axis]

        def at(j, c=c):
            g = list(c)
            g[axis] = j
            return data[tuple(g)]

        if secondary is None:
            step, has_b, has_f = 1, k > 0, k < n - 1
        else:
            sec_axis, (rows, cols) = secondary
            r, col = divmod(k, cols)
            if sec_axis == 1:
                step, has_b, has_f = 1, col > 0, col < cols - 1
            else:
                step, has_b, has_f = cols, r > 0, r < rows - 1
        size = x.shape[dim]
        take = lambda a, lo, hi: np.take(a, range(lo, hi), axis=dim)  # noqa: E731
        if has_b:
            lpad = take(at(k - step), size - left, size)
        elif mode == "zeros":
            lpad = np.zeros_like(take(x, 0, left))
        else:
            lpad = np.repeat(take(x, 0, 1), left, axis=dim)
        if has_f:
            rpad = take(at(k + step), 0, right)
        elif mode == "zeros":
            rpad = np.zeros_like(take(x, 0, right))
        else:
            rpad = np.repeat(take(x, size - 1, size), right, axis=dim)
        out[c] = np.concatenate([lpad, x, rpad], axis=dim)
    return out


@pytest.mark.parametrize("mode", ["zeros", "replicate"])
@pytest.mark.parametrize("axis", [0, 1])
def test_neighbor_pad_async_vae_form(mode, axis):
    shape = (2, 4)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 2, 3, 4, 2), seed=40)  # B, T, H, W, C
    out = ttnn.experimental.neighbor_pad_async(
        t,
        dim=2,
        padding_left=1,
        padding_right=2,
        padding_mode=mode,
        cluster_axis=axis,
        final_semaphore=ccl.ag[0],
        barrier_semaphore=ccl.barrier,
        num_links=1,
        topology=ttnn.Topology.Linear,
    )
    want = _ref_neighbor_pad(data, shape, axis, 2, 1, 2, mode)
    assert_close(per_device_output(out), want, np.float32, exact=True)


@pytest.mark.parametrize("secondary_axis", [0, 1])
def test_neighbor_pad_async_secondary_axis(secondary_axis):
    shape = (1, 8)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 3, 4, 2), seed=41)
    out = ttnn.experimental.neighbor_pad_async(
        t,
        1,
        1,
        1,
        "replicate",
        1,
        ccl.ag[0],
        ccl.barrier,
        secondary_cluster_axis=secondary_axis,
        secondary_mesh_shape=[2, 4],
    )
    want = _ref_neighbor_pad(data, shape, 1, 1, 1, 1, "replicate", (secondary_axis, (2, 4)))
    assert_close(per_device_output(out), want, np.float32, exact=True)
    with pytest.raises(ttnn.CCLError, match=r"Secondary mesh shape \(3,4\) is not valid"):
        ttnn.experimental.neighbor_pad_async(
            t,
            1,
            1,
            1,
            "zeros",
            1,
            ccl.ag[0],
            ccl.barrier,
            secondary_cluster_axis=0,
            secondary_mesh_shape=[3, 4],
        )
    with pytest.raises(ttnn.CCLError, match=r"Unsupported padding mode 'reflect'"):
        ttnn.experimental.neighbor_pad_async(t, 1, 1, 1, "reflect", 1, ccl.ag[0], ccl.barrier)
    with pytest.raises(ttnn.CCLError, match=r"only supports padding non last dim, provided 3"):
        ttnn.experimental.neighbor_pad_async(t, 3, 1, 1, "zeros", 1, ccl.ag[0], ccl.barrier)


def test_slice_reshard_async_trims_and_reshards():
    shape = (2, 4)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (4, 2, 3), seed=42)
    out = ttnn.experimental.slice_reshard_async(
        t,
        dim=0,
        output_dim_shape=12,
        output_dim_offset=3,
        cluster_axis=1,
        final_semaphore=ccl.ag[0],
        barrier_semaphore=ccl.barrier,
        num_links=1,
        topology=ttnn.Topology.Linear,
    )
    want = {}
    for c in data:
        whole = np.concatenate([data[(c[0], j)] for j in range(4)])[3:15]
        want[c] = np.split(whole, 4)[c[1]]
    assert_close(per_device_output(out), want, np.float32, exact=True)
    with pytest.raises(ttnn.CCLError, match=r"Output dim shape must be divisible by num devices"):
        ttnn.experimental.slice_reshard_async(t, 0, 0, 10, 1, ccl.ag[0], ccl.barrier)


def test_async_collectives_under_jit_equal_eager():
    shape = (2, 4)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 1, 2, 8), seed=50)

    def step(x):
        g = ttnn.experimental.all_gather_async(
            x, None, 3, ccl.ag, cluster_axis=0, topology=ttnn.Topology.Linear
        )
        return ttnn.experimental.reduce_scatter_minimal_async(
            g, None, 3, ccl.rs, cluster_axis=1, barrier_semaphore=ccl.barrier
        )

    jitted, eager = per_device_output(jax.jit(step)(t)), per_device_output(step(t))
    want = ref_reduce_scatter(ref_all_gather(data, shape, 3, 0), shape, 3, 1)
    assert_close(eager, want, np.float32)
    assert_close(jitted, eager, np.float32, exact=True)


def test_global_semaphore_arg_as_deepseek_passes_it():
    """DeepSeek's configs hold all_gather_async's semaphores as a GlobalSemaphoreArg."""
    shape = (2, 4)
    mesh = mesh_of(shape)
    ccl = _TTCCL(mesh)
    t, data = _input(mesh, (1, 1, 2, 3), seed=60)
    cfg = {
        "dim": 3,
        "cluster_axis": 1,
        "mesh_device": mesh,
        "topology": ttnn.Topology.Linear,
        "multi_device_global_semaphore": ttnn.experimental.GlobalSemaphoreArg(ccl.ag),
        "num_links": 1,
        "memory_config": ttnn.DRAM_MEMORY_CONFIG,
    }
    out = ttnn.experimental.all_gather_async(t, **cfg)
    assert_close(per_device_output(out), ref_all_gather(data, shape, 3, 1), np.float32)
    with pytest.raises(ttnn.CCLError, match="semaphore size should be 2 but has 1"):
        cfg["multi_device_global_semaphore"] = ttnn.experimental.GlobalSemaphoreArg(ccl.barrier)
        ttnn.experimental.all_gather_async(_tiled(mesh, (1, 1, 32, 32)), **cfg)


def test_llama_rs_matmul_both_forms():
    """The Galaxy Llama's FF1/FF3: w1 and w3 matmuls with w1's output reduce-scattered; and the
    rs_tensor form (one matmul while another tensor is reduce-scattered)."""
    shape = (2, 4)
    mesh = mesh_of(shape)
    sem = ttnn.create_global_semaphore(mesh, _crs(mesh), 0)
    x, xd = _input(mesh, (1, 1, 4, 6), seed=80)
    rng = np.random.default_rng(81)
    w1n, w3n = (rng.standard_normal((6, 8)).astype(np.float32) for _ in range(2))
    rep = ttnn.ReplicateTensorToMesh(mesh)
    w1, w3 = (ttnn.from_torch(w, device=mesh, mesh_mapper=rep) for w in (w1n, w3n))
    packet = ttnn.from_torch(np.zeros((1, 1, 4, 8), np.float32), device=mesh, mesh_mapper=rep)
    w1_out, w3_out, rs = ttnn.experimental.llama_rs_matmul(
        x,
        w1,
        packet,
        3,
        sem,
        1,
        mesh,
        1,
        ttnn.SubDeviceId(0),
        second_weight_tensor=w3,
        memory_config_rs=None,
        compute_kernel_config=None,
        dtype=ttnn.float32,
        program_config=None,
        memory_config_mm=None,
        global_cb=None,
        topology=ttnn.Topology.Linear,
        use_noc1_only=False,
    )
    mm1 = {c: v @ w1n for c, v in xd.items()}
    assert_close(per_device_output(w1_out), mm1, np.float32)
    assert_close(per_device_output(w3_out), {c: v @ w3n for c, v in xd.items()}, np.float32)
    assert_close(per_device_output(rs), ref_reduce_scatter(mm1, shape, 3, 1), np.float32)
    other, od = _input(mesh, (1, 1, 4, 8), seed=82)
    w3_out, rs = ttnn.experimental.llama_rs_matmul(
        x, w3, packet, 3, sem, 1, mesh, 1, ttnn.SubDeviceId(0), rs_tensor=other
    )
    assert_close(per_device_output(rs), ref_reduce_scatter(od, shape, 3, 1), np.float32)
    with pytest.raises(ttnn.CCLError, match="Exactly one of rs_tensor or second_weight_tensor"):
        ttnn.experimental.llama_rs_matmul(x, w1, packet, 3, sem, 1, mesh, 1, ttnn.SubDeviceId(0))


def test_reduce_scatter_minimal_async_native_and_composite_tiles():
    """Tile-aligned pieces go to TT-NN's native kernel, others (8 columns each) to its composite;
    the values are the same reduce-scatter."""
    mesh = mesh_of((1, 8))
    ccl = _TTCCL(mesh)
    rep = ttnn.ReplicateTensorToMesh(mesh)
    for width in (256, 64):
        t = ttnn.from_torch(
            np.ones((1, 1, 32, width), np.float32),
            device=mesh,
            mesh_mapper=rep,
            layout=ttnn.TILE_LAYOUT,
        )
        out = ttnn.experimental.reduce_scatter_minimal_async(t, None, 3, ccl.rs)
        np.testing.assert_array_equal(
            ttnn.to_numpy(ttnn.get_device_tensors(out)[3]), np.full((1, 1, 32, width // 8), 8.0)
        )


def test_fused_rms_updates_the_residual_in_place_and_normalizes_each_slice():
    """The Galaxy decoder's fused RMSNorm: res <- x + res, then RMSNorm of the full hidden dim
    (split over the 4 columns of a 2x4 mesh), each device keeping its slice."""
    mesh = mesh_of((2, 4))
    rng = np.random.default_rng(40)
    hidden, eps = 4 * 64, 1e-5
    x = rng.standard_normal((1, 1, 32, hidden)).astype(np.float32)
    r = rng.standard_normal((1, 1, 32, hidden)).astype(np.float32)
    g = (rng.random(hidden) + 0.5).astype(np.float32)
    cols = ttnn.ShardTensor2dMesh(mesh, mesh_shape=(2, 4), dims=(None, 3))

    def put(a, **kw):
        return ttnn.from_torch(a, device=mesh, mesh_mapper=cols, dtype=ttnn.float32, **kw)

    xt, rt = put(x, layout=ttnn.TILE_LAYOUT), put(r, layout=ttnn.TILE_LAYOUT)
    gt = ttnn.from_torch(g.reshape(1, 1, hidden // 32, 32), device=mesh, dtype=ttnn.float32,
                         layout=ttnn.ROW_MAJOR_LAYOUT,
                         mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(None, 2)))  # fmt: skip
    stats = ttnn.from_torch(np.zeros((1, 1, 32, 128), np.float32), device=mesh,
                            dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT)  # fmt: skip
    sem = ttnn.create_global_semaphore(
        mesh, ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 0))}), 0
    )
    out = ttnn.fused_rms_1_1_32_8192(xt, None, 1, mesh, sem, residual_input_tensor=rt,
                                     epsilon=eps, weight=gt, stats=stats)  # fmt: skip
    h = (x + r).astype(np.float64)
    want = h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * g
    for (_, c), got in device_arrays(out).items():
        np.testing.assert_allclose(got, want[..., c * 64 : (c + 1) * 64], rtol=2e-2, atol=2e-2)
    for (_, c), got in device_arrays(rt).items():
        np.testing.assert_allclose(got, h[..., c * 64 : (c + 1) * 64], rtol=1e-6, atol=1e-6)
    with pytest.raises(ttnn.CCLError, match="requires a weight which is row major"):
        ttnn.fused_rms_1_1_32_8192(xt, None, 1, mesh, sem, epsilon=eps)


def test_all_gather_concat_gathers_users_then_concatenates_heads():
    """The Galaxy attention output: 8 users x 8 heads of 128 per device, height-sharded on the
    kernel's 8 cores, gathered over the 4 columns and laid out [1, 1, 32, heads * 128]."""
    mesh = mesh_of((2, 4))
    rng = np.random.default_rng(41)
    x = rng.standard_normal((1, 32, 8, 128)).astype(np.float32)
    cores = ttnn.CoreRangeSet({
        ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 1)),
        ttnn.CoreRange(ttnn.CoreCoord(1, 2), ttnn.CoreCoord(2, 2)),
    })  # fmt: skip
    mc = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1,
                           ttnn.ShardSpec(cores, (32, 128), ttnn.ShardOrientation.ROW_MAJOR))  # fmt: skip
    xt = ttnn.from_torch(x, device=mesh, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT,
                         memory_config=mc,
                         mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(None, 1)))  # fmt: skip
    sem = ttnn.create_global_semaphore(mesh, cores, 0)
    out = ttnn.experimental.all_gather_concat(xt, xt, 1, cluster_axis=1, mesh_device=mesh,
                                              multi_device_global_semaphore=sem, num_heads=8,
                                              memory_config=ttnn.DRAM_MEMORY_CONFIG)  # fmt: skip
    want = x.reshape(1, 1, 32, 8 * 128)  # user b: its 8 heads side by side
    for got in device_arrays(out).values():
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    mc64 = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1,
                             ttnn.ShardSpec(cores, (32, 64), ttnn.ShardOrientation.ROW_MAJOR))  # fmt: skip
    narrow = ttnn.from_torch(x[:, :8, :, :64], device=mesh, dtype=ttnn.float32,
                             layout=ttnn.TILE_LAYOUT, memory_config=mc64)  # fmt: skip
    with pytest.raises(ttnn.CCLError, match="Unsupported input shape"):
        ttnn.experimental.all_gather_concat(narrow, xt, 1, cluster_axis=1, mesh_device=mesh,
                                            multi_device_global_semaphore=sem, num_heads=8,
                                            memory_config=ttnn.DRAM_MEMORY_CONFIG)  # fmt: skip
