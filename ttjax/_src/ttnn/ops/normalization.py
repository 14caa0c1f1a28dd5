"""TT-NN's group norm (``ttnn.group_norm``) and the host helpers that lay out its inputs.

TT-NN normalizes groups of the last dim of an ``[N, 1, H*W, C]`` tensor. Its kernels split the
channels into equal chunks, one per core column: the "virtual columns" of the interleaved
(DRAM) program (``num_virtual_cols`` from the core grid: the most, up to ``core_grid.x`` and the
group count, whose chunks are whole tiles and hold whole groups), or the shards' columns of a
sharded input. Each chunk is padded to whole tiles, and so are the weight and bias rows
(``ttnn.create_group_norm_weight_bias_rm``); the input mask (``ttnn.create_group_norm_input_mask``)
holds, per group, ``block_wt`` tiles that select the group's channels from the tile its first
channel sits in. ``ttnn.group_norm`` reads those inputs exactly so (ttnn/cpp/ttnn/operations/
normalization/groupnorm/device/multi_core/groupnorm_op_multi_core.cpp and the compute kernel
kernels/compute/groupnorm.cpp), so the mask's ones and the weights' places decide the values:

- a group's mean and variance are the sums of the masked inputs (and of the masked squared
  deviations) divided by ``rows * channels_per_group``, the rows counted with tile padding;
- the output is ``sum over groups of (x - mean) * mask * rsqrt(var + eps)``, then ``* gamma +
  beta`` per channel, in bfloat16.

>>> mask = ttnn.create_group_norm_input_mask(64, 4, 1)
>>> tuple(mask.shape), mask[0, 1, 0].tolist()[14:18]
((1, 4, 32, 32), [0.0, 0.0, 1.0, 1.0])
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import TILE_SIZE, DataType, Layout, StorageType
from ttjax._src.core.errors import (
    ConfigError,
    LayoutError,
    MemoryConfigError,
    ShapeMismatchError,
    UnsupportedDTypeError,
)
from ttjax._src.core.hardware import (
    DRAM_MEMORY_CONFIG,
    CoreGrid,
    MemoryConfig,
    ShardOrientation,
    ShardStrategy,
    TensorMemoryLayout,
    create_sharded_memory_config,
)
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.common import write_output

__all__ = [
    "create_group_norm_input_mask",
    "create_group_norm_input_negative_mask",
    "create_group_norm_reciprocals",
    "create_group_norm_weight_bias_rm",
    "determine_expected_group_norm_sharded_config_and_grid_size",
    "dram_group_norm_virtual_columns",
    "find_closest_largest_divisor",
    "find_max_tile_span",
    "get_group_norm_cores_across_channel",
    "group_norm",
]


# ---------------------------------------------------------------------------------------------
# Host helpers (ttnn/ttnn/operations/normalization.py): torch tensors in, torch tensors out
# ---------------------------------------------------------------------------------------------


def find_closest_largest_divisor(num: int, start_divisor: int) -> int:
    """The largest divisor of ``num`` that is at most ``start_divisor`` (a core count).

    >>> ttnn.ops.normalization.find_closest_largest_divisor(24, 7)
    6
    """
    d = int(start_divisor)
    while d > 1 and num % d:
        d -= 1
    return max(d, 1)


def find_max_tile_span(W: int, group_size: int, tile_width: int = TILE_SIZE) -> int:
    """The most tiles of ``tile_width`` one group of ``group_size`` channels touches, groups laid
    side by side over ``W`` channels: the mask's width in tiles (``block_wt``).

    >>> ttnn.ops.normalization.find_max_tile_span(96, 24, 32)
    2
    """
    span, start = 0, 0
    while start < W:
        end = start + group_size
        span = max(span, (end - 1) // tile_width - start // tile_width + 1)
        start = end
    return span


def dram_group_norm_virtual_columns(core_grid: Any, num_channels: int, num_groups: int) -> int:
    """How many column chunks TT-NN's Python helpers cut the channels into for the DRAM program:
    the most, up to ``core_grid.x`` and ``num_groups``, whose chunks are whole tiles.

    >>> ttnn.ops.normalization.dram_group_norm_virtual_columns(ttnn.CoreGrid(y=8, x=8), 128, 8)
    4
    """
    cols = min(int(core_grid.x), int(num_groups))
    while cols > 1 and (num_channels / cols) % TILE_SIZE != 0:
        cols -= 1
    if (num_channels / cols) % TILE_SIZE != 0:
        raise ShapeMismatchError(
            f"dram_group_norm_virtual_columns: {num_channels} channels do not split into whole "
            f"tiles of {TILE_SIZE} for any column count up to {min(core_grid.x, num_groups)}.\n"
            "fix: pad the channels to a multiple of 32."
        )
    return cols


def create_group_norm_weight_bias_rm(input_tensor: Any, num_channels: int, num_cores_x: int) -> Any:
    """Gamma or beta ``[C]`` as TT-NN's group norm reads it: cut into ``num_cores_x`` chunks,
    each zero-padded to whole tiles, as rows of 32: ``[1, 1, rows, 32]`` (torch).

    >>> ttnn.create_group_norm_weight_bias_rm(torch.ones(48), 48, 2).shape
    torch.Size([1, 1, 2, 32])
    """
    import torch

    per_chunk = int(num_channels) // int(num_cores_x)
    padded = -(-per_chunk // TILE_SIZE) * TILE_SIZE
    chunks = input_tensor.reshape(-1, per_chunk)
    chunks = torch.nn.functional.pad(chunks, (0, padded - per_chunk))
    return chunks.flatten().reshape(1, 1, -1, TILE_SIZE)


def _group_mask(num_channel: int, num_groups: int, num_cores: int, negative: bool) -> Any:
    import torch

    group_size = int(num_channel) // int(num_groups)
    block_wt = find_max_tile_span(int(num_channel), group_size)
    fill, mark = (1.0, 0.0) if negative else (0.0, 1.0)
    mask = torch.full((1, num_groups, TILE_SIZE, TILE_SIZE * block_wt), fill, dtype=torch.bfloat16)
    per_core = max(int(num_groups) // int(num_cores), 1)
    for g in range(num_groups):
        start = ((g % per_core) * group_size) % TILE_SIZE  # within the tile the group starts in
        mask[:, g, :, start : start + group_size] = mark
    return mask


def create_group_norm_input_mask(
    num_channel: int, num_groups: int, num_cores_across_channel: int
) -> Any:
    """The group norm input mask ``[1, num_groups, 32, 32 * block_wt]`` (torch bfloat16): for
    each group, ones over its channels counted from the tile its first channel is in, the
    groups dealt out evenly to ``num_cores_across_channel`` chunks (each starting on a tile)."""
    return _group_mask(num_channel, num_groups, num_cores_across_channel, negative=False)


def create_group_norm_input_negative_mask(
    num_channel: int, num_groups: int, num_cores_across_channel: int
) -> Any:
    """The complement of ``ttnn.create_group_norm_input_mask`` (zeros over each group's
    channels), which TT-NN's sharded row-major program takes as ``negative_mask``."""
    return _group_mask(num_channel, num_groups, num_cores_across_channel, negative=True)


