"""TT-NN's pooling family (``ttnn.max_pool2d``, ``ttnn.avg_pool2d``, ``ttnn.global_avg_pool2d``,
``ttnn.adaptive_avg_pool2d``, ``ttnn.adaptive_max_pool2d``) and ``ttnn.upsample``, per device,
over NHWC tensors. One module for them all, below the conv family (:mod:`ttjax._src.ttnn.conv`),
as ``ttjax.ops`` exports ``avg_pool2d``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import DataType, Layout
from ttjax._src.core.errors import ConfigError, LayoutError, ShapeMismatchError
from ttjax._src.core.hardware import MemoryConfig, TensorMemoryLayout
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.common import _pads4, _pair, _positive


def pool_output_size(
    size: int, pad_lo: int, pad_hi: int, k: int, s: int, ceil_mode: bool, dilation: int = 1
) -> int:
    """PyTorch's pooled size (TT-NN's SlidingWindowConfig::get_output_shape follows it): floor or
    ceil of (size + pads - dilation (k - 1) - 1) / s, plus 1; in ceil mode the last window starts
    inside the input or its leading pad."""
    span = size + pad_lo + pad_hi - dilation * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + pad_lo:
        out -= 1
    return out


def avg_pool2d(
    input_tensor: Tensor,
    batch_size: int,
    input_h: int,
    input_w: int,
    channels: int,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
    *,
    memory_config: Any = None,
    applied_shard_scheme: Any = None,
    compute_kernel_config: Any = None,
    in_place_halo: bool = False,
    deallocate_input: bool = False,
    reallocate_halo_output: bool = True,
    dtype: DataType = DataType.BFLOAT16,
    output_layout: Layout = Layout.ROW_MAJOR,
) -> Tensor:
    """TT-NN's average pool over each device's [1, 1, N*H*W, C] (NHWC flattened) tensor, giving
    [1, 1, N*Hout*Wout, C] (row-major bfloat16 unless ``output_layout``/``dtype`` say otherwise).
    ``padding`` is (h, w) or (top, bottom, left, right); the divisor is the window's size within
    the padded input (``count_include_pad``) or its real elements, or ``divisor_override``, as
    PyTorch's (ttnn/cpp/ttnn/operations/pool/generic/generic_pools.cpp).

    >>> y = ttnn.avg_pool2d(x, 1, 4, 8, 32, [2, 2], [2, 2], [0, 0])  # x per device: [1, 1, 4*8, 32]
    """
    op = "avg_pool2d"
    n, h, w, c = (int(v) for v in (batch_size, input_h, input_w, channels))
    kh, kw = (int(v) for v in kernel_size)
    sh, sw = (int(v) for v in stride)
    pads = [int(v) for v in padding]
    if len(pads) == 2:
        pads = [pads[0], pads[0], pads[1], pads[1]]
    shape = tuple(input_tensor._shape)
    if len(pads) != 4 or len(shape) != 4 or shape[2] != n * h * w or shape[3] != c:
        raise ShapeMismatchError(
            f"ttnn.{op}: input per-device shape {list(shape)} with batch_size={n}, input_h={h}, "
            f"input_w={w}, channels={c}, padding={list(padding)}; TT-NN takes [1, 1, N*H*W, C] "
            "and a padding of (h, w) or (top, bottom, left, right).\n"
            "fix: permute the NCHW tensor to NHWC and reshape it to [1, 1, N*H*W, C]."
        )
    top, bottom, left, right = pads
    ho = pool_output_size(h, top, bottom, kh, sh, bool(ceil_mode))
    wo = pool_output_size(w, left, right, kw, sw, bool(ceil_mode))
    # the input padded by its pads, then by what the last (ceil-mode) window needs
    extra_h = int(np.maximum(0, (ho - 1) * sh + kh - (h + top + bottom)))  # (ttnn.max is here)
    extra_w = int(np.maximum(0, (wo - 1) * sw + kw - (w + left + right)))
    spatial = ((0, 0), (top, bottom + extra_h), (left, right + extra_w), (0, 0))
    window, strides = (1, kh, kw, 1), (1, sh, sw, 1)

    def windows(a: Any) -> Any:
        return jax.lax.reduce_window(a, 0.0, jax.lax.add, window, strides, "VALID")

    def local(x: Any) -> Any:
        xf = jnp.reshape(x.astype(jnp.float32), (n, h, w, c))
        total = windows(jnp.pad(xf, spatial))
        if divisor_override is not None:
            div: Any = float(divisor_override)
        elif count_include_pad:
            inside = jnp.ones((1, h + top + bottom, w + left + right, 1))
            div = windows(jnp.pad(inside, ((0, 0), (0, extra_h), (0, extra_w), (0, 0))))
        else:
            div = windows(jnp.pad(jnp.ones((1, h, w, 1)), spatial))
        y = total / div
        return jnp.reshape(y, (1, 1, n * ho * wo, c)).astype(x.dtype)

    return run_op(
        op,
        local,
        [input_tensor],
        static=(
            n,
            h,
            w,
            c,
            kh,
            kw,
            sh,
            sw,
            tuple(pads),
            ho,
            wo,
            count_include_pad,
            divisor_override,
        ),
        out_dtype=dtype,
        out_layout=output_layout,
        memory_config=memory_config,
    )


def _pool_input(op: str, x: Tensor, n: int, h: int, w: int, c: int) -> None:
    """pool_utils.cpp's validate_input_params: [1, 1, N*H*W, C] or [N, H, W, C]."""
    _positive(op, batch_size=n, input_h=h, input_w=w, channels=c)
    s = tuple(x._shape)
    flat = len(s) == 4 and s == (1, 1, n * h * w, c)
    nhwc = len(s) == 4 and s == (n, h, w, c) and not x._dtype.is_block_float
    if not (flat or nhwc):
        raise ShapeMismatchError(
            f"ttnn.{op}: Input tensor shape {list(s)} does not match expected shape. For block "
            f"format inputs (bfloat8_b/bfloat4_b) only flattened format (1, 1, {n * h * w}, {c}) "
            f"is supported. Unflattened format ({n}, {h}, {w}, {c}) is not supported for block "
            "format inputs.\nfix: permute the NCHW tensor to NHWC and reshape it to "
            "[1, 1, N*H*W, C] (per device)."
        )


