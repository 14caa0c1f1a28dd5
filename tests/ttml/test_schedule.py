"""Pure schedule math in ``ttjax.ttml.schedule``: tick tables, bubbles, ring buffers, configs.

No devices: the tables are checked against the papers' formulas and against a plain-Python
replay of the tick plan that the pipeline's scan executes (dicts instead of ring buffers).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttjax.errors import ConfigError
from ttjax.ttml.config import PipelineParallelConfig
from ttjax.ttml.pipeline import tick_plan
from ttjax.ttml.schedule import (
    BACKWARD,
    FORWARD,
    IDLE,
    SCHEDULES,
    block_layout,
    schedule_table,
    stage_sizes,
)

GRID = [(p, m) for p, m in itertools.product((1, 2, 3, 4, 8), (1, 2, 4, 5, 8, 16))]


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize(("p", "m"), GRID, ids=lambda v: str(v))
def test_idle_fraction_is_the_papers_bubble(schedule: str, p: int, m: int) -> None:
    t = schedule_table(schedule, p, m)
    assert t.num_ticks == 2 * (m + p - 1)
    assert t.idle_fraction == pytest.approx((p - 1) / (m + p - 1), abs=1e-12)
    assert t.idle_fraction == pytest.approx(t.formula_idle_fraction, abs=1e-12)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize(("p", "m"), GRID, ids=lambda v: str(v))
def test_every_op_once_and_after_its_inputs(schedule: str, p: int, m: int) -> None:
    t = schedule_table(schedule, p, m)
    for s in range(p):
        ops = [(k, i) for k, i in zip(t.kinds[:, s], t.microbatches[:, s]) if k != IDLE]
        assert sorted(ops) == sorted(
            [(FORWARD, i) for i in range(m)] + [(BACKWARD, i) for i in range(m)]
        )
        for i in range(m):
            f, b = t.tick_of(FORWARD, s, i), t.tick_of(BACKWARD, s, i)
            assert f < b
            if s > 0:
                assert t.tick_of(FORWARD, s - 1, i) < f
            if s < p - 1:
                assert t.tick_of(BACKWARD, s + 1, i) < b


@pytest.mark.parametrize(("p", "m"), GRID, ids=lambda v: str(v))
def test_1f1b_keeps_at_most_p_microbatches_in_flight(p: int, m: int) -> None:
    gpipe, ofob = schedule_table("gpipe", p, m), schedule_table("1f1b", p, m)
    assert gpipe.peak_in_flight() == m
    assert gpipe.stash_slots == m
    assert ofob.peak_in_flight() == min(p, m)
    assert ofob.stash_slots == min(p, m)
    for s in range(p):  # stage s holds at most p - s (the 1F1B paper's bound per stage)
        spans = [(ofob.tick_of(FORWARD, s, i), ofob.tick_of(BACKWARD, s, i)) for i in range(m)]
        worst = max(sum(a <= g < b for a, b in spans) for g in range(ofob.num_ticks))
        assert worst == min(p - s, m)


def test_1f1b_steady_state_alternates() -> None:
    rows = schedule_table("1f1b", 4, 8).rows()
    assert [c for c in rows[3] if c] == [x for i in range(8) for x in (f"F{i}", f"B{i}")]
    assert [c for c in rows[0] if c][:5] == ["F0", "F1", "F2", "F3", "B0"]
    gpipe = schedule_table("gpipe", 4, 4).rows()
    assert gpipe[0] == ["F0", "F1", "F2", "F3"] + [""] * 6 + ["B0", "B1", "B2", "B3"]


def _replay(schedule: str, p: int, m: int) -> None:
    """Run the tick plan with ring buffers of the table's sizes; every read must find its value."""
    t = schedule_table(schedule, p, m)
    plan = tick_plan(t)
    ks, ka, kg = t.stash_slots, t.activation_slots, t.gradient_slots
    stash = [[None] * ks for _ in range(p)]
    act = [[None] * ka for _ in range(p)]
    grad = [[None] * kg for _ in range(p)]
    for tick in range(t.num_ticks):
        send_f: list[object] = [None] * p
        send_b: list[object] = [None] * p
        for s in range(p):
            kind, i = plan.kind[tick, s], plan.microbatch[tick, s]
            if kind == FORWARD:
                x = ("tokens", i) if s == 0 else act[s][i % ka]
                assert x == (("tokens", i) if s == 0 else ("y", s - 1, i)), (tick, s, i, x)
                stash[s][i % ks] = x
                send_f[s] = ("y", s, i)
            elif kind == BACKWARD:
                assert stash[s][i % ks] == (("tokens", i) if s == 0 else ("y", s - 1, i))
                if s < p - 1:
                    assert grad[s][i % kg] == ("dx", s + 1, i), (tick, s, i)
                send_b[s] = ("dx", s, i)
        for s in range(p):
            if plan.recv_act[tick, s] >= 0:
                i = plan.recv_act[tick, s]
                assert send_f[s - 1] == ("y", s - 1, i)
                act[s][i % ka] = send_f[s - 1]
            if plan.recv_grad[tick, s] >= 0:
                i = plan.recv_grad[tick, s]
                assert send_b[s + 1] == ("dx", s + 1, i)
                grad[s][i % kg] = send_b[s + 1]


