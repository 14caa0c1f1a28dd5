"""TT-NN's convolution family (``ttnn.conv2d``, ``ttnn.conv1d``, ``ttnn.conv_transpose2d``, the
weight preparation and configs), per device, with TT-NN's names; the pools and ``upsample`` are
:mod:`ttjax._src.ttnn.ops.pool`.

TT-NN's conv takes an NHWC input (often flattened to ``[1, 1, N*H*W, C]``), torch-layout
``[out, in / groups, kh, kw]`` weights on host (prepared on the fly, or once by
:func:`prepare_conv_weights`) and a ``[1, 1, 1, out]`` bias, and returns ``[1, 1, N*OH*OW, out]``
(ttnn/cpp/ttnn/operations/conv/conv2d/conv2d.cpp). Each device convolves its own tensor with
``jax.lax.conv_general_dilated`` through the one op path, so a batch split over the mesh is a
data-parallel conv. :class:`Conv2dConfig` and :class:`Conv2dSliceConfig` are plain structs with
TT-NN's field names, read when the op runs; slicing and sharding choices change no values.

>>> img = ttnn.from_torch(torch.rand(1, 8, 8, 3), device=mesh)  # NHWC, on every device
>>> w = ttnn.from_torch(torch.rand(4, 3, 3, 3))  # torch's OIHW weight, on host
>>> out, [oh, ow] = ttnn.conv2d(input_tensor=img, weight_tensor=w, device=mesh, in_channels=3,
...     out_channels=4, batch_size=1, input_height=8, input_width=8, kernel_size=(3, 3),
...     padding=(1, 1), return_output_dim=True)
>>> out.shape, (oh, ow)
(Shape([1, 1, 64, 4]), (8, 8))
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import DataType, Layout, StorageType, UnaryWithParam
from ttjax._src.core.errors import ConfigError, LayoutError, ShapeMismatchError, TTJaxError
from ttjax._src.core.hardware import (
    DRAM_MEMORY_CONFIG,
    L1_MEMORY_CONFIG,
    BufferType,
    MemoryConfig,
    TensorMemoryLayout,
)
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.placements import LOCAL, REPLICATE, Placement, PlacementShard
from ttjax._src.core.tensor import Tensor, host_blocks
from ttjax._src.ttnn.convert import to_device
from ttjax._src.ttnn.ops import reshape, typecast
from ttjax._src.ttnn.ops.activations import parse_activation, unary_fn
from ttjax._src.ttnn.ops.common import _pads4, _pair, _positive

# ---------------------------------------------------------------------------------------------
# Configs: plain structs, read when the op runs (TT-NN's conv2d_pybind.cpp)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class Conv2dConfig:
    """TT-NN's ``ttnn.Conv2dConfig``: device and implementation flags of conv1d/conv2d, keyword
    only, with TT-NN's defaults (device/conv2d_op.hpp). Built freely; checked by the op that reads
    it. ``weights_dtype`` quantizes the prepared weights (``ttnn.bfloat8_b``); ``activation`` is
    fused on the output; ``output_layout`` is the output's layout. The rest pick shards, blocks
    and buffers on a Tenstorrent chip and change no values here.

    >>> relu = ttnn.UnaryWithParam(ttnn.UnaryOpType.RELU)
    >>> ttnn.Conv2dConfig(weights_dtype=ttnn.bfloat8_b, activation=relu).output_layout
    Layout::TILE
    """

    weights_dtype: DataType | None = None
    activation: Any = None
    deallocate_activation: bool = False
    reallocate_halo_output: bool = True
    config_tensors_in_dram: bool = False
    act_block_h_override: int = 0
    act_block_w_div: int = 1
    reshard_if_not_optimal: bool = False
    override_sharding_config: bool = False
    shard_layout: TensorMemoryLayout | None = None
    core_grid: Any = None
    transpose_shards: bool = False
    output_layout: Layout = Layout.TILE
    enable_act_double_buffer: bool = False
    enable_weights_double_buffer: bool = False
    full_inner_dim: bool = False
    in_place: bool = False
    enable_kernel_stride_folding: bool | None = None
    enable_activation_reuse: bool = False
    force_split_reader: bool | None = None


Conv1dConfig = Conv2dConfig  # TT-NN: ``using Conv1dConfig = Conv2dConfig`` (conv1d.hpp)


class Conv2dSliceConfig:
    """TT-NN's ``ttnn.Conv2dSliceConfig(slice_type=, num_slices=)``: how a DRAM conv is cut into
    slices along the output's height or width (``num_slices`` 0: TT-NN picks). Slicing changes
    no values; ``L1Full`` runs the conv on L1 (its output stays in L1)."""

    class SliceTypeEnum(enum.Enum):
        DRAMSliceHeight = 0
        DRAMSliceWidth = 1
        L1Full = 2

    def __init__(self, *, slice_type: SliceTypeEnum, num_slices: int = 0) -> None:
        self.slice_type = slice_type
        self.num_slices = num_slices

    def __repr__(self) -> str:
        return f"Conv2dSliceConfig(slice_type={self.slice_type}, num_slices={self.num_slices})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conv2dSliceConfig) and (
            (other.slice_type, other.num_slices) == (self.slice_type, self.num_slices)
        )

    def __hash__(self) -> int:
        return hash((self.slice_type, self.num_slices))


Conv2dDRAMSliceHeight = Conv2dSliceConfig.SliceTypeEnum.DRAMSliceHeight
Conv2dDRAMSliceWidth = Conv2dSliceConfig.SliceTypeEnum.DRAMSliceWidth
Conv2dL1Full = Conv2dSliceConfig.SliceTypeEnum.L1Full
Conv2dL1FullSliceConfig = Conv2dSliceConfig(slice_type=Conv2dL1Full)


def get_conv_output_dim(
    input: int, window: int, stride: int = 1, pad: int = 0, dilation: int = 1
) -> int:
    """TT-NN's ``ttnn.get_conv_output_dim``: a conv's output size along one dim (``pad`` on each
    side), ``(input + 2 pad - dilation (window - 1) - 1) // stride + 1``.

    >>> ttnn.get_conv_output_dim(224, 7, stride=2, pad=3)
    112
    """
    return (input + (2 * pad) - dilation * (window - 1) - 1) // stride + 1


# ---------------------------------------------------------------------------------------------
# Argument checks (TT-NN's messages where it has one)
# ---------------------------------------------------------------------------------------------


def _config_activation(op: str, value: Any) -> UnaryWithParam | None:
    """Conv2dConfig.activation: a ``UnaryWithParam`` or what TT-NN's binding converts to one
    (a ``UnaryOpType`` or an ``(op, number)`` pair; ttnn-pybind/activation.cpp). A string is
    refused, as that binding refuses it."""
    if value is None:
        return None
    if isinstance(value, str):
        raise ConfigError(
            f"ttnn.{op}: Conv2dConfig.activation={value!r} is a string; TT-NN's Conv2dConfig "
            "takes a UnaryWithParam.\nfix: activation=ttnn.UnaryWithParam(ttnn.UnaryOpType."
            f"{value.upper()})."
        )
    return parse_activation(op, value)


def _check_config(op: str, config: Any) -> Conv2dConfig:
    if config is None:
        return Conv2dConfig()
    if not isinstance(config, Conv2dConfig):
        raise ConfigError(
            f"ttnn.{op}: conv_config={config!r} is not a ttnn.Conv2dConfig.\n"
            "fix: build it with ttnn.Conv2dConfig(...)."
        )
    c = config
    if c.weights_dtype is not None and not isinstance(c.weights_dtype, DataType):
        raise ConfigError(
            f"ttnn.{op}: Conv2dConfig.weights_dtype={c.weights_dtype!r} is not a ttnn DataType."
            "\nfix: e.g. weights_dtype=ttnn.bfloat16 or ttnn.bfloat8_b."
        )
    if not isinstance(c.output_layout, Layout):
        raise ConfigError(
            f"ttnn.{op}: Conv2dConfig.output_layout={c.output_layout!r} is not a ttnn Layout.\n"
            "fix: ttnn.TILE_LAYOUT or ttnn.ROW_MAJOR_LAYOUT."
        )
    if c.shard_layout is not None and c.shard_layout not in (
        TensorMemoryLayout.HEIGHT_SHARDED,
        TensorMemoryLayout.WIDTH_SHARDED,
        TensorMemoryLayout.BLOCK_SHARDED,
    ):
        raise ConfigError(
            f"ttnn.{op}: Conv2dConfig.shard_layout={c.shard_layout!r}: conv shards its input "
            "by height, width or block.\nfix: ttnn.TensorMemoryLayout.HEIGHT_SHARDED, "
            "WIDTH_SHARDED or BLOCK_SHARDED (or None: the op picks)."
        )
    if c.override_sharding_config and (c.core_grid is None or c.shard_layout is None):
        missing = "core_grid" if c.core_grid is None else "shard_layout"
        raise ConfigError(
            f"ttnn.{op}: If override_sharding_config is set, {missing} must be set as well.\n"
            f"fix: set Conv2dConfig.{missing}, or leave override_sharding_config False."
        )
    if int(c.act_block_h_override) % 32 != 0:
        raise ConfigError(
            f"ttnn.{op}: Conv2dConfig.act_block_h_override={c.act_block_h_override} must be a "
            "multiple of 32 (a tile's height).\nfix: 0 (the largest block) or a multiple of 32."
        )
    if int(c.act_block_w_div) < 1:
        raise ConfigError(
            f"ttnn.{op}: Conv2dConfig.act_block_w_div={c.act_block_w_div} must be at least 1.\n"
            "fix: 1 (no reduction) or a divisor of the activation block width."
        )
    _config_activation(op, c.activation)
    return c


def _check_slice_config(op: str, slice_config: Any, out_hw: tuple[int, int]) -> None:
    """Conv2dSliceConfig, as conv2d_DRAM and determine_conv2d_slice_config check it."""
    if slice_config is None:
        return
    if not isinstance(slice_config, Conv2dSliceConfig) or not isinstance(
        slice_config.slice_type, Conv2dSliceConfig.SliceTypeEnum
    ):
        raise ConfigError(
            f"ttnn.{op}: slice_config={slice_config!r} is not a ttnn.Conv2dSliceConfig.\n"
            "fix: ttnn.Conv2dSliceConfig(slice_type=ttnn.Conv2dDRAMSliceWidth, num_slices=4) "
            "or ttnn.Conv2dL1FullSliceConfig."
        )
    if slice_config.slice_type is Conv2dL1Full:
        return
    n = int(slice_config.num_slices)
    dim = out_hw[0] if slice_config.slice_type is Conv2dDRAMSliceHeight else out_hw[1]
    if n < 0 or (n > dim and dim > 1):
        raise ConfigError(
            f"ttnn.{op}:  Number of slices {n} should be less or equal than the dimension being "
            f"sliced {dim} in Conv2D DRAM Slicing\nfix: num_slices between 1 and {dim} (0: the "
            "op picks)."
        )


# ---------------------------------------------------------------------------------------------
# Weights and bias
# ---------------------------------------------------------------------------------------------


def _is_prepared(t: Tensor) -> bool:
    """TT-NN's ``is_valid_device_conv_weights`` shape: a device ``[1, 1, rows, >= out]`` tile tensor
    (anything else on device is pulled back and prepared again)."""
    s = t._shape
    return (
        t._storage is StorageType.DEVICE
        and t._layout is Layout.TILE
        and len(s) == 4
        and s[:2] == (1, 1)
    )


def _weight_matrix(w: np.ndarray, groups: int, in_channels: int) -> np.ndarray:
    """OIHW weights -> TT-NN's weight matrix ``[1, 1, kh*kw*in, out]`` (rows in (kh, kw, in) order,
    to_weight_tile_layout), groups spread block-diagonally over the full input channels as
    ``convert_conv_weight_tensor_to_grouped_layout`` does (prepare_conv2d_weights.cpp); an
    ungrouped weight of fewer input channels than ``in_channels`` gets zeros for the rest, as
    TT-NN pads a weight's own channels (segformer pads 3 image channels to 8, weights 3)."""
    if groups == 1 and w.shape[1] < in_channels:
        w = np.pad(w, ((0, 0), (0, in_channels - w.shape[1]), (0, 0), (0, 0)))
    oc, icg, kh, kw = w.shape
    if groups > 1:
        full = np.zeros((oc, icg * groups, kh, kw), w.dtype)
        per = oc // groups
        for g in range(groups):
            full[g * per : (g + 1) * per, g * icg : (g + 1) * icg] = w[g * per : (g + 1) * per]
        w = full
    return np.ascontiguousarray(np.transpose(w, (2, 3, 1, 0)).reshape(1, 1, -1, oc))


