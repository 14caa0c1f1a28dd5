"""TT-NN's block floating point formats, bfloat8_b and bfloat4_b.

Sixteen consecutive values along the last dim share one 8-bit exponent; each value keeps a sign
and a 7-bit (bfloat8_b) or 3-bit (bfloat4_b) magnitude. Storage per 16 values: 16 + 1 bytes for
bfloat8_b, 8 + 1 bytes for bfloat4_b (two 4-bit values per byte), so a 32x32 tile takes 1088 and
576 bytes, as on Tenstorrent hardware. The last dim is padded to a multiple of 32 (TILE layout).

Every function takes ``xp`` (numpy or jax.numpy) so host conversion and in-op decoding share code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.enums import TILE_SIZE, DataType

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


def _float_bits(xp: Any, x: Any) -> Any:
    """The IEEE bits of float32 ``x`` as int32 (sign in bit 31)."""
    if xp is np:
        return np.ascontiguousarray(x, np.float32).view(np.int32)
    return x.astype(xp.float32).view(xp.int32)


# Host decodes go a slab of rows of about this many values at a time, writing into preallocated
# output: their int32 temporaries then stay small next to the tensor, whatever its size.
_HOST_CHUNK = 1 << 18
# Host encodes of at least _XLA_MIN values run as one XLA program per slab of rows of about
# _XLA_SLAB values (the same integer operations as numpy's, so the same bits; ~30x faster).
_XLA_MIN = 1 << 16
_XLA_SLAB = 1 << 22


def row_chunks(shape: tuple[int, ...]) -> Iterator[tuple[Any, ...]]:
    """Indices that cut an array of ``shape`` into pieces of whole last-dim rows, about
    ``_HOST_CHUNK`` values each (a longer row is one piece), in order; a rank < 2 array is one.

    >>> list(row_chunks((2, 3, 4)))
    [(slice(0, 21845, None),)]
    """
    if len(shape) < 2:
        yield (Ellipsis,)
        return
    j, after = len(shape) - 2, max(shape[-1], 1)
    while j > 0 and after * shape[j] <= _HOST_CHUNK:
        after *= shape[j]
        j -= 1
    step = max(1, _HOST_CHUNK // after)
    for outer in np.ndindex(*shape[:j]):
        for start in range(0, shape[j], step):
            yield (*outer, slice(start, start + step))


@functools.cache
def _xla_encoder(dtype: DataType) -> Callable[[Any], BlockFloatData]:
    return jax.jit(functools.partial(_encode, jnp, dtype=dtype))


def encode(xp: Any, x: Any, dtype: DataType) -> BlockFloatData:
    """Quantize ``x`` (any float array, rank >= 1) to block floats (see :func:`_encode`).

    On the host (numpy) a large array is encoded by XLA a slab of rows at a time (float32
    slabs of equal shape, the last one zero-padded) into preallocated storage: no full-size
    float32 or int32 temporaries, and the same bits as numpy's encode."""
    if xp is not np or np.size(x) < _XLA_MIN or np.ndim(x) == 0:
        return _encode(xp, x, dtype)
    x = np.asarray(x)
    m_shape, e_shape = storage_shapes(dtype, x.shape)
    m_dtype, e_dtype = storage_dtypes(dtype)
    out = BlockFloatData(np.empty(m_shape, m_dtype), np.empty(e_shape, e_dtype))
    width = x.shape[-1]
    rows = x.reshape(-1, width)
    m_rows, e_rows = out.mantissa.reshape(len(rows), -1), out.exponent.reshape(len(rows), -1)
    step = -(-len(rows) // -(-x.size // _XLA_SLAB))
    fn = _xla_encoder(dtype)
    for start in range(0, len(rows), step):
        n = min(step, len(rows) - start)
        slab = np.zeros((step, width), np.float32) if n < step else None
        if slab is None:
            slab = np.asarray(rows[start : start + n], np.float32)
        else:
            slab[:n] = rows[start : start + n]
        m, e = fn(slab)
        m_rows[start : start + n] = np.asarray(m)[:n]
        e_rows[start : start + n] = np.asarray(e)[:n]
    return out


def quantize_into(x: np.ndarray, dtype: DataType, out: np.ndarray) -> None:
    """Write the block-float values of host array ``x`` into ``out`` (same shape, any float
    dtype): :func:`quantize` a slab of rows at a time, bit for bit the same.

    >>> out = np.empty(3, np.float32); quantize_into(np.array([1.0, 0.3, -2.0]), DataType.BFLOAT8_B, out)
    >>> out
    array([ 1.    ,  0.3125, -2.    ], dtype=float32)
    """
    if x.ndim == 0:
        x, out = x.reshape(1), out.reshape(1)
    for idx in row_chunks(x.shape):
        piece = x[idx]
        with np.errstate(over="ignore"):  # a group holding inf decodes to inf, on purpose
            out[idx] = decode(np, _encode(np, piece, dtype), dtype, tuple(piece.shape))


def _encode(xp: Any, x: Any, dtype: DataType) -> BlockFloatData:
    """Quantize ``x`` (any float array, rank >= 1) to block floats, bit for bit as TT-NN's host
    conversion (``tt_metal/impl/data_format/blockfloat_common.cpp`` at 821525122af5:
    ``get_max_exp`` and ``convert_u32_to_bfp<Bfp8_b|Bfp4_b, false>`` with ``is_exp_a`` false).

    * The shared exponent of 16 values is the largest float32 biased exponent among them; zeros
      and subnormals have exponent 0 (``get_max_exp`` starts from 0), so they never raise it.
    * A zero or subnormal input becomes 0 (``is_zero_or_denormal``).
    * The 24-bit significand (hidden 1 added) is shifted right by (shared - own exponent),
      dropping the bits shifted out, then rounded to nearest, ties to even, on the bits left
      (``MANTISSA_ROUND_MASK``/``TIE_VALUE``); a round-up past the largest magnitude saturates.
    * Sign and magnitude: a magnitude of 0 has no sign. ttjax stores the signed magnitude (int8
      for bfloat8_b, two 4-bit two's-complement nibbles a byte for bfloat4_b): the same values.
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
    u = xp.reshape(_float_bits(xp, x), (*x.shape[:-1], wp // GROUP, GROUP))
    e = (u >> 23) & 0xFF
    shared = xp.max(e, axis=-1, keepdims=True)
    significand = (u & 0x7FFFFF) | (1 << 23)
    # (shared - e) can pass 31: TT-NN shifts by 31 at a time, and any shift >= 24 leaves 0.
    significand = significand >> xp.minimum(shared - e, 31)
    drop = 24 - bits
    rest = significand & ((1 << drop) - 1)
    mag = significand >> drop
    tie = 1 << (drop - 1)
    mag = mag + ((rest > tie) | ((rest == tie) & ((mag & 1) == 1))).astype(mag.dtype)
    mag = xp.where(e == 0, 0, xp.minimum(mag, 2**bits - 1))
    m = xp.where(u < 0, -mag, mag).astype(xp.int8)
    m = xp.reshape(m, (*x.shape[:-1], wp))
    exp = xp.reshape(shared.astype(xp.uint8), (*x.shape[:-1], wp // GROUP))
    if dtype is DataType.BFLOAT4_B:
        nib = (m.astype(xp.int32) & 0xF).astype(xp.uint8)
        m = nib[..., 0::2] | (nib[..., 1::2] << 4)
    return BlockFloatData(m, exp)


def _pow2(xp: Any, k: Any) -> Any:
    """``2.0 ** k`` as float32, exactly, for integer arrays ``k`` in [-126, 127], from its bits.

    >>> _pow2(np, np.array([-1, 0, 3]))
    array([0.5, 1. , 8. ], dtype=float32)
    """
    return ((k + 127) << 23).astype(xp.int32).view(xp.float32)


def decode(xp: Any, data: BlockFloatData, dtype: DataType, shape: tuple[int, ...]) -> Any:
    """Dequantize to float32 values of logical ``shape`` (padding dropped): magnitude times
    2 ** (shared - 127 - (bits - 1)), as ``convert_bfp_to_u32`` rebuilds the float. A shared
    exponent of 255 (an inf or NaN in the group) gives inf for a magnitude with only its top
    bit set and NaN for the other full magnitudes (exponent field 255), as there."""
    bits = _MAG_BITS[dtype]
    m, exp = data
    if dtype is DataType.BFLOAT4_B:
        lo = (m & 0xF).astype(xp.int32)
        hi = (m >> 4).astype(xp.int32)
        m = xp.reshape(xp.stack([(lo ^ 8) - 8, (hi ^ 8) - 8], axis=-1), (*m.shape[:-1], -1))
    wp = m.shape[-1]
    g = xp.reshape(m.astype(xp.int32), (*m.shape[:-1], wp // GROUP, GROUP))
    shared = exp.astype(xp.int32)[..., None]
    # The scale 2**k per group, as two exact float32 powers of two built from bits (no per-value
    # ldexp: in XLA that is a dozen ops a value, and every bfloat8_b weight is decoded each step).
    # k reaches -133: a single factor would be subnormal there, which flush-to-zero CPU modes
    # (XLA's) turn into 0, so it is split at -126; the products are exact (small integers times
    # powers of two), the same values as ldexp.
    k = shared - _BIAS - (bits - 1)
    k_hi = xp.maximum(k, -126)
    vals = g.astype(xp.float32) * _pow2(xp, k - k_hi) * _pow2(xp, k_hi)
    top = 1 << (bits - 1)
    vals = xp.where((shared == 255) & (xp.abs(g) > top), xp.float32(np.nan), vals)
    vals = xp.reshape(vals, (*m.shape[:-1], wp))
    w = shape[-1] if shape else 1
    vals = vals[..., :w]
    return xp.reshape(vals, tuple(shape))


def quantize(xp: Any, x: Any, dtype: DataType) -> Any:
    """Round-trip ``x`` through the block format: the values a device would hold."""
    shape = tuple(x.shape)
    return decode(xp, encode(xp, x, dtype), dtype, shape)
