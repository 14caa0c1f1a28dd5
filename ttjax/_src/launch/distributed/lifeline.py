"""A rank never outlives its launcher, and SIGTERM always ends it.

The implementation of :mod:`ttjax.distributed.lifeline`, whose docstring says more.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2
POLL_S = 0.25
KERNEL_WAIT_S = 2.0  # with a parent-death signal set, the kernel's SIGTERM comes first
EXIT_SIGTERM = 128 + signal.SIGTERM


def _prctl() -> Any:
    """libc's ``prctl`` (None off Linux), resolved in the parent: a forked child of a threaded
    launcher must not dlopen (another thread may have held the loader's lock at fork)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` for the launcher's children: the child gets SIGTERM when the parent dies
    (Linux ``PR_SET_PDEATHSIG``), and leaves at once if the parent died between fork and then."""
    prctl = _prctl()

    def child() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(EXIT_SIGTERM)

    return child


def parent_death_signal() -> int:
    """The signal the kernel sends this process when its parent dies (0: none, or not Linux)."""
    prctl, sig = _prctl(), ctypes.c_int(0)
    if prctl is not None:
        prctl(PR_GET_PDEATHSIG, ctypes.byref(sig), 0, 0, 0)
    return sig.value


@dataclass(frozen=True)
class Lifeline:
    """What the rank's watchdog watches: the launcher's pid (None: no launcher) and the grace."""

    launcher_pid: int | None
    grace_s: float
    rank: int


_state: dict[str, Any] = {
    "lifeline": None,
    "term_at": None,  # when SIGTERM came (or was sent by the watch)
    "graceful": False,  # whether a graceful handler was installed when it came
    "log": None,
    "detached": False,
}


# The watch thread and the main thread (a signal handler's print) both detach: whichever comes
# second must not return before the first has moved fds 1 and 2, or its retried write meets the
# broken pipe again. Reentrant: a handler may interrupt the main thread inside the lock.
_DETACH_LOCK = threading.RLock()


def _detach_streams() -> None:
    """Point fds 1 and 2 at the rank's log (or /dev/null): the launcher's pipes are gone."""
    with _DETACH_LOCK:
        if _state["detached"]:
            return
        try:
            fd = os.open(_state["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except (OSError, TypeError):
            fd = os.open(os.devnull, os.O_WRONLY)
        for target in (1, 2):
            with contextlib.suppress(OSError):
                os.dup2(fd, target)
        os.close(fd)
        _state["detached"] = True


class _Guarded:
    """``sys.stdout``/``sys.stderr`` that survive the launcher: a broken pipe detaches the
    streams to the log and the write goes on there (a signal handler's print must not raise)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            _detach_streams()
            return self._stream.write(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            _detach_streams()
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _say(rank: int, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"ttjax rank {rank}: {text}\n")
        sys.stderr.flush()


def _default_sigterm(signum: int, frame: object) -> None:
    """No graceful stop is installed: end the rank now, as SIGTERM's default would."""
    line = _state["lifeline"]
    _say(line.rank if line else -1, "SIGTERM; exiting (no graceful stop installed)")
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    os._exit(EXIT_SIGTERM)


def _note_sigterm() -> None:
    _state["term_at"] = time.monotonic()
    _state["graceful"] = signal.getsignal(signal.SIGTERM) is not _default_sigterm


def _watch(line: Lifeline, wakeup: int) -> None:
    # Exactly one SIGTERM per launcher death: a second one would cut a graceful stop short (the
    # trainer reads it as "stop now, without saving"). With the kernel's parent-death signal set,
    # the watch only sends its own when that one has not come.
    wait_s = KERNEL_WAIT_S if parent_death_signal() == signal.SIGTERM else 0.0
    gone_at = None
    while True:
        ready, _, _ = select.select([wakeup], [], [], POLL_S)
        if ready:
            with contextlib.suppress(BlockingIOError, OSError):
                signals = os.read(wakeup, 64)
                if signal.SIGTERM in signals and _state["term_at"] is None:
                    _note_sigterm()
        if line.launcher_pid is not None and os.getppid() != line.launcher_pid:
            _detach_streams()
            gone_at = time.monotonic() if gone_at is None else gone_at
            if _state["term_at"] is None and time.monotonic() - gone_at >= wait_s:
                _say(line.rank, f"the launcher (pid {line.launcher_pid}) is gone; stopping")
                _note_sigterm()
                os.kill(os.getpid(), signal.SIGTERM)
        term_at = _state["term_at"]
        if term_at is None:
            continue
        if not _state["graceful"]:
            # The main thread may be blocked in C (a collective) and never run the handler. A
            # graceful stop instead gets the grace, even after it restored the default handler.
            _default_sigterm(signal.SIGTERM, None)
        if time.monotonic() - term_at > line.grace_s:
            _say(line.rank, f"still running {line.grace_s:g} s after SIGTERM; exiting")
            os._exit(EXIT_SIGTERM)


def install(
    launcher_pid: int | None, grace_s: float, rank: int, log_path: str | None = None
) -> Lifeline:
    """Take SIGTERM (main thread only) and start the watchdog; idempotent. ``log_path``: where
    stdout and stderr go once the launcher is gone."""
    if _state["lifeline"] is not None:
        return _state["lifeline"]
    line = Lifeline(launcher_pid, float(grace_s), rank)
    if launcher_pid is not None:
        _state["log"] = log_path
        sys.stdout = _Guarded(sys.stdout)
        sys.stderr = _Guarded(sys.stderr)
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    signal.signal(signal.SIGTERM, _default_sigterm)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    _state["lifeline"] = line
    threading.Thread(target=_watch, args=(line, r), name="ttjax-lifeline", daemon=True).start()
    if launcher_pid is not None and os.getppid() != launcher_pid and _state["term_at"] is None:
        _note_sigterm()  # the launcher died before the watchdog started
        os.kill(os.getpid(), signal.SIGTERM)
    return line


def current() -> Lifeline | None:
    """The installed lifeline (None before :func:`install`)."""
    return _state["lifeline"]


__all__ = [
    "EXIT_SIGTERM",
    "Lifeline",
    "current",
    "die_with_parent",
    "install",
    "parent_death_signal",
]
