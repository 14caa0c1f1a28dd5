"""Helpers for the multi-process tests: start ``ttjax-run`` on 127.0.0.1, find its ranks, and
check that none is left behind."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = [sys.executable, str(ROOT / "tests" / "distributed" / "rank_programs.py")]
FAULTS = [sys.executable, str(ROOT / "tests" / "distributed" / "fault_programs.py")]


def write_bindings(
    path: Path,
    visible: list[str],
    mesh_ids: list[int] | None = None,
    env: dict[int, dict[str, str]] | None = None,
    **extra: object,
) -> Path:
    """A rank-binding file: one rank per ``visible`` entry (its TT_VISIBLE_DEVICES); ``env``
    adds per-rank env_overrides."""
    mesh_ids = mesh_ids if mesh_ids is not None else [0] * len(visible)
    ranks = []
    for r, (ids, mesh_id) in enumerate(zip(visible, mesh_ids)):
        host_rank = sum(1 for m in mesh_ids[:r] if m == mesh_id)
        ranks.append(
            {
                "rank": r,
                "mesh_id": mesh_id,
                "mesh_host_rank": host_rank,
                "env_overrides": {"TT_VISIBLE_DEVICES": ids, **(env or {}).get(r, {})},
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


class Watched:
    """A started process whose stdout and stderr lines are collected with their arrival times."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.start = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env if env is not None else child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[tuple[float, str, str]] = []
        self._readers = [
            threading.Thread(target=self._read, args=(s, n), daemon=True)
            for s, n in ((self.proc.stdout, "out"), (self.proc.stderr, "err"))
        ]
        for t in self._readers:
            t.start()

    def _read(self, stream, name: str) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), name, line.rstrip("\n")))

    def wait_for(self, pattern: str, timeout: float = 120) -> float:
        """The time the first line matching ``pattern`` arrived (fails after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, _, line in list(self.lines):
                if re.search(pattern, line):
                    return t
            if self.proc.poll() is not None:
                time.sleep(0.2)
                for t, _, line in list(self.lines):
                    if re.search(pattern, line):
                        return t
                raise AssertionError(
                    f"exited ({self.proc.returncode}) before {pattern!r}:\n" + self.text()[-4000:]
                )
            time.sleep(0.02)
        self.kill()
        raise AssertionError(
            f"no line matching {pattern!r} in {timeout} s:\n" + self.text()[-4000:]
        )

    def wait(self, timeout: float) -> tuple[int, float]:
        """``(exit code, time it exited)``; kills the process group and fails on timeout."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"still running after {timeout} s:\n" + self.text()[-4000:]
            ) from None
        end = time.monotonic()
        self._close()
        return code, end

    def _close(self) -> None:
        for t in self._readers:
            t.join(timeout=5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def text(self, stream: str | None = None) -> str:
        return "\n".join(line for _, s, line in self.lines if stream in (None, s))

    def kill(self) -> None:
        """Stop the process (a launcher stops its ranks on SIGTERM), reap it, close the pipes."""
        stop(self.proc)
        self._close()


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the launcher then stops its ranks), and SIGKILL the group after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)  # a stopped process must wake to see SIGTERM
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)