def max_pool2d(
    input_tensor: Tensor,
    batch_size: int,
    input_h: int,
    input_w: int,
    channels: int,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool = False,
    *,
    memory_config: MemoryConfig | None = None,
    applied_shard_scheme: TensorMemoryLayout | None = None,
    in_place_halo: bool = False,
    deallocate_input: bool = False,
    reallocate_halo_output: bool = True,
    return_indices: bool = False,
    dtype: DataType = DataType.BFLOAT16,
    output_layout: Layout = Layout.ROW_MAJOR,
) -> Any:
    """TT-NN's ``ttnn.max_pool2d`` over each device's ``[1, 1, N*H*W, C]`` (or ``[N, H, W, C]``)
    tensor, giving ``[1, 1, N*OH*OW, C]`` (row-major bfloat16 unless ``output_layout``/``dtype``
    say otherwise). Padding is -inf, ``padding`` (h, w) or (top, bottom, left, right), with
    dilation and ceil mode as PyTorch's (ttnn/cpp/ttnn/operations/pool/generic/generic_pools.cpp).
    ``return_indices`` adds the uint16 index ``h * W + w`` of each max in its image.

    >>> ttnn.max_pool2d(x, 1, 4, 8, 32, [2, 2], [2, 2], [0, 0], [1, 1]).shape  # x: [1, 1, 4*8, 32]
    Shape([1, 1, 8, 32])
    """
    op = "max_pool2d"
    n, h, w, c = (int(v) for v in (batch_size, input_h, input_w, channels))
    _pool_input(op, input_tensor, n, h, w, c)
    kh, kw = _pair(op, "kernel_size", kernel_size)
    sh, sw = _pair(op, "stride", stride)
    dh, dw = _pair(op, "dilation", dilation)
    for name, v in (("Kernel size", (kh, kw)), ("Stride", (sh, sw)), ("Dilation", (dh, dw))):
        if min(v) <= 0:
            raise ConfigError(
                f"ttnn.{op}: Pool2D: {name} must be greater than 0 in both dimensions, got "
                f"({v[0]}, {v[1]})\nfix: pass positive values."
            )
    pads = _pads4(op, padding)
    if dtype not in (DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.BFLOAT4_B):
        raise ConfigError(
            f"ttnn.{op}: Currently only BFLOAT16, BFLOAT8_B, and BFLOAT4_B output data formats "
            f"are supported (got {dtype!r}).\nfix: dtype=ttnn.bfloat16."
        )
    if dtype.is_block_float and output_layout is Layout.ROW_MAJOR:
        raise LayoutError(
            f"ttnn.{op}: BFLOAT8_B/BFLOAT4_B output data format is not supported with ROW_MAJOR "
            "layout\nfix: output_layout=ttnn.TILE_LAYOUT."
        )
    if applied_shard_scheme is not None and input_tensor._spec.memory_config.is_sharded():
        raise ConfigError(
            f"ttnn.{op}: A sharding scheme should not be specified for a sharded input tensor.\n"
            "fix: leave applied_shard_scheme None."
        )
    cm = bool(ceil_mode)
    oh = pool_output_size(h, pads[0], pads[1], kh, sh, cm, dh)
    ow = pool_output_size(w, pads[2], pads[3], kw, sw, cm, dw)
    extra_h = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - (h + pads[0] + pads[1]))
    extra_w = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - (w + pads[2] + pads[3]))
    window = (1, kh, kw, 1)
    strides = (1, sh, sw, 1)
    wdil = (1, dh, dw, 1)
    padding4 = ((0, 0), (pads[0], pads[1] + extra_h), (pads[2], pads[3] + extra_w), (0, 0))
    idx = bool(return_indices)

    def local(x: Any) -> Any:
        xf = jnp.reshape(x.astype(jnp.float32), (n, h, w, c))
        y = jax.lax.reduce_window(
            xf, -jnp.inf, jax.lax.max, window, strides, padding4, window_dilation=wdil
        )
        out = jnp.reshape(y, (1, 1, n * oh * ow, c)).astype(x.dtype)
        if not idx:
            return out
        # the first position of the max in each window, as an index h * W + w of the image
        pos = jnp.broadcast_to(jnp.arange(h * w, dtype=jnp.float32).reshape(1, h, w, 1), xf.shape)
        big = float(h * w)

        def pick(a: Any, b: Any) -> Any:
            (va, ia), (vb, ib) = a, b
            take_b = (vb > va) | ((vb == va) & (ib < ia))
            return jnp.where(take_b, vb, va), jnp.where(take_b, ib, ia)

        _, i = jax.lax.reduce_window(
            (xf, pos),
            (jnp.float32(-jnp.inf), jnp.float32(big)),
            pick,
            window,
            strides,
            padding4,
            window_dilation=wdil,
        )
        return out, jnp.reshape(i, (1, 1, n * oh * ow, c)).astype(jnp.uint16)

    return run_op(
        op,
        local,
        [input_tensor],
        static=(n, h, w, c, kh, kw, sh, sw, dh, dw, pads, oh, ow, idx),
        out_dtype=(dtype, DataType.UINT16) if idx else dtype,
        out_layout=output_layout,
        memory_config=memory_config,
    )


