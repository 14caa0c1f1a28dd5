"""TT-NN's device/fabric python API (ttjax.device, ttjax.fabric) and the head-splitting ops
``ttnn.transformer.concatenate_heads`` / ``split_query_key_value_and_split_heads`` vs torch."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch

import ttjax as ttnn
from tests.conftest import mesh_of
from ttjax import fabric
from ttjax.errors import CCLError, ConfigError, DeviceClosedError, LayoutError, ShapeMismatchError


@pytest.fixture
def fabric_restored() -> Iterator[None]:
    saved = fabric.current_setting()
    yield
    fabric._current = saved


# --- DispatchCoreConfig --------------------------------------------------------------------


def test_dispatch_core_config_defaults_follow_the_open_system() -> None:
    t3k = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))  # the last opened mesh: the cluster type
    assert ttnn.cluster.get_cluster_type() is ttnn.cluster.ClusterType.T3K
    cfg = ttnn.DispatchCoreConfig()
    assert (cfg.type, cfg.axis) == (ttnn.DispatchCoreType.ETH, ttnn.DispatchCoreAxis.ROW)
    # positional, as tt-metal's tests/scripts/common.py calls it
    cfg = ttnn.DispatchCoreConfig(None, ttnn.DispatchCoreAxis.COL, None)
    assert (cfg.type, cfg.axis) == (ttnn.DispatchCoreType.WORKER, ttnn.DispatchCoreAxis.COL)
    cfg = ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.WORKER)
    assert cfg == ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.WORKER, ttnn.DispatchCoreAxis.ROW)
    ttnn.close_mesh_device(t3k)
    t3k = ttnn.open_mesh_device(ttnn.MeshShape(2, 4), dispatch_core_config=cfg)
    assert t3k.get_num_devices() == 8
    ttnn.close_mesh_device(t3k)


def test_dispatch_core_config_refuses_what_tt_nn_refuses() -> None:
    with pytest.raises(ConfigError, match="COL axis is not supported for ETH"):
        ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.ETH, ttnn.DispatchCoreAxis.COL)
    with pytest.raises(ValueError, match="Invalid dispatch core type: 'ETH'"):
        ttnn.DispatchCoreConfig("ETH")
    with pytest.raises(ConfigError, match="Invalid dispatch core axis"):
        ttnn.DispatchCoreConfig(axis=1)


def test_arch_checks_and_default_device() -> None:
    mesh = mesh_of((1, 2))
    assert ttnn.device.is_wormhole_b0() and ttnn.device.is_wormhole_b0(mesh)
    assert not ttnn.device.is_blackhole() and not ttnn.device.is_grayskull(mesh)
    before = ttnn.GetDefaultDevice()
    try:
        ttnn.SetDefaultDevice(mesh)
        assert ttnn.GetDefaultDevice() is mesh
        with pytest.raises(ConfigError, match=r"not a ttnn\.MeshDevice"):
            ttnn.SetDefaultDevice("device 0")
    finally:
        ttnn.SetDefaultDevice(before)
    assert ttnn.using_distributed_env() is False


def test_read_device_profiler_waits_and_refuses_a_closed_mesh() -> None:
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    x = ttnn.from_torch(torch.ones(1, 1, 32, 32), device=mesh, layout=ttnn.TILE_LAYOUT)
    ttnn.ReadDeviceProfiler(mesh)
    assert np.all(ttnn.to_numpy(ttnn.get_device_tensors(x)[1]) == 1)
    ttnn.close_mesh_device(mesh)
    with pytest.raises(DeviceClosedError, match="closed"):
        ttnn.ReadDeviceProfiler(mesh)


# --- fabric ----------------------------------------------------------------------------------


def test_set_fabric_config_records_tt_metal_values(fabric_restored: None) -> None:
    assert [m.value for m in ttnn.FabricConfig] == [0, 1, 2, 3, 7, 11]
    assert ttnn.FabricReliabilityMode.RELAXED_INIT.value == 1
    ttnn.set_fabric_config(
        ttnn.FabricConfig.FABRIC_1D_RING,
        ttnn.FabricReliabilityMode.RELAXED_INIT,
        None,
        ttnn.FabricTensixConfig.MUX,
    )
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    setting = ttnn.mesh.fabric_setting(mesh)
    assert setting.config is ttnn.FabricConfig.FABRIC_1D_RING
    assert setting.fabric_tensix_config is ttnn.FabricTensixConfig.MUX
    ttnn.set_fabric_config(True)  # tt-metal's tests pass {"fabric_config": True}: value 1
    assert ttnn.get_fabric_config() is ttnn.FabricConfig.FABRIC_1D
    assert ttnn.mesh.fabric_setting(mesh).config is ttnn.FabricConfig.FABRIC_1D_RING
    with pytest.raises(ConfigError, match="config=5 is not a FabricConfig"):
        ttnn.set_fabric_config(5)
    ttnn.close_mesh_device(mesh)


def test_collective_on_a_mesh_opened_with_fabric_disabled_fails(fabric_restored: None) -> None:
    ttnn.set_fabric_config(ttnn.FabricConfig.DISABLED)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    x = ttnn.from_torch(
        torch.arange(64.0).reshape(1, 1, 2, 32),
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=2),
    )
    with pytest.raises(CCLError, match="un-initialized fabric context"):
        ttnn.all_gather(x, dim=2)
    ttnn.close_mesh_device(mesh)
    ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    x = ttnn.from_torch(
        torch.arange(64.0).reshape(1, 1, 2, 32),
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=2),
    )
    out = ttnn.all_gather(x, dim=2)
    ref = np.arange(64.0).reshape(1, 1, 2, 32)
    for d in ttnn.get_device_tensors(out):
        np.testing.assert_array_equal(ttnn.to_numpy(d), ref)
    ttnn.close_mesh_device(mesh)


# --- head ops vs torch (the reference in TT-NN's docstring), per device ----------------------


def _torch_split(x: torch.Tensor, nh: int, nkv: int, transpose_key: bool) -> list[torch.Tensor]:
    b, s, w = x.shape
    d = w // (nh + 2 * nkv)
    t = x.reshape(b, s, nh + 2 * nkv, d)
    q, k, v = t[..., :nh, :], t[..., nh : nh + nkv, :], t[..., nh + nkv :, :]
    q, k, v = (y.permute(0, 2, 1, 3) for y in (q, k, v))
    return [q, k.transpose(-1, -2) if transpose_key else k, v]


MESHES = [(1, 8), (2, 4)]


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_split_query_key_value_and_split_heads_per_device(shape: tuple[int, int]) -> None:
    mesh = mesh_of(shape)
    nh, d, n = 2, 32, shape[0] * shape[1]
    full = torch.randn(1, 40, n * 3 * nh * d)  # each device holds its own fused q/k/v heads
    per_dev = full.reshape(1, 40, n, 3 * nh * d)
    x = ttnn.from_torch(
        full.reshape(1, 1, 40, -1),
        device=mesh,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    x = ttnn.reshape(x, (1, 40, 3 * nh * d))
    for transpose_key in (True, False):
        outs = ttnn.transformer.split_query_key_value_and_split_heads(
            x, num_heads=nh, transpose_key=transpose_key
        )
        for i, out in enumerate(outs):
            for dev, got in enumerate(ttnn.get_device_tensors(out)):
                ref = _torch_split(per_dev[:, :, dev], nh, nh, transpose_key)[i]
                np.testing.assert_allclose(ttnn.to_numpy(got), ref.numpy(), rtol=1e-2, atol=1e-2)
    # grouped kv heads (num_kv_heads, no key transpose), and a separate kv input
    g = torch.randn(2, 32, (4 + 2 * 1) * d)
    xg = ttnn.from_torch(g, device=mesh, layout=ttnn.TILE_LAYOUT)
    outs = ttnn.transformer.split_query_key_value_and_split_heads(
        xg, num_heads=4, num_kv_heads=1, transpose_key=False
    )
    for out, ref in zip(outs, _torch_split(g, 4, 1, False)):
        got = ttnn.to_numpy(ttnn.get_device_tensors(out)[-1])
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-2, atol=1e-2)
    q_in, kv_in = torch.randn(1, 32, 2 * d), torch.randn(1, 32, 4 * d)
    q_t = ttnn.from_torch(q_in, device=mesh, layout=ttnn.TILE_LAYOUT)
    kv_t = ttnn.from_torch(kv_in, device=mesh, layout=ttnn.TILE_LAYOUT)
    outs = ttnn.transformer.split_query_key_value_and_split_heads(q_t, kv_t, num_heads=2)
    refs = _torch_split(torch.cat([q_in, kv_in], dim=-1), 2, 2, True)
    for out, ref in zip(outs, refs):
        got = ttnn.to_numpy(ttnn.get_device_tensors(out)[0])
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("shape", MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_concatenate_heads_per_device(shape: tuple[int, int]) -> None:
    mesh = mesh_of(shape)
    n = shape[0] * shape[1]
    full = torch.randn(1, 2 * n, 40, 32)  # 2 heads per device
    x = ttnn.from_torch(
        full, device=mesh, layout=ttnn.TILE_LAYOUT, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1)
    )
    out = ttnn.transformer.concatenate_heads(x, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert out.memory_config() == ttnn.L1_MEMORY_CONFIG
    for dev, got in enumerate(ttnn.get_device_tensors(out)):
        heads = full[:, 2 * dev : 2 * dev + 2]
        ref = heads.permute(0, 2, 1, 3).reshape(1, 40, 64)
        np.testing.assert_allclose(ttnn.to_numpy(got), ref.numpy(), rtol=1e-2, atol=1e-2)


def test_head_ops_refuse_what_tt_nn_refuses() -> None:
    mesh = mesh_of((1, 8))
    x = ttnn.from_torch(torch.randn(1, 32, 3 * 2 * 16), device=mesh, layout=ttnn.TILE_LAYOUT)
    with pytest.raises(ShapeMismatchError, match="Invalid head size: 16"):
        ttnn.transformer.split_query_key_value_and_split_heads(x, num_heads=2)
    with pytest.raises(ttnn.errors.TTJaxError, match="Transpose is set to true"):
        ttnn.transformer.split_query_key_value_and_split_heads(x, num_heads=2, num_kv_heads=1)
    rm = ttnn.from_torch(torch.randn(1, 32, 192), device=mesh, layout=ttnn.ROW_MAJOR_LAYOUT)
    with pytest.raises(LayoutError, match="TILE_LAYOUT"):
        ttnn.transformer.split_query_key_value_and_split_heads(rm, num_heads=2)
    h = ttnn.from_torch(torch.randn(1, 2, 32, 48), device=mesh, layout=ttnn.TILE_LAYOUT)
    with pytest.raises(ShapeMismatchError, match="multiple of 32 but was found to be 48"):
        ttnn.transformer.concatenate_heads(h)


def test_split_of_a_sharded_input_reads_interleaved_heads() -> None:
    """TT-NN's sharded kernel reads q1 k1 v1 ... qn kn vn (its docstring)."""
    mesh = mesh_of((1, 8))
    x = torch.randn(1, 32, 3 * 2 * 32)
    t = ttnn.from_torch(x, device=mesh, layout=ttnn.TILE_LAYOUT)
    sharded = ttnn.create_sharded_memory_config(
        (32, 192),
        core_grid=ttnn.CoreGrid(y=1, x=1),
        strategy=ttnn.ShardStrategy.HEIGHT,
        use_height_and_width_as_shard_shape=True,
    )
    ts = ttnn.to_memory_config(t, sharded)
    assert ts.is_sharded()
    outs = ttnn.transformer.split_query_key_value_and_split_heads(ts, num_heads=2)
    r = x.reshape(1, 32, 2, 3, 32)
    refs = [r[..., i, :].permute(0, 2, 1, 3) for i in range(3)]
    refs[1] = refs[1].transpose(-1, -2)
    for out, ref in zip(outs, refs):
        for got in ttnn.get_device_tensors(out):
            np.testing.assert_allclose(ttnn.to_numpy(got), ref.numpy(), rtol=1e-2, atol=1e-2)
    with pytest.raises(ShapeMismatchError, match="should not be provided when the input tensor"):
        kv = ttnn.from_torch(torch.randn(1, 32, 384), device=mesh, layout=ttnn.TILE_LAYOUT)
        ttnn.transformer.split_query_key_value_and_split_heads(ts, kv, num_heads=2)


