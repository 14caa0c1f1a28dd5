"""The Pallas GEMV (``ttjax.kernels``): its numbers against numpy in interpret mode, its Triton
lowering for a GPU (checked on the CPU, on abstract Llama-3.1-8B shapes), its tiling table, and
``ttnn.linear`` / ``ttnn.matmul`` taking it under the ``"pallas"`` policy."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from _op_testing import BF16, F32, MATMUL_TOL, REPLICATED, Layout, check, put_local, reference
from _reference import llama_teacher_forced
from conftest import mesh_of
from hypothesis import given
from hypothesis import strategies as st
from jax.experimental.pallas import triton as pl_triton

import ttjax as ttnn
from models.llama.config import get_config
from models.llama.generate import Generator
from models.llama.model import TtLlama
from models.llama.weights import random_weights
from ttjax._src.core import kernels  # the implementation: the tests patch its gemv and backend
from ttjax.errors import ConfigError, ShapeMismatchError

LLAMA_8B = {  # (K, N) of every decode matmul of Llama-3.1-8B on one device
    "qkv": (4096, 6144),
    "o": (4096, 4096),
    "gate/up": (4096, 14336),
    "down": (14336, 4096),
    "lm_head": (4096, 128256),
}


def numpy_gemv(x: np.ndarray, w: np.ndarray, transpose_b: bool) -> np.ndarray:
    return x.astype(np.float64) @ (w.T if transpose_b else w).astype(np.float64)


@contextlib.contextmanager
def recording_gemv() -> Iterator[list[tuple[int, ...]]]:
    """Records the x shape of every call of the kernel (to prove which path ran)."""
    calls: list[tuple[int, ...]] = []
    real = kernels.gemv

    def recording(x, w, **kw):
        calls.append(tuple(x.shape))
        return real(x, w, **kw)

    kernels.gemv = recording
    try:
        yield calls
    finally:
        kernels.gemv = real


@pytest.fixture
def spy() -> Iterator[list[tuple[int, ...]]]:
    with recording_gemv() as calls:
        yield calls


# --- the kernel itself (interpret mode) ---------------------------------------------------------


@given(
    m=st.sampled_from([1, 2, 5, 16]),
    kn=st.sampled_from([(64, 16), (256, 128), (96, 48), (512, 64)]),
    transpose_b=st.booleans(),
    split_k=st.sampled_from([None, 1, 2]),
    dtype=st.sampled_from([np.float32, ml_dtypes.bfloat16]),
    seed=st.integers(0, 2**16),
)
def test_gemv_matches_numpy(m, kn, transpose_b, split_k, dtype, seed) -> None:
    k, n = kn
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (m, k)).astype(dtype)
    w = rng.uniform(-2, 2, (n, k) if transpose_b else (k, n)).astype(dtype)
    config = kernels.gemv_config(m, k, n, transpose_b=transpose_b)
    assert config is not None
    if split_k is not None and k % (split_k * config.block_k) == 0:
        config = kernels.GemvConfig(config.block_n, config.block_k, split_k)
    y = kernels.gemv(jnp.asarray(x), jnp.asarray(w), transpose_b=transpose_b, config=config)
    assert y.shape == (m, n) and y.dtype == jnp.dtype(dtype)
    want = numpy_gemv(x, w, transpose_b)
    if dtype == np.float32:  # float32 accumulation over K terms
        np.testing.assert_allclose(np.asarray(y), want, rtol=1e-5, atol=1e-4)
    else:  # the float32 sum rounded once to bfloat16
        np.testing.assert_allclose(np.asarray(y, np.float64), want, rtol=1e-2, atol=2e-2)


def test_gemv_split_k_adds_the_partial_sums_exactly_once() -> None:
    """An all-ones product counts K exactly, whatever the K split."""
    x, w = jnp.ones((1, 512), jnp.float32), jnp.ones((512, 64), jnp.float32)
    for s in (1, 2, 4, 8):
        y = kernels.gemv(x, w, config=kernels.GemvConfig(64, 64, s))
        np.testing.assert_array_equal(np.asarray(y), np.full((1, 64), 512.0))


def test_gemv_runs_under_jit_and_grad_free_vmap_of_rows() -> None:
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((4, 128)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((128, 32)), jnp.float32)
    y = jax.jit(kernels.gemv)(x, w)
    np.testing.assert_allclose(np.asarray(y), numpy_gemv(np.asarray(x), np.asarray(w), False), 1e-5)


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("m", [1, 5])
def test_gemv_gradients_equal_jax_grad_of_the_dot(m: int, transpose_b: bool) -> None:
    """Reverse and forward mode through the kernel (its JVP uses XLA's dots) equal ``x @ w``'s."""
    rng = np.random.default_rng(m)
    x = jnp.asarray(rng.standard_normal((m, 128)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((64, 128) if transpose_b else (128, 64)), jnp.float32)
    g = jnp.asarray(rng.standard_normal((m, 64)), jnp.float32)

    def dot(x, w):
        return x @ (w.T if transpose_b else w)

    def loss(f):
        return lambda x, w: jnp.sum(jnp.sin(f(x, w)) * g)

    ours = jax.grad(loss(functools.partial(kernels.gemv, transpose_b=transpose_b)), (0, 1))(x, w)
    want = jax.grad(loss(dot), (0, 1))(x, w)
    for got, ref in zip(ours, want):
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-4, atol=1e-4)
    _, tangent = jax.jvp(functools.partial(kernels.gemv, transpose_b=transpose_b), (x, w), (x, w))
    np.testing.assert_allclose(np.asarray(tangent), 2 * np.asarray(dot(x, w)), 1e-5, 1e-4)


def test_grad_through_linear_under_the_kernel_equals_xla(spy) -> None:
    """``jax.grad`` of a ttnn.linear loss on a 1x2 mesh: the same gradients on either path."""
    rng = np.random.default_rng(9)
    x, _ = put_local(rng, (1, 1, 4, 64), (1, 2), REPLICATED, F32)
    w, _ = put_local(rng, (64, 32), (1, 2), Layout("2d", (None, 1)), F32)

    def loss(w):
        y = ttnn.linear(x, w, activation="silu")
        return jnp.sum(jnp.square(y.value))

    grads = {}
    for policy in ("xla", "pallas"):
        with ttnn.kernels(policy):
            grads[policy] = jax.grad(loss)(w)
    assert spy, "the kernel did not run"
    np.testing.assert_allclose(
        np.asarray(grads["pallas"].value), np.asarray(grads["xla"].value), rtol=1e-5, atol=1e-5
    )


# --- Triton lowering for a GPU, checked on this CPU ---------------------------------------------


@pytest.mark.parametrize("name", sorted(LLAMA_8B))
@pytest.mark.parametrize("transpose_b", [False, True], ids=["in_out", "out_in"])
@pytest.mark.parametrize("m", [1, 8])
def test_gemv_lowers_to_triton_for_llama_8b_shapes(name: str, transpose_b: bool, m: int) -> None:
    """Triton's rules (power-of-two tiles, supported ops) hold for every decode matmul of
    Llama-3.1-8B: the kernel lowers for CUDA from abstract inputs, no GPU or weights needed."""
    k, n = LLAMA_8B[name]
    x = jax.ShapeDtypeStruct((m, k), jnp.bfloat16)
    w = jax.ShapeDtypeStruct((n, k) if transpose_b else (k, n), jnp.bfloat16)
    fn = jax.jit(functools.partial(kernels.gemv, transpose_b=transpose_b, interpret=False))
    text = fn.trace(x, w).lower(lowering_platforms=("cuda",)).as_text()
    assert "xla.gpu.triton" in text and "ttjax_gemv" in text


def test_a_tile_triton_cannot_take_is_caught_by_the_cuda_lowering() -> None:
    """The lowering check above can fail: three rows with no padding break Triton's rule."""
    x = jax.ShapeDtypeStruct((3, 256), jnp.float32)
    w = jax.ShapeDtypeStruct((256, 64), jnp.float32)

    def unpadded(x, w):
        return jax.experimental.pallas.pallas_call(
            functools.partial(kernels._gemv_kernel, block_k=64, steps=4, transpose_b=False),
            out_shape=jax.ShapeDtypeStruct((1, 3, 64), jnp.float32),
            grid=(1, 1),
            in_specs=[
                jax.experimental.pallas.BlockSpec((3, 256), lambda j, i: (0, i)),
                jax.experimental.pallas.BlockSpec((256, 64), lambda j, i: (i, j)),
            ],
            out_specs=jax.experimental.pallas.BlockSpec((None, 3, 64), lambda j, i: (i, 0, j)),
            compiler_params=pl_triton.CompilerParams(),
        )(x, w)

    with pytest.raises(ValueError, match="power of 2"):
        jax.jit(unpadded).trace(x, w).lower(lowering_platforms=("cuda",))


# --- the tiling table ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(LLAMA_8B))
@pytest.mark.parametrize("transpose_b", [False, True])
def test_config_tiles_exactly_and_fills_the_gpu(name: str, transpose_b: bool) -> None:
    k, n = LLAMA_8B[name]
    config = kernels.gemv_config(1, k, n, transpose_b=transpose_b, cores=132)
    assert config is not None and config.fits(k, n)
    programs = n // config.block_n * config.split_k
    steps = k // (config.split_k * config.block_k)
    # about two programs per core, unless the K split would leave fewer than two loop steps
    assert programs >= 2 * 132 or config.split_k == 16 or steps < 4
    assert steps >= 2


def test_measured_tilings_tile_their_shapes() -> None:
    for (k, n, tb), config in kernels.MEASURED.items():
        assert config.fits(k, n) and k // (config.split_k * config.block_k) >= 2
        assert kernels.gemv_config(1, k, n, transpose_b=tb) == config


def test_config_refuses_what_the_kernel_cannot_tile() -> None:
    assert kernels.gemv_config(17, 4096, 4096) is None  # a GEMM: XLA's
    assert kernels.gemv_config(1, 4096, 100) is None  # N not a multiple of 16
    assert kernels.gemv_config(1, 40, 64) is None  # K not a multiple of 16
    with pytest.raises(ConfigError, match=r"block_n=96 .*\nfix:"):
        kernels.GemvConfig(96, 64)


def test_gemv_errors_name_the_shapes() -> None:
    with pytest.raises(ShapeMismatchError, match=r"x\(1, 64\) has K=64 but w\(32, 16\).*\nfix:"):
        kernels.gemv(jnp.ones((1, 64)), jnp.ones((32, 16)))
    with pytest.raises(ShapeMismatchError, match=r"no tiling for x\(1, 64\) @ w\(64, 20\)"):
        kernels.gemv(jnp.ones((1, 64)), jnp.ones((64, 20)))
    with pytest.raises(ShapeMismatchError, match="must both be 2-D"):
        kernels.gemv(jnp.ones((64,)), jnp.ones((64, 16)))


# --- the policy ---------------------------------------------------------------------------------


def test_policy_default_context_and_threads() -> None:
    assert kernels.mode() == "auto"
    with ttnn.kernels("xla") as policy:
        assert repr(policy) == "ttjax.kernels('xla')"
        with ttnn.kernels("pallas"):
            assert kernels.mode() == "pallas"
        assert kernels.mode() == "xla"
    assert kernels.mode() == "auto"
    seen: list[str] = []

    def worker() -> None:
        ttnn.kernels("pallas")
        seen.append(kernels.mode())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == ["pallas"] and kernels.mode() == "auto"
    with pytest.raises(ConfigError, match=r"'triton'.*\nfix: one of \('auto', 'xla', 'pallas'\)"):
        ttnn.kernels("triton")


@pytest.mark.parametrize(
    ("a", "b", "tb", "policy", "backend", "takes"),
    [
        ((1, 1, 8, 4096), (4096, 6144), False, "auto", "gpu", True),  # decode on a GPU
        ((1, 1, 8, 4096), (1, 1, 4096, 4096), True, "auto", "gpu", True),  # [out, in] weights
        # above AUTO_MAX_WEIGHT XLA's dot reads the weight faster (measured on an H100)
        ((1, 1, 8, 4096), (4096, 14336), False, "auto", "gpu", False),
        ((1, 1, 8, 4096), (1, 1, 14336, 4096), True, "auto", "gpu", False),
        ((1, 1, 8, 4096), (4096, 14336), False, "auto", "cpu", False),  # the CPU keeps XLA
        ((1, 1, 8, 4096), (4096, 14336), False, "xla", "gpu", False),
        ((1, 1, 8, 4096), (4096, 14336), False, "pallas", "cpu", True),
        ((1, 128, 4096), (4096, 4096), False, "auto", "gpu", False),  # prefill: M = 128
        ((1, 1, 8, 4096), (2, 4096, 4096), False, "auto", "gpu", False),  # batched weights
    ],
)
def test_choose_gemv(a, b, tb, policy, backend, takes) -> None:
    config = kernels.choose_gemv(a, b, tb, policy=policy, backend=backend)
    assert (config is not None) is takes


# --- through ttnn.linear / ttnn.matmul on a mesh ------------------------------------------------

COLS = Layout("2d", (None, 1))  # the weight's output columns split over the mesh's columns


@given(
    m=st.sampled_from([1, 3, 16]),
    transpose_b=st.booleans(),
    bias=st.booleans(),
    act=st.sampled_from([None, "silu"]),
    dtype=st.sampled_from([F32, BF16]),
    seed=st.integers(0, 2**16),
)
def test_linear_takes_the_kernel_under_pallas_policy(m, transpose_b, bias, act, dtype, seed):
    """Column-parallel linear on 1x8 (each device [m, 64] @ [64, 32]) equals numpy per device."""
    rng = np.random.default_rng(seed)
    mesh = (1, 8)
    w_layout = Layout("2d", (None, 0)) if transpose_b else COLS
    x, xs = put_local(rng, (1, 1, m, 64), mesh, REPLICATED, dtype)
    w, ws = put_local(rng, (32, 64) if transpose_b else (64, 32), mesh, w_layout, dtype)
    b, bs = put_local(rng, (1, 32), mesh, COLS, dtype) if bias else (None, None)
    with ttnn.kernels("pallas"):
        out = ttnn.linear(x, w, bias=b, transpose_b=transpose_b, activation=act)
        program = jax.make_jaxpr(functools.partial(ttnn.linear, transpose_b=transpose_b))(x, w)
    assert "pallas_call" in str(program), "the Pallas kernel did not run"

    def ref(xv, wv, *bv):
        y = xv @ (wv.T if transpose_b else wv)
        y = y + bv[0].reshape(-1) if bv else y
        return y / (1 + np.exp(-y)) if act == "silu" else y

    check(out, reference(ref, xs, ws, *([bs] if bias else [])), tol=MATMUL_TOL)


def test_matmul_keeps_xla_by_default_on_cpu_and_pallas_gives_the_same(spy) -> None:
    rng = np.random.default_rng(0)
    a, as_ = put_local(rng, (1, 1, 4, 128), (2, 4), REPLICATED, F32)
    b, bs = put_local(rng, (128, 64), (2, 4), Layout("2d", (None, 1)), F32)
    xla = ttnn.to_numpy(ttnn.get_device_tensors(ttnn.matmul(a, b))[0])
    assert spy == []
    with ttnn.kernels("pallas"):
        out = ttnn.matmul(a, b)
    assert spy == [(4, 128)]
    check(out, reference(lambda x, y: x @ y, as_, bs), tol=MATMUL_TOL)
    np.testing.assert_allclose(ttnn.to_numpy(ttnn.get_device_tensors(out)[0]), xla, 1e-5, 1e-4)


def test_policy_is_part_of_the_jit_key(spy) -> None:
    """A jitted function traced under "xla" is traced again under "pallas"."""
    rng = np.random.default_rng(1)
    a, _ = put_local(rng, (1, 1, 2, 64), (1, 2), REPLICATED, F32)
    b, _ = put_local(rng, (64, 32), (1, 2), Layout("2d", (None, 1)), F32)
    step = jax.jit(lambda x, y: ttnn.linear(x, y))
    step(a, b)
    assert spy == []
    with ttnn.kernels("pallas"):
        step(a, b)
    assert spy == [(2, 64)]


@pytest.mark.slow
def test_llama_decode_with_the_kernel_matches_the_flax_reference(spy) -> None:
    """Tiny Llama, TP on 1x8, greedy decode with every projection (qkv, o, gate, up, down, LM
    head) on the Pallas GEMV: the Flax reference's logits and greedy tokens."""
    config = get_config("tiny")
    weights = random_weights(config, seed=2)
    prompt = np.random.default_rng(4).integers(0, config.vocab_size, (4, 5))
    with ttnn.kernels("pallas"):
        gen = Generator.build(config, weights, mesh_of((1, 8)), mode="tp", batch=4)
        result = gen.generate(prompt, 3, trace=False)
        gen.release()
    assert {shape[0] for shape in spy} == {4}  # decode steps: M = batch 4 on every device
    assert len(spy) >= 5 * config.n_layers  # wqkv, wo, w_in, w_up, w_out per layer (+ LM head)
    _, want_steps = llama_teacher_forced(config, weights, result.tokens, 5)
    assert len(result.decode_logits) == len(want_steps) == 2
    for i, (got, want) in enumerate(zip(result.decode_logits, want_steps)):
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-4)
        assert np.array_equal(result.tokens[:, 5 + 1 + i], want.argmax(-1))


