"""NanoGPT-124M training on one GPU: ttjax.ttml's jitted ``TrainStep`` against PyTorch +
``torch.compile`` of the same model (same weights, same batch), timed in the same run, with MFU.

    python -m benchmarks.gpu_train                                   # gpt2-124m, 16 x 1024, bf16
    python -m benchmarks.gpu_train --json benchmarks/results/gpu_train_h100.json
    python -m benchmarks.gpu_train --config tiny --steps 3           # a quick run on the CPU
    python -m benchmarks.gpu_train --profile prof/                   # + traces, top kernels

Both sides keep fp32 master weights and compute in bf16 (``torch.autocast``; on the JAX side the
loss casts the parameters to bf16 inside, the cross-entropy runs in fp32), AdamW with nanoGPT's
settings (decay on matrices only, global-norm clipping at 1.0, constant lr). The torch model is
karpathy's nanoGPT ``model.py`` (tied embeddings, biases, tanh GELU, SDPA causal attention) with
its weights copied from ttjax's init. Before timing, a gate checks that the first steps' losses
agree. Timing interleaves the sides (A B A B ...): each round dispatches ``--steps`` steps back
to back and waits once; the median round is kept. MFU uses nanoGPT's ``estimate_mfu`` count.
"""

from __future__ import annotations

import os

# JAX takes 75% of GPU memory by default; leave room for the torch side of the same process.
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.45")

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

import ttjax as ttnn
from benchmarks._profile import profile_jax, profile_torch
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_specs
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.metrics import bf16_peak
from ttjax.ttml.stacked import unstack_blocks
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer, mixed_precision

# name: (model, batch); the sequence length is the block size. gpt2-124m remats with "dots", the
# fastest policy measured on an H100 (44.9 ms/step; "full" 45.2, "none" 51.2: see
# benchmarks/README.md); the tiny CPU config keeps every activation.
CONFIGS = {
    "gpt2-124m": (
        GPTConfig(
            vocab_size=50304,
            block_size=1024,
            n_layer=12,
            n_head=12,
            n_embd=768,
            remat_policy="dots",
        ),
        16,
    ),
    "tiny": (
        GPTConfig(
            vocab_size=512, block_size=64, n_layer=2, n_head=4, n_embd=128, remat_policy="none"
        ),
        4,
    ),
}
# nanoGPT's train.py settings (constant lr: no warmup or decay inside a benchmark).
CLIP = 1.0
OPT = OptimizerSettings(6e-4, 0.1, 0.9, 0.95, 1e-8, "identity", clip_grad_norm_max_norm=CLIP)
GATE_RTOL = {"bfloat16": 2e-2, "float32": 1e-4}


def peak_flops(device_kind: str) -> float | None:
    """Dense bf16 peak of a known accelerator, else None (CPU, unknown GPU: no MFU)."""
    return bf16_peak(device_kind)


def non_embedding_params(params: Any) -> int:
    """nanoGPT's ``get_num_params()``: every parameter but the position embeddings (wte is tied)."""
    return sum(x.size for x in jax.tree_util.tree_leaves(params)) - params["wpe"].size


def flops_per_token(config: GPTConfig, params: Any, seq: int) -> int:
    """nanoGPT's ``estimate_mfu``: 6 N + 12 L H Q T (matmuls forward and backward, attention)."""
    hq = config.n_embd // config.n_head
    return 6 * non_embedding_params(params) + 12 * config.n_layer * config.n_head * hq * seq


def ttjax_side(config: GPTConfig, params: Any, tokens: np.ndarray, dtype: Any) -> Callable:
    """``run(n)``: n TrainSteps on a 1x1 mesh dispatched back to back, then one wait; losses."""
    par = ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(1, 1)))
    loss_fn = mixed_precision(GPT(config).loss, dtype)
    step = TrainStep(loss_fn, param_specs(config, par), par, make_optimizer(OPT))
    held = [step.init_state(params)]
    batch = jax.device_put(tokens, NamedSharding(step.mesh, step.batch_spec))

    def run(n: int) -> list[float]:
        losses = []
        for _ in range(n):
            held[0], metrics = step(held[0], batch)
            losses.append(metrics["loss"])
        jax.block_until_ready((held[0], losses))
        return [float(x) for x in losses]

    return run


