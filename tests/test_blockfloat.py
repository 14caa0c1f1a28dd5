"""bfloat8_b / bfloat4_b codec against a scalar loop reference of the block-float format."""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from _reference import blockfloat_quantize, pcc
from hypothesis import given
from hypothesis import strategies as st

import ttjax as ttnn
from ttjax._src.core import blockfloat as _blockfloat

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


def _f32(word: int) -> float:
    return float(np.array([word], np.uint32).view(np.float32)[0])


# Crafted groups for TT-NN's host rule (blockfloat_common.cpp): each row is one 16-value group.
_CRAFTED = {
    # 1.0 and 1.5 sit halfway between bfloat4_b/bfloat8_b steps next to 4.0 / 256.0: ties go
    # to the even magnitude; 1.25 next to 2.0 is a bfloat4_b tie (step 0.5) that goes up.
    "ties": [4.0, 1.0 + 2**-2, 1.0 + 2**-1 + 2**-2, 2.0 + 2**-1, 256.0, 1.5, 2.5, 3.5],
    # A tie once the exponent gap has shifted the low bit out: TT-NN drops that bit first, so
    # the value rounds as a tie (to even), not up as exact rounding would.
    "lost_sticky_bit": [2.0, _f32((127 << 23) | (1 << 21) | 1), _f32((127 << 23) | (1 << 16) | 1)],
    # Largest magnitude at an exponent boundary: 2**k and just below it; a value that rounds
    # up past the largest magnitude saturates instead of raising the exponent.
    "exponent_boundary": [_f32((130 << 23) - 1), 8.0, 7.99, -7.5, 0.125, -0.1875],
    "zeros_and_negatives": [-0.0, 0.0, -3.0, 3.0, -1e-3, 1e-3, -2.5, 0.0],
    # Subnormals become 0 and never set the shared exponent; the smallest normal keeps its
    # exponent.
    "subnormals": [_f32(5), _f32(1 << 22), -_f32(0x7FFFFF), _f32(1 << 23), 0.0],
    # A gap of 24 or more exponents leaves nothing of the small value (TT-NN shifts it out).
    "huge_gap": [1e30, 1.0, -1e-30, 3e38, 2**-24],
    "inf_nan": [float("inf"), 1.0, -float("inf"), 1e38],
    "nan": [float("nan"), 2.0, -1.0],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
@pytest.mark.parametrize("case", sorted(_CRAFTED))
def test_crafted_groups_match_tt_nn_host_rule(dtype, case):
    row = np.zeros(32, np.float32)
    row[: len(_CRAFTED[case])] = _CRAFTED[case]
    x = np.stack([row, -row])
    want = blockfloat_quantize(x, BITS[dtype])
    with np.errstate(all="ignore"):
        got_np = _blockfloat.quantize(np, x, dtype).astype(np.float64)
        got_jnp = np.asarray(_blockfloat.quantize(jnp, jnp.asarray(x), dtype)).astype(np.float64)
    np.testing.assert_array_equal(got_np, want)
    np.testing.assert_array_equal(got_jnp, want)


def test_crafted_values_by_hand():
    # Spot values worked out by hand from blockfloat_common.cpp, for the reference itself.
    q4 = lambda *v: blockfloat_quantize(np.array([v], np.float32), 3)[0]  # noqa: E731
    q8 = lambda *v: blockfloat_quantize(np.array([v], np.float32), 7)[0]  # noqa: E731
    # bfloat4_b next to 4.0: step 1; 1.5 and 2.5 are ties -> 2.0 and 2.0; 3.5 -> 4.0.
    np.testing.assert_array_equal(q4(4.0, 1.5, 2.5, 3.5, -2.5), [4.0, 2.0, 2.0, 4.0, -2.0])
    # next to 2.0: step 0.5; 1 + 2**-2 + 2**-23 loses its last bit to the shift: a tie -> 1.0
    np.testing.assert_array_equal(q4(2.0, _f32((127 << 23) | (1 << 21) | 1)), [2.0, 1.0])
    # 7.99 next to 8.0 (exponent 3, step 2): 4 magnitudes up to 14.0; 7.99 rounds to 8.0
    np.testing.assert_array_equal(q4(8.0, 7.99, 15.9), [8.0, 8.0, 14.0])
    # bfloat8_b: a subnormal is 0; 1 + 2**-7 next to 1.0 is a tie -> 1.0 (even)
    np.testing.assert_array_equal(q8(1.0, 1.0 + 2**-7, _f32(3)), [1.0, 1.0, 0.0])
    inf_row = q8(float("inf"), 1.0, float("nan"))
    assert inf_row[0] == np.inf and inf_row[1] == 0.0 and np.isnan(inf_row[2])


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
@given(seed=st.integers(0, 2**16), spread=st.sampled_from([1.0, 30.0]))
def test_float32_inputs_match_tt_nn_host_rule(dtype, seed, spread):
    # float32 (not bfloat16) values: the bits below the kept ones matter for rounding.
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 48)) * np.exp2(rng.integers(-spread, spread + 1, (3, 48)))
    x = x.astype(np.float32)
    want = blockfloat_quantize(x, BITS[dtype])
    np.testing.assert_array_equal(_blockfloat.quantize(np, x, dtype).astype(np.float64), want)


