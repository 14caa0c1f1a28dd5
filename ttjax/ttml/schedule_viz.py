"""Pictures of a pipeline schedule: stages x ticks, forward / backward / idle, as in the papers.

Rows are stages (stage 0 on top), columns are ticks; a forward cell reads ``F3`` (microbatch 3),
a backward one ``B3``, an empty cell is the bubble. Rich draws it in the terminal; matplotlib
(optional) saves a PNG like the GPipe and 1F1B (PipeDream-Flush) figures.

>>> print_schedule(schedule_table("1f1b", num_stages=4, num_microbatches=8))
>>> save_schedule_png(schedule_table("gpipe", 4, 8), "gpipe.png")

Command line: ``python -m ttjax.ttml.schedule_viz --schedule 1f1b --stages 4 --microbatches 8
[--png out.png]``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from ttjax.errors import MissingDependencyError, TTJaxError
from ttjax.ttml.schedule import BACKWARD, FORWARD, SCHEDULES, ScheduleTable, schedule_table

_RICH = {FORWARD: "bold white on dodger_blue3", BACKWARD: "bold black on spring_green3"}
_PNG = {FORWARD: "#4a90d9", BACKWARD: "#6cc24a"}


def summary(table: ScheduleTable) -> str:
    """One line: schedule, sizes, ticks, measured bubble vs the formula, stash slots."""
    p, m = table.num_stages, table.num_microbatches
    return (
        f"{table.schedule}: {p} stages x {m} microbatches, {table.num_ticks} ticks, idle "
        f"{table.idle_fraction:.3f} (formula (p-1)/(m+p-1) = {table.formula_idle_fraction:.3f}), "
        f"activations stashed per stage <= {table.stash_slots}"
    )


def schedule_rich(table: ScheduleTable) -> Any:
    """A ``rich.table.Table`` of the schedule (rich is imported here, not at import time)."""
    from rich import box
    from rich.table import Table

    t = Table(title=summary(table), box=box.SQUARE, show_lines=True, padding=(0, 0))
    t.add_column("stage", justify="right")
    for tick in range(table.num_ticks):
        t.add_column(str(tick), justify="center", min_width=3)
    for s, row in enumerate(table.rows()):
        cells = []
        for tick, label in enumerate(row):
            kind = int(table.kinds[tick, s])
            cells.append(f"[{_RICH[kind]}]{label:^3}[/]" if label else "")
        t.add_row(str(s), *cells)
    return t


def print_schedule(table: ScheduleTable, console: Any = None) -> None:
    """Print the schedule with rich."""
    from rich.console import Console

    (console or Console()).print(schedule_rich(table))


def save_schedule_png(
    table: ScheduleTable, path: str | os.PathLike[str], title: str | None = None
) -> str:
    """Draw the schedule to a PNG (needs matplotlib); returns the path."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch, Rectangle
    except ImportError:
        raise MissingDependencyError(
            "save_schedule_png needs matplotlib, which is not installed.\n"
            "fix: pip install matplotlib (or print_schedule, which needs only rich)."
        ) from None
    p, n = table.num_stages, table.num_ticks
    fig = Figure(figsize=(max(0.42 * n + 1.5, 5.0), 0.5 * p + 1.3))
    ax = fig.add_subplot()
    for s, row in enumerate(table.rows()):
        for tick, label in enumerate(row):
            kind = int(table.kinds[tick, s])
            color = _PNG.get(kind, "#f2f2f2")
            ax.add_patch(Rectangle((tick, s), 1, 1, facecolor=color, edgecolor="#555555", lw=0.6))
            if label:
                ax.text(tick + 0.5, s + 0.5, label[1:], ha="center", va="center", fontsize=8)
    ax.set_xlim(0, n)
    ax.set_ylim(p, 0)
    ax.set_yticks([s + 0.5 for s in range(p)], [f"stage {s}" for s in range(p)])
    ax.set_xticks([t + 0.5 for t in range(n)], [str(t) for t in range(n)], fontsize=7)
    ax.set_xlabel("tick")
    ax.tick_params(length=0)
    ax.set_title(title or summary(table), fontsize=8)
    ax.legend(
        handles=[
            Patch(facecolor=_PNG[FORWARD], label="forward (microbatch)"),
            Patch(facecolor=_PNG[BACKWARD], label="backward"),
            Patch(facecolor="#f2f2f2", edgecolor="#555555", label="idle (bubble)"),
        ],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.35 if p < 4 else -0.2),
        ncol=3,
        fontsize=7,
        frameon=False,
    )
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=130)
    return os.fspath(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedule", choices=SCHEDULES, default="1f1b")
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--png", default=None, help="also save the picture to this PNG")
    args = parser.parse_args(argv)
    try:
        table = schedule_table(args.schedule, args.stages, args.microbatches)
    except TTJaxError as e:
        parser.error(str(e))
    print_schedule(table)
    if args.png:
        print(save_schedule_png(table, args.png))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["print_schedule", "save_schedule_png", "schedule_rich", "summary"]
