"""``ttjax-run``: TT-NN's ``tt-run`` for ttjax — one process per rank of a rank-binding file.

Public names only; the implementation is :mod:`ttjax._src.launch.run`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.launch.run import (
    GRACE_S as GRACE_S,
    POLL_S as POLL_S,
    SETTLE_S as SETTLE_S,
    STATUS_EVERY_S as STATUS_EVERY_S,
    TAIL_LINES as TAIL_LINES,
    RankLaunch as RankLaunch,
    free_port as free_port,
    launch_local as launch_local,
    main as main,
    mpirun_argv as mpirun_argv,
    plan as plan,
)

_publish(globals(), "ttjax._src.launch.run")

if __name__ == "__main__":
    raise SystemExit(main())
