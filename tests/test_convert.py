"""Host <-> device conversion: from_torch/to_torch with torch, numpy and JAX inputs; dtypes,
layouts, host tensors, per-device views and persistent buffers."""

from __future__ import annotations

import os
import subprocess
import sys

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from _reference import coords, shard, shard_1d, tile_padded
from conftest import mesh_of

import ttjax as ttnn

# ---------------------------------------------------------------------------------------------
# Inputs and dtypes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("torch_dtype", "ttnn_dtype"),
    [
        (torch.float32, ttnn.float32),
        (torch.bfloat16, ttnn.bfloat16),
        (torch.int32, ttnn.int32),
        (torch.uint8, ttnn.uint8),
    ],
    ids=["float32", "bfloat16", "int32", "uint8"],
)
@pytest.mark.parametrize("mesh_shape", [(1, 1), (2, 4)], ids=["1x1", "2x4"])
def test_torch_round_trip_is_exact(torch_dtype, ttnn_dtype, mesh_shape):
    mesh = mesh_of(mesh_shape)
    gen = torch.Generator().manual_seed(0)
    if torch_dtype.is_floating_point:
        x = (torch.randn(2, 8, 8, generator=gen) * 1000).to(torch_dtype)
    else:
        x = torch.randint(0, 200, (2, 8, 8), generator=gen).to(torch_dtype)
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1))
    assert t.dtype == ttnn_dtype  # dtype=None keeps the torch dtype
    back = ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1))
    assert isinstance(back, torch.Tensor)
    assert back.dtype == torch_dtype
    assert torch.equal(back, x)


def test_numpy_and_jax_inputs():
    mesh = mesh_of((1, 2))
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    for src in (x, jnp.asarray(x), x.astype(ml_dtypes.bfloat16), [[1.0, 2.0], [3.0, 4.0]]):
        t = ttnn.from_torch(
            src, dtype=ttnn.float32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 0)
        )
        out = ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, 0))
        np.testing.assert_array_equal(out, np.asarray(src, np.float32))
    assert ttnn.from_torch(x.astype(np.uint32)).dtype == ttnn.uint32
    assert ttnn.from_torch(jnp.ones((2,), jnp.bfloat16)).dtype == ttnn.bfloat16
    assert ttnn.from_torch(None) is None


def test_explicit_dtype_casts():
    x = torch.tensor([[1.5, -2.25, 3.0]], dtype=torch.float32)
    t = ttnn.from_torch(x, dtype=ttnn.bfloat16)
    assert t.dtype == ttnn.bfloat16
    back = ttnn.to_torch(t)
    assert back.dtype == torch.bfloat16
    assert torch.equal(back, x.to(torch.bfloat16))
    assert torch.equal(ttnn.to_torch(t, dtype=torch.float32), x)
    i = ttnn.from_torch(torch.tensor([[1, -2]], dtype=torch.int64))
    assert i.dtype == ttnn.int32


@pytest.mark.parametrize(
    "src",
    [
        np.zeros((2, 2), np.float64),
        torch.zeros(2, 2, dtype=torch.float64),
        np.zeros(2, np.complex64),
        np.zeros(2, bool),
    ],
    ids=["numpy-f64", "torch-f64", "complex", "bool"],
)
def test_unsupported_dtype_without_dtype_raises(src):
    with pytest.raises(ttnn.UnsupportedDTypeError) as info:
        ttnn.from_torch(src)
    msg = str(info.value)
    assert str(np.asarray(src).dtype) in msg or "float64" in msg
    assert "fix:" in msg
    assert isinstance(info.value, TypeError)


def test_float64_with_explicit_dtype_is_fine():
    t = ttnn.from_torch(np.array([[0.5, 1.5]]), dtype=ttnn.float32)
    np.testing.assert_array_equal(ttnn.to_numpy(t), np.array([[0.5, 1.5]], np.float32))


def test_bad_dtype_object_raises():
    with pytest.raises(
        ttnn.UnsupportedDTypeError, match=r"dtype='float32' is not a ttnn DataType"
    ) as info:
        ttnn.from_torch(np.zeros(2, np.float32), dtype="float32")
    assert "fix:" in str(info.value)


def test_int64_out_of_int32_range_raises():
    with pytest.raises(ttnn.UnsupportedDTypeError, match="int32") as info:
        ttnn.from_torch(np.array([2**40]))
    assert "fix:" in str(info.value)