# --- from_host_shards ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "bfloat8_b"])
def test_from_host_shards_gives_each_device_its_shard(dtype: str) -> None:
    mesh = mesh_of((2, 4))
    dt = getattr(ttnn, dtype)
    src = [torch.randn(1, 1, 32, 64) for _ in range(8)]
    shards = [ttnn.from_torch(s, dtype=dt, layout=ttnn.TILE_LAYOUT) for s in src]
    host = ttnn.from_host_shards(shards, ttnn.MeshShape(2, 4))
    on_dev = ttnn.to_device(host, mesh)
    for s, shard, got in zip(src, shards, ttnn.get_device_tensors(on_dev)):
        np.testing.assert_array_equal(ttnn.to_numpy(got), ttnn.to_numpy(shard))
        np.testing.assert_allclose(ttnn.to_numpy(got), s.numpy(), rtol=0.1, atol=0.1)
    with pytest.raises(ShapeMismatchError, match="Number of tensor shards must match mesh size"):
        ttnn.from_host_shards(shards[:7], ttnn.MeshShape(2, 4))
    with pytest.raises(ShapeMismatchError, match="same tensor spec"):
        ttnn.from_host_shards([*shards[:7], ttnn.from_torch(src[0])], ttnn.MeshShape(2, 4))
    with pytest.raises(ttnn.errors.TTJaxError, match="must be on host"):
        ttnn.from_host_shards([*shards[:7], on_dev], ttnn.MeshShape(2, 4))


