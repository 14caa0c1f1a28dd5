"""A run you can watch: the metrics line (terminal and ``train.log``), ``metrics.csv``, the MFU's
peak, ``--set`` overrides, ``keep_checkpoints`` and ``--profile``, with output to a pipe; and the
MFU's two figures checked by hand: the FLOPs of the step that runs (matmul counts of a tiny
NanoGPT under DDP, TP, FSDP, CP, SP and PP; a pipeline's switch weighted by its schedule) and
the peak of the mesh's own devices."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from _tiny import cli_config, cli_run, dataset
from jax import lax

from models.nanogpt import train as nanogpt_train
from models.nanogpt.train import cli
from ttjax.inspect import report_compiled
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.checkpoint import Checkpointer
from ttjax.ttml.cli import model_vocab, train_step
from ttjax.ttml.config import load_config, parse_override
from ttjax.ttml.errors import TrainingConfigError
from ttjax.ttml.metrics import MetricsLog, Peak, _cpu_peak, mesh_peak
from ttjax.ttml.train import OptimizerSettings
from ttjax.ttml.trainer import LoopSettings, Trainer

ROOT = Path(__file__).resolve().parents[2]


def _records(n: int) -> list[dict]:
    """Step records as the trainer makes them: step i took i/10 s at 100 tokens/step."""
    return [
        {
            "step": i,
            "loss": 5.0 - i / 10,
            "grad_norm": 1.0 + i,
            "lr": 1e-3 * i,
            "tokens_per_s": 100 / (i / 10),
            "step_s": i / 10,
            **({"val_loss": 9.0} if i == 6 else {}),
        }
        for i in range(1, n + 1)
    ]


def test_metrics_line_every_n_steps_rates_over_the_window(tmp_path):
    printed: list[str] = []
    log = MetricsLog(
        tmp_path,
        log_every=3,
        last_step=7,
        flops_per_step=2e6,
        peak=Peak(1e9, "test"),
        print_fn=printed.append,
    )
    rows = [r for r in map(log.record, _records(7)) if r is not None]
    log.close()
    assert [r["step"] for r in rows] == [3, 6, 7]  # every 3rd and the last
    # steps 2, 3 (step 1 compiled: left out): 200 tokens in 0.5 s; steps 4..6: 300 in 1.5 s
    assert rows[0]["tokens_per_s"] == pytest.approx(200 / 0.5)
    assert rows[1]["tokens_per_s"] == pytest.approx(300 / 1.5)
    assert rows[1]["mfu"] == pytest.approx(2e6 * 3 / 1.5 / 1e9)
    assert rows[2]["mfu"] == pytest.approx(2e6 / 0.7 / 1e9)
    assert len(printed) == 3 and printed[1].startswith("step 6/7  loss 4.4000  val 9.0000")
    assert "mfu 0.40%" in printed[1] and "tokens/s 200" in printed[1]
    assert (tmp_path / "train.log").read_text().count("step ") == 3
    with (tmp_path / "metrics.csv").open() as f:
        got = list(csv.DictReader(f))
    assert [int(r["step"]) for r in got] == [3, 6, 7]
    assert float(got[1]["val_loss"]) == 9.0 and got[0]["val_loss"] == ""
    # a resumed launch at step 3 keeps the rows up to 3, then appends its own
    log = MetricsLog(tmp_path, log_every=3, last_step=7, start_step=3, print_fn=printed.append)
    for rec in _records(7)[3:]:
        log.record(rec)
    log.close()
    with (tmp_path / "metrics.csv").open() as f:
        assert [int(r["step"]) for r in csv.DictReader(f)] == [3, 6, 7]
    assert "mfu n/a" in printed[-1]  # no FLOP count given


def test_cpu_peak_is_cores_times_clock_times_vector_flops(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("cpu MHz\t\t: 2000.0\nflags\t\t: fpu sse avx2 fma\n")
    cores = len(os.sched_getaffinity(0))
    peak = _cpu_peak(str(info), 4)
    assert peak.flops == cores * 2000e6 * (2 * 2 * 8) / 4  # 2 FMA units x 8 fp32 lanes (avx2)
    assert "avx2" in peak.source and "/ 4 devices" in peak.source
    assert _cpu_peak(str(tmp_path / "missing"), 1).flops is None


def test_the_peak_is_the_mesh_devices_own(tmp_path, monkeypatch):
    """A CPU's peak is shared by the mesh's devices only (the 32 virtual devices of the test
    process idle but for the mesh's), and the run's peak adds up the mesh's devices."""
    monkeypatch.delenv("TTJAX_PEAK_FLOPS", raising=False)
    info = tmp_path / "cpuinfo"
    info.write_text("cpu MHz\t\t: 1000.0\nflags\t\t: fpu sse avx2 fma\n")
    host = len(os.sched_getaffinity(0)) * 1000e6 * 32
    devices = jax.devices()
    for n in (1, 2, 8):
        mesh = jax.sharding.Mesh(np.asarray(devices[:n]).reshape(1, n), ("a", "b"))
        peak = mesh_peak(mesh, str(info))
        assert peak.devices == n and peak.flops == pytest.approx(host / n)
        assert peak.total == pytest.approx(host) and f"/ {n} devices" in peak.source
    monkeypatch.setenv("TTJAX_PEAK_FLOPS", "1e12")
    peak = mesh_peak(jax.sharding.Mesh(np.asarray(devices[:4]).reshape(2, 2), ("a", "b")))
    assert (peak.flops, peak.devices, peak.total) == (1e12, 4, 4e12)


def test_mfu_divides_by_the_mesh_peak_and_warns_above_100_percent(tmp_path):
    printed: list[str] = []
    peak = Peak(1e9, "CPU: test", devices=4)
    log = MetricsLog(
        tmp_path, log_every=1, last_step=3, flops_per_step=2e9, peak=peak, print_fn=printed.append
    )
    recs = [{**r, "step_s": 1.0} for r in _records(3)]
    rows = [log.record(r) for r in recs]
    assert rows[0]["mfu"] == pytest.approx(0.5)  # 2e9 FLOPs in 1 s over 4 x 1e9 FLOP/s
    assert not any("warning" in x for x in printed)
    log.flops_per_step = 8e9  # a count above what the devices can do in the time
    assert log.record({**recs[1], "step": 2})["mfu"] == pytest.approx(2.0)
    log.record({**recs[2], "step": 3})
    log.close()
    warned = [x for x in printed if x.startswith("warning: mfu 200.00% is above 100%")]
    assert len(warned) == 1 and "turbo clock" in warned[0]  # said once, with why
    assert "fix: set $TTJAX_PEAK_FLOPS" in warned[0]
    assert "is above 100%" in (tmp_path / "train.log").read_text()


def _tick_program(kinds: np.ndarray):
    """A scan over ticks whose switch runs nothing, one or two [16, 32] @ [32, 32] matmuls."""

    def f(x, w):
        def idle(h):
            return h

        def one(h):
            return h @ w

        def two(h):
            return (h @ w) @ w

        def tick(h, k):
            return lax.switch(k, [idle, one, two], h), None

        return lax.scan(tick, x, jnp.asarray(kinds))[0]

    x = jnp.ones((16, 32), jnp.float32)
    return jax.jit(f).lower(x, jnp.ones((32, 32), jnp.float32)).compile()


def test_branch_weights_count_the_branches_that_run():
    """A conditional counts its costliest branch (an upper bound) unless the program says how
    often each runs; then the count is exact: 2 x 16 x 32 x 32 FLOPs per matmul run."""
    kinds = np.array([0, 1, 2, 1, 0, 0, 2, 1], np.int32)
    compiled = _tick_program(kinds)
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1), ("a", "b"))
    matmul = 2 * 16 * 32 * 32
    upper = report_compiled(compiled, mesh=mesh).flops
    assert upper == pytest.approx(len(kinds) * 2 * matmul, rel=0.01)

    def weights(flops, loops):
        return [float(np.mean(kinds == k)) for k in range(3)] if len(flops) == 3 else None

    exact = report_compiled(compiled, mesh=mesh, branch_weights=weights).flops
    ran = sum(int(k) for k in kinds) * matmul  # kind k runs k matmuls
    assert exact == pytest.approx(ran, rel=0.01)