def global_avg_pool2d(
    input_tensor: Tensor,
    *,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
) -> Tensor:
    """TT-NN's ``ttnn.global_avg_pool2d``: each device's ``[N, H, W, C]`` tensor averaged over its
    two middle dims, giving ``[N, 1, 1, C]`` (global_avg_pool.cpp views it as
    ``[N, 1, H*W, C]`` and sums the rows times 1 / (H*W)). The output keeps the input's dtype, as
    TT-NN's kernel does (its ``dtype`` is not passed on).

    >>> ttnn.global_avg_pool2d(x).shape  # x per device: [1, 1, 32, 32] read as [N, H, W, C]
    Shape([1, 1, 1, 32])
    """
    op = "global_avg_pool2d"
    s = tuple(input_tensor._shape)
    if len(s) != 4:
        raise ShapeMismatchError(
            f"ttnn.{op}: input per-device shape {list(s)}; TT-NN takes [N, H, W, C].\n"
            "fix: reshape the input to 4-D NHWC."
        )

    def local(x: Any) -> Any:
        return jnp.mean(x.astype(jnp.float32), axis=(1, 2), keepdims=True).astype(x.dtype)

    return run_op(op, local, [input_tensor], memory_config=memory_config)


def _adaptive_windows(size: int, out: int) -> list[int]:
    """PyTorch's adaptive window sizes along one dim (floor start, ceil end)."""
    return [((i + 1) * size + out - 1) // out - (i * size) // out for i in range(out)]


def _adaptive_params(
    op: str, sizes: Sequence[Any], output_size: Sequence[int]
) -> tuple[tuple[int, int, int, int], list[int], list[int], list[int]]:
    """TT-NN's adaptive pool as one uniform pool (experimental/adaptive_pool/adaptive_pool_utils.cpp):
    uniform windows give kernel ceil(in / out) and stride in / out; a pattern whose middle windows
    agree and whose border ones are no larger is padded to the middle size, stride middle - 1;
    anything else is refused, as TT-NN refuses it. Returns (n, h, w, c), kernel, stride, padding."""
    n, h, w, c = (int(v) for v in sizes)
    oh, ow = _pair(op, "output_size", output_size)
    _positive(op, output_h=oh, output_w=ow)
    params = []
    for size, out, dim in ((h, oh, "Height"), (w, ow, "Width")):
        ks = _adaptive_windows(size, out)
        middle = ks[1:-1]
        uniform_mid = len(set(middle)) <= 1
        borders_ok = len(ks) <= 2 or (ks[0] <= ks[1] and ks[-1] <= ks[1])
        if not (uniform_mid and borders_ok):
            raise ConfigError(
                f"ttnn.{op}: Adaptive pooling configuration not supported. {dim} kernel pattern "
                f"[{','.join(map(str, ks))}] - "
                + ("middle elements not uniform, " if not uniform_mid else "")
                + (
                    "border elements larger than middle (padding won't help), "
                    if not borders_ok
                    else ""
                )
                + f"\nfix: an output size that divides the input ({size}) evenly."
            )
        if len(set(ks)) == 1:
            params.append((-(-size // out), size // out, 0, 0))
            continue
        mid = ks[1] if len(ks) >= 3 else -(-size // out)
        lo = mid - ks[0] if len(ks) >= 3 and ks[0] < mid else 0
        hi = mid - ks[-1] if len(ks) >= 3 and ks[-1] < mid else 0
        stride = mid - 1 if (lo or hi) else size // out
        if (size + lo + hi - mid) // max(stride, 1) + 1 != out:
            params.append((-(-size // out), size // out, 0, 0))
        else:
            params.append((mid, stride, lo, hi))
    (khh, shh, th, bh), (kww, sww, lw, rw) = params
    return (n, h, w, c), [khh, kww], [shh, sww], [th, bh, lw, rw]


def adaptive_avg_pool2d(
    input_tensor: Tensor,
    batch_size: int,
    input_h: int,
    input_w: int,
    channels: int,
    output_size: Sequence[int],
    *,
    memory_config: MemoryConfig | None = None,
    applied_shard_scheme: TensorMemoryLayout | None = None,
    compute_kernel_config: Any = None,
    in_place_halo: bool = False,
    deallocate_input: bool = False,
    reallocate_output: bool = True,
) -> Tensor:
    """TT-NN's ``ttnn.adaptive_avg_pool2d``: one :func:`ttjax.avg_pool2d` whose kernel, stride and
    padding TT-NN derives from the input and output sizes (padding not counted), so the windows
    are PyTorch's where TT-NN's rule reaches them; sizes it cannot reach are refused as TT-NN
    refuses them.

    >>> ttnn.adaptive_avg_pool2d(x, 1, 4, 8, 32, [2, 2]).shape  # x per device: [1, 1, 4*8, 32]
    Shape([1, 1, 4, 32])
    """
    sizes = (batch_size, input_h, input_w, channels)
    nhwc, k, s, p = _adaptive_params("adaptive_avg_pool2d", sizes, output_size)
    return avg_pool2d(input_tensor, *nhwc, k, s, p, False, False, None, memory_config=memory_config)


def adaptive_max_pool2d(
    input_tensor: Tensor,
    batch_size: int,
    input_h: int,
    input_w: int,
    channels: int,
    output_size: Sequence[int],
    *,
    memory_config: MemoryConfig | None = None,
    applied_shard_scheme: TensorMemoryLayout | None = None,
    in_place_halo: bool = False,
    deallocate_input: bool = False,
    reallocate_output: bool = True,
) -> Tensor:
    """TT-NN's ``ttnn.adaptive_max_pool2d``: one :func:`max_pool2d` with the kernel, stride and
    padding of :func:`adaptive_avg_pool2d`'s rule (padding is -inf, so it never wins)."""
    sizes = (batch_size, input_h, input_w, channels)
    nhwc, k, s, p = _adaptive_params("adaptive_max_pool2d", sizes, output_size)
    out: Tensor = max_pool2d(input_tensor, *nhwc, k, s, p, [1, 1], memory_config=memory_config)
    return out


def upsample(
    input_tensor: Tensor,
    scale_factor: int | Sequence[int],
    *,
    mode: str = "nearest",
    memory_config: MemoryConfig | None = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """TT-NN's ``ttnn.upsample``: each device's ``[N, H, W, C]`` tensor scaled by an integer
    ``scale_factor`` (one int, or (h, w)) to ``[N, H*sh, W*sw, C]``, ``"nearest"`` (every pixel
    repeated) or ``"bilinear"`` (PyTorch's ``align_corners=False``; bfloat16 row-major input, as
    TT-NN's kernel takes) (ttnn/cpp/ttnn/operations/pool/upsample).

    >>> ttnn.upsample(x, 2).shape  # x per device: [1, 1, 32, 32] read as [N, H, W, C]
    Shape([1, 2, 64, 32])
    """
    op = "upsample"
    sh, sw = _pair(op, "scale_factor", scale_factor)
    _positive(op, scale_h=sh, scale_w=sw)
    if mode not in ("nearest", "bilinear"):
        raise ConfigError(
            f"ttnn.{op}: mode={mode!r}: Upsample only supports bilinear or nearest mode\n"
            'fix: mode="nearest" or mode="bilinear".'
        )
    if input_tensor._layout is Layout.TILE and mode != "nearest":
        raise LayoutError(
            f"ttnn.{op}: Only nearest upsample mode is supported for tiled inputs\n"
            'fix: ttnn.to_layout(x, ttnn.ROW_MAJOR_LAYOUT) first, or mode="nearest".'
        )
    if mode == "bilinear" and input_tensor._dtype is not DataType.BFLOAT16:
        raise ConfigError(
            f"ttnn.{op}: Bilinear upsample requires BFLOAT16 input (got "
            f"{input_tensor._dtype!r})\nfix: ttnn.typecast(x, ttnn.bfloat16) first."
        )
    s = tuple(input_tensor._shape)
    if len(s) != 4:
        raise ShapeMismatchError(
            f"ttnn.{op}: input per-device shape {list(s)}; TT-NN takes [N, H, W, C].\n"
            "fix: reshape the input to 4-D NHWC."
        )

    def local(x: Any) -> Any:
        n, h, w, c = x.shape
        if mode == "nearest":
            return jnp.repeat(jnp.repeat(x, sh, axis=1), sw, axis=2)
        y = jax.image.resize(x.astype(jnp.float32), (n, h * sh, w * sw, c), "linear")
        return y.astype(x.dtype)

    return run_op(op, local, [input_tensor], static=(sh, sw, mode), memory_config=memory_config)


__all__ = [
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "avg_pool2d",
    "global_avg_pool2d",
    "max_pool2d",
    "pool_output_size",
    "upsample",
]