def test_system_mesh_descriptor_describes_the_system() -> None:
    desc = ttnn.SystemMeshDescriptor()
    assert desc.shape() == ttnn.system_mesh_shape() == ttnn.MeshShape(8, 4)
    assert desc.shape().mesh_size() == ttnn.get_num_devices() == 32
    assert desc.local_shape() == desc.shape() and desc.all_local()
    assert desc.get_device_id(ttnn.MeshCoordinate(1, 2)) == ttnn.get_device_ids()[1 * 4 + 2]
    assert desc.is_local(ttnn.MeshCoordinate(7, 3))
    with pytest.raises(ttnn.errors.MeshShapeError, match="outside the system mesh"):
        desc.get_device_id(ttnn.MeshCoordinate(8, 0))


def test_create_device_opens_one_device() -> None:
    dev = ttnn.CreateDevice(3, 2, 0, 0, ttnn.DispatchCoreConfig(), worker_l1_size=0)
    assert dev.get_device_ids() == [ttnn.get_device_ids()[3]] and dev.get_num_devices() == 1
    x = ttnn.from_torch(torch.arange(32.0).reshape(1, 32), device=dev)
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.add(x, x)), 2 * np.arange(32.0).reshape(1, 32))
    ttnn.close_device(dev)
    with pytest.raises(ConfigError, match="num_command_queues=3"):
        ttnn.CreateDevice(0, 3)
    with pytest.raises(ConfigError, match=r"is not a ttnn\.DispatchCoreConfig"):
        ttnn.CreateDevice(0, dispatch_core_config=ttnn.DispatchCoreType.ETH)