def create_group_norm_reciprocals(
    N: int, C: int, H: int, W: int, num_groups: int, core_grid: Any
) -> Any:
    """``1/1, 1/2, ..., 1/n`` (float32), one row per core of ``core_grid``: what the Welford
    group norm takes as ``reciprocals`` (n: the values one core accumulates for one group)."""
    import torch

    cols = dram_group_norm_virtual_columns(core_grid, C, num_groups)
    rows = (core_grid.x // cols) * core_grid.y
    rows_per_group = 1 if N >= rows else rows // N
    per_group = (C // num_groups) * math.ceil(H * W / TILE_SIZE)
    n = per_group // rows_per_group
    values = 1.0 / torch.arange(1, n + 1, dtype=torch.float32)
    return values.repeat(core_grid.x * core_grid.y, 1)


def get_group_norm_cores_across_channel(memory_layout: Any, core_grid: Any) -> int:
    """The chunk count TT-NN's golden function splits gamma into for a memory layout."""
    if memory_layout is TensorMemoryLayout.BLOCK_SHARDED:
        return int(core_grid.y)
    if memory_layout is TensorMemoryLayout.HEIGHT_SHARDED:
        return 1
    return int(core_grid.x * core_grid.y)


def determine_expected_group_norm_sharded_config_and_grid_size(
    *,
    device: Any,
    num_channels: int,
    num_groups: int,
    input_nhw: int,
    is_height_sharded: bool,
    is_row_major: bool = False,
) -> tuple[MemoryConfig, CoreGrid]:
    """The sharded L1 memory config and core grid TT-NN's helper picks for a group norm input of
    ``input_nhw`` rows and ``num_channels`` channels: height-sharded over up to the whole grid,
    or block-sharded (rows over ``grid.x``, channels over ``grid.y``; transposed when
    ``is_row_major``), each core's channels holding whole groups."""
    if num_channels % num_groups or num_channels % TILE_SIZE:
        raise ShapeMismatchError(
            f"determine_expected_group_norm_sharded_config_and_grid_size: num_channels="
            f"{num_channels} must be a multiple of num_groups={num_groups} and of 32.\n"
            "fix: pad the channels."
        )
    group_size = num_channels // num_groups
    g = device.compute_with_storage_grid_size()
    grid = [g.y, g.x] if is_row_major else [g.x, g.y]
    nhw_tiles = math.ceil(input_nhw / TILE_SIZE)
    cores_nhw = find_closest_largest_divisor(
        nhw_tiles, grid[0] * grid[1] if is_height_sharded else grid[0]
    )
    cores_c = 1
    if not is_height_sharded:
        cores_c = grid[1]
        while cores_c > 1 and (
            (num_channels // 8) % cores_c or (num_channels // cores_c) % group_size
        ):
            cores_c -= 1
    nhw_padded = math.ceil(input_nhw / (cores_nhw * TILE_SIZE)) * cores_nhw * TILE_SIZE
    c_per_core = num_channels // cores_c
    if c_per_core % 8:
        raise ShapeMismatchError(
            f"determine_expected_group_norm_sharded_config_and_grid_size: {c_per_core} channels "
            "per core is not a multiple of 8.\nfix: pick num_channels / num_groups to allow it."
        )
    nhw_per_core = nhw_padded // cores_nhw
    if is_height_sharded:
        size = [min(grid[0], cores_nhw), math.ceil(cores_nhw / grid[0])]
    else:
        size = [cores_c, cores_nhw] if is_row_major else [cores_nhw, cores_c]
    shard = (1, 1, nhw_per_core, c_per_core) if is_row_major else (1, 1, c_per_core, nhw_per_core)
    core_grid = CoreGrid(y=size[1], x=size[0])
    orientation = (
        ShardOrientation.ROW_MAJOR
        if is_height_sharded or is_row_major
        else ShardOrientation.COL_MAJOR
    )
    strategy = ShardStrategy.HEIGHT if is_height_sharded else ShardStrategy.BLOCK
    config = create_sharded_memory_config(
        shard, core_grid, strategy, orientation, use_height_and_width_as_shard_shape=True
    )
    return config, core_grid


# ---------------------------------------------------------------------------------------------
# The op (groupnorm.cpp, device/groupnorm_op.cpp, multi_core/groupnorm_op_multi_core.cpp)
# ---------------------------------------------------------------------------------------------


def _fail(cls: type[Exception], message: str, fix: str) -> NoReturn:
    raise cls(f"ttnn.group_norm: {message}\nfix: {fix}")


def _check_param(name: str, t: Tensor, x: Tensor) -> None:
    """gamma / beta: TILE with the input's width and a tile's height, or ROW_MAJOR bfloat16 rows
    of 32 (GroupNorm::validate)."""
    shape = tuple(t.padded_shape)
    if len(shape) > 4 or t._storage is not StorageType.DEVICE:
        _fail(
            LayoutError,
            f"{name} must be a tensor of rank <= 4 on the input's device, got {t!r}.",
            f"create_group_norm_weight_bias_rm, then ttnn.from_torch(..., device=mesh) for {name}.",
        )
    shape = (1,) * (4 - len(shape)) + shape
    if t._layout is Layout.TILE:
        if shape[3] != tuple(x.padded_shape)[3] or shape[2] != TILE_SIZE:
            _fail(
                ShapeMismatchError,
                f"a TILE {name} must be [.., 32, {tuple(x.padded_shape)[3]}], got {list(shape)}.",
                f"build {name} with create_group_norm_weight_bias_rm in ROW_MAJOR layout.",
            )
        return
    if shape[3] != TILE_SIZE:
        _fail(
            ShapeMismatchError,
            f"{name.capitalize()} tensor inner dimension must be TILE_WIDTH (32), got: {shape[3]}",
            f"build {name} with ttnn.create_group_norm_weight_bias_rm.",
        )
    if t._dtype is not DataType.BFLOAT16:
        _fail(
            UnsupportedDTypeError,
            f"{name.capitalize()} tensor must be BFLOAT16, got: {t._dtype!r}",
            f"ttnn.from_torch({name}, dtype=ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT).",
        )


def _check_mask(name: str, t: Tensor, num_groups: int) -> tuple[int, ...]:
    shape = tuple(t.padded_shape)
    shape = (1,) * (4 - len(shape)) + shape
    if t._layout is not Layout.TILE:
        _fail(
            LayoutError,
            f"{name} must have TILE layout, got: {t._layout!r}",
            f"ttnn.from_torch({name}, layout=ttnn.TILE_LAYOUT).",
        )
    if shape[1] != num_groups or shape[2] != TILE_SIZE or shape[3] % TILE_SIZE:
        _fail(
            ShapeMismatchError,
            f"{name} must be [1, num_groups={num_groups}, 32, 32 * block_wt], got {list(shape)}.",
            f"build it with ttnn.create_group_norm_input_mask(C, {num_groups}, chunks).",
        )
    return shape


def _chunking(x: Tensor, num_groups: int, core_grid: Any) -> tuple[int, int]:
    """(channels per chunk, chunk count): the DRAM program's virtual columns, or the shards'."""
    W = tuple(x.padded_shape)[3]
    group_size = W // num_groups
    if x.is_sharded():
        per_core_N = int(x.shard_spec().shape[1])
        if W % per_core_N:
            _fail(
                MemoryConfigError,
                f"W dim ({W}) must be divisible by per_core_N ({per_core_N})",
                "shard the channels evenly.",
            )
        chunks = W // per_core_N
        if num_groups % chunks:
            _fail(
                MemoryConfigError,
                f"num_groups ({num_groups}) must be divisible by number of cores in a full row "
                f"({chunks}); ttjax does not model one group spread over several channel shards",
                "shard the channels so that each shard holds whole groups.",
            )
    else:
        if W % TILE_SIZE:
            _fail(
                ShapeMismatchError,
                f"W (channels): {W} must be divisible by {TILE_SIZE}",
                "pad the channels to a multiple of 32.",
            )
        cols = min(int(core_grid.x), num_groups)
        while cols > 0 and ((W // cols) % TILE_SIZE or num_groups % cols):
            cols -= 1
        if cols == 0:
            _fail(
                ConfigError,
                "Core Grid resulted in virtual cores x = 0, Please try another core grid",
                "a core grid whose x lets whole groups fill whole tiles.",
            )
        rows = (int(core_grid.x) // cols) * int(core_grid.y)
        shape = tuple(x.padded_shape)
        H = shape[0] * shape[1] * shape[2]  # rows, as TT-NN compares them
        if H < rows:
            _fail(
                ConfigError,
                f"Total size of a slice across channel dimension:({H}) must be greater than or "
                f"equal to num_virtual_rows: ({rows}). Reduce grid_size as needed",
                "a smaller core_grid.",
            )
        per_core_N, chunks = W // cols, cols
    if per_core_N % group_size:
        _fail(
            ShapeMismatchError,
            f"per_core_N ({per_core_N}) must be divisible by num_channels_per_group ({group_size})",
            "pick a core grid or shard width holding whole groups.",
        )
    return per_core_N, chunks


def _layout_tables(
    W: int, num_groups: int, per_core_N: int, chunks: int, block_wt: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Static index tables, for each group and channel: the mask group and column the kernel
    multiplies it by, whether the group's tiles cover it, and whether it is the group's own."""
    group_size = W // num_groups
    per_core = num_groups // chunks
    mask_group = np.zeros((num_groups, W), np.int32)
    mask_col = np.zeros((num_groups, W), np.int32)
    covered = np.zeros((num_groups, W), np.float32)
    own = np.zeros((num_groups, W), np.float32)
    for c in range(chunks):
        for j in range(per_core):
            g = c * per_core + j
            lo = ((j * group_size) // TILE_SIZE) * TILE_SIZE  # the tile the group starts in
            cols = np.arange(lo, min(lo + block_wt * TILE_SIZE, per_core_N))
            mask_group[g, c * per_core_N + cols] = g % num_groups
            mask_col[g, c * per_core_N + cols] = cols - lo
            covered[g, c * per_core_N + cols] = 1.0
            own[g, c * per_core_N + j * group_size : c * per_core_N + (j + 1) * group_size] = 1.0
    return mask_group, mask_col, covered, own


def _param_index(per_core_N: int, chunks: int, rows: int) -> np.ndarray:
    """Where each channel's gamma/beta value sits in ``rows`` rows of 32: chunk ``c`` starts at
    row ``c * tiles_per_chunk`` (modulo the rows, as the writer kernel's tile ids wrap)."""
    tiles = -(-per_core_N // TILE_SIZE)
    starts = (np.arange(chunks) * tiles) % max(rows, 1)
    return (starts[:, None] * TILE_SIZE + np.arange(per_core_N)[None, :]).reshape(-1)


def group_norm(
    input_tensor: Tensor,
    *,
    num_groups: int,
    epsilon: float = 1e-12,
    input_mask: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    reciprocals: Tensor | None = None,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
    core_grid: Any = None,
    inplace: bool = True,
    output_layout: Layout | None = None,
    num_out_blocks: int | None = None,
    compute_kernel_config: Any = None,
    negative_mask: Tensor | None = None,
    use_welford: bool = False,
) -> Tensor:
    """TT-NN's ``ttnn.group_norm`` on ``[N, 1, H*W, C]``, per device, reading the mask and the
    weight/bias rows in TT-NN's chunked layout (the module docstring says how). The output is
    bfloat16 in ``output_layout`` (default: the input's); ``inplace`` writes a sharded input.
    ``negative_mask`` (the sharded row-major program's complement of the mask, which lets it
    share buffers), ``use_welford``/``reciprocals`` and ``num_out_blocks`` are checked as TT-NN
    checks them and change no values.

    >>> rep = ttnn.ReplicateTensorToMesh(mesh)
    >>> def put(t, layout=ttnn.TILE_LAYOUT):
    ...     return ttnn.from_torch(t, dtype=ttnn.bfloat16, layout=layout, device=mesh,
    ...                            mesh_mapper=rep)
    >>> mask = put(ttnn.create_group_norm_input_mask(64, 4, 1))
    >>> ones = put(ttnn.create_group_norm_weight_bias_rm(torch.ones(64), 64, 1), None)
    >>> y = ttnn.group_norm(put(torch.rand(1, 1, 32, 64)), num_groups=4, input_mask=mask,
    ...                     weight=ones, core_grid=ttnn.CoreGrid(y=1, x=1), inplace=False)
    >>> group0 = ttnn.to_torch(ttnn.get_device_tensors(y)[0])[..., :16].float()
    >>> round(float(group0.mean()), 2), round(float(group0.std()), 1)
    (0.0, 1.0)
    """
    x = input_tensor
    G = int(num_groups)
    if x._layout is Layout.TILE and inplace:
        _fail(
            ConfigError,
            f"In-place operation not supported: Tile layout requires non-inplace tensors. "
            f"(inplace={inplace})",
            "inplace=False (TT-NN's default is True).",
        )
    if output_layout is not None and inplace and output_layout is not x._layout:
        _fail(
            ConfigError,
            "In-place operation not allowed: Input and output tensor layouts differ. "
            f"(input_layout={x._layout!r}, output_layout={output_layout!r})",
            "inplace=False, or output_layout equal to the input's.",
        )
    if core_grid is None:
        _fail(
            ConfigError,
            "Automatic grid size determination is not supported. Please specify the grid size "
            "explicitly.",
            "core_grid=ttnn.CoreGrid(y=..., x=...).",
        )
    layout = x.memory_config().memory_layout
    if layout is TensorMemoryLayout.WIDTH_SHARDED:
        _fail(
            MemoryConfigError,
            "Unsupported memory layout: Input tensor cannot be width-sharded.",
            "height- or block-shard the input, or keep it interleaved.",
        )
    if len(x._shape) != 4:
        _fail(
            ShapeMismatchError,
            f"Invalid tensor shape: Input tensor must have rank 4. (rank={len(x._shape)})",
            "reshape the input to [N, 1, H*W, C].",
        )
    if G <= 0 or x._shape[3] % G:
        _fail(
            ShapeMismatchError,
            f"Invalid channel configuration: Number of channels ({x._shape[3]}) must be "
            f"divisible by the number of groups ({G}).",
            "a num_groups that divides the channels.",
        )
    padded = tuple(x.padded_shape)
    if (padded[0] * padded[1] * padded[2]) % TILE_SIZE:
        _fail(
            ShapeMismatchError,
            f"Invalid tensor dimensions: The product of NHW dimensions "
            f"({padded[0] * padded[1] * padded[2]}) must be divisible by the tile size (32).",
            "pad H*W (or use TILE layout, which pads each batch's rows).",
        )
    if x._storage is not StorageType.DEVICE:
        _fail(
            LayoutError,
            "Invalid input tensor storage type: Input tensor must be on device.",
            "ttnn.to_device(x, mesh) first.",
        )
    if x._dtype is not DataType.BFLOAT16:
        _fail(
            UnsupportedDTypeError,
            f"Input tensor must be BFLOAT16, got: {x._dtype!r}",
            "ttnn.typecast(x, ttnn.bfloat16) first.",
        )
    if padded[1] != 1:
        _fail(
            ShapeMismatchError,
            f"input tensor shape[1] must be 1! (shape {list(x._shape)})",
            "reshape the input to [N, 1, H*W, C].",
        )
    out_layout = output_layout if output_layout is not None else x._layout
    if inplace and not x.is_sharded():
        _fail(
            ConfigError,
            "inplace groupnorm not supported for unsharded tensors",
            "inplace=False for an interleaved input (TT-NN's default is True).",
        )
    for name, t in (("gamma", weight), ("beta", bias)):
        if t is not None:
            _check_param(name, t, x)
    if weight is not None and bias is not None and weight._layout is not bias._layout:
        _fail(
            LayoutError,
            f"Gamma and beta must have the same layout, got gamma: {weight._layout!r} vs beta: "
            f"{bias._layout!r}",
            "build both with create_group_norm_weight_bias_rm in ROW_MAJOR layout.",
        )
    if x.is_sharded() and any(t is not None and t._layout is Layout.TILE for t in (weight, bias)):
        _fail(
            LayoutError,
            "Gamma tensor must have ROW_MAJOR layout for a sharded input",
            "ttnn.from_torch(gamma, layout=ttnn.ROW_MAJOR_LAYOUT).",
        )
    mask_shape = _check_mask("Input mask", input_mask, G) if input_mask is not None else None
    if negative_mask is not None:
        _check_mask("Negative mask", negative_mask, G)
        if (
            not x.is_sharded()
            or x._layout is not Layout.ROW_MAJOR
            or out_layout is not (Layout.ROW_MAJOR)
        ):
            _fail(
                LayoutError,
                "Negative mask support is only available for sharded ROW_MAJOR input and output "
                "tensors.",
                "drop negative_mask, or shard a ROW_MAJOR input with a ROW_MAJOR output.",
            )
    if reciprocals is not None:
        if not use_welford:
            _fail(
                ConfigError,
                "Reciprocals tensor can only be provided when use_welford is True",
                "use_welford=True, or drop reciprocals.",
            )
        if reciprocals._dtype is not DataType.FLOAT32:
            _fail(
                UnsupportedDTypeError,
                f"Reciprocals tensor must be FLOAT32, got: {reciprocals._dtype!r}",
                "ttnn.from_torch(ttnn.create_group_norm_reciprocals(...), dtype=ttnn.float32).",
            )
    if math.prod(x._shape) == 0:
        return x

    W = padded[3]
    per_core_N, chunks = _chunking(x, G, core_grid)
    block_wt = find_max_tile_span(per_core_N, W // G)
    if mask_shape is not None and mask_shape[3] != block_wt * TILE_SIZE:
        _fail(
            ShapeMismatchError,
            f"input mask width ({mask_shape[3]}) must have the same width as block_wt * "
            f"TILE_WIDTH ({block_wt * TILE_SIZE})",
            f"build it with ttnn.create_group_norm_input_mask({W}, {G}, {chunks}).",
        )
    tables = _layout_tables(W, G, per_core_N, chunks, block_wt)
    where: list[np.ndarray | None] = []
    for name, t in (("gamma", weight), ("beta", bias)):
        if t is None or t._layout is Layout.TILE:
            where.append(None)
            continue
        rows_of_32 = math.prod(t._shape) // TILE_SIZE
        index = _param_index(per_core_N, chunks, rows_of_32)
        if index.max() >= rows_of_32 * TILE_SIZE:
            _fail(
                ShapeMismatchError,
                f"{name} has {rows_of_32} rows of 32; the {chunks} chunks of {per_core_N} "
                f"channels need {chunks * -(-per_core_N // TILE_SIZE)}.",
                f"ttnn.create_group_norm_weight_bias_rm({name}, {W}, {chunks}).",
            )
        where.append(index)

    tensors = [x]
    has = (input_mask is not None, weight is not None, bias is not None)
    for t in (input_mask, weight, bias):
        if t is not None:
            tensors.append(t)
    logical_hw = x._shape[2]
    rows = padded[2] if x._layout is Layout.TILE else logical_hw
    eps = float(epsilon)
    rm = tuple(w is not None for w in where)
    key = (G, eps, per_core_N, chunks, block_wt, has, rm, rows)

    def param_vector(p: Any, index: np.ndarray | None) -> Any:
        if index is not None:  # ROW_MAJOR rows of 32, chunk by chunk
            return jnp.reshape(p, (-1,))[jnp.asarray(index)].astype(jnp.float32)
        return jnp.reshape(p, (-1, p.shape[-1]))[0][:W].astype(jnp.float32)  # TILE: row 0

    def local(a: Any, *rest: Any) -> Any:
        it = iter(rest)
        m = next(it) if has[0] else None
        gam = next(it) if has[1] else None
        bet = next(it) if has[2] else None
        n = a.shape[0]
        xf = a.astype(jnp.float32).reshape(n, logical_hw, W)
        xf = jnp.pad(xf, ((0, 0), (0, rows - logical_hw), (0, 0)))
        if m is None:  # no mask: each group's own channels
            sel = jnp.asarray(tables[3])[:, None, :] * jnp.ones((1, TILE_SIZE, 1), jnp.float32)
        else:
            mm = jnp.reshape(m, m.shape[-3:]).astype(jnp.float32)  # [G, 32, 32 * block_wt]
            picked = mm[jnp.asarray(tables[0]), :, jnp.asarray(tables[1])]  # [G, W, 32]
            sel = jnp.swapaxes(picked, 1, 2) * jnp.asarray(tables[2])[:, None, :]
        pad_rows = -(-rows // TILE_SIZE) * TILE_SIZE
        x4 = jnp.pad(xf, ((0, 0), (0, pad_rows - rows), (0, 0))).reshape(n, -1, TILE_SIZE, W)
        hi = jax.lax.Precision.HIGHEST
        count = float(rows * (W // G))
        s1 = jnp.einsum("ntrc,grc->ng", x4, sel, precision=hi)
        mean = s1 / count
        sel2 = sel * sel
        s2 = jnp.einsum("ntrc,grc->ng", x4 * x4, sel2, precision=hi)
        s1b = jnp.einsum("ntrc,grc->ng", x4, sel2, precision=hi)
        live = np.ones((pad_rows // TILE_SIZE, TILE_SIZE), np.float32).reshape(-1)
        live[rows:] = 0.0
        nsel = jnp.einsum("tr,grc->g", jnp.asarray(live.reshape(-1, TILE_SIZE)), sel2, precision=hi)
        var = (s2 - 2.0 * mean * s1b + mean * mean * nsel[None, :]) / count
        rstd = jax.lax.rsqrt(jnp.maximum(var, 0.0) + eps)
        scale = jnp.einsum("ng,grc->nrc", rstd, sel, precision=hi)
        shift = jnp.einsum("ng,grc->nrc", mean * rstd, sel, precision=hi)
        y = x4 * scale[:, None] - shift[:, None]
        y = y.reshape(n, pad_rows, W)[:, :logical_hw]
        if gam is not None:
            y = y * param_vector(gam, where[0])
        if bet is not None:
            y = y + param_vector(bet, where[1])
        return y.reshape(a.shape).astype(jnp.bfloat16)

    out = run_op(
        "group_norm",
        local,
        tensors,
        static=key,
        out_dtype=DataType.BFLOAT16,
        out_layout=out_layout,
        memory_config=memory_config if memory_config is not None else DRAM_MEMORY_CONFIG,
    )
    if inplace and x.is_sharded():
        return write_output(out, x)
    return out
