"""The runnable entry points (demos, the GPU benchmark's CPU mode) run end to end."""

from __future__ import annotations

import json

import pytest
from _reference import save_tiny_hf_llama
from conftest import mesh_of

from benchmarks import bench_tt_transformers, gpu_decode
from models.falcon import demo as falcon_demo
from models.llama import demo as llama_demo


@pytest.mark.slow
def test_falcon_demo_both_setups(capsys):
    assert falcon_demo.main(["--mode", "tp", "--hidden", "256"]) == 0
    assert falcon_demo.main(["--mode", "dp", "--hidden", "256"]) == 0
    out = capsys.readouterr().out
    assert "collectives: {'all-gather': 1}" in out and "collectives: none" in out
    assert "one-device reference" in out and "(compiled beforehand)" in out
    assert "threads sharing" in out and "weights: RANDOM" in out


@pytest.mark.slow  # a whole run in a subprocess; `make test-all`
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
    assert "weights: RANDOM" in out and "gibberish" in out
    assert "tokenizer: byte-level fallback" in out
    assert "decode" in out and "4/4" in out  # the progress bars ran to the end


@pytest.mark.slow  # a whole run in a subprocess; `make test-all`
def test_gpu_decode_runs_on_the_cpu_with_tiny(tmp_path):
    path = tmp_path / "decode.json"
    args = ["--config", "tiny", "--steps", "2", "--loop", "2", "--json", str(path)]
    assert gpu_decode.main([*args, "--kernels", "xla,pallas", "--fuse-gate-up", "no,yes"]) == 0
    result = json.loads(path.read_text())
    for name in ("xla", "pallas", "xla_fused", "pallas_fused"):  # Pallas runs interpreted here
        figures = result[f"ttjax_in_out_{name}"]
        assert figures["kernels"] == name.split("_")[0]
        assert figures["fuse_gate_up"] == name.endswith("fused")
        assert figures["weight_bytes_per_step"] > 0 and figures["back_to_back_ms"] > 0
    assert result["flax_reference"]["back_to_back_ms"] > 0
    # every decode matmul of the tiny model timed alone, XLA and the Pallas GEMV
    assert set(result["gemv"]) == {
        f"{n}_in_out" for n in ("qkv", "o", "gate_or_up", "gate_up_fused", "down", "lm_head")
    }
    assert all(r["xla_TBps"] > 0 and r["pallas_default_TBps"] > 0 for r in result["gemv"].values())


@pytest.mark.slow
def test_llama_demo_with_a_checkpoint_compares_with_transformers(tmp_path, capsys):
    pytest.importorskip("transformers")
    save_tiny_hf_llama(tmp_path)
    args = ["--mesh", "1x2", "--mode", "tp", "--checkpoint", str(tmp_path)]
    assert llama_demo.main([*args, "--batch", "2", "--max-new-tokens", "3", "--no-reference"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "vs transformers" in ln)
    pcc = float(line.split("PCC ")[1].split(",")[0])
    diff = float(line.split("max |diff| ")[1].split(",")[0])
    assert pcc > 0.9999 and diff < 1e-3 and "same greedy tokens: True" in line
    assert f"weights: {tmp_path}" in out


def test_tt_transformers_bench_skips_without_tt_metal_home(monkeypatch, capsys):
    """Without ``TT_METAL_HOME`` the suite gives no figure and says why in one line."""
    monkeypatch.delenv("TT_METAL_HOME", raising=False)
    assert bench_tt_transformers.run(mesh_of((1, 8))) == []
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        "[tt_transformers] skipped: TT_METAL_HOME is unset (point it at a tt-metal checkout)"
    ]
