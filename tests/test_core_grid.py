"""Each chip's worker grid follows the system and the dispatch cores, from TT-Metal's core
descriptors (tt_metal/core_descriptors/wormhole_b0_80_arch*.yaml, blackhole_140_arch*.yaml):
a Galaxy opened with dispatch on a column has 7x10 worker cores, and sub-devices, global
semaphores and prefetcher CBs are placed against it."""

from __future__ import annotations

import pytest

import ttjax as ttnn
from ttjax.hardware import worker_grid_size

W, E = ttnn.DispatchCoreType.WORKER, ttnn.DispatchCoreType.ETH
ROW, COL = ttnn.DispatchCoreAxis.ROW, ttnn.DispatchCoreAxis.COL


@pytest.mark.parametrize(
    "arch,product,kind,axis,xy",
    [
        # compute_with_storage_grid_range "end" + 1 in each descriptor
        ("wormhole_b0", "galaxy", W, ROW, (8, 9)),
        ("wormhole_b0", "galaxy", W, COL, (7, 10)),
        ("wormhole_b0", "galaxy", E, ROW, (8, 10)),
        ("wormhole_b0", "nebula_x1", W, ROW, (8, 8)),
        ("wormhole_b0", "nebula_x1", W, COL, (7, 9)),
        ("wormhole_b0", "nebula_x2", W, ROW, (8, 7)),
        ("wormhole_b0", "nebula_x2", W, COL, (7, 8)),
        ("wormhole_b0", "nebula_x2", E, ROW, (8, 8)),
        ("blackhole", "unharvested", W, COL, (13, 10)),
        ("blackhole", "2xharvested", E, COL, (12, 10)),
    ],
)
def test_worker_grid_from_core_descriptors(arch, product, kind, axis, xy):
    assert worker_grid_size(arch, product, kind, axis) == ttnn.CoreCoord(*xy)


def test_a_dispatch_without_a_descriptor_is_refused():
    with pytest.raises(ttnn.MemoryConfigError, match="no core descriptor for dispatch"):
        worker_grid_size("blackhole", "unharvested", W, ROW)


def _crs(x0, y0, x1, y1):
    return ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(x0, y0), ttnn.CoreCoord(x1, y1))})


def test_galaxy_with_column_dispatch_has_7x10_workers():
    cfg = ttnn.DispatchCoreConfig(axis=ttnn.DispatchCoreAxis.COL)  # as its tests' device_params
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(8, 4), dispatch_core_config=cfg)
    try:
        assert mesh.compute_with_storage_grid_size() == ttnn.CoreCoord(7, 10)
        assert mesh.core_grid == ttnn.CoreGrid(y=10, x=7)
        sub = mesh.create_submesh(ttnn.MeshShape(2, 2))
        assert sub.compute_with_storage_grid_size() == ttnn.CoreCoord(7, 10)
        # Llama-70B Galaxy places sub-devices and prefetcher cores up to (6, 9).
        manager = mesh.create_sub_device_manager([ttnn.SubDevice([_crs(0, 0, 6, 9)])], 0)
        mesh.load_sub_device_manager(manager)
        mesh.clear_loaded_sub_device_manager()
        mapping = [(ttnn.CoreCoord(6, 9), _crs(0, 9, 1, 9))]
        ttnn.create_global_circular_buffer(mesh, mapping, 2048)
        with pytest.raises(ttnn.SubDeviceError, match=r"within device grid CoreCoord\(x=7, y=10\)"):
            ttnn.create_global_semaphore(mesh, _crs(0, 0, 7, 0), 0)
    finally:
        ttnn.close_mesh_device(mesh)


def test_default_grids_follow_the_system():
    galaxy = ttnn.open_mesh_device(ttnn.MeshShape(8, 4))  # WORKER dispatch on the last row
    t3k = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))  # ETH dispatch: the full 8x8
    n150 = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    worker = ttnn.open_mesh_device(
        ttnn.MeshShape(2, 4), dispatch_core_config=ttnn.DispatchCoreConfig(W)
    )
    try:
        assert galaxy.compute_with_storage_grid_size() == ttnn.CoreCoord(8, 9)
        assert t3k.compute_with_storage_grid_size() == ttnn.CoreCoord(8, 8)
        assert n150.compute_with_storage_grid_size() == ttnn.CoreCoord(8, 8)
        assert worker.compute_with_storage_grid_size() == ttnn.CoreCoord(8, 7)
        with pytest.raises(ttnn.SubDeviceError, match="within device grid"):
            ttnn.create_global_semaphore(t3k, _crs(0, 0, 6, 9), 0)
    finally:
        for m in (galaxy, t3k, n150, worker):
            ttnn.close_mesh_device(m)
