"""Where a step's device time goes (``benchmarks/gpu_train.py --profile DIR``): one profiled round
per side, the raw traces kept under DIR (open them in Perfetto or TensorBoard) and a summary for
the JSON: busy time per device line (CUDA stream) and the top kernels, in ms per step.

>>> summary = profile_jax(run, steps=3, out=Path("prof"))   # prof/jax/.../*.trace.json.gz
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

TOP = 15


def trace_summary(events: list[dict[str, Any]], steps: int, top: int = TOP) -> dict[str, Any]:
    """Chrome-trace complete events ("X", µs) on "/device:..." processes, per line and per kernel.

    Kernels are counted on the CUDA-stream lines ("Stream #..."), so derived lines (XLA Ops,
    XLA Modules) are not counted twice; with no stream line, every device line counts.
    """
    meta = [e for e in events if e.get("ph") == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e.get("name") == "process_name"}
    threads = {
        (e["pid"], e.get("tid")): e["args"]["name"] for e in meta if e["name"] == "thread_name"
    }
    device = [
        e for e in events if e.get("ph") == "X" and procs.get(e["pid"], "").startswith("/device:")
    ]
    lines: Counter[str] = Counter()
    for e in device:
        lines[threads.get((e["pid"], e.get("tid")), str(e.get("tid")))] += e["dur"]
    streams = {name for name in lines if name.startswith("Stream")} or set(lines)
    kernels: Counter[str] = Counter()
    for e in device:
        if threads.get((e["pid"], e.get("tid")), str(e.get("tid"))) in streams:
            kernels[e["name"]] += e["dur"]
    return {
        "lines_ms_per_step": {k: v / 1e3 / steps for k, v in lines.most_common()},
        "top_kernels_ms_per_step": [
            [k[:160], v / 1e3 / steps] for k, v in kernels.most_common(top)
        ],
    }


def profile_jax(run: Callable[[int], Any], steps: int, out: Path) -> dict[str, Any]:
    """Profile ``run(steps)`` with JAX's profiler; the Perfetto trace stays under ``out/jax``."""
    with jax.profiler.trace(str(out / "jax"), create_perfetto_trace=True):
        run(steps)
    path = max((out / "jax").rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
    return trace_summary(json.loads(gzip.decompress(path.read_bytes()))["traceEvents"], steps)


def profile_torch(run: Callable[[int], Any], steps: int, out: Path) -> dict[str, Any]:
    """Profile ``run(steps)`` with torch.profiler: CUDA kernels by device time (CPU ops on a CPU);
    the Chrome trace is saved as ``out/torch_trace.json.gz``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        run(steps)
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "torch_trace.json"
    prof.export_chrome_trace(str(raw))
    (out / "torch_trace.json.gz").write_bytes(gzip.compress(raw.read_bytes()))
    raw.unlink()
    kind = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    rows = sorted(
        (e for e in prof.key_averages() if e.device_type == kind),
        key=lambda e: getattr(e, attr),
        reverse=True,
    )
    return {
        "busy_ms_per_step": sum(getattr(e, attr) for e in rows) / 1e3 / steps,
        "top_kernels_ms_per_step": [
            [e.key[:160], getattr(e, attr) / 1e3 / steps] for e in rows[:TOP]
        ],
    }
