"""A sharded matmul's output memory config, derived from its program config as TT-NN derives it.

With a sharded ``memory_config=`` and a sharded program config, TT-NN does not use the shard spec
it is given: ``Matmul::compute_output_specs`` (ttnn/cpp/ttnn/operations/matmul/device/matmul_op.cpp)
computes one from the program config and the inputs' padded shapes, keeps the given memory layout
and buffer type, and only logs "Using computed config" when they differ. ``Matmul::validate`` then
checks the given layout against the variant. Pure layout math: plain shapes in, a MemoryConfig out.

>>> pc = MatmulMultiCoreReuseMultiCast1DProgramConfig(compute_with_storage_grid_size=(8, 4),
...     in0_block_w=2, out_subblock_h=1, out_subblock_w=1, out_block_h=1, out_block_w=1,
...     per_core_M=1, per_core_N=2, fuse_batch=True, mcast_in0=True)
>>> out = matmul_output_memory_config("matmul", pc, ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
...     (1, 1, 32, 64), (1, 1, 64, 512), None, CoreCoord(8, 8))
>>> out.shard_spec.shape, out.shard_spec.grid.num_cores()
((32, 64), 8)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ttjax._src.core.errors import MemoryConfigError
from ttjax._src.core.hardware import (
    CoreCoord,
    CoreRange,
    CoreRangeSet,
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseProgramConfig,
    MemoryConfig,
    ShardOrientation,
    ShardSpec,
    TensorMemoryLayout,
    num_cores_to_corerangeset,
)

TILE = 32
_SHARDED_CONFIGS = (
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseProgramConfig,
)


def _rows_tiles(padded: Sequence[int]) -> int:
    """``physical_volume / padded_shape[-1] / tile_height``: every row of a, in tiles."""
    return int(np.prod(padded[:-1], dtype=np.int64)) // TILE


def _blocks(m: int, n: int, per_core_m: int, per_core_n: int) -> tuple[int, int]:
    """``num_blocks_y``, ``num_blocks_x``: ``((M - 1) / per_core_M) + 1`` and the same for N."""
    return (m - 1) // per_core_m + 1, (n - 1) // per_core_n + 1


def _need(cond: bool, op: str, rule: str, fix: str) -> None:
    if not cond:
        raise MemoryConfigError(f"ttnn.{op}: {rule}.\nfix: {fix}")


def _grid(value: Any) -> CoreCoord:
    if isinstance(value, CoreCoord):
        return value
    if hasattr(value, "x") and hasattr(value, "y"):
        return CoreCoord(int(value.x), int(value.y))
    return CoreCoord(int(value[0]), int(value[1]))


def check_matmul_program_config(op: str, program_config: Any, a_padded: Sequence[int]) -> None:
    """A matmul program config's shape rules, checked when the matmul runs (``Matmul::validate``
    in matmul_op.cpp), never when the config is built: a model may build configs for several
    sizes and use one. The 1D/2D/reuse variants need ``Kt % in0_block_w == 0``,
    ``per_core_M % out_subblock_h == 0`` and ``per_core_N % out_subblock_w == 0`` (and, for
    1D/2D, ``per_core_M % out_block_h`` / ``per_core_N % out_block_w`` when those are set)."""
    pc = program_config
    if not isinstance(
        pc,
        (
            MatmulMultiCoreReuseMultiCast1DProgramConfig,
            MatmulMultiCoreReuseMultiCastProgramConfig,
            MatmulMultiCoreReuseProgramConfig,
        ),
    ):
        return
    name = type(pc).__name__
    ints = {
        f: getattr(pc, f, None)
        for f in (
            "in0_block_w",
            "out_subblock_h",
            "out_subblock_w",
            "out_block_h",
            "out_block_w",
            "per_core_M",
            "per_core_N",
        )
        if isinstance(getattr(pc, f, None), int)
    }
    for f, v in ints.items():
        _need(v != 0, op, f"{name}: {f} is 0, which is not valid", f"set {f} >= 1.")
    kt = int(a_padded[-1]) // TILE
    pairs = [
        ("in0_block_w", kt, f"Kt ({kt}) must be divisible by in0_block_w"),
        (
            "out_subblock_h",
            ints.get("per_core_M"),
            "per_core_M must be divisible by out_subblock_h",
        ),
        (
            "out_subblock_w",
            ints.get("per_core_N"),
            "per_core_N must be divisible by out_subblock_w",
        ),
        ("out_block_h", ints.get("per_core_M"), "per_core_M must be divisible by out_block_h"),
        ("out_block_w", ints.get("per_core_N"), "per_core_N must be divisible by out_block_w"),
    ]
    for field, total, rule in pairs:
        part = ints.get(field)
        if part and total is not None:
            _need(total % part == 0, op, f"{name}: {rule} ({total} % {part} != 0)",
                  f"pick a {field} that divides {total} for this tensor.")  # fmt: skip


def matmul_output_memory_config(
    op: str,
    program_config: Any,
    memory_config: MemoryConfig,
    a_padded: Sequence[int],
    b_padded: Sequence[int],
    a_shard_spec: ShardSpec | None,
    device_grid: CoreCoord,
    b_shard_spec: ShardSpec | None = None,
) -> MemoryConfig:
    """The output memory config TT-NN gives a matmul: ``memory_config`` itself unless it is
    sharded and ``program_config`` is one of the sharded variants, else the same layout and
    buffer type with the shard spec computed from the program config (per variant, as in
    ``Matmul::compute_output_specs``). ``a_padded``/``b_padded`` are the per-device padded
    shapes after any transpose; ``device_grid`` is the device's compute-with-storage grid (the
    DRAM-sharded variant shards over it)."""
    if not memory_config.is_sharded() or not isinstance(program_config, _SHARDED_CONFIGS):
        return memory_config
    pc = program_config
    layout = memory_config.memory_layout
    n = int(b_padded[-1]) // TILE
    pm, pn = int(pc.per_core_M), int(pc.per_core_N)
    _need(pm > 0 and pn > 0, op, f"per_core_M {pm} and per_core_N {pn} must be positive",
          "set per_core_M/per_core_N to the output tiles each core computes.")  # fmt: skip
    shard = (pm * TILE, pn * TILE)
    name = type(pc).__name__

    if isinstance(pc, MatmulMultiCoreReuseMultiCast1DProgramConfig):
        m = _rows_tiles(a_padded) if pc.fuse_batch else int(a_padded[-2]) // TILE
        if pc.mcast_in0 or pc.gather_in0:
            _need(
                layout is TensorMemoryLayout.WIDTH_SHARDED,
                op,
                f"{name} with mcast_in0/gather_in0 writes a WIDTH_SHARDED output, not {layout!r}",
                "pass a width-sharded memory_config (e.g. ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG).",
            )
            _need(m == pm, op, f"M ({m} tiles) must be equal to per_core_M ({pm})",
                  f"set per_core_M={m} (the activation's rows, in tiles).")  # fmt: skip
        else:
            _need(
                layout is TensorMemoryLayout.HEIGHT_SHARDED,
                op,
                f"{name} with mcast_in0=False writes a HEIGHT_SHARDED output, not {layout!r}",
                "pass a height-sharded memory_config (or set mcast_in0=True for width sharding).",
            )
            _need(n == pn, op, f"N ({n} tiles) must be equal to per_core_N ({pn})",
                  f"set per_core_N={n} (the weight's columns, in tiles).")  # fmt: skip
        if pc.gather_in0:
            # The ring matmul writes where the given spec says (it must have one).
            _need(
                memory_config.shard_spec is not None,
                op,
                "Output shard spec must be provided when using gather_in0",
                "pass a memory_config with a shard_spec on the ring's cores.",
            )
            return memory_config
        blocks_y, blocks_x = _blocks(m, n, pm, pn)
        cores = num_cores_to_corerangeset(
            blocks_x * blocks_y, _grid(pc.compute_with_storage_grid_size), row_wise=True
        )
        spec = ShardSpec(cores, shard, ShardOrientation.ROW_MAJOR)
    elif isinstance(pc, MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig):
        m = _rows_tiles(a_padded)
        _need(
            a_shard_spec is not None and layout is TensorMemoryLayout.WIDTH_SHARDED,
            op,
            f"{name} takes a width-sharded activation and writes a WIDTH_SHARDED output "
            f"(got output {layout!r}, activation {'sharded' if a_shard_spec else 'interleaved'})",
            "width-shard the activation (ttnn.to_memory_config) and the output.",
        )
        assert a_shard_spec is not None
        k, pk = int(a_padded[-1]) // TILE, a_shard_spec.shape[1] // TILE
        _need(pk > 0 and k % pk == 0, op,
              f"in DRAM sharded Matmul we don't have support for un-even sharding currently. "
              f"K: {k}, per_core_K: {pk}", "shard the activation's width evenly.")  # fmt: skip
        blocks_y, blocks_x = _blocks(m, n, pm, pn)
        cores = num_cores_to_corerangeset(blocks_x * blocks_y, device_grid, row_wise=True)
        spec = ShardSpec(cores, shard, ShardOrientation.ROW_MAJOR)
    elif isinstance(pc, MatmulMultiCoreReuseMultiCastProgramConfig):
        _need(
            layout is TensorMemoryLayout.BLOCK_SHARDED,
            op,
            f"{name} (2-D multicast) writes a BLOCK_SHARDED output, not {layout!r}",
            "pass a block-sharded memory_config.",
        )
        blocks_y, blocks_x = _blocks(_rows_tiles(a_padded), n, pm, pn)
        if pc.transpose_mcast:
            grid = CoreRangeSet([CoreRange((0, 0), (blocks_y - 1, blocks_x - 1))])
            spec = ShardSpec(grid, shard, ShardOrientation.COL_MAJOR)
        else:
            grid = CoreRangeSet([CoreRange((0, 0), (blocks_x - 1, blocks_y - 1))])
            spec = ShardSpec(grid, shard, ShardOrientation.ROW_MAJOR)
    else:
        _need(
            layout is not TensorMemoryLayout.WIDTH_SHARDED,
            op,
            f"{name} does not write a WIDTH_SHARDED output",
            "pass a height- or block-sharded memory_config.",
        )
        blocks_y, blocks_x = _blocks(_rows_tiles(a_padded), n, pm, pn)
        orientation = ShardOrientation.COL_MAJOR
        if a_shard_spec is not None:
            orientation = a_shard_spec.orientation
        elif b_shard_spec is not None:
            orientation = b_shard_spec.orientation
        cores = num_cores_to_corerangeset(
            blocks_x * blocks_y,
            _grid(pc.compute_with_storage_grid_size),
            row_wise=orientation is ShardOrientation.ROW_MAJOR,
        )
        spec = ShardSpec(cores, shard, orientation)
    return MemoryConfig(layout, memory_config.buffer_type, spec)


__all__ = ["check_matmul_program_config", "matmul_output_memory_config"]
