"""TT-NN's host-side objects for overlapping work on a chip: sub-devices, global semaphores, global CBs.

On hardware these partition a chip's worker cores (``SubDevice``), let CCL kernels synchronize
across chips (``GlobalSemaphore``) and stream weights between cores (``GlobalCircularBuffer``).
XLA schedules and synchronizes the collectives itself, so here they are host objects that are
checked the way TT-Metal checks them: a sub-device's cores lie inside the grid and do not overlap
another's, a ``SubDeviceId`` passed to an op exists in the loaded manager, a semaphore belongs to
the mesh it is used on.

>>> cores = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 7))})
>>> sems = [ttnn.create_global_semaphore(mesh, cores, 0) for _ in range(2)]
>>> manager = mesh.create_sub_device_manager([ttnn.SubDevice([cores])], 0)
>>> mesh.load_sub_device_manager(manager)
>>> mesh.get_sub_device_ids()
[SubDeviceId(0)]
>>> mesh.clear_loaded_sub_device_manager()

Public names only; the implementation is :mod:`ttjax._src.core.subdevice`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.core.subdevice import (
    L1_ALIGNMENT as L1_ALIGNMENT,
    MAX_NUM_SUB_DEVICES as MAX_NUM_SUB_DEVICES,
    GlobalCircularBuffer as GlobalCircularBuffer,
    GlobalSemaphore as GlobalSemaphore,
    SubDevice as SubDevice,
    SubDeviceId as SubDeviceId,
    SubDeviceManagerId as SubDeviceManagerId,
    SubDeviceManagerTracker as SubDeviceManagerTracker,
    create_global_circular_buffer as create_global_circular_buffer,
    create_global_semaphore as create_global_semaphore,
    get_global_semaphore_address as get_global_semaphore_address,
    reset_global_semaphore_value as reset_global_semaphore_value,
)

_publish(globals(), "ttjax._src.core.subdevice")
