"""TT-NN's device-level python API (``ttnn/ttnn/device.py``): the user-facing
``DispatchCoreConfig``, the default-device slot, the architecture tests and the profiler read.

The implementation of :mod:`ttjax.device`, whose docstring says more.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ttjax._src.core import cluster as _cluster
from ttjax._src.core.errors import ConfigError, DeviceClosedError, MeshShapeError
from ttjax._src.core.fabric import FabricTensixConfig
from ttjax._src.core.hardware import DispatchCoreAxis, DispatchCoreType
from ttjax._src.core.mesh import (
    Arch,
    MeshCoordinate,
    MeshDevice,
    MeshShape,
    available_devices,
    get_device_ids,
    open_mesh_device,
    synchronize_device,
    system_mesh_shape,
)

# TT-Metal's defaults (tt_metal/hostdevcommon/.../common_values.hpp): bytes of L1 for small
# buffers, of DRAM for traces, and of worker L1 (0: the whole unreserved L1)
DEFAULT_L1_SMALL_SIZE = 0
DEFAULT_TRACE_REGION_SIZE = 0
DEFAULT_WORKER_L1_SIZE = 0

# Clusters whose dispatch runs on Ethernet cores by default (TT-NN's get_default_dispatch_core_type)
_ETH_DISPATCH = (_cluster.ClusterType.N300, _cluster.ClusterType.T3K, _cluster.ClusterType.N300_2x2)


def is_wormhole_b0(device: Any = None) -> bool:
    """Whether ``device`` (default: the system) is a Wormhole B0; ttjax emulates Wormhole B0."""
    if device is not None:
        return bool(device.arch() == Arch.WORMHOLE_B0)
    return "wormhole_b0" in _cluster.get_arch_name()


def is_grayskull(device: Any = None) -> bool:
    """Whether ``device`` (default: the system) is a Grayskull."""
    if device is not None:
        return bool(device.arch() == Arch.GRAYSKULL)
    return "grayskull" in _cluster.get_arch_name()


def is_blackhole(device: Any = None) -> bool:
    """Whether ``device`` (default: the system) is a Blackhole."""
    if device is not None:
        return bool(device.arch() == Arch.BLACKHOLE)
    return "blackhole" in _cluster.get_arch_name()


def get_default_dispatch_core_type() -> DispatchCoreType:
    """ETH on N300, T3K and N300_2x2 clusters, WORKER elsewhere (TT-NN's rule)."""
    if _cluster.get_cluster_type() in _ETH_DISPATCH:
        return DispatchCoreType.ETH
    return DispatchCoreType.WORKER


def get_default_dispatch_core_axis(fabric_tensix_config: Any = None) -> DispatchCoreAxis:
    """COL on Blackhole unless the fabric uses the tensix MUX (then ROW); ROW elsewhere."""
    if is_blackhole():
        if fabric_tensix_config == FabricTensixConfig.MUX:
            return DispatchCoreAxis.ROW
        return DispatchCoreAxis.COL
    return DispatchCoreAxis.ROW


def _bad(what: str, value: Any, enum_type: type[Any]) -> ConfigError:
    valid = [f"{enum_type.__name__}.{m.name}" for m in enum_type]
    return ConfigError(
        f"Invalid dispatch core {what}: {value!r}. Valid values are: {valid}\n"
        f"fix: pass a ttnn.{enum_type.__name__} member (or None for the system's default)."
    )


class DispatchCoreConfig:
    """Where TT-Metal's dispatch runs: ``DispatchCoreConfig(type=None, axis=None,
    fabric_tensix_config=None)``, positional or keyword. Validates as TT-NN does and fills a
    missing type/axis with the system's default (T3K: ETH, ROW)."""

    __slots__ = ("_type_defaulted", "axis", "type")

    def __init__(
        self,
        type: DispatchCoreType | None = None,
        axis: DispatchCoreAxis | None = None,
        fabric_tensix_config: Any = None,
    ) -> None:
        if type is not None and not isinstance(type, DispatchCoreType):
            raise _bad("type", type, DispatchCoreType)
        if axis is not None and not isinstance(axis, DispatchCoreAxis):
            raise _bad("axis", axis, DispatchCoreAxis)
        if type is DispatchCoreType.ETH and axis is DispatchCoreAxis.COL:
            raise ConfigError(
                "COL axis is not supported for ETH dispatch core type\n"
                "fix: use DispatchCoreAxis.ROW with ETH, or DispatchCoreType.WORKER with COL."
            )
        if (
            axis is DispatchCoreAxis.ROW
            and is_blackhole()
            and fabric_tensix_config != FabricTensixConfig.MUX
        ):
            raise ConfigError(
                "ROW dispatch core axis is not supported for blackhole arch unless fabric tensix "
                "MUX is enabled\nfix: use DispatchCoreAxis.COL, or FabricTensixConfig.MUX."
            )
        # ttjax's "system" is the mesh opened with this config: a defaulted type is re-derived
        # for that mesh's chips when it opens (ttjax.mesh.dispatch_cores).
        self._type_defaulted = type is None and axis is not DispatchCoreAxis.COL
        if type is None and axis is DispatchCoreAxis.COL:
            type = DispatchCoreType.WORKER  # COL is only supported on WORKER dispatch cores
        elif type is None:
            type = get_default_dispatch_core_type()
        if axis is None:
            axis = get_default_dispatch_core_axis(fabric_tensix_config)
        self.type: DispatchCoreType = type
        self.axis: DispatchCoreAxis = axis

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DispatchCoreConfig):
            return NotImplemented
        return (self.type, self.axis) == (other.type, other.axis)

    def __hash__(self) -> int:
        return hash((self.type, self.axis))

    def __repr__(self) -> str:
        return f"DispatchCoreConfig(type={self.type}, axis={self.axis})"


