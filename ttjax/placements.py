"""Placements: how a mesh tensor's per-device data relates along one mesh axis.

One placement per mesh axis (placement ``i`` is about mesh dimension ``i``, TT-NN's cluster_axis):

=====================  =======================================================================
``PlacementShard(d)``  devices along the axis hold consecutive slices of tensor dim ``d``
``PlacementReplicate``  devices along the axis hold identical values
``PlacementLocal``     devices along the axis hold their own values (partial sums, per-device
                       results); stored on a hidden leading axis of the global array
=====================  =======================================================================

Two axes may shard the same tensor dim: ``(PlacementShard(3), PlacementShard(3))`` on a 2x4 mesh
splits dim 3 into 8 pieces in row-major device order (axis 0 major), exactly how TT-NN's
``ShardTensorToMesh(mesh, dim=3)`` lays a tensor over a 2-D mesh.

>>> PlacementShard(3), PlacementReplicate()
(PlacementShard(3), PlacementReplicate())
>>> str(PlacementShard(3))
'S(3)'

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
