"""Pure pipeline-schedule math: stage assignment, GPipe and 1F1B tick tables, bubbles, buffers.

Nothing here touches a device. A schedule is a table ``ticks x stages``: at each tick every stage
runs one forward (F) or one backward (B) of one microbatch, or idles. ``ttjax.ttml.pipeline``
scans over exactly this table, so the idle fraction and buffer sizes computed here are properties
of the compiled program, not estimates.

>>> t = schedule_table("1f1b", num_stages=4, num_microbatches=8)
>>> t.num_ticks, t.idle_fraction, t.stash_slots
(22, 0.2727..., 4)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ttjax.errors import ConfigError

SCHEDULES = ("gpipe", "1f1b")
IDLE, FORWARD, BACKWARD = 0, 1, 2


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ConfigError(
            f"pipeline_parallel_config: {name}={value!r} must be an integer >= {low}.\n"
            f"fix: set {name} to a whole number >= {low}."
        )


def stage_sizes(
    num_blocks: int, num_stages: int, blocks_per_rank: Sequence[int] | None = None
) -> tuple[int, ...]:
    """Blocks per stage: layer i on stage ``i // (num_blocks // num_stages)``, or TTML's map.

    >>> stage_sizes(8, 4), stage_sizes(6, 4, (1, 2, 2, 1))
    ((2, 2, 2, 2), (1, 2, 2, 1))
    """
    if num_stages > num_blocks:
        raise ConfigError(
            f"pipeline: {num_stages} stages but only num_blocks={num_blocks}: every stage needs at "
            f"least one block.\nfix: use at most {num_blocks} stages on the PP axis, or more blocks."
        )
    if blocks_per_rank is None:
        if num_blocks % num_stages:
            raise ConfigError(
                f"pipeline: num_blocks={num_blocks} does not split evenly over {num_stages} "
                "stages.\nfix: give blocks_per_rank (an uneven map, as TTML allows) or "
                "a stage count that divides num_blocks."
            )
        return (num_blocks // num_stages,) * num_stages
    sizes = tuple(int(n) for n in blocks_per_rank)
    if len(sizes) != num_stages:
        raise ConfigError(
            f"pipeline: blocks_per_rank has {len(sizes)} ranks ({dict(enumerate(sizes))}) but the "
            f"PP axis has {num_stages} stages.\nfix: one entry per stage."
        )
    if sum(sizes) != num_blocks:
        raise ConfigError(
            f"Number of blocks must match number of blocks per rank: blocks_per_rank="
            f"{dict(enumerate(sizes))} sums to {sum(sizes)}, but num_blocks={num_blocks}.\n"
            f"fix: make the per-rank counts add up to {num_blocks}."
        )
    if min(sizes) < 1:
        raise ConfigError(
            f"pipeline: blocks_per_rank={dict(enumerate(sizes))} leaves a stage without blocks.\n"
            "fix: give every rank at least one block."
        )
    return sizes


def block_layout(sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(index, mask)``, both ``[stages, max(sizes)]``: which global block sits in each slot.

    Short stages are padded with masked slots (index -1) that run as identity blocks, so every
    stage holds the same number of slots (SPMD needs equal shapes).
    """
    width = max(sizes)
    index = -np.ones((len(sizes), width), dtype=np.int32)
    start = 0
    for s, n in enumerate(sizes):
        index[s, :n] = np.arange(start, start + n)
        start += n
    return index, index >= 0


# ---------------------------------------------------------------------------------------------
# Tick tables
# ---------------------------------------------------------------------------------------------


def _stage_order(schedule: str, stage: int, p: int, m: int) -> list[tuple[int, int]]:
    """The (kind, microbatch) sequence one stage runs, in order."""
    if schedule == "gpipe":
        return [(FORWARD, i) for i in range(m)] + [(BACKWARD, i) for i in range(m)]
    warmup = min(p - 1 - stage, m)
    order = [(FORWARD, i) for i in range(warmup)]
    for i in range(m - warmup):
        order += [(FORWARD, warmup + i), (BACKWARD, i)]
    order += [(BACKWARD, i) for i in range(m - warmup, m)]
    return order