def test_llama_decode_step_lowers_for_cuda_with_every_projection_on_the_gemv(monkeypatch) -> None:
    """The jitted TP decode step (abstract weights, bf16, fused gate+up), lowered for a GPU from
    this CPU: qkv, o, gate+up, down and the LM head each call the Triton GEMV."""
    monkeypatch.setattr(kernels, "_backend", lambda: "gpu")  # compile for CUDA, not interpreted
    config = get_config("tiny").with_(vocab_size=1024)  # an LM head shape of its own
    mesh = mesh_of((1, 8))
    model = TtLlama(config, None, mesh, batch=4, dtype=ttnn.bfloat16, fuse_gate_up=True)
    tokens = ttnn.abstract_tensor((4, 1), ttnn.uint32, device=mesh, layout=ttnn.TILE_LAYOUT)
    pos = ttnn.abstract_tensor((4,), ttnn.int32, device=mesh)
    with ttnn.kernels("pallas"):
        traced = jax.jit(model.decode_fn()).trace(model.params, model.caches, tokens, pos)
    text = traced.lower(lowering_platforms=("cuda",)).as_text()
    calls = [ln for ln in text.splitlines() if "xla.gpu.triton" in ln]
    assert len(calls) == 5
    weights = {tuple(map(int, re.findall(r"tensor<(\d+)x(\d+)xbf16>", ln)[1])) for ln in calls}
    hd, tp = config.head_dim, 8
    qkv = (config.n_heads + 2 * config.n_kv_heads) * hd // tp
    assert weights == {
        (config.dim, qkv),  # wqkv
        (config.n_heads * hd // tp, config.dim),  # wo
        (config.dim, 2 * config.ffn_dim // tp),  # w_gate_up
        (config.ffn_dim // tp, config.dim),  # w_out
        (config.dim, config.vocab_size // tp),  # lm_head
    }
