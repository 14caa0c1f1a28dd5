"""The rank's side of ``ttjax-run``'s no-orphan contract, without JAX or the launcher: the parent
watch (the portable fallback for ``PR_SET_PDEATHSIG``) and the bounded SIGTERM grace."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from _launch import Watched, assert_all_gone, child_env

pytestmark = pytest.mark.timeout(60)

# A rank: installs the lifeline with its parent as the launcher, then idles. With GRACEFUL set it
# also installs a SIGTERM handler that only notes the request (a trainer still finishing a step).
RANK = """
import os, signal, sys, time
from ttjax.distributed import lifeline
lifeline.install(launcher_pid=os.getppid(), grace_s=float(sys.argv[1]), rank=3)
if sys.argv[2] == "graceful":
    signal.signal(signal.SIGTERM, lambda *a: print("stop requested", flush=True))
print(f"ready rank=3 pid={os.getpid()}", flush=True)
while True:
    time.sleep(0.05)
"""

# A launcher that starts the rank without a parent-death signal and waits.
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], "30", "plain"])
print(f"child pid={child.pid}", flush=True)
child.wait()
"""


def test_rank_stops_when_its_launcher_vanishes():
    w = Watched([sys.executable, "-c", PARENT, RANK], env=child_env())
    w.wait_for(r"ready rank=3")
    child = int(w.text("out").split("child pid=")[1].split()[0])
    killed = time.monotonic()
    os.kill(w.proc.pid, signal.SIGKILL)
    w.wait(timeout=5)
    assert_all_gone([child], within=3)
    assert time.monotonic() - killed < 3
    assert f"ttjax rank 3: the launcher (pid {w.proc.pid}) is gone; stopping" in w.text("err")


@pytest.mark.parametrize(
    ("mode", "code", "within", "said"),
    [
        ("plain", 143, (0, 1.5), "SIGTERM; exiting (no graceful stop installed)"),
        ("graceful", 143, (1, 3), "still running 1 s after SIGTERM; exiting"),
    ],
)
def test_sigterm_ends_the_rank_within_the_grace(mode, code, within, said):
    w = Watched([sys.executable, "-c", RANK, "1", mode], env=child_env())
    w.wait_for(r"ready rank=3")
    sent = time.monotonic()
    os.kill(w.proc.pid, signal.SIGTERM)
    exit_code, end = w.wait(timeout=10)
    assert exit_code == code
    assert within[0] <= end - sent < within[1], f"took {end - sent:.2f} s"
    assert f"ttjax rank 3: {said}" in w.text("err")
    assert ("stop requested" in w.text("out")) == (mode == "graceful")
