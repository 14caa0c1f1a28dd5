"""Where training memory goes: peak host RSS per sequence against the compiled step's own figure.

Each case runs in a fresh process (its peak RSS is the child's own, from ``os.wait4``): it
builds the model from a shipped YAML (NanoGPT at tt-train's n300 size, a small Llama), compiles
the train step on abstract inputs (``ttjax.ttml.memory.step_estimate``: XLA's memory analysis
of weights, optimizer state, batch and temporaries over the process's devices), then trains 2
steps and one validation loss. "before" runs each device's whole share of the batch at once
(``TTJAX_MICRO_BATCH=off``); "after" lets the preflight pick the chunk (the CLI's default).

The default set runs the training CLI itself (2 steps and its validation, a fresh process per
row, peak RSS from ``os.wait4``, the estimate from the CLI's own ``memory: estimated peak`` line):
tt-train's n300 NanoGPT YAML at batch 16/32/64, and NanoGPT at the n300 size under each
strategy (DDP, TP, FSDP, CP, PP, SP: ttjax's shipped configs with ``--set``). ``--before TREE``
runs the n300 rows again on another tree (``PYTHONPATH=TREE``; e.g. ``git archive 037747c``,
the tree before issue 37) for the before column.

python -m benchmarks.bench_memory                              # n300 YAML rows + one per strategy
python -m benchmarks.bench_memory --before /tmp/before37       # ... and the n300 rows on that tree
python -m benchmarks.bench_memory --only n300-32 sp            # some rows (names: --list)
python -m benchmarks.bench_memory --grid      # NanoGPT and Llama x remat none/dots/full, whole/chunked
python -m benchmarks.bench_memory --quick     # the grid's NanoGPT rows, remat none and full
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
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
    state = micro.init_state(parts.whole_params())
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
                "peak_rss": memory.peak_rss(),  # its own: ru_maxrss starts at the parent's
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


N300 = "tt-train/configs/training_shakespeare_nanogpt_ddp_n300.yaml"  # under TT_METAL_HOME
# NanoGPT at tt-train's n300 size (6 blocks, 6 heads, dim 384, context 256), no remat
N300_SIZE = [
    "transformer_config.num_heads=6",
    "transformer_config.embedding_dim=384",
    "transformer_config.max_sequence_length=256",
    "transformer_config.runner_type=default",
]
# row name -> (script, config (from this tree, or TT_METAL_HOME for tt-train's), --set, what)
CLI_ROWS: dict[str, tuple[str, str, list[str], str]] = {
    **{
        f"n300-{b}": (
            "models.nanogpt.train",
            "$TT_METAL_HOME/" + N300,
            [f"training_config.batch_size={b}"],
            f"n300 YAML, batch {b} (DDP 1x2)",
        )
        for b in (16, 32, 64)
    },
    **{
        name: (
            "models.nanogpt.train",
            f"configs/training_nanogpt_{yaml}.yaml",
            [
                *N300_SIZE,
                f"transformer_config.num_blocks={blocks}",
                "training_config.batch_size=16",
                *(["transformer_config.num_heads=8"] if "tp" in yaml else []),  # TP 4 divides it
            ],
            what,
        )
        for name, yaml, blocks, what in (
            ("ddp", "ddp_1x8", 6, "DDP 1x8"),
            ("tp", "tp_ddp", 6, "TP+DDP 2x4"),
            ("fsdp", "fsdp", 6, "FSDP 1x8"),
            ("cp", "cp", 6, "CP 1x8"),
            ("pp", "pp", 8, "PP 1x8 (8 blocks)"),
            ("sp", "tp_ddp_sp", 6, "TP+DDP+SP 2x4"),
        )
    },
}
RSS_CAP = 11 << 30  # a row past this is killed (the before figure at batch 64: 8.8 GB)
HOST_FLOOR = 3 << 30  # ... and any row while the shared host has less than this available
# the most telling rows first (a bounded run still has them)
DEFAULT_ORDER = ["n300-32", "n300-64", "ddp", "tp", "fsdp", "cp", "pp", "sp"]
_ESTIMATE = re.compile(
    r"memory: estimated peak ([0-9.]+) GiB \(process ([0-9.]+) \+ weights, optimizer state and "
    r"batch in and out ([0-9.]+) \+ the step's temporaries (\d+) devices? x ([0-9.]+)"
    r"(?: \+ [a-z', ]+ ([0-9.]+))?\)"
)


def measure_cli(name: str, tree: Path, limit: float = 1500.0) -> dict[str, Any]:
    """One CLI row on ``tree`` (2 steps, its validation and final checkpoint), in a fresh process
    started from an empty folder (its runs/ and checkpoints/ land there): its own peak RSS
    (``os.wait4``) and the estimate the CLI printed (``None`` where it printed none)."""
    script, config, sets, what = CLI_ROWS[name]
    config = config.replace("$TT_METAL_HOME", os.environ.get("TT_METAL_HOME", "."))
    config = str(tree / config) if not config.startswith("/") else config
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("TTJAX_MICRO_BATCH", None)
    cmd = [sys.executable, "-m", script, "--config", config, "--max-steps", "2", "--no-progress"]
    cmd += [x for kv in sets for x in ("--set", kv)]
    result: dict[str, Any] = {"row": name, "what": what, "tree": str(tree)}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_memory_") as cwd:
        log = Path(cwd) / "out.log"
        with log.open("w") as f:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)
            stop = threading.Event()
            guard = threading.Thread(target=_guard, args=(proc, limit, stop, result), daemon=True)
            guard.start()
            _, status, usage = os.wait4(proc.pid, 0)
            stop.set()
            proc.returncode = os.waitstatus_to_exitcode(status)
        out = log.read_text(errors="replace")
    result["seconds"] = time.perf_counter() - start
    result["exit"] = proc.returncode
    result["peak_rss"] = usage.ru_maxrss * 1024
    m = _ESTIMATE.search(out)
    if m:
        total, base, state, devices, temp, runtime = (float(x or 0) for x in m.groups())
        result.update(
            estimate=total * GIB, base=base * GIB, state=state * GIB, temp=temp * GIB,
            devices=int(devices), compiled=(state + devices * temp) * GIB, runtime=runtime * GIB,
        )  # fmt: skip
    chunks = re.search(r"in chunks of (\d+)", out)
    result["chunk"] = int(chunks.group(1)) if chunks else None
    if result["exit"] != 0:
        result["tail"] = out[-2000:]
    return result


def _guard(proc: subprocess.Popen[Any], limit: float, stop: threading.Event, out: dict) -> None:
    """Kill the row past ``limit`` seconds, past ``RSS_CAP`` resident, or when the shared host
    has under ``HOST_FLOOR`` available: a bounded run, never the host's OOM killer."""
    from ttjax.ttml.memory import available_bytes

    end = time.monotonic() + limit
    while not stop.wait(0.5):
        try:
            with open(f"/proc/{proc.pid}/status", encoding="ascii") as f:
                rss = next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue
        why = (
            "timeout" if time.monotonic() > end
            else "rss cap" if rss > RSS_CAP
            else "host memory low" if available_bytes() < HOST_FLOOR
            else None
        )  # fmt: skip
        if why:
            out["killed"] = why
            proc.kill()
            return