def test_pcie_device_id_of_a_t3000_chip_is_its_card_partner() -> None:
    t3k = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))  # a T3K is open: 4 PCIe chips
    assert [ttnn.GetPCIeDeviceID(i) for i in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    ttnn.close_mesh_device(t3k)
    with pytest.raises(ConfigError, match="device_id=99"):
        ttnn.GetPCIeDeviceID(99)


def test_the_binding_reads_device_and_fabric_names_from_ttjax() -> None:
    import ttjax.compat

    bound = ttjax.compat.install_as_ttnn(tt_metal_home=None)
    try:
        assert bound.device.is_blackhole is ttnn.device.is_blackhole
        assert bound.device.DispatchCoreConfig is ttnn.DispatchCoreConfig
        assert bound._ttnn.device.SetDefaultDevice is ttnn.SetDefaultDevice
        assert bound.device.Arch.WORMHOLE_B0 is ttnn.Arch.WORMHOLE_B0
        assert bound.FabricConfig.FABRIC_1D is ttnn.fabric.FabricConfig.FABRIC_1D
        assert bound.transformer.concatenate_heads is ttnn.transformer.concatenate_heads
        assert bound._ttnn.multi_device.SystemMeshDescriptor is ttnn.SystemMeshDescriptor
    finally:
        ttjax.compat.uninstall_ttnn()
