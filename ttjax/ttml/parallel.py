"""The parallelism plan of a training run: a mesh and the role of each of its axes.

``Parallelism`` pairs a ttjax ``MeshDevice`` with a :class:`ttjax.plan.ParallelDims` (which mesh
axis is dp, fsdp, cp, tp, pp). It is what the step, the pipeline, the model specs and the CLI
banner read; :meth:`from_context` builds it from TTML's ``ParallelismContext``. Its
:attr:`jax_mesh` names the axes by role, so specs, HLO and ``ttjax.inspect`` say ``tp``.

>>> par = Parallelism(mesh, ddp_axis=0, tp_axis=1)     # a 2x4 mesh: DDP 2, TP 4
>>> par.ddp_size, par.tp_size, par.tp
(2, 4, 'tp')
>>> par.specs({"w": LogicalAxes("embed", "mlp")})
{'w': P(None, 'tp')}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from jax.sharding import Mesh

import ttjax
from ttjax.plan import ParallelDims

# ``Parallelism``'s keyword for each role (TTML calls data parallelism DDP).
_KEYWORDS = {
    "dp": "ddp_axis",
    "fsdp": "fsdp_axis",
    "cp": "cp_axis",
    "tp": "tp_axis",
    "pp": "pp_axis",
    "ep": "ep_axis",
}


@dataclass(frozen=True)
class Parallelism:
    """A mesh and the mesh axis (index) of each role; ``None`` = that strategy is off."""

    mesh: ttjax.MeshDevice
    ddp_axis: int | None = None
    tp_axis: int | None = None
    fsdp_axis: int | None = None
    cp_axis: int | None = None
    pp_axis: int | None = None
    ep_axis: int | None = None
    sequence_parallel: bool = False  # Megatron SP over the TP axis (ttjax.ttml.sp)
    dims: ParallelDims = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        axes = {role: getattr(self, kw) for role, kw in _KEYWORDS.items()}
        dims = ParallelDims.from_axes(tuple(self.mesh.shape), axes, "Parallelism")
        if self.sequence_parallel:
            dims = dims.with_sequence_parallel()
        object.__setattr__(self, "dims", dims)

    @classmethod
    def from_context(cls, ctx: Any, mesh: ttjax.MeshDevice) -> Parallelism:
        """Read the axes of a TTML ``ParallelismContext`` (``get_ddp_axis``, ``get_tp_axis``, ...)."""
        axes = {
            kw: getattr(ctx, f"get_{kw.split('_')[0]}_axis", lambda: None)()
            for kw in _KEYWORDS.values()
        }
        return cls(mesh, **axes, sequence_parallel=getattr(ctx, "sequence_parallel", False))

    @classmethod
    def from_dims(cls, mesh: ttjax.MeshDevice, dims: ParallelDims) -> Parallelism:
        """The plan ``dims`` (roles per mesh axis) on ``mesh``."""
        axes = {_KEYWORDS[r]: a for a, r in enumerate(dims.roles) if r is not None}
        return cls(mesh, **axes, sequence_parallel=dims.sequence_parallel)

    # -- the mesh, named by role ---------------------------------------------------------------

    @cached_property
    def jax_mesh(self) -> Mesh:
        """The mesh's devices as a ``jax.sharding.Mesh`` whose axes are named by role."""
        return self.dims.jax_mesh(self.mesh.jax_mesh.devices)

    def specs(self, logical: Any, shapes: Any = None) -> Any:
        """PartitionSpecs of a pytree of :class:`ttjax.plan.LogicalAxes` (see ``ParallelDims.specs``)."""
        return self.dims.specs(logical, shapes)

    # -- TTML's names --------------------------------------------------------------------------

    @property
    def ddp_name(self) -> str | None:
        """The mesh axis name DDP reduces over (None when DDP is off)."""
        return None if self.ddp_axis is None else "dp"

    @property
    def tp_name(self) -> str | None:
        """The mesh axis name TP shards over (None when TP is off)."""
        return None if self.tp_axis is None else "tp"

    @property
    def ddp_size(self) -> int:
        return self.dims.size("dp")

    @property
    def tp_size(self) -> int:
        return self.dims.size("tp")

    @property
    def fsdp_size(self) -> int:
        return self.dims.size("fsdp")

    @property
    def cp_size(self) -> int:
        return self.dims.size("cp")

    @property
    def tp(self) -> str | None:
        """The TP axis name when TP really splits (size > 1), else None: what modules test."""
        return self.dims.name("tp")

    @property
    def ddp(self) -> str | None:
        """The DDP axis name when DDP really splits (size > 1), else None."""
        return self.dims.name("dp")

    def describe(self) -> str:
        """``"DDP 2 over mesh axis 'dp', TP 4 over mesh axis 'tp'"``; DDP and TP say when off."""
        labels = {"dp": "DDP", "fsdp": "FSDP", "cp": "CP", "tp": "TP", "ep": "EP"}
        parts = []
        for role, label in labels.items():
            axis = self.dims.axis(role)
            if axis is not None:
                parts.append(f"{label} {self.dims.shape[axis]} over mesh axis {role!r}")
            elif role in ("dp", "tp"):
                parts.append(f"{label} off")
        if self.dims.sequence_parallel:
            parts.append("SP over mesh axis 'tp'")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"Parallelism(mesh={tuple(self.mesh.shape)}, {self.dims.sizes()})"


__all__ = ["Parallelism"]
