"""One ``jax.distributed`` job per ``ttjax-run``: read the launcher's environment and start the runtime.

Each rank calls :func:`initialize` (``open_mesh_device`` does it for you under ``ttjax-run``). It
starts JAX's coordination service client with gloo CPU collectives and a heartbeat timeout, then
tells the core which devices make up this rank's mesh: the devices of every rank sharing its
``TT_MESH_ID``, in the order of their global ``TT_VISIBLE_DEVICES`` ids.

>>> env = ttjax.distributed.initialize()      # under ttjax-run
>>> mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))   # 2 ranks x 4 devices: one big mesh

Public names only; the implementation is :mod:`ttjax._src.launch.distributed.runtime`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.launch.distributed.runtime import (
    DEFAULT_HEARTBEAT_S as DEFAULT_HEARTBEAT_S,
    DEFAULT_INIT_TIMEOUT_S as DEFAULT_INIT_TIMEOUT_S,
    DEFAULT_STOP_GRACE_S as DEFAULT_STOP_GRACE_S,
    ENV_CACHE as ENV_CACHE,
    ENV_COORDINATOR as ENV_COORDINATOR,
    ENV_HEARTBEAT as ENV_HEARTBEAT,
    ENV_INIT_TIMEOUT as ENV_INIT_TIMEOUT,
    ENV_LAUNCHER_PID as ENV_LAUNCHER_PID,
    ENV_MESH_HOST_RANK as ENV_MESH_HOST_RANK,
    ENV_MESH_ID as ENV_MESH_ID,
    ENV_MGD as ENV_MGD,
    ENV_NUM_PROCESSES as ENV_NUM_PROCESSES,
    ENV_PROCESS_ID as ENV_PROCESS_ID,
    ENV_RANK_LOG as ENV_RANK_LOG,
    ENV_RANK_TABLE as ENV_RANK_TABLE,
    ENV_STOP_GRACE as ENV_STOP_GRACE,
    ENV_VISIBLE as ENV_VISIBLE,
    LauncherEnv as LauncherEnv,
    current as current,
    format_rank_table as format_rank_table,
    global_device_ids as global_device_ids,
    initialize as initialize,
    install_launcher_hook as install_launcher_hook,
    is_initialized as is_initialized,
    launcher_env as launcher_env,
    mesh_devices as mesh_devices,
    process_id as process_id,
)

_publish(globals(), "ttjax._src.launch.distributed.runtime")
