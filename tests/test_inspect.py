"""ttjax.inspect: the collective table of known programs (kinds, mesh axes, bytes by the ring
formulas), memory of abstract inputs, JSON, the command line, and trace programs."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ttjax as ttnn
from ttjax.inspect import axes_of_groups, inspect, inspect_trace, main


def _x(mesh, width=256, dtype=ttnn.float32):
    return ttnn.abstract_tensor(
        (1, 1, 32, width), dtype, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3)
    )


def test_axes_of_groups_maps_replica_groups_to_cluster_axes():
    assert axes_of_groups([(0, 4), (1, 5), (2, 6), (3, 7)], (2, 4)) == (0,)
    assert axes_of_groups([(0, 1, 2, 3), (4, 5, 6, 7)], (2, 4)) == (1,)
    assert axes_of_groups([tuple(range(8))], (2, 4)) == (0, 1)
    assert axes_of_groups([(0, 2), (1, 3)], (2, 4)) is None


def test_iota_replica_groups_are_read_whole():
    """``replica_groups=[4,2]<=[2,4]T(1,0)`` (XLA's iota form, e.g. a partitioner's all-reduce
    over the major axis of 2x4) is four groups of two, not a truncated ``[4``."""
    from ttjax._src.tools import hlo as _hlo

    line = (
        "  %ar = f32[4]{0} all-reduce(f32[4]{0} %p), channel_id=2, "
        "replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, to_apply=%add"
    )
    (c,) = _hlo.parse_collectives(line)
    assert c.replica_groups == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert axes_of_groups(c.replica_groups, (2, 4)) == (0,)


def test_table_lists_exactly_the_programs_collectives_with_ring_bytes(t3000):
    x = _x(t3000)  # [1,1,32,32] f32 per device = 4096 bytes

    def step(t):
        g = ttnn.all_gather(t, dim=3, cluster_axis=0)  # 2 devices: result 8192 B
        r = ttnn.reduce_scatter(g, dim=3, cluster_axis=1)  # 4 devices: result 2048 B
        a = ttnn.all_reduce(r)  # 8 devices: 2048 B
        return ttnn.all_to_all(a, in_dim=2, out_dim=3, cluster_axis=1)  # 4 devices: 2048 B

    report = inspect(step, x)
    kinds = [c.kind for c in report.collectives]
    assert kinds == ["all-gather", "reduce-scatter", "all-reduce", "all-to-all"]
    ag, rs, ar, a2a = report.collectives
    assert (ag.cluster_axis, ag.mesh_axes, ag.group_size) == (0, ("y",), 2)
    assert (rs.cluster_axis, rs.mesh_axes, rs.group_size) == (1, ("x",), 4)
    assert (ar.cluster_axis, ar.mesh_axes, ar.group_size) == (None, ("y", "x"), 8)
    assert (a2a.cluster_axis, a2a.mesh_axes) == (1, ("x",))
    assert ag.bytes == 8192 and ag.bytes_per_device == pytest.approx(8192 * 1 / 2)
    assert rs.bytes == 2048 and rs.bytes_per_device == pytest.approx(2048 * 3)
    assert ar.bytes == 2048 and ar.bytes_per_device == pytest.approx(2 * 2048 * 7 / 8)
    assert a2a.bytes == 2048 and a2a.bytes_per_device == pytest.approx(2048 * 3 / 4)
    assert report.bytes_per_device == pytest.approx(4096 + 6144 + 3584 + 1536)
    assert report.collective_counts()["all-gather"] == 1
    assert "stablehlo" in report.stablehlo or "func.func" in report.stablehlo
    assert "all-gather" in report.hlo


def test_permute_reports_the_axis_it_moves_along(t3000):
    report = inspect(lambda t: ttnn.shift(t, 1, cluster_axis=0), _x(t3000))
    (c,) = report.collectives
    assert c.kind == "collective-permute" and c.cluster_axis == 0 and c.bytes_per_device == 4096


def test_abstract_inputs_report_exact_argument_memory(galaxy):
    hidden, ffn = 1024, 4096
    x = ttnn.abstract_tensor((1, 1, 32, hidden), ttnn.bfloat16, device=galaxy)
    w = ttnn.abstract_tensor(
        (hidden, ffn),
        ttnn.bfloat8_b,
        device=galaxy,
        mesh_mapper=ttnn.ShardTensorToMesh(galaxy, dim=-1),
    )
    report = inspect(lambda a, b: ttnn.linear(a, b), x, w)
    per_dev_cols = ffn // 32
    bfp8 = hidden * per_dev_cols + hidden * per_dev_cols // 16  # 1 byte + 1/16 exponent
    assert report.memory is not None
    assert report.memory.argument_bytes == 32 * hidden * 2 + bfp8
    matmul_flops = 2 * 32 * hidden * per_dev_cols
    # plus the bfloat8_b dequantization: a few elementwise ops per stored weight value (convert,
    # the group's two power-of-two scalings, the inf/NaN check), no more than 8
    assert matmul_flops <= report.flops <= matmul_flops + 8 * hidden * per_dev_cols
    assert report.collectives == []


def test_json_round_trip(t3000):
    report = inspect(lambda t: ttnn.all_gather(t, dim=3), _x(t3000))
    data = json.loads(report.to_json())
    assert data["collective_counts"]["all-gather"] == 1
    assert data["collectives"][0]["replica_groups"] == [list(range(8))]
    assert data["memory"]["argument_bytes"] == 4096


def test_command_line(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(__import__("pathlib").Path(__file__).parent))
    out = tmp_path / "report.json"
    hlo = tmp_path / "hlo.txt"
    code = main(
        [
            "inspect",
            "inspect_targets:gather_then_reduce",
            "--mesh",
            "t3000",
            "--arg",
            "width=128",
            "--json",
            str(out),
            "--hlo",
            str(hlo),
            "--width",
            "150",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "all-gather" in printed and "all-reduce" in printed
    data = json.loads(out.read_text())
    assert data["collective_counts"] == {
        "all-gather": 1,
        "reduce-scatter": 0,
        "all-reduce": 1,
        "collective-permute": 0,
        "all-to-all": 0,
    }
    assert "all-reduce" in hlo.read_text()


def test_inspect_trace_programs(t3000):
    x = ttnn.from_torch(
        np.ones((1, 1, 32, 256), np.float32),
        device=t3000,
        mesh_mapper=ttnn.ShardTensorToMesh(t3000, dim=3),
    )
    tid = ttnn.begin_trace_capture(t3000)
    out = ttnn.all_gather(ttnn.exp(x), dim=3)
    ttnn.end_trace_capture(t3000, tid)
    (report,) = inspect_trace(t3000, tid)
    assert [c.kind for c in report.collectives] == ["all-gather"]
    assert out.shape == (1, 1, 32, 256)
    ttnn.release_trace(t3000, tid)


def test_no_mesh_is_a_clear_error():
    with pytest.raises(ttnn.TTJaxError, match="mesh_device"):
        inspect(lambda a: a, np.ones(3))


def _scan_model(mesh, layers, scanned):
    x = ttnn.abstract_tensor((1, 1, 32, 64), ttnn.float32, device=mesh)
    w = ttnn.abstract_tensor(
        (layers, 64, 64), ttnn.float32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=2)
    )

    def layer(c, wl):
        return ttnn.all_gather(ttnn.linear(c, wl), dim=3), None

    def step(c, ws):
        if scanned:
            return ttnn.scan(layer, c, ws)[0]
        for i in range(layers):
            c = layer(c, ws[i])[0]
        return c

    return inspect(step, x, w)


def test_scanned_and_unrolled_models_report_the_same_totals(n300):
    scanned, unrolled = (_scan_model(n300, 3, s) for s in (True, False))
    dot = 2 * 32 * 64 * 32  # [32, 64] @ [64, 32] per device, per layer
    assert scanned.collective_counts() == unrolled.collective_counts()
    assert scanned.collective_counts()["all-gather"] == 3
    assert scanned.collective_counts(per="program")["all-gather"] == 1
    assert scanned.bytes_per_device == pytest.approx(unrolled.bytes_per_device)
    assert scanned.bytes_per_device == pytest.approx(3 * 32 * 64 * 4 / 2)
    assert 3 * dot <= scanned.flops <= 3 * dot + 100
    assert scanned.flops == pytest.approx(unrolled.flops, abs=100)  # loop counter add + compare
    assert scanned.xla_flops == pytest.approx(dot, abs=10)  # XLA's cost analysis: body once
    (loop,) = scanned.loops
    assert (loop.trip_count, loop.source) == (3, "known_trip_count")
    assert loop.collectives_per_iteration["all-gather"] == 1
    assert loop.flops_per_iteration == pytest.approx(dot, abs=10)
    text = "\n".join(scanned.summary_lines())
    assert "collectives per step: 3" in text and "per layer: 1 collectives" in text


def test_nested_loops_multiply_and_conditionals_are_reported(n300):
    import jax

    x = ttnn.abstract_tensor((1, 1, 32, 64), ttnn.float32, device=n300)

    def step(t):
        def inner(c, _):
            return ttnn.all_reduce(ttnn.multiply(c, c)), None

        def outer(c, _):
            return jax.lax.scan(inner, c, None, length=4)[0], None

        return jax.lax.scan(outer, t, None, length=3)[0]

    report = inspect(step, x)
    assert report.collective_counts()["all-reduce"] == 12
    depths = sorted((lp.depth, lp.trip_count) for lp in report.loops)
    assert depths == [(0, 3), (1, 4)]
    assert report.layer_loop.collectives_per_iteration["all-reduce"] == 4

    def branchy(t, flag):
        return jax.lax.cond(flag, lambda a: ttnn.all_reduce(a), lambda a: a, t)

    report = inspect(branchy, x, jax.ShapeDtypeStruct((), bool))
    (c,) = report.collectives
    assert c.conditional is not None and report.conditionals == [c.conditional]
    assert "counted as if taken" in "\n".join(report.summary_lines())


def test_trip_count_from_the_loop_condition():
    from ttjax._src.tools import hlo as _hlo

    hlo = """HloModule m

%cond (p: (s32[], f32[4])) -> pred[] {
  %p = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(7)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%body (q: (s32[], f32[4])) -> (s32[], f32[4]) {
  %q = (s32[], f32[4]) parameter(0)
  %j = s32[] get-tuple-element(%q), index=0
  %v = f32[4] get-tuple-element(%q), index=1
  %one = s32[] constant(1)
  %k = s32[] add(%j, %one)
  %ar = f32[4] all-reduce(%v), channel_id=1, replica_groups={{0,1}}, to_apply=%sum
  ROOT %t = (s32[], f32[4]) tuple(%k, %ar)
}

ENTRY %main (a: f32[4]) -> f32[4] {
  %a = f32[4] parameter(0)
  %z = s32[] constant(0)
  %t0 = (s32[], f32[4]) tuple(%z, %a)
  %w = (s32[], f32[4]) while(%t0), condition=%cond, body=%body
  ROOT %r = f32[4] get-tuple-element(%w), index=1
}
"""
    mod = _hlo.analyze(hlo)
    (loop,) = mod.loops
    assert (loop.trip_count, loop.source) == (7, "loop condition")
    assert [p.executions for p in mod.collectives] == [7]
    assert mod.flops == 7 * 2  # the counter add and the compare


def test_cli_output_keeps_every_column_and_cached_compiles_say_so(t3000, capsys):
    report = inspect(lambda t: ttnn.all_gather(t, dim=3), _x(t3000))
    report.print()  # stdout is captured, not a terminal: wide table, nothing cut
    printed = capsys.readouterr().out
    assert "all-gather" in printed and "runs/step" in printed and "…" not in printed
    again = inspect(lambda t: ttnn.all_gather(t, dim=3), _x(t3000))
    assert again.compile_seconds is None or again.compile_seconds >= 0
    trace_like = ttnn.inspect.report_compiled(
        __import__("jax").jit(lambda a: a + 1).lower(np.ones(3)).compile(), mesh=t3000
    )
    assert trace_like.compile_seconds is None
    assert "compile time: cached" in "\n".join(trace_like.summary_lines())


def test_memory_lines_separate_chip_resident_from_cpu_temporaries(t3000):
    report = inspect(lambda t: ttnn.exp(ttnn.exp(t)), _x(t3000))
    m = report.memory
    assert m.resident_bytes == m.argument_bytes + m.output_bytes - m.alias_bytes == 2 * 4096
    text = "\n".join(report.summary_lines())
    assert "chip-resident memory per device: 8.00 KiB" in text
    assert "CPU backend temporaries per device" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["nope_pkg.mod:f"], "no module named 'nope_pkg'"),
        (["models.llama.inspect_targets:nope"], "has no 'nope'.\nfix: one of build, decode_step"),
        (["ttjax"], "must look like package.module:factory"),
        (
            ["models.llama.inspect_targets:build", "--arg", "batch"],
            "--arg 'batch' is not key=value",
        ),
        (["models.llama.inspect_targets:build", "--mesh", "64x64"], "needs 4096 devices"),
    ],
)
def test_cli_errors_are_one_message_with_a_fix(argv, needle, capsys):
    assert main(["inspect", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ttjax inspect: error (") and needle in err, err
    assert "\nfix: " in err and "Traceback" not in err and len(err.strip().splitlines()) <= 4
    assert main(["inspect", *argv, "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err
