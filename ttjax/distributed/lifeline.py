"""A rank never outlives its launcher, and SIGTERM always ends it.

Two ends of one contract. The launcher starts each rank with :func:`die_with_parent` (Linux:
``PR_SET_PDEATHSIG`` = SIGTERM, so ``kill -9`` of ``ttjax-run`` or a dropped SSH session still
reaches the rank). In the rank, :func:`install` (called by ``ttjax.distributed.initialize``) takes
SIGTERM back from XLA (whose preemption notifier, installed by ``jax.distributed.initialize``,
swallows it) and starts a watchdog thread that

- sends the rank SIGTERM when its parent is no longer the launcher (the portable fallback for
  systems without a parent-death signal), and
- ends the rank ``grace_s`` after a SIGTERM that a graceful handler (e.g. the TTML trainer's
  stop-at-step-boundary) has not finished in time, even when the main thread is stuck in a
  collective whose peer is gone.

Without a graceful handler, SIGTERM prints one line and ends the rank at once (exit code 143).
Once the launcher is gone its pipes are too: the rank's stdout and stderr then append to the
rank's log (``TTJAX_RANK_LOG``), so a graceful stop's last words are kept and no write fails.

Public names only; the implementation is :mod:`ttjax._src.launch.distributed.lifeline`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.launch.distributed.lifeline import (
    EXIT_SIGTERM as EXIT_SIGTERM,
    KERNEL_WAIT_S as KERNEL_WAIT_S,
    POLL_S as POLL_S,
    PR_GET_PDEATHSIG as PR_GET_PDEATHSIG,
    PR_SET_PDEATHSIG as PR_SET_PDEATHSIG,
    Lifeline as Lifeline,
    current as current,
    die_with_parent as die_with_parent,
    install as install,
    parent_death_signal as parent_death_signal,
)

_publish(globals(), "ttjax._src.launch.distributed.lifeline")
