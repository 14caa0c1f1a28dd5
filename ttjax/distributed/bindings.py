"""tt-run's rank-binding YAML: load it as untrusted input and reject every mistake before a rank starts.

>>> b = load_rank_bindings("configs/rank_bindings/2x4_big_mesh.yaml")
>>> [(r.rank, r.mesh_id, r.visible_devices) for r in b.ranks]
[(0, 0, (0, 1, 2, 3)), (1, 0, (4, 5, 6, 7))]

Public names only; the implementation is :mod:`ttjax._src.launch.distributed.bindings`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.launch.distributed.bindings import (
    BINDING_KEYS as BINDING_KEYS,
    MAX_FILE_BYTES as MAX_FILE_BYTES,
    MAX_RANKS as MAX_RANKS,
    TOP_LEVEL_KEYS as TOP_LEVEL_KEYS,
    RankBinding as RankBinding,
    RankBindingError as RankBindingError,
    RankBindings as RankBindings,
    check_descriptor as check_descriptor,
    descriptor_mesh_sizes as descriptor_mesh_sizes,
    load_rank_bindings as load_rank_bindings,
    parse_rank_bindings as parse_rank_bindings,
    parse_visible_devices as parse_visible_devices,
)

_publish(globals(), "ttjax._src.launch.distributed.bindings")
