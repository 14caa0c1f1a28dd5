"""Side-by-side timing: interleaved repeats, medians, ratios, a rich table and a JSON file."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jax

RESULTS = Path(__file__).parent / "results"


def _block(out: Any) -> None:
    jax.block_until_ready(
        [x for x in jax.tree_util.tree_leaves(out) if hasattr(x, "block_until_ready")]
    )


def time_call(fn: Callable[..., Any], number: int, setup: Callable[[], Any] | None = None) -> float:
    """Seconds per call of ``fn`` over ``number`` back-to-back calls (results waited for).

    With ``setup``, each call gets a fresh argument built (and waited for) outside the timing.
    """
    if setup is not None:
        total = 0.0
        for _ in range(number):
            arg = setup()
            _block(arg)
            start = time.perf_counter()
            _block(fn(arg))
            total += time.perf_counter() - start
        return total / number
    start = time.perf_counter()
    out = None
    for _ in range(number):
        out = fn()
    _block(out)
    return (time.perf_counter() - start) / number


def compare(
    variants: dict[str, Callable[..., Any]],
    *,
    repeats: int = 7,
    number: int = 10,
    warmup: int = 2,
    setups: dict[str, Callable[[], Any]] | None = None,
) -> dict[str, float]:
    """Median seconds per call of each variant, measured interleaved (A B A B ...).

    ``setups[name]`` (optional) builds a fresh argument for every call, untimed.
    """
    setups = setups or {}
    for name, fn in variants.items():
        for _ in range(warmup):
            setup = setups.get(name)
            _block(fn(setup()) if setup else fn())
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            samples[name].append(time_call(fn, number, setups.get(name)))
    return {k: statistics.median(v) for k, v in samples.items()}


def collectives(report: Any) -> dict[str, int]:
    """The collective kinds a ``ttjax.inspect`` report holds, with their counts (zeros left out)."""
    return {k: v for k, v in report.collective_counts().items() if v}


@dataclass
class Row:
    """One benchmark figure: ``ratio = subject / baseline`` (lower is faster) and its target."""

    name: str
    subject: str
    baseline: str
    subject_s: float
    baseline_s: float
    target: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.subject_s / self.baseline_s

    @property
    def speedup(self) -> float:
        return self.baseline_s / self.subject_s

    def met(self) -> bool | None:
        t = self.target.replace(" ", "")
        if t.startswith("ratio<="):
            return self.ratio <= float(t[len("ratio<=") :])
        if t.startswith("speedup>="):
            return self.speedup >= float(t[len("speedup>=") :].rstrip("x"))
        return None


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": len(jax.devices()),
        "device_kind": jax.devices()[0].device_kind,
    }


def report(title: str, rows: list[Row], path: str | Path | None = None) -> None:
    """Print a rich table of ``rows`` and write them (with the machine) as JSON."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in (
        "benchmark",
        "subject",
        "baseline",
        "subject ms",
        "baseline ms",
        "ratio",
        "target",
        "met",
    ):
        table.add_column(col)
    for r in rows:
        met = r.met()
        table.add_row(
            r.name,
            r.subject,
            r.baseline,
            f"{r.subject_s * 1e3:.3f}",
            f"{r.baseline_s * 1e3:.3f}",
            f"{r.ratio:.3f} ({r.speedup:.1f}x)",
            r.target,
            "-" if met is None else ("yes" if met else "NO"),
        )
    Console(width=160).print(table)
    if path is not None:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "title": title,
            "machine": machine(),
            "rows": [
                {**asdict(r), "ratio": r.ratio, "speedup": r.speedup, "met": r.met()} for r in rows
            ],
        }
        out.write_text(json.dumps(data, indent=2))
