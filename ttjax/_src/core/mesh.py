"""MeshDevice: a 2-D (or N-D) grid of JAX devices with TT-NN's names and semantics.

The implementation of :mod:`ttjax.mesh`, whose docstring says more.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import jax
import numpy as np
from jax.sharding import AxisType, Mesh as JaxMesh

from ttjax._src.core import config as _config, fabric as _fabric
from ttjax._src.core.errors import ConfigError, DeviceClosedError, MeshShapeError
from ttjax._src.core.hardware import (
    CoreCoord,
    CoreGrid,
    DispatchCoreAxis,
    DispatchCoreType,
    worker_grid_size,
)
from ttjax._src.core.subdevice import SubDeviceId, SubDeviceManagerId, SubDeviceManagerTracker

# ---------------------------------------------------------------------------------------------
# MeshShape / MeshCoordinate
# ---------------------------------------------------------------------------------------------


def _as_int_tuple(values: Sequence[Any], what: str) -> tuple[int, ...]:
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise MeshShapeError(
                f"{what} dimension {i} is {v!r} ({type(v).__name__}); every dimension must be an int.\n"
                f"fix: pass integers, e.g. {what}(2, 4)."
            )
        out.append(int(v))
    return tuple(out)


class MeshShape(Sequence[int]):
    """The shape of a mesh: ``MeshShape(rows, cols)``, ``MeshShape(y=, x=)`` or ``MeshShape([8])``.

    >>> MeshShape(2, 4)
    MeshShape([2, 4])
    >>> rows, cols = MeshShape(y=8, x=4)
    """

    __slots__ = ("_dims",)

    def __init__(self, *args: Any, y: int | None = None, x: int | None = None) -> None:
        if y is not None or x is not None:
            if args or y is None or x is None:
                raise MeshShapeError(
                    f"MeshShape got args={args!r}, y={y!r}, x={x!r}.\n"
                    "fix: give both keywords, MeshShape(y=rows, x=cols), or positional dims."
                )
            dims: Sequence[Any] = (y, x)
        elif len(args) == 1 and isinstance(args[0], (list, tuple, MeshShape, np.ndarray)):
            dims = list(args[0])
        else:
            dims = args
        dims_t = _as_int_tuple(dims, "MeshShape")
        if len(dims_t) == 0:
            raise MeshShapeError("MeshShape cannot have 0 dimension.\nfix: e.g. MeshShape(1, 2).")
        for i, d in enumerate(dims_t):
            if d <= 0:
                raise MeshShapeError(
                    f"MeshShape({list(dims_t)}) has dimension {i} = {d}; every dimension must be >= 1.\n"
                    "fix: use a positive size for every mesh dimension."
                )
        self._dims = dims_t

    def dims(self) -> int:
        """Number of mesh dimensions (2 for a rows x cols mesh)."""
        return len(self._dims)

    def mesh_size(self) -> int:
        """Number of devices in the mesh."""
        return int(np.prod(self._dims))

    def is_line_topology(self) -> bool:
        """True when at most one dimension is larger than 1 (1xN or Nx1)."""
        return sum(d != 1 for d in self._dims) <= 1

    @property
    def num_rows(self) -> int:
        return self._dims[0]

    @property
    def num_cols(self) -> int:
        return self._dims[1] if len(self._dims) > 1 else 1

    @property
    def y(self) -> int:
        return self.num_rows

    @property
    def x(self) -> int:
        return self.num_cols

    def __iter__(self) -> Iterator[int]:
        return iter(self._dims)

    def __len__(self) -> int:
        return len(self._dims)

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[int, ...]: ...

    def __getitem__(self, i: int | slice) -> int | tuple[int, ...]:
        return self._dims[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MeshShape):
            return self._dims == other._dims
        if isinstance(other, (tuple, list)):
            return self._dims == tuple(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        return f"MeshShape({list(self._dims)})"

    def as_tuple(self) -> tuple[int, ...]:
        return self._dims

    def __str__(self) -> str:
        return "x".join(map(str, self._dims))


class MeshCoordinate:
    """A device's coordinate in a mesh, ordered lexicographically (row-major).

    >>> MeshCoordinate(0, 1)
    MeshCoordinate([0, 1])
    """

    __slots__ = ("_coords",)

    def __init__(self, *args: Any) -> None:
        if len(args) == 1 and isinstance(args[0], (list, tuple, MeshCoordinate, np.ndarray)):
            coords: Sequence[Any] = list(args[0])
        else:
            coords = args
        self._coords = _as_int_tuple(coords, "MeshCoordinate")

    def dims(self) -> int:
        return len(self._coords)

    def coords(self) -> tuple[int, ...]:
        return self._coords

    def __iter__(self) -> Iterator[int]:
        return iter(self._coords)

    def __len__(self) -> int:
        return len(self._coords)

    def __getitem__(self, i: int) -> int:
        if not -len(self._coords) <= i < len(self._coords):
            raise IndexError(f"Index out of bounds: {i} not in [0, {len(self._coords)})")
        return self._coords[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MeshCoordinate):
            return self._coords == other._coords
        if isinstance(other, (tuple, list)):
            return self._coords == tuple(other)
        return NotImplemented

    def __lt__(self, other: MeshCoordinate) -> bool:
        return self._coords < tuple(other)

    def __le__(self, other: MeshCoordinate) -> bool:
        return self._coords <= tuple(other)

    def __hash__(self) -> int:
        return hash(self._coords)

    def __repr__(self) -> str:
        return f"MeshCoordinate({list(self._coords)})"


class MeshCoordinateRange:
    """The coordinates from ``start`` to ``end`` (inclusive), or all of a shape, in row-major order."""

    def __init__(self, start: Any, end: Any = None) -> None:
        if end is None:
            shape = MeshShape(start)
            self.start = MeshCoordinate([0] * shape.dims())
            self.end = MeshCoordinate([d - 1 for d in shape])
        else:
            self.start, self.end = MeshCoordinate(start), MeshCoordinate(end)

    def __iter__(self) -> Iterator[MeshCoordinate]:
        ranges = [range(a, b + 1) for a, b in zip(self.start, self.end)]
        for c in itertools.product(*ranges):
            yield MeshCoordinate(c)

    def __len__(self) -> int:
        return int(np.prod([b - a + 1 for a, b in zip(self.start, self.end)]))

    def __repr__(self) -> str:
        return f"MeshCoordinateRange(start={self.start!r}, end={self.end!r})"


# Named systems (TT-NN guide, section 2.1).
N300 = MeshShape(1, 2)
T3000 = MeshShape(2, 4)
GALAXY = MeshShape(8, 4)
SYSTEMS: dict[str, MeshShape] = {
    "n300": N300,
    "t3000": T3000,
    "quietbox": T3000,
    "galaxy": GALAXY,
    "tg": GALAXY,
}


def parse_mesh_shape(text: str) -> MeshShape:
    """``"2x4"``, ``"8x4"`` or a system name (``n300``, ``t3000``, ``galaxy``) -> a MeshShape.

    >>> parse_mesh_shape("galaxy")
    MeshShape([8, 4])
    """
    key = text.strip().lower()
    if key in SYSTEMS:
        return SYSTEMS[key]
    try:
        return MeshShape([int(v) for v in key.split("x")])
    except ValueError:
        raise MeshShapeError(
            f"mesh {text!r} is neither RxC (e.g. 2x4) nor a system name.\n"
            f"fix: use RxC or one of {sorted(SYSTEMS)}."
        ) from None


_DEFAULT_AXIS_NAMES = {1: ("x",), 2: ("y", "x"), 3: ("z", "y", "x")}


def default_axis_names(rank: int) -> tuple[str, ...]:
    """Mesh axis names for a rank: ``("y", "x")`` for 2-D (cluster_axis 0 and 1)."""
    return _DEFAULT_AXIS_NAMES.get(rank, tuple(f"a{i}" for i in range(rank)))


class Arch(enum.Enum):
    """TT-Metal's chip architectures (``ttnn.device.Arch``); ``mesh_device.arch()`` reports
    ``WORMHOLE_B0``, the chip of the systems ttjax emulates (N300, T3000, Galaxy)."""

    GRAYSKULL = "grayskull"
    WORMHOLE_B0 = "wormhole_b0"
    BLACKHOLE = "blackhole"
    QUASAR = "quasar"
    Invalid = "invalid"


# ---------------------------------------------------------------------------------------------
# Device discovery
# ---------------------------------------------------------------------------------------------


def _all_devices() -> list[jax.Device]:
    return list(jax.devices())


# A multi-process run (ttjax.distributed, under ttjax-run) installs a function here that starts
# jax.distributed on first use and returns the devices of this rank's mesh, in global-id order.
_device_source: Callable[[], list[jax.Device]] | None = None


def set_device_source(source: Callable[[], list[jax.Device]] | None) -> None:
    """Let ``source()`` decide which devices a mesh may open (None restores all JAX devices)."""
    global _device_source
    _device_source = source


def available_devices() -> list[jax.Device]:
    """Devices a mesh may open: all JAX devices, narrowed by ``TT_VISIBLE_DEVICES``."""
    if _device_source is not None:
        return _device_source()
    devices = _all_devices()
    env, visible = _config.visible_devices_env()
    if visible is None:
        return devices
    by_id = {d.id: d for d in devices}
    missing = [i for i in visible if i not in by_id]
    if missing:
        raise MeshShapeError(
            f"{env} names device ids {missing}, which do not exist; "
            f"this process has ids {sorted(by_id)}.\n"
            "fix: list only existing ids, or raise TTJAX_NUM_DEVICES before starting Python."
        )
    return [by_id[i] for i in visible]


def get_num_devices() -> int:
    """Number of devices a mesh can use (visible devices of JAX's default backend)."""
    return len(available_devices())


def get_device_ids() -> list[int]:
    """Ids of the devices a mesh can use, in order."""
    return [d.id for d in available_devices()]


get_num_pcie_devices = get_num_devices
get_pcie_device_ids = get_device_ids


def system_mesh_shape(num_devices: int | None = None) -> MeshShape:
    """The global mesh shape of this system: 32 devices form a Galaxy 8x4, 8 a T3000 2x4, 2 an N300."""
    n = get_num_devices() if num_devices is None else num_devices
    return {32: GALAXY, 8: T3000, 2: N300, 1: MeshShape(1, 1)}.get(n, MeshShape(1, n))


def _too_few_devices(needed: int, have: int, shape: MeshShape) -> MeshShapeError:
    platform = jax.default_backend()
    env, visible = _config.visible_devices_env()
    want = max(needed, 8)
    if visible is not None:
        fix = (
            f"fix: list at least {needed} device ids in {env} (or unset it), or open a mesh of "
            f"at most {have} devices."
        )
    elif platform == "cpu" and _config._state.get("configured") is False:
        # Setting TTJAX_NUM_DEVICES alone would not help: ttjax reads it on import, too late.
        fix = (
            "fix: JAX had already started its backend before ttjax was imported, so ttjax could "
            "not set the device count. Import ttjax before the first JAX computation (e.g. "
            f"before jax.devices()) and run with TTJAX_NUM_DEVICES={want}, or start Python with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={want}."
        )
    elif platform == "cpu":
        fix = (
            f"fix: start a fresh Python with TTJAX_NUM_DEVICES={want} (ttjax reads it when "
            "imported, before JAX starts; the default is 32 virtual devices)."
        )
    else:
        fix = f"fix: open a mesh of at most {have} devices, e.g. MeshShape(1, {have})."
    note = f" ({env}={visible})" if visible is not None else ""
    return MeshShapeError(
        f"Requested mesh {shape!r} needs {needed} devices, but only {have} {platform} "
        f"device(s) are available{note}.\n{fix}"
    )


# ---------------------------------------------------------------------------------------------
# MeshDevice
# ---------------------------------------------------------------------------------------------


def _submesh_shape(value: Any) -> MeshShape:
    """``value`` as a MeshShape, with TT-NN's message for a non-positive submesh dimension."""
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value
    ):
        if any(v <= 0 for v in value):
            raise MeshShapeError(
                f"Invalid submesh shape: ({', '.join(str(int(v)) for v in value)}). All dimensions "
                "must be positive.\nfix: give every submesh dimension a size >= 1."
            )
    return MeshShape(value)