def cli_table(after: list[dict[str, Any]], before: dict[str, dict[str, Any]]) -> str:
    """The CLI rows as a Markdown table (before: the same row on the ``--before`` tree)."""
    head = (
        "| run (CLI: 2 steps + validation) | before: peak RSS (GB) | after: peak RSS (GB) "
        "| after: MB / sequence | chunk | compiled figure (GB) | estimate (GB) "
        "| peak / estimate |\n|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for r in after:
        b = before.get(r["row"])
        old = "" if b is None else _gb(b)
        batch = int(re.search(r"batch_size=(\d+)", " ".join(CLI_ROWS[r["row"]][2]))[1])  # type: ignore[index]
        if "estimate" in r:
            est = f"{r['compiled'] / 1e9:.2f} | {r['estimate'] / 1e9:.2f} | "
            est += f"{r['peak_rss'] / r['estimate']:.2f}"
        else:
            est = "not estimated | - | -"
        rows.append(
            f"| {r['what']} | {old} | {_gb(r)} | {r['peak_rss'] / batch / 1e6:.0f} "
            f"| {r.get('chunk') or 'whole'} | {est} |"
        )
    return head + "\n".join(rows)


def _gb(r: dict[str, Any]) -> str:
    if r.get("exit") != 0:
        return f"failed (exit {r.get('exit')}, {r['peak_rss'] / 1e9:.2f})"
    return f"{r['peak_rss'] / 1e9:.2f}"


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
    parser.add_argument("--grid", action="store_true", help="the grid: models x remat x chunking")
    parser.add_argument("--quick", action="store_true", help="the grid's NanoGPT, remat none/full")
    parser.add_argument("--before", type=Path, default=None, help="also run the rows on this tree")
    parser.add_argument("--only", nargs="*", default=None, help="CLI rows to run (see --list)")
    parser.add_argument("--list", action="store_true", help="list the CLI rows")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.child:
        child(json.loads(ns.child))
        return 0
    if ns.list:
        print("\n".join(f"{k}: {v[3]}" for k, v in CLI_ROWS.items()))
        return 0
    RESULTS.mkdir(exist_ok=True)
    if not (ns.grid or ns.quick):
        names = ns.only or [*DEFAULT_ORDER, *(k for k in CLI_ROWS if k not in DEFAULT_ORDER)]
        before: dict[str, dict[str, Any]] = {}
        after = []
        for name in names:
            if ns.before is not None and name.startswith("n300"):
                before[name] = measure_cli(name, ns.before.resolve())
                print(json.dumps(before[name]), flush=True)
            after.append(measure_cli(name, ROOT))
            print(json.dumps(after[-1]), flush=True)
        print(cli_table(after, before))
        (RESULTS / "memory_cli.json").write_text(json.dumps([*before.values(), *after], indent=1))
        return 0
    results = []
    for model, remat, batch, chunked in cases(ns.quick):
        r = measure(model, remat, batch, chunked)
        results.append(r)
        print(json.dumps(r), flush=True)
    text = table(results)
    print(text)
    (RESULTS / "memory.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