# ---------------------------------------------------------------------------------------------
# Layouts and padding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [ttnn.bfloat8_b, ttnn.bfloat4_b], ids=["bfloat8_b", "bfloat4_b"])
def test_block_float_requires_tile_layout(dtype):
    x = torch.zeros(32, 32)
    assert ttnn.from_torch(x, dtype=dtype).layout == ttnn.TILE_LAYOUT
    assert ttnn.from_torch(x, dtype=dtype, layout=ttnn.TILE_LAYOUT).layout == ttnn.TILE_LAYOUT
    with pytest.raises(
        ttnn.LayoutError,
        match=rf"^Tile layout is required for tensor of type {dtype.value}; got Layout::ROW_MAJOR\.",
    ) as info:
        ttnn.from_torch(x, dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT)
    assert "fix:" in str(info.value)


@pytest.mark.parametrize(
    ("shape", "layout"),
    [
        ((2, 40, 33), ttnn.TILE_LAYOUT),
        ((1, 1, 32, 64), ttnn.TILE_LAYOUT),
        ((5,), ttnn.TILE_LAYOUT),
        ((2, 40, 33), ttnn.ROW_MAJOR_LAYOUT),
    ],
)
def test_padded_shape(shape, layout):
    t = ttnn.from_torch(np.zeros(shape, np.float32), layout=layout)
    assert t.shape == ttnn.Shape(shape)
    expect = tile_padded(shape) if layout == ttnn.TILE_LAYOUT else shape
    assert t.padded_shape == ttnn.Shape(expect)
    assert ttnn.from_torch(np.zeros(shape, np.float32)).layout == ttnn.ROW_MAJOR_LAYOUT


def test_padded_shape_is_per_device():
    mesh = mesh_of((1, 2))
    x = np.zeros((2, 40, 66), np.float32)
    t = ttnn.from_torch(
        x, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 2)
    )
    assert t.shape == ttnn.Shape([2, 40, 33])
    assert t.padded_shape == ttnn.Shape(tile_padded((2, 40, 33)))  # [2, 64, 64], not [2, 64, 96]


# ---------------------------------------------------------------------------------------------
# Reading back needs a composer for more than one shard
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mapper_kind", ["shard", "replicate", "none"])
def test_to_torch_multi_device_needs_composer(mapper_kind):
    mesh = mesh_of((1, 2))
    x = torch.ones(2, 4)
    mapper = {
        "shard": ttnn.ShardTensorToMesh(mesh, dim=0),
        "replicate": ttnn.ReplicateTensorToMesh(mesh),
        "none": None,
    }[mapper_kind]
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=mapper)
    with pytest.raises(RuntimeError, match="Supply a mesh composer") as info:
        ttnn.to_torch(t)
    msg = str(info.value)
    assert msg.startswith(
        "Can't convert a tensor distributed on MeshShape([1, 2]) mesh to row-major logical tensor."
    )
    assert "fix:" in msg
    assert isinstance(info.value, ttnn.ComposerRequiredError)
    with pytest.raises(RuntimeError, match="Supply a mesh composer"):
        ttnn.to_numpy(ttnn.from_device(t))


def test_to_torch_single_device_needs_no_composer():
    dev = mesh_of((1, 1))
    x = torch.arange(12, dtype=torch.float32).reshape(1, 3, 4)
    t = ttnn.from_torch(x, device=dev)
    assert torch.equal(ttnn.to_torch(t), x)
    # A shard from get_device_tensors converts without a composer too.
    mesh = mesh_of((1, 2))
    s = ttnn.get_device_tensors(
        ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 2))
    )
    assert torch.equal(ttnn.to_torch(s[1]), x[..., 2:])


def test_torch_rank_squeezes_leading_ones():
    dev = mesh_of((1, 1))
    x = torch.arange(6, dtype=torch.float32).reshape(1, 1, 2, 3)
    t = ttnn.from_torch(x, device=dev)
    assert ttnn.to_torch(t, torch_rank=2).shape == (2, 3)
    assert ttnn.to_torch(t, torch_rank=3).shape == (1, 2, 3)
    assert torch.equal(ttnn.to_torch(t, torch_rank=2), x[0, 0])
    with pytest.raises(RuntimeError, match=r"^ttnn: Unable to squeeze to desired rank!"):
        ttnn.to_torch(t, torch_rank=1)


# ---------------------------------------------------------------------------------------------
# Host tensors, to_device / from_device
# ---------------------------------------------------------------------------------------------


