"""Errors of ``ttjax.ttml``: each subclasses a core ttjax error (and so a builtin).

TTML reports these with ``TT_FATAL`` (a ``RuntimeError`` in Python); ttjax keeps TTML's words and
adds the bad value and a ``fix:`` line.
"""

from __future__ import annotations

from ttjax.errors import (
    ConfigError,
    MeshGraphDescriptorError,
    ParallelPlanError,
    TopologyMismatchError,
    TTJaxError,
)


class TrainingConfigError(ConfigError):
    """A bad key or value in a training YAML file (or a batch the mesh cannot split)."""


class ParallelismConfigError(ParallelPlanError):
    """Parallelism strategies that do not fit the mesh (count vs mesh rank)."""


class AutoContextError(TTJaxError):
    """The AutoContext used in the wrong state (device not open, opened twice, ...)."""


class ParallelismContextError(AutoContextError):
    """The ParallelismContext used before ``initialize_parallelism_context`` or set up twice."""


__all__ = [
    "AutoContextError",
    "MeshGraphDescriptorError",
    "ParallelismConfigError",
    "ParallelismContextError",
    "TopologyMismatchError",
    "TrainingConfigError",
]
