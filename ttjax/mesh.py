"""MeshDevice: a 2-D (or N-D) grid of JAX devices with TT-NN's names and semantics.

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
