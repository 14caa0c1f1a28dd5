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
    matmul_flops = 2 * 32 * hidden * per_dev_cols  # plus the bfloat8_b dequantization
    assert matmul_flops <= report.flops <= 1.1 * matmul_flops
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