class SystemMeshDescriptor:
    """The whole system's mesh (TT-NN's ``ttnn._ttnn.multi_device.SystemMeshDescriptor``): its
    shape, this host's part of it, and which device sits at a coordinate."""

    __slots__ = ("_shape",)

    def __init__(self) -> None:
        self._shape = system_mesh_shape()

    def shape(self) -> MeshShape:
        """The system mesh's shape (T3000: 2x4, Galaxy: 8x4)."""
        return self._shape

    def local_shape(self) -> MeshShape:
        """This host's part of the system mesh: all of it unless the run spans several hosts."""
        dims = tuple(self._shape)
        devices = available_devices()[: int(np.prod(dims))]
        local = [i for i, d in enumerate(devices) if d.process_index == jax.process_index()]
        coords = np.array(np.unravel_index(local, dims)).T
        return MeshShape(*(int(n) for n in coords.max(axis=0) - coords.min(axis=0) + 1))

    def all_local(self) -> bool:
        """Whether every device of the system is driven by this host."""
        return bool(jax.process_count() == 1)

    def is_local(self, coord: Any) -> bool:
        """Whether the device at ``coord`` is driven by this host."""
        return bool(self._device_at(coord).process_index == jax.process_index())

    def get_device_id(self, coord: Any) -> int:
        """The device id at ``coord`` of the system mesh (row-major)."""
        return int(self._device_at(coord).id)

    def _device_at(self, coord: Any) -> Any:
        c = tuple(MeshCoordinate(coord)) if not isinstance(coord, MeshCoordinate) else tuple(coord)
        dims = tuple(self._shape)
        if len(c) != len(dims) or any(not 0 <= i < n for i, n in zip(c, dims)):
            raise MeshShapeError(
                f"SystemMeshDescriptor: coordinate {list(c)} is outside the system mesh "
                f"{self._shape!r}.\nfix: pass a coordinate within the system mesh shape."
            )
        flat = int(np.ravel_multi_index(c, dims))
        return available_devices()[flat]

    def __repr__(self) -> str:
        return f"SystemMeshDescriptor(shape={self._shape!r})"


def GetPCIeDeviceID(device_id: int) -> int:
    """The PCIe-attached chip through which ``device_id`` is reached: itself for a PCIe chip,
    else its card partner (TT-Metal numbers a T3000's N300 cards so chips i and i + 4 share one;
    every Galaxy chip has its own link)."""
    ids = get_device_ids()
    if device_id not in ids:
        raise ConfigError(
            f"GetPCIeDeviceID: device_id={device_id!r} is not a device of this system "
            f"(device ids {ids}).\nfix: pass one of ttnn.get_device_ids()."
        )
    return int(device_id) % _cluster.GetNumPCIeDevices()


