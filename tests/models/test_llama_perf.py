"""models.llama.perf: the precision recipes reach the compiled program, the calibration rows are
tt-metal's published figures, each is predicted within 10%, and the plan search puts tt-metal's
published Llama-3.1-8B T3K layouts in their published order."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import ttjax as ttnn
from models.llama import perf
from models.llama.config import get_config
from models.llama.model import TtLlama
from ttjax import cost
from ttjax.hardware import MathFidelity


def test_weight_dtypes_set_each_weight_group_and_reach_dram_bytes(n300):
    fn, args, opts = perf.decode_target(n300, "tiny", batch=2, context=64)
    layers = args[0]["layers"]
    assert layers["w_in"].dtype == layers["w_up"].dtype == ttnn.bfloat4_b
    assert layers["w_out"].dtype == layers["wqkv"].dtype == ttnn.bfloat8_b
    assert args[0]["lm_head"].dtype == ttnn.bfloat8_b and args[1][0].dtype == ttnn.bfloat8_b
    report = ttnn.inspect.inspect(fn, *args, donate_argnums=opts["donate_argnums"])
    reads = {r.name: r.read_bytes for r in report.parameter_reads}
    c = get_config("tiny")
    w_in = sum(v for k, v in reads.items() if "'w_in'" in k)
    assert w_in == c.n_layers * c.dim * (c.ffn_dim // 2) * 0.5625  # bfloat4_b, half per chip
    assert sum(v for k, v in reads.items() if "'embed'" in k) == 2 * c.dim // 2 * 2  # 2 rows
    with pytest.raises(ttnn.errors.ConfigError, match="'w_gate'"):
        TtLlama(c, None, n300, weight_dtypes={"w_gate": ttnn.bfloat4_b})


def test_fidelity_mix_is_the_flop_share_of_each_op_group():
    c = get_config("llama-3.1-8b")
    mix = perf.fidelity_mix(c, "performance", "decode", 256)
    ff13 = 4 * c.dim * c.ffn_dim
    rest = (
        2 * c.dim * c.ffn_dim
        + 2 * c.dim * (c.n_heads + 2 * c.n_kv_heads) * c.head_dim
        + 2 * c.dim * c.dim
        + 2 * c.dim * c.vocab_size / c.n_layers
        + 4 * c.n_heads * c.head_dim * 256
    )
    assert mix[MathFidelity.LoFi] == pytest.approx(ff13 / (ff13 + rest))
    assert sum(mix.values()) == pytest.approx(1.0)
    assert set(perf.fidelity_mix(c, "bfp8", "prefill", 128)) == {
        MathFidelity.HiFi2,
        MathFidelity.HiFi4,
    }


def test_plan_refuses_what_it_cannot_plan():
    with pytest.raises(ttnn.errors.ConfigError, match=r"batch=0.*\n.*fix:"):
        perf.plan("tiny", "n300", batch=0)
    with pytest.raises(ttnn.errors.ConfigError, match="exactly one"):
        perf.plan("tiny", "n300", batch=2, batch_per_replica=1)
    with pytest.raises(ttnn.errors.ConfigError, match="recipe='fp4'"):
        perf.model(ttnn.open_mesh_device(ttnn.MeshShape(1, 1)), "tiny", recipe="fp4")


@pytest.mark.skipif(not os.environ.get("TT_METAL_HOME"), reason="needs TT_METAL_HOME (tt-metal)")
def test_calibration_rows_are_tt_metals_published_figures():
    text = (Path(os.environ["TT_METAL_HOME"]) / "models/tt_transformers/PERF.md").read_text()
    perf_table = text.split("## Performance")[1].split("## Accuracy")[0]
    published = {}
    for line in perf_table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and re.match(r"Llama-3\.1-(8|70)B", cells[0]):
            published[(cells[0], cells[1])] = (cells[4], cells[5])
    names = {"llama-3.1-8b": "Llama-3.1-8B", "llama-3.1-70b": "Llama-3.1-70B"}
    devices = {"n150": "N150", "n300": "N300", "t3000": "T3K"}
    for row in perf.ROWS:
        if row.source != perf.PERF_MD:
            continue
        speed, ttft = published[(names[row.config], devices[row.system])]
        if row.phase == "decode":
            assert row.published == float(speed)
        else:
            assert row.published * 1e3 == pytest.approx(float(ttft))
    assert published[("Llama-3.1-8B", "T3K  (DP=4)")][0] == "39.6"
    assert published[("Llama-3.1-8B", "T3K  (DP=8)")][0] == "24.9"


@pytest.mark.slow
def test_every_calibration_row_is_predicted_within_ten_percent_and_refits_the_same():
    found = perf.samples()
    table = perf.calibration_table(perf.ROWS, found, cost.CALIBRATION)
    assert all(abs(r["error"]) < 0.10 for r in table), table
    refit = cost.fit(found)
    assert refit.dram_efficiency == pytest.approx(cost.CALIBRATION.dram_efficiency, rel=0.01)
    assert refit.layer_seconds["decode"] == pytest.approx(
        cost.CALIBRATION.layer_seconds["decode"], rel=0.01
    )


@pytest.mark.slow
def test_plan_puts_the_published_8b_t3k_layouts_in_their_published_order():
    rows = perf.plan("llama-3.1-8b", "t3000", batch_per_replica=1, recipes=("performance",))
    published = [r for r in rows if r.published is not None]
    assert [r.layout for r in published] == ["TP=8", "DP=4 x TP=2", "DP=8 x TP=1"]
    assert [r.published for r in published] == [64.3, 39.6, 24.9]
    assert all(r.fits for r in rows)
