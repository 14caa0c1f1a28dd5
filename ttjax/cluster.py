"""What system this is: ``ttnn.cluster.get_cluster_type()``, ``ttnn.get_arch_name()``,
``ttnn.GetNumPCIeDevices()``; the answers model code branches on.

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
