"""Tensor factories on a mesh: the shape is per device and every device holds the same values."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _op_testing import Layout, device_arrays, mesh_of, put
from conftest import MESH_SHAPES

import ttjax as ttnn

SHAPE = (1, 2, 8, 32)
REPLICATED = (ttnn.PlacementReplicate(), ttnn.PlacementReplicate())


def _all_equal(t: ttnn.Tensor, want: np.ndarray, dtype=np.float64) -> None:
    arrays = device_arrays(t)
    assert len(arrays) == t.mesh_device.get_num_devices()
    for c, arr in arrays.items():
        assert arr.shape == want.shape, c
        np.testing.assert_array_equal(arr.astype(dtype), want.astype(dtype), err_msg=str(c))


@pytest.mark.parametrize(
    "dtype", [ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b], ids=["f32", "bf16", "bfp8"]
)
def test_zeros_ones_full_on_a_mesh(mesh, dtype):
    for t, value in [
        (ttnn.zeros(SHAPE, dtype=dtype, device=mesh), 0.0),
        (ttnn.ones(SHAPE, dtype, ttnn.TILE_LAYOUT, mesh), 1.0),
        (ttnn.full(SHAPE, 1.5, dtype=dtype, device=mesh), 1.5),
        (ttnn.full(list(SHAPE), -3.25, dtype=dtype, device=mesh), -3.25),
    ]:
        assert t.shape == SHAPE and t.dtype == dtype
        assert t.storage_type() == ttnn.StorageType.DEVICE and t.placements == REPLICATED
        if dtype.is_block_float:
            assert t.layout == ttnn.TILE_LAYOUT
        _all_equal(t, np.full(SHAPE, value))


def test_full_on_host_and_like_factories(t3000):
    host = ttnn.full((2, 3), 2.0, dtype=ttnn.float32)
    assert host.storage_type() == ttnn.StorageType.HOST and host.device() is None
    np.testing.assert_array_equal(ttnn.to_numpy(host), np.full((2, 3), 2.0, np.float32))
    x, _ = put(np.zeros((1, 1, 8, 64), np.float32), (2, 4), Layout("2d", (None, 3)))
    assert x.shape == (1, 1, 8, 16)
    for t, value in [
        (ttnn.zeros_like(x), 0.0),
        (ttnn.ones_like(x), 1.0),
        (ttnn.full_like(x, 7.0), 7.0),
        (ttnn.ones_like(x, dtype=ttnn.bfloat16), 1.0),
    ]:
        assert t.shape == x.shape and t.mesh_device is t3000
        _all_equal(t, np.full(x.shape, value))
    assert ttnn.ones_like(x, dtype=ttnn.bfloat16).dtype == ttnn.bfloat16
    assert ttnn.zeros_like(x).dtype == ttnn.float32


def test_rand_is_identical_everywhere():
    """rand gives the same values on every device, for every mesh shape, and on host."""
    shape = (1, 1, 16, 32)
    host = ttnn.to_numpy(ttnn.rand(shape, dtype=ttnn.float32, seed=7))
    assert host.shape == shape
    assert np.all((host >= 0.0) & (host < 1.0)) and host.std() > 0.1
    for mesh_shape in MESH_SHAPES:
        t = ttnn.rand(shape, dtype=ttnn.float32, device=mesh_of(mesh_shape), seed=7)
        assert t.shape == shape and t.placements == REPLICATED
        _all_equal(t, host, np.float32)
    other = ttnn.to_numpy(ttnn.rand(shape, dtype=ttnn.float32, seed=8))
    assert not np.array_equal(other, host)
    ranged = ttnn.rand(shape, dtype=ttnn.float32, device=mesh_of((2, 4)), low=-2.0, high=-1.0)
    for arr in device_arrays(ranged).values():
        assert np.all((arr >= -2.0) & (arr < -1.0))
    bf = ttnn.rand(shape, device=mesh_of((1, 2)), seed=7)
    assert bf.dtype == ttnn.bfloat16
    _all_equal(bf, host.astype(ml_dtypes.bfloat16), np.float32)


@pytest.mark.parametrize("mesh_shape", [(1, 1), (4, 8)], ids=["1x1", "4x8"])
def test_arange_on_a_mesh(mesh_shape):
    mesh = mesh_of(mesh_shape)
    t = ttnn.arange(3, 40, 4, dtype=ttnn.int32, device=mesh)
    assert t.dtype == ttnn.int32 and t.shape == (10,)
    _all_equal(t, np.arange(3, 40, 4), np.int64)
    t = ttnn.arange(5, dtype=ttnn.float32, device=mesh)
    _all_equal(t, np.arange(5.0))


def test_factories_reject_unknown_keywords(n300):
    """A misspelt keyword (here ``devcie=``) must not silently build a host tensor."""
    for make in [
        lambda: ttnn.zeros(SHAPE, devcie=n300),
        lambda: ttnn.ones(SHAPE, devcie=n300),
        lambda: ttnn.full(SHAPE, 1.0, devcie=n300),
        lambda: ttnn.rand(SHAPE, devcie=n300),
        lambda: ttnn.arange(4, devcie=n300),
        lambda: ttnn.empty(SHAPE, devcie=n300),
    ]:
        with pytest.raises(TypeError, match="devcie"):
            make()
    x = ttnn.zeros(SHAPE, device=n300, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    with pytest.raises(TypeError, match="dtpye"):
        ttnn.zeros_like(x, dtpye=ttnn.float32)
    # Hardware keywords are accepted.
    assert ttnn.ones_like(x, memory_config=ttnn.L1_MEMORY_CONFIG).shape == SHAPE
