"""TT-NN's ``ttnn.experimental.conv3d`` and ``ttnn.Conv3dConfig``, per device.

TT-NN's conv3d (ttnn/cpp/ttnn/operations/experimental/conv3d/: conv3d_device_operation.cpp,
the program factory and kernels/reader_vol2col.cpp) takes a row-major ``[1, T, H, W, C_in]``
input, a TILE weight of ``[kT*kH*kW*C_in, C_out]`` rows and an optional TILE bias ``[1, C_out]``,
and returns ``[1, T_out, H_out, W_out, C_out]`` in row-major bfloat16. The weight's rows come
in ``C_in_block`` blocks: block ``b`` holds ``(kt, kh, kw, c)`` for channels ``b * C_in_block``
on (what tt_dit's ``prepare_conv3d_weights`` builds from torch's ``[C_out, C_in, kT, kH, kW]``).
Padding is symmetric on H and W (none on T), zeros or ``"replicate"`` (the edge value).
Each device convolves its own tensor with ``jax.lax.conv_general_dilated`` in float32.

>>> rep = ttnn.ReplicateTensorToMesh(mesh)
>>> x = ttnn.from_torch(torch.rand(1, 2, 8, 8, 32), dtype=ttnn.bfloat16, device=mesh,
...                     layout=ttnn.ROW_MAJOR_LAYOUT, mesh_mapper=rep)
>>> w = ttnn.from_torch(torch.rand(9 * 32, 32), dtype=ttnn.bfloat16, device=mesh,
...                     layout=ttnn.TILE_LAYOUT, mesh_mapper=rep)
>>> cfg = ttnn.Conv3dConfig(output_channels=32, kernel_size=(1, 3, 3), stride=(1, 1, 1),
...                         padding=(0, 1, 1))
>>> tuple(ttnn.experimental.conv3d(input_tensor=x, weight_tensor=w, config=cfg).shape)
(1, 2, 8, 8, 32)
"""

from __future__ import annotations

from typing import Any, NoReturn

import jax
import jax.numpy as jnp

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import TILE_SIZE, DataType, Layout, StorageType
from ttjax._src.core.errors import (
    ConfigError,
    LayoutError,
    MemoryConfigError,
    ShapeMismatchError,
    UnsupportedDTypeError,
)
from ttjax._src.core.hardware import CoreCoord
from ttjax._src.core.tensor import Tensor

__all__ = ["Conv3dConfig", "conv3d"]

L1_ALIGNMENT = 16  # bytes; hal::get_l1_alignment() on Wormhole, C_in_block's multiple


