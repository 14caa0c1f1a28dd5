"""Helpers for the multi-process tests: start ``ttjax-run`` on 127.0.0.1, find its ranks, and
check that none is left behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = [sys.executable, str(ROOT / "tests" / "distributed" / "rank_programs.py")]


def write_bindings(
    path: Path, visible: list[str], mesh_ids: list[int] | None = None, **extra: object
) -> Path:
    """A rank-binding file: one rank per ``visible`` entry (its TT_VISIBLE_DEVICES)."""
    mesh_ids = mesh_ids if mesh_ids is not None else [0] * len(visible)
    ranks = []
    for r, (ids, mesh_id) in enumerate(zip(visible, mesh_ids)):
        host_rank = sum(1 for m in mesh_ids[:r] if m == mesh_id)
        ranks.append(
            {
                "rank": r,
                "mesh_id": mesh_id,
                "mesh_host_rank": host_rank,
                "env_overrides": {"TT_VISIBLE_DEVICES": ids},
            }
        )
    path.write_text(yaml.safe_dump({"rank_bindings": ranks, **extra}))
    return path


def launcher_argv(bindings: Path, tmp: Path, *program: str, heartbeat: int = 10) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ttjax.run",
        "--rank-binding",
        str(bindings),
        "--cache-root",
        str(tmp / "cache"),
        "--heartbeat-timeout",
        str(heartbeat),
        "--init-timeout",
        "60",
        "--timeout",
        "240",
        *program,
    ]


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def start_launcher(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def run_launcher(argv: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    proc = start_launcher(argv)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def rank_pids(text: str) -> dict[int, int]:
    """``{rank: pid}`` from the ``ready rank=R pid=P`` lines the rank programs print."""
    return {int(r): int(p) for r, p in re.findall(r"ready rank=(\d+) pid=(\d+)", text)}


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (read from /proc, no psutil)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def assert_all_gone(pids: list[int], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if alive(p)]
    assert not left, f"processes left behind: {left}"


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc/*/stat parent links)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, IndexError, ProcessLookupError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out
