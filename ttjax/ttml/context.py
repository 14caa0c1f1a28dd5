"""TTML's ParallelismContext: which mesh axis carries data (DDP), tensor (TP) and pipeline (PP) parallelism.

Axis rule: the enabled strategies take mesh axes 0, 1, 2 in the order DDP, TP, PP, and their
number must equal the mesh rank. A line mesh (at most one dimension above 1, e.g. 1x8) may instead
enable exactly one strategy, which takes the axis above 1 (TTML's line-topology rule), so
``[1, 8]`` with DDP alone runs 8-way DDP; ``[1, 1]`` may enable none.

>>> ctx = ParallelismContext.create(mesh_device_2x4, DistributedConfig(enable_ddp=True, enable_tp=True))
>>> ctx.get_ddp_axis(), ctx.get_ddp_size(), ctx.get_tp_axis_name(), ctx.get_tp_size()
(0, 2, 'x', 4)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ttjax
from ttjax.ttml.errors import ParallelismConfigError

AXES_RULE = (
    "The number of parallelization axes must be equal to the number of mesh shape dimensions"
)


@dataclass
class DistributedConfig:
    """Which strategies to enable; TTML's ``DistributedConfig`` (read-write, as in TTML).

    >>> DistributedConfig(enable_ddp=True, enable_tp=True)
    DistributedConfig(enable_ddp=True, enable_tp=True, enable_pp=False)
    """

    enable_ddp: bool = False
    enable_tp: bool = False
    enable_pp: bool = False

    def enabled(self) -> tuple[str, ...]:
        """The enabled strategies in axis order, e.g. ``('ddp', 'tp')``."""
        flags = {"ddp": self.enable_ddp, "tp": self.enable_tp, "pp": self.enable_pp}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise ParallelismConfigError(
                    f"DistributedConfig.enable_{name} = {value!r} ({type(value).__name__}) must be "
                    f"a bool.\nfix: DistributedConfig(enable_{name}=True) or False."
                )
        return tuple(name for name, on in flags.items() if on)


def assign_axes(mesh_shape: Sequence[int], config: DistributedConfig) -> dict[str, int]:
    """The mesh axis of each enabled strategy, e.g. ``{'ddp': 0, 'tp': 1}`` for [2, 4] with both.

    Raises ``ParallelismConfigError`` with TTML's words when the count does not fit the mesh.
    """
    shape = [int(d) for d in mesh_shape]
    enabled = config.enabled()
    if len(enabled) == len(shape):
        return {name: axis for axis, name in enumerate(enabled)}
    big = [axis for axis, d in enumerate(shape) if d > 1]
    if len(big) <= 1 and (len(enabled) == 1 or (not enabled and math.prod(shape) == 1)):
        return {name: (big[0] if big else 0) for name in enabled}
    flags = ", ".join(f"{n}={getattr(config, 'enable_' + n)}" for n in ("ddp", "tp", "pp"))
    raise ParallelismConfigError(
        f"{AXES_RULE}: mesh_shape {shape} has {len(shape)} dimensions but {len(enabled)} "
        f"strategies are enabled ({flags}).\n"
        f"fix: enable {len(shape)} of DDP, TP, PP (they take mesh axes 0, 1, 2 in that order), or "
        "use a line mesh such as [1, N] with exactly one of them."
    )


@dataclass(frozen=True, eq=False)
class ParallelismContext:
    """The parallelism layout of an open mesh; made by ``AutoContext.initialize_parallelism_context``.

    Axes are mesh axes (TT-NN ``cluster_axis``); ``get_*_axis_name`` gives the matching JAX mesh
    axis name, for ``PartitionSpec`` and ``jax.shard_map`` on :attr:`jax_mesh`.
    """

    mesh_device: Any = field(repr=False, compare=False)
    mesh_shape: tuple[int, ...]
    axes: dict[str, int]

    @classmethod
    def create(cls, mesh_device: ttjax.MeshDevice, config: DistributedConfig) -> ParallelismContext:
        shape = tuple(mesh_device.shape)
        return cls(mesh_device=mesh_device, mesh_shape=shape, axes=assign_axes(shape, config))

    # -- TTML names -----------------------------------------------------------------------------

    def get_ddp_axis(self) -> int | None:
        return self.axes.get("ddp")

    def get_tp_axis(self) -> int | None:
        return self.axes.get("tp")

    def get_pp_axis(self) -> int | None:
        return self.axes.get("pp")

    def _size(self, name: str) -> int:
        axis = self.axes.get(name)
        return 1 if axis is None else self.mesh_shape[axis]

    def get_ddp_size(self) -> int:
        """Number of data-parallel groups (1 when DDP is off)."""
        return self._size("ddp")

    def get_tp_size(self) -> int:
        """Number of devices a tensor-parallel layer spans (1 when TP is off)."""
        return self._size("tp")

    def get_pp_size(self) -> int:
        """Number of pipeline stages (1 when PP is off)."""
        return self._size("pp")

    def is_ddp_enabled(self) -> bool:
        return "ddp" in self.axes

    def is_tp_enabled(self) -> bool:
        return "tp" in self.axes

    def is_pp_enabled(self) -> bool:
        return "pp" in self.axes

    # -- JAX interop ----------------------------------------------------------------------------

    @property
    def jax_mesh(self) -> Any:
        """The ``jax.sharding.Mesh`` of the training device."""
        return self.mesh_device.jax_mesh

    def _name(self, name: str) -> str | None:
        axis = self.axes.get(name)
        return None if axis is None else self.mesh_device.axis_names[axis]

    def get_ddp_axis_name(self) -> str | None:
        """JAX axis name of the DDP axis (``'y'`` on a 2-D mesh with DDP on axis 0)."""
        return self._name("ddp")

    def get_tp_axis_name(self) -> str | None:
        return self._name("tp")

    def get_pp_axis_name(self) -> str | None:
        return self._name("pp")


__all__ = ["AXES_RULE", "DistributedConfig", "ParallelismContext", "assign_axes"]
