"""What system this is: ``ttnn.cluster.get_cluster_type()``, ``ttnn.get_arch_name()``,
``ttnn.GetNumPCIeDevices()``; the answers model code branches on.

The implementation of :mod:`ttjax.cluster`, whose docstring says more.
"""

from __future__ import annotations

import enum

from ttjax._src.core import mesh as _mesh


class ClusterType(enum.Enum):
    """TT-Metal's ``ClusterType`` (tt_metal/api/tt-metalium/cluster.hpp), same names and values."""

    INVALID = 0
    N150 = 1
    N300 = 2
    T3K = 3
    GALAXY = 4
    TG = 5
    P100 = 6
    P150 = 7
    P150_X2 = 8
    P150_X4 = 9
    SIMULATOR_WORMHOLE_B0 = 10
    SIMULATOR_BLACKHOLE = 11
    N300_2x2 = 12
    P150_X8 = 13
    P300 = 14
    SIMULATOR_QUASAR = 15
    BLACKHOLE_GALAXY = 16
    P300_X2 = 17

    def __repr__(self) -> str:
        return f"ClusterType.{self.name}"


_BY_COUNT = {
    1: ClusterType.N150,
    2: ClusterType.N300,
    4: ClusterType.N300_2x2,
    8: ClusterType.T3K,
    32: ClusterType.GALAXY,
}

# Chips with their own PCIe link: one per N150/N300 card, every chip of a Galaxy.
_PCIE = {
    ClusterType.N150: 1,
    ClusterType.N300: 1,
    ClusterType.N300_2x2: 2,
    ClusterType.T3K: 4,
    ClusterType.GALAXY: 32,
}


def _system_devices() -> int:
    opened = _mesh.last_opened_mesh()
    if opened is not None:
        return opened.get_num_devices()
    return _mesh.get_num_devices()


def get_cluster_type() -> ClusterType:
    """The cluster type of the opened system (see the module docstring)."""
    return _BY_COUNT.get(_system_devices(), ClusterType.INVALID)


def get_arch_name() -> str:
    """The chip architecture ttjax emulates: ``"wormhole_b0"`` (N150, N300, T3K and Galaxy),
    the name of ``mesh_device.arch()``."""
    return _mesh.Arch.WORMHOLE_B0.value


def GetNumPCIeDevices() -> int:
    """PCIe-attached chips of the opened system: 1 per N150/N300 card (4 on a T3K), 32 on a Galaxy."""
    kind = get_cluster_type()
    return _PCIE.get(kind, _system_devices())


def GetNumAvailableDevices() -> int:
    """Devices a mesh can open (TT-NN's ``ttnn.GetNumAvailableDevices``)."""
    return _mesh.get_num_devices()


__all__ = [
    "ClusterType",
    "GetNumAvailableDevices",
    "GetNumPCIeDevices",
    "get_arch_name",
    "get_cluster_type",
]
