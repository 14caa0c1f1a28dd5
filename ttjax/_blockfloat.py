"""TT-NN's block floating point formats, bfloat8_b and bfloat4_b.

Sixteen consecutive values along the last dim share one 8-bit exponent; each value keeps a sign
and a 7-bit (bfloat8_b) or 3-bit (bfloat4_b) magnitude. Storage per 16 values: 16 + 1 bytes for
bfloat8_b, 8 + 1 bytes for bfloat4_b (two 4-bit values per byte), so a 32x32 tile takes 1088 and
576 bytes, as on Tenstorrent hardware. The last dim is padded to a multiple of 32 (TILE layout).

Every function takes ``xp`` (numpy or jax.numpy) so host conversion and in-op decoding share code.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ttjax.enums import TILE_SIZE, DataType

GROUP = 16
_BIAS = 127
_MAG_BITS = {DataType.BFLOAT8_B: 7, DataType.BFLOAT4_B: 3}


class BlockFloatData(NamedTuple):
    """Device storage of a block-float tensor: mantissas and shared exponents (a JAX pytree)."""

    mantissa: Any
    exponent: Any


def primary(data: Any) -> Any:
    """The array that stands for a tensor's storage: the mantissas of a block-float tensor.

    >>> primary(BlockFloatData("m", "e"))
    'm'
    """
    return data.mantissa if isinstance(data, BlockFloatData) else data


def padded_width(width: int) -> int:
    """Last-dim length once padded to whole tiles."""
    return -(-width // TILE_SIZE) * TILE_SIZE if width else TILE_SIZE


def storage_shapes(dtype: DataType, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Shapes of (mantissa, exponent) for a block-float tensor of logical ``shape``."""
    lead, w = tuple(shape[:-1]), padded_width(shape[-1] if shape else 1)
    mant_w = w if dtype is DataType.BFLOAT8_B else w // 2
    return (*lead, mant_w), (*lead, w // GROUP)


def storage_dtypes(dtype: DataType) -> tuple[np.dtype, np.dtype]:
    return (np.dtype(np.int8) if dtype is DataType.BFLOAT8_B else np.dtype(np.uint8)), np.dtype(
        np.uint8
    )


def _pow2(xp: Any, k: Any) -> Any:
    """``2.0 ** k`` as float32, exactly, for integer arrays ``k`` in [-126, 127]: its bits.

    >>> _pow2(np, np.array([-1, 0, 3]))
    array([0.5, 1. , 8. ], dtype=float32)
    """
    return ((k + 127) << 23).astype(xp.int32).view(xp.float32)


def encode(xp: Any, x: Any, dtype: DataType) -> BlockFloatData:
    """Quantize ``x`` (any float array, rank >= 1) to block floats.

    Per group of 16: the shared exponent is ``frexp``'s exponent of the largest magnitude (zeros
    never raise it; inf and nan count as exponent 0), and each value is rounded (half to even)
    to ``bits`` magnitude bits below it, saturating. The exponent comes from the group's largest
    magnitude found on the float bits, and the scaling is a multiply by an exact power of two,
    so per element there is no ``frexp``/``ldexp`` (XLA has neither: each is a dozen ops).
    """
    bits = _MAG_BITS[dtype]
    x = xp.asarray(x).astype(xp.float32)
    if x.ndim == 0:
        x = xp.reshape(x, (1,))
    w = x.shape[-1]
    wp = padded_width(w)
    if wp != w:
        pad = [(0, 0)] * (x.ndim - 1) + [(0, wp - w)]
        x = xp.pad(x, pad)
    g = xp.reshape(x, (*x.shape[:-1], wp // GROUP, GROUP))
    # |x|'s bits order like |x| for finite values; inf and nan stand in as 0.5 (exponent 0).
    mag = g.view(xp.int32) & 0x7FFFFFFF
    mag = xp.where(mag >= 0x7F800000, 0x3F000000, mag)
    top = xp.max(mag, axis=-1, keepdims=True)
    _, e = xp.frexp(top.view(xp.float32))
    # A group of zeros (and the tile padding) gets the smallest exponent.
    emax = xp.clip(xp.where(top == 0, -_BIAS, e), -_BIAS, 255 - _BIAS)
    # g * 2**(bits - emax), exact: the power (up to 2**134) is split in two float32 factors.
    n = (bits - emax).astype(xp.int32)
    n1 = xp.minimum(n, 127)
    shifted = g * _pow2(xp, n1) * _pow2(xp, n - n1)
    limit = 2**bits - 1
    m = xp.clip(xp.round(shifted), -limit, limit).astype(xp.int8)
    m = xp.reshape(m, (*x.shape[:-1], wp))
    exp = xp.reshape((emax + _BIAS).astype(xp.uint8), (*x.shape[:-1], wp // GROUP))
    if dtype is DataType.BFLOAT4_B:
        nib = (m.astype(xp.int32) & 0xF).astype(xp.uint8)
        m = nib[..., 0::2] | (nib[..., 1::2] << 4)
    return BlockFloatData(m, exp)


def decode(xp: Any, data: BlockFloatData, dtype: DataType, shape: tuple[int, ...]) -> Any:
    """Dequantize to float32 values of logical ``shape`` (padding dropped)."""
    bits = _MAG_BITS[dtype]
    m, exp = data
    if dtype is DataType.BFLOAT4_B:
        lo = (m & 0xF).astype(xp.int32)
        hi = (m >> 4).astype(xp.int32)
        m = xp.reshape(xp.stack([(lo ^ 8) - 8, (hi ^ 8) - 8], axis=-1), (*m.shape[:-1], -1))
    wp = m.shape[-1]
    g = xp.reshape(m.astype(xp.float32), (*m.shape[:-1], wp // GROUP, GROUP))
    e = exp.astype(xp.int32) - _BIAS - bits
    vals = g * xp.ldexp(xp.ones(e.shape, xp.float32), e)[..., None]
    vals = xp.reshape(vals, (*m.shape[:-1], wp))
    w = shape[-1] if shape else 1
    vals = vals[..., :w]
    return xp.reshape(vals, tuple(shape))


def quantize(xp: Any, x: Any, dtype: DataType) -> Any:
    """Round-trip ``x`` through the block format: the values a device would hold."""
    shape = tuple(x.shape)
    return decode(xp, encode(xp, x, dtype), dtype, shape)
