"""Set algebra on core ranges as TT-Metal does it (``tt_metal/common/core_coord.cpp``): merging a
set's rectangles and subtracting one set from another, range for range in TT-Metal's order (model
code reads ``ranges()[0].start`` of the result to place its next shards).

>>> full = CoreRangeSet([CoreRange(CoreCoord(0, 0), CoreCoord(7, 1))])
>>> subtract(full, CoreRangeSet([CoreRange(CoreCoord(0, 0), CoreCoord(7, 0))]))
CoreRangeSet([CoreRange(start=CoreCoord(x=0, y=1), end=CoreCoord(x=7, y=1))])
"""

from __future__ import annotations

from ttjax._src.core.hardware import CoreCoord, CoreRange, CoreRangeSet

_Key = tuple[int, int, int, int]


def _key(r: CoreRange) -> _Key:
    """std::set<CoreRange>'s order: start, then end (CoreCoord compares x, then y)."""
    return (r.start.x, r.start.y, r.end.x, r.end.y)


def _intersection(a: CoreRange, b: CoreRange) -> CoreRange | None:
    x0, y0 = max(a.start.x, b.start.x), max(a.start.y, b.start.y)
    x1, y1 = min(a.end.x, b.end.x), min(a.end.y, b.end.y)
    return CoreRange(CoreCoord(x0, y0), CoreCoord(x1, y1)) if x0 <= x1 and y0 <= y1 else None


def _adjacent(a: CoreRange, b: CoreRange) -> bool:
    """``CoreRange::adjacent``: touching along x or y, overlapping in the other dimension."""
    x_touch = a.end.x + 1 == b.start.x or b.end.x + 1 == a.start.x
    y_touch = a.end.y + 1 == b.start.y or b.end.y + 1 == a.start.y
    x_over = max(a.start.x, b.start.x) <= min(a.end.x, b.end.x)
    y_over = max(a.start.y, b.start.y) <= min(a.end.y, b.end.y)
    return (x_touch and y_over) or (y_touch and x_over)


def _merge_pair(a: CoreRange, b: CoreRange) -> CoreRange | None:
    """``CoreRange::merge``: two lined-up rectangles that touch or overlap, as one."""
    if _intersection(a, b) is None and not _adjacent(a, b):
        return None
    if a.start.x == b.start.x and a.end.x == b.end.x:
        return CoreRange(
            CoreCoord(a.start.x, min(a.start.y, b.start.y)),
            CoreCoord(a.end.x, max(a.end.y, b.end.y)),
        )
    if a.start.y == b.start.y and a.end.y == b.end.y:
        return CoreRange(
            CoreCoord(min(a.start.x, b.start.x), a.start.y),
            CoreCoord(max(a.end.x, b.end.x), a.end.y),
        )
    return None


def merge_ranges(s: CoreRangeSet) -> CoreRangeSet:
    """``CoreRangeSet::merge_ranges``: the cores redrawn as row runs, each merged with the
    rectangles of the rows above it that it lines up with (TT-Metal's row sweep)."""
    ranges = s.ranges()
    if len(ranges) <= 1:
        return s
    cores = {(x, y) for r in ranges for x in range(r.start.x, r.end.x + 1)
             for y in range(r.start.y, r.end.y + 1)}  # fmt: skip
    crs: dict[_Key, CoreRange] = {}
    for y in range(min(c[1] for c in cores), max(c[1] for c in cores) + 1):
        xs = sorted(x for x, cy in cores if cy == y)
        runs: list[CoreRange] = []
        for x in xs:
            if runs and runs[-1].end.x + 1 == x:
                runs[-1] = CoreRange(runs[-1].start, CoreCoord(x, y))
            else:
                runs.append(CoreRange(CoreCoord(x, y), CoreCoord(x, y)))
        merged: dict[_Key, CoreRange] = {}
        dropped: set[_Key] = set()
        for run in runs:
            for prev in sorted(crs.values(), key=_key):
                both = _merge_pair(run, prev)
                if both is not None:
                    merged[_key(both)] = both
                    dropped.update((_key(prev), _key(run)))
            crs[_key(run)] = run
        crs = {k: r for k, r in crs.items() if k not in dropped} | merged
    return CoreRangeSet([crs[k] for k in sorted(crs)])


def subtract(a: CoreRangeSet, b: CoreRangeSet) -> CoreRangeSet:
    """``CoreRangeSet::subtract`` (A - (A n B)): each merged range of ``a`` cut by each merged
    range of ``b`` into its left, right, bottom and top remainders, in that order."""
    mine, other = merge_ranges(a), merge_ranges(b)
    if not other.ranges() or not mine.ranges():
        return mine
    if not any(_intersection(r, o) for r in mine.ranges() for o in other.ranges()):
        return mine
    out: list[CoreRange] = []
    for current in mine.ranges():
        remaining = [current]
        for cut in other.ranges():
            kept: list[CoreRange] = []
            for r in remaining:
                i = _intersection(r, cut)
                if i is None:
                    kept.append(r)
                    continue
                lo_x, hi_x = max(r.start.x, i.start.x), min(r.end.x, i.end.x)
                if r.start.x < i.start.x:
                    kept.append(CoreRange(r.start, CoreCoord(i.start.x - 1, r.end.y)))
                if r.end.x > i.end.x:
                    kept.append(CoreRange(CoreCoord(i.end.x + 1, r.start.y), r.end))
                if r.start.y < i.start.y:
                    kept.append(
                        CoreRange(CoreCoord(lo_x, r.start.y), CoreCoord(hi_x, i.start.y - 1))
                    )
                if r.end.y > i.end.y:
                    kept.append(CoreRange(CoreCoord(lo_x, i.end.y + 1), CoreCoord(hi_x, r.end.y)))
            remaining = kept
        out.extend(remaining)
    return CoreRangeSet(out)


def attach() -> None:
    """Give ``CoreRangeSet`` TT-NN's ``subtract`` and ``merge_ranges`` methods (pybind's names)."""
    CoreRangeSet.subtract = subtract  # type: ignore[attr-defined]
    CoreRangeSet.merge_ranges = merge_ranges  # type: ignore[attr-defined]


attach()

__all__ = ["attach", "merge_ranges", "subtract"]