# strategy -> (shipped config, pipeline settings): each trains the same tiny NanoGPT on an N300's
# [1, 2] mesh (2 devices keep the compiles short; the count is per mesh, whatever its size).
STRATEGIES = {
    "ddp": ("training_nanogpt_ddp_1x8.yaml", None),
    "tp": ("training_nanogpt_tp_ddp.yaml", None),
    "fsdp": ("training_nanogpt_fsdp.yaml", None),
    "cp": ("training_nanogpt_cp.yaml", None),
    "tp_sp": ("training_nanogpt_tp_ddp_sp.yaml", None),
    "pp": ("training_nanogpt_pp.yaml", {"num_microbatches": 2, "schedule": "1f1b"}),
}
D, HEADS, T, V, B = 256, 4, 16, 128, 8  # width, heads, context, vocabulary, global batch


def _config(tmp: Path, strategy: str) -> tuple[Path, int]:
    source, pipeline = STRATEGIES[strategy]
    doc = yaml.safe_load((ROOT / "configs" / source).read_text())
    t = doc["training_config"]
    t.pop("model_config")
    blocks = 2 if pipeline else 1
    t.update(batch_size=B, checkpoint_dir=str(tmp / "ckpt"))
    t["transformer_config"] = {
        "model_type": "gpt2",
        "num_heads": HEADS,
        "embedding_dim": D,
        "dropout_prob": 0.0,
        "num_blocks": blocks,
        "vocab_size": V,
        "max_sequence_length": T,
        "weight_tying": "enabled",
        "positional_embedding_type": "trainable",
        "runner_type": "default",  # no remat
    }
    doc["device_config"]["mesh_shape"] = [1, 2]
    if pipeline:
        pp = doc["multihost_config"]["pipeline_parallel_config"]
        pp.update(pipeline, num_blocks=blocks, blocks_per_rank={0: 1, 1: 1})
    path = tmp / f"{strategy}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, blocks