def CreateDevice(
    device_id: int,
    num_command_queues: int = 1,
    l1_small_size: int = DEFAULT_L1_SMALL_SIZE,
    trace_region_size: int = DEFAULT_TRACE_REGION_SIZE,
    dispatch_core_config: DispatchCoreConfig | None = None,
    *,
    worker_l1_size: int = DEFAULT_WORKER_L1_SIZE,
) -> MeshDevice:
    """Open one device (TT-NN's ``ttnn.CreateDevice``): a 1x1 mesh, as ``ttnn.open_device``.

    L1 sizes, the trace region and the dispatch cores place TT-Metal's buffers and kernels on
    the chip; they are checked for type and change no numbers here.
    """
    if num_command_queues not in (1, 2):
        raise ConfigError(
            f"CreateDevice: num_command_queues={num_command_queues!r}; TT-Metal has 1 or 2 "
            "hardware command queues.\nfix: pass 1 or 2."
        )
    if dispatch_core_config is not None and not isinstance(
        dispatch_core_config, DispatchCoreConfig
    ):
        raise ConfigError(
            f"CreateDevice: dispatch_core_config={dispatch_core_config!r} is not a "
            "ttnn.DispatchCoreConfig.\nfix: pass ttnn.DispatchCoreConfig(type, axis) or None."
        )
    return open_mesh_device(
        MeshShape(1, 1),
        l1_small_size=l1_small_size,
        trace_region_size=trace_region_size,
        num_command_queues=num_command_queues,
        dispatch_core_config=dispatch_core_config or DispatchCoreConfig(),
        physical_device_ids=[device_id],
        worker_l1_size=worker_l1_size,
    )


_default_device: MeshDevice | None = None


def SetDefaultDevice(device: MeshDevice | None) -> None:
    """Set the device TT-NN's auto-format path uses for inputs not on a device (None clears it)."""
    global _default_device
    if device is not None and not isinstance(device, MeshDevice):
        raise ConfigError(
            f"SetDefaultDevice: {device!r} is not a ttnn.MeshDevice.\n"
            "fix: pass a mesh from ttnn.open_mesh_device / ttnn.open_device, or None."
        )
    _default_device = device


def GetDefaultDevice() -> MeshDevice | None:
    """The device set by ``SetDefaultDevice`` (None until one is set, as TT-NN)."""
    return _default_device


def using_distributed_env() -> bool:
    """Whether this program is one of several processes of a distributed (multi-host) run."""
    return jax.process_count() > 1


def ReadDeviceProfiler(device: MeshDevice) -> None:
    """TT-NN reads the device-side profiler buffers into its host profiler log (a dump, with
    nothing to dump unless TT-Metal is built with its profiler). ttjax has no device-side
    profiler buffers: this waits for the device's queued work, as the read does, and returns.
    Timings come from JAX's profiler (``jax.profiler``)."""
    if not isinstance(device, MeshDevice):
        raise ConfigError(
            f"ReadDeviceProfiler: device={device!r} is not a ttnn.MeshDevice.\n"
            "fix: pass the mesh whose profile to read."
        )
    if device._closed:
        raise DeviceClosedError(
            f"ReadDeviceProfiler: mesh {device.shape} is closed.\n"
            "fix: read the profiler before ttnn.close_mesh_device."
        )
    synchronize_device(device)


__all__ = [
    "DEFAULT_L1_SMALL_SIZE",
    "DEFAULT_TRACE_REGION_SIZE",
    "DEFAULT_WORKER_L1_SIZE",
    "CreateDevice",
    "DispatchCoreConfig",
    "GetDefaultDevice",
    "GetPCIeDeviceID",
    "ReadDeviceProfiler",
    "SetDefaultDevice",
    "SystemMeshDescriptor",
    "get_default_dispatch_core_axis",
    "get_default_dispatch_core_type",
    "is_blackhole",
    "is_grayskull",
    "is_wormhole_b0",
    "using_distributed_env",
]
