"""Llama-3.1-8B decode on one GPU through ttjax: ms/step, tokens/s, and the fraction of HBM
bandwidth (weight + KV bytes read per step over a measured device copy rate).

    python -m benchmarks.gpu_decode                       # llama-3.1-8b, bf16, batch 1, pos 1024
    python -m benchmarks.gpu_decode --config tiny         # a quick run on the CPU

Each step is timed with each matmul kernel policy (``--kernels xla,pallas``: XLA's dots, then
ttjax's Pallas GEMV, see :mod:`ttjax.kernels`), and every decode matmul shape is timed alone
(``gemv_sweep``): XLA's dot, the Pallas GEMV with its default tiling, and a small grid of tilings,
as bytes of weight per second. The best tiling per shape goes in the JSON, to tune
``ttjax.kernels.gemv_config`` from.

Weights are random and made on the device (``ttnn.rand``), so nothing crosses PCIe. Three ways
of stepping are timed: synced (wait after every step), back-to-back (dispatch N steps, wait
once), and an on-device loop (one jitted program runs ``--loop`` greedy steps, feeding each
argmax token back). The same-shape Flax reference (``models.llama.reference``) is timed in the
same run as the plain-JAX baseline.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import ttjax as ttnn
from benchmarks._harness import time_call
from models.llama.config import get_config, rope_tables
from models.llama.model import TtLlama


def copy_bandwidth(nbytes: int = 4 << 30, repeats: int = 5, number: int = 10) -> float:
    """Device-to-device copy rate in bytes/s, counting bytes read and written (like nvbandwidth).

    ``number`` copies are dispatched back to back and waited for once, so launch latency does not
    count; the best of ``repeats`` such batches is kept.
    """
    x = jnp.zeros((nbytes // 4,), jnp.float32)
    return _rate(jax.jit(lambda a: a + 1.0), (x,), 2 * x.nbytes, number, repeats)


def _rate(fn: Any, args: tuple[Any, ...], nbytes: int, number: int, batches: int = 3) -> float:
    """Bytes/s of ``fn(*args)``: ``number`` calls dispatched back to back and waited for once
    (``_harness.time_call``), the best of ``batches`` such batches after one warm-up call."""
    jax.block_until_ready(fn(*args))
    return nbytes / min(time_call(lambda: fn(*args), number) for _ in range(batches))


def decode_matmul_shapes(config_name: str) -> dict[str, tuple[int, int]]:
    """(K, N) of each decode matmul of the model on one device (TT-NN's [in, out] weight)."""
    c = get_config(config_name)
    qkv = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim
    return {
        "qkv": (c.dim, qkv),
        "o": (c.n_heads * c.head_dim, c.dim),
        "gate_or_up": (c.dim, c.ffn_dim),
        "gate_up_fused": (c.dim, 2 * c.ffn_dim),
        "down": (c.ffn_dim, c.dim),
        "lm_head": (c.dim, c.vocab_size),
    }


def tilings(m: int, k: int, n: int, transpose_b: bool) -> list[ttnn.kernels.GemvConfig]:
    """The default tiling and its neighbours: other block sizes, half and double the K split."""
    base = ttnn.kernels.gemv_config(m, k, n, transpose_b=transpose_b)
    if base is None:
        return []
    blocks_n, blocks_k = (
        ((16, 32, 64), (128, 256, 512)) if transpose_b else ((64, 128, 256), (32, 64, 128))
    )
    found = {base}
    for bn in blocks_n:
        for bk in blocks_k:
            for split in {max(1, base.split_k // 2), base.split_k, 2 * base.split_k}:
                warps = 8 if bn * bk >= 16384 else 4
                cfg = ttnn.kernels.GemvConfig(bn, bk, split, num_warps=warps)
                if cfg.fits(k, n) and k // (split * bk) >= 2:
                    found.add(cfg)
    return [base, *sorted(found - {base}, key=repr)]


def gemv_sweep(
    config_name: str, batch: int, layouts: list[str], grid: bool, repeats: int = 50
) -> dict[str, Any]:
    """Every decode matmul alone, bf16 ``x[batch, K] @ W``: XLA's dot against the Pallas GEMV
    (default tiling, and with ``grid`` every tiling of :func:`tilings`), in TB/s of weight read."""
    out: dict[str, Any] = {}
    key = jax.random.key(1)
    for name, (k, n) in decode_matmul_shapes(config_name).items():
        for layout in layouts:
            tb = layout == "out_in"
            w = jax.random.uniform(key, (n, k) if tb else (k, n), jnp.bfloat16, -0.02, 0.02)
            x = jnp.ones((batch, k), jnp.bfloat16)
            configs = tilings(batch, k, n, tb)
            if not configs:
                continue
            xla = jax.jit(lambda a, b, tb=tb: a @ (b.T if tb else b))
            row: dict[str, Any] = {
                "K": k,
                "N": n,
                "xla_TBps": _rate(xla, (x, w), w.nbytes, repeats) / 1e12,
            }
            timed = {}
            for cfg in configs if grid else configs[:1]:
                fn = jax.jit(functools.partial(ttnn.kernels.gemv, transpose_b=tb, config=cfg))
                timed[cfg] = _rate(fn, (x, w), w.nbytes, repeats) / 1e12
            best = max(timed, key=timed.__getitem__)
            row.update(
                pallas_default=repr(configs[0]),
                pallas_default_TBps=timed[configs[0]],
                pallas_best=repr(best),
                pallas_best_TBps=timed[best],
                tilings_tried=len(timed),
            )
            out[f"{name}_{layout}"] = row
            print(f"gemv {name}_{layout}: {json.dumps(row)}", flush=True)
            del w
    return out


def random_model(
    config_name: str,
    batch: int,
    position: int,
    dtype: ttnn.DataType,
    transpose_weights: bool,
    fuse_gate_up: bool = False,
) -> TtLlama:
    """A TtLlama on a 1x1 mesh whose weights are filled on the device (no host round trip)."""
    config = get_config(config_name)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    max_len = -(-(position + 1) // 32) * 32  # the cache holds just the positions attended to
    model = TtLlama(  # abstract (shapes only) until filled below
        config,
        None,
        mesh,
        mode="tp",
        batch=batch,
        dtype=dtype,
        max_seq_len=max_len,
        transpose_weights=transpose_weights,
        fuse_gate_up=fuse_gate_up,
    )
    params = model.params
    seed = iter(range(10**6))

    def fill(t: Any, low: float, high: float) -> Any:
        if t is None:
            return None
        return ttnn.rand(
            t.shape, t.dtype, t.layout, device=mesh, low=low, high=high, seed=next(seed)
        )

    scale = 0.02
    for name in ("embed", "lm_head"):
        params[name] = fill(params[name], -scale, scale)
    for name in ("norm", "norm_bias"):
        params[name] = fill(params[name], 0.9, 1.1)
    cos, sin = rope_tables(config, max_len)
    params["cos"] = ttnn.from_torch(cos, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh)
    params["sin"] = ttnn.from_torch(sin, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh)
    for layer in params["layers"]:
        for name, t in layer.items():
            norm = "norm" in name
            layer[name] = fill(t, 0.9 if norm else -scale, 1.1 if norm else scale)
    model.abstract = False
    model.reset_cache()
    return model


def bytes_per_step(model: TtLlama, position: int) -> tuple[int, int]:
    """(weight bytes, KV-cache bytes) one decode step reads; the embedding reads one row per user."""
    c = model.config
    leaves = jax.tree_util.tree_leaves(
        {k: v for k, v in model.params.items() if k not in ("embed", "cos", "sin")},
        is_leaf=lambda t: isinstance(t, ttnn.Tensor),
    )
    weights = sum(t.nbytes_per_device() for t in leaves if isinstance(t, ttnn.Tensor))
    itemsize = model.cache_dtype.itemsize
    kv = 2 * c.n_layers * model.batch * model.kv_heads * (position + 1) * c.head_dim * itemsize
    return int(weights), int(kv)


def _time_steps(step: Any, state: list[Any], n: int, synced: bool) -> float:
    """Seconds per step; ``state`` = [params, caches, tokens, pos] (caches are donated)."""
    params, caches, tok, pos = state
    start = time.perf_counter()
    for _ in range(n):
        logits, caches = step(params, caches, tok, pos)
        if synced:
            jax.block_until_ready(logits.value)
    jax.block_until_ready(
        (
            logits.value,
            [
                c.value
                for c in jax.tree_util.tree_leaves(
                    caches, is_leaf=lambda t: isinstance(t, ttnn.Tensor)
                )
            ],
        )
    )
    state[1] = caches
    return (time.perf_counter() - start) / n


def run(
    config_name: str,
    batch: int,
    position: int,
    steps: int,
    loop: int,
    transpose_weights: bool,
    fuse_gate_up: bool = False,
) -> dict[str, Any]:
    """Time one ttjax decode variant (ms per step) under the caller's kernel policy."""
    dtype = ttnn.bfloat16
    model = random_model(config_name, batch, position, dtype, transpose_weights, fuse_gate_up)
    mesh = model.mesh
    tokens = ttnn.from_torch(np.ones((batch, 1), np.uint32), dtype=ttnn.uint32, device=mesh)
    pos = ttnn.from_torch(np.full((batch,), position, np.int32), dtype=ttnn.int32, device=mesh)
    step = jax.jit(model.decode_fn(), donate_argnums=(1,))
    state: list[Any] = [model.params, model.caches, tokens, pos]
    t0 = time.perf_counter()
    _time_steps(step, state, 1, synced=True)  # compile
    compile_s = time.perf_counter() - t0
    synced = statistics.median(_time_steps(step, state, steps, True) for _ in range(3))
    b2b = statistics.median(_time_steps(step, state, steps, False) for _ in range(3))

    def multi(params: Any, caches: Any, tok: Any, p: Any) -> Any:
        def body(_: int, carry: Any) -> Any:
            caches, tok, p = carry
            logits = model.forward(tok, p, params, caches)
            tok = ttnn.to_layout(ttnn.argmax(logits, dim=-1), ttnn.ROW_MAJOR_LAYOUT)
            return caches, tok, ttnn.add(p, 1)

        return jax.lax.fori_loop(0, loop, body, (caches, tok, p))

    loop_fn = jax.jit(multi, donate_argnums=(1,))
    start_pos = ttnn.from_torch(
        np.full((batch,), position - loop, np.int32), dtype=ttnn.int32, device=mesh
    )
    tok32 = ttnn.from_torch(np.ones((batch, 1), np.uint32), dtype=ttnn.uint32, device=mesh)
    caches, _, _ = loop_fn(state[0], state[1], tok32, start_pos)  # compile
    jax.block_until_ready(jax.tree_util.tree_leaves(caches))
    loop_times = []
    for _ in range(3):
        t = time.perf_counter()
        caches, out_tok, _ = loop_fn(state[0], caches, tok32, start_pos)
        jax.block_until_ready(out_tok.value)
        loop_times.append((time.perf_counter() - t) / loop)
    on_device = min(loop_times)

    w_bytes, kv_bytes = bytes_per_step(model, position)
    result = {
        "weight_layout": "[out, in] (transpose_b)" if transpose_weights else "[in, out] (TT-NN)",
        "kernels": ttnn.kernels.mode(),
        "fuse_gate_up": fuse_gate_up,
        "weight_bytes_per_step": w_bytes,
        "kv_bytes_per_step": kv_bytes,
        "compile_s": compile_s,
        "synced_ms": synced * 1e3,
        "back_to_back_ms": b2b * 1e3,
        "on_device_loop_ms": on_device * 1e3,
        "tokens_per_s_back_to_back": batch / b2b,
    }
    return result


def reference_figures(config_name: str, batch: int, position: int, steps: int) -> dict[str, Any]:
    """The plain-JAX baseline: the Flax reference's jitted decode, same shape, same run."""
    from models.llama.reference import LlamaReference
    from models.llama.weights import expected_shapes

    config = get_config(config_name)
    max_len = -(-(position + 1) // 32) * 32
    config = config.with_(max_seq_len=max_len)
    key = jax.random.key(0)
    weights = {}
    for i, (name, shape) in enumerate(expected_shapes(config).items()):
        weights[name] = jax.random.uniform(
            jax.random.fold_in(key, i), shape, jnp.bfloat16, -0.02, 0.02
        )
    model = LlamaReference(config, weights, dtype=jnp.bfloat16)
    fns = model.jitted()
    cache = model.init_cache(batch)
    tok = jnp.ones((batch, 1), jnp.int32)
    p = jnp.full((batch,), position, jnp.int32)
    logits, cache = fns.decode(tok, p, cache)
    jax.block_until_ready(logits)

    def timed(sync: bool) -> float:
        nonlocal cache
        start = time.perf_counter()
        for _ in range(steps):
            out, cache = fns.decode(tok, p, cache)
            if sync:
                jax.block_until_ready(out)
        jax.block_until_ready((out, cache))
        return (time.perf_counter() - start) / steps

    synced = statistics.median(timed(True) for _ in range(3))
    b2b = statistics.median(timed(False) for _ in range(3))
    return {"synced_ms": synced * 1e3, "back_to_back_ms": b2b * 1e3}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="llama-3.1-8b")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--position", type=int, default=1024)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--loop", type=int, default=16, help="steps in the on-device loop")
    p.add_argument(
        "--layouts", default="in_out", help="comma list of weight layouts: in_out (TT-NN), out_in"
    )
    p.add_argument(
        "--kernels",
        default=None,
        help="comma list of matmul kernel policies (default xla,pallas "
        "on a GPU, xla elsewhere: Pallas runs interpreted off a GPU)",
    )
    p.add_argument(
        "--fuse-gate-up",
        default=None,
        help="comma list of no,yes: gate and up as one weight "
        "(default no,yes on a GPU, no elsewhere)",
    )
    p.add_argument("--no-sweep", action="store_true", help="skip timing each matmul shape alone")
    p.add_argument("--no-grid", action="store_true", help="sweep only the default tilings")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--json", default=None)
    ns = p.parse_args(argv)
    position = min(ns.position, get_config(ns.config).max_seq_len - 1)
    gpu = jax.default_backend() == "gpu"
    rate = copy_bandwidth() if gpu else copy_bandwidth(256 << 20, 3, 3)
    result: dict[str, Any] = {
        "device": str(jax.devices()[0].device_kind),
        "backend": jax.default_backend(),
        "config": ns.config,
        "batch": ns.batch,
        "position": position,
        "dtype": "bfloat16",
        "copy_rate_TBps": rate / 1e12,
    }
    layouts = ns.layouts.split(",")
    policies = (ns.kernels or ("xla,pallas" if gpu else "xla")).split(",")
    if not ns.no_sweep:
        result["gemv"] = gemv_sweep(ns.config, ns.batch, layouts, grid=gpu and not ns.no_grid)
    fusions = [f == "yes" for f in (ns.fuse_gate_up or ("no,yes" if gpu else "no")).split(",")]
    variants = [(lay, pol, fus) for lay in layouts for pol in policies for fus in fusions]
    for layout, policy, fused in variants:
        with ttnn.kernels(policy):
            figures = run(
                ns.config, ns.batch, position, ns.steps, ns.loop, layout == "out_in", fused
            )
        roofline = (figures["weight_bytes_per_step"] + figures["kv_bytes_per_step"]) / rate
        result["roofline_ms"] = roofline * 1e3
        for kind in ("synced", "back_to_back", "on_device_loop"):
            figures[f"bandwidth_fraction_{kind}"] = roofline * 1e3 / figures[f"{kind}_ms"]
        result[f"ttjax_{layout}_{policy}" + ("_fused" if fused else "")] = figures
        print(f"decode {layout} {policy} fused={fused}: {json.dumps(figures)}", flush=True)
        if ns.json:  # each phase is saved, in case a time limit stops the run
            Path(ns.json).write_text(json.dumps(result, indent=2))
    if not ns.no_reference:
        ref = reference_figures(ns.config, ns.batch, position, ns.steps)
        ref["bandwidth_fraction_back_to_back"] = result["roofline_ms"] / ref["back_to_back_ms"]
        result["flax_reference"] = ref
    print(json.dumps(result, indent=2))
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