def test_host_tensor_then_to_device_and_back():
    mesh = mesh_of((2, 4))
    x = np.arange(2 * 8 * 3, dtype=np.float32).reshape(2, 8, 3)
    mapper = ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0, 1))
    host = ttnn.from_torch(x, mesh_mapper=mapper)
    assert host.storage_type() == ttnn.StorageType.HOST
    assert host.device() is None
    assert host.shape == ttnn.Shape([1, 2, 3])
    ref = shard(x, (2, 4), [0, 1])
    dev = ttnn.to_device(host, mesh)
    assert dev.storage_type() == ttnn.StorageType.DEVICE
    assert dev.device() is mesh
    assert dev.shape == host.shape and dev.placements == host.placements
    assert ttnn.to_device(dev, mesh) is dev  # already there
    for k, c in enumerate(coords((2, 4))):
        np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(dev)[k]), ref[c])
    back = ttnn.from_device(dev)
    assert back.storage_type() == ttnn.StorageType.HOST
    composer = ttnn.ConcatMesh2dToTensor(mesh, (2, 4), dims=(0, 1))
    np.testing.assert_array_equal(ttnn.to_numpy(back, mesh_composer=composer), x)
    np.testing.assert_array_equal(ttnn.to_numpy(dev.cpu(), mesh_composer=composer), x)
    # the binding's Tensor.to(device, mem_config, cq_id), positionally too
    back_again = back.to(mesh, ttnn.L1_MEMORY_CONFIG, 0)
    assert back_again.memory_config() == ttnn.L1_MEMORY_CONFIG
    for k, c in enumerate(coords((2, 4))):
        np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(back_again)[k]), ref[c])
    # TT-NN's binding takes the queue to read through (gpt_oss's model.py: cpu(blocking=True, cq_id=0))
    read = dev.cpu(blocking=True, cq_id=0)
    assert read.storage_type() == ttnn.StorageType.HOST
    for k, c in enumerate(coords((2, 4))):
        np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(read)[k]), ref[c])


def test_plain_host_tensor_to_device_replicates():
    mesh = mesh_of((1, 2))
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    host = ttnn.from_torch(x)
    assert host.mesh_device is None
    np.testing.assert_array_equal(ttnn.to_numpy(host), x)
    dev = host.to(mesh)
    assert dev.shape == ttnn.Shape([2, 3])
    for s in ttnn.get_device_tensors(dev):
        np.testing.assert_array_equal(ttnn.to_numpy(s), x)


def test_to_device_on_other_mesh_raises():
    a, b = mesh_of((1, 2)), mesh_of((2, 4))
    t = ttnn.from_torch(np.zeros((2, 2), np.float32), device=a)
    with pytest.raises(ttnn.MeshMismatchError) as info:
        ttnn.to_device(t, b)
    assert "fix:" in str(info.value)
    host = ttnn.from_torch(np.zeros((8, 2), np.float32), mesh_mapper=ttnn.ShardTensorToMesh(b, 0))
    with pytest.raises(ttnn.MeshMismatchError, match="distributed for"):
        ttnn.to_device(host, a)


# ---------------------------------------------------------------------------------------------
# Per-device views
# ---------------------------------------------------------------------------------------------


def test_combine_device_tensors_inverts_get_device_tensors():
    mesh = mesh_of((2, 4))
    x = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 0))
    shards = ttnn.get_device_tensors(t)
    combined = ttnn.combine_device_tensors(tensors=shards)
    assert combined.shape == t.shape
    assert combined.mesh_device is mesh
    composer = ttnn.ConcatMeshToTensor(mesh, dim=0)
    np.testing.assert_array_equal(ttnn.to_numpy(combined, mesh_composer=composer), x)
    again = ttnn.get_device_tensors(combined)
    ref = shard_1d(x, (2, 4), 0)
    for k, c in enumerate(coords((2, 4))):
        np.testing.assert_array_equal(ttnn.to_numpy(again[k]), ref[c])
    assert ttnn.aggregate_as_tensor(shards).shape == t.shape
    # Modified shards: each device's new values land on that device.
    twice = [ttnn.from_torch(2 * ttnn.to_numpy(s), device=s.device()) for s in shards]
    out = ttnn.to_numpy(ttnn.combine_device_tensors(tensors=twice), mesh_composer=composer)
    np.testing.assert_array_equal(out, 2 * x)