def _check_host_weight(
    op: str,
    w: Tensor,
    out_channels: int,
    in_channels: int,
    groups: int,
    k: tuple[int, int],
    iohw: bool = False,
) -> None:
    if w._layout is not Layout.ROW_MAJOR:
        raise LayoutError(
            f"ttnn.{op}: Host conv weights layout should be in row_major layout (got "
            f"{w._layout!r}).\nfix: ttnn.from_torch(weight) without layout=ttnn.TILE_LAYOUT."
        )
    if len(w._shape) != 4:
        raise ShapeMismatchError(
            f"ttnn.{op}: Host conv weights should be 4D tensor (got {list(w._shape)}).\n"
            "fix: pass torch's [out_channels, in_channels / groups, kernel_h, kernel_w] weight."
        )
    if iohw:
        want, form = (in_channels, out_channels // groups, k[0], k[1]), "ConvTranspose2d's IOHW"
    else:
        want, form = (out_channels, in_channels // groups, k[0], k[1]), "Conv2d's OIHW"
    got = tuple(w._shape)
    same_rest = (got[0], *got[2:]) == (want[0], *want[2:])
    fewer_in = not iohw and groups == 1 and got[1] < want[1] and same_rest
    if got != want and not fewer_in:  # fewer input channels: zeros for the rest, as TT-NN pads
        raise ShapeMismatchError(
            f"ttnn.{op}: weight shape {list(w._shape)} does not match out_channels="
            f"{out_channels}, in_channels={in_channels}, groups={groups}, kernel_size={list(k)}: "
            f"expected {list(want)} (torch's {form}).\nfix: pass the torch weight as it is."
        )


def _transposed_weight(w: Tensor, groups: int, mirror: bool) -> Tensor:
    """A ConvTranspose2d's IOHW host weight as the OIHW weight of the stride-1 conv that computes
    it: each group's in/out swapped and, with ``mirror_kernel``, the kernel flipped
    (transform_weights_for_conv_transpose2d in prepare_conv_transpose2d_weights.cpp)."""
    a = _host_array(w)
    ic, ocg, kh, kw = a.shape
    icg = ic // groups
    out = a.reshape(groups, icg, ocg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(-1, icg, kh, kw)
    if mirror:
        out = out[:, :, ::-1, ::-1]
    out = np.ascontiguousarray(out)
    return Tensor(out, w._spec.replace(mesh=None, placements=(), shape=out.shape))


def _host_array(t: Tensor) -> np.ndarray:
    if t._mesh is None:
        return np.asarray(t._data)
    return np.asarray(host_blocks(t)).reshape((-1, *t._shape))[0]


def _per_device(t: Tensor, fn: Callable[[np.ndarray], np.ndarray]) -> Tensor:
    """A TILE host tensor of ``fn`` of ``t``'s array; of each device's block, kept per device,
    when ``t`` is a multi-device host tensor whose blocks differ (tt_dit's tensor-parallel conv
    weights: ``from_torch(w, mesh_mapper=ShardTensor2dMesh(..))`` on host), as TT-NN prepares
    each device's weight shard."""
    if t._mesh is None:
        out = fn(np.asarray(t._data))
        return Tensor(out, t._spec.replace(placements=(), shape=out.shape, layout=Layout.TILE))
    blocks = np.asarray(host_blocks(t))
    mesh_shape = blocks.shape[: blocks.ndim - len(t._shape)]
    flat = blocks.reshape((-1, *t._shape))
    if all(np.array_equal(flat[0], b) for b in flat[1:]):
        out = fn(flat[0])
        return Tensor(
            out, t._spec.replace(mesh=None, placements=(), shape=out.shape, layout=Layout.TILE)
        )
    outs = np.stack([fn(b) for b in flat])
    out = outs.reshape(mesh_shape + outs.shape[1:])
    return Tensor(
        out,
        t._spec.replace(
            placements=(LOCAL,) * len(mesh_shape), shape=outs.shape[1:], layout=Layout.TILE
        ),
    )


def _prepare_weight(
    op: str, w: Tensor, device: MeshDevice, groups: int, wdtype: DataType | None, in_channels: int
) -> Tensor:
    host = _per_device(w, lambda a: _weight_matrix(a.astype(np.float32), groups, in_channels))
    dev = to_device(host, device)
    dtype = wdtype if wdtype is not None else w._dtype
    return typecast(dev, dtype) if dtype is not dev._dtype else dev


def _prepare_bias(
    op: str, b: Tensor, device: MeshDevice, out_channels: int, wdtype: DataType | None
) -> Tensor:
    s = tuple(b._shape)
    if len(s) != 4:
        raise ShapeMismatchError(
            f"ttnn.{op}: Host conv bias should be 4D tensor (got {list(s)}).\n"
            "fix: reshape the bias to [1, 1, 1, out_channels]."
        )
    if b._layout is not Layout.ROW_MAJOR:
        raise LayoutError(
            f"ttnn.{op}: Host conv bias layout should be in row_major layout (got {b._layout!r})."
            "\nfix: ttnn.from_torch(bias) without layout=ttnn.TILE_LAYOUT."
        )
    if s[:3] != (1, 1, 1) or s[3] != out_channels:
        raise ShapeMismatchError(
            f"ttnn.{op}: Host conv bias shape is not correct: {list(s)}; Bias must have the same "
            f"length as output channels ({out_channels}).\nfix: reshape the bias to "
            f"[1, 1, 1, {out_channels}]."
        )
    host = _per_device(b, lambda a: a.astype(np.float32))
    dev = to_device(host, device)
    dtype = wdtype if wdtype is not None else b._dtype
    return typecast(dev, dtype) if dtype is not dev._dtype else dev


def _check_device(op: str, device: Any) -> MeshDevice:
    if not isinstance(device, MeshDevice):
        raise TTJaxError(
            f"ttnn.{op}: device={device!r} is not a MeshDevice.\nfix: pass the mesh returned by "
            "ttnn.open_mesh_device(...) (TT-NN's conv takes device=)."
        )
    return device


# ---------------------------------------------------------------------------------------------
# prepare_conv_weights / prepare_conv_bias
# ---------------------------------------------------------------------------------------------


def prepare_conv_weights(
    *,
    weight_tensor: Tensor,
    input_memory_config: MemoryConfig,
    input_layout: Layout,
    weights_format: str,
    in_channels: int,
    out_channels: int,
    batch_size: int,
    input_height: int,
    input_width: int,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    has_bias: bool,
    groups: int,
    device: MeshDevice,
    input_dtype: DataType,
    output_dtype: DataType | None = None,
    conv_config: Conv2dConfig | None = None,
    compute_config: Any = None,
    slice_config: Conv2dSliceConfig | None = None,
) -> Tensor:
    """TT-NN's ``ttnn.prepare_conv_weights``: torch's OIHW host weight, once, as the device weight
    matrix conv2d reads (``[1, 1, kh*kw*in_channels, out_channels]`` tile layout, rows in
    (kh, kw, in) order, groups block-diagonal; ``conv_config.weights_dtype`` when set). Pass the
    result to :func:`conv2d` as ``weight_tensor`` on every call.

    >>> w = ttnn.from_torch(torch.rand(8, 3, 3, 3))
    >>> w_dev = ttnn.prepare_conv_weights(weight_tensor=w,
    ...     input_memory_config=ttnn.DRAM_MEMORY_CONFIG, input_layout=ttnn.ROW_MAJOR_LAYOUT,
    ...     weights_format="OIHW", in_channels=3, out_channels=8, batch_size=1, input_height=8,
    ...     input_width=8, kernel_size=[3, 3], stride=[1, 1], padding=[1, 1], dilation=[1, 1],
    ...     has_bias=False, groups=1, device=mesh, input_dtype=ttnn.bfloat16)
    >>> w_dev.shape
    Shape([1, 1, 27, 8])
    """
    op = "prepare_conv_weights"
    _check_device(op, device)
    if weights_format != "OIHW":
        raise ConfigError(
            f"ttnn.{op}: weights_format={weights_format!r}: Conv2D weights format must be OIHW."
            '\nfix: weights_format="OIHW" with torch\'s [out, in / groups, kh, kw] weight.'
        )
    if weight_tensor._storage is StorageType.DEVICE:
        raise TTJaxError(
            f"ttnn.{op}: Host conv weights should be placed on host (got a device tensor).\n"
            "fix: pass ttnn.from_torch(weight) without device=."
        )
    config = _check_config(op, conv_config)
    _check_groups(op, in_channels, out_channels, groups)
    k = _pair(op, "kernel_size", kernel_size)
    _check_host_weight(op, weight_tensor, out_channels, in_channels, groups, (k[0], k[1]))
    return _prepare_weight(op, weight_tensor, device, groups, config.weights_dtype, in_channels)


def prepare_conv_bias(
    *,
    bias_tensor: Tensor,
    input_memory_config: MemoryConfig,
    input_layout: Layout,
    in_channels: int,
    out_channels: int,
    batch_size: int,
    input_height: int,
    input_width: int,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
    device: MeshDevice,
    input_dtype: DataType,
    output_dtype: DataType | None = None,
    conv_config: Conv2dConfig | None = None,
    compute_config: Any = None,
    slice_config: Conv2dSliceConfig | None = None,
) -> Tensor:
    """TT-NN's ``ttnn.prepare_conv_bias``: a ``[1, 1, 1, out_channels]`` host bias, once, as the
    device bias conv2d reads (tile layout; ``conv_config.weights_dtype`` when set)."""
    op = "prepare_conv_bias"
    _check_device(op, device)
    if bias_tensor._storage is StorageType.DEVICE:
        raise TTJaxError(
            f"ttnn.{op}: conv bias should be placed on host (got a device tensor).\n"
            "fix: pass ttnn.from_torch(bias.reshape(1, 1, 1, -1)) without device=."
        )
    config = _check_config(op, conv_config)
    return _prepare_bias(op, bias_tensor, device, out_channels, config.weights_dtype)


# ---------------------------------------------------------------------------------------------
# conv2d / conv1d
# ---------------------------------------------------------------------------------------------


def _check_groups(op: str, in_channels: int, out_channels: int, groups: int) -> None:
    _positive(op, in_channels=in_channels, out_channels=out_channels, groups=groups)
    if in_channels % groups or out_channels % groups:
        raise ConfigError(
            f"ttnn.{op}: in_channels={in_channels} and out_channels={out_channels} must both be "
            f"divisible by groups={groups}.\nfix: pass the groups of the torch Conv2d."
        )


def _conv_rule(
    tensors: Sequence[Tensor], shapes: Sequence[tuple[int, ...]]
) -> list[tuple[Placement, ...]]:
    """Per mesh axis: replicated everywhere -> Replicate; the input split (its batch) with the
    weights replicated -> the output split along its flattened N*OH*OW rows; else Local."""
    x, rest = tensors[0], tensors[1:]
    out: list[Placement] = []
    for i, p in enumerate(x._placements):
        others = all(t._placements[i].is_replicate() for t in rest)
        if p.is_replicate() and others:
            out.append(REPLICATE)
        elif p.is_shard() and others:
            out.append(PlacementShard(2))
        else:
            out.append(LOCAL)
    return [tuple(out)]


def _input_nhwc(op: str, x: Tensor, n: int, h: int, w: int, c: int) -> None:
    s = tuple(x._shape)
    if len(s) != 4 or s[-1] < c or math.prod(s[:3]) != n * h * w:
        raise ShapeMismatchError(
            f"ttnn.{op}: input per-device shape {list(s)} does not hold batch_size={n}, "
            f"input_height={h}, input_width={w}, in_channels={c}; TT-NN takes [N, H, W, C] or "
            "[1, 1, N*H*W, C] (C may be padded past in_channels).\nfix: permute the NCHW tensor "
            "to NHWC (and reshape it to [1, 1, N*H*W, C]); with the batch split over the mesh, "
            "batch_size is each device's batch."
        )


def _out_memory_config(x: Tensor, slice_config: Any, memory_config: Any) -> MemoryConfig:
    """conv2d.cpp's routing: a slice config other than L1Full, or an input not in L1, runs
    conv2d_DRAM (output DRAM interleaved; a given memory_config is ignored there, as TT-NN warns);
    otherwise conv2d_L1 (the given memory_config, else L1; TT-NN picks an L1 shard spec there,
    ttjax reports L1 interleaved)."""
    l1_full = slice_config is not None and slice_config.slice_type is Conv2dL1Full
    in_l1 = x._storage is StorageType.DEVICE and x._spec.memory_config.buffer_type is BufferType.L1
    dram = (slice_config is not None and not l1_full) or (slice_config is None and not in_l1)
    if dram:
        return DRAM_MEMORY_CONFIG
    return memory_config if memory_config is not None else L1_MEMORY_CONFIG


def conv2d(
    *,
    input_tensor: Tensor,
    weight_tensor: Tensor,
    device: MeshDevice,
    in_channels: int,
    out_channels: int,
    batch_size: int,
    input_height: int,
    input_width: int,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0),
    dilation: Sequence[int] = (1, 1),
    groups: int = 1,
    dtype: DataType | None = None,
    bias_tensor: Tensor | None = None,
    conv_config: Conv2dConfig | None = None,
    compute_config: Any = None,
    memory_config: MemoryConfig | None = None,
    slice_config: Conv2dSliceConfig | None = None,
    return_output_dim: bool = False,
    return_weights_and_bias: bool = False,
) -> Any:
    """TT-NN's ``ttnn.conv2d`` (keyword arguments only, as its binding): each device convolves its
    NHWC input (``[N, H, W, C]`` or ``[1, 1, N*H*W, C]``) with the weights, giving
    ``[1, 1, N*OH*OW, out_channels]`` in ``dtype`` (the input's when None) and
    ``conv_config.output_layout`` (tile by default; a 1x1 stride-1 conv, a matmul in TT-NN, gives
    tile). ``padding`` is (h, w) or (top, bottom, left, right). Weights are torch's OIHW on host
    (prepared here) or :func:`prepare_conv_weights`' result; the bias is ``[1, 1, 1, out]``.
    Returns the output, plus ``(out_h, out_w)`` with ``return_output_dim`` and the device
    ``(weight, bias)`` with ``return_weights_and_bias``, in that order, as TT-NN does.

    >>> img = ttnn.from_torch(torch.rand(1, 1, 64, 3), device=mesh)  # [1, 1, N*H*W, C]
    >>> w = ttnn.from_torch(torch.rand(8, 3, 3, 3))
    >>> y = ttnn.conv2d(input_tensor=img, weight_tensor=w, device=mesh, in_channels=3,
    ...     out_channels=8, batch_size=1, input_height=8, input_width=8, kernel_size=(3, 3))
    >>> y.shape
    Shape([1, 1, 36, 8])
    """
    return _conv2d(
        "conv2d",
        input_tensor,
        weight_tensor,
        device,
        in_channels,
        out_channels,
        batch_size,
        input_height,
        input_width,
        kernel_size,
        stride,
        padding,
        dilation,
        groups,
        dtype,
        bias_tensor,
        conv_config,
        memory_config,
        slice_config,
        return_output_dim,
        return_weights_and_bias,
    )


def _conv2d(
    op: str,
    input_tensor: Tensor,
    weight_tensor: Tensor,
    device: MeshDevice,
    in_channels: int,
    out_channels: int,
    batch_size: int,
    input_height: int,
    input_width: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    dtype: DataType | None,
    bias_tensor: Tensor | None,
    conv_config: Conv2dConfig | None,
    memory_config: MemoryConfig | None,
    slice_config: Conv2dSliceConfig | None,
    return_output_dim: bool,
    return_weights_and_bias: bool,
    transpose: tuple[tuple[int, ...], bool] | None = None,
) -> Any:
    """conv2d, conv1d and conv_transpose2d. ``transpose`` is (output_padding, mirror_kernel): the
    conv of the input with zeros between its pixels (stride) and the kernel flipped, as
    conv_transpose2d.cpp runs it (the Conv2d u-op at stride 1 over the halo's strided input)."""
    mesh = _check_device(op, device)
    config = _check_config(op, conv_config)
    ic, oc, g = int(in_channels), int(out_channels), int(groups)
    n, h, w = int(batch_size), int(input_height), int(input_width)
    _check_groups(op, ic, oc, g)
    _positive(op, batch_size=n, input_height=h, input_width=w)
    kh, kw = _pair(op, "kernel_size", kernel_size)
    sh, sw = _pair(op, "stride", stride)
    dh, dw = _pair(op, "dilation", dilation)
    _positive(op, kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, dilation_h=dh, dilation_w=dw)
    pads = _pads4(op, padding)
    if transpose is None:
        oh = (h + pads[0] + pads[1] - dh * (kh - 1) - 1) // sh + 1
        ow = (w + pads[2] + pads[3] - dw * (kw - 1) - 1) // sw + 1
        geometry = ((sh, sw), ((pads[0], pads[1]), (pads[2], pads[3])), (1, 1))
    else:
        (oph, opw), _ = transpose
        oh = (h - 1) * sh - 2 * pads[0] + dh * (kh - 1) + oph + 1
        ow = (w - 1) * sw - 2 * pads[2] + dw * (kw - 1) + opw + 1
        eh, ew = dh * (kh - 1) - pads[0], dw * (kw - 1) - pads[2]
        geometry = ((1, 1), ((eh, eh + oph), (ew, ew + opw)), (sh, sw))
    if oh <= 0 or ow <= 0:
        raise ShapeMismatchError(
            f"ttnn.{op}: the {h}x{w} input padded by {list(pads)} is smaller than the "
            f"{kh}x{kw} kernel dilated by {dh}x{dw}.\nfix: check input_height/input_width, "
            "kernel_size, padding and dilation."
        )
    _check_slice_config(op, slice_config, (oh, ow))
    out_dtype = dtype if dtype is not None else input_tensor._dtype
    if not isinstance(out_dtype, DataType):
        raise ConfigError(
            f"ttnn.{op}: dtype={dtype!r} is not a ttnn DataType.\nfix: e.g. dtype=ttnn.bfloat16."
        )
    mm_conv = (kh, kw, sh, sw, dh, dw) == (1, 1, 1, 1, 1, 1) and pads == (0, 0, 0, 0)
    mm_conv = (
        mm_conv
        and transpose is None
        and config.shard_layout is not TensorMemoryLayout.WIDTH_SHARDED
    )
    out_layout = Layout.TILE if mm_conv else config.output_layout
    if out_layout is Layout.ROW_MAJOR and out_dtype is DataType.BFLOAT8_B:
        raise LayoutError(
            f"ttnn.{op}: Conv output can't be in Row Major if output dtype is BFloat8_B.\n"
            "fix: Conv2dConfig(output_layout=ttnn.TILE_LAYOUT) or dtype=ttnn.bfloat16."
        )
    if config.enable_kernel_stride_folding:
        _check_folding(op, input_tensor, (kh, kw), (sh, sw), pads, h, w)
    act = _config_activation(op, config.activation)

    x = input_tensor
    if x._storage is not StorageType.DEVICE:
        x = to_device(x, mesh)
    elif x._mesh is not None and not x._mesh.same_mesh(mesh):
        raise TTJaxError(
            f"ttnn.{op}: the input lives on {x._mesh!r}, not device={mesh!r}.\n"
            "fix: pass the mesh the input was placed on."
        )
    _input_nhwc(op, x, n, h, w, ic)

    wt = weight_tensor
    prepared = _is_prepared(wt)
    if prepared:
        rows = kh * kw * ic
        if wt._shape[2] != rows or wt._shape[3] < oc:
            raise ShapeMismatchError(
                f"ttnn.{op}: the device weight {list(wt._shape)} is not a prepared weight of "
                f"kernel {kh}x{kw}, in_channels={ic}, out_channels={oc} (expected "
                f"[1, 1, {rows}, >= {oc}]).\nfix: pass torch's OIHW weight on host, or "
                "ttnn.prepare_conv_weights' result for these sizes."
            )
    else:
        if wt._storage is StorageType.DEVICE:
            wt = Tensor(
                _host_array(wt),
                wt._spec.replace(mesh=None, placements=(), storage=StorageType.HOST),
            )
        if len(wt._shape) == 3 and w == 1:
            # prepare_conv2d_weights.cpp: a 1-D conv's 3-D weight [out, in, k] is [out, in, k, 1]
            wt = reshape(wt, (*wt._shape, 1))
        _check_host_weight(op, wt, oc, ic, g, (kh, kw), transpose is not None)
        if transpose is not None:
            wt = _transposed_weight(wt, g, transpose[1])
        wt = _prepare_weight(op, wt, mesh, g, config.weights_dtype, ic)
    bt = bias_tensor
    if bt is not None and bt._storage is not StorageType.DEVICE:
        bt = _prepare_bias(op, bt, mesh, oc, config.weights_dtype)
    elif bt is not None and (bt._shape[-1] < oc):
        raise ShapeMismatchError(
            f"ttnn.{op}: Bias must have the same length as output channels ({oc}); the device "
            f"bias is {list(bt._shape)}.\nfix: pass the [1, 1, 1, {oc}] bias on host."
        )

    fn: Callable[[Any], Any] | None = unary_fn(op, act) if act is not None else None
    strides, spatial, lhs_dilation = geometry

    def local(xa: Any, wa: Any, *ba: Any) -> Any:
        xf = jnp.reshape(xa.astype(jnp.float32), (n, h, w, xa.shape[-1]))[..., :ic]
        wf = jnp.reshape(wa.astype(jnp.float32), (kh, kw, ic, wa.shape[-1]))[..., :oc]
        y = jax.lax.conv_general_dilated(
            xf,
            wf,
            strides,
            spatial,
            lhs_dilation=lhs_dilation,
            rhs_dilation=(dh, dw),
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            precision=jax.lax.Precision.HIGHEST,
        )
        if ba:
            y = y + jnp.reshape(ba[0].astype(jnp.float32), (-1,))[:oc]
        if fn is not None:
            y = fn(y)
        return jnp.reshape(y, (1, 1, n * oh * ow, oc)).astype(xa.dtype)

    tensors = [x, wt] + ([bt] if bt is not None else [])
    out = run_op(
        op,
        local,
        tensors,
        static=(n, h, w, ic, oc, kh, kw, dh, dw, geometry, act),
        out_dtype=out_dtype,
        out_layout=out_layout,
        placement_rule=_conv_rule,
        memory_config=_out_memory_config(x, slice_config, memory_config),
    )
    if config.deallocate_activation and input_tensor._storage is StorageType.DEVICE:
        input_tensor.deallocate(True)
    result: tuple[Any, ...] = (out,)
    if return_output_dim:
        result += (oh if op == "conv1d" else (oh, ow),)
    if return_weights_and_bias:
        result += ((wt, bt),)
    return result[0] if len(result) == 1 else result


def _check_folding(
    op: str,
    x: Tensor,
    k: tuple[int, int],
    s: tuple[int, int],
    pads: tuple[int, ...],
    h: int,
    w: int,
) -> None:
    """Conv2dConfig.enable_kernel_stride_folding's rules (conv2d_utils.cpp, fold_input_tensor)."""
    fix = "\nfix: leave enable_kernel_stride_folding unset."
    if x._storage is StorageType.DEVICE and x._spec.memory_config.buffer_type is BufferType.L1:
        raise ConfigError(
            f"ttnn.{op}: Conv2D kernel stride folding: Input tensor must not be in L1 memory for folding{fix}"
        )
    if x._dtype is DataType.BFLOAT8_B:
        raise ConfigError(
            f"ttnn.{op}: Conv2D kernel stride folding: Currently doesn't support BFLOAT8_B{fix}"
        )
    if s[0] > k[0] or s[1] > k[1]:
        raise ConfigError(
            f"ttnn.{op}: Conv2D kernel stride folding: Stride must be less than or equal to kernel size{fix}"
        )
    for what, size, st in (
        ("height", h + pads[0] + pads[1], s[0]),
        ("width", w + pads[2] + pads[3], s[1]),
    ):
        if size % st:
            raise ConfigError(
                f"ttnn.{op}: Padded input {what} ({size}) must be divisible by stride ({st}) for "
                f"kernel stride folding.{fix}"
            )


def conv1d(
    *,
    input_tensor: Tensor,
    weight_tensor: Tensor,
    device: MeshDevice,
    in_channels: int,
    out_channels: int,
    batch_size: int,
    input_length: int,
    kernel_size: int,
    stride: int = 1,
    padding: int | Sequence[int] = 0,
    dilation: int = 1,
    groups: int = 1,
    dtype: DataType | None = None,
    bias_tensor: Tensor | None = None,
    conv_config: Conv2dConfig | None = None,
    compute_config: Any = None,
    memory_config: MemoryConfig | None = None,
    return_output_dim: bool = False,
    return_weights_and_bias: bool = False,
) -> Any:
    """TT-NN's ``ttnn.conv1d``: conv2d over ``[N, L, 1, C]`` with a ``(k, 1)`` kernel, as TT-NN runs
    it (conv1d.cpp): the input ``[N, L, C]`` (or 4-D), weights torch's ``[out, in / groups, k]``
    made 4-D ``[out, in / groups, k, 1]``, ``padding`` one int or (left, right). Returns
    ``[1, 1, N*OL, out]``, plus the output length and (weight, bias) when asked.

    >>> seq = ttnn.from_torch(torch.rand(1, 16, 4), device=mesh)  # [N, L, C]
    >>> w = ttnn.from_torch(torch.rand(8, 4, 3, 1))
    >>> y = ttnn.conv1d(input_tensor=seq, weight_tensor=w, device=mesh, in_channels=4,
    ...     out_channels=8, batch_size=1, input_length=16, kernel_size=3, padding=1)
    >>> y.shape
    Shape([1, 1, 16, 8])
    """
    op = "conv1d"
    if len(input_tensor._shape) < 4:  # TT-NN: [N, L, C] -> [N, L, 1, C]
        input_tensor = reshape(
            input_tensor, (int(batch_size), int(input_length), 1, int(in_channels))
        )
    if isinstance(padding, (int, np.integer)):
        pads: Any = (int(padding), 0)
    else:
        lr = _pair(op, "padding", padding)
        pads = (lr[0], lr[1], 0, 0)
    return _conv2d(
        op,
        input_tensor,
        weight_tensor,
        device,
        in_channels,
        out_channels,
        batch_size,
        input_length,
        1,
        (int(kernel_size), 1),
        (int(stride), 1),
        pads,
        (int(dilation), 1),
        groups,
        dtype,
        bias_tensor,
        conv_config,
        memory_config,
        Conv2dL1FullSliceConfig,
        return_output_dim,
        return_weights_and_bias,
    )


def conv_transpose2d(
    *,
    input_tensor: Tensor,
    weight_tensor: Tensor,
    device: MeshDevice,
    in_channels: int,
    out_channels: int,
    batch_size: int,
    input_height: int,
    input_width: int,
    kernel_size: Sequence[int],
    stride: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0),
    output_padding: Sequence[int] = (0, 0),
    dilation: Sequence[int] = (1, 1),
    groups: int = 1,
    dtype: DataType | None = None,
    bias_tensor: Tensor | None = None,
    conv_config: Conv2dConfig | None = None,
    compute_config: Any = None,
    memory_config: MemoryConfig | None = None,
    mirror_kernel: bool = True,
    return_output_dim: bool = False,
    return_weights_and_bias: bool = False,
) -> Any:
    """TT-NN's ``ttnn.conv_transpose2d``: PyTorch's ConvTranspose2d per device, from the NHWC
    input (as :func:`conv2d` takes it) and torch's ``[in, out / groups, kh, kw]`` host weight, to
    ``[1, 1, N*OH*OW, out]`` with OH = (H - 1) stride - 2 pad + dilation (k - 1) + output_padding
    + 1 (conv_transpose2d.cpp). ``mirror_kernel=False`` takes a kernel already flipped.

    >>> img = ttnn.from_torch(torch.rand(1, 4, 4, 8), device=mesh)
    >>> w = ttnn.from_torch(torch.rand(8, 3, 2, 2))  # torch's ConvTranspose2d weight
    >>> ttnn.conv_transpose2d(input_tensor=img, weight_tensor=w, device=mesh, in_channels=8,
    ...     out_channels=3, batch_size=1, input_height=4, input_width=4, kernel_size=(2, 2),
    ...     stride=(2, 2)).shape
    Shape([1, 1, 64, 3])
    """
    op = "conv_transpose2d"
    out_pad = _pair(op, "output_padding", output_padding)
    return _conv2d(
        op,
        input_tensor,
        weight_tensor,
        device,
        in_channels,
        out_channels,
        batch_size,
        input_height,
        input_width,
        kernel_size,
        stride,
        _pair(op, "padding", padding),
        dilation,
        groups,
        dtype,
        bias_tensor,
        conv_config,
        memory_config,
        Conv2dL1FullSliceConfig,
        return_output_dim,
        return_weights_and_bias,
        transpose=(out_pad, bool(mirror_kernel)),
    )


__all__ = [
    "Conv1dConfig",
    "Conv2dConfig",
    "Conv2dDRAMSliceHeight",
    "Conv2dDRAMSliceWidth",
    "Conv2dL1Full",
    "Conv2dL1FullSliceConfig",
    "Conv2dSliceConfig",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "get_conv_output_dim",
    "prepare_conv_bias",
    "prepare_conv_weights",
]
