"""Tessera's schedule switches for a ``graph.training_step``: gradient all-reduce overlap and
pipeline microbatches.

>>> from ttjax.dist import schedule
>>> schedule.all_reduce_overlap(True)   # each layer's gradient sync inside the backward scan
schedule.all_reduce_overlap(True)
>>> schedule.pipeline_microbatches(8)   # GPipe over 8 microbatches along the pp axis
schedule.pipeline_microbatches(8)
>>> schedule.current()
Schedule(all_reduce_overlap=True, pipeline_microbatches=8)
>>> with schedule.all_reduce_overlap(False):   # a with block restores the previous value
...     schedule.current().all_reduce_overlap
False

Both are thread-local settings read when a training step is traced; they are part of its program
cache key, so changing one traces the step again. Defaults: no overlap (one gradient reduction
after the backward), one microbatch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from ttjax.errors import ConfigError


@dataclass(frozen=True)
class Schedule:
    """The schedule a training step is traced under."""

    all_reduce_overlap: bool = False
    pipeline_microbatches: int = 1


_state = threading.local()


def current() -> Schedule:
    """The schedule in effect in this thread."""
    return getattr(_state, "schedule", Schedule())


class _Set:
    """Returned by the setters: the value is already set; a ``with`` block restores the old one."""

    def __init__(self, field: str, value: Any) -> None:
        self._field, self._value = field, value
        self._previous = current()
        _state.schedule = replace(self._previous, **{field: value})

    def __enter__(self) -> _Set:
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.schedule = self._previous

    def __repr__(self) -> str:
        return f"schedule.{self._field}({self._value!r})"


@contextmanager
def using(s: Schedule) -> Iterator[None]:
    """Run a block under schedule ``s`` (a training step traces under the schedule it was
    called with)."""
    previous = current()
    _state.schedule = s
    try:
        yield
    finally:
        _state.schedule = previous


def all_reduce_overlap(enabled: bool) -> _Set:
    """``True``: a module's gradient reduction over the data-parallel axis runs layer by layer
    inside the backward scan (one bucketed all-reduce per layer, as DDP's hooks do), so it can
    overlap the next layer's backward; ``False``: one reduction after the backward."""
    if not isinstance(enabled, bool):
        raise ConfigError(
            f"schedule.all_reduce_overlap({enabled!r}): expected True or False.\n"
            "fix: schedule.all_reduce_overlap(True)."
        )
    return _Set("all_reduce_overlap", enabled)


def pipeline_microbatches(n: int) -> _Set:
    """Split each data-parallel replica's batch into ``n`` microbatches that flow through the
    pipeline stages (the ``pp`` axis) in a GPipe schedule; keep ``n >= pp`` for a small bubble."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(
            f"schedule.pipeline_microbatches({n!r}): expected a positive int.\n"
            "fix: schedule.pipeline_microbatches(8), with 8 >= the pipeline depth."
        )
    return _Set("pipeline_microbatches", n)


__all__ = ["Schedule", "all_reduce_overlap", "current", "pipeline_microbatches", "using"]
