"""ttjax.cost: each term against a hand computation on small programs (DRAM bytes, matmul FLOPs,
ring and line collective times), predictions that move the way they must, and the errors."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import pytest

import ttjax as ttnn
from ttjax import cost
from ttjax._src.tools import hlo as _hlo
from ttjax.errors import ConfigError
from ttjax.hardware import ETHERNET_HOP_SECONDS as HOP
from ttjax.hardware import ETHERNET_LINK_BANDWIDTH as LINK
from ttjax.hardware import MathFidelity, get_system, tensix_flops
from ttjax.inspect import inspect, main

UNIT = cost.Calibration(layer_seconds={"decode": 0.0, "prefill": 0.0})  # published figures only


def _linear_program(mesh, m=32, k=64, n=256, dtype=ttnn.bfloat8_b):
    """x [m, k] replicated @ w [k, n] column-sharded over the mesh, then an all_gather."""
    x = ttnn.abstract_tensor((m, k), ttnn.bfloat16, device=mesh, layout=ttnn.TILE_LAYOUT)
    w = ttnn.abstract_tensor(
        (k, n), dtype, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1)
    )

    def step(x, w):
        return ttnn.all_gather(ttnn.linear(x, w), dim=1)

    return step, x, w


def test_dram_bytes_are_the_arguments_in_tt_dtypes_plus_the_output(n300):
    m, k, n = 32, 64, 256
    step, x, w = _linear_program(n300, m, k, n)
    report = inspect(step, x, w)
    local_n = n // 2
    w_bytes = k * local_n * 1.0625  # bfloat8_b: 16 one-byte mantissas + 1 exponent per 16 values
    assert w_bytes == k * local_n + k * local_n // 16
    x_bytes = m * k * 2
    out = report.memory.output_bytes
    assert report.dram_read_bytes == pytest.approx(w_bytes + x_bytes + out)
    w4 = inspect(*_linear_program(n300, m, k, n, ttnn.bfloat4_b))
    assert w4.dram_read_bytes - x_bytes - out == pytest.approx(k * local_n * 0.5625)


def test_a_gathered_table_counts_only_the_rows_read():
    table = jax.ShapeDtypeStruct((1000, 64), jnp.bfloat16)
    ids = jax.ShapeDtypeStruct((4,), jnp.int32)
    hlo = jax.jit(lambda t, i: jnp.take(t, i, axis=0)).lower(table, ids).compile().as_text()
    reads = {r.number: r for r in _hlo.parameter_reads(_hlo.analyze(hlo))}
    assert reads[0].bytes == 1000 * 64 * 2
    assert reads[0].read_bytes == 4 * 64 * 2  # four rows leave DRAM, not the table
    hlo = jax.jit(lambda t, i: t @ t.T).lower(table, ids).compile().as_text()
    (used, *_) = _hlo.parameter_reads(_hlo.analyze(hlo))
    assert used.read_bytes == used.bytes == 1000 * 64 * 2


def test_matmul_flops_and_compute_term_per_chip(n300):
    m, k, n = 32, 64, 256
    report = inspect(*_linear_program(n300, m, k, n))
    assert report.matmul_flops == 2 * m * k * (n // 2)  # each chip multiplies its columns
    w = cost.workload(report, "n300", math_fidelity=MathFidelity.HiFi4)
    rate = 4096 * 1e9 / 4 * 64  # FLOPs/cycle x 1 GHz / 4 HiFi4 passes x 64 cores
    assert w.compute_seconds_at_peak == pytest.approx(2 * m * k * (n // 2) / rate)
    lofi = cost.workload(report, "n300", math_fidelity="lofi").compute_seconds_at_peak
    assert lofi == pytest.approx(w.compute_seconds_at_peak / 4)
    mix = {MathFidelity.LoFi: 1, MathFidelity.HiFi4: 1}
    half = cost.workload(report, "n300", math_fidelity=mix).compute_seconds_at_peak
    assert half == pytest.approx((lofi + w.compute_seconds_at_peak) / 2)
    assert tensix_flops(MathFidelity.LoFi) == 4096 * 1e9 * 64


def test_ring_all_reduce_time_by_hand():
    nbytes = 1 << 20  # the buffer; each chip sends 2 (N-1)/N of it
    bpd = 2 * 7 / 8 * nbytes
    topo, hops, lat, xfer = cost.collective_time("all-reduce", bpd, 8, "t3000")
    # both directions of the ring: 2 phases x ceil(7/2) hops, half the bytes each way on 1 link
    assert (topo, hops) == ("ring", 8)
    assert lat == pytest.approx(8 * 650e-9)
    assert xfer == pytest.approx(bpd / (2 * 12.5e9))
    # a line of 2 (N300): the single link carries the whole exchange, 2 phases x 1 hop
    topo, hops, lat, xfer = cost.collective_time("all-reduce", nbytes, 2, "n300")
    assert (topo, hops, lat) == ("line", 2, pytest.approx(2 * HOP))
    assert xfer == pytest.approx(nbytes / LINK)
    # a line of 4 on a Galaxy axis: busiest link carries N/2 chunks each way, 4 links
    topo, hops, _, xfer = cost.collective_time("all-gather", 3 / 4 * nbytes, 4, "galaxy")
    assert (topo, hops) == ("line", 3) and xfer == pytest.approx(nbytes / 2 / (4 * LINK))


def test_the_ethernet_term_sums_the_programs_collectives(t3000):
    x = ttnn.abstract_tensor((32, 1024), ttnn.bfloat16, device=t3000)

    def step(t):
        return ttnn.all_reduce(ttnn.all_reduce(t))

    report = inspect(step, x)
    p = cost.predict(report, "t3000", collective_dtype=None, calibration=UNIT)
    (a, b) = p.workload.collectives
    buffer = report.collectives[0].bytes  # as compiled (CPU XLA may upcast to f32)
    expect = 8 * HOP + 2 * 7 / 8 * buffer / (2 * LINK)
    assert a.seconds == pytest.approx(expect) and b.seconds == pytest.approx(expect)
    assert p.term("Ethernet").seconds == pytest.approx(2 * expect)
    assert p.step_seconds == pytest.approx(
        max(p.term("DRAM").seconds, p.term("compute").seconds) + 2 * expect
    )
    bf16 = cost.predict(report, "t3000", collective_dtype="bfloat16", calibration=UNIT)
    scale = 0.5 if report.collectives[0].dtype == "f32" else 1.0  # f32 costed at bf16's size
    assert bf16.workload.collectives[0].bytes_per_device == pytest.approx(
        a.bytes_per_device * scale
    )


def test_more_links_and_larger_batches_go_faster(t3000):
    for kind in ("all-reduce", "all-gather", "reduce-scatter"):
        times = [sum(cost.collective_time(kind, 1e6, 4, "galaxy", k)[2:]) for k in (1, 2, 4)]
        assert times[0] > times[1] > times[2]
    step, x, w = _linear_program(t3000)
    report = inspect(step, x, w)
    one = cost.predict(report, "galaxy", num_links=1).term("Ethernet").seconds
    four = cost.predict(report, "galaxy").term("Ethernet").seconds
    assert four < one
    from models.llama.perf import predict

    small = predict("tiny", "n300", batch=1, context=64)[0]
    large = predict("tiny", "n300", batch=8, context=64)[0]
    assert large.tokens_per_second > small.tokens_per_second
    assert large.step_seconds >= small.step_seconds  # more users never make a step shorter


def test_a_submesh_program_runs_as_replicas_and_the_report_prints_it(n300, capsys):
    step, x, w = _linear_program(n300)
    report = inspect(step, x, w, system="t3000", users=4)
    p = report.prediction
    assert p.workload.replicas == 4 and p.tokens_per_second == pytest.approx(16 / p.step_seconds)
    assert any("predicted on t3000" in line for line in report.summary_lines())
    assert json.loads(report.to_json())["prediction"]["replicas"] == 4
    assert p.dominant in {t.name for t in p.terms}
    prefill = report.predict("n300", phase="prefill")
    assert prefill.ttft_seconds == prefill.step_seconds


def test_bad_inputs_name_the_value_and_the_fix(n300, tmp_path):
    report = inspect(*_linear_program(n300))
    with pytest.raises(ConfigError, match=r"'dgx'.*\n.*fix:"):
        cost.predict(report, "dgx")
    with pytest.raises(ConfigError, match=r"2 chips.*does not tile a n150"):
        cost.predict(report, "n150")
    with pytest.raises(ConfigError, match="phase='train'"):
        cost.predict(report, "n300", phase="train")
    with pytest.raises(ConfigError, match="math_fidelity='ultra'"):
        cost.predict(report, "n300", math_fidelity="ultra")
    with pytest.raises(ConfigError, match="'dgx'"):
        inspect(*_linear_program(n300), system="dgx")
    bad = tmp_path / "cal.json"
    bad.write_text('{"dram_efficiency": 0.9}')
    with pytest.raises(ConfigError, match=r"lacks or mistypes.*\n.*fix:"):
        cost.load_calibration(bad)
    with pytest.raises(ConfigError, match="rows"):
        cost.fit([])


def test_fit_recovers_known_parameters_from_synthetic_rows():
    """Rows made by a known calibration are fitted back to it (least squares, log error)."""
    truth = cost.Calibration(
        dram_efficiency=0.8, compute_efficiency=0.3, layer_seconds={"decode": 2e-4, "prefill": 1e-3}
    )
    rows = []
    for dram, flops in ((5e9, 1e10), (1e9, 1e10), (1e9, 2e12), (2e8, 4e12)):
        for phase, layers in (("decode", 32), ("decode", 80), ("prefill", 32), ("prefill", 80)):
            w = cost.Workload(
                get_system("n150"), phase, 1, 1, 1, dram, flops, {MathFidelity.HiFi2: 1.0}, (),
                layers, None,
            )  # fmt: skip
            rows.append(cost.Sample("", w, cost.evaluate(w, truth).step_seconds))
    got = cost.fit(rows)
    assert got.dram_efficiency == pytest.approx(0.8, rel=1e-3)
    assert got.compute_efficiency == pytest.approx(0.3, rel=1e-3)
    assert got.layer_seconds["decode"] == pytest.approx(2e-4, rel=1e-3)
    assert got.layer_seconds["prefill"] == pytest.approx(1e-3, rel=1e-3)
    stored = cost.load_calibration(cost.CALIBRATION_FILE)
    assert stored == cost.CALIBRATION and "fitted" in stored.note
    assert 0 < stored.dram_efficiency <= 1 and 0 < stored.compute_efficiency <= 1


def test_cli_prints_the_prediction(capsys):
    assert main(["inspect", "tests.inspect_targets:gather_then_reduce", "--mesh", "2x4",
                 "--system", "t3000"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "predicted on t3000:" in out and "tok/s/user" in out and "Ethernet" in out


def linear_planner(model, system, batch=None, batch_per_replica=None):
    """A planner over ``_linear_program`` (a stand-in for models.llama.perf.plan): TP over 2 or
    8 chips of a T3000, the 8-chip layout marked published."""
    rows = []
    for shape, pub in (((1, 2), None), ((2, 4), 1.0)):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(shape))
        report = inspect(*_linear_program(mesh, n=1 << 16))
        tp = mesh.get_num_devices()
        p = cost.predict(report, system, users=batch_per_replica)
        layout = f"DP={8 // tp} x TP={tp}" if tp < 8 else "TP=8"
        rows.append(cost.PlanRow(layout, tp, 8 // tp, 1, model, p, 1, published=pub))
    return cost.rank(rows)


def test_cli_plan_ranks_layouts_and_says_which_term_wins(capsys, tmp_path):
    path = tmp_path / "plan.json"
    args = ["plan", "--planner", "tests.test_cost:linear_planner", "--model", "m", "--system",
            "t3000", "--batch-per-replica", "1", "--json", str(path)]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ranked by predicted tok/s/user" in out and "published layout TP=8" in out
    rows = json.loads(path.read_text())
    assert [r["layout"] for r in rows] == ["TP=8", "DP=4 x TP=2"]  # 1/4 of the weights per chip
    assert rows[0]["tokens_per_second_per_user"] > rows[1]["tokens_per_second_per_user"]
    assert rows[1]["tokens_per_second"] > rows[0]["tokens_per_second"]  # four replicas
    with pytest.raises(SystemExit):
        main(["plan", "--system", "t3000"])  # a batch is required
    assert main(["plan", "--planner", "tests.test_cost:nowhere", "--batch", "8"]) == 2
    assert "cannot load 'tests.test_cost:nowhere'" in capsys.readouterr().err
    assert main(["plan", "--model", "llama-9", "--system", "t3000", "--batch", "8"]) == 2
    err = capsys.readouterr().err
    assert "unknown config 'llama-9'" in err and "fix:" in err