@pytest.mark.parametrize("schedule", SCHEDULES)
@given(p=st.integers(1, 8), m=st.integers(1, 24))
def test_ring_buffers_never_overwrite_a_live_value(schedule: str, p: int, m: int) -> None:
    _replay(schedule, p, m)


def test_stage_sizes_even_and_ttml_map() -> None:
    assert stage_sizes(8, 4) == (2, 2, 2, 2)
    assert stage_sizes(32, 5, (6, 7, 7, 7, 5)) == (6, 7, 7, 7, 5)  # 5worker_32block_pp_fabric.yaml
    index, mask = block_layout((1, 2, 2, 1))
    np.testing.assert_array_equal(index, [[0, -1], [1, 2], [3, 4], [5, -1]])
    np.testing.assert_array_equal(mask, index >= 0)


def test_ttml_yaml_keys_and_ttjax_schedule_keys() -> None:
    cfg = PipelineParallelConfig.from_dict(
        {
            "num_blocks": 32,
            "blocks_per_rank": {0: 16, 1: 16},
            "num_microbatches": 8,
            "schedule": "gpipe",
        }
    )
    assert cfg.blocks_per_rank == (16, 16) and cfg.stage_sizes(2) == (16, 16)
    assert PipelineParallelConfig.from_dict({"num_blocks": 6}).stage_sizes(3) == (2, 2, 2)
    assert PipelineParallelConfig.from_dict(
        {"num_blocks": 2, "blocks_per_rank": [1, 1]}
    ).blocks_per_rank == (1, 1)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (
            {"num_blocks": 32, "blocks_per_rank": {0: 16, 1: 15}},
            "num_blocks = 32, blocks_per_rank [16, 15] sum to 31",
        ),
        ({"num_blocks": 4, "schedule": "interleaved"}, "schedule = 'interleaved'"),
        ({"num_blocks": 4, "num_microbatches": 0}, "num_microbatches = 0"),
        ({"num_blocks": 4, "blocks_per_rank": {0: 4, 2: 0}}, "{0: 4, 2: 0}"),
        ({"num_blocks": 4, "stages": 2}, "'stages'"),
    ],
)
def test_bad_config_names_the_value(kwargs: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match="fix:") as e:
        PipelineParallelConfig.from_dict(kwargs)
    assert needle in str(e.value)


def test_bad_stage_counts_name_the_value() -> None:
    with pytest.raises(ConfigError, match=r"8 stages but only num_blocks=4"):
        stage_sizes(4, 8)
    with pytest.raises(ConfigError, match=r"num_blocks=6 does not split evenly over 4"):
        stage_sizes(6, 4)
    with pytest.raises(ConfigError, match=r"blocks_per_rank has 2 ranks .* 4 stages"):
        stage_sizes(6, 4, (3, 3))
    with pytest.raises(ValueError, match="Number of blocks must match number of blocks per rank"):
        stage_sizes(6, 2, (3, 2))


def test_schedule_pictures(tmp_path) -> None:
    from rich.console import Console

    from ttjax.ttml.schedule_viz import print_schedule, save_schedule_png

    table = schedule_table("1f1b", 4, 8)
    console = Console(record=True, width=200)
    print_schedule(table, console)
    text = console.export_text()
    assert "idle 0.273 (formula (p-1)/(m+p-1) = 0.273)" in text
    row0 = next(line for line in text.splitlines() if line.startswith("│    0│"))
    assert [c.strip() for c in row0.split("│")[2:-1]] == table.rows()[0]
    png = save_schedule_png(table, tmp_path / "1f1b.png")
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