def test_combine_device_tensors_of_one_column_stays_on_that_column():
    """TT-NN keeps a tensor combined from some devices' tensors on those coordinates only (the
    Galaxy attention's prefill combines one mesh column's k/v): ttjax holds it on that block."""
    mesh = mesh_of((8, 4))
    x = np.arange(32 * 2 * 3, dtype=np.float32).reshape(32 * 2, 3)
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 0))
    col = ttnn.combine_device_tensors(ttnn.get_device_tensors(t)[2::4])
    assert tuple(col.mesh_device.shape) == (8, 1)
    assert col.mesh_device.get_device_ids() == mesh.get_device_ids()[2::4]
    ref = shard_1d(x, (8, 4), 0)
    parts = ttnn.get_device_tensors(col)
    for r in range(8):
        np.testing.assert_array_equal(ttnn.to_numpy(parts[r]), ref[(r, 2)])
    block = ttnn.combine_device_tensors(ttnn.get_device_tensors(t)[:4])  # row 0
    assert tuple(block.mesh_device.shape) == (1, 4)


def test_combine_device_tensors_errors():
    mesh = mesh_of((1, 2))
    t = ttnn.from_torch(
        np.zeros((2, 2), np.float32), device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 0)
    )
    shards = ttnn.get_device_tensors(t)
    wide = ttnn.get_device_tensors(
        ttnn.from_torch(np.zeros((8, 2), np.float32), device=mesh_of((2, 4)))
    )
    with pytest.raises(
        ttnn.ShapeMismatchError, match="ND composition requires the number of tensors 2"
    ) as diagonal:
        ttnn.combine_device_tensors(tensors=[wide[0], wide[5]])  # (0, 0) and (1, 1): no block
    assert "fix:" in str(diagonal.value)
    with pytest.raises(ttnn.MeshMismatchError, match="fix:"):
        ttnn.combine_device_tensors(tensors=[ttnn.from_torch(np.zeros((1, 2), np.float32))] * 2)
    with pytest.raises(ttnn.MeshMismatchError, match=r"device id\(s\) \[0\]") as info:
        ttnn.combine_device_tensors(tensors=[shards[0], shards[0]])
    assert "fix:" in str(info.value)


# ---------------------------------------------------------------------------------------------
# Persistent buffers
# ---------------------------------------------------------------------------------------------


def test_allocate_then_copy_host_to_device_tensor():
    mesh = mesh_of((2, 4))
    dev = ttnn.allocate_tensor_on_device(
        ttnn.Shape([1, 2, 3]), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT, mesh
    )
    assert dev.shape == ttnn.Shape([1, 2, 3])  # that shape on every device
    assert dev.storage_type() == ttnn.StorageType.DEVICE
    assert len(ttnn.get_device_tensors(dev)) == 8
    x = np.arange(2 * 8 * 3, dtype=np.float32).reshape(2, 8, 3)
    host = ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0, 1)))
    assert ttnn.copy_host_to_device_tensor(host, dev) is None
    ref = shard(x, (2, 4), [0, 1])
    for k, c in enumerate(coords((2, 4))):
        np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(dev)[k]), ref[c])
    # A second copy overwrites the same tensor object.
    ttnn.copy_host_to_device_tensor(
        ttnn.from_torch(-x, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0, 1))), dev
    )
    composer = ttnn.ConcatMesh2dToTensor(mesh, (2, 4), dims=(0, 1))
    np.testing.assert_array_equal(ttnn.to_numpy(dev, mesh_composer=composer), -x)


def test_copy_host_to_device_tensor_mismatch():
    mesh = mesh_of((1, 2))
    dev = ttnn.allocate_tensor_on_device(
        ttnn.Shape([2, 3]), ttnn.float32, ttnn.ROW_MAJOR_LAYOUT, mesh
    )
    with pytest.raises(
        ttnn.ShapeMismatchError, match=r"shape Shape\(\[2, 4\]\) vs Shape\(\[2, 3\]\)"
    ) as info:
        ttnn.copy_host_to_device_tensor(ttnn.from_torch(np.zeros((2, 4), np.float32)), dev)
    assert "fix:" in str(info.value)
    with pytest.raises(
        ttnn.ShapeMismatchError, match=r"dtype DataType::INT32 vs DataType::FLOAT32"
    ):
        ttnn.copy_host_to_device_tensor(ttnn.from_torch(np.zeros((2, 3), np.int32)), dev)


