"""MeshDevice: a 2-D (or N-D) grid of JAX devices with TT-NN's names and semantics.

A ``MeshDevice`` wraps an immutable ``jax.sharding.Mesh`` whose axis names are the TT-NN cluster
axes (``"y"`` = rows = cluster_axis 0, ``"x"`` = cols = cluster_axis 1). On a laptop the devices are
XLA host devices (32 by default, see ``ttjax._src.core.config``); on a GPU/TPU host they are the real devices.

>>> import ttjax as ttnn
>>> mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
>>> mesh
<MeshDevice: 2x4 grid, 8 devices>
>>> [m.get_device_ids() for m in mesh.create_submeshes(ttnn.MeshShape(2, 2))]
[[0, 1, 4, 5], [2, 3, 6, 7]]

Public names only; the implementation is :mod:`ttjax._src.core.mesh`.
"""

from ttjax._src.core.mesh import (
    GALAXY as GALAXY,
    N300 as N300,
    SYSTEMS as SYSTEMS,
    T3000 as T3000,
    Arch as Arch,
    Device as Device,
    MeshCoordinate as MeshCoordinate,
    MeshCoordinateRange as MeshCoordinateRange,
    MeshDevice as MeshDevice,
    MeshEvent as MeshEvent,
    MeshShape as MeshShape,
    available_devices as available_devices,
    chip_product as chip_product,
    close_device as close_device,
    close_mesh_device as close_mesh_device,
    create_mesh_device as create_mesh_device,
    default_axis_names as default_axis_names,
    dispatch_cores as dispatch_cores,
    event_synchronize as event_synchronize,
    fabric_setting as fabric_setting,
    get_device_ids as get_device_ids,
    get_num_devices as get_num_devices,
    get_num_pcie_devices as get_num_pcie_devices,
    get_pcie_device_ids as get_pcie_device_ids,
    last_opened_mesh as last_opened_mesh,
    open_device as open_device,
    open_mesh_device as open_mesh_device,
    open_mesh_of_shape as open_mesh_of_shape,
    parse_mesh_shape as parse_mesh_shape,
    record_event as record_event,
    set_device_source as set_device_source,
    synchronize_device as synchronize_device,
    synchronize_devices as synchronize_devices,
    system_mesh_shape as system_mesh_shape,
    wait_for_event as wait_for_event,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.mesh")
