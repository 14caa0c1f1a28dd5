"""``ttjax-run``: TT-NN's ``tt-run`` for ttjax — one process per rank of a rank-binding file.

    ttjax-run --rank-binding config.yaml [--mpi-args "..."] [--dry-run] [--verbose] prog [args...]

Each rank gets tt-run's environment (``TT_MESH_ID``, ``TT_MESH_HOST_RANK``, ``TT_VISIBLE_DEVICES``,
``TT_MESH_GRAPH_DESC_PATH``, a per-rank ``TT_METAL_CACHE``/JAX compilation cache) plus the
``jax.distributed`` coordinator address and process count. Output lines carry mpirun's
``--tag-output`` prefix ``[1,RANK]<stdout>:``; rank 0's progress bar redraws live, Gloo's
connection lines stay out of the terminal, and every rank's full output is kept in
``--log-dir``/``rankN.log``. When a rank fails the others are stopped and the launcher exits
non-zero, naming the rank, its exit code or signal and its last lines.

No rank outlives the launcher: SIGINT, SIGTERM and SIGHUP are forwarded as SIGTERM (a rank may
stop gracefully, e.g. checkpoint at the step boundary) and SIGKILL follows after
``--stop-grace`` seconds; if the launcher itself is killed, each rank gets SIGTERM from the
kernel (``PR_SET_PDEATHSIG``) or notices its parent is gone (:mod:`ttjax.distributed.lifeline`).

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
