"""The runnable entry points (demos, the GPU benchmark's CPU mode) run end to end."""

from __future__ import annotations

import json

from benchmarks import gpu_decode
from models.falcon import demo as falcon_demo
from models.llama import demo as llama_demo


def test_falcon_demo_both_setups(capsys):
    assert falcon_demo.main(["--mode", "tp", "--hidden", "256"]) == 0
    assert falcon_demo.main(["--mode", "dp", "--hidden", "256"]) == 0
    out = capsys.readouterr().out
    assert "collectives: {'all-gather': 1}" in out and "collectives: none" in out


def test_llama_demo_tp_with_trace(capsys):
    args = [
        "--mesh",
        "t3000",
        "--mode",
        "tp",
        "--config",
        "tiny",
        "--trace",
        "--max-new-tokens",
        "5",
    ]
    assert llama_demo.main(args) == 0
    out = capsys.readouterr().out
    assert "greedy tokens identical: True" in out
    assert "tokens/s/user" in out and "2.0 all-reduce" in out


def test_gpu_decode_runs_on_the_cpu_with_tiny(tmp_path):
    path = tmp_path / "decode.json"
    args = ["--config", "tiny", "--steps", "2", "--loop", "2", "--json", str(path)]
    assert gpu_decode.main(args) == 0
    result = json.loads(path.read_text())
    figures = result["ttjax_in_out"]
    assert figures["weight_bytes_per_step"] > 0 and figures["back_to_back_ms"] > 0
    assert result["flax_reference"]["back_to_back_ms"] > 0
