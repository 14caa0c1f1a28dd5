"""Where training memory goes: peak host RSS per sequence against the compiled step's own figure.

Each case runs in a fresh process (its peak RSS is the child's own, from ``os.wait4``): it
builds the model from a shipped YAML (NanoGPT at tt-train's n300 size, a small Llama), compiles
the train step on abstract inputs (``ttjax.ttml.memory.step_estimate``: XLA's memory analysis
of weights, optimizer state, batch and temporaries over the process's devices), then trains 2
steps and one validation loss. "before" runs each device's whole share of the batch at once
(``TTJAX_MICRO_BATCH=off``); "after" lets the preflight pick the chunk (the CLI's default).

python -m benchmarks.bench_memory             # NanoGPT and Llama, remat none/dots/full
python -m benchmarks.bench_memory --quick     # NanoGPT only, remat none and full
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import RESULTS, Row

ROOT = Path(__file__).resolve().parent.parent
GIB = float(1 << 30)
# name -> (script module, YAML, --set overrides, batch)
MODELS: dict[str, tuple[str, str, list[str], int]] = {
    "nanogpt": (
        "models.nanogpt.train",
        "configs/training_nanogpt_ddp_1x8.yaml",
        [
            "transformer_config.num_blocks=6",
            "transformer_config.num_heads=6",
            "transformer_config.embedding_dim=384",
            "transformer_config.max_sequence_length=256",
        ],
        32,
    ),
    "tiny": ("models.nanogpt.train", "configs/training_nanogpt_ddp_1x8.yaml", [], 8),
    "llama": (
        "models.llama.train",
        "configs/training_llama_ddp_1x8.yaml",
        [
            "transformer_config.num_blocks=4",
            "transformer_config.embedding_dim=256",
            "transformer_config.intermediate_dim=768",
            "transformer_config.max_sequence_length=256",
        ],
        32,
    ),
}
# remat policy -> TTML's runner_type; "dots" has none, so the child maps "default" to it.
RUNNER = {"none": "default", "dots": "default", "full": "memory_efficient"}


def child(spec: dict[str, Any]) -> None:
    """One case, in this (fresh) process: the estimate, then 2 steps and an eval; one JSON line."""
    import importlib
    import resource

    import jax
    import numpy as np

    from ttjax.ttml import memory
    from ttjax.ttml.autograd import AutoContext
    from ttjax.ttml.cli import train_step
    from ttjax.ttml.config import load_config
    from ttjax.ttml.stacked import RUNNER_REMAT
    from ttjax.ttml.train import OptimizerSettings

    script, yaml, sets, _ = MODELS[spec["model"]]
    runner = f"transformer_config.runner_type={RUNNER[spec['remat']]}"
    sets = [*sets, runner, f"training_config.batch_size={spec['batch']}"]
    if spec["remat"] == "dots":  # this process only: the default runner keeps matmul outputs
        RUNNER_REMAT["default"] = "dots"
    run = load_config(str(ROOT / yaml), sets, mesh_shape=[1, 2])
    ctx = AutoContext.get_instance()
    ctx.open_device([1, 2])
    par = ctx.initialize_parallelism_context(run.device.dims)
    module = importlib.import_module(script)
    parts = module.build(run, par, run.model.vocab_size)
    opt = OptimizerSettings.from_config(run)
    seq = run.model.max_sequence_length
    micro, est = memory.plan(  # the CLI's preflight
        train_step(run, par, parts, opt),
        lambda mb: train_step(run, par, parts, opt, micro_batch=mb),
        parts.params,
        spec["batch"],
        seq,
    )
    assert est is not None
    state = micro.init_state(parts.params)
    rng = np.random.default_rng(0)
    vocab = run.model.vocab_size
    for _ in range(2):
        tokens = rng.integers(0, vocab, (micro.accum, spec["batch"], seq + 1)).astype(np.int32)
        state, metrics = micro(state, tokens)
        float(metrics["loss"])
    val = rng.integers(0, vocab, (2, spec["batch"], seq + 1)).astype(np.int32)
    float(micro.eval_loss(state.params, val))
    n = sum(int(p.size) for p in jax.tree_util.tree_leaves(parts.params))
    print(
        "RESULT "
        + json.dumps(
            {
                "params": n,
                "micro_batch": est.micro_batch,
                "local_batch": micro.local_batch(spec["batch"]),
                "compiled": est.compiled,
                "temp": est.temp,
                "base": est.base,
                "estimate": est.total,
                "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            }
        ),
        flush=True,
    )


def measure(model: str, remat: str, batch: int, chunked: bool) -> dict[str, Any]:
    """Run one case in a fresh process; its result and its own peak RSS (``os.wait4``)."""
    env = dict(os.environ)
    if not chunked:
        env["TTJAX_MICRO_BATCH"] = "off"
    else:
        env.pop("TTJAX_MICRO_BATCH", None)
    env["TTJAX_MEMORY_CHECK"] = "off"
    spec = {"model": model, "remat": remat, "batch": batch}
    cmd = [sys.executable, "-m", "benchmarks.bench_memory", "--child", json.dumps(spec)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    result: dict[str, Any] = {"model": model, "remat": remat, "batch": batch, "chunked": chunked}
    line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
    result["exit"] = os.waitstatus_to_exitcode(status)
    result["peak_rss"] = usage.ru_maxrss * 1024
    result["seconds"] = time.perf_counter() - start
    if line:
        result.update(json.loads(line[len("RESULT ") :]))
    return result


def table(results: list[dict[str, Any]]) -> str:
    """The results as a Markdown table."""
    head = (
        "| model | remat | batch (per device) | chunk | compiled + state (GiB) | estimate (GiB) "
        "| peak RSS (GiB) | RSS / sequence (MB) | peak / estimate |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in results:
        if "estimate" not in r:
            rows.append(
                f"| {r['model']} | {r['remat']} | {r['batch']} | failed (exit {r['exit']}) |"
            )
            continue
        rows.append(
            f"| {r['model']} | {r['remat']} | {r['batch']} ({r['local_batch']}) "
            f"| {r['micro_batch'] or 'whole'} | {r['compiled'] / GIB:.2f} "
            f"| {r['estimate'] / GIB:.2f} | {r['peak_rss'] / GIB:.2f} "
            f"| {r['peak_rss'] / r['batch'] / 1e6:.0f} | {r['peak_rss'] / r['estimate']:.2f} |"
        )
    return head + "\n".join(rows)


def cases(quick: bool) -> list[tuple[str, str, int, bool]]:
    models = ["nanogpt"] if quick else list(MODELS)
    remats = ["none", "full"] if quick else ["none", "dots", "full"]
    return [
        (m, r, MODELS[m][3], chunked) for m in models for r in remats for chunked in (False, True)
    ]


def run() -> list[Row]:
    """``benchmarks.run``'s entry: the quick cases; ratio = peak RSS / estimate (target 1.5)."""
    rows = []
    for model, remat, batch, chunked in cases(quick=True):
        r = measure(model, remat, batch, chunked)
        if "estimate" in r:
            rows.append(
                Row(
                    f"memory {model} remat {remat} batch {batch} "
                    f"{'chunked' if chunked else 'whole'}",
                    "peak RSS (the ms columns read MB)",
                    "preflight estimate",
                    r["peak_rss"] / 1e9,
                    r["estimate"] / 1e9,
                    "ratio <= 1.5",
                    extra=r,
                )
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="NanoGPT, remat none and full")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.child:
        child(json.loads(ns.child))
        return 0
    results = []
    for model, remat, batch, chunked in cases(ns.quick):
        r = measure(model, remat, batch, chunked)
        results.append(r)
        print(json.dumps(r), flush=True)
    text = table(results)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "memory.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