class Conv3dConfig:
    """TT-NN's ``ttnn.Conv3dConfig`` (conv3d_pybind.cpp), keyword only, with its defaults.
    ``output_channels``, ``kernel_size``, ``stride``, ``padding``, ``padding_mode`` and ``groups``
    define the conv; ``C_in_block`` is also the weight's row blocking; the other blocks and the
    grid tile the work on a Tenstorrent chip and change no values.

    >>> ttnn.Conv3dConfig(output_channels=64, kernel_size=(3, 3, 3), stride=(1, 1, 1),
    ...                   padding=(0, 1, 1)).padding_mode
    'zeros'
    """

    def __init__(
        self,
        *,
        dtype: DataType = DataType.BFLOAT16,
        weights_dtype: DataType = DataType.BFLOAT16,
        output_layout: Layout = Layout.ROW_MAJOR,
        T_out_block: int = 1,
        W_out_block: int = 1,
        H_out_block: int = 1,
        C_out_block: int = 0,
        C_in_block: int = 0,
        output_channels: int,
        kernel_size: tuple[int, int, int],
        stride: tuple[int, int, int],
        padding: tuple[int, int, int],
        padding_mode: str = "zeros",
        groups: int = 1,
        compute_with_storage_grid_size: Any = None,
    ) -> None:
        self.dtype = dtype
        self.weights_dtype = weights_dtype
        self.output_layout = output_layout
        self.T_out_block = int(T_out_block)
        self.W_out_block = int(W_out_block)
        self.H_out_block = int(H_out_block)
        self.C_out_block = int(C_out_block)
        self.C_in_block = int(C_in_block)
        self.output_channels = int(output_channels)
        self.kernel_size = _triple("kernel_size", kernel_size)
        self.stride = _triple("stride", stride)
        self.padding = _triple("padding", padding)
        self.padding_mode = str(padding_mode)
        self.groups = int(groups)
        grid = compute_with_storage_grid_size
        self.compute_with_storage_grid_size = (
            CoreCoord(1, 1)
            if grid is None
            else CoreCoord(*grid)
            if isinstance(grid, tuple)
            else grid
        )

    def _key(self) -> tuple[Any, ...]:
        return tuple(sorted((k, repr(v)) for k, v in vars(self).items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Conv3dConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"Conv3dConfig({fields})"


def _triple(name: str, value: Any) -> tuple[int, int, int]:
    try:
        t = tuple(int(v) for v in value)
    except TypeError:
        t = ()
    if len(t) != 3 or min(t) < 0:
        raise ConfigError(
            f"ttnn.Conv3dConfig: {name}={value!r} must be three non-negative ints (T, H, W).\n"
            f"fix: e.g. {name}=(1, 1, 1)."
        )
    return (t[0], t[1], t[2])


def _fail(cls: type[Exception], message: str, fix: str) -> NoReturn:
    raise cls(f"ttnn.experimental.conv3d: {message}\nfix: {fix}")


def output_dims(
    shape: tuple[int, ...], config: Conv3dConfig
) -> tuple[int, int, int]:  # detail::compute_output_dims
    return (
        (shape[1] + 2 * config.padding[0] - config.kernel_size[0]) // config.stride[0] + 1,
        (shape[2] + 2 * config.padding[1] - config.kernel_size[1]) // config.stride[1] + 1,
        (shape[3] + 2 * config.padding[2] - config.kernel_size[2]) // config.stride[2] + 1,
    )


def _validate(x: Tensor, w: Tensor, b: Tensor | None, c: Conv3dConfig) -> int:
    """Conv3dOp::validate's rules, in its order; returns C_in_block."""
    for t in (x, w) if b is None else (x, w, b):
        if t._storage is not StorageType.DEVICE:
            _fail(LayoutError, f"{t!r} is on host; conv3d's operands live on device.",
                  "ttnn.from_torch(..., device=mesh).")  # fmt: skip
    if len(x._shape) != 5:
        _fail(
            ShapeMismatchError,
            f"Activation tensor must have 5 dimensions. got {len(x._shape)}",
            "pass the input as [1, T, H, W, C_in] (NDHWC).",
        )
    if x._shape[0] != 1:
        _fail(
            ShapeMismatchError,
            f"Activation tensor must have batch size 1. got {x._shape[0]}",
            "run one batch entry at a time.",
        )
    if x._layout is not Layout.ROW_MAJOR:
        _fail(LayoutError, "Activation tensor must be row-major.", "ttnn.to_layout(x, ROW_MAJOR).")
    for t in (x, w):
        if t.is_sharded():
            _fail(MemoryConfigError, "Activation tensor must be interleaved.", "interleave it.")
        if t._dtype is not DataType.BFLOAT16:
            _fail(
                UnsupportedDTypeError,
                f"Activation tensor must be bfloat16 (got {t._dtype!r}).",
                "ttnn.typecast(t, ttnn.bfloat16).",
            )
    if w._layout is not Layout.TILE:
        _fail(LayoutError, "Weight tensor must be tile.", "from_torch(w, layout=ttnn.TILE_LAYOUT).")
    if b is not None:
        if b.is_sharded():
            _fail(MemoryConfigError, "Bias tensor must be interleaved.", "interleave it.")
        if b._layout is not Layout.TILE:
            _fail(LayoutError, "Bias tensor must be tiled.", "from_torch(b, layout=TILE_LAYOUT).")
        if b._dtype is not DataType.BFLOAT16:
            _fail(
                UnsupportedDTypeError,
                f"Bias tensor must be bfloat16. got {b._dtype!r}",
                "ttnn.from_torch(bias, dtype=ttnn.bfloat16).",
            )
        if len(b._shape) != 2:
            _fail(
                ShapeMismatchError,
                f"Bias tensor must have 2 dimensions. got {len(b._shape)}",
                "pass the bias as [1, C_out].",
            )
    if c.groups != 1:
        _fail(ConfigError, f"Groups must be 1. got {c.groups}", "groups=1.")
    if c.padding[0] != 0:
        _fail(
            ConfigError,
            f"Padding must be (0,x,x). got {c.padding}",
            "pad T yourself (tt_dit pads the time axis causally before the conv).",
        )
    if c.padding_mode not in ("zeros", "replicate"):
        _fail(
            ConfigError,
            f"Padding mode must be zeros or replicate. got {c.padding_mode}",
            'padding_mode="zeros" or "replicate".',
        )
    if c.C_out_block > 0 and (c.output_channels % c.C_out_block or c.C_out_block % TILE_SIZE):
        _fail(
            ConfigError,
            f"C_out_block must be a multiple of 32 and divide evenly into output channels. Got "
            f"C_out_block={c.C_out_block} and output_channels={c.output_channels}.",
            "C_out_block=0 (all) or a multiple of 32 dividing output_channels.",
        )
    if c.output_channels % TILE_SIZE:
        _fail(
            ConfigError,
            f"Output channels must be a multiple of 32. (got {c.output_channels})",
            "pad the output channels to a multiple of 32.",
        )
    c_in = x._shape[4]
    patch = c.kernel_size[0] * c.kernel_size[1] * c.kernel_size[2] * c_in
    if len(w._shape) < 2 or w._shape[-2] != patch:
        _fail(
            ShapeMismatchError,
            f"Weight patch size must match input patch size. got "
            f"{w._shape[-2] if len(w._shape) >= 2 else w._shape} vs {patch}",
            "prepare the weight as [kT*kH*kW*C_in, C_out] (tt_dit's prepare_conv3d_weights).",
        )
    if w._shape[-1] != c.output_channels:
        _fail(
            ShapeMismatchError,
            f"Weight output channels must match input output channels. got {w._shape[-1]} vs "
            f"{c.output_channels}",
            "Conv3dConfig.output_channels = the weight's last dim.",
        )
    if b is not None and b._shape[1] != c.output_channels:
        _fail(
            ShapeMismatchError,
            f"Bias must match output channels. got {b._shape[1]} vs {c.output_channels}",
            "pass the bias as [1, output_channels].",
        )
    grid = c.compute_with_storage_grid_size
    device_grid = x.device().compute_with_storage_grid_size()  # type: ignore[union-attr]
    if grid.x > device_grid.x or grid.y > device_grid.y:
        _fail(
            ConfigError,
            f"Requested grid size ({grid.x}, {grid.y}) exceeds device grid size "
            f"({device_grid.x}, {device_grid.y})",
            "compute_with_storage_grid_size=mesh.compute_with_storage_grid_size() or smaller.",
        )
    if c.C_in_block > 0:
        if c_in % c.C_in_block:
            _fail(
                ConfigError,
                f"Input channels ({c_in}) must be divisible by C_in_block ({c.C_in_block})",
                "a C_in_block that divides the input channels (0: all).",
            )
        if c.C_in_block % L1_ALIGNMENT:
            _fail(
                ConfigError,
                f"C_in_block ({c.C_in_block}) must be a multiple of {L1_ALIGNMENT}",
                f"a multiple of {L1_ALIGNMENT}.",
            )
    block = c.C_in_block if c.C_in_block > 0 else c_in
    if c_in // block > grid.x * grid.y:
        _fail(
            ConfigError,
            f"Number of C_in blocks ({c_in // block}) must be <= the number of cores "
            f"({grid.x * grid.y})",
            "a larger C_in_block or compute_with_storage_grid_size.",
        )
    if min(output_dims(x._shape, c)) <= 0:
        _fail(
            ShapeMismatchError,
            f"the kernel {c.kernel_size} does not fit the padded input {list(x._shape)}",
            "a smaller kernel or more padding.",
        )
    return block


def conv3d(
    *,
    input_tensor: Tensor,
    weight_tensor: Tensor,
    bias_tensor: Tensor | None = None,
    config: Conv3dConfig,
    memory_config: Any = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """TT-NN's ``ttnn.experimental.conv3d``: ``[1, T, H, W, C_in]`` (row-major) by the prepared
    weight (the module docstring gives its row order) plus bias, to ``[1, T_out, H_out, W_out,
    C_out]``, row-major, in the input's dtype and memory config (TT-NN's output spec)."""
    if not isinstance(config, Conv3dConfig):
        _fail(
            ConfigError,
            f"config={config!r} is not a ttnn.Conv3dConfig.",
            "build it with ttnn.Conv3dConfig(output_channels=..., kernel_size=..., ...).",
        )
    x, w, b = input_tensor, weight_tensor, bias_tensor
    block = _validate(x, w, b, config)
    kt, kh, kw = config.kernel_size
    c_in, c_out = x._shape[4], config.output_channels
    st, sh, sw = config.stride
    pt, ph, pw = config.padding
    edge = config.padding_mode == "replicate"
    tensors = [x, w] + ([b] if b is not None else [])

    def local(a: Any, wt: Any, *rest: Any) -> Any:
        v = a.astype(jnp.float32)
        pads = ((0, 0), (pt, pt), (ph, ph), (pw, pw), (0, 0))
        v = jnp.pad(v, pads, mode="edge" if edge else "constant")
        k = jnp.reshape(wt, (-1, c_out))[: kt * kh * kw * c_in].astype(jnp.float32)
        k = k.reshape(c_in // block, kt, kh, kw, block, c_out)
        k = jnp.moveaxis(k, 0, 3).reshape(kt, kh, kw, c_in, c_out)  # DHWIO
        y = jax.lax.conv_general_dilated(
            v,
            k,
            window_strides=(st, sh, sw),
            padding="VALID",
            dimension_numbers=("NDHWC", "DHWIO", "NDHWC"),
            precision=jax.lax.Precision.HIGHEST,
        )
        if rest:
            y = y + jnp.reshape(rest[0], (-1, c_out))[0].astype(jnp.float32)
        return y.astype(a.dtype)

    return run_op(
        "conv3d",
        local,
        tensors,
        static=(config._key(), block),
        out_layout=Layout.ROW_MAJOR,
        memory_config=x.memory_config(),
    )