@pytest.mark.parametrize(
    ("values", "dtype", "bad"),
    [
        ([2**40 + 5], ttnn.uint32, "1099511627781"),
        ([-1], ttnn.uint32, "-1"),
        ([300], ttnn.uint8, "300"),
        ([70000], ttnn.uint16, "70000"),
        ([2**31], ttnn.int32, "2147483648"),
        ([-1.5], ttnn.uint32, "-1.5"),
    ],
)
def test_out_of_range_integers_are_refused_not_wrapped(values, dtype, bad):
    info = np.iinfo(dtype.numpy_dtype)
    with pytest.raises(
        ttnn.UnsupportedDTypeError, match=rf"value {bad} .*\[{info.min}, {info.max}\]"
    ):
        ttnn.from_torch(np.array(values), dtype=dtype)
    with pytest.raises(ttnn.UnsupportedDTypeError, match="wrap_integers=True"):
        ttnn.from_torch(torch.tensor(values), dtype=dtype, device=mesh_of((1, 2)))


def test_wrapping_is_explicit_and_in_range_values_pass():
    wrapped = ttnn.from_torch(np.array([2**40 + 5, -1]), dtype=ttnn.uint32, wrap_integers=True)
    np.testing.assert_array_equal(ttnn.to_numpy(wrapped), np.array([5, 2**32 - 1], np.uint32))
    edge = np.array([0, 2**32 - 1])
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.from_torch(edge, dtype=ttnn.uint32)), edge)


def test_to_dtype_converts_a_host_tensor_as_from_torch_would():
    """ttnn.to_dtype (host only): the same values as from_torch straight to that dtype, block
    floats quantized per device shard and tiled; Tensor.to(layout) then changes the layout."""
    mesh = mesh_of((1, 4))
    x = torch.randn(64, 128)
    mapper = ttnn.ShardTensorToMesh(mesh, dim=1)
    host = ttnn.from_torch(x, layout=ttnn.ROW_MAJOR_LAYOUT, mesh_mapper=mapper)
    got = ttnn.to_dtype(host, ttnn.bfloat8_b)
    assert (got.dtype, got.layout) == (ttnn.bfloat8_b, ttnn.TILE_LAYOUT)
    want = ttnn.from_torch(x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, mesh_mapper=mapper)
    composer = ttnn.ConcatMeshToTensor(mesh, dim=1)
    np.testing.assert_array_equal(
        ttnn.to_torch(ttnn.to_device(got, mesh), mesh_composer=composer).float().numpy(),
        ttnn.to_torch(ttnn.to_device(want, mesh), mesh_composer=composer).float().numpy(),
    )
    b16 = ttnn.to_dtype(host, ttnn.bfloat16).to(target_layout=ttnn.TILE_LAYOUT)  # binding's name
    assert (b16.dtype, b16.layout) == (ttnn.bfloat16, ttnn.TILE_LAYOUT)
    on_device = ttnn.to_device(b16, mesh)
    np.testing.assert_array_equal(
        ttnn.to_torch(on_device, mesh_composer=composer).float().numpy(),
        x.to(torch.bfloat16).float().numpy(),
    )
    with pytest.raises(ttnn.TTJaxError, match="only supports host tensors"):
        ttnn.to_dtype(on_device, ttnn.float32)
    # TT-NN's to_layout_bfloat (tensor_impl.cpp) logs and leaves a block float tensor in TILE
    assert got.to(ttnn.ROW_MAJOR_LAYOUT).layout == ttnn.TILE_LAYOUT
    with pytest.raises(ttnn.TTJaxError, match="needs a mesh device or a layout"):
        got.to()
    with pytest.raises(ttnn.TTJaxError, match="both a device"):
        got.to(mesh, target_layout=ttnn.TILE_LAYOUT)


def test_to_torch_gives_uint16_and_uint32_as_int16_and_int32():
    """TT-NN's to_torch returns UINT16 as torch.int16 and UINT32 as torch.int32 (pytensor.cpp),
    dtypes torch's ops take (a topk's indices compared with torch's, gathered, ...)."""
    mesh = mesh_of((1, 1))
    x = np.asarray([[0, 7, 300, 65535]], np.int64)
    u16 = ttnn.to_torch(ttnn.from_torch(x, dtype=ttnn.uint16, device=mesh))
    u32 = ttnn.to_torch(ttnn.from_torch(x, dtype=ttnn.uint32, device=mesh))
    assert (u16.dtype, u32.dtype) == (torch.int16, torch.int32)
    np.testing.assert_array_equal(u16.numpy().view(np.uint16), x)
    np.testing.assert_array_equal(u32.numpy(), x)
    assert torch.equal(torch.tensor([[0, 7, 300]]), u16[:, :3].long())


