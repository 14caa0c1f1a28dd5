"""bfloat8_b / bfloat4_b codec against a scalar loop reference of the block-float format."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from _reference import blockfloat_encode_frexp, blockfloat_quantize, pcc
from hypothesis import given
from hypothesis import strategies as st

import ttjax as ttnn
from ttjax import _blockfloat

BITS = {ttnn.bfloat8_b: 7, ttnn.bfloat4_b: 3}
DTYPES = list(BITS)


def _bf16_values(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    """Random float32 values that bfloat16 holds exactly (device conversion goes via bfloat16)."""
    x = rng.standard_normal(shape) * scale
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
@given(
    seed=st.integers(0, 2**16),
    width=st.sampled_from([1, 8, 16, 33, 64]),
    rows=st.integers(1, 3),
    spread=st.sampled_from([1.0, 1e-3, 1e4]),
)
def test_quantize_matches_scalar_reference(dtype, seed, width, rows, spread):
    rng = np.random.default_rng(seed)
    x = _bf16_values(rng, (rows, width))
    x[:, ::3] *= spread  # mix magnitudes inside groups
    x[0, 0] = 0.0  # a zero never sets the shared exponent
    out = _blockfloat.quantize(np, x, dtype)
    assert out.shape == x.shape
    np.testing.assert_array_equal(out.astype(np.float64), blockfloat_quantize(x, BITS[dtype]))


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
def test_small_values_next_to_zero_padding_keep_precision(dtype):
    # Width 8: the group of 16 is half padding zeros. Values near 0.01 must not be flushed to a
    # multiple of 2**-bits (what happens if zeros count as exponent 0).
    x = np.array([[0.01, 0.011, 0.012, 0.013, -0.01, 0.0, 0.0125, 0.0101]], np.float32)
    out = _blockfloat.quantize(np, x, dtype)
    np.testing.assert_array_equal(out.astype(np.float64), blockfloat_quantize(x, BITS[dtype]))
    assert np.abs(out - x).max() <= 0.01 * 2.0 ** -BITS[dtype] * 2


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
def test_exactly_representable_values_round_trip(dtype):
    limit = 2 ** BITS[dtype] - 1
    mags = np.arange(-limit, limit + 1)[: 16 * ((2 * limit + 1) // 16) or None]
    group = np.resize(mags, 16).astype(np.float32)
    group[0] = limit  # the group's largest magnitude fixes the shared exponent
    x = np.stack([group * 2.0**-3, group * 2.0**5, np.zeros(16, np.float32)])
    np.testing.assert_array_equal(_blockfloat.quantize(np, x, dtype), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
def test_saturates_at_largest_mantissa(dtype):
    bits = BITS[dtype]
    top = 2.0**bits - 0.25  # rounds up to 2**bits, which does not fit: saturate
    x = np.array([[top, 1.0] + [0.0] * 14], np.float32)
    out = _blockfloat.quantize(np, x, dtype)
    assert out[0, 0] == 2**bits - 1
    np.testing.assert_array_equal(out.astype(np.float64), blockfloat_quantize(x, bits))


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
def test_all_zero_tensor(dtype):
    x = np.zeros((2, 40), np.float32)
    data = _blockfloat.encode(np, x, dtype)
    assert not np.any(data.mantissa)
    np.testing.assert_array_equal(_blockfloat.decode(np, data, dtype, x.shape), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
def test_jax_numpy_codec_matches_numpy(dtype):
    x = _bf16_values(np.random.default_rng(1), (3, 48), scale=10.0)
    x[1, :16] = 0.0
    np_out = _blockfloat.quantize(np, x, dtype)
    jnp_out = np.asarray(_blockfloat.quantize(jnp, jnp.asarray(x), dtype))
    np.testing.assert_array_equal(jnp_out, np_out)


def test_storage_sizes_match_hardware_tiles():
    # A 32x32 tile: bfloat8_b = 1024 mantissa bytes + 64 exponents = 1088;
    # bfloat4_b = 512 (two values a byte) + 64 = 576.
    m8, e8 = _blockfloat.storage_shapes(ttnn.bfloat8_b, (32, 32))
    m4, e4 = _blockfloat.storage_shapes(ttnn.bfloat4_b, (32, 32))
    assert (m8, e8) == ((32, 32), (32, 2))
    assert (m4, e4) == ((32, 16), (32, 2))
    d8 = _blockfloat.encode(np, np.ones((32, 32), np.float32), ttnn.bfloat8_b)
    d4 = _blockfloat.encode(np, np.ones((32, 32), np.float32), ttnn.bfloat4_b)
    assert d8.mantissa.nbytes + d8.exponent.nbytes == 1088
    assert d4.mantissa.nbytes + d4.exponent.nbytes == 576
    assert d4.mantissa.dtype == np.uint8 and d8.mantissa.dtype == np.int8
    # The last dim is padded to whole tiles.
    assert _blockfloat.storage_shapes(ttnn.bfloat8_b, (5, 33)) == ((5, 64), (5, 4))


def test_bfloat4_b_packs_two_signed_nibbles_per_byte():
    # One group with max 7 (exponent 3 -> step 1): mantissas are the values themselves.
    vals = np.array([7, -7, 3, -1, 0, 5, -4, 2, 1, -2, 6, -6, 4, -3, -5, 0], np.float32)
    data = _blockfloat.encode(np, vals[None, :], ttnn.bfloat4_b)
    lo = (data.mantissa[0, :8] & 0xF).astype(np.int8)
    hi = (data.mantissa[0, :8] >> 4).astype(np.int8)
    signed = lambda n: np.where(n >= 8, n - 16, n)  # noqa: E731
    np.testing.assert_array_equal(signed(lo), vals[0::2])
    np.testing.assert_array_equal(signed(hi), vals[1::2])


@pytest.mark.parametrize(("dtype", "threshold"), [(ttnn.bfloat8_b, 0.99), (ttnn.bfloat4_b, 0.9)])
@given(seed=st.integers(0, 2**16))
def test_precision_on_normal_data(dtype, threshold, seed):
    x = np.random.default_rng(seed).standard_normal((4, 64)).astype(np.float32)
    assert pcc(_blockfloat.quantize(np, x, dtype), x) >= threshold


def _every_bfloat16() -> np.ndarray:
    """Rows of float32 values: every bfloat16 bit pattern (zeros, subnormals, inf, nan included)
    in three orders, so groups of 16 mix magnitudes (shuffled) or hold neighbours (sorted)."""
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
    every = every.astype(np.float32)
    rng = np.random.default_rng(0)
    by_size = every[np.argsort(np.abs(np.nan_to_num(every, nan=np.inf)), kind="stable")]
    return np.stack([rng.permutation(every), rng.permutation(every), by_size])


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
def test_encode_is_the_frexp_ldexp_rule_bit_for_bit(dtype):
    # The codec finds the shared exponent on the float bits and scales by exact powers of two;
    # it must give the bits of the per-element frexp/ldexp rule, on the host and under jax.jit.
    x = _every_bfloat16()
    bits = BITS[dtype]
    with np.errstate(invalid="ignore"):  # nan -> int8 (same cast in both)
        want = blockfloat_encode_frexp(np, x, bits)
        got = _blockfloat.encode(np, x, dtype)
    want_dev = jax.jit(lambda v: blockfloat_encode_frexp(jnp, v, bits))(x)
    got_dev = jax.jit(lambda v: _blockfloat.encode(jnp, v, dtype))(x)
    for a, (m, e) in ((got, want), (got_dev, want_dev)):
        m = np.asarray(m)
        if dtype is ttnn.bfloat4_b:  # two signed nibbles a byte, the first in the low half
            m = ((m[..., 0::2] & 0xF) | ((m[..., 1::2] & 0xF) << 4)).astype(np.uint8)
        np.testing.assert_array_equal(np.asarray(a.mantissa), m)
        np.testing.assert_array_equal(np.asarray(a.exponent), np.asarray(e))
