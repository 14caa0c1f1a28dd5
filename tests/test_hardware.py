"""Hardware questions model code asks (arch, cluster type, PCIe chips, core range sets) and the
program configs it builds, checked against TT-Metal's definitions."""

from __future__ import annotations

import math

import pytest

import ttjax as ttnn
from ttjax.hardware import get_system


@pytest.mark.parametrize(
    "shape,kind,pcie",
    [
        ((1, 8), ttnn.cluster.ClusterType.T3K, 4),
        ((2, 4), ttnn.cluster.ClusterType.T3K, 4),
        ((8, 4), ttnn.cluster.ClusterType.GALAXY, 32),
        ((1, 2), ttnn.cluster.ClusterType.N300, 1),
        ((1, 1), ttnn.cluster.ClusterType.N150, 1),
        ((1, 3), ttnn.cluster.ClusterType.INVALID, 3),
    ],
)
def test_cluster_type_follows_the_opened_system(shape, kind, pcie):
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
    try:
        assert ttnn.cluster.get_cluster_type() is kind
        assert ttnn.GetNumPCIeDevices() == pcie
        # tt_transformers' ccl_topology: Ring on an 8-device T3K/Galaxy, Linear otherwise.
        ring = mesh.get_num_devices() == 8 and ttnn.cluster.get_cluster_type() in [
            ttnn.cluster.ClusterType.T3K,
            ttnn.cluster.ClusterType.GALAXY,
        ]
        assert ring == (kind is ttnn.cluster.ClusterType.T3K)
    finally:
        ttnn.close_mesh_device(mesh)


def test_cluster_type_values_are_tt_metals():
    ct = ttnn.cluster.ClusterType
    assert (ct.INVALID.value, ct.N150.value, ct.N300.value, ct.T3K.value, ct.GALAXY.value) == (
        0,
        1,
        2,
        3,
        4,
    )
    assert ct.P300_X2.value == 17


def test_arch_name_and_device_arch_agree():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    try:
        assert ttnn.get_arch_name() == "wormhole_b0"
        assert mesh.arch() == ttnn.Arch.WORMHOLE_B0
        assert mesh.arch().value == ttnn.get_arch_name()
        assert ttnn.GetNumAvailableDevices() == ttnn.get_num_devices()
    finally:
        ttnn.close_mesh_device(mesh)


def _cores(crs: ttnn.CoreRangeSet) -> set[tuple[int, int]]:
    out = set()
    for r in crs.ranges():
        for y in range(r.start.y, r.end.y + 1):
            for x in range(r.start.x, r.end.x + 1):
                out.add((x, y))
    return out


@pytest.mark.parametrize("n", [1, 7, 8, 9, 20, 32, 56])
@pytest.mark.parametrize("row_wise", [True, False])
def test_num_cores_to_corerangeset_fills_the_grid_in_order(n, row_wise):
    grid = ttnn.CoreCoord(8, 7)
    crs = ttnn.num_cores_to_corerangeset(n, grid, row_wise=row_wise)
    order = (
        [(x, y) for y in range(7) for x in range(8)]
        if row_wise
        else [(x, y) for x in range(8) for y in range(7)]
    )
    assert _cores(crs) == set(order[:n])
    assert crs.num_cores() == n
    assert len(crs.ranges()) <= 2


def test_num_cores_to_corerangeset_too_many_cores_raises():
    with pytest.raises(
        ttnn.MemoryConfigError, match="greater than total number of available cores 64"
    ):
        ttnn.num_cores_to_corerangeset(65, ttnn.CoreCoord(8, 8), row_wise=True)


def test_program_configs_take_ttnn_keywords_and_refuse_others():
    ln = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=[8, 2], subblock_w=4, block_h=1, block_w=8, inplace=False
    )
    assert (ln.block_w, ln.inplace, ln.use_welford) == (8, False, None)
    sm = ttnn.SoftmaxShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 4), subblock_w=1, block_h=1, block_w=4
    )
    assert sm.block_w == 4
    mm = ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=(8, 8),
        in0_block_w=1,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=1,
        transpose_mcast=False,
        fused_activation=ttnn.UnaryOpType.SILU,
    )
    assert mm.fused_activation is ttnn.UnaryOpType.SILU
    with pytest.raises(TypeError, match="unexpected keyword"):
        ttnn.SoftmaxShardedMultiCoreProgramConfig(compute_with_storage_grid_size=(8, 4), blok_w=4)
    # Plain structs (TT-NN's rules are checked when an op runs: tests/test_ops_config_rules.py).
    bad = ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=[8, 2], subblock_w=3, block_h=1, block_w=8, inplace=False
    )
    assert bad.subblock_w == 3


def test_unary_with_param_reads_back():
    gelu_tanh = ttnn.UnaryWithParam(ttnn.UnaryOpType.GELU, 1.0)
    assert gelu_tanh.op_type is ttnn.UnaryOpType.GELU and gelu_tanh.param == 1.0
    assert gelu_tanh == ttnn.UnaryWithParam((ttnn.UnaryOpType.GELU, 1.0))
    assert repr(gelu_tanh) == "UnaryWithParam(UnaryOpType.GELU, 1.0)"
    assert ttnn.UnaryOpType.SILU.value == 56  # position in TT-NN's C++ enum
    with pytest.raises(TypeError):
        ttnn.UnaryWithParam("silu", 1.0)


def test_compute_kernel_configs_share_ttnns_base_type():
    cfg = ttnn.WormholeComputeKernelConfig(
        math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True
    )
    assert isinstance(cfg, ttnn.DeviceComputeKernelConfig)
    assert cfg.math_fidelity is ttnn.MathFidelity.HiFi2
    # Model code annotates with these types (`ttnn.DeviceComputeKernelConfig | None`).
    assert (ttnn.DeviceComputeKernelConfig | None) is not None
    assert (ttnn.UnaryOpType | None) is not None