_next_mesh_id = itertools.count()


def chip_product(num_devices: int) -> str:
    """TT-Metal's product name of the Wormhole chips of a system of ``num_devices`` (the opened
    mesh's, as :mod:`ttjax.cluster` reads the cluster type): a Galaxy's 32 chips are unharvested
    ("galaxy"), an N150 has one harvested row ("nebula_x1"), N300 cards (N300, N300_2x2, T3000)
    two ("nebula_x2"); TT-Metal's get_product_name (tt_metal/llrt/core_descriptor.hpp)."""
    return {32: "galaxy", 1: "nebula_x1"}.get(int(num_devices), "nebula_x2")


def dispatch_cores(
    num_devices: int, dispatch_core_config: Any = None, dispatch_core_type: Any = None
) -> tuple[DispatchCoreType, DispatchCoreAxis]:
    """The dispatch core type and axis a mesh of ``num_devices`` opens with: the config's, else
    TT-NN's defaults (``ttnn.DispatchCoreConfig()``: ETH on N300 cards, WORKER elsewhere; ROW on
    Wormhole). The legacy ``dispatch_core_type=`` keyword sets the type alone."""
    if dispatch_core_config is not None:
        kind, axis = (
            getattr(dispatch_core_config, "type", None),
            getattr(dispatch_core_config, "axis", None),
        )
        if not isinstance(kind, DispatchCoreType) or not isinstance(axis, DispatchCoreAxis):
            raise ConfigError(
                f"open_mesh_device: dispatch_core_config={dispatch_core_config!r} is not a "
                "ttnn.DispatchCoreConfig.\nfix: pass ttnn.DispatchCoreConfig(type, axis) or None."
            )
        if not getattr(dispatch_core_config, "_type_defaulted", False):
            return kind, axis
    elif isinstance(dispatch_core_type, DispatchCoreType):
        return dispatch_core_type, DispatchCoreAxis.ROW
    eth = chip_product(num_devices) == "nebula_x2"
    kind = DispatchCoreType.ETH if eth else DispatchCoreType.WORKER
    return kind, DispatchCoreAxis.ROW


