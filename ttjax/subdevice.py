"""TT-NN's host-side objects for overlapping work on a chip: sub-devices, global semaphores, global CBs.

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
