"""The rank's side of ``ttjax-run``'s no-orphan contract, without JAX or the launcher: the parent
watch (the portable fallback for ``PR_SET_PDEATHSIG``) and the bounded SIGTERM grace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from _launch import Watched, assert_all_gone, child_env

pytestmark = pytest.mark.timeout(60)

# A rank: installs the lifeline with its parent as the launcher, then idles. "graceful" and
# "stubborn" also install a SIGTERM handler that only asks the loop to stop (as the TTML trainer
# does); a graceful loop then "saves" (prints, writes the file argv[3]) and exits 143 like a
# trainer's caller, a stubborn one never gets there (a step stuck in a collective).
RANK = """
import os, signal, sys, time
from ttjax._src.launch.distributed import lifeline
lifeline.install(os.getppid(), float(sys.argv[1]), 3, os.environ.get("TTJAX_RANK_LOG"))
stop = []
if sys.argv[2] in ("graceful", "stubborn"):
    def ask(signum, frame):
        print("stop requested", flush=True)
        stop.append(signum)
    signal.signal(signal.SIGTERM, ask)
print(f"ready rank=3 pid={os.getpid()}", flush=True)
while not stop or sys.argv[2] == "stubborn":
    time.sleep(0.05)
time.sleep(0.3)
print("saved at the step boundary", flush=True)
open(sys.argv[3], "w").write("step 7")
sys.exit(143)
"""

# A launcher: starts the rank with pipes it reads, with or without the parent-death signal.
PARENT = """
import os, subprocess, sys
from ttjax._src.launch.distributed import lifeline
pdeath = lifeline.die_with_parent(os.getpid()) if sys.argv[2] == "pdeathsig" else None
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], "5", "graceful", sys.argv[3]],
                         stdout=subprocess.PIPE, preexec_fn=pdeath)
for line in child.stdout:
    sys.stdout.write(line.decode())
    sys.stdout.flush()
    if line.startswith(b"ready"):
        print(f"child pid={child.pid}", flush=True)
"""


@pytest.mark.parametrize("how", ["pdeathsig", "parent-watch"])
def test_rank_stops_gracefully_when_its_launcher_vanishes(tmp_path, how):
    """kill -9 of the launcher: the rank still gets SIGTERM (from the kernel, or from its own
    parent watch where there is no parent-death signal), stops at its step boundary, and its
    last lines (the pipe to the launcher is broken) land in its log instead of failing."""
    log, saved = tmp_path / "rank3.log", tmp_path / "saved"
    env = child_env() | {"TTJAX_RANK_LOG": str(log)}
    w = Watched([sys.executable, "-c", PARENT, RANK, how, str(saved)], env=env)
    w.wait_for(r"child pid=")
    child = int(w.text("out").split("child pid=")[1].split()[0])
    os.kill(w.proc.pid, signal.SIGKILL)
    w.wait(timeout=30)  # generous outer bounds: the events below are what is checked
    assert_all_gone([child], within=30)
    assert saved.read_text() == "step 7"
    kept = log.read_text()
    assert "stop requested" in kept and "saved at the step boundary" in kept
    if how == "parent-watch":
        assert f"ttjax rank 3: the launcher (pid {w.proc.pid}) is gone; stopping" in kept


SAID = {
    "plain": "SIGTERM; exiting (no graceful stop installed)",
    "stubborn": "still running 1 s after SIGTERM; exiting",
}


def _sigterm(tmp_path, mode: str, grace: int) -> float:
    """SIGTERM a ready rank; check its exit code and what it said; return the seconds it took."""
    argv = [sys.executable, "-c", RANK, str(grace), mode, str(tmp_path / "saved")]
    w = Watched(argv, env=child_env())
    w.wait_for(r"ready rank=3")
    sent = time.monotonic()
    os.kill(w.proc.pid, signal.SIGTERM)
    exit_code, end = w.wait(timeout=30)
    assert exit_code == 143
    assert f"ttjax rank 3: {SAID[mode].replace(' 1 s ', f' {grace} s ')}" in w.text("err")
    assert ("stop requested" in w.text("out")) == (mode == "stubborn")
    return end - sent


@pytest.mark.parametrize(("mode", "grace"), [("plain", 60), ("stubborn", 1)])
def test_sigterm_ends_the_rank_within_the_grace(tmp_path, mode, grace):
    """No handler: SIGTERM ends the rank at once, without its grace (60 s here, past the 30 s
    the test waits). A graceful handler whose loop never reaches its stop ("stubborn": a step
    stuck in a collective) still ends, once its grace is over (a lower bound no load breaks)."""
    took = _sigterm(tmp_path, mode, grace)
    if mode == "stubborn":
        assert took >= grace, f"took {took:.2f} s"


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "within"), [("plain", (0, 1.5)), ("stubborn", (1, 3))])
def test_sigterm_timing(tmp_path, mode, within):
    """The wall-clock figures (make test-all only: a loaded host can stretch them)."""
    took = _sigterm(tmp_path, mode, 1)
    assert within[0] <= took < within[1], f"took {took:.2f} s"


# Two threads detach at once (the watch thread, and a signal handler's print on the main thread):
# the second must not return before the first has moved fd 1, or its retried write meets the
# broken pipe again and the handler raises. dup2 is slowed so the first is caught inside.
DETACH_RACE = """
import os, sys, threading, time
from ttjax._src.launch.distributed import lifeline
lifeline._state["log"] = sys.argv[1]
dup2 = os.dup2
def slow_dup2(fd, fd2, *rest):
    time.sleep(0.3)
    return dup2(fd, fd2, *rest)
os.dup2 = slow_dup2
first = threading.Thread(target=lifeline._detach_streams)
first.start()
time.sleep(0.05)
lifeline._detach_streams()
os.write(1, b"written after the second detach returned")
first.join()
"""


def test_a_second_detach_waits_for_the_first(tmp_path):
    log = tmp_path / "rank.log"
    out = subprocess.run(
        [sys.executable, "-c", DETACH_RACE, str(log)],
        env=child_env(),
        capture_output=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout == b""
    assert log.read_text() == "written after the second detach returned"
