"""Run a Python snippet in a child process that a hang cannot freeze: XLA's CPU collectives give
up after ``collective_timeout`` seconds (the process aborts) and the child is killed after
``timeout``, so a deadlock fails the calling test instead of the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_bounded(
    code: str, env: dict[str, str], timeout: int = 120, collective_timeout: int = 10
) -> str:
    """Run ``code`` with ``python -c`` (this checkout on the path, ``env`` over a copy of this
    process's environment without ttjax's launch-pool setting) and return its stdout; fail the
    test, with the child's last output, when it exits non-zero or runs past ``timeout`` s."""
    child = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", "_TTJAX_PJRT_NPROC")}
    flags = f"--xla_cpu_collective_call_terminate_timeout_seconds={collective_timeout}"
    child.update(env)
    child["XLA_FLAGS"] = f"{child.get('XLA_FLAGS', '')} {flags}".strip()
    child["PYTHONPATH"] = os.pathsep.join([str(ROOT), child.get("PYTHONPATH", "")])
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child,
            cwd=ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child hung past {timeout} s:\n{str(e.stderr or '')[-2000:]}")
    if out.returncode != 0:
        pytest.fail(
            f"the child exited {out.returncode} (a collective that never completes "
            f"aborts it):\n{(out.stdout + out.stderr)[-3000:]}"
        )
    return out.stdout
