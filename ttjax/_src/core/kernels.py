"""Hand-written kernels for the matmuls XLA runs below the memory roofline: a Pallas GEMV for decode.

The implementation of :mod:`ttjax.kernels`, whose docstring says more.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pl_triton

from ttjax._src.core import policy as _policy
from ttjax._src.core.errors import ConfigError, ShapeMismatchError

MODES = ("auto", "xla", "pallas")
MAX_M = 16  # rows of activations up to which a matmul counts as a GEMV
_DEFAULT_CORES = 132  # streaming multiprocessors of an H100 / H200 SXM
# "auto" takes the GEMV up to this many weight elements (32 Mi): see the module docstring.
AUTO_MAX_WEIGHT = 1 << 25


# Thread-local when set through Policy; part of every jit/trace cache key.
_setting = _policy.Setting(
    "ttjax.kernels",
    MODES,
    os.environ.get("TTJAX_KERNELS") or "auto",
    note="; TTJAX_KERNELS sets the default",
)
Policy = _policy.Policy


def mode() -> str:
    """This thread's kernel policy: ``"auto"``, ``"xla"`` or ``"pallas"``."""
    return _setting.mode()


@dataclass(frozen=True)
class GemvConfig:
    """How :func:`gemv` tiles ``x[M, K] @ w``: ``block_n`` output columns per program, ``block_k``
    rows of the weight per loop step, ``split_k`` programs sharing each column block's K range."""

    block_n: int
    block_k: int
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self) -> None:
        for name in ("block_n", "block_k"):
            v = getattr(self, name)
            if v < 16 or v & (v - 1):
                raise ConfigError(
                    f"GemvConfig: {name}={v} must be a power of two >= 16 (Triton's rule).\n"
                    f"fix: e.g. {name}=64 or 128."
                )
        if self.split_k < 1:
            raise ConfigError(f"GemvConfig: split_k={self.split_k} must be >= 1.\nfix: e.g. 1.")

    def fits(self, k: int, n: int) -> bool:
        """Whether the blocks tile a ``[k, n]`` weight exactly."""
        return n % self.block_n == 0 and k % (self.block_k * self.split_k) == 0


# The best tilings of benchmarks/gpu_decode.py's sweep on an H100 80GB HBM3 (batch 1, bf16, [in, out]
# weights; benchmarks/results/gpu_decode_sweep_NVIDIA_H100_80GB_HBM3.json), by (K, N, transpose_b):
# each beat the heuristic's tiling below on its shape; the other shapes' best was the heuristic's.
MEASURED: dict[tuple[int, int, bool], GemvConfig] = {
    (4096, 6144, False): GemvConfig(64, 64, 8),  # Llama-3.1-8B qkv: 1.24 TB/s (heuristic 0.93)
    (4096, 4096, False): GemvConfig(128, 128, 16, num_warps=8),  # o: 0.79 TB/s (heuristic 0.77)
    (4096, 14336, False): GemvConfig(64, 128, 8),  # gate / up: 2.35 TB/s (heuristic 1.88)
    (4096, 28672, False): GemvConfig(64, 128, 1),  # gate + up fused: 2.53 TB/s (heuristic 2.39)
    (4096, 128256, False): GemvConfig(128, 32, 1),  # LM head: 2.86 TB/s (heuristic 2.66)
}


def _pow2_divisor(n: int, choices: Sequence[int]) -> int | None:
    return next((c for c in choices if n % c == 0), None)


def gemv_config(
    m: int, k: int, n: int, *, transpose_b: bool = False, cores: int = _DEFAULT_CORES
) -> GemvConfig | None:
    """A tiling for ``x[m, k] @ w`` (``w`` is ``[k, n]``, or ``[n, k]`` with ``transpose_b``), or
    None when the kernel does not apply (``m > 16``, or ``k``/``n`` not multiples of 16).

    One row on a 132-core GPU takes the tiling measured best for the shape (:data:`MEASURED`)
    when there is one. Otherwise loads are coalesced along the weight's contiguous dim: wide column blocks for ``[k, n]``, long
    K blocks for ``[n, k]``. ``split_k`` grows until there are about two programs per core.

    >>> ttjax.kernels.gemv_config(1, 14336, 4096)
    GemvConfig(block_n=128, block_k=64, split_k=14, num_warps=4, num_stages=3)
    >>> ttjax.kernels.gemv_config(1, 4096, 6144)
    GemvConfig(block_n=64, block_k=64, split_k=8, num_warps=4, num_stages=3)
    """
    if m < 1 or m > MAX_M:
        return None
    measured = MEASURED.get((k, n, transpose_b))
    if m == 1 and measured is not None and cores == _DEFAULT_CORES:
        return measured
    if transpose_b:
        block_n = _pow2_divisor(n, (32, 16))
        block_k = _pow2_divisor(k, (256, 128, 64, 32, 16))
    else:
        block_n = _pow2_divisor(n, (128, 64, 32, 16))
        block_k = _pow2_divisor(k, (64, 32, 16))
    if block_n is None or block_k is None:
        return None
    blocks, target = n // block_n, 2 * cores
    split = 1
    for s in range(1, 17):
        if k % (s * block_k) == 0 and k // (s * block_k) >= 2:
            split = s
            if blocks * s >= target:
                break
    return GemvConfig(block_n, block_k, split)


