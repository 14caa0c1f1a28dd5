"""TT-NN's device-level python API (``ttnn/ttnn/device.py``): the user-facing
``DispatchCoreConfig``, the default-device slot, the architecture tests and the profiler read.

What tt-metal's own test fixtures (its top-level ``conftest.py``) call before opening a mesh.
Dispatch cores only place TT-Metal's command processors, so the config is validated and defaulted
as TT-NN does, and changes no numbers.

>>> import ttjax as ttnn
>>> ttnn.DispatchCoreConfig(ttnn.DispatchCoreType.WORKER)
DispatchCoreConfig(type=DispatchCoreType.WORKER, axis=DispatchCoreAxis.ROW)
>>> ttnn.device.is_wormhole_b0()
True

Public names only; the implementation is :mod:`ttjax._src.core.device`.
"""

from ttjax._src.core.device import (
    DEFAULT_L1_SMALL_SIZE as DEFAULT_L1_SMALL_SIZE,
    DEFAULT_TRACE_REGION_SIZE as DEFAULT_TRACE_REGION_SIZE,
    DEFAULT_WORKER_L1_SIZE as DEFAULT_WORKER_L1_SIZE,
    CreateDevice as CreateDevice,
    DispatchCoreConfig as DispatchCoreConfig,
    GetDefaultDevice as GetDefaultDevice,
    GetPCIeDeviceID as GetPCIeDeviceID,
    ReadDeviceProfiler as ReadDeviceProfiler,
    SetDefaultDevice as SetDefaultDevice,
    SystemMeshDescriptor as SystemMeshDescriptor,
    get_default_dispatch_core_axis as get_default_dispatch_core_axis,
    get_default_dispatch_core_type as get_default_dispatch_core_type,
    is_blackhole as is_blackhole,
    is_grayskull as is_grayskull,
    is_wormhole_b0 as is_wormhole_b0,
    using_distributed_env as using_distributed_env,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.device")
