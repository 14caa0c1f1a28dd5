"""The training CLI over 2 real processes (``ttjax-run`` on 127.0.0.1, 2 ranks x 4 devices) with
its default settings (metrics line, MFU count, validation, checkpoints, progress bar on): DDP,
TP+DDP, FSDP and PP each train 3 steps of a tiny NanoGPT, and their losses equal the
one-process run's (`make test`: DDP and PP; `make test-all`: all four, in one launch). Every cross-process call must happen on every rank, in the same order; a
rank waiting on a call the other never makes (docs/multihost.md's recipe hung so at step 0:
only rank 0 lowered the step for the MFU) fails here within the time bound: the launcher's
process group is killed and no rank is left behind."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import train_strategies
import yaml
from _launch import ROOT, Watched, assert_all_gone, descendants, launcher_argv, write_bindings

from models.nanogpt.train import build as nanogpt_build
from ttjax.ttml import cli

pytestmark = pytest.mark.timeout(600)

MGD = ROOT / "ttjax" / "descriptors" / "t3k_1x8_mesh_graph_descriptor.textproto"
STEPS = 3
# The launch: two ranks start, then train 3 steps of each strategy (about 1.5 min on 2 idle
# cores; 4.5 min with 20 other processes running).
LIMIT_S = 480

# strategy -> (the shipped config it shrinks, device_config, pipeline settings)
STRATEGIES = {
    "ddp": ("training_nanogpt_ddp_1x8.yaml", {"mesh_shape": [1, 8]}, None),
    "tp_ddp": ("training_nanogpt_tp_ddp.yaml", {"mesh_shape": [2, 4]}, None),
    "fsdp": ("training_nanogpt_fsdp.yaml", {"mesh_shape": [1, 8]}, None),
    # 8 stages over both processes: the activations cross from rank 0 to rank 1 at stage 4.
    "pp": (
        "training_nanogpt_pp.yaml",
        {"mesh_shape": [1, 8]},
        {"num_blocks": 8, "num_microbatches": 2, "schedule": "1f1b"},
    ),
}

# `make test` trains DDP and PP (whose activations cross from one process to the other) over the
# two processes; `make test-all` adds TP+DDP and FSDP to the same launch.
SLOW = ("tp_ddp", "fsdp")

# The one-process run each is compared with: DDP, TP+DDP and FSDP train the same model on the
# same data, and one process gives the same losses on every mesh (the single-device losses,
# tests/ttml/test_train.py), so one reference serves the three; PP's 8-block model has its own.
REFERENCE = {"ddp": "ddp", "tp_ddp": "ddp", "fsdp": "ddp", "pp": "pp"}


def tiny_config(tmp: Path, strategy: str) -> Path:
    """``strategy``'s shipped config, shrunk: a 32-wide NanoGPT, context 8, batch 8, 3 steps,
    validated and saved at the last step (the trainer always saves it), logging at its
    default."""
    source, device, pipeline = STRATEGIES[strategy]
    doc = yaml.safe_load((ROOT / "configs" / source).read_text())
    t = doc["training_config"]
    t.pop("model_config")
    t.update(
        project_name=f"mp_{strategy}",
        batch_size=8,
        max_steps=STEPS,
        eval_every=STEPS,
        model_save_interval=100,
        checkpoint_dir=str(tmp / "ckpt"),
    )
    t["transformer_config"] = {
        "model_type": "gpt2",
        "num_heads": 4,
        "embedding_dim": 32,
        "dropout_prob": 0.0,
        "num_blocks": pipeline["num_blocks"] if pipeline else 1,
        "vocab_size": 128,
        "max_sequence_length": 8,
        "weight_tying": "enabled",
        "positional_embedding_type": "trainable",
    }
    doc["device_config"].update(device)
    doc["scheduler_config"]["warmup_steps"] = 1
    if pipeline:
        pp = doc["multihost_config"]["pipeline_parallel_config"]
        pp.update(pipeline)
        pp["blocks_per_rank"] = {r: 1 for r in range(8)}
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def rank0_section(text: str, strategy: str) -> list[str]:
    """Rank 0's output lines while it trained ``strategy`` (the driver prints its name first)."""
    prefix = "[1,0]<stdout>:"
    lines = [x.removeprefix(prefix) for x in text.splitlines() if x.startswith(prefix)]
    start = lines.index(f"strategy {strategy}")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("strategy ")), None)
    return lines[start + 1 : end]


