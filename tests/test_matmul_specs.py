"""A sharded matmul's output shard spec comes from its program config (TT-NN's
Matmul::compute_output_specs, ttnn/cpp/ttnn/operations/matmul/device/matmul_op.cpp): every
variant against the numbers worked out by hand from the C++, then one real linear."""

from __future__ import annotations

import numpy as np
import pytest
from _op_testing import REPLICATED, Layout, check, put

import ttjax as ttnn
from ttjax._src.core.matmul_specs import matmul_output_memory_config as derive

L1 = ttnn.BufferType.L1
TML = ttnn.TensorMemoryLayout
ROW, COL = ttnn.ShardOrientation.ROW_MAJOR, ttnn.ShardOrientation.COL_MAJOR
GRID8 = ttnn.CoreCoord(8, 8)


def _cfg(layout, spec=None):
    return ttnn.MemoryConfig(layout, L1, spec)


def _1d(per_core_m, per_core_n, mcast_in0=True, fuse_batch=True, **kw):
    return ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(8, 8),
        in0_block_w=1,
        out_subblock_h=1,
        out_subblock_w=1,
        out_block_h=1,
        out_block_w=1,
        per_core_M=per_core_m,
        per_core_N=per_core_n,
        fuse_batch=fuse_batch,
        mcast_in0=mcast_in0,
        **kw,
    )


def _crs(*ranges):
    return ttnn.CoreRangeSet([ttnn.CoreRange(a, b) for a, b in ranges])


# A wrong shard spec the caller passed: TT-NN replaces it.
STALE = ttnn.ShardSpec(_crs(((0, 0), (1, 0))), (64, 64), ROW)


def test_1d_mcast_in0_width_shards_row_wise_over_the_config_grid():
    # M = 32/32 = 1 tile, N = 1280/32 = 40 tiles, per_core_N 4: 10 blocks, row-wise on 8x8:
    # (0,0)-(7,0) then (0,1)-(1,1); shard [1*32, 4*32].
    out = derive(
        "linear", _1d(1, 4), _cfg(TML.WIDTH_SHARDED, STALE), (1, 1, 32, 64), (1, 1, 64, 1280),
        None, GRID8,
    )  # fmt: skip
    assert out.memory_layout is TML.WIDTH_SHARDED and out.buffer_type is L1
    assert out.shard_spec == ttnn.ShardSpec(_crs(((0, 0), (7, 0)), ((0, 1), (1, 1))), (32, 128))


def test_1d_mcast_in1_height_shards():
    # fuse_batch: M = 2*1*128/32 = 8 tiles, per_core_M 2: 4 blocks; N = 64/32 = 2 = per_core_N.
    out = derive(
        "matmul", _1d(2, 2, mcast_in0=False), _cfg(TML.HEIGHT_SHARDED), (2, 1, 128, 64),
        (1, 1, 64, 64), None, GRID8,
    )  # fmt: skip
    assert out.shard_spec == ttnn.ShardSpec(_crs(((0, 0), (3, 0))), (64, 64), ROW)
    # Without fuse_batch M is padded_shape[-2] only: 128/32 = 4 tiles, 2 blocks.
    out = derive(
        "matmul", _1d(2, 2, mcast_in0=False, fuse_batch=False), _cfg(TML.HEIGHT_SHARDED),
        (2, 1, 128, 64), (1, 1, 64, 64), None, GRID8,
    )  # fmt: skip
    assert out.shard_spec.grid == _crs(((0, 0), (1, 0)))


def test_1d_gather_in0_keeps_the_given_spec():
    pc = _1d(1, 2, mcast_in0=False, gather_in0=True, num_global_cb_receivers=1)
    given = _cfg(TML.WIDTH_SHARDED, STALE)
    assert derive("matmul", pc, given, (1, 1, 32, 64), (1, 1, 64, 128), None, GRID8) is given
    with pytest.raises(ttnn.MemoryConfigError, match="shard spec must be provided"):
        derive("matmul", pc, _cfg(TML.WIDTH_SHARDED), (1, 1, 32, 64), (1, 1, 64, 128), None, GRID8)


def test_2d_block_shards_and_transpose_mcast():
    pc = ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=(8, 8), in0_block_w=1, out_subblock_h=1, out_subblock_w=1,
        per_core_M=4, per_core_N=2, transpose_mcast=False, fuse_batch=True,
    )  # fmt: skip
    # M = 256/32 = 8 -> 2 blocks (y); N = 256/32 = 8 -> 4 blocks (x): cores (0,0)-(3,1).
    args = ((1, 1, 256, 128), (1, 1, 128, 256), None, GRID8)
    out = derive("matmul", pc, _cfg(TML.BLOCK_SHARDED, STALE), *args)
    assert out.shard_spec == ttnn.ShardSpec(_crs(((0, 0), (3, 1))), (128, 64), ROW)
    pc.transpose_mcast = True  # plain structs: fields can be set after construction
    out = derive("matmul", pc, _cfg(TML.BLOCK_SHARDED, STALE), *args)
    assert out.shard_spec == ttnn.ShardSpec(_crs(((0, 0), (1, 3))), (128, 64), COL)