@pytest.mark.parametrize("dtype", DTYPES, ids=["bfloat8_b", "bfloat4_b"])
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "transposed"])
def test_host_encode_in_slabs_matches_one_piece(dtype, strided, monkeypatch):
    # Large host tensors are encoded by XLA a slab of rows at a time (equal slabs, the last one
    # zero-padded); rows never share a group, so the slabs (here 3 rows of width 40: 120
    # values, 14 rows) must give numpy's one-piece result exactly, infs, NaNs and subnormals too.
    x = (np.random.default_rng(3).standard_normal((2, 7, 40)) * 5).astype(np.float32)
    if strided:
        x = np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    x[0, 1, :5] = [np.inf, -np.inf, np.nan, 1e-40, -0.0]
    whole = _blockfloat._encode(np, x, dtype)
    monkeypatch.setattr(_blockfloat, "_XLA_MIN", 1)
    monkeypatch.setattr(_blockfloat, "_XLA_SLAB", 120)
    slabs = _blockfloat.encode(np, x, dtype)
    np.testing.assert_array_equal(slabs.mantissa, whole.mantissa)
    np.testing.assert_array_equal(slabs.exponent, whole.exponent)
    finite = x.copy()
    finite[0, 1, :3] = 0.0
    monkeypatch.setattr(_blockfloat, "_HOST_CHUNK", 120)
    got = np.empty(x.shape, np.float32)
    _blockfloat.quantize_into(finite, dtype, got)
    np.testing.assert_array_equal(got.astype(np.float64), blockfloat_quantize(finite, BITS[dtype]))


@pytest.mark.parametrize("chunk", [1, 7, 100, 1 << 18])
def test_row_chunks_cover_every_value_once(chunk, monkeypatch):
    """The slabs of rows host conversion walks cover every value once, whole last-dim rows,
    at most ``chunk`` values each unless one row is longer."""
    monkeypatch.setattr(_blockfloat, "_HOST_CHUNK", chunk)
    for shape in [(5,), (3, 7), (2, 3, 50), (4, 1, 1, 9), (0, 4), (3, 5, 2, 4)]:
        seen = np.zeros(shape, np.int64)
        for idx in _blockfloat.row_chunks(shape):
            piece = seen[idx]
            assert piece.size <= max(chunk, shape[-1]) or len(shape) < 2, (shape, idx)
            assert len(shape) < 2 or piece.shape[-1] == shape[-1]
            seen[idx] += 1
        assert (seen == 1).all(), shape