def losses(out: Path) -> tuple[list[float], list[float]]:
    """(train losses, validation losses) from a run's ``log.json``."""
    steps = json.loads((out / "log.json").read_text())["steps"]
    assert [r["step"] for r in steps] == list(range(1, STEPS + 1))
    return [r["loss"] for r in steps], [r["val_loss"] for r in steps if "val_loss" in r]


def selected(request: pytest.FixtureRequest) -> list[str]:
    """The strategies of this file's tests that this session runs (``-m "not slow"``: DDP, PP)."""
    chosen = {
        item.callspec.params["strategy"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    }
    return [name for name in STRATEGIES if name in chosen]


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """Each selected strategy's 3 steps over 2 ranks (``ttjax-run``, one launch running the CLI
    once per strategy) and, while the ranks train, the one-process references in this process."""
    tmp = tmp_path_factory.mktemp("cli_mp")
    strategies = selected(request)
    references = sorted({REFERENCE[name] for name in strategies})
    for where, names in (("two", strategies), ("one", references)):
        for name in names:
            (tmp / where / name).mkdir(parents=True)
            tiny_config(tmp / where / name, name)
    # A line descriptor accepts every 8-device mesh shape of the configs ([1, 8], [2, 4]).
    bindings = write_bindings(
        tmp / "bindings.yaml", ["0,1,2,3", "4,5,6,7"], mesh_graph_desc_path=str(MGD)
    )
    program = [sys.executable, str(Path(train_strategies.__file__)), str(tmp / "two")]
    argv = launcher_argv(bindings, tmp, *program, *strategies)
    argv[argv.index("--timeout") + 1] = str(LIMIT_S)  # the launcher's own bound: the same
    w = Watched(argv)
    seen: set[int] = set()
    start = time.monotonic()
    try:
        for name in references:
            seen.update(descendants(w.proc.pid))
            argv = ["--config", str(tmp / "one" / name / "config.yaml")]
            argv += ["--out", str(tmp / "one" / name / "out"), "--no-progress"]
            assert cli.main(argv, build=nanogpt_build, prog="reference") == 0
        while w.proc.poll() is None and time.monotonic() < start + LIMIT_S:
            seen.update(descendants(w.proc.pid))
            time.sleep(0.2)
        code, _ = w.wait(timeout=max(1.0, start + LIMIT_S - time.monotonic()))  # kills on timeout
    finally:
        w.kill()
        assert_all_gone(sorted(seen), within=15)
    text = w.text()
    assert code == 0, text[-4000:]
    return tmp, text


@pytest.mark.parametrize(
    "strategy", [pytest.param(s, marks=[pytest.mark.slow] if s in SLOW else []) for s in STRATEGIES]
)
def test_two_processes_train_like_one(runs, strategy):
    tmp, text = runs
    # Rank 0 printed this strategy's metrics line (default log_every) at its last step; rank 1
    # printed none.
    line = f"step {STEPS}/{STEPS}  loss"
    assert not [x for x in text.splitlines() if x.startswith("[1,1]") and line in x]
    lines = [x for x in rank0_section(text, strategy) if line in x]
    assert len(lines) == 1 and "mfu n/a" not in lines[0], text[-4000:]
    got, got_val = losses(tmp / "two" / strategy / "out")
    want, want_val = losses(tmp / "one" / REFERENCE[strategy] / "out")
    assert len(got_val) == len(want_val) == 1  # at the last step
    # Gloo sums the all-reduces' partial sums in another order than XLA's in-process ones.
    np.testing.assert_allclose(got, want, rtol=2e-5)
    np.testing.assert_allclose(got_val, want_val, rtol=2e-5)
    assert np.all(np.isfinite(got))