def test_as_tensor_cache_of_a_split_with_fewer_chunks_keeps_its_block(tmp_path):
    """A 1-D split with fewer chunks than devices lives on the first devices (TT-NN's rule); its
    cache file says so, and a second as_tensor loads it onto the same block (preprocess not run)."""
    mesh = mesh_of((2, 4))
    x = np.arange(2 * 32 * 32, dtype=np.float32).reshape(2, 1, 32, 32)
    calls = []

    def twice(t):
        calls.append(1)
        return 2 * t

    kw = dict(
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
        cache_file_name=tmp_path / "x",
        preprocess=twice,
    )
    for _ in range(2):
        t = ttnn.as_tensor(x, **kw)
        assert t.mesh_device.get_device_ids() == mesh.get_device_ids()[:2]
        got = [ttnn.to_numpy(d) for d in ttnn.get_device_tensors(t)]
        np.testing.assert_array_equal(np.concatenate(got), 2 * x)
    assert calls == [1]
    ttnn.dump_tensor(tmp_path / "t.tensorbin", t)
    back = ttnn.load_tensor(tmp_path / "t.tensorbin", device=mesh)
    assert back.mesh_device is t.mesh_device
    composer = ttnn.ConcatMeshToTensor(mesh, dim=0)
    np.testing.assert_array_equal(ttnn.to_numpy(back, mesh_composer=composer), 2 * x)


# ---------------------------------------------------------------------------------------------
# Streaming conversion: one device block at a time
# ---------------------------------------------------------------------------------------------


def _awkward(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """float32 values over 40 binades, with zeros, subnormals, infs and NaNs among them."""
    gen = np.random.default_rng(seed)
    x = gen.standard_normal(shape).astype(np.float32)
    x *= np.exp2(gen.integers(-20, 20, shape)).astype(np.float32)
    flat = x.reshape(-1)
    flat[::37] = 0.0
    flat[5::101] = 1e-40
    flat[7::211] = np.inf
    flat[11::307] = -np.inf
    flat[13::401] = np.nan
    return x


@pytest.mark.parametrize("dtype", [ttnn.bfloat8_b, ttnn.bfloat4_b], ids=["bfp8", "bfp4"])
@pytest.mark.parametrize(
    "kind", ["shard2d", "shard2d_transposed", "shard1d", "replicate", "none", "bf16_in"]
)
def test_block_float_blocks_are_the_bits_of_the_on_device_encode(dtype, kind):
    """from_torch encodes each device's block on the host: its mantissas, exponents and spec
    equal those of the float32 tensor typecast on the mesh (XLA's encode of whole shards), for
    every mapper, a strided (transposed) torch view and a bfloat16 input. Shards 24 wide (not a
    tile) exercise the padding."""
    mesh = mesh_of((2, 4))
    x = torch.from_numpy(_awkward((1, 2, 64, 96)))
    src = x
    if kind == "shard2d_transposed":
        src = torch.from_numpy(np.ascontiguousarray(_awkward((1, 2, 64, 96)).swapaxes(-1, -2)))
        src = src.transpose(-1, -2)
        x = src.contiguous()
    elif kind == "bf16_in":
        x = src = x.to(torch.bfloat16)
    mappers = {
        "shard1d": ttnn.ShardTensorToMesh(mesh, dim=-1),
        "replicate": ttnn.ReplicateTensorToMesh(mesh),
        "none": None,
    }
    mapper = mappers.get(kind, ttnn.ShardTensor2dMesh(mesh, dims=(-2, -1), mesh_shape=(2, 4)))
    kw = dict(layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=mapper)
    got = ttnn.from_torch(src, dtype=dtype, **kw)
    want = ttnn.typecast(ttnn.from_torch(x, dtype=ttnn.float32, **kw), dtype)
    assert got.spec == want.spec
    for g, w in zip(got.value, want.value):
        assert g.sharding.is_equivalent_to(w.sharding, g.ndim)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        for gs, ws in zip(g.addressable_shards, w.addressable_shards):
            assert gs.device == ws.device
            np.testing.assert_array_equal(np.asarray(gs.data), np.asarray(ws.data))


@pytest.mark.parametrize("mapper_kind", ["replicate", "shard"])
def test_device_tensor_owns_its_memory(mapper_kind):
    """JAX's CPU client may keep an aligned numpy buffer instead of copying it: a device tensor
    must not change when the caller later writes to the torch tensor it came from (TT-NN copies
    to the device)."""
    mesh = mesh_of((2, 4))
    x = torch.arange(8 * 256, dtype=torch.float32).reshape(8, 256)
    want = x.clone()
    mapper = ttnn.ShardTensorToMesh(mesh, dim=0) if mapper_kind == "shard" else None
    t = ttnn.from_torch(x, dtype=ttnn.float32, device=mesh, mesh_mapper=mapper)
    x.fill_(-1.0)
    devices = ttnn.get_device_tensors(t)
    got = [ttnn.to_torch(d) for d in devices]
    if mapper_kind == "shard":
        assert torch.equal(torch.cat(got), want)
    else:
        assert all(torch.equal(g, want) for g in got)
    pointers = {d.value.unsafe_buffer_pointer() for d in devices}
    assert len(pointers) == len(devices)  # replicas are copies, one per device


def test_host_block_float_is_quantized_per_shard_in_row_slabs():
    """A host block-float tensor larger than one row slab holds, per device shard, the values
    of the whole shard round-tripped through the format at once (numpy reference: the shard
    quantized in one piece)."""
    from ttjax._src.core import blockfloat

    mesh = mesh_of((2, 4))
    x = _awkward((2, 1, 640, 1024), seed=3)  # 1.3 M values: several slabs of rows
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(0, -1), mesh_shape=(2, 4))
    host = ttnn.from_torch(x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, mesh_mapper=mapper)
    got = np.asarray(host.value).astype(np.float32)
    for c, piece in shard(x, (2, 4), (0, 3)).items():
        ref = blockfloat._encode(np, piece, ttnn.bfloat8_b)
        with np.errstate(over="ignore"):
            want = blockfloat.decode(np, ref, ttnn.bfloat8_b, piece.shape)
        block = got[c[0] : c[0] + 1, :, :, c[1] * 256 : (c[1] + 1) * 256]
        np.testing.assert_array_equal(block, want.astype(ml_dtypes.bfloat16).astype(np.float32))


