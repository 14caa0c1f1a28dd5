"""Multi-process and multi-host ttjax: TT-NN's ``tt-run`` model on ``jax.distributed``.

The implementation of :mod:`ttjax.distributed`, whose docstring says more.
"""

from ttjax._src.launch.distributed.bindings import (
    RankBinding,
    RankBindingError,
    RankBindings,
    descriptor_mesh_sizes,
    load_rank_bindings,
    parse_rank_bindings,
)
from ttjax._src.launch.distributed.p2p import recv, send
from ttjax._src.launch.distributed.runtime import (
    LauncherEnv,
    current,
    format_rank_table,
    global_device_ids,
    initialize,
    install_launcher_hook,
    is_initialized,
    launcher_env,
    mesh_devices,
    process_id,
)

__all__ = [
    "LauncherEnv",
    "RankBinding",
    "RankBindingError",
    "RankBindings",
    "current",
    "descriptor_mesh_sizes",
    "format_rank_table",
    "global_device_ids",
    "initialize",
    "install_launcher_hook",
    "is_initialized",
    "launcher_env",
    "load_rank_bindings",
    "mesh_devices",
    "parse_rank_bindings",
    "process_id",
    "recv",
    "send",
]