@pytest.mark.parametrize("n", [1, 3, 12, 30, 31, 35, 50])
@pytest.mark.parametrize("row_wise", [True, False])
@pytest.mark.parametrize("start", [(1, 0), (2, 3)])
def test_num_cores_to_corerangeset_in_subcoregrids_walks_the_grids_in_order(n, row_wise, start):
    # llama3_70b_galaxy's sub-core grids: columns 1-3 and 5-6 of a 10-row grid.
    ranges = [
        ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 9)),
        ttnn.CoreRange(ttnn.CoreCoord(5, 0), ttnn.CoreCoord(6, 9)),
    ]
    grids = ttnn.CoreRangeSet(ranges)
    order = []
    for r in ranges:
        cells = (
            [(x, y) for y in range(r.start.y, r.end.y + 1) for x in range(r.start.x, r.end.x + 1)]
            if row_wise
            else [
                (x, y) for x in range(r.start.x, r.end.x + 1) for y in range(r.start.y, r.end.y + 1)
            ]
        )
        order += cells
    walk = order[order.index(start) :]
    if n > len(walk):
        with pytest.raises(ttnn.MemoryConfigError, match="Failed to split"):
            ttnn.num_cores_to_corerangeset_in_subcoregrids(
                ttnn.CoreCoord(*start), n, grids, row_wise=row_wise
            )
        return
    crs = ttnn.num_cores_to_corerangeset_in_subcoregrids(
        ttnn.CoreCoord(*start), n, grids, row_wise=row_wise
    )
    assert _cores(crs) == set(walk[:n])
    assert crs.num_cores() == n  # no core counted twice


def test_num_cores_to_corerangeset_in_subcoregrids_errors():
    grids = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 9))])
    with pytest.raises(ttnn.MemoryConfigError, match="Start core must be contained"):
        ttnn.num_cores_to_corerangeset_in_subcoregrids(ttnn.CoreCoord(0, 0), 4, grids)
    with pytest.raises(
        ttnn.MemoryConfigError, match="greater than total number of available cores 30"
    ):
        ttnn.num_cores_to_corerangeset_in_subcoregrids(ttnn.CoreCoord(1, 0), 31, grids)


def test_systems_carry_the_published_figures():
    t = get_system("T3K")
    assert (t.num_chips, t.links, t.topology(8), t.topology(4)) == (8, 1, "ring", "line")
    g = get_system("galaxy")
    assert (g.num_chips, g.links, g.topology(8), g.topology(32)) == (32, 4, "ring", "line")
    assert t.dram_bandwidth == 288e9 and t.dram_bytes == 12 * 10**9
    assert math.isclose(t.hop_seconds, 650e-9) and t.link_bandwidth == 12.5e9


def test_create_sharded_memory_config_underscore_rounds_up_as_tt_nn() -> None:
    """ttnn.create_sharded_memory_config_ (TT-NN's ttnn/core.py form): shards round up, the grid
    may be a CoreRangeSet or (full block, partial row), tile_layout pads the height."""
    h = ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    row = ttnn.ShardOrientation.ROW_MAJOR
    cfg = ttnn.create_sharded_memory_config_((1, 1, 100, 64), ttnn.CoreGrid(y=1, x=3), h, row)
    assert cfg.shard_spec.shape == (34, 64) and cfg.shard_spec.num_cores() == 3
    tiled = ttnn.create_sharded_memory_config_(
        (1, 1, 100, 64), ttnn.CoreGrid(y=1, x=3), h, row, tile_layout=True
    )
    assert tiled.shard_spec.shape == (34, 64)  # 100 -> 102 rows over 3 cores: 34 (width tiles)
    two = ttnn.create_sharded_memory_config_(
        (1, 1, 320, 64), (ttnn.CoreGrid(y=1, x=8), ttnn.CoreGrid(y=1, x=2)), h, row
    )
    assert two.shard_spec.num_cores() == 10 and two.shard_spec.shape == (32, 64)
    block = ttnn.create_sharded_memory_config_(
        (1, 1, 64, 256), ttnn.CoreGrid(y=2, x=4), ttnn.ShardStrategy.BLOCK, row
    )
    assert block.memory_layout == ttnn.TensorMemoryLayout.BLOCK_SHARDED
    assert block.shard_spec.shape == (32, 64)
    with pytest.raises(ttnn.MemoryConfigError, match="Invalid sharding strategy"):
        ttnn.create_sharded_memory_config_(
            (32, 32), ttnn.CoreGrid(y=1, x=1), ttnn.TensorMemoryLayout.INTERLEAVED, row
        )


def test_shard_spec_takes_tt_nns_keyword_names():
    """``ShardSpec(grid=, shard_shape=, shard_orientation=)`` as TT-NN's pybind names them
    (whisper's decode SDPA config builds it so); read back as ``shape`` / ``orientation``."""
    grid = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(1, 0))})
    spec = ttnn.ShardSpec(
        grid=grid, shard_shape=[32, 64], shard_orientation=ttnn.ShardOrientation.COL_MAJOR
    )
    assert spec.shape == (32, 64) and spec.orientation == ttnn.ShardOrientation.COL_MAJOR
    assert spec == ttnn.ShardSpec(grid, (32, 64), ttnn.ShardOrientation.COL_MAJOR)
    assert spec.num_cores() == 2
    mem = ttnn.MemoryConfig(ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.BufferType.L1, spec)
    assert ttnn.MemoryConfig.from_json(mem.to_json()) == mem
