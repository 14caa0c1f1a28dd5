"""What a training run reports while it runs, torchtitan's way: a metrics line every ``log_every``
steps (loss, lr, grad norm, tokens/s, MFU, memory per device) on the terminal and in
``<out>/train.log``, and the same numbers as rows of ``<out>/metrics.csv``.

The lines go through the ``logging`` module (logger ``ttjax.ttml.metrics``), so they reach the
terminal and the file whether or not a terminal is attached; with a rich progress bar on screen
they print above it. MFU is the FLOPs of the step that ran, on all of the mesh's devices
(:func:`step_flops`: ``ttjax.inspect``'s count of the compiled step, loop bodies once per trip),
over the step time and the peak of the mesh's own devices (:func:`mesh_peak`: one device's peak,
which says where its figure comes from, times the mesh's device count). A line above 100% comes
with a warning saying which figure is an estimate.

>>> log = MetricsLog(out_dir, log_every=10, flops_per_step=2.1e9, peak=mesh_peak(mesh))
>>> log.record(rec)            # every step; prints and writes every 10th
>>> log.close()
"""

from __future__ import annotations

import csv
import hashlib
import logging
import os
import re
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ttjax.inspect import BranchWeights, report_compiled

PEAK_ENV = "TTJAX_PEAK_FLOPS"  # FLOP/s of one device: overrides the table and the CPU estimate
# Dense bf16 tensor-core peaks (FLOP/s) by device-kind substring, first match wins (the vendors'
# data sheets; torchtitan's MFU takes the bf16 peak too).
PEAK_BF16 = (("H200", 989e12), ("H100 PCIe", 756e12), ("H100", 989e12), ("A100", 312e12))
CSV_FIELDS = (
    "step",
    "loss",
    "val_loss",
    "lr",
    "grad_norm",
    "tokens_per_s",
    "mfu",
    "memory_gib_per_device",
)
_GIB = 1024**3


@dataclass(frozen=True)
class Peak:
    """One device's peak FLOP/s, where the figure comes from (printed beside the MFU), and how
    many such devices the run's peak adds up (the mesh's; 1 for one device)."""

    flops: float | None
    source: str
    devices: int = 1

    @property
    def total(self) -> float | None:
        """The peak FLOP/s of all ``devices`` together (None when unknown)."""
        return None if self.flops is None else self.flops * self.devices


def peak_flops(
    device: Any = None, cpuinfo: str = "/proc/cpuinfo", sharing: int | None = None
) -> Peak:
    """The peak FLOP/s of ``device`` (default: the first): ``$TTJAX_PEAK_FLOPS``, a GPU's dense
    bf16 data-sheet figure, or for XLA's host devices the CPU's fp32 vector peak (cores x clock x
    FLOPs per cycle, from ``/proc/cpuinfo``) shared by the ``sharing`` host devices that run the
    program (default: every local CPU device; :func:`mesh_peak` passes the mesh's).

    >>> peak_flops(sharing=8).source
    'CPU: 2 cores x 2596 MHz x 64 FLOP/cycle (2 FMA units x 16 fp32 lanes, avx512f) / 8 devices'
    """
    device = device or jax.devices()[0]
    if os.environ.get(PEAK_ENV):
        try:
            return Peak(float(os.environ[PEAK_ENV]), f"${PEAK_ENV}")
        except ValueError:
            return Peak(None, f"${PEAK_ENV}={os.environ[PEAK_ENV]!r} is not a number")
    kind = str(device.device_kind)
    if device.platform != "cpu":
        value = bf16_peak(kind)
        if value is None:
            return Peak(None, f"no peak known for {kind!r}: set ${PEAK_ENV}")
        return Peak(value, f"{kind} dense bf16 data sheet")
    if sharing is None:
        sharing = sum(d.platform == "cpu" for d in jax.local_devices())
    return _cpu_peak(cpuinfo, sharing)


def mesh_peak(mesh: Any, cpuinfo: str = "/proc/cpuinfo") -> Peak:
    """The peak of ``mesh``'s own devices: one device's :func:`peak_flops` with ``devices`` =
    the mesh's device count. On XLA's host devices a CPU's peak is shared by the mesh's devices
    on that host only (devices outside the mesh idle), counting every process on this host.

    Under several processes this is a collective (an all-gather of host names): call it on
    every process.
    """
    devices = list(np.asarray(mesh.devices).flat)
    first = devices[0]
    sharing = None
    if first.platform == "cpu":
        here = _same_host_processes()
        sharing = sum(d.process_index in here for d in devices)
    peak = peak_flops(first, cpuinfo, sharing=sharing)
    return Peak(peak.flops, peak.source, devices=len(devices))


def _same_host_processes() -> set[int]:
    """The processes of the job running on this host (this one alone with one process)."""
    me = jax.process_index()
    if jax.process_count() == 1:
        return {me}
    from jax.experimental import multihost_utils

    digest = hashlib.sha256(socket.gethostname().encode()).digest()
    mine = np.frombuffer(digest[:4], np.int32)  # int32: the all-gather's without jax_enable_x64
    hosts = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1)
    return {int(p) for p in np.flatnonzero(hosts == hosts[me])}


