"""What system this is: ``ttnn.cluster.get_cluster_type()``, ``ttnn.get_arch_name()``,
``ttnn.GetNumPCIeDevices()``; the answers model code branches on.

ttjax emulates Tenstorrent's Wormhole systems, so the architecture is ``"wormhole_b0"`` and the
cluster type follows the opened system: the most recently opened mesh that is still open (its
root mesh, for a submesh), else every available device. By device count: 1 is an N150, 2 an
N300, 4 an N300_2x2, 8 a T3K, 32 a Galaxy; other counts are ``INVALID`` (no such Wormhole
product).

>>> import ttjax as ttnn
>>> mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
>>> ttnn.cluster.get_cluster_type()
ClusterType.T3K

Public names only; the implementation is :mod:`ttjax._src.core.cluster`.
"""

from ttjax._src.core.cluster import (
    ClusterType as ClusterType,
    GetNumAvailableDevices as GetNumAvailableDevices,
    GetNumPCIeDevices as GetNumPCIeDevices,
    get_arch_name as get_arch_name,
    get_cluster_type as get_cluster_type,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.cluster")