# PP (the schedule's weights) in `make test`; the others, 12 s of compiles each, in `make test-all`.
@pytest.mark.parametrize(
    "strategy", [s if s == "pp" else pytest.param(s, marks=pytest.mark.slow) for s in STRATEGIES]
)
def test_step_flops_match_the_matmuls_counted_by_hand(tmp_path, strategy, monkeypatch):
    """What the trainer divides by (its ``_step_cost``) against a count by hand: per token, a
    block's forward runs 24 d^2 (QKV, projection, MLP) + 4 T d (scores, values) matmul FLOPs
    and the tied head 2 d V; training runs each forward 3 times (forward, two backward
    matmuls), and 4 under PP, whose backward tick recomputes its stage's forward. The count
    is of both devices, and at most 12% above the matmuls (norms, softmax, AdamW): the
    pipeline's idle ticks and the first/last stage's embedding and head are not counted on
    every stage, and no device's work is counted twice, or not at all."""
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "n300_mesh_graph_descriptor.textproto")
    path, blocks = _config(tmp_path, strategy)
    run = load_config(path)
    ctx = AutoContext.get_instance()
    ctx.open_device(list(run.device.mesh_shape))
    try:
        par = ctx.initialize_parallelism_context(run.device.dims)
        parts = nanogpt_train.build(run, par, model_vocab(run, par))
        step = train_step(run, par, parts, OptimizerSettings.from_config(run))
        state = step.init_state(parts.whole_params())
        settings = LoopSettings(batch_size=B, seq_len=T, max_steps=1, progress=False)
        trainer = Trainer(step, dataset(), settings, tmp_path / "out")
        flops, peak = trainer._step_cost(state)
    finally:
        ctx.close_device()
    forward = B * T * (blocks * (24 * D * D + 4 * T * D) + 2 * D * V)
    by_hand = (4 if strategy == "pp" else 3) * forward
    assert by_hand <= flops <= 1.12 * by_hand, (flops, by_hand, flops / by_hand)
    assert peak is not None and peak.devices == 2


