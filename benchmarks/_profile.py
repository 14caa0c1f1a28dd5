"""Where a step's device time goes (``benchmarks/gpu_train.py --profile DIR``): one profiled round
per side, the raw traces kept under DIR (open them in Perfetto or TensorBoard) and a summary for
the JSON: busy time per device line (CUDA stream) and the top kernels, in ms per step.

>>> summary = profile_jax(run, steps=3, out=Path("prof"))   # prof/jax/.../*.trace.json.gz
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
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


# The block-float codec's functions: an instruction one of them emitted (its stack-frame
# metadata) is codec work of the op that called it.
CODEC = {"encode": "block-float encode", "decode": "block-float decode"}


def _frames(text: str) -> dict[int, tuple[str, int]]:
    """HLO text's stack-frame table: frame id -> (function name, parent frame id or 0)."""

    def section(name: str) -> list[str]:
        found = re.search(rf"\n{name}\n(.*?)\n\n", text, re.S)
        return found.group(1).splitlines() if found else []

    funcs = {int(ln.split()[0]): ln.split(None, 1)[1].strip('"') for ln in section("FunctionNames")}
    locs = {
        int(ln.split()[0]): int(re.findall(r"function_name_id=(\d+)", ln)[0])
        for ln in section("FileLocations")
    }
    frames = {}
    for ln in section("StackFrames"):
        loc, parent = (int(v) for v in re.findall(r"_id=(\d+)", ln))
        frames[int(ln.split()[0])] = (funcs[locs[loc]], parent - 1)  # printed one-based
    return frames


def _codec(frames: dict[int, tuple[str, int]], frame: int) -> str | None:
    seen = set()
    while frame in frames and frame not in seen:
        seen.add(frame)
        name, frame = frames[frame]
        if name in CODEC:
            return CODEC[name]
    return None


def _label(ln: str, frames: dict[int, tuple[str, int]]) -> str | None:
    """``op`` (the captured op's scope in a trace program) or ``op: block-float ...``."""
    scope = re.search(r'op_name="jit\(program\)/([^/"]+)', ln)
    if scope is None:
        return None
    frame = re.search(r"stack_frame_id=(\d+)", ln)
    codec = _codec(frames, int(frame.group(1))) if frame else None
    return f"{scope.group(1)}: {codec}" if codec else scope.group(1)


def hlo_families(hlo_text: str, events: list[dict[str, Any]], steps: int) -> dict[str, float]:
    """CPU ms per step of a trace's compiled program by captured op (the op's scope in the HLO
    metadata; its block-float decode and encode apart), collectives (their time includes
    waiting for the slowest device) and XLA's own converts and copies, summed over the devices'
    threads: each top-level instruction's median profiled duration times its count, so a
    thread the OS paused once moves no figure. A fusion goes to the label of most of its
    instructions."""
    frames = _frames(hlo_text)
    bodies = dict(re.findall(r"\n%?(\S+) [^\n]*\{\n(.*?)\n\}", hlo_text, re.S))
    entry = hlo_text[hlo_text.index("\nENTRY") :].splitlines()[1:]
    label_of = {}
    for ln in entry:
        found = re.match(r"\s+(?:ROOT )?%?(\S+) = \S+ ([a-z-]+)\(", ln)
        if not found or found.group(2) in ("parameter", "constant", "tuple", "bitcast"):
            continue
        name, op = found.groups()
        called = re.search(r"calls=%?([\w.\-]+)", ln)
        body = bodies.get(called.group(1), ln) if called else ln
        votes = Counter(v for v in (_label(i, frames) for i in body.splitlines()) if v)
        if op.startswith(("all-", "reduce-scatter", "collective")):
            label_of[name] = f"collective {op.removesuffix('-start')} (incl. waiting)"
        elif votes:
            label_of[name] = max(votes, key=votes.__getitem__)
        else:
            label_of[name] = f"XLA's own {op}s"
    durations: dict[str, list[float]] = {}
    for e in events:
        if e.get("ph") == "X" and e["name"] in label_of:
            durations.setdefault(e["name"], []).append(e["dur"])
    total: Counter[str] = Counter()
    for name, ds in durations.items():
        total[label_of[name]] += statistics.median(ds) * len(ds) / steps / 1e3
    return dict(total.most_common())


def profile_families(run: Callable[[], Any], compiled: Any, steps: int) -> dict[str, float]:
    """Profile ``steps`` calls of ``run`` (one replay of ``compiled``) and split its CPU time by
    :func:`hlo_families`."""
    import tempfile

    for _ in range(3):
        jax.block_until_ready(run())
    with tempfile.TemporaryDirectory() as out:
        with jax.profiler.trace(out, create_perfetto_trace=True):
            for _ in range(steps):
                jax.block_until_ready(run())
        path = max(Path(out).rglob("perfetto_trace.json.gz"), key=lambda p: p.stat().st_mtime)
        events = json.loads(gzip.decompress(path.read_bytes()))
    events = events["traceEvents"] if isinstance(events, dict) else events
    return hlo_families(compiled.as_text(), events, steps)
