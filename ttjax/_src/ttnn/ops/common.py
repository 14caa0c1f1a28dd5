"""Helpers shared by the op families: hardware kwargs, scalars, dims, indices, page tables,
in-place outputs, and the conv and pool families' kernel/stride/padding argument checks."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ttjax._src.core import specs as _specs
from ttjax._src.core.enums import DataType
from ttjax._src.core.errors import (
    ConfigError,
    MemoryConfigError,
    ShapeMismatchError,
    TTJaxError,
    UnsupportedDTypeError,
)
from ttjax._src.core.hardware import LayerNormShardedMultiCoreProgramConfig
from ttjax._src.core.tensor import Tensor

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


def _check_index(op: str, name: str, value: int, size: int, what: str) -> int:
    """A position/batch index in ``[0, size)``; XLA would clamp an out-of-range one silently."""
    v = int(value)
    if not 0 <= v < size:
        raise ShapeMismatchError(
            f"ttnn.{op}: {name}={v} is out of range for {what} of size {size} (per device).\n"
            f"fix: use {name} in [0, {size - 1}]."
        )
    return v


def _check_int_tensor(
    op: str, name: str, t: Any, shape: tuple[int | None, ...], what: str, flat: bool = False
) -> None:
    """A page table / position tensor: an int32 ttnn Tensor of the per-device shape TT-NN expects
    (``flat``: of any rank holding that many values, e.g. [batch, 1] for [batch])."""
    if not isinstance(t, Tensor):
        raise TTJaxError(
            f"ttnn.{op}: {name} is a {type(t).__name__}, not a ttnn Tensor.\n"
            f"fix: pass {what} as ttnn.from_torch(x, dtype=ttnn.int32, device=mesh_device)."
        )
    if t._dtype not in (DataType.INT32, DataType.UINT32, DataType.UINT16):
        raise UnsupportedDTypeError(
            f"ttnn.{op}: {name} has dtype {t._dtype!r}; TT-NN expects int32 {what}.\n"
            f"fix: create it with dtype=ttnn.int32."
        )
    got = tuple(t._shape)
    if flat and got and math.prod(got) == math.prod(w or 0 for w in shape):
        return
    if len(got) != len(shape) or any(w is not None and g != w for g, w in zip(got, shape)):
        want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
        raise ShapeMismatchError(
            f"ttnn.{op}: {name} has per-device shape {list(got)}, expected {want} ({what}).\n"
            f"fix: give {name} that shape on every device (shard it like the users it indexes)."
        )


def _check_page_table(op: str, page_table: Any, users: int, cache: Tensor) -> int:
    """TT-NN's page table: int32 [users, max_num_blocks_per_seq], each entry a block of ``cache``
    ([max_num_blocks, nkv, block_size, d]). Returns the users' maximum sequence length."""
    _check_int_tensor(
        op, "page_table", page_table, (users, None), "a page table [batch, max_num_blocks_per_seq]"
    )
    blocks = page_table._shape[1]
    if blocks == 0 or page_table._shape[0] == 0:
        raise ShapeMismatchError(
            f"ttnn.{op}: page_table has per-device shape {list(page_table._shape)}: no users or "
            "no blocks.\nfix: slice the page table to at least one user and one block."
        )
    if blocks > cache._shape[0]:
        raise ShapeMismatchError(
            f"ttnn.{op}: page_table has {blocks} blocks per user but the paged cache holds only "
            f"{cache._shape[0]} blocks (cache shape {list(cache._shape)}).\n"
            "fix: max_num_blocks_per_seq must be <= max_num_blocks (the cache's dim 0)."
        )
    return int(blocks * cache._shape[2])


def page_table_rows(op: str, table: Any, users: int) -> int:
    """The page table's rows as ``sdpa_decode_op.cpp`` and ``paged_cache_operation.cpp`` check
    them: ``users`` when interleaved; a height-sharded table (UINT16) holds the whole [users,
    blocks] table on each of its cores, so its height over the core count must be ``users`` (the
    kernels read their own core's copy; ops read the first ``users`` rows)."""
    if not (isinstance(table, Tensor) and table.is_sharded()):
        return users
    spec = table.memory_config().shard_spec
    cores = spec.num_cores() if spec is not None else 1
    rows = table._shape[0] if table._shape else 0
    if table._dtype is not DataType.UINT16 or rows // cores != users:
        raise ShapeMismatchError(
            f"ttnn.{op}: a sharded page_table must be UINT16 with shard height batch "
            f"size {users} equal to Q on {cores} cores (got {table._dtype!r}, shape "
            f"{list(table._shape)}).\nfix: repeat the [batch, blocks] table once per core of "
            "its shard grid (page_table.repeat(num_cores, 1)) and store it as ttnn.uint16."
        )
    return rows


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


def _pair(op: str, name: str, value: Any, sizes: tuple[int, ...] = (2,)) -> tuple[int, ...]:
    seq = (value, value) if isinstance(value, (int, np.integer)) and 2 in sizes else value
    try:
        out = tuple(int(v) for v in seq)
    except (TypeError, ValueError):
        out = ()
    if len(out) not in sizes or any(v < 0 for v in out):
        forms = " or ".join(f"{n} non-negative ints" for n in sizes)
        raise ConfigError(
            f"ttnn.{op}: {name}={value!r} is not {forms}.\n"
            f"fix: pass {name} as a list of {forms} (TT-NN's binding takes std::array)."
        )
    return out


def _pads4(op: str, padding: Any) -> tuple[int, int, int, int]:
    """TT-NN's ``get_pair_n4_padding``: (h, w) -> (top, bottom, left, right)."""
    p = _pair(op, "padding", padding, (2, 4))
    if len(p) == 2:
        return (p[0], p[0], p[1], p[1])
    return (p[0], p[1], p[2], p[3])


def _positive(op: str, **values: int) -> None:
    for name, v in values.items():
        if int(v) <= 0:
            raise ConfigError(
                f"ttnn.{op}: {name}={v} must be greater than 0.\nfix: pass the real {name}."
            )
