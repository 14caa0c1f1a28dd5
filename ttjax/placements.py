"""Placements: how a mesh tensor's per-device data relates along one mesh axis.

Public names only; the implementation is :mod:`ttjax._src.core.placements`.
"""

from ttjax._src.core.placements import (
    LOCAL as LOCAL,
    REPLICATE as REPLICATE,
    Placement as Placement,
    PlacementLocal as PlacementLocal,
    PlacementReplicate as PlacementReplicate,
    PlacementShard as PlacementShard,
    placements_str as placements_str,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.placements")
