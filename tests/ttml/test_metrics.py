"""A run you can watch: the metrics line (terminal and ``train.log``), ``metrics.csv``, the MFU's
peak, ``--set`` overrides, ``keep_checkpoints`` and ``--profile``, with output to a pipe."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import pytest
from _tiny import cli_config, cli_run

from models.nanogpt.train import cli
from ttjax.ttml.checkpoint import Checkpointer
from ttjax.ttml.config import load_config, parse_override
from ttjax.ttml.errors import TrainingConfigError
from ttjax.ttml.metrics import MetricsLog, Peak, _cpu_peak

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
    assert "avx2" in peak.source and "/ 4 host devices" in peak.source
    assert _cpu_peak(str(tmp_path / "missing"), 1).flops is None


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
    assert "peak" in logged and "host devices" in logged  # where the MFU's peak comes from
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