def test_set_overrides_are_checked_like_the_yaml(tmp_path):
    path = cli_config(tmp_path, "s")
    sets = ["training_config.batch_size=8", "transformer_config.num_blocks=3"]
    run = load_config(path, [*sets, "device_config.mesh_shape=[1, 8]"])
    got = (run.training.batch_size, run.model.num_blocks, run.device.mesh_shape)
    assert got == (8, 3, (1, 8))
    assert parse_override("training_config.optimizer.lr=3e-4") == (
        ("training_config", "optimizer", "lr"),
        "3e-4",  # read as the YAML file reads it; the check makes it a float
    )
    cases = {
        "training_config.batch_size=x": r"training_config\.batch_size = 'x' is not allowed",
        "training_config.bach_size=8": r"training_config: unknown key 'bach_size' \(did you mean",
        "training_config.keep_checkpoints=0": r"training_config\.keep_checkpoints = 0",
        "batch_size": r"--set 'batch_size' is not of the form section\.key=value",
    }
    for text, message in cases.items():
        with pytest.raises(TrainingConfigError, match=message):
            load_config(path, [text])


@pytest.mark.slow  # a whole run in a subprocess; `make test-all`
def test_a_run_piped_without_matplotlib_shows_the_metrics_line_and_keeps_n_checkpoints(tmp_path):
    config = cli_config(tmp_path, "piped")
    out = tmp_path / "out"
    sets = ["log_every=2", "model_save_interval=1", "keep_checkpoints=3"]
    run = cli_run(
        *("--config", str(config), "--out", str(out), "--profile", "1"),
        *(f"--set=training_config.{s}" for s in sets),
        env={"SHIM_NO_MATPLOTLIB": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [x for x in run.stdout.splitlines() if re.match(r"step +\d+/6  loss", x)]
    assert [int(x.split()[1].split("/")[0]) for x in lines] == [2, 4, 6]
    steps = json.loads((out / "log.json").read_text())["steps"]
    for line in lines:  # the line's loss is the step's
        n = int(line.split()[1].split("/")[0])
        assert f"loss {steps[n - 1]['loss']:.4f}" in line
        assert re.search(r"tokens/s [\d,]+  mfu \d+\.\d\d%  memory [\d.]+ MiB/device", line)
    logged = (out / "train.log").read_text()
    assert all(line in logged for line in lines)
    assert "peak" in logged and "/ 2 devices" in logged  # where the MFU's peak comes from
    with (out / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [float(r["loss"]) for r in rows] == [steps[n - 1]["loss"] for n in (2, 4, 6)]
    assert Checkpointer(tmp_path / "piped" / "ckpt").all_steps() == [4, 5, 6]  # keep 3
    traces = list((out / "profile").rglob("perfetto_trace.json.gz"))
    assert len(traces) == 1 and traces[0].stat().st_size > 0
    assert f"profile: steps 2..2 traced into {traces[0]}" in run.stdout
    # no matplotlib: the run finished and saved; one line says why there is no plot
    assert run.stderr.count("loss plot skipped: it needs matplotlib, the viz extra") == 1
    assert "Traceback" not in run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["plot"] is None
    assert not (out / "loss.png").exists()


def test_a_bad_set_names_the_key_and_the_set(tmp_path):
    config = str(cli_config(tmp_path, "bad"))
    with pytest.raises(TrainingConfigError) as got:
        cli(["--config", config, "--set", "training_config.batch_size=0"])
    first = str(got.value).splitlines()[0]
    assert "training_config.batch_size = 0 is not allowed" in first
    assert first.endswith("(read with --set training_config.batch_size=0)")


def test_profile_must_not_be_negative(tmp_path):
    with pytest.raises(TrainingConfigError, match=r"--profile -1 is negative"):
        cli(["--config", str(cli_config(tmp_path, "p")), "--profile", "-1"])
