"""TT-NN's host-side objects for overlapping work on a chip: sub-devices, global semaphores, global CBs.

The implementation of :mod:`ttjax.subdevice`, whose docstring says more.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ttjax._src.core.errors import SubDeviceError
from ttjax._src.core.hardware import BufferType, CoreCoord, CoreRange, CoreRangeSet

# TT-Metal's limits: DispatchSettings::DISPATCH_MESSAGE_ENTRIES sub-devices per manager, L1
# allocations aligned to 16 bytes, and the first L1 address free for user buffers on Wormhole.
MAX_NUM_SUB_DEVICES = 16
L1_ALIGNMENT = 16
_L1_BASE = 0x19000


def _is_uint(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and int(x) >= 0


def _cores(what: str, crs: Any) -> frozenset[tuple[int, int]]:
    """The (x, y) cores a ``CoreRangeSet`` covers."""
    if not isinstance(crs, CoreRangeSet):
        raise SubDeviceError(
            f"{what}={crs!r} is not a ttnn.CoreRangeSet.\n"
            "fix: ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 7))})."
        )
    out: set[tuple[int, int]] = set()
    for r in crs.ranges():
        if not isinstance(r, CoreRange):
            raise SubDeviceError(
                f"{what}: {r!r} is not a ttnn.CoreRange.\nfix: build the set from ttnn.CoreRange."
            )
        if r.end.x < r.start.x or r.end.y < r.start.y:
            raise SubDeviceError(
                f"{what}: {r!r} ends before it starts.\nfix: CoreRange(start, end) with start <= end."
            )
        out.update(
            (x, y) for x in range(r.start.x, r.end.x + 1) for y in range(r.start.y, r.end.y + 1)
        )
    return frozenset(out)


def _check_in_grid(what: str, cores: frozenset[tuple[int, int]], grid: CoreCoord) -> None:
    outside = sorted(c for c in cores if not (0 <= c[0] < grid.x and 0 <= c[1] < grid.y))
    if outside:
        raise SubDeviceError(
            f"{what}: Tensix cores {outside[:4]}{'...' if len(outside) > 4 else ''} specified in "
            f"sub device must be within device grid {grid!r}.\n"
            f"fix: use cores from CoreCoord(0, 0) to CoreCoord({grid.x - 1}, {grid.y - 1}) "
            "(mesh_device.compute_with_storage_grid_size())."
        )


def _grid(mesh_device: Any) -> CoreCoord:
    g = mesh_device.compute_with_storage_grid_size()
    return CoreCoord(int(g.x), int(g.y))


def _full_grid(grid: CoreCoord) -> CoreRangeSet:
    return CoreRangeSet({CoreRange(CoreCoord(0, 0), CoreCoord(grid.x - 1, grid.y - 1))})


# ---------------------------------------------------------------------------------------------
# Sub-devices
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubDeviceId:
    """Index of a sub-device in the loaded sub-device manager (``ttnn.SubDeviceId(0)``)."""

    id: int

    def __post_init__(self) -> None:
        if not _is_uint(self.id) or self.id > 255:
            raise SubDeviceError(
                f"SubDeviceId({self.id!r}): the id must be an int in [0, 255].\n"
                "fix: ttnn.SubDeviceId(0) for the first sub-device."
            )

    def __repr__(self) -> str:
        return f"SubDeviceId({self.id})"


@dataclass(frozen=True)
class SubDeviceManagerId:
    """Handle of a sub-device manager created on a mesh."""

    id: int

    def __repr__(self) -> str:
        return f"SubDeviceManagerId({self.id})"


class SubDevice:
    """A group of worker cores, one ``CoreRangeSet`` per core type (Tensix, then Ethernet)."""

    def __init__(self, cores: Sequence[Any]) -> None:
        if isinstance(cores, CoreRangeSet) or not isinstance(cores, Sequence):
            raise SubDeviceError(
                f"SubDevice(cores={cores!r}): cores must be a list of CoreRangeSet.\n"
                "fix: ttnn.SubDevice([tensix_core_range_set])."
            )
        if len(cores) > 3:
            raise SubDeviceError(
                f"SubDevice: Too many core types for SubDevice ({len(cores)} core range sets).\n"
                "fix: pass at most [tensix_cores, ethernet_cores]."
            )
        sets = [_cores("SubDevice cores", c) for c in cores]
        if len(sets) == 3 and sets[2]:
            raise SubDeviceError(
                "SubDevice: CoreType IDLE_ETH is not allowed in SubDevice.\n"
                "fix: pass [tensix_cores] or [tensix_cores, ethernet_cores]."
            )
        self.cores: tuple[CoreRangeSet, ...] = tuple(cores)
        self._tensix = sets[0] if sets else frozenset()
        self._eth = sets[1] if len(sets) > 1 else frozenset()

    def __repr__(self) -> str:
        return f"SubDevice({list(self.cores)!r})"


class SubDeviceManagerTracker:
    """The sub-device managers of one mesh: the default one (all cores, one sub-device), the ones
    created by ``create_sub_device_manager``, which is loaded, and the stall group."""

    def __init__(self, grid: CoreCoord) -> None:
        self.grid = grid
        self.default = SubDeviceManagerId(0)
        self._managers: dict[SubDeviceManagerId, tuple[SubDevice, ...]] = {
            self.default: (SubDevice([_full_grid(grid)]),)
        }
        self._next = itertools.count(1)
        self.active = self.default
        self.stall_group: tuple[SubDeviceId, ...] = ()
        self._next_l1 = _L1_BASE

    @property
    def sub_devices(self) -> tuple[SubDevice, ...]:
        return self._managers[self.active]

    def create(self, sub_devices: Any, local_l1_size: Any) -> SubDeviceManagerId:
        op = "create_sub_device_manager"
        if not isinstance(sub_devices, Sequence) or not all(
            isinstance(s, SubDevice) for s in sub_devices
        ):
            raise SubDeviceError(
                f"{op}: sub_devices={sub_devices!r} is not a list of ttnn.SubDevice.\n"
                "fix: mesh_device.create_sub_device_manager([ttnn.SubDevice([cores])], 0)."
            )
        if not _is_uint(local_l1_size):
            raise SubDeviceError(
                f"{op}: local_l1_size={local_l1_size!r} is not a byte count.\nfix: e.g. 0."
            )
        if int(local_l1_size) % L1_ALIGNMENT:
            raise SubDeviceError(
                f"{op}: local_l1_size={local_l1_size}: Reserved size must be aligned to allocator "
                f"L1 alignment {L1_ALIGNMENT}.\nfix: round it up to a multiple of {L1_ALIGNMENT}."
            )
        if len(sub_devices) > MAX_NUM_SUB_DEVICES:
            raise SubDeviceError(
                f"{op}: Number of sub-devices specified {len(sub_devices)} is larger than the max "
                f"number of sub-devices {MAX_NUM_SUB_DEVICES}.\nfix: merge some sub-devices."
            )
        for s in sub_devices:
            _check_in_grid(op, s._tensix, self.grid)
        for (i, a), (j, b) in itertools.combinations(enumerate(sub_devices), 2):
            if a._tensix & b._tensix or a._eth & b._eth:
                shared = sorted((a._tensix & b._tensix) | (a._eth & b._eth))
                raise SubDeviceError(
                    f"{op}: SubDevices specified for SubDeviceManager intersect: sub-devices {i} "
                    f"and {j} share cores {shared[:4]}.\nfix: give each sub-device its own cores."
                )
        mid = SubDeviceManagerId(next(self._next))
        self._managers[mid] = tuple(sub_devices)
        return mid

    def _lookup(self, op: str, manager_id: Any) -> SubDeviceManagerId:
        if not isinstance(manager_id, SubDeviceManagerId) or manager_id not in self._managers:
            known = sorted(m.id for m in self._managers)
            raise SubDeviceError(
                f"{op}: Sub device manager {manager_id!r} does not exist on this mesh (managers "
                f"{known}).\nfix: pass the id that mesh_device.create_sub_device_manager returned."
            )
        return manager_id

    def load(self, manager_id: Any) -> None:
        self.active = self._lookup("load_sub_device_manager", manager_id)
        self.stall_group = ()

    def clear_loaded(self) -> None:
        self.active = self.default
        self.stall_group = ()

    def remove(self, manager_id: Any) -> None:
        op = "remove_sub_device_manager"
        mid = self._lookup(op, manager_id)
        if mid == self.default:
            raise SubDeviceError(
                f"{op}: Cannot remove default sub device manager {mid.id}.\n"
                "fix: remove only managers you created."
            )
        if mid == self.active:
            raise SubDeviceError(
                f"{op}: Cannot remove active sub device manager {mid.id}.\n"
                "fix: call mesh_device.clear_loaded_sub_device_manager() first."
            )
        del self._managers[mid]

    def check_id(self, op: str, sub_device_id: Any, name: str = "subdevice_id") -> SubDeviceId:
        """``sub_device_id`` as a ``SubDeviceId`` of the loaded manager; raises otherwise."""
        if not isinstance(sub_device_id, SubDeviceId):
            raise SubDeviceError(
                f"ttnn.{op}: {name}={sub_device_id!r} is not a ttnn.SubDeviceId.\n"
                "fix: e.g. ttnn.SubDeviceId(0)."
            )
        n = len(self.sub_devices)
        if sub_device_id.id >= n:
            raise SubDeviceError(
                f"ttnn.{op}: {name}={sub_device_id!r}: SubDevice index {sub_device_id.id} out of "
                f"bounds {n} (sub-device manager {self.active.id} is loaded).\n"
                f"fix: use an id in {[SubDeviceId(i) for i in range(n)]}, or load the sub-device "
                "manager that defines it."
            )
        return sub_device_id

    def set_stall_group(self, sub_device_ids: Any) -> None:
        op = "set_sub_device_stall_group"
        if not isinstance(sub_device_ids, Sequence) or not sub_device_ids:
            raise SubDeviceError(
                f"{op}: sub_device_ids={sub_device_ids!r}: sub_device_ids to stall must not be "
                "empty.\nfix: e.g. [ttnn.SubDeviceId(0)]."
            )
        self.stall_group = tuple(self.check_id(op, s, "sub_device_ids") for s in sub_device_ids)

    def ids(self) -> list[SubDeviceId]:
        return [SubDeviceId(i) for i in range(len(self.sub_devices))]

    def allocate_l1(self, nbytes: int) -> int:
        """A fresh L1 address on every chip of the mesh (aligned like TT-Metal's allocator)."""
        addr = self._next_l1
        self._next_l1 += -(-max(nbytes, 1) // L1_ALIGNMENT) * L1_ALIGNMENT
        return addr


# ---------------------------------------------------------------------------------------------
# Global semaphores and circular buffers
# ---------------------------------------------------------------------------------------------


def _check_mesh(op: str, mesh_device: Any) -> Any:
    if not hasattr(mesh_device, "_sub_devices"):
        raise SubDeviceError(
            f"ttnn.{op}: mesh_device={mesh_device!r} is not a ttnn.MeshDevice.\n"
            "fix: pass the mesh from ttnn.open_mesh_device(...)."
        )
    mesh_device._check_open()
    return mesh_device


def _check_buffer_type(op: str, buffer_type: Any) -> BufferType:
    if buffer_type not in (BufferType.L1, BufferType.L1_SMALL):
        raise SubDeviceError(
            f"ttnn.{op}: buffer_type={buffer_type!r}: {op.split('_', 1)[1].replace('_', ' ')} "
            "can only be created for L1 buffer types.\nfix: ttnn.BufferType.L1."
        )
    return buffer_type


class GlobalSemaphore:
    """A semaphore on ``cores`` of every chip of one mesh; CCL kernels sync through it on hardware.

    It is bound to its mesh: a collective on another mesh's tensor refuses it.
    """

    def __init__(
        self, mesh_device: Any, cores: Any, initial_value: int, buffer_type: BufferType
    ) -> None:
        self.mesh_device = mesh_device
        self.cores = cores
        self.value = int(initial_value)
        self.buffer_type = buffer_type
        self.address = mesh_device._sub_devices.allocate_l1(4)

    def __repr__(self) -> str:
        return (
            f"GlobalSemaphore(mesh={self.mesh_device!r}, address={self.address:#x}, "
            f"value={self.value})"
        )


def create_global_semaphore(
    mesh_device: Any,
    cores: CoreRangeSet,
    initial_value: int,
    buffer_type: BufferType = BufferType.L1,
) -> GlobalSemaphore:
    """A semaphore on ``cores`` of every chip of ``mesh_device``, starting at ``initial_value``.

    >>> sem = ttnn.create_global_semaphore(mesh, ttnn.CoreRangeSet({ttnn.CoreRange(
    ...     ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 7))}), 0)
    """
    op = "create_global_semaphore"
    mesh = _check_mesh(op, mesh_device)
    _check_in_grid(op, _cores(f"ttnn.{op}: cores", cores), _grid(mesh))
    if not _is_uint(initial_value) or int(initial_value) >= 2**32:
        raise SubDeviceError(
            f"ttnn.{op}: initial_value={initial_value!r} is not a uint32.\nfix: e.g. 0."
        )
    return GlobalSemaphore(mesh, cores, int(initial_value), _check_buffer_type(op, buffer_type))


def _check_semaphore(op: str, sem: Any) -> GlobalSemaphore:
    if not isinstance(sem, GlobalSemaphore):
        raise SubDeviceError(
            f"ttnn.{op}: global_semaphore={sem!r} is not a GlobalSemaphore.\n"
            "fix: create it with ttnn.create_global_semaphore(mesh_device, cores, 0)."
        )
    return sem


def reset_global_semaphore_value(global_semaphore: GlobalSemaphore, reset_value: int) -> None:
    """Set the semaphore's value on every chip (TT-NN does this between traced iterations)."""
    op = "reset_global_semaphore_value"
    sem = _check_semaphore(op, global_semaphore)
    if not _is_uint(reset_value) or int(reset_value) >= 2**32:
        raise SubDeviceError(
            f"ttnn.{op}: reset_value={reset_value!r} is not a uint32.\nfix: e.g. 0."
        )
    sem.mesh_device._check_open()
    sem.value = int(reset_value)


def get_global_semaphore_address(global_semaphore: GlobalSemaphore) -> int:
    """The semaphore's L1 address (the same on every chip of its mesh)."""
    return _check_semaphore("get_global_semaphore_address", global_semaphore).address


class GlobalCircularBuffer:
    """A circular buffer from each sender core to its receiver cores, on every chip of one mesh."""

    def __init__(
        self, mesh_device: Any, mapping: tuple[tuple[CoreCoord, Any], ...], size: int, bt: Any
    ) -> None:
        self.mesh_device = mesh_device
        self.sender_receiver_core_mapping = mapping
        self.size = size
        self.buffer_type = bt
        self.address = mesh_device._sub_devices.allocate_l1(size)

    def __repr__(self) -> str:
        return (
            f"GlobalCircularBuffer(mesh={self.mesh_device!r}, senders="
            f"{len(self.sender_receiver_core_mapping)}, size={self.size})"
        )


def create_global_circular_buffer(
    mesh_device: Any,
    sender_receiver_core_mapping: Sequence[tuple[CoreCoord, CoreRangeSet]],
    size: int,
    buffer_type: BufferType = BufferType.L1,
) -> GlobalCircularBuffer:
    """A global CB of ``size`` bytes per core: each sender core streams to its receiver cores."""
    op = "create_global_circular_buffer"
    mesh = _check_mesh(op, mesh_device)
    grid = _grid(mesh)
    if not isinstance(sender_receiver_core_mapping, Sequence):
        raise SubDeviceError(
            f"ttnn.{op}: sender_receiver_core_mapping={sender_receiver_core_mapping!r} is not a "
            "list of (CoreCoord, CoreRangeSet).\nfix: list(zip(sender_cores, receiver_core_sets))."
        )
    senders: list[tuple[int, int]] = []
    receivers: list[tuple[int, int]] = []
    for pair in sender_receiver_core_mapping:
        if not (isinstance(pair, Sequence) and len(pair) == 2 and isinstance(pair[0], CoreCoord)):
            raise SubDeviceError(
                f"ttnn.{op}: mapping entry {pair!r} is not (CoreCoord, CoreRangeSet).\n"
                "fix: list(zip(sender_cores, receiver_core_sets))."
            )
        senders.append((pair[0].x, pair[0].y))
        receivers.extend(_cores(f"ttnn.{op}: receivers", pair[1]))
    for what, cores in (
        ("Duplicate sender cores found", senders),
        ("Duplicate receiver cores found", receivers),
    ):
        if len(set(cores)) != len(cores):
            raise SubDeviceError(
                f"ttnn.{op}: {what} in {sender_receiver_core_mapping!r}.\nfix: list each core once."
            )
    if set(senders) & set(receivers):
        raise SubDeviceError(
            f"ttnn.{op}: Duplicate cores found: {sorted(set(senders) & set(receivers))} are both "
            "senders and receivers.\nfix: keep sender and receiver cores apart."
        )
    _check_in_grid(op, frozenset(senders) | frozenset(receivers), grid)
    if not _is_uint(size) or int(size) == 0:
        raise SubDeviceError(
            f"ttnn.{op}: size={size!r} is not a positive byte count.\nfix: e.g. 1024."
        )
    bt = _check_buffer_type(op, buffer_type)
    mapping = tuple((s, r) for s, r in sender_receiver_core_mapping)
    return GlobalCircularBuffer(mesh, mapping, int(size), bt)


__all__ = [
    "GlobalCircularBuffer",
    "GlobalSemaphore",
    "SubDevice",
    "SubDeviceId",
    "SubDeviceManagerId",
    "SubDeviceManagerTracker",
    "create_global_circular_buffer",
    "create_global_semaphore",
    "get_global_semaphore_address",
    "reset_global_semaphore_value",
]
