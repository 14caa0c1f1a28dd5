"""A rank never outlives its launcher, and SIGTERM always ends it.

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