def _gemv_kernel(
    x_ref: Any, w_ref: Any, o_ref: Any, *, block_k: int, steps: int, transpose_b: bool
) -> None:
    """One program: ``o[:, cols] = x[:, ks] @ w[ks, cols]`` over its K range, float32 accumulate.

    With one row, products accumulate elementwise in a ``[block_k, block_n]`` tile and are reduced
    once at the end (no cross-thread reduction per step); with more rows, Triton's dot.
    """
    m, block_n = x_ref.shape[0], o_ref.shape[-1]

    def step(i: Any, acc: Any) -> Any:
        ks = pl.ds(pl.multiple_of(i * block_k, block_k), block_k)
        x = x_ref[:, ks]
        w = w_ref[:, ks] if transpose_b else w_ref[ks, :]
        if m == 1:
            x32, w32 = x.astype(jnp.float32), w.astype(jnp.float32)
            return acc + (x32 * w32 if transpose_b else x32.reshape(block_k, 1) * w32)
        contract = ((1,), (1,)) if transpose_b else ((1,), (0,))
        return acc + lax.dot_general(
            x,
            w,
            (contract, ((), ())),
            precision=lax.Precision.HIGHEST,
            preferred_element_type=jnp.float32,
        )

    if m == 1:
        tile = (block_n, block_k) if transpose_b else (block_k, block_n)
        acc = lax.fori_loop(0, steps, step, jnp.zeros(tile, jnp.float32))
        out = jnp.sum(acc, axis=1 if transpose_b else 0)
    else:
        out = lax.fori_loop(0, steps, step, jnp.zeros((m, block_n), jnp.float32))
    o_ref[...] = out.reshape(o_ref.shape).astype(o_ref.dtype)


def _backend() -> str:
    """The platform the kernels compile for: JAX's default backend (where ttjax meshes live)."""
    return jax.default_backend()


def _on_gpu() -> bool:
    return _backend() == "gpu"


@functools.cache
def _cores() -> int:
    """Streaming multiprocessors of the default device (JAX's GPU devices carry ``core_count``)."""
    return int(getattr(jax.devices()[0], "core_count", _DEFAULT_CORES))


def gemv(
    x: Any,
    w: Any,
    *,
    transpose_b: bool = False,
    config: GemvConfig | None = None,
    interpret: bool | None = None,
) -> Any:
    """``x[M, K] @ w[K, N]`` (or ``@ w[N, K].T`` with ``transpose_b``) by the Pallas GEMV kernel.

    Returns ``[M, N]`` in the operands' result dtype, accumulated in float32. ``interpret``
    defaults to True off a GPU. Differentiable (``jax.grad``, ``jax.jvp``): the forward runs the
    kernel, the derivatives use XLA's dots.

    >>> y = ttjax.kernels.gemv(jnp.ones((2, 64)), jnp.ones((64, 32)), interpret=True)
    >>> y.shape, float(y[1, 31])
    ((2, 32), 64.0)
    """
    if x.ndim != 2 or w.ndim != 2:
        raise ShapeMismatchError(
            f"ttjax.kernels.gemv: x{tuple(x.shape)} and w{tuple(w.shape)} must both be 2-D.\n"
            "fix: reshape x to [M, K] and w to [K, N] ([N, K] with transpose_b=True)."
        )
    m, k = x.shape
    n, wk = (w.shape[0], w.shape[1]) if transpose_b else (w.shape[1], w.shape[0])
    if wk != k:
        layout = "[N, K]" if transpose_b else "[K, N]"
        raise ShapeMismatchError(
            f"ttjax.kernels.gemv: x{tuple(x.shape)} has K={k} but w{tuple(w.shape)} (read as "
            f"{layout}) has K={wk}.\nfix: pass w as {layout}, or flip transpose_b."
        )
    if config is None:
        config = gemv_config(m, k, n, transpose_b=transpose_b, cores=_cores())
    if config is None or not config.fits(k, n) or m > MAX_M:
        raise ShapeMismatchError(
            f"ttjax.kernels.gemv: no tiling for x{tuple(x.shape)} @ w{tuple(w.shape)} "
            f"(transpose_b={transpose_b}, config={config}).\n"
            f"fix: M <= {MAX_M} and K, N multiples of 16 (and of the config's blocks), or use "
            "jnp.matmul."
        )
    out_dtype = jnp.result_type(x.dtype, w.dtype)
    interpret = (not _on_gpu()) if interpret is None else bool(interpret)
    return _gemv(x.astype(out_dtype), w.astype(out_dtype), transpose_b, config, interpret)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4))
