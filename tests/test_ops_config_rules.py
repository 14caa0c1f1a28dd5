"""TT-NN's program configs are plain structs: building one that is wrong for a size succeeds, and
its rules are checked when an op runs on a tensor (LayerNorm::validate, Matmul::validate)."""

from __future__ import annotations

import numpy as np
import pytest
from _op_testing import REPLICATED, check, put

import ttjax as ttnn

MESH = (1, 2)


def _ln(block_h, block_w, subblock_w):
    return ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(8, 8),
        subblock_w=subblock_w,
        block_h=block_h,
        block_w=block_w,
        inplace=False,
    )


def _width_sharded(x):
    """[1, 1, 32, 256] width-sharded over 4 cores: shards of [32, 64] (2 tiles wide)."""
    cfg = ttnn.create_sharded_memory_config(
        (1, 1, 32, 256), ttnn.CoreGrid(y=1, x=4), ttnn.ShardStrategy.WIDTH
    )
    return ttnn.to_memory_config(x, cfg)


def test_norm_configs_for_other_sizes_build_and_fail_only_when_used():
    rng = np.random.default_rng(0)
    x, wx = put(rng.standard_normal((1, 1, 32, 256)).astype(np.float32), MESH, REPLICATED)
    xs = _width_sharded(x)
    # Built for a tensor twice as wide (block_w 4): fine to build, refused on this one.
    other = _ln(block_h=1, block_w=4, subblock_w=4)
    with pytest.raises(ttnn.MemoryConfigError, match=r"Block width \* TILE_WIDTH must match"):
        ttnn.rms_norm(xs, epsilon=1e-5, program_config=other)
    odd = _ln(block_h=1, block_w=8, subblock_w=3)
    with pytest.raises(ttnn.MemoryConfigError, match=r"block_w \(8\) must be divisible by subb"):
        ttnn.rms_norm(x, epsilon=1e-5, program_config=odd)
    # The config made for this tensor runs and normalizes.
    y = ttnn.rms_norm(xs, epsilon=1e-5, program_config=_ln(block_h=1, block_w=2, subblock_w=2))
    want = {c: v / np.sqrt(np.mean(v * v, -1, keepdims=True) + 1e-5) for c, v in wx.items()}
    check(y, want, tol=(1e-2, 1e-2))


def test_matmul_configs_for_other_sizes_build_and_fail_only_when_used():
    rng = np.random.default_rng(1)
    a, _ = put(rng.standard_normal((1, 1, 32, 64)).astype(np.float32), MESH, REPLICATED)
    w, _ = put(rng.standard_normal((1, 1, 64, 64)).astype(np.float32), MESH, REPLICATED)
    pc = ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(8, 1),
        in0_block_w=3,  # K = 96 elsewhere; here K is 2 tiles
        out_subblock_h=1,
        out_subblock_w=1,
        out_block_h=1,
        out_block_w=1,
        per_core_M=1,
        per_core_N=2,
        fuse_batch=True,
        fused_activation=None,
        mcast_in0=True,
    )
    with pytest.raises(ttnn.MemoryConfigError, match=r"Kt \(2\) must be divisible by in0_block_w"):
        ttnn.matmul(a, w, program_config=pc)
    pc.in0_block_w = 2
    pc.out_subblock_w = 3
    with pytest.raises(ttnn.MemoryConfigError, match="per_core_N must be divisible by out_sub"):
        ttnn.linear(a, w, program_config=pc)


def test_sdpa_chunk_sizes_are_checked_when_attention_runs():
    cfg = ttnn.SDPAProgramConfig(
        compute_with_storage_grid_size=(8, 8), q_chunk_size=48, k_chunk_size=32
    )  # fine to build (e.g. for a longer sequence elsewhere)
    rng = np.random.default_rng(2)
    q, _ = put(rng.standard_normal((1, 2, 32, 32)).astype(np.float32), MESH, REPLICATED)
    with pytest.raises(ttnn.MemoryConfigError, match="q_chunk_size must be divisible by TILE_SIZE"):
        ttnn.transformer.scaled_dot_product_attention(q, q, q, program_config=cfg)