_PEAK_PROBE = """
import sys
from pathlib import Path

import jax
import torch

import ttjax as ttnn


def status(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024


mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
mapper = ttnn.ShardTensor2dMesh(mesh, dims=(-1, -2), mesh_shape=(2, 4))
device = mesh if sys.argv[2] == "device" else None
gen = torch.Generator().manual_seed(0)
# two of a layer's [out, in] weights, transposed as a model converts them: strided views; the
# first converted untimed (what it compiles is a fixed cost, not the weight's), the second kept
weights = [torch.randn(4096, 4096, generator=gen) for _ in range(2)]
kept = []
for weight in weights:
    view = weight.transpose(0, 1).unsqueeze(0).unsqueeze(0)
    base = status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    kept.append(ttnn.from_torch(view, dtype=getattr(ttnn, sys.argv[1]),
                                layout=ttnn.TILE_LAYOUT, device=device, mesh_mapper=mapper))
    jax.block_until_ready(kept[-1].value)
print((status("VmHWM") - base) / (2 * weight.numel()))
"""


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux /proc")
@pytest.mark.parametrize(
    ("dtype", "where", "bound"),
    [("bfloat8_b", "device", 1.5), pytest.param("bfloat4_b", "host", 1.6, marks=pytest.mark.slow)],
)
def test_conversion_peaks_near_the_weights_bfloat16_size(dtype, where, bound):
    """Converting a 64 MB float32 weight (a transposed view, as models pass it) raises a fresh
    process's peak RSS by at most ``bound`` times its bfloat16 size (32 MB), beside the caller's
    copy: no full-size float32 or int32 intermediates (before streaming: 4x on the mesh, 11x
    for a host tensor). One full-size bfloat16 copy alone would add 1.0; the device bound leaves
    room for the measured 1.13-1.27 (XLA's own thread arenas move it run to run)."""
    env = dict(os.environ, TTJAX_NUM_DEVICES="8")
    out = subprocess.run(
        [sys.executable, "-c", _PEAK_PROBE, dtype, where],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    ratio = float(out.stdout.strip().splitlines()[-1])
    assert ratio <= bound, f"peak RSS increase {ratio:.2f}x the weight's bfloat16 size"


@pytest.mark.slow
def test_galaxy_70b_mlp_weights_convert_within_twice_their_size():
    """llama3_70b_galaxy's three MLP weights at real width (8192 x 28672, bfloat8_b, 8x4 as
    TtLlamaMLP splits them) convert with a peak RSS increase of at most twice their bfloat16
    size (1.4 GB), the caller's float32 copies (2.8 GB) aside. Needs ~4 GB of host memory."""
    from benchmarks.bench_convert_memory import galaxy_case, run_child

    res = run_child(galaxy_case("bfloat8_b", cache=False, limit_gb=12.0))
    assert "error" not in res, res
    # before streaming: 3.24 GB, 2.47x the bfloat16 size and 4.6x what the devices store
    assert res["convert"]["peak_over_bf16"] <= 2.0, res
    assert res["convert"]["peak_over_stored"] <= 1.5, res


def _storage(t: ttnn.Tensor) -> list[np.ndarray]:
    """Every device's stored arrays (a block float's mantissas and exponents), row-major."""
    leaves = list(t.value) if t.dtype in (ttnn.bfloat8_b, ttnn.bfloat4_b) else [t.value]
    return [np.asarray(s.data) for leaf in leaves for s in leaf.addressable_shards]


@pytest.mark.parametrize("dtype", [ttnn.bfloat8_b, ttnn.bfloat16], ids=["bfp8", "bf16"])
@pytest.mark.parametrize("kind", ["shard2d", "replicate"])
def test_as_tensor_cache_holds_the_device_blocks(tmp_path, dtype, kind):
    """as_tensor onto a mesh stores each distinct device block as its devices hold it (no host
    copy of the whole tensor) and a second call places those blocks again: the same bits as
    the first call and as from_torch, preprocess not run; without a device (as_tensor or
    load_tensor) the file gives the host tensor from_device gives."""
    mesh = mesh_of((2, 4))
    x = torch.from_numpy(_awkward((1, 1, 64, 128), seed=5))
    x.view(-1)[~torch.isfinite(x.view(-1))] = 1.0
    mapper = (
        ttnn.ShardTensor2dMesh(mesh, dims=(-2, -1), mesh_shape=(2, 4))
        if kind == "shard2d"
        else ttnn.ReplicateTensorToMesh(mesh)
    )
    calls = []

    def prep(t):
        calls.append(1)
        return t

    kw = dict(dtype=dtype, layout=ttnn.TILE_LAYOUT, mesh_mapper=mapper, preprocess=prep,
              memory_config=ttnn.DRAM_MEMORY_CONFIG, cache_file_name=tmp_path / "w")  # fmt: skip
    first = ttnn.as_tensor(x, device=mesh, **kw)
    path = tmp_path / f"w_dtype_{dtype.name}_layout_TILE.tensorbin"
    with np.load(path) as z:
        members = sorted(z.files)
    n_blocks, n_leaves = (8 if kind == "shard2d" else 1), (2 if dtype != ttnn.bfloat16 else 1)
    assert members == sorted(
        ["meta"] + [f"b{i}_{j}" for i in range(n_blocks) for j in range(n_leaves)]
    )
    second = ttnn.as_tensor(x, device=mesh, **kw)
    assert calls == [1]
    direct = ttnn.from_torch(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh,
                             mesh_mapper=mapper)  # fmt: skip
    assert first.spec == second.spec == direct.spec
    for a, b, c in zip(_storage(first), _storage(second), _storage(direct)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    want = np.asarray(ttnn.from_device(first).value)
    for host in (ttnn.as_tensor(x, **kw), ttnn.load_tensor(path)):
        assert host.storage_type() == ttnn.StorageType.HOST and calls == [1]
        np.testing.assert_array_equal(np.asarray(host.value), want)
    for a, b in zip(_storage(ttnn.load_tensor(path, device=mesh)), _storage(first)):
        np.testing.assert_array_equal(a, b)


def test_as_tensor_still_reads_a_host_tensor_cache_file(tmp_path):
    """A cache file holding a host tensor's global data (what as_tensor wrote before it stored
    device blocks, and what dump_tensor of a host tensor writes) still loads onto the mesh."""
    mesh = mesh_of((2, 4))
    x = torch.from_numpy(_awkward((1, 1, 64, 128), seed=6))
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(-2, -1), mesh_shape=(2, 4))
    host = ttnn.from_torch(x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, mesh_mapper=mapper)
    path = tmp_path / "w_dtype_BFLOAT8_B_layout_TILE.tensorbin"
    ttnn.dump_tensor(path, host)
    with np.load(path) as z:
        assert sorted(z.files) == ["data", "meta"]
    got = ttnn.as_tensor(x * 0, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=mesh,
                         mesh_mapper=mapper, memory_config=ttnn.DRAM_MEMORY_CONFIG,
                         cache_file_name=tmp_path / "w")  # fmt: skip
    for a, b in zip(_storage(got), _storage(ttnn.to_device(host, mesh))):
        np.testing.assert_array_equal(a, b)