def _gemv(x: Any, w: Any, transpose_b: bool, config: GemvConfig, interpret: bool) -> Any:
    """The Pallas call on checked, same-dtype operands; differentiated by :func:`_gemv_jvp`."""
    (m, k), n = x.shape, w.shape[0] if transpose_b else w.shape[1]
    rows = 1 if m == 1 else MAX_M  # Triton's matrix unit takes at least 16 rows
    if rows != m:
        x = jnp.pad(x, ((0, rows - m), (0, 0)))
    s, bn = config.split_k, config.block_n
    ks = k // s
    if transpose_b:
        w_spec = pl.BlockSpec((bn, ks), lambda j, i: (j, i))
    else:
        w_spec = pl.BlockSpec((ks, bn), lambda j, i: (i, j))
    partial_dtype = x.dtype if s == 1 else jnp.float32
    kernel = functools.partial(
        _gemv_kernel, block_k=config.block_k, steps=ks // config.block_k, transpose_b=transpose_b
    )
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((s, rows, n), partial_dtype),
        grid=(n // bn, s),
        in_specs=[pl.BlockSpec((rows, ks), lambda j, i: (0, i)), w_spec],
        out_specs=pl.BlockSpec((pl.squeezed, rows, bn), lambda j, i: (i, 0, j)),
        interpret=interpret,
        compiler_params=pl_triton.CompilerParams(
            num_warps=config.num_warps, num_stages=config.num_stages
        ),
        name="ttjax_gemv",
    )(x, w)
    out = out[0] if s == 1 else jnp.sum(out, axis=0).astype(x.dtype)
    return out[:m]


@_gemv.defjvp
def _gemv_jvp(
    transpose_b: bool, config: GemvConfig, interpret: bool, primals: Any, tangents: Any
) -> tuple[Any, Any]:
    """Forward by the kernel; the tangent (and so the gradient, by transposing it) by XLA's dots:
    ``dy = dx @ w + x @ dw``. Training steps have large M and never take the kernel anyway."""
    (x, w), (dx, dw) = primals, tangents
    y = _gemv(x, w, transpose_b, config, interpret)

    def mm(a: Any, b: Any) -> Any:
        return jnp.matmul(a, b.T if transpose_b else b, preferred_element_type=jnp.float32)

    return y, (mm(dx, w) + mm(x, dw)).astype(y.dtype)


def choose_gemv(
    a_shape: Sequence[int],
    b_shape: Sequence[int],
    transpose_b: bool,
    *,
    policy: str,
    backend: str,
) -> GemvConfig | None:
    """The :func:`gemv` tiling for ``a @ b`` under ``policy`` on ``backend``, or None for XLA's dot.

    ``a`` is ``[..., K]`` (all its rows count as M); ``b`` a weight, 2-D up to leading 1s.

    >>> ttjax.kernels.choose_gemv((1, 1, 8, 4096), (4096, 4096), False, policy="auto",
    ...                           backend="cpu") is None
    True
    """
    policy = _setting.check(policy)
    if policy == "xla" or (policy == "auto" and backend != "gpu"):
        return None
    if len(a_shape) < 1 or len(b_shape) < 2 or any(d != 1 for d in b_shape[:-2]):
        return None
    k, m = a_shape[-1], math.prod(a_shape[:-1])
    wk, n = (b_shape[-1], b_shape[-2]) if transpose_b else (b_shape[-2], b_shape[-1])
    if wk != k or (policy == "auto" and k * n > AUTO_MAX_WEIGHT):
        return None
    return gemv_config(m, k, n, transpose_b=transpose_b, cores=_cores())


def small_m_matmul(a: Any, b: Any, transpose_b: bool) -> Any | None:
    """``a @ b`` by :func:`gemv` when this thread's policy and the shapes call for it, else None.

    Used by ``ttnn.matmul`` and ``ttnn.linear`` on each device's local arrays.
    """
    if not all(jnp.issubdtype(t.dtype, jnp.floating) for t in (a, b)):
        return None
    config = choose_gemv(a.shape, b.shape, transpose_b, policy=mode(), backend=_backend())
    if config is None:
        return None
    k, n = a.shape[-1], b.shape[-2] if transpose_b else b.shape[-1]
    y = gemv(a.reshape(-1, k), b.reshape(b.shape[-2:]), transpose_b=transpose_b, config=config)
    return y.reshape(*a.shape[:-1], n)


_policy.make_callable(__name__, _setting)

__all__ = [
    "AUTO_MAX_WEIGHT",
    "MAX_M",
    "MEASURED",
    "MODES",
    "GemvConfig",
    "Policy",
    "choose_gemv",
    "gemv",
    "gemv_config",
    "mode",
    "small_m_matmul",
]
