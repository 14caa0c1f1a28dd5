"""``ttnn.experimental.*_async`` collectives called the way tt-metal's model code calls them, against
a per-device numpy reference on 1x8 and 2x4 meshes; persistent buffers; the hardware arguments'
checks (semaphore mesh and count, sub-device ids, dims); and the sub-device host objects."""

from __future__ import annotations

import numpy as np
import pytest
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


def _skip_single(shape, axis):
    if _group(shape, axis) == 1:
        pytest.skip("a group of one device: TT-NN's async CCLs refuse it (tested below)")


# ---------------------------------------------------------------------------------------------
# Values, in the model code's call shapes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("axis", AXES)
def test_all_gather_async_tt_transformers_form(shape, axis):
    _skip_single(shape, axis)
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


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("axis", AXES)
def test_reduce_scatter_minimal_async_mlp_form(shape, axis):
    _skip_single(shape, axis)
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


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("axis", [0, 1])
def test_all_reduce_async_forms(shape, axis):
    _skip_single(shape, axis)
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
    t, _ = _input(mesh, (1, 1, 2, 8))
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
        ({"topology": ttnn.Topology.Mesh}, r"topology must be Ring or Linear"),
    ],
)
def test_bad_arguments(kw, match):
    mesh = mesh_of((2, 4))
    t, _ = _input(mesh, (1, 1, 2, 8))
    with pytest.raises(ttnn.CCLError, match=match + r"(?s:.*)fix:"):
        _ag(t, _TTCCL(mesh).ag, **kw)


def test_reduce_scatter_dims_and_single_device_group():
    mesh = mesh_of((1, 8))
    ccl = _TTCCL(mesh)
    t, _ = _input(mesh, (8, 1, 2, 8))
    with pytest.raises(ttnn.CCLError, match=r"only supports scattering on dim 1, 2, 3"):
        ttnn.experimental.reduce_scatter_minimal_async(
            t, persistent_output_buffers=None, dim=0, multi_device_global_semaphore=ccl.rs
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
