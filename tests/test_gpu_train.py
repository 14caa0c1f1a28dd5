"""``benchmarks/gpu_train.py`` on the CPU at ``--config tiny``: ttjax's jitted TrainStep and the
script's PyTorch nanoGPT (an independent implementation, weights copied) train the same losses
(float32 and bf16 mixed precision, both in the slow suite: `make test-all`), and the JSON has the fields the
GPU run reports; the profile summary reads device time per CUDA stream and kernel from a trace."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import gpu_train
from benchmarks._profile import trace_summary

pytestmark = pytest.mark.torch


def _run(tmp_path, dtype: str, *extra: str) -> dict:
    pytest.importorskip("torch")
    path = tmp_path / f"train_{dtype}.json"
    args = ["--config", "tiny", "--no-compile", "--dtype", dtype, "--json", str(path), *extra]
    assert gpu_train.main([*args, "--steps", "1", "--rounds", "1", "--gate-steps", "3"]) == 0
    return json.loads(path.read_text())


@pytest.mark.slow  # a whole run in a subprocess; `make test-all`
def test_ttjax_trains_the_same_losses_as_torch(tmp_path):
    # cuDNN attention is asked for, which the CPU lacks: the run says so and uses XLA's.
    f32 = _run(
        tmp_path,
        "float32",
        *("--attention", "cudnn", "--profile", str(tmp_path / "prof"), "--remat", "full"),
    )
    assert "cuDNN" in f32["cudnn_attention_error"] and f32["model"]["attention"] == "xla"
    ours, torch_losses = f32["gate"]["ttjax_losses"], f32["gate"]["torch_losses"]
    np.testing.assert_allclose(ours, torch_losses, rtol=1e-5)  # same model, AdamW and clipping
    assert ours[2] < ours[1] < ours[0]  # the steps train
    # GPT-2's count: wte + per layer 12 C^2 + 13 C + ln_f; FLOPs as nanoGPT's estimate_mfu.
    V, L, C, H, T, B = 512, 2, 128, 4, 64, 4
    n = V * C + L * (12 * C * C + 13 * C) + 2 * C
    assert f32["non_embedding_params"] == n
    assert f32["flops_per_step"] == (6 * n + 12 * L * H * (C // H) * T) * B * T
    assert f32["peak_flops"] is None and f32["device"] == "cpu"
    sides = (
        ("ttjax", "ttjax TrainStep (xla attention, remat none)"),
        ("ttjax_remat_full", "ttjax TrainStep (xla attention, remat full)"),  # --remat: one more
        ("torch", "torch eager"),
    )
    for side, label in sides:
        figures = f32[side]
        assert figures["label"] == label and figures["mfu"] is None
        assert {"compile_s", "ms_per_step", "tokens_per_s", "rounds_ms"} <= set(figures)
    assert "ratio_ttjax_over_torch" in f32
    # --profile: traces kept; torch's top ops by time (CPU ops here, CUDA kernels on a GPU).
    torch_top = [name for name, _ in f32["profile"]["torch"]["top_kernels_ms_per_step"]]
    assert {"aten::mm", "aten::addmm"} & set(torch_top)
    assert (tmp_path / "prof" / "torch_trace.json.gz").exists()
    assert list((tmp_path / "prof" / "jax").rglob("*.trace.json.gz"))


@pytest.mark.slow
def test_bf16_mixed_precision_losses_equal_torch_autocast(tmp_path):
    f32, bf16 = _run(tmp_path, "float32"), _run(tmp_path, "bfloat16")
    assert bf16["gate"]["max_rel_diff"] < 2e-3 and "cudnn_attention_error" not in bf16
    # bf16 compute on both sides: close to float32, but not float32 (the casts take effect).
    for side in ("ttjax_losses", "torch_losses"):
        np.testing.assert_allclose(bf16["gate"][side], f32["gate"][side], rtol=2e-3)
        assert bf16["gate"][side][0] != f32["gate"][side][0]


def test_mixed_precision_computes_in_bf16_with_fp32_gradients():
    seen = []

    def loss_fn(params, idx, targets):
        seen.append(params["w"].dtype)
        return jnp.sum((idx @ params["w"]).astype(jnp.float32) - targets) ** 2

    params = {"w": jnp.full((4, 2), 0.1, jnp.float32)}
    idx, targets = jnp.ones((3, 4), jnp.bfloat16), jnp.zeros((3, 2), jnp.float32)
    grads = jax.grad(gpu_train.mixed_precision(loss_fn, jnp.bfloat16))(params, idx, targets)
    assert seen == [jnp.bfloat16] and grads["w"].dtype == jnp.float32
    # 2 * sum(0.4 * 6 entries) * 3 rows: the fp32 value of the bf16 computation.
    np.testing.assert_allclose(grads["w"], np.full((4, 2), 2 * 2.4 * 3), rtol=1e-2)
    assert gpu_train.mixed_precision(loss_fn, jnp.dtype("float32")) is loss_fn


def test_gate_fails_loudly_when_losses_differ():
    assert gpu_train.check_losses([6.0, 5.0], [6.0, 5.05], rtol=2e-2) == pytest.approx(0.0099, 1e-3)
    with pytest.raises(RuntimeError, match="not the same training step"):
        gpu_train.check_losses([6.0, 5.0], [6.0, 5.2], rtol=2e-2)


def test_peak_flops_by_device_kind():
    assert gpu_train.peak_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert gpu_train.peak_flops("NVIDIA H100 PCIe") == 756e12
    assert gpu_train.peak_flops("NVIDIA H200") == 989e12
    assert gpu_train.peak_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert gpu_train.peak_flops("cpu") is None


def test_trace_summary_counts_stream_kernels_per_step():
    def meta(pid, name, tid=None):
        kind = "process_name" if tid is None else "thread_name"
        return {"ph": "M", "pid": pid, "tid": tid, "name": kind, "args": {"name": name}}

    def x(pid, tid, name, dur):
        return {"ph": "X", "pid": pid, "tid": tid, "name": name, "dur": dur}

    events = [
        meta(1, "/host:CPU"),
        meta(1, "python", 10),
        meta(2, "/device:GPU:0"),
        meta(2, "Stream #7(Compute)", 7),
        meta(2, "XLA Ops", 99),
        x(1, 10, "PjitFunction(step)", 5000),  # host: not device time
        x(2, 7, "gemm", 3000),
        x(2, 7, "gemm", 1000),
        x(2, 7, "fusion", 1000),
        x(2, 99, "dot.1", 4000),  # derived line: the same time again, not a kernel
    ]
    got = trace_summary(events, steps=2)
    assert got["lines_ms_per_step"] == {"Stream #7(Compute)": 2.5, "XLA Ops": 2.0}
    assert got["top_kernels_ms_per_step"] == [["gemm", 2.0], ["fusion", 0.5]]
