"""``ttnn.Tensor(...)``'s own constructors (ttnn-pybind/pytensor.cpp), against torch / numpy:
``Tensor(torch_or_numpy, data_type, device, layout, ...)``, ``Tensor(data, shape, data_type,
layout, ...)`` and ``Tensor(other)``, as tt-metal's ``torch2tt_tensor`` and model code use them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _reference import blockfloat_quantize
from conftest import mesh_of

import ttjax as ttnn


@pytest.mark.parametrize(
    ("torch_dtype", "want"),
    [
        (torch.float32, ttnn.float32),
        (torch.float16, ttnn.bfloat16),
        (torch.bfloat16, ttnn.bfloat16),
        (torch.int64, ttnn.uint32),
        (torch.int32, ttnn.int32),
        (torch.int16, ttnn.uint16),
        (torch.uint8, ttnn.uint8),
    ],
)
def test_torch_tensor_takes_tt_nns_type_for_its_dtype(torch_dtype, want):
    x = (torch.arange(12).reshape(3, 4) * 3 - 5).to(torch_dtype)
    t = ttnn.Tensor(x)
    assert (t.dtype, t.layout, t.storage_type()) == (
        want,
        ttnn.ROW_MAJOR_LAYOUT,
        ttnn.StorageType.HOST,
    )
    # the array's bytes, cast as torch's .to() casts them, read as the TT-NN type
    # (TT-NN's to_torch gives uint16 / uint32 back as int16 / int32)
    ref = x.to({ttnn.uint32: torch.int32, ttnn.bfloat16: torch.bfloat16}.get(want, torch_dtype))
    assert torch.equal(ttnn.to_torch(t).view(ref.dtype), ref)


def test_negative_int64_wraps_into_uint32_as_tt_nn_reads_its_bytes():
    t = ttnn.Tensor(torch.tensor([-1, 7]))
    assert t.dtype is ttnn.uint32
    np.testing.assert_array_equal(ttnn.to_numpy(t), np.array([-1, 7]).astype(np.uint32))


def test_given_data_type_converts_as_torch_does():
    x = torch.tensor([[2.7, -2.7, 1.0 / 3.0, 1e-3]])
    bf = ttnn.Tensor(x, ttnn.bfloat16)
    assert bf.dtype is ttnn.bfloat16 and bf.layout is ttnn.ROW_MAJOR_LAYOUT
    assert torch.equal(ttnn.to_torch(bf), x.to(torch.bfloat16))
    ints = ttnn.Tensor(x, ttnn.int32)
    np.testing.assert_array_equal(ttnn.to_numpy(ints), x.to(torch.int32).numpy())


@pytest.mark.parametrize(("dtype", "bits"), [(ttnn.bfloat8_b, 7), (ttnn.bfloat4_b, 3)])
def test_block_float_is_tiled_and_quantized(dtype, bits):
    x = torch.randn(1, 1, 40, 48, generator=torch.Generator().manual_seed(0))
    t = ttnn.Tensor(x, dtype)
    assert (t.dtype, t.layout, tuple(t.shape)) == (dtype, ttnn.TILE_LAYOUT, (1, 1, 40, 48))
    got = ttnn.to_numpy(t).astype(np.float64)
    np.testing.assert_array_equal(got, blockfloat_quantize(x.numpy(), bits))
    with pytest.raises(ttnn.TTJaxError, match="Tile layout is required"):
        ttnn.Tensor(x, dtype, None, ttnn.ROW_MAJOR_LAYOUT)


def test_numpy_array_follows_tt_nns_numpy_path():
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    t = ttnn.Tensor(x)
    assert t.dtype is ttnn.float32
    np.testing.assert_array_equal(ttnn.to_numpy(t), x)
    assert ttnn.Tensor(np.arange(3)).dtype is ttnn.uint32
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.Tensor(x.astype(np.float64), ttnn.float32)), x)
    with pytest.raises(ttnn.UnsupportedDTypeError, match=r"torch\.from_numpy"):
        ttnn.Tensor(x, ttnn.bfloat16)  # TT-NN's numpy path has no bfloat16
    with pytest.raises(ttnn.UnsupportedDTypeError, match="float64"):
        ttnn.Tensor(x.astype(np.float64))
    with pytest.raises(ttnn.UnsupportedDTypeError, match=r"torch\.float64"):
        ttnn.Tensor(torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ttnn.TTJaxError, match=r"torch\.Tensor or numpy\.ndarray"):
        ttnn.Tensor("abc")


def test_torch2tt_tensor_path_to_a_device_and_back():
    """tt-metal's ``torch2tt_tensor``: Tensor(x, dtype).to(TILE).to(device, mem_config)."""
    mesh = mesh_of((1, 2))
    x = torch.randn(1, 1, 32, 64, generator=torch.Generator().manual_seed(1))
    mem = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.INTERLEAVED)
    t = ttnn.Tensor(x, ttnn.bfloat16).to(ttnn.TILE_LAYOUT).to(mesh, mem)
    assert t.storage_type() is ttnn.StorageType.DEVICE and t.layout is ttnn.TILE_LAYOUT
    for part in ttnn.get_device_tensors(t):  # replicated on both devices
        assert torch.equal(ttnn.to_torch(part), x.to(torch.bfloat16))
    sharded = ttnn.Tensor(x, ttnn.float32, mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    for part, want in zip(ttnn.get_device_tensors(sharded), torch.chunk(x, 2, dim=3)):
        assert torch.equal(ttnn.to_torch(part), want)


def test_flat_list_with_shape_type_and_layout():
    ints = ttnn.Tensor([1, 2, 3, 4], [1, 1, 2, 2], ttnn.int32, ttnn.ROW_MAJOR_LAYOUT)
    assert (ints.dtype, tuple(ints.shape)) == (ttnn.int32, (1, 1, 2, 2))
    np.testing.assert_array_equal(ttnn.to_numpy(ints), np.arange(1, 5).reshape(1, 1, 2, 2))
    vals = [0.1, -2.5, 3.0, 1.0 / 3.0, 7.0, 1e-4]
    bf = ttnn.Tensor(vals, [2, 3], ttnn.bfloat16, ttnn.TILE_LAYOUT)
    assert bf.layout is ttnn.TILE_LAYOUT and bf.storage_type() is ttnn.StorageType.HOST
    assert torch.equal(ttnn.to_torch(bf), torch.tensor(vals).reshape(2, 3).to(torch.bfloat16))
    mesh = mesh_of((1, 2))
    on = ttnn.Tensor(
        vals, [2, 3], ttnn.float32, ttnn.ROW_MAJOR_LAYOUT, mesh, ttnn.DRAM_MEMORY_CONFIG
    )
    assert on.storage_type() is ttnn.StorageType.DEVICE
    for part in ttnn.get_device_tensors(on):
        np.testing.assert_array_equal(ttnn.to_numpy(part), np.float32(vals).reshape(2, 3))
    with pytest.raises(
        ttnn.ShapeMismatchError, match="buffer size is 4 different from shape volume 6"
    ):
        ttnn.Tensor([1.0, 2.0, 3.0, 4.0], [2, 3], ttnn.float32, ttnn.ROW_MAJOR_LAYOUT)
    with pytest.raises(ttnn.TTJaxError, match="only supported in TILE layout"):
        ttnn.Tensor([1.0] * 4, [2, 2], ttnn.bfloat8_b, ttnn.ROW_MAJOR_LAYOUT)


def test_tensor_of_a_tensor_shares_its_data():
    t = ttnn.Tensor(torch.ones(2, 2), ttnn.bfloat16)
    u = ttnn.Tensor(t)
    assert u is not t and u.spec == t.spec and u._data is t._data


def test_volume_is_physical_and_logical_volume_is_not():
    t = ttnn.Tensor(torch.zeros(1, 1, 8, 40), ttnn.bfloat16).to(ttnn.TILE_LAYOUT)
    assert t.volume() == 32 * 64 and t.logical_volume() == 8 * 40
    assert ttnn.Tensor(torch.zeros(3, 5)).volume() == 15  # row-major: no padding


def test_block_float_host_tensor_stays_tiled_as_tt_nn_leaves_it(caplog):
    """TT-NN's ``to_layout_bfloat``: ROW_MAJOR is not executed for bfloat8_b; a warning says so."""
    x = torch.randn(1, 1, 32, 32, generator=torch.Generator().manual_seed(2))
    t = ttnn.Tensor(x, ttnn.bfloat8_b)
    with caplog.at_level("WARNING"):
        back = t.cpu().to(ttnn.ROW_MAJOR_LAYOUT)
    assert back.layout is ttnn.TILE_LAYOUT and "was not executed" in caplog.text
    np.testing.assert_array_equal(
        back.to_torch().float().numpy(), blockfloat_quantize(x.numpy(), 7)
    )


def test_to_layout_of_a_host_tensor_changes_layout_on_the_host():
    """``ttnn.to_layout`` of a host tensor split over a mesh (whisper's decoder test tilizes its
    encoder states so before ``to_device``): TT-NN converts it on the host (``to_layout_op.cpp``),
    values unchanged; a dtype change is refused there."""
    mesh = mesh_of((1, 2))
    x = torch.randn(2, 40, 48, generator=torch.Generator().manual_seed(3))
    host = ttnn.from_torch(x, dtype=ttnn.bfloat16, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    tiled = ttnn.to_layout(host, ttnn.TILE_LAYOUT)
    assert tiled.layout is ttnn.TILE_LAYOUT and tiled.storage_type() is ttnn.StorageType.HOST
    on_device = ttnn.to_device(tiled, mesh)
    back = ttnn.to_torch(on_device, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))
    np.testing.assert_array_equal(back.float().numpy(), x.bfloat16().float().numpy())
    with pytest.raises(ttnn.LayoutError, match="dtype cannot be specified"):
        ttnn.to_layout(host, ttnn.TILE_LAYOUT, dtype=ttnn.float32)


def test_slicing_a_host_tensor_slices_every_shard_on_the_host():
    """``host[a:b, :, :]`` of a replicated host weight (whisper splits its conv weight so before
    the conv): each device's piece, as TT-NN's ``__getitem__`` unpads host shards; non-unit
    steps are refused as there."""
    mesh = mesh_of((1, 2))
    w = torch.randn(8, 6, 3, generator=torch.Generator().manual_seed(4))
    host = ttnn.from_torch(w, dtype=ttnn.float32, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))
    piece = host[2:6, :, :]
    assert piece.storage_type() is ttnn.StorageType.HOST and tuple(piece.shape) == (4, 6, 3)
    for got in ttnn.get_device_tensors(piece):
        np.testing.assert_array_equal(ttnn.to_torch(got).numpy(), w[2:6].numpy())
    split = ttnn.from_torch(w, dtype=ttnn.float32, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    rows = split[1, :, 1:]
    for d, got in enumerate(ttnn.get_device_tensors(rows)):
        np.testing.assert_array_equal(ttnn.to_torch(got).numpy(), w[4 * d + 1, :, 1:].numpy())
    with pytest.raises(ttnn.ShapeMismatchError, match="non-unit stride"):
        host[0:8:2]
