"""Multi-process and multi-host ttjax: TT-NN's ``tt-run`` model on ``jax.distributed``.

``ttjax-run --rank-binding config.yaml python prog.py`` starts one process per rank. In each,
``open_mesh_device`` (or :func:`initialize`) joins the job: ranks sharing a ``mesh_id`` form one
big mesh (SPMD), ranks with different ``mesh_id`` s own separate meshes and exchange tensors with
:func:`send` / :func:`recv`.

Public names only; the implementation is :mod:`ttjax._src.launch.distributed`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.launch.distributed import (
    LauncherEnv as LauncherEnv,
    RankBinding as RankBinding,
    RankBindingError as RankBindingError,
    RankBindings as RankBindings,
    current as current,
    descriptor_mesh_sizes as descriptor_mesh_sizes,
    format_rank_table as format_rank_table,
    global_device_ids as global_device_ids,
    initialize as initialize,
    install_launcher_hook as install_launcher_hook,
    is_initialized as is_initialized,
    launcher_env as launcher_env,
    load_rank_bindings as load_rank_bindings,
    mesh_devices as mesh_devices,
    parse_rank_bindings as parse_rank_bindings,
    process_id as process_id,
    recv as recv,
    send as send,
)
from ttjax.distributed import (  # the submodules give their objects a public home
    bindings as bindings,
    lifeline as lifeline,
    p2p as p2p,
    runtime as runtime,
)

_publish(globals(), "ttjax._src.launch.distributed")