def bf16_peak(device_kind: str) -> float | None:
    """The dense bf16 peak FLOP/s of a known accelerator (:data:`PEAK_BF16`), else None.

    >>> bf16_peak("NVIDIA H100 80GB HBM3")
    989000000000000.0
    """
    return next((v for k, v in PEAK_BF16 if k.lower() in device_kind.lower()), None)


def _cpu_peak(cpuinfo: str, n_devices: int) -> Peak:
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return Peak(None, f"{cpuinfo} is unreadable: set ${PEAK_ENV}")
    mhz = [float(m) for m in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M)]
    flags = set(re.findall(r"^flags\s*:\s*(.*)$", text, re.M)[0].split()) if mhz else set()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if not mhz or not cores:
        return Peak(None, f"no clock in {cpuinfo}: set ${PEAK_ENV}")
    lanes, isa = (
        (16, "avx512f") if "avx512f" in flags else (8, "avx2") if "avx2" in flags else (4, "sse")
    )
    fma = 2 if "fma" in flags or isa == "avx512f" else 1
    per_cycle = 2 * fma * lanes  # an FMA is 2 FLOPs, on every fp32 lane of each unit
    total = cores * max(mhz) * 1e6 * per_cycle
    n = max(n_devices, 1)
    return Peak(
        total / n,
        f"CPU: {cores} cores x {max(mhz):.0f} MHz x {per_cycle} FLOP/cycle ({fma} FMA units x "
        f"{lanes} fp32 lanes, {isa}) / {n} devices",
    )


def step_flops(
    compiled: Any, mesh: Any, branch_weights: BranchWeights | None = None
) -> float | None:
    """FLOPs of one run of ``compiled`` (a jitted step's ``lower(...).compile()``) on all of
    ``mesh``'s devices: ``ttjax.inspect``'s count of one device's program (loop bodies once per
    trip) times the device count. A conditional counts its most expensive branch unless
    ``branch_weights`` says how often each branch runs (the pipeline's schedule does); None when
    XLA gives no count."""
    try:
        report = report_compiled(
            compiled, mesh=mesh, name="train step", branch_weights=branch_weights
        )
    except Exception:  # a backend without an HLO text or a cost model: no MFU, training goes on
        return None
    if report.flops is None:
        return None
    return float(report.flops) * int(np.asarray(mesh.devices).size)


def mfu_line(log_every: int, log: MetricsLog, flops: float | None, peak: Peak | None) -> str:
    """The line that opens a run's metrics: where they go and what the MFU divides."""
    count = "unknown" if flops is None else f"{flops:.4g}"
    top = "unknown" if peak is None or peak.flops is None else f"{peak.flops:.4g}"
    n = peak.devices if peak else "?"
    return (
        f"metrics every {log_every} steps (also in {log.log_path} and {log.csv_path}); "
        f"mfu = {count} FLOPs per step (the compiled step, all {n} devices of the mesh) / step "
        f"time / ({n} devices x peak {top} FLOP/s per device: {peak.source if peak else 'none'})"
    )


def memory_per_device() -> tuple[float, str]:
    """The most bytes in use on one local device, and how they were measured: the allocator's
    ``bytes_in_use`` where the backend keeps it (GPU, TPU), else the live arrays' shards (CPU)."""
    devices = jax.local_devices()
    stats = [d.memory_stats() for d in devices]
    if all(s and "bytes_in_use" in s for s in stats):
        return float(max(s["bytes_in_use"] for s in stats if s)), "in use"
    used = dict.fromkeys(devices, 0)
    for a in jax.live_arrays():
        shard = a.sharding.shard_shape(a.shape)
        size = a.dtype.itemsize
        for n in shard:
            size *= n
        for d in a.sharding.addressable_devices:
            if d in used:
                used[d] += size
    return float(max(used.values(), default=0)), "live arrays"


def _size(nbytes: float) -> str:
    """``1.23 GiB``, ``45.6 MiB``: the unit that shows the figure."""
    return f"{nbytes / _GIB:.2f} GiB" if nbytes >= _GIB else f"{nbytes / 1024**2:.2f} MiB"


class _Terminal(logging.Handler):
    """Writes a record to ``print_fn`` (the progress bar's console, or stdout), flushed."""

    def __init__(self, print_fn: Callable[[str], None] | None) -> None:
        super().__init__()
        self.print_fn = print_fn

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = self.format(record)
            if self.print_fn is not None:
                self.print_fn(msg)
            else:
                sys.stdout.write(msg + "\n")
                sys.stdout.flush()
        except (OSError, ValueError):  # a closed pipe (the launcher died): the file still has it
            pass


