"""TTML's ParallelismContext: which mesh axis carries data (DDP, FSDP), sequence (CP), tensor (TP) and pipeline (PP) parallelism.

Axis rule: the enabled strategies take mesh axes 0, 1, 2 in the order DDP, FSDP, CP, TP, PP, and their
number must equal the mesh rank. A line mesh (at most one dimension above 1, e.g. 1x8) may instead
enable exactly one strategy, which takes the axis above 1 (TTML's line-topology rule), so
``[1, 8]`` with DDP alone runs 8-way DDP; ``[1, 1]`` may enable none.

>>> ctx = ParallelismContext.create(mesh_device_2x4, DistributedConfig(enable_ddp=True, enable_tp=True))
>>> ctx.get_ddp_axis(), ctx.get_ddp_size(), ctx.get_tp_axis_name(), ctx.get_tp_size()
(0, 2, 'tp', 4)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import ttjax
from ttjax.errors import ParallelPlanError
from ttjax.plan import ParallelDims
from ttjax.ttml.errors import ParallelismConfigError

AXES_RULE = (
    "The number of parallelization axes must be equal to the number of mesh shape dimensions"
)

# TTML's strategy names and the plan's roles (TTML calls data parallelism DDP).
_ROLE = {"ddp": "dp", "fsdp": "fsdp", "cp": "cp", "tp": "tp", "pp": "pp"}


@dataclass
class DistributedConfig:
    """Which strategies to enable; TTML's ``DistributedConfig`` (read-write, as in TTML).

    Mesh axes are given out in the order DDP -> FSDP -> CP -> TP -> PP.

    ``enable_sp`` (ttjax's, Megatron sequence parallelism) takes no mesh axis: it splits the
    sequence over the TP axis between the tensor-parallel layers (``ttjax.ttml.sp``).

    >>> DistributedConfig(enable_ddp=True, enable_tp=True)
    DistributedConfig(enable_ddp=True, enable_tp=True, enable_pp=False, enable_cp=False, enable_fsdp=False, enable_sp=False)
    """

    enable_ddp: bool = False
    enable_tp: bool = False
    enable_pp: bool = False
    enable_cp: bool = False
    enable_fsdp: bool = False
    enable_sp: bool = False

    def enabled(self) -> tuple[str, ...]:
        """The enabled strategies in axis order, e.g. ``('ddp', 'tp')`` (SP takes no axis)."""
        for name in (*_ROLE, "sp"):
            value = getattr(self, f"enable_{name}")
            if not isinstance(value, bool):
                raise ParallelismConfigError(
                    f"DistributedConfig.enable_{name} = {value!r} ({type(value).__name__}) must be "
                    f"a bool.\nfix: DistributedConfig(enable_{name}=True) or False."
                )
        return tuple(name for name in _ROLE if getattr(self, f"enable_{name}"))


def plan_dims(mesh_shape: Sequence[int], config: DistributedConfig) -> ParallelDims:
    """The role of each mesh axis (TTML's rule, checked in :class:`ttjax.plan.ParallelDims`).

    Raises ``ParallelismConfigError`` with TTML's words when the count does not fit the mesh.
    ``enable_sp`` adds sequence parallelism's rule to the plan (it needs ``enable_tp``).
    """
    try:
        dims = ParallelDims.from_flags(mesh_shape, [_ROLE[n] for n in config.enabled()])
    except ParallelPlanError:
        shape, on = [int(d) for d in mesh_shape], config.enabled()
        flags = ", ".join(f"{n}={getattr(config, 'enable_' + n)}" for n in _ROLE)
        raise ParallelismConfigError(
            f"{AXES_RULE}: mesh_shape {shape} has {len(shape)} dimensions but {len(on)} "
            f"strategies are enabled ({flags}).\n"
            f"fix: enable {len(shape)} of DDP, FSDP, CP, TP, PP (they take mesh axes in that "
            "order), or use a line mesh such as [1, N] with exactly one of them."
        ) from None
    if not config.enable_sp:
        return dims
    try:
        return dims.with_sequence_parallel()
    except ParallelPlanError as e:
        raise ParallelismConfigError(f"DistributedConfig(enable_sp=True): {e}") from None


def assign_axes(mesh_shape: Sequence[int], config: DistributedConfig) -> dict[str, int]:
    """The mesh axis of each enabled strategy, e.g. ``{'ddp': 0, 'tp': 1}`` for [2, 4] with both."""
    dims = plan_dims(mesh_shape, config)
    back = {role: name for name, role in _ROLE.items()}
    return {back[r]: a for a, r in enumerate(dims.roles) if r is not None}


@dataclass(frozen=True, eq=False)
class ParallelismContext:
    """The parallelism layout of an open mesh; made by ``AutoContext.initialize_parallelism_context``.

    Axes are mesh axes (TT-NN ``cluster_axis``); ``get_*_axis_name`` gives the matching JAX mesh
    axis name (the role: ``'dp'``, ``'fsdp'``, ``'cp'``, ``'tp'``, ``'pp'``), for ``PartitionSpec``
    and ``jax.shard_map`` on :attr:`jax_mesh`.
    """

    mesh_device: Any = field(repr=False, compare=False)
    mesh_shape: tuple[int, ...]
    axes: dict[str, int]
    sequence_parallel: bool = False

    @classmethod
    def create(cls, mesh_device: ttjax.MeshDevice, config: DistributedConfig) -> ParallelismContext:
        shape = tuple(mesh_device.shape)
        dims = plan_dims(shape, config)
        back = {role: name for name, role in _ROLE.items()}
        axes = {back[r]: a for a, r in enumerate(dims.roles) if r is not None}
        return cls(mesh_device, shape, axes, dims.sequence_parallel)

    @cached_property
    def dims(self) -> ParallelDims:
        """The plan: the role of each mesh axis (and SP's rule when enabled)."""
        roles: list[str | None] = [None] * len(self.mesh_shape)
        for name, axis in self.axes.items():
            roles[axis] = _ROLE[name]
        dims = ParallelDims(self.mesh_shape, tuple(roles))
        return dims.with_sequence_parallel() if self.sequence_parallel else dims

    # -- TTML names -----------------------------------------------------------------------------

    def get_ddp_axis(self) -> int | None:
        return self.axes.get("ddp")

    def get_tp_axis(self) -> int | None:
        return self.axes.get("tp")

    def get_pp_axis(self) -> int | None:
        return self.axes.get("pp")

    def get_cp_axis(self) -> int | None:
        return self.axes.get("cp")

    def get_fsdp_axis(self) -> int | None:
        return self.axes.get("fsdp")

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

    def get_cp_size(self) -> int:
        """Number of devices the sequence is split over (1 when CP is off)."""
        return self._size("cp")

    def get_fsdp_size(self) -> int:
        """Number of devices parameters are sharded over (1 when FSDP is off)."""
        return self._size("fsdp")

    def is_ddp_enabled(self) -> bool:
        return "ddp" in self.axes

    def is_tp_enabled(self) -> bool:
        return "tp" in self.axes

    def is_pp_enabled(self) -> bool:
        return "pp" in self.axes

    def is_cp_enabled(self) -> bool:
        return "cp" in self.axes

    def is_fsdp_enabled(self) -> bool:
        return "fsdp" in self.axes

    def is_sp_enabled(self) -> bool:
        """Whether sequence parallelism splits the sequence over the TP axis."""
        return self.sequence_parallel

    # -- JAX interop ----------------------------------------------------------------------------

    @cached_property
    def jax_mesh(self) -> Any:
        """The training device as a ``jax.sharding.Mesh`` whose axes are named by role."""
        return self.dims.jax_mesh(self.mesh_device.jax_mesh.devices)

    def _name(self, name: str) -> str | None:
        return _ROLE[name] if name in self.axes else None

    def get_ddp_axis_name(self) -> str | None:
        """JAX axis name of the DDP axis (``'dp'``), None when DDP is off."""
        return self._name("ddp")

    def get_tp_axis_name(self) -> str | None:
        return self._name("tp")

    def get_pp_axis_name(self) -> str | None:
        return self._name("pp")

    def get_cp_axis_name(self) -> str | None:
        return self._name("cp")

    def get_fsdp_axis_name(self) -> str | None:
        return self._name("fsdp")


__all__ = ["AXES_RULE", "DistributedConfig", "ParallelismContext", "assign_axes", "plan_dims"]