@dataclass(frozen=True, eq=False)
class ScheduleTable:
    """What every stage does at every tick: ``kinds[t, s]`` (0 idle, 1 F, 2 B), ``microbatches``."""

    schedule: str
    num_stages: int
    num_microbatches: int
    kinds: np.ndarray
    microbatches: np.ndarray

    def __repr__(self) -> str:
        return (
            f"ScheduleTable({self.schedule!r}, stages={self.num_stages}, microbatches="
            f"{self.num_microbatches}, ticks={self.num_ticks}, idle={self.idle_fraction:.3f})"
        )

    @property
    def num_ticks(self) -> int:
        return int(self.kinds.shape[0])

    @property
    def idle_fraction(self) -> float:
        """Idle (stage, tick) cells over all cells: the bubble, measured from the table."""
        return float(np.mean(self.kinds == IDLE))

    @property
    def formula_idle_fraction(self) -> float:
        """The papers' bubble ``(p-1)/(m+p-1)``."""
        p, m = self.num_stages, self.num_microbatches
        return (p - 1) / (m + p - 1)

    def tick_of(self, kind: int, stage: int, microbatch: int) -> int:
        hit = np.nonzero(
            (self.kinds[:, stage] == kind) & (self.microbatches[:, stage] == microbatch)
        )
        return int(hit[0][0])

    def _intervals(self, what: str, stage: int) -> list[tuple[int, int, int]]:
        """(microbatch, first gap held, first gap free) for one buffer of one stage.

        A value produced during tick a and consumed during tick b is held over gaps a..b-1
        (the gap after tick t); in one tick the stage reads its slot before the receive writes.
        """
        m, out = self.num_microbatches, []
        for i in range(m):
            if what == "stash":
                a, b = self.tick_of(FORWARD, stage, i), self.tick_of(BACKWARD, stage, i)
            elif what == "activations":
                a, b = self.tick_of(FORWARD, stage - 1, i), self.tick_of(FORWARD, stage, i)
            else:
                a, b = self.tick_of(BACKWARD, stage + 1, i), self.tick_of(BACKWARD, stage, i)
            out.append((i, a, b))
        return out

    def _slots(self, what: str) -> int:
        """Smallest ring size K such that slot ``microbatch % K`` never holds two live values."""
        stages = {
            "stash": range(self.num_stages),
            "activations": range(1, self.num_stages),
            "gradients": range(self.num_stages - 1),
        }[what]
        spans = [self._intervals(what, s) for s in stages]
        if not spans:
            return 1
        live = max(
            sum(a <= g < b for _, a, b in span) for span in spans for g in range(self.num_ticks)
        )
        for k in range(max(live, 1), self.num_microbatches + 1):
            if all(_ring_ok(span, k) for span in spans):
                return k
        return self.num_microbatches

    @cached_property
    def stash_slots(self) -> int:
        """Stage inputs kept for the backward (microbatches in flight): m for GPipe, p for 1F1B."""
        return self._slots("stash")

    @cached_property
    def activation_slots(self) -> int:
        """Received activations waiting for their forward."""
        return self._slots("activations")

    @cached_property
    def gradient_slots(self) -> int:
        """Received gradients waiting for their backward."""
        return self._slots("gradients")

    def peak_in_flight(self) -> int:
        """Most microbatches any stage has forwarded but not yet backwarded."""
        return max(
            max(
                sum(a <= g < b for _, a, b in self._intervals("stash", s))
                for g in range(self.num_ticks)
            )
            for s in range(self.num_stages)
        )

    def rows(self) -> list[list[str]]:
        """``rows()[s][t]``: ``"F3"``, ``"B0"`` or ``""``: the picture as text, stage by stage."""
        names = {FORWARD: "F", BACKWARD: "B"}
        return [
            [
                f"{names[k]}{i}" if k != IDLE else ""
                for k, i in zip(self.kinds[:, s], self.microbatches[:, s])
            ]
            for s in range(self.num_stages)
        ]


def _ring_ok(span: list[tuple[int, int, int]], k: int) -> bool:
    for i, a, b in span:
        for j, c, d in span:
            if i < j and i % k == j % k and a < d and c < b:
                return False
    return True


def schedule_table(schedule: str, num_stages: int, num_microbatches: int) -> ScheduleTable:
    """The tick table of ``schedule`` for ``num_stages`` stages and ``num_microbatches``.

    Each stage runs its own op order (GPipe: all forwards then all backwards; 1F1B: ``p-1-s``
    warm-up forwards, then one forward one backward, then the remaining backwards); a tick runs
    each stage's next op as soon as its input arrived in an earlier tick (F needs the previous
    stage's F, B needs the next stage's B). F and B each take one tick.
    """
    if schedule not in SCHEDULES:
        raise ConfigError(
            f"pipeline: schedule={schedule!r} is not a known schedule (allowed: "
            f"{', '.join(SCHEDULES)}).\nfix: pick one of {', '.join(SCHEDULES)}."
        )
    _check_int("num_stages", num_stages, 1)
    _check_int("num_microbatches", num_microbatches, 1)
    p, m = num_stages, num_microbatches
    orders = [_stage_order(schedule, s, p, m) for s in range(p)]
    done: dict[tuple[int, int, int], int] = {}
    pos = [0] * p
    kinds: list[list[int]] = []
    mbs: list[list[int]] = []
    t = 0
    while any(pos[s] < len(orders[s]) for s in range(p)):
        krow, mrow = [IDLE] * p, [-1] * p
        for s in range(p):
            if pos[s] == len(orders[s]):
                continue
            kind, i = orders[s][pos[s]]
            if kind == FORWARD:
                ready = s == 0 or done.get((FORWARD, s - 1, i), t) < t
            else:
                ready = (
                    done.get((FORWARD, s, i), t) < t
                    if s == p - 1
                    else done.get((BACKWARD, s + 1, i), t) < t
                )
            if ready:
                krow[s], mrow[s] = kind, i
        for s in range(p):
            if krow[s] != IDLE:
                done[(krow[s], s, mrow[s])] = t
                pos[s] += 1
        kinds.append(krow)
        mbs.append(mrow)
        t += 1
        if t > 4 * (m + p) + 8:  # the orders above always finish; this guards the loop
            raise AssertionError(f"schedule {schedule} did not finish for p={p}, m={m}")
    return ScheduleTable(
        schedule=schedule,
        num_stages=p,
        num_microbatches=m,
        kinds=np.asarray(kinds, dtype=np.int32),
        microbatches=np.asarray(mbs, dtype=np.int32),
    )


__all__ = [
    "BACKWARD",
    "FORWARD",
    "IDLE",
    "SCHEDULES",
    "ScheduleTable",
    "block_layout",
    "schedule_table",
    "stage_sizes",
]
