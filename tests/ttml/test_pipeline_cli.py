"""``python -m models.nanogpt.train`` with ``enable_pp``: the PP run follows the single-device run.

Same YAML, same data, same seed: the CLI's per-step losses with PP+DDP (2x4: 2 DDP groups x 4
stages, 1F1B over 2 microbatches) equal the 1x1 run's, and ``--resume`` from a PP checkpoint (staged parameters,
orbax) continues bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from _tiny import YAML_MODEL as MODEL

from models.nanogpt.train import cli
from ttjax.errors import ConfigError

# The shipped descriptors: N150 for the 1x1 run, T3000 2x4 for PP+DDP.
DESCRIPTORS = {1: "n150_mesh_graph_descriptor.textproto", 8: "t3k_mesh_graph_descriptor.textproto"}


def _config(tmp: Path, name: str, pp: bool, steps: int = 3) -> Path:
    doc = {
        "training_config": {
            "project_name": name,
            "seed": 5489,
            "batch_size": 4,
            "max_steps": steps,
            "eval_every": 0,
            "model_save_interval": 2,
            "checkpoint_dir": str(tmp / name / "ckpt"),
            "tokenizer_type": "char",
            "scheduler_type": "warmup_cosine",
            "use_clip_grad_norm": True,
            "clip_grad_norm_max_norm": 1.0,
            "optimizer": {"type": "AdamW", "lr": 0.003, "weight_decay": 0.01},
        },
        "transformer_config": MODEL,
        "scheduler_config": {"warmup_steps": 1, "min_lr": 0.0003},
        "device_config": {
            "mesh_shape": [2, 4] if pp else [1, 1],
            "enable_ddp": pp,
            "enable_pp": pp,
        },
    }
    if pp:
        doc["multihost_config"] = {
            "pipeline_parallel_config": {
                "num_blocks": 4,
                "blocks_per_rank": {0: 1, 1: 1, 2: 1, 3: 1},
                "num_microbatches": 2,
                "schedule": "1f1b",
            }
        }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(tmp: Path, config: Path, devices: int, monkeypatch, *extra: str) -> list[float]:
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", DESCRIPTORS[devices])
    out = tmp / (config.stem + "_out" + "".join(extra).replace("-", "_"))
    assert cli(["--config", str(config), "--no-progress", "--out", str(out), *extra]) == 0
    log = json.loads((out / "log.json").read_text())
    return [r["loss"] for r in log["steps"]]


@pytest.mark.slow  # `make test-all`: keeps `make test` under 10 minutes (the pipeline's equality runs in test_pipeline.py)
def test_cli_pp_losses_equal_single_device(tmp_path, monkeypatch):
    single = _run(tmp_path, _config(tmp_path, "single", pp=False, steps=2), 1, monkeypatch)
    pp = _run(tmp_path, _config(tmp_path, "pp", pp=True, steps=2), 8, monkeypatch)
    assert len(pp) == 2
    np.testing.assert_allclose(pp, single, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_cli_pp_resume_is_bit_exact(tmp_path, monkeypatch):
    pp = _run(tmp_path, _config(tmp_path, "pp", pp=True), 8, monkeypatch)
    # A run stopped at step 2 saved its staged parameters (orbax); resuming replays step 3 exactly.
    stopped_config = _config(tmp_path, "stopped", pp=True)
    _run(tmp_path, stopped_config, 8, monkeypatch, "--max-steps", "2")
    resumed = _run(tmp_path, stopped_config, 8, monkeypatch, "--resume")
    assert len(pp) == 3 and resumed == pp


def test_cli_pp_bad_microbatches_names_the_value(tmp_path, monkeypatch):
    path = _config(tmp_path, "bad", pp=True)
    doc = yaml.safe_load(path.read_text())
    doc["multihost_config"]["pipeline_parallel_config"]["num_microbatches"] = 3
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", DESCRIPTORS[8])
    with pytest.raises(
        ConfigError, match=r"num_microbatches=3 does not divide the batch of 2 per DDP group"
    ):
        cli(["--config", str(path), "--no-progress", "--out", str(tmp_path / "o")])
