"""Helpers shared by the op families: hardware kwargs, scalars, dims, in-place outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ttjax import _specs
from ttjax.enums import DataType
from ttjax.errors import MemoryConfigError, ShapeMismatchError, TTJaxError
from ttjax.hardware import LayerNormShardedMultiCoreProgramConfig
from ttjax.tensor import Tensor

# Keyword arguments TT-NN ops take to tune hardware execution. ttjax accepts them so real TT-NN
# code runs unchanged; they never change a result (XLA makes these choices).
HW_KWARGS = frozenset(
    {
        "memory_config",
        "program_config",
        "compute_kernel_config",
        "core_grid",
        "queue_id",
        "cq_id",
        "sub_core_grids",
        "use_1d_systolic_array",
        "output_tile",
        "global_cb",
        "sub_device_id",
        "subdevice_id",
        "use_multicore",
        "numeric_stable",
        "fp32_dest_acc_en",
        "math_fidelity",
        "enable_split_reader",
        "fast_and_approximate_mode",
        "pad_value",
        "vector_mode",
        "mesh_device",
        "num_links",
        "num_workers",
        "num_buffers_per_channel",
    }
)


def check_hw_kwargs(op: str, kwargs: Mapping[str, Any]) -> None:
    """Reject keyword arguments that are neither the op's own nor TT-NN hardware knobs."""
    unknown = sorted(k for k in kwargs if k not in HW_KWARGS)
    if unknown:
        raise TypeError(
            f"ttnn.{op} got unexpected keyword argument(s) {unknown}.\n"
            f"fix: check the spelling against TT-NN's signature of ttnn.{op}."
        )


def is_scalar(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def norm_dim(op: str, t: Tensor, dim: int, name: str = "dim") -> int:
    rank = len(t._shape)
    d = _specs.normalize_dim(dim, max(rank, 1))
    if d is None:
        raise ShapeMismatchError(
            f"ttnn.{op}: {name}={dim!r} is out of range for a tensor of per-device shape "
            f"{list(t._shape)} (rank {rank}).\nfix: use {name} in [{-rank}, {rank - 1}]."
        )
    return d


def check_dtype(op: str, dtype: Any) -> DataType | None:
    if dtype is None or isinstance(dtype, DataType):
        return dtype
    raise TTJaxError(
        f"ttnn.{op}: dtype={dtype!r} is not a ttnn DataType.\nfix: e.g. dtype=ttnn.bfloat16."
    )


def write_output(result: Tensor, output_tensor: Tensor | None) -> Tensor:
    """TT-NN's ``output_tensor=``: the result is written into that tensor, which is returned."""
    if output_tensor is None:
        return result
    if output_tensor._shape != result._shape or output_tensor._dtype is not result._dtype:
        raise ShapeMismatchError(
            f"output_tensor has per-device shape {list(output_tensor._shape)} {output_tensor._dtype!r}"
            f" but the op produces {list(result._shape)} {result._dtype!r}.\n"
            "fix: preallocate output_tensor with the result's shape and dtype."
        )
    return output_tensor.assign(result)


def check_norm_program_config(
    op: str, program_config: Any, x: Tensor, residual: Tensor | None = None
) -> None:
    """A ``LayerNormShardedMultiCoreProgramConfig``'s rules, checked when the norm runs on ``x``
    (``LayerNorm::validate``, ttnn/cpp/ttnn/operations/normalization/layernorm/device/
    layernorm_op.cpp): ``block_w % subblock_w == 0`` and, for a sharded input, ``block_h`` and
    ``block_w`` tiles are its shard's height and width and a residual shares its shard spec."""
    if not isinstance(program_config, LayerNormShardedMultiCoreProgramConfig):
        return
    pc = program_config
    name = type(pc).__name__

    def need(cond: bool, rule: str, fix: str) -> None:
        if not cond:
            raise MemoryConfigError(f"ttnn.{op}: {name}: {rule}.\nfix: {fix}")

    sw, bw, bh = pc.subblock_w, pc.block_w, pc.block_h
    if isinstance(sw, int) and isinstance(bw, int) and sw > 0:
        need(bw % sw == 0, f"block_w ({bw}) must be divisible by subblock_w ({sw})",
             "pick a subblock_w that divides block_w.")  # fmt: skip
    spec = x._spec.memory_config.shard_spec if x.is_sharded() else None
    if spec is None:
        return
    if isinstance(bh, int):
        need(bh * 32 == spec.shape[0],
             f"Block height * TILE_HEIGHT must match shard shape[0], got {bh * 32} vs "
             f"{spec.shape[0]}", f"set block_h={spec.shape[0] // 32} for this tensor.")  # fmt: skip
    if isinstance(bw, int):
        need(bw * 32 == spec.shape[1],
             f"Block width * TILE_WIDTH must match shard shape[1], got {bw * 32} vs "
             f"{spec.shape[1]}", f"set block_w={spec.shape[1] // 32} for this tensor.")  # fmt: skip
    if residual is not None:
        rspec = residual._spec.memory_config.shard_spec if residual.is_sharded() else None
        need(rspec == spec,
             f"Residual tensor shard spec must match input shard spec, got residual: {rspec} vs "
             f"input: {spec}", "shard the residual as the input is sharded.")  # fmt: skip


def check_sdpa_program_config(op: str, program_config: Any) -> None:
    """An ``SDPAProgramConfig``'s rules, checked when attention runs (``ScaledDotProductAttention::
    validate``, ttnn/cpp/ttnn/operations/transformer/sdpa/device/sdpa_op.cpp, and the windowed
    one): ``q_chunk_size`` and ``k_chunk_size`` are multiples of the tile width, 32."""
    if program_config is None:
        return
    for field in ("q_chunk_size", "k_chunk_size"):
        v = getattr(program_config, field, None)
        if isinstance(v, (int, np.integer)) and int(v) % 32:
            raise MemoryConfigError(
                f"ttnn.transformer.{op}: {field} must be divisible by TILE_SIZE. Got {field}: "
                f"{int(v)}, TILE_SIZE: 32.\nfix: use a multiple of 32 (e.g. {(int(v) // 32 + 1) * 32})."
            )


def core_set(grid: Any) -> set[tuple[int, int]]:
    """Every (x, y) core of a shard grid (a CoreRangeSet or one CoreRange): what TT-NN's
    ``CoreRangeSet::intersects`` and ``num_cores`` compare when two inputs must use disjoint
    cores."""
    ranges = grid.ranges() if hasattr(grid, "ranges") else [grid]
    return {
        (x, y)
        for r in ranges
        for x in range(r.start.x, r.end.x + 1)
        for y in range(r.start.y, r.end.y + 1)
    }
