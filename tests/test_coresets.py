"""``CoreRangeSet.subtract`` / ``merge_ranges`` as TT-Metal's ``core_coord.cpp`` computes them:
the same cores as a set difference (brute force), split into TT-Metal's ranges in its order."""

from __future__ import annotations

import itertools

import numpy as np

import ttjax as ttnn


def _cores(s):
    return {(x, y) for r in s.ranges() for x in range(r.start.x, r.end.x + 1)
            for y in range(r.start.y, r.end.y + 1)}  # fmt: skip


def _rng(x0, y0, x1, y1):
    return ttnn.CoreRange(ttnn.CoreCoord(x0, y0), ttnn.CoreCoord(x1, y1))


def test_subtract_keeps_tt_metals_ranges_and_order():
    """The Galaxy's paged-update test: 8 cores of its sub-core grids, then the rest; tt-metal
    takes ``ranges()[0].start`` of the rest (worked by hand from CoreRangeSet::subtract)."""
    grids = ttnn.CoreRangeSet([_rng(1, 0, 3, 9), _rng(5, 0, 6, 9)])
    first = ttnn.num_cores_to_corerangeset_in_subcoregrids(ttnn.CoreCoord(1, 0), 8, grids, True)
    rest = grids.subtract(first)
    assert rest.ranges() == [_rng(3, 2, 3, 9), _rng(1, 3, 2, 9), _rng(5, 0, 6, 9)]
    assert rest.ranges()[0].start == ttnn.CoreCoord(3, 2)
    assert grids.subtract(ttnn.CoreRangeSet([_rng(10, 10, 11, 11)])) == grids  # disjoint


def test_subtract_is_the_set_difference():
    rng = np.random.default_rng(0)
    for _ in range(40):
        boxes = []
        for _ in range(2):
            x0, y0 = (int(v) for v in rng.integers(0, 6, 2))
            boxes.append(_rng(x0, y0, x0 + int(rng.integers(0, 3)), y0 + int(rng.integers(0, 3))))
        a = ttnn.CoreRangeSet([_rng(0, 0, 5, 4)])
        apart = not (_cores(ttnn.CoreRangeSet(boxes[:1])) & _cores(ttnn.CoreRangeSet(boxes[1:])))
        b = ttnn.CoreRangeSet(boxes if apart else boxes[:1])  # TT-Metal refuses overlaps
        got = a.subtract(b)
        assert _cores(got) == _cores(a) - _cores(b)
        for r, s in itertools.combinations(got.ranges(), 2):  # no two ranges overlap
            assert not (_cores(ttnn.CoreRangeSet([r])) & _cores(ttnn.CoreRangeSet([s])))


def test_merge_ranges_joins_lined_up_rectangles():
    rows = ttnn.CoreRangeSet([_rng(0, y, 3, y) for y in range(4)] + [_rng(5, 0, 5, 0)])
    assert rows.merge_ranges().ranges() == [_rng(0, 0, 3, 3), _rng(5, 0, 5, 0)]