def torch_side(config: GPTConfig, params: Any, tokens: np.ndarray, bf16: bool, compile_: bool):
    """The same step in PyTorch (karpathy's nanoGPT), weights copied from ``params``."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    C, nh = config.n_embd, config.n_head

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x: Any) -> Any:
            B, T, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class TorchGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(config.vocab_size, C)
            self.wpe = nn.Embedding(config.block_size, C)
            self.h = nn.ModuleList(Block() for _ in range(config.n_layer))
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx: Any, targets: Any) -> Any:
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # the tied LM head
            return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = TorchGPT().to(device)
    model.load_state_dict(torch_state_dict(config, params))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": OPT.weight_decay}, {"params": rest, "weight_decay": 0}],
        lr=OPT.learning_rate,
        betas=(OPT.beta1, OPT.beta2),
        eps=OPT.epsilon,
        fused=device == "cuda",
    )
    forward = torch.compile(model) if compile_ else model
    x = torch.from_numpy(tokens[0, :, :-1].astype(np.int64)).to(device)
    y = torch.from_numpy(tokens[0, :, 1:].astype(np.int64)).to(device)

    def run(n: int) -> list[float]:
        losses = []
        for _ in range(n):
            with torch.autocast(device, torch.bfloat16, enabled=bf16):
                loss = forward(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
        if device == "cuda":
            torch.cuda.synchronize()
        return [float(x) for x in losses]

    return run, torch.__version__


def torch_state_dict(config: GPTConfig, params: Any) -> dict[str, Any]:
    """ttjax's parameters under nanoGPT's names: weights [in, out] -> [out, in], and c_attn's
    columns from (head, q/k/v, hs) to nanoGPT's (q/k/v, head, hs)."""
    import torch

    nh, C = config.n_head, config.n_embd

    def t(a: Any, qkv: bool = False, linear: bool = False) -> Any:
        a = np.array(a, np.float32)  # a writable copy
        if qkv:
            a = a.reshape(*a.shape[:-1], nh, 3, C // nh).swapaxes(-3, -2).reshape(a.shape)
        return torch.from_numpy(np.ascontiguousarray(a.T if linear else a))

    sd = {"wte.weight": t(params["wte"]["weight"]), "wpe.weight": t(params["wpe"])}
    sd |= {"ln_f.weight": t(params["ln_f"]["scale"]), "ln_f.bias": t(params["ln_f"]["bias"])}
    for i, b in enumerate(unstack_blocks(params["blocks"])):
        for name in ("ln_1", "ln_2"):
            sd[f"h.{i}.{name}.weight"] = t(b[name]["scale"])
            sd[f"h.{i}.{name}.bias"] = t(b[name]["bias"])
        for name in ("c_attn", "attn_proj", "c_fc", "mlp_proj"):
            sd[f"h.{i}.{name}.weight"] = t(b[name]["weight"], name == "c_attn", linear=True)
            sd[f"h.{i}.{name}.bias"] = t(b[name]["bias"], name == "c_attn")
    return sd


def check_losses(ours: list[float], theirs: list[float], rtol: float) -> float:
    """The largest relative loss difference; raises if any step's differs by more than ``rtol``."""
    rel = [abs(a - b) / abs(b) for a, b in zip(ours, theirs, strict=True)]
    if max(rel) > rtol:
        raise RuntimeError(
            f"gpu_train gate: ttjax losses {ours} and torch losses {theirs} differ by up to "
            f"{max(rel):.3g} (relative) > {rtol}: the two programs are not the same training step."
        )
    return max(rel)


def first_steps(run: Callable[[int], list[float]], n: int) -> tuple[float, list[float]]:
    """(seconds of the first step, which compiles; the losses of the first ``n`` steps)."""
    start = time.perf_counter()
    losses = run(1)
    return time.perf_counter() - start, losses + run(n - 1)


def time_interleaved(sides: dict[str, Callable], steps: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per step of each side, per round; the sides take turns, round 0 is dropped."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds + 1):
        for name, run in sides.items():
            start = time.perf_counter()
            run(steps)
            if r:
                times[name].append((time.perf_counter() - start) / steps)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="gpt2-124m", choices=sorted(CONFIGS))
    p.add_argument("--batch", type=int, default=None, help="default: 16 (gpt2-124m), 4 (tiny)")
    p.add_argument("--steps", type=int, default=20, help="steps per timed round")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per side (median kept)")
    p.add_argument("--gate-steps", type=int, default=3, help="first steps whose losses must agree")
    p.add_argument("--dtype", default="bfloat16", choices=sorted(GATE_RTOL))
    p.add_argument("--attention", default="auto", choices=["auto", "xla", "cudnn"])
    p.add_argument("--no-compile", action="store_true", help="time PyTorch eager instead")
    p.add_argument("--no-torch", action="store_true", help="time the ttjax side only")
    p.add_argument("--profile", default=None, help="DIR: profile a few steps per side, keep traces")
    p.add_argument(
        "--remat",
        default="",
        help="extra ttjax sides, one per remat policy (e.g. dots,full), timed beside 'none'",
    )
    p.add_argument("--json", default=None)
    ns = p.parse_args(argv)
    extra_remat = [r for r in ns.remat.split(",") if r]
    for r in extra_remat:
        if r not in ("none", "dots", "full") or r == config_remat(ns.config):
            p.error(
                f"--remat {r!r}: each must be 'dots', 'full' or 'none', other than the config's"
            )
    if min(ns.steps, ns.rounds, ns.gate_steps) < 1:
        p.error("--steps, --rounds and --gate-steps must be >= 1")
    config, batch = CONFIGS[ns.config]
    batch, seq = ns.batch or batch, config.block_size
    gpu, bf16 = jax.default_backend() == "gpu", ns.dtype == "bfloat16"
    attention = ns.attention if ns.attention != "auto" else ("cudnn" if gpu and bf16 else "xla")
    params = init_params(config, 5489)
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, (1, batch, seq + 1))
    tokens = tokens.astype(np.int32)
    kind = str(jax.devices()[0].device_kind)
    peak = peak_flops(kind)
    flops_per_step = flops_per_token(config, params, seq) * batch * seq
    result: dict[str, Any] = {
        "device": kind,
        "backend": jax.default_backend(),
        "jax_version": jax.__version__,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "config": ns.config,
        "batch": batch,
        "seq": seq,
        "dtype": ns.dtype,
        "non_embedding_params": non_embedding_params(params),
        "flops_per_step": flops_per_step,
        "peak_flops": peak,
        "steps_per_round": ns.steps,
        "rounds": ns.rounds,
    }

    def start_ttjax(attention: str) -> tuple[Callable, tuple[float, list[float]]]:
        run = ttjax_side(replace(config, attention=attention), params, tokens, jnp.dtype(ns.dtype))
        return run, first_steps(run, ns.gate_steps)

    first: dict[str, tuple[float, list[float]]] = {}
    try:
        jax_run, first["ttjax"] = start_ttjax(attention)
    except Exception as e:  # cuDNN attention unsupported here: say why and use XLA's
        if attention != "cudnn":
            raise
        result["cudnn_attention_error"] = f"{type(e).__name__}: {e}"[:1000]
        attention = "xla"
        jax_run, first["ttjax"] = start_ttjax(attention)
    result["model"] = asdict(replace(config, attention=attention))
    result["ttjax_compile_s"] = first["ttjax"][0]
    write_json(ns.json, result)  # each phase is saved, in case a time limit stops the run
    runs: dict[str, Callable] = {"ttjax": jax_run}
    labels = {"ttjax": f"ttjax TrainStep ({attention} attention, remat {config.remat_policy})"}
    for policy in extra_remat:  # the same step with another remat policy; its losses must agree
        name = f"ttjax_remat_{policy}"
        cfg = replace(config, attention=attention, remat_policy=policy)
        runs[name] = ttjax_side(cfg, params, tokens, jnp.dtype(ns.dtype))
        first[name] = first_steps(runs[name], ns.gate_steps)
        check_losses(first[name][1], first["ttjax"][1], GATE_RTOL[ns.dtype])
        labels[name] = f"ttjax TrainStep ({attention} attention, remat {policy})"
        write_json(ns.json, result)
    if not ns.no_torch:
        runs["torch"], result["torch_version"] = torch_side(
            config, params, tokens, bf16, not ns.no_compile
        )
        first["torch"] = first_steps(runs["torch"], ns.gate_steps)
        labels["torch"] = "torch eager" if ns.no_compile else "torch.compile"
        rtol = GATE_RTOL[ns.dtype]
        gate = {"ttjax_losses": first["ttjax"][1], "torch_losses": first["torch"][1], "rtol": rtol}
        result["gate"] = gate
        try:
            gate["max_rel_diff"] = check_losses(gate["ttjax_losses"], gate["torch_losses"], rtol)
        except RuntimeError as e:  # keep what the run found, then stop
            gate["error"] = str(e)
            write_json(ns.json, result)
            raise
        result["torch_compile_s"] = first["torch"][0]
        write_json(ns.json, result)

    times = time_interleaved(runs, ns.steps, ns.rounds)
    for name, rounds in times.items():
        s = statistics.median(rounds)
        result[name] = {
            "label": labels[name],
            "compile_s": first[name][0],
            "ms_per_step": s * 1e3,
            "rounds_ms": [x * 1e3 for x in rounds],
            "tokens_per_s": batch * seq / s,
            "mfu": None if peak is None else flops_per_step / s / peak,
        }
    if "torch" in times:
        ratio = result["ttjax"]["ms_per_step"] / result["torch"]["ms_per_step"]
        result["ratio_ttjax_over_torch"] = ratio
    if ns.profile:
        n = min(ns.steps, 3)
        result["profile"] = {"dir": ns.profile, "steps": n}
        result["profile"]["ttjax"] = profile_jax(runs["ttjax"], n, Path(ns.profile))
        if "torch" in runs:
            result["profile"]["torch"] = profile_torch(runs["torch"], n, Path(ns.profile))
    write_json(ns.json, result)
    print_table(result)
    print(json.dumps(result, indent=2))
    return 0


def config_remat(name: str) -> str:
    """The remat policy the named config trains with."""
    return CONFIGS[name][0].remat_policy


def write_json(path: str | None, result: dict[str, Any]) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=2))


def print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    title = f"NanoGPT {result['config']} train step, batch {result['batch']} x {result['seq']}, "
    table = Table(title=title + f"{result['dtype']}, on {result['device']}")
    for col in ("side", "compile s", "ms/step", "tokens/s", "MFU"):
        table.add_column(col, justify="left" if col == "side" else "right")
    for name in ["ttjax", *(k for k in result if k.startswith("ttjax_remat_")), "torch"]:
        if name in result and isinstance(result[name], dict):
            r = result[name]
            mfu = "-" if r["mfu"] is None else f"{r['mfu']:.1%}"
            table.add_row(
                r["label"],
                f"{r['compile_s']:.1f}",
                f"{r['ms_per_step']:.2f}",
                f"{r['tokens_per_s']:,.0f}",
                mfu,
            )
    Console().print(table)
    if "ratio_ttjax_over_torch" in result:
        print(f"ttjax / torch: {result['ratio_ttjax_over_torch']:.3f} (target <= 1.0)")


if __name__ == "__main__":
    raise SystemExit(main())
