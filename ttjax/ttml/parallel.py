"""Which mesh axes a training step uses for DDP and TP: the small interface the step builders need.

TTML gives axes out in the order DDP, TP (mesh axis 0, then 1). ``Parallelism`` carries the mesh
and the two axis indices (``None`` when a strategy is off); ``from_context`` reads them from a
``ParallelismContext``.

>>> par = Parallelism(mesh, ddp_axis=0, tp_axis=1)     # a 2x4 mesh: DDP 2, TP 4
>>> par.ddp_size, par.tp_size, par.tp_name
(2, 4, 'cols')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ttjax
from ttjax.errors import ConfigError


@dataclass(frozen=True)
class Parallelism:
    """A mesh and the mesh axes (indices) that DDP and TP run over; ``None`` = strategy off."""

    mesh: ttjax.MeshDevice
    ddp_axis: int | None = None
    tp_axis: int | None = None

    def __post_init__(self) -> None:
        rank = len(tuple(self.mesh.shape))
        for name, axis in (("ddp_axis", self.ddp_axis), ("tp_axis", self.tp_axis)):
            if axis is not None and not 0 <= axis < rank:
                raise ConfigError(
                    f"Parallelism: {name}={axis} is not an axis of the {rank}-D mesh "
                    f"{tuple(self.mesh.shape)}.\nfix: use an axis in [0, {rank - 1}] or None."
                )
        if self.ddp_axis is not None and self.ddp_axis == self.tp_axis:
            raise ConfigError(
                f"Parallelism: DDP and TP both use mesh axis {self.ddp_axis}.\n"
                "fix: DDP takes axis 0 and TP axis 1 (TTML's order)."
            )

    @classmethod
    def from_context(cls, ctx: Any, mesh: ttjax.MeshDevice) -> Parallelism:
        """Read the axes of a TTML ``ParallelismContext`` (``get_ddp_axis``/``get_tp_axis``)."""
        return cls(mesh, ctx.get_ddp_axis(), ctx.get_tp_axis())

    def _name(self, axis: int | None) -> str | None:
        return None if axis is None else self.mesh.axis_names[axis]

    def _size(self, axis: int | None) -> int:
        return 1 if axis is None else int(tuple(self.mesh.shape)[axis])

    @property
    def ddp_name(self) -> str | None:
        """The jax mesh axis name DDP reduces over (None when DDP is off)."""
        return self._name(self.ddp_axis)

    @property
    def tp_name(self) -> str | None:
        """The jax mesh axis name TP shards over (None when TP is off)."""
        return self._name(self.tp_axis)

    @property
    def ddp_size(self) -> int:
        return self._size(self.ddp_axis)

    @property
    def tp_size(self) -> int:
        return self._size(self.tp_axis)

    @property
    def tp(self) -> str | None:
        """The TP axis name when TP really splits (size > 1), else None: what modules test."""
        return self.tp_name if self.tp_size > 1 else None

    @property
    def ddp(self) -> str | None:
        """The DDP axis name when DDP really splits (size > 1), else None."""
        return self.ddp_name if self.ddp_size > 1 else None

    def describe(self) -> str:
        """``"DDP 2 over mesh axis 'y', TP 4 over mesh axis 'x'"``; a strategy that is off says so."""
        parts = []
        for name, axis in (("DDP", self.ddp_axis), ("TP", self.tp_axis)):
            size = self._size(axis)
            parts.append(
                f"{name} off"
                if axis is None
                else f"{name} {size} over mesh axis {self._name(axis)!r}"
            )
        return ", ".join(parts)

    def __repr__(self) -> str:
        def part(name: str, axis: int | None) -> str:
            return (
                f"{name}=off" if axis is None else f"{name}={self._name(axis)}:{self._size(axis)}"
            )

        return (
            f"Parallelism(mesh={tuple(self.mesh.shape)}, {part('ddp', self.ddp_axis)}, "
            f"{part('tp', self.tp_axis)})"
        )


__all__ = ["Parallelism"]
