"""TTML's ParallelismContext: the one parallelism plan of a run, a mesh and its :class:`ParallelDims`.

The context holds the open mesh and the plan (:class:`ttjax.plan.ParallelDims`: which mesh axis
carries data (DDP, FSDP), sequence (CP), tensor (TP) and pipeline (PP) parallelism). TTML's
getters (``get_tp_axis``, ``get_ddp_size``, ``is_pp_enabled``, ...) read the plan, and so do the
train step, the pipeline, the models' specs and the CLI banner: one object per run.

Axis rule: the enabled strategies take mesh axes 0, 1, 2 in the order DDP, FSDP, CP, TP, PP, and their
number must equal the mesh rank. A line mesh (at most one dimension above 1, e.g. 1x8) may instead
enable exactly one strategy, which takes the axis above 1 (TTML's line-topology rule), so
``[1, 8]`` with DDP alone runs 8-way DDP; ``[1, 1]`` may enable none.

>>> ctx = ParallelismContext.create(mesh_device_2x4, DistributedConfig(enable_ddp=True, enable_tp=True))
>>> ctx.get_ddp_axis(), ctx.get_ddp_size(), ctx.get_tp_axis_name(), ctx.get_tp_size()
(0, 2, 'tp', 4)
>>> ParallelismContext.from_axes(mesh_device_2x4, ddp_axis=0, tp_axis=1).dims
ParallelDims(dp=2, tp=4)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from jax.sharding import Mesh

from ttjax.errors import ParallelPlanError
from ttjax.plan import ParallelDims
from ttjax.ttml.errors import ParallelismConfigError

AXES_RULE = (
    "The number of parallelization axes must be equal to the number of mesh shape dimensions"
)

#: TTML's strategy name -> the plan's role, in axis order: the one table between TTML's names
#: (``enable_ddp``, ``get_ddp_axis``, ``ddp_axis=``, "DDP") and the roles (TTML calls data
#: parallelism DDP; EP, the experts' axis, is not a TTML flag).
ROLE_OF: dict[str, str] = {
    "ddp": "dp",
    "fsdp": "fsdp",
    "cp": "cp",
    "tp": "tp",
    "pp": "pp",
    "ep": "ep",
}
_FLAGS = ("ddp", "tp", "pp", "cp", "fsdp")  # DistributedConfig's fields, in TTML's field order


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
        for name in (*_FLAGS, "sp"):
            value = getattr(self, f"enable_{name}")
            if not isinstance(value, bool):
                raise ParallelismConfigError(
                    f"DistributedConfig.enable_{name} = {value!r} ({type(value).__name__}) must be "
                    f"a bool.\nfix: DistributedConfig(enable_{name}=True) or False."
                )
        return tuple(name for name in ROLE_OF if name in _FLAGS and getattr(self, f"enable_{name}"))


def plan_dims(mesh_shape: Sequence[int], config: DistributedConfig) -> ParallelDims:
    """The plan of ``config`` on a mesh of ``mesh_shape`` (TTML's rule, checked in
    :meth:`ttjax.plan.ParallelDims.from_flags`): how a run's config is validated, once.

    Raises ``ParallelismConfigError`` with TTML's words when the count does not fit the mesh.
    ``enable_sp`` adds sequence parallelism's rule to the plan (it needs ``enable_tp``).
    """
    try:
        dims = ParallelDims.from_flags(mesh_shape, [ROLE_OF[n] for n in config.enabled()])
    except ParallelPlanError:
        shape, on = [int(d) for d in mesh_shape], config.enabled()
        flags = ", ".join(f"{n}={getattr(config, 'enable_' + n)}" for n in ROLE_OF if n in _FLAGS)
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
    return {n: a for n, r in ROLE_OF.items() if (a := dims.axis(r)) is not None}


@dataclass(frozen=True)
class ParallelismContext:
    """The parallelism plan of an open mesh: ``mesh_device`` and ``dims`` (the role of each axis).

    Made by ``AutoContext.initialize_parallelism_context`` (TTML's way), :meth:`create` or
    :meth:`from_axes`. Axes are mesh axes (TT-NN ``cluster_axis``); ``get_*_axis_name`` gives the
    matching JAX mesh axis name (the role: ``'dp'``, ``'fsdp'``, ``'cp'``, ``'tp'``, ``'pp'``), for
    ``PartitionSpec`` and ``jax.shard_map`` on :attr:`jax_mesh`.
    """

    mesh_device: Any
    dims: ParallelDims

    @classmethod
    def create(
        cls, mesh_device: Any, config: DistributedConfig | ParallelDims
    ) -> ParallelismContext:
        """The context of ``mesh_device`` under TTML's ``config`` (its flags, checked by TTML's
        axis rule) or under a plan already made and checked (a ``ParallelDims`` of the mesh's
        shape, e.g. ``load_config(...).device.dims``: the CLI's one plan)."""
        shape = tuple(int(d) for d in mesh_device.shape)
        if isinstance(config, ParallelDims):
            if config.shape != shape:
                raise ParallelismConfigError(
                    f"ParallelismContext: the plan {config!r} is for mesh shape "
                    f"{list(config.shape)}, and the open mesh is {list(shape)}.\nfix: open the "
                    "mesh the plan was made for, or make the plan for this mesh."
                )
            return cls(mesh_device, config)
        return cls(mesh_device, plan_dims(shape, config))

    @classmethod
    def from_axes(
        cls,
        mesh_device: Any,
        ddp_axis: int | None = None,
        tp_axis: int | None = None,
        fsdp_axis: int | None = None,
        cp_axis: int | None = None,
        pp_axis: int | None = None,
        ep_axis: int | None = None,
        sequence_parallel: bool = False,
    ) -> ParallelismContext:
        """Each strategy on a given mesh axis (None: off), any order: ``from_axes(mesh, ddp_axis=0,
        tp_axis=1)``; roles must take distinct axes of the mesh. ``sequence_parallel``: Megatron
        SP over the TP axis (:mod:`ttjax.ttml.sp`)."""
        given = dict(ddp=ddp_axis, tp=tp_axis, fsdp=fsdp_axis, cp=cp_axis, pp=pp_axis, ep=ep_axis)
        axes = {ROLE_OF[n]: given[n] for n in ROLE_OF}
        shape = tuple(int(d) for d in mesh_device.shape)
        dims = ParallelDims.from_axes(shape, axes, "ParallelismContext")
        return cls(mesh_device, dims.with_sequence_parallel() if sequence_parallel else dims)

    # -- the plan ------------------------------------------------------------------------------

    @property
    def mesh_shape(self) -> tuple[int, ...]:
        return self.dims.shape

    @cached_property
    def jax_mesh(self) -> Mesh:
        """The mesh's devices as a ``jax.sharding.Mesh`` whose axes are named by role."""
        return self.dims.jax_mesh(self.mesh_device.jax_mesh.devices)

    def specs(self, logical: Any, shapes: Any = None) -> Any:
        """PartitionSpecs of a pytree of :class:`ttjax.plan.LogicalAxes` (``ParallelDims.specs``)."""
        return self.dims.specs(logical, shapes)

    # -- TTML's names: each reads the plan -----------------------------------------------------

    def _axis(self, name: str) -> int | None:
        return self.dims.axis(ROLE_OF[name])

    def _size(self, name: str) -> int:
        return self.dims.size(ROLE_OF[name])

    def _axis_name(self, name: str) -> str | None:
        return None if self._axis(name) is None else ROLE_OF[name]

    def get_ddp_axis(self) -> int | None:
        return self._axis("ddp")

    def get_tp_axis(self) -> int | None:
        return self._axis("tp")

    def get_pp_axis(self) -> int | None:
        return self._axis("pp")

    def get_cp_axis(self) -> int | None:
        return self._axis("cp")

    def get_fsdp_axis(self) -> int | None:
        return self._axis("fsdp")

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
        return self._axis("ddp") is not None

    def is_tp_enabled(self) -> bool:
        return self._axis("tp") is not None

    def is_pp_enabled(self) -> bool:
        return self._axis("pp") is not None

    def is_cp_enabled(self) -> bool:
        return self._axis("cp") is not None

    def is_fsdp_enabled(self) -> bool:
        return self._axis("fsdp") is not None

    def is_sp_enabled(self) -> bool:
        """Whether sequence parallelism splits the sequence over the TP axis."""
        return self.dims.sequence_parallel

    def get_ddp_axis_name(self) -> str | None:
        """JAX axis name of the DDP axis (``'dp'``), None when DDP is off."""
        return self._axis_name("ddp")

    def get_tp_axis_name(self) -> str | None:
        return self._axis_name("tp")

    def get_pp_axis_name(self) -> str | None:
        return self._axis_name("pp")

    def get_cp_axis_name(self) -> str | None:
        return self._axis_name("cp")

    def get_fsdp_axis_name(self) -> str | None:
        return self._axis_name("fsdp")

    # -- short names the step, the modules and the models read ---------------------------------

    @property
    def ddp_size(self) -> int:
        return self._size("ddp")

    @property
    def tp_size(self) -> int:
        return self._size("tp")

    @property
    def fsdp_size(self) -> int:
        return self._size("fsdp")

    @property
    def cp_size(self) -> int:
        return self._size("cp")

    @property
    def tp(self) -> str | None:
        """The TP axis name when TP really splits (size > 1), else None: what modules test."""
        return self.dims.name("tp")

    @property
    def ddp(self) -> str | None:
        """The DDP axis name when DDP really splits (size > 1), else None."""
        return self.dims.name("dp")

    def describe(self) -> str:
        """``"DDP 2 over mesh axis 'dp', TP 4 over mesh axis 'tp'"``; DDP and TP say when off
        (PP is told by the pipeline, which knows its stages and schedule)."""
        parts = []
        for name, role in ROLE_OF.items():
            axis = self.dims.axis(role)
            if axis is not None and role != "pp":
                parts.append(f"{name.upper()} {self.dims.shape[axis]} over mesh axis {role!r}")
            elif axis is None and name in ("ddp", "tp"):
                parts.append(f"{name.upper()} off")
        if self.dims.sequence_parallel:
            parts.append("SP over mesh axis 'tp'")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"ParallelismContext(mesh={self.mesh_shape}, {self.dims.sizes()})"


__all__ = [
    "AXES_RULE",
    "ROLE_OF",
    "DistributedConfig",
    "ParallelismContext",
    "assign_axes",
    "plan_dims",
]