class MeshDevice:
    """A mesh of devices that ops run on in SPMD; TT-NN's ``ttnn.MeshDevice``.

    Build one with :func:`open_mesh_device`. ``mesh_device.jax_mesh`` is the underlying
    ``jax.sharding.Mesh`` for interop with raw JAX code.
    """

    def __init__(
        self,
        devices: np.ndarray,
        *,
        axis_names: Sequence[str] | None = None,
        parent: MeshDevice | None = None,
        offset: MeshCoordinate | None = None,
        grid: CoreCoord | None = None,
    ) -> None:
        devices = np.array(devices, dtype=object)
        names = tuple(axis_names) if axis_names is not None else default_axis_names(devices.ndim)
        if len(names) != devices.ndim or len(set(names)) != len(names):
            raise MeshShapeError(
                f"axis_names={names!r} must hold {devices.ndim} distinct names for a "
                f"{devices.ndim}-D mesh.\nfix: e.g. axis_names={default_axis_names(devices.ndim)!r}."
            )
        devices.setflags(write=False)
        self._devices = devices
        self._axis_names = names
        self._jax_mesh = JaxMesh(devices, names, axis_types=(AxisType.Auto,) * devices.ndim)
        self._shape = MeshShape(devices.shape)
        self._parent = parent
        self._offset = offset
        self._submeshes: list[MeshDevice] = []
        self._id = next(_next_mesh_id)
        self._gen = 0
        self._closed = False
        self._program_cache: dict[Any, Any] = {}
        self._program_cache_enabled = True
        self._device_views: dict[tuple[int, ...], MeshDevice] = {}
        self._block_views: dict[tuple[tuple[int, ...], tuple[int, ...]], MeshDevice] = {}
        self._last_outputs: tuple[Any, ...] = ()
        self._fabric: _fabric.FabricSetting | None = None  # set by open_mesh_device
        # The chips' worker grid: from the system and dispatch cores at open; submeshes and
        # views keep their parent's (same chips, same dispatch).
        if grid is None:
            grid = (
                parent._grid
                if parent is not None
                else worker_grid_size(
                    "wormhole_b0", chip_product(devices.size), *dispatch_cores(devices.size)
                )
            )
        self._grid: CoreCoord = grid
        self._sub_devices = SubDeviceManagerTracker(self.compute_with_storage_grid_size())

    # -- TT-NN API ------------------------------------------------------------------------------

    @property
    def shape(self) -> MeshShape:
        """The mesh shape, rows x cols: ``rows, cols = mesh_device.shape``."""
        return self._shape

    def get_num_devices(self) -> int:
        return self._devices.size

    def get_device_ids(self) -> list[int]:
        """Physical device ids in row-major order of mesh coordinates."""
        return [d.id for d in self._devices.flat]

    def get_device_id(self, coord: Any) -> int:
        c = tuple(MeshCoordinate(coord))
        if len(c) != self._devices.ndim or not all(0 <= a < s for a, s in zip(c, self._shape)):
            raise MeshShapeError(
                f"Device ID requested for MeshCoord {MeshCoordinate(c)!r} not found.\n"
                f"fix: coordinates of a {self._shape!r} mesh run from {[0] * self._devices.ndim} "
                f"to {[s - 1 for s in self._shape]}."
            )
        return int(self._devices[c].id)

    def get_devices(self) -> list[jax.Device]:
        """The JAX devices, row-major."""
        return list(self._devices.flat)

    def id(self) -> int:
        return self._id

    def arch(self) -> Arch:
        return Arch.WORMHOLE_B0

    def compute_with_storage_grid_size(self) -> CoreCoord:
        """Each chip's worker grid: by system and dispatch cores (Galaxy with dispatch on a
        column: 7x10; T3000/N300: 8x8), from TT-Metal's core descriptors."""
        return self._grid

    def dram_grid_size(self) -> CoreCoord:
        return CoreCoord(12, 1)

    @property
    def core_grid(self) -> CoreGrid:
        g = self.compute_with_storage_grid_size()
        return CoreGrid(y=g.y, x=g.x)

    def get_view(self) -> MeshDevice:
        return self

    def num_devices(self) -> int:
        return self.get_num_devices()

    def is_local(self, coord: Any) -> bool:
        return self._devices[tuple(MeshCoordinate(coord))].process_index == jax.process_index()

    # Program cache (TT-NN compiles kernels per op; ttjax caches one jitted program per op call site).
    def enable_program_cache(self) -> None:
        self._program_cache_enabled = True

    def disable_and_clear_program_cache(self) -> None:
        self._program_cache_enabled = False
        self._program_cache.clear()

    def clear_program_cache(self) -> None:
        self._program_cache.clear()

    def num_program_cache_entries(self) -> int:
        return len(self._program_cache)

    # Sub-device managers partition each chip's cores (see ttjax.subdevice); CCLs check the ids.
    def create_sub_device_manager(self, sub_devices: Any, local_l1_size: int) -> SubDeviceManagerId:
        """A manager for ``sub_devices`` (disjoint core sets) on every chip; load it to use it."""
        self._check_open()
        return self._sub_devices.create(sub_devices, local_l1_size)

    def load_sub_device_manager(self, sub_device_manager_id: SubDeviceManagerId) -> None:
        self._check_open()
        self._sub_devices.load(sub_device_manager_id)

    def clear_loaded_sub_device_manager(self) -> None:
        """Back to the default manager: one sub-device holding every core."""
        self._sub_devices.clear_loaded()

    def remove_sub_device_manager(self, sub_device_manager_id: SubDeviceManagerId) -> None:
        self._sub_devices.remove(sub_device_manager_id)

    def set_sub_device_stall_group(self, sub_device_ids: Sequence[SubDeviceId]) -> None:
        """The sub-devices that synchronize_device waits on by default."""
        self._sub_devices.set_stall_group(sub_device_ids)

    def reset_sub_device_stall_group(self) -> None:
        self._sub_devices.stall_group = ()

    def get_sub_device_ids(self) -> list[SubDeviceId]:
        """The ids of the loaded manager's sub-devices."""
        return self._sub_devices.ids()

    def enable_async(self, enable: bool = True) -> None:
        return None

    # -- submeshes ---------------------------------------------------------------------------------

    def create_submesh(self, submesh_shape: Any, offset: Any = None) -> MeshDevice:
        """The submesh at ``offset`` (default origin) of ``submesh_shape``; device ids keep their values."""
        self._check_open()
        shape = _submesh_shape(submesh_shape)
        if shape.dims() != self._shape.dims():
            raise MeshShapeError(
                f"Submesh shape {shape!r} and mesh device shape {self._shape!r} must have the same "
                "number of dimensions.\nfix: give one size per mesh dimension."
            )
        off = MeshCoordinate(offset) if offset is not None else MeshCoordinate([0] * shape.dims())
        if any(o < 0 or o + s > p for o, s, p in zip(off, shape, self._shape)):
            raise MeshShapeError(
                f"Submesh shape {shape!r} and offset {off!r} does not fit within parent mesh "
                f"({self._shape!r}).\nfix: keep offset + shape within the parent on every dimension."
            )
        index = tuple(slice(o, o + s) for o, s in zip(off, shape))
        sub = MeshDevice(self._devices[index], axis_names=self._axis_names, parent=self, offset=off)
        self._submeshes.append(sub)
        return sub

    def create_submeshes(self, submesh_shape: Any) -> list[MeshDevice]:
        """Disjoint submeshes that tile this mesh, in row-major order of tile position.

        An 8x4 Galaxy split into ``MeshShape(2, 4)`` gives four T3000-sized submeshes.
        """
        self._check_open()
        shape = _submesh_shape(submesh_shape)
        if shape.dims() != self._shape.dims():
            raise MeshShapeError(
                f"Submesh shape {shape!r} and mesh device shape {self._shape!r} must have the same "
                "number of dimensions.\nfix: give one size per mesh dimension."
            )
        for i, (p, s) in enumerate(zip(self._shape, shape)):
            if p % s:
                raise MeshShapeError(
                    f"Shape {self._shape!r} is not divisible by submesh shape {shape!r} along "
                    f"dimension {i}.\nfix: pick a submesh size that divides {p}."
                )
        counts = [p // s for p, s in zip(self._shape, shape)]
        return [
            self.create_submesh(shape, [t * s for t, s in zip(tile, shape)])
            for tile in itertools.product(*map(range, counts))
        ]

    def get_submeshes(self) -> list[MeshDevice]:
        return [m for m in self._submeshes if not m._closed]

    @property
    def parent(self) -> MeshDevice | None:
        """The mesh this submesh was cut from (None for a top-level mesh)."""
        return self._parent

    @property
    def offset(self) -> MeshCoordinate | None:
        return self._offset

    def reshape(self, new_shape: Any) -> None:
        """Lay the same devices out in ``new_shape`` (row-major); tensors made before must be recreated."""
        self._check_open()
        shape = MeshShape(new_shape)
        if shape.mesh_size() != self._shape.mesh_size():
            raise MeshShapeError(
                f"New shape must have the same number of devices as current shape: {shape!r} has "
                f"{shape.mesh_size()}, {self._shape!r} has {self._shape.mesh_size()}.\n"
                "fix: keep the product of the dimensions."
            )
        devices = self._devices.reshape(tuple(shape))
        names = default_axis_names(devices.ndim) if devices.ndim != self._devices.ndim else None
        fresh = MeshDevice(devices, axis_names=names or self._axis_names, grid=self._grid)
        self._devices, self._axis_names = fresh._devices, fresh._axis_names
        self._jax_mesh, self._shape = fresh._jax_mesh, fresh._shape
        self._program_cache.clear()
        self._device_views.clear()
        self._block_views.clear()
        self._gen += 1

    # -- JAX interop and internals ------------------------------------------------------------------

    @property
    def jax_mesh(self) -> JaxMesh:
        """The ``jax.sharding.Mesh`` of this mesh device."""
        return self._jax_mesh

    @property
    def axis_names(self) -> tuple[str, ...]:
        """JAX axis names, one per mesh dimension (cluster_axis i is ``axis_names[i]``)."""
        return self._axis_names

    @property
    def devices(self) -> Any:
        """The JAX devices as a read-only array of the mesh shape."""
        return self._devices

    @property
    def is_open(self) -> bool:
        return not self._closed

    def same_mesh(self, other: Any) -> bool:
        """Whether ``other`` is this mesh or a MeshDevice over the very same devices and axes.

        Tensors on the same mesh can be combined by ops and collectives; others cannot.
        """
        return other is self or (isinstance(other, MeshDevice) and other.jax_mesh == self.jax_mesh)

    def _check_open(self) -> None:
        if self._closed:
            raise DeviceClosedError(
                f"{self!r} was closed.\nfix: open a new mesh with ttnn.open_mesh_device(...)."
            )

    def _device_view(self, coord: tuple[int, ...]) -> MeshDevice:
        """A 1x1 mesh holding just the device at ``coord`` (for per-device tensors)."""
        view = self._device_views.get(coord)
        if view is None:
            dev = self._devices[coord]
            view = MeshDevice(
                np.array([[dev]], dtype=object), axis_names=default_axis_names(2), parent=self
            )
            self._device_views[coord] = view
        return view

    def _block_view(self, offset: tuple[int, ...], shape: tuple[int, ...]) -> MeshDevice:
        """The devices of the block at ``offset`` of ``shape`` as a mesh (parent: this mesh), for
        tensors TT-NN keeps on a subset of a mesh's coordinates (combine_device_tensors of some of
        its device tensors). Unlike :meth:`create_submesh` it is not listed as a submesh."""
        key = (tuple(offset), tuple(shape))
        view = self._block_views.get(key)
        if view is None:
            index = tuple(slice(o, o + n) for o, n in zip(offset, shape))
            view = MeshDevice(
                self._devices[index],
                axis_names=self._axis_names,
                parent=self,
                offset=MeshCoordinate(list(offset)),
            )
            self._block_views[key] = view
        return view

    def root(self) -> MeshDevice:
        """The top-level mesh this (sub)mesh belongs to."""
        m = self
        while m._parent is not None:
            m = m._parent
        return m

    def __repr__(self) -> str:
        return f"<MeshDevice: {self._shape} grid, {self.get_num_devices()} devices>"

    __str__ = __repr__

    def __enter__(self) -> MeshDevice:
        return self

    def __exit__(self, *exc: Any) -> None:
        close_mesh_device(self)


# TT-NN's single-device class: ttjax opens one device as a 1x1 mesh (``open_device``).
Device = MeshDevice


def _devices_for(shape: MeshShape, offset: Any, physical_device_ids: Sequence[int]) -> np.ndarray:
    avail = available_devices()
    needed = shape.mesh_size()
    if physical_device_ids:
        by_id = {d.id: d for d in avail}
        bad = [i for i in physical_device_ids if i not in by_id]
        bad += sorted({i for i in physical_device_ids if list(physical_device_ids).count(i) > 1})
        if bad or len(physical_device_ids) != needed:
            raise MeshShapeError(
                f"physical_device_ids={list(physical_device_ids)} must name {needed} available "
                f"distinct devices for {shape!r}; unavailable or repeated: {bad}, available: "
                f"{sorted(by_id)}.\n"
                "fix: list exactly one available id per mesh position."
            )
        return np.array([by_id[i] for i in physical_device_ids], dtype=object).reshape(tuple(shape))
    if needed > len(avail):
        raise _too_few_devices(needed, len(avail), shape)
    if offset is not None:
        system = system_mesh_shape(len(avail))
        grid = np.array(avail[: system.mesh_size()], dtype=object).reshape(tuple(system))
        off = tuple(MeshCoordinate(offset))
        if len(off) != system.dims() or shape.dims() != system.dims():
            raise MeshShapeError(
                f"offset {MeshCoordinate(off)!r} and {shape!r} must both have the rank of the "
                f"system mesh {system!r}.\nfix: give a {system.dims()}-D shape and offset."
            )
        if any(o < 0 or o + s > g for o, s, g in zip(off, shape, system)):
            raise MeshShapeError(
                f"Mesh {shape!r} at offset {MeshCoordinate(off)!r} does not fit in the system mesh "
                f"{system!r}.\nfix: keep offset + shape within the system mesh."
            )
        return grid[tuple(slice(o, o + s) for o, s in zip(off, shape))]
    return np.array(avail[:needed], dtype=object).reshape(tuple(shape))


def open_mesh_device(
    mesh_shape: Any = None,
    l1_small_size: int = 0,
    trace_region_size: int = 0,
    num_command_queues: int = 1,
    dispatch_core_config: Any = None,
    offset: Any = None,
    physical_device_ids: Sequence[int] = (),
    worker_l1_size: int = 0,
    *,
    mesh_type: Any = None,
    dispatch_core_type: Any = None,
    axis_names: Sequence[str] | None = None,
) -> MeshDevice:
    """Open a mesh of devices (TT-NN's ``ttnn.open_mesh_device``).

    Hardware arguments (L1 sizes, trace region, mesh_type) are accepted and have no effect; the
    dispatch cores set each chip's worker grid (:meth:`MeshDevice.compute_with_storage_grid_size`).
    ``axis_names`` overrides the JAX axis names (default ``("y", "x")``).

    >>> mesh = open_mesh_device(MeshShape(1, 2))
    """
    shape = system_mesh_shape() if mesh_shape is None else MeshShape(mesh_shape)
    n = shape.mesh_size()
    kind, axis = dispatch_cores(n, dispatch_core_config, dispatch_core_type)
    grid = worker_grid_size("wormhole_b0", chip_product(n), kind, axis)
    devices = _devices_for(shape, offset, physical_device_ids)
    mesh = MeshDevice(devices, axis_names=axis_names, grid=grid)
    mesh._fabric = _fabric.current_setting()
    _opened.append(weakref.ref(mesh))
    return mesh


def fabric_setting(mesh_device: MeshDevice) -> _fabric.FabricSetting:
    """The fabric setting in effect when ``mesh_device`` (or the mesh it was carved from) opened."""
    mesh: MeshDevice | None = mesh_device
    while mesh is not None:
        if mesh._fabric is not None:
            return mesh._fabric
        mesh = mesh._parent
    return _fabric.FabricSetting()


_opened: list[weakref.ref[MeshDevice]] = []


def last_opened_mesh() -> MeshDevice | None:
    """The most recently opened mesh that is still open (ttjax.cluster asks what system this is)."""
    while _opened:
        mesh = _opened[-1]()
        if mesh is not None and not mesh._closed:
            return mesh
        _opened.pop()
    return None


def open_mesh_of_shape(shape: MeshShape) -> MeshDevice | None:
    """The most recently opened root mesh of ``shape`` that is still open (None if none is)."""
    for ref in reversed(_opened):
        mesh = ref()
        if mesh is not None and not mesh._closed and tuple(mesh.shape) == tuple(shape):
            return mesh
    return None


def close_mesh_device(mesh_device: MeshDevice) -> None:
    """Close a mesh and its submeshes; later use of their tensors raises ``DeviceClosedError``."""
    for sub in mesh_device._submeshes:
        close_mesh_device(sub)
    for view in [*mesh_device._device_views.values(), *mesh_device._block_views.values()]:
        close_mesh_device(view)
    mesh_device._closed = True
    mesh_device._gen += 1
    mesh_device._program_cache.clear()
    mesh_device._last_outputs = ()
    if mesh_device._parent is not None and mesh_device in mesh_device._parent._submeshes:
        mesh_device._parent._submeshes.remove(mesh_device)


@contextlib.contextmanager
def create_mesh_device(*args: Any, **kwargs: Any) -> Iterator[MeshDevice]:
    """Context manager: open a mesh on entry, close it on exit."""
    mesh = open_mesh_device(*args, **kwargs)
    try:
        yield mesh
    finally:
        close_mesh_device(mesh)


def open_device(device_id: int = 0, **kwargs: Any) -> MeshDevice:
    """Open one device as a 1x1 mesh (TT-NN's ``ttnn.open_device``)."""
    return open_mesh_device(MeshShape(1, 1), physical_device_ids=[device_id])


def close_device(device: MeshDevice) -> None:
    close_mesh_device(device)


def synchronize_device(
    mesh_device: MeshDevice, cq_id: int | None = None, sub_device_ids: Sequence[Any] = ()
) -> None:
    """Wait until every op dispatched to ``mesh_device`` (and its submeshes) has finished.

    ``sub_device_ids`` must name sub-devices of the loaded manager (XLA waits on all of them).
    """
    for s in sub_device_ids:
        mesh_device._sub_devices.check_id("synchronize_device", s, "sub_device_ids")
    for arr in mesh_device._last_outputs:
        arr.block_until_ready()
    for sub in mesh_device._submeshes:
        synchronize_device(sub)


synchronize_devices = synchronize_device


class MeshEvent:
    """A point in a mesh's command stream (TT-NN's ``MeshEvent``): the work dispatched to the mesh
    before :func:`record_event`; :func:`event_synchronize` waits for exactly that work."""

    __slots__ = ("_outputs", "cq_id", "mesh_device")

    def __init__(self, mesh_device: MeshDevice, cq_id: int, outputs: tuple[Any, ...]) -> None:
        self.mesh_device = mesh_device
        self.cq_id = cq_id
        self._outputs = outputs

    def __repr__(self) -> str:
        return f"MeshEvent(mesh_device={self.mesh_device!r}, cq_id={self.cq_id})"


def _pending(mesh_device: MeshDevice) -> tuple[Any, ...]:
    outs = tuple(mesh_device._last_outputs)
    for sub in mesh_device._submeshes:
        outs += _pending(sub)
    return outs


def record_event(
    mesh_device: MeshDevice, cq_id: int = 0, sub_device_ids: Sequence[Any] = ()
) -> MeshEvent:
    """Mark the work dispatched to ``mesh_device`` so far (TT-NN's ``ttnn.record_event``)."""
    mesh_device._check_open()
    return MeshEvent(mesh_device, int(cq_id), _pending(mesh_device))


def event_synchronize(event: MeshEvent) -> None:
    """Block until the work an event marks has finished (TT-NN's ``ttnn.event_synchronize``)."""
    for arr in event._outputs:
        arr.block_until_ready()


def wait_for_event(cq_id: int, event: MeshEvent) -> None:
    """Make queue ``cq_id`` wait for ``event``: ttjax's ops already run in dispatch order, so
    work queued after this call sees the event's results; this call blocks until they exist."""
    event_synchronize(event)


__all__ = [
    "GALAXY",
    "N300",
    "SYSTEMS",
    "T3000",
    "Arch",
    "Device",
    "MeshCoordinate",
    "MeshCoordinateRange",
    "MeshDevice",
    "MeshEvent",
    "MeshShape",
    "available_devices",
    "close_device",
    "close_mesh_device",
    "create_mesh_device",
    "default_axis_names",
    "event_synchronize",
    "fabric_setting",
    "get_device_ids",
    "get_num_devices",
    "get_num_pcie_devices",
    "get_pcie_device_ids",
    "last_opened_mesh",
    "open_device",
    "open_mesh_device",
    "open_mesh_of_shape",
    "parse_mesh_shape",
    "record_event",
    "set_device_source",
    "synchronize_device",
    "synchronize_devices",
    "system_mesh_shape",
    "wait_for_event",
]