def test_dram_sharded_shards_over_the_device_grid():
    pc = ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(
        in0_block_w=2, per_core_M=1, per_core_N=2, fused_activation=None
    )
    a_spec = ttnn.ShardSpec(_crs(((0, 0), (3, 0))), (32, 64), ROW)
    args = ((1, 1, 32, 256), (1, 1, 256, 512), a_spec)
    # N = 16 tiles / 2 = 8 cores, row-wise on the device's grid.
    out = derive("linear", pc, _cfg(TML.WIDTH_SHARDED, STALE), *args, GRID8)
    assert out.shard_spec == ttnn.ShardSpec(_crs(((0, 0), (7, 0))), (32, 64), ROW)
    # A Galaxy opened with dispatch on a column has a 7-wide grid: the eighth core wraps.
    out = derive("linear", pc, _cfg(TML.WIDTH_SHARDED), *args, ttnn.CoreCoord(7, 10))
    assert out.shard_spec.grid == _crs(((0, 0), (6, 0)), ((0, 1), (0, 1)))
    with pytest.raises(ttnn.MemoryConfigError, match="width-sharded activation"):
        derive("linear", pc, _cfg(TML.WIDTH_SHARDED), *args[:2], None, GRID8)


def test_reuse_orientation_follows_the_inputs():
    pc = ttnn.MatmulMultiCoreReuseProgramConfig(
        compute_with_storage_grid_size=(8, 8), in0_block_w=2, out_subblock_h=1, out_subblock_w=2,
        per_core_M=1, per_core_N=2,
    )  # fmt: skip
    # M = 4 tiles, N = 2 = per_core_N: 4 cores; no sharded input -> COL_MAJOR, column-wise.
    shapes = ((1, 1, 128, 64), (1, 1, 64, 64))
    out = derive("matmul", pc, _cfg(TML.HEIGHT_SHARDED), *shapes, None, GRID8)
    assert out.shard_spec == ttnn.ShardSpec(_crs(((0, 0), (0, 3))), (32, 64), COL)
    a_spec = ttnn.ShardSpec(_crs(((0, 0), (3, 0))), (32, 64), ROW)
    out = derive("matmul", pc, _cfg(TML.HEIGHT_SHARDED), *shapes, a_spec, GRID8)
    assert out.shard_spec == ttnn.ShardSpec(_crs(((0, 0), (3, 0))), (32, 64), ROW)


def test_layout_rules_per_variant():
    shapes = ((1, 1, 32, 64), (1, 1, 64, 256), None, GRID8)
    with pytest.raises(ttnn.MemoryConfigError, match="WIDTH_SHARDED output"):
        derive("matmul", _1d(1, 2), _cfg(TML.HEIGHT_SHARDED), *shapes)
    with pytest.raises(ttnn.MemoryConfigError, match=r"M \(1 tiles\) must be equal to per_core_M"):
        derive("matmul", _1d(2, 2), _cfg(TML.WIDTH_SHARDED), *shapes)
    with pytest.raises(ttnn.MemoryConfigError, match=r"N \(8 tiles\) must be equal to per_core_N"):
        derive("matmul", _1d(1, 2, mcast_in0=False), _cfg(TML.HEIGHT_SHARDED), *shapes)
    # Interleaved outputs, and no program config, keep what was given.
    assert derive("matmul", _1d(1, 2), ttnn.L1_MEMORY_CONFIG, *shapes) is ttnn.L1_MEMORY_CONFIG
    given = _cfg(TML.WIDTH_SHARDED, STALE)
    assert derive("matmul", None, given, *shapes) is given


def test_linear_with_a_stale_output_spec_uses_the_computed_one():
    """A real call: the given width-sharded spec is for another size; TT-NN (and ttjax) compute
    the output's from the 1D config, and the values are the product's."""
    rng = np.random.default_rng(0)
    a, wa = put(rng.standard_normal((1, 1, 32, 64)).astype(np.float32), (1, 2), REPLICATED)
    w, ww = put(
        rng.standard_normal((1, 1, 64, 512)).astype(np.float32), (1, 2), Layout("1d", (3, 3))
    )
    stale = ttnn.create_sharded_memory_config(
        (1, 1, 32, 2048), ttnn.CoreGrid(y=2, x=8), ttnn.ShardStrategy.WIDTH
    )
    y = ttnn.linear(a, w, memory_config=stale, program_config=_1d(1, 2))
    assert y.memory_config().shard_spec == ttnn.ShardSpec(_crs(((0, 0), (3, 0))), (32, 64), ROW)
    check(y, {c: wa[c] @ ww[c] for c in wa}, tol=(1e-2, 1e-2))
