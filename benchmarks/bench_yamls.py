"""tt-train's own training YAMLs at full size: each trains 2 steps or is refused in one message.

Every file of ``$TT_METAL_HOME/tt-train/configs`` runs unchanged through its CLI
(``models.llama.train`` for ``model_type: llama``, else ``models.nanogpt.train``) with
``--max-steps 2``, in a fresh child process, one at a time under the shared heavy-run lock. A
watchdog polls the child's resident memory and kills it past ``--guard`` (so the host never
reaches the kernel's OOM killer); the peak is the child's own (``os.wait4``). Prints one row per
file: trained (loss, validation loss, seconds per step), refused (the message's first line) or
stopped (guard or time limit), with the memory preflight's estimate and the peak RSS.

TT_METAL_HOME=/tmp/ttm-full python -m benchmarks.bench_yamls                   # every file
TT_METAL_HOME=/tmp/ttm-full python -m benchmarks.bench_yamls --only tinyllama nanogpt_bpe
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from ttjax.ttml.memory import parse_bytes

ROOT = Path(__file__).resolve().parent.parent
GIB = float(1 << 30)
PREFIX = "training_shakespeare_"


@dataclass
class Outcome:
    """What one file did: ``result`` is trained / refused / stopped / failed."""

    name: str
    cli: str
    result: str
    estimate: str = "-"
    peak_gb: float = 0.0
    wall_s: float = 0.0
    detail: str = ""

    def row(self) -> str:
        peak = f"{self.peak_gb:.2f} GB" if self.peak_gb else "-"
        return (
            f"| `{self.name}` | {self.result}: {self.detail} | {self.estimate} | {peak} | "
            f"{self.wall_s:.0f} s |"
        )


def cli_of(path: Path) -> str:
    """The module that trains ``path``: Llama for ``model_type: llama``, else NanoGPT."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    kind = (raw.get("training_config") or {}).get("model_type", "gpt2")
    return "models.llama.train" if kind == "llama" else "models.nanogpt.train"


@contextmanager
def heavy_lock(path: str | None) -> Any:
    """Hold the shared heavy-run lock (``flock``) for one child, when a path is given."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def rss_of(pid: int) -> int:
    """Resident bytes of ``pid`` now (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def watch(proc: subprocess.Popen[Any], guard: int, limit: float) -> tuple[int, int, str]:
    """Wait for ``proc``, killing its group past ``guard`` bytes or ``limit`` seconds; returns
    (status, peak RSS bytes, why it was stopped or "")."""
    start, why = time.monotonic(), ""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return status, int(usage.ru_maxrss) * 1024, why
        if not why and rss_of(proc.pid) > guard:
            why = f"killed by the {guard / 1e9:.0f} GB guard"
        elif not why and time.monotonic() - start > limit:
            why = f"stopped at the {limit:.0f} s limit"
        if why:
            os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.2)


def parse(log: str) -> dict[str, str]:
    """The figures of a run's output: estimate, step losses, validation, the error's line."""
    out: dict[str, str] = {}
    m = re.search(r"memory: estimated peak ([0-9.]+ GiB)", log)
    if m:
        out["estimate"] = m.group(1)
    m = re.search(r"needs about ([0-9.]+ GiB)", log)
    if m:
        out["estimate"] = m.group(1)
    steps = re.findall(r"step\s+(\d+)/\d+\s+loss ([0-9.]+).*?tokens/s ([0-9,]+)", log)
    if steps:
        out["steps"], out["loss"], out["tokens_s"] = steps[-1]
    val = re.findall(r'"final_val_loss": ([0-9.]+)', log)
    if val:
        out["val"] = f"{float(val[-1]):.4f}"
    m = re.search(r"^.*?: error \((\w+)\): (.*)$", log, re.M)
    if m:
        out["error"] = f"{m.group(1)}: {m.group(2).strip()}"
    return out


def run_one(path: Path, args: argparse.Namespace, sink: IO[str]) -> Outcome:
    """One file in a fresh child (its own folders for logs and checkpoints)."""
    cli = cli_of(path)
    name = path.name
    with tempfile.TemporaryDirectory(prefix="bench_yamls_") as tmp:
        cmd = [
            sys.executable,
            "-m",
            cli,
            "--config",
            str(path),
            "--max-steps",
            "2",
            "--no-progress",
            "--out",
            f"{tmp}/run",
            "--set",
            f"training_config.checkpoint_dir={tmp}/ckpt",
            "--set",
            "training_config.log_every=1",
        ]
        logfile = Path(tmp) / "log.txt"
        with heavy_lock(args.lock), open(logfile, "w") as logf:
            t0 = time.monotonic()
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True
            )
            status, peak, why = watch(proc, args.guard, args.timeout)
            wall = time.monotonic() - t0
        log = logfile.read_text(errors="replace")
    sink.write(f"===== {name} ({cli}, status {status})\n{log}\n")
    sink.flush()
    got = parse(log)
    o = Outcome(name, cli, "failed", got.get("estimate", "-"), peak / 1e9, wall)
    if why:
        o.result, o.detail = (
            "stopped",
            why + (f" after step {got['steps']}" if "steps" in got else ""),
        )
    elif os.waitstatus_to_exitcode(status) == 0 and got.get("steps") == "2":
        o.result = "trained 2 steps"
        o.detail = f"loss {got['loss']}" + (f", val {got['val']}" if "val" in got else "")
        o.detail += f", step 2 at {got['tokens_s']} tokens/s"
    elif "error" in got:
        detail = re.sub(r" \(read with --set .*\)$", "", got["error"])
        o.result, o.detail = "refused", detail.replace(f"{path}: ", "")
    else:
        o.detail = log.strip().splitlines()[-1][:160] if log.strip() else "no output"
    return o


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="*", default=None, help="file names (prefix optional)")
    p.add_argument("--guard", type=parse_bytes, default=parse_bytes("20GB"), help="RSS kill mark")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per file")
    p.add_argument("--lock", default="/tmp/ttjax-heavy.lock", help="flock file ('' for none)")
    p.add_argument("--log", default="bench_yamls.log", help="every child's output")
    args = p.parse_args(argv)
    home = os.environ.get("TT_METAL_HOME")
    folder = Path(home or "/nonexistent") / "tt-train" / "configs"
    files = sorted(folder.glob("*.yaml"))
    if not files:
        print("bench_yamls: set TT_METAL_HOME to a tt-metal checkout (tt-train/configs)")
        return 2
    if args.only:  # in the order given
        by_name = {f.stem.removeprefix(PREFIX): f for f in files} | {f.stem: f for f in files}
        files = [
            by_name[n.removesuffix(".yaml")]
            for n in args.only
            if n.removesuffix(".yaml") in by_name
        ]
    print("| config | result | estimate | peak RSS | wall |\n|---|---|---|---|---|", flush=True)
    with open(args.log, "a", encoding="utf-8") as sink:
        for f in files:
            print(run_one(f, args, sink).row(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