class MetricsLog:
    """The metrics line every ``log_every`` steps (0: none) and at the last step, to the terminal
    and ``<out_dir>/train.log``, and a row of ``<out_dir>/metrics.csv`` per line.

    Rates are over the steps since the previous line; the first step of a launch (its compile)
    is left out of them when the window has others. A resumed run keeps the file's lines and the
    CSV's rows up to the step it resumed at.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        *,
        log_every: int,
        last_step: int,
        start_step: int = 0,
        flops_per_step: float | None = None,
        peak: Peak | None = None,
        print_fn: Callable[[str], None] | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.log_every, self.last_step, self.start = log_every, last_step, start_step
        self.flops_per_step, self.peak = flops_per_step, peak
        self.log_path, self.csv_path = self.out_dir / "train.log", self.out_dir / "metrics.csv"
        self._window: list[dict[str, Any]] = []
        self._warned = False  # the warning of an MFU above 100% is given once
        self.logger = logging.getLogger(f"ttjax.ttml.metrics.{id(self)}")
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False
        file = logging.FileHandler(self.log_path, mode="a", encoding="utf-8")
        file.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        self.logger.addHandler(file)
        self.logger.addHandler(_Terminal(print_fn))
        self._csv_rows = self._kept_rows(start_step)
        self._csv_file = self.csv_path.open("w", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._csv_file, CSV_FIELDS)
        self._csv.writeheader()
        self._csv.writerows(self._csv_rows)
        self._csv_file.flush()

    def _kept_rows(self, start: int) -> list[dict[str, str]]:
        if not self.csv_path.is_file():
            return []
        with self.csv_path.open(newline="", encoding="utf-8") as f:
            try:
                return [r for r in csv.DictReader(f) if int(r.get("step") or 0) <= start]
            except (ValueError, csv.Error):
                return []  # not ours, or cut short: started anew

    def info(self, text: str) -> None:
        """One line outside the metrics (the MFU's peak, the profiler), to both places."""
        self.logger.info(text)

    def record(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """Take one step's record; on a logging step, print and write the line and return it."""
        self._window.append(rec)
        step = rec["step"]
        if not (self.log_every and (step % self.log_every == 0 or step == self.last_step)):
            return None
        window = self._window
        if len(window) > 1 and window[0]["step"] == self.start + 1:
            window = window[1:]  # the launch's first step compiled the program
        self._window = []
        seconds = sum(r["step_s"] for r in window)
        tokens = sum(r["tokens_per_s"] * r["step_s"] for r in window)
        row: dict[str, Any] = {
            "step": step,
            "loss": rec["loss"],
            "val_loss": rec.get("val_loss"),
            "lr": rec["lr"],
            "grad_norm": rec["grad_norm"],
            "tokens_per_s": tokens / max(seconds, 1e-9),
            "mfu": None,
            "memory_gib_per_device": None,
        }
        if self.flops_per_step and self.peak and self.peak.total:
            row["mfu"] = self.flops_per_step * len(window) / max(seconds, 1e-9) / self.peak.total
            if row["mfu"] > 1 and not self._warned:
                self._warned = True
                self.logger.warning(self.over_line(row["mfu"]))
        mem, how = memory_per_device()
        row["memory_gib_per_device"] = mem / _GIB
        self.logger.info(self.line(row, how))
        self._csv.writerow({k: "" if v is None else v for k, v in row.items()})
        self._csv_file.flush()
        return row

    def over_line(self, mfu: float) -> str:
        """Why an MFU above 100% is possible: the peak is an estimate, or the FLOPs are not."""
        peak = self.peak or Peak(None, "none")
        why = (
            "the peak is the CPU's estimate from /proc/cpuinfo, whose clock is the current one, "
            "not the turbo clock the cores may run at"
            if peak.source.startswith("CPU")
            else f"the peak ({peak.source}) is below what this device reaches"
        )
        return (
            f"warning: mfu {100 * mfu:.2f}% is above 100%: {why}, or the step's FLOP count "
            f"({self.flops_per_step:.4g} per step) counts work that did not run (a conditional's "
            f"costliest branch).\nfix: set ${PEAK_ENV} to this device's measured peak FLOP/s."
        )

    def line(self, row: dict[str, Any], memory_source: str = "live arrays") -> str:
        """``step 20/300  loss 2.8412  val 2.9001  lr 2.95e-03  grad_norm 0.8120  tokens/s 1,234
        mfu 0.81%  memory 0.31 MiB/device (live arrays)``"""
        width = len(str(self.last_step))
        parts = [f"step {row['step']:>{width}}/{self.last_step}", f"loss {row['loss']:.4f}"]
        if row.get("val_loss") is not None:
            parts.append(f"val {row['val_loss']:.4f}")
        parts += [
            f"lr {row['lr']:.2e}",
            f"grad_norm {row['grad_norm']:.4f}",
            f"tokens/s {row['tokens_per_s']:,.0f}",
            "mfu " + ("n/a" if row["mfu"] is None else f"{100 * row['mfu']:.2f}%"),
            f"memory {_size(row['memory_gib_per_device'] * _GIB)}/device ({memory_source})",
        ]
        return "  ".join(parts)

    def close(self) -> None:
        for h in list(self.logger.handlers):
            self.logger.removeHandler(h)
            h.close()
        self._csv_file.close()


__all__ = [
    "CSV_FIELDS",
    "PEAK_BF16",
    "MetricsLog",
    "Peak",
    "bf16_peak",
    "memory_per_device",
    "mesh_peak",
    "mfu_line",
    "peak_flops",
    "step_flops",
]
