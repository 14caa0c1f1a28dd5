"""tt-train's own training YAMLs (``$TT_METAL_HOME/tt-train/configs``) through ttjax's CLI.

Each single-host file trains 2 steps; a file that needs several hosts (``multihost_config.enabled``,
MPI or fabric sockets) or is not a language-model config (MNIST) is refused in one message naming
the key. The files are read from the tt-metal checkout, never copied into the project.

Full-size TTML models (TinyLlama's 1.1B parameters, 2048-token context) do not fit a 2-core CPU
test, so :func:`shrunk` writes a copy *into the test's tmp folder* with the sizes made small
(blocks, width, context, batch, accumulation; ``vocab_size: 32000`` dropped, so the tokenizer sets
the vocabulary as TTML does) and every other key as the file has it. The YAML that TTML's own
Shakespeare run uses is also read unchanged (:func:`test_shakespeare_yaml_unchanged_vocab`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from models.llama import train as llama_train
from models.nanogpt import train as nanogpt_train
from ttjax.ttml.cli import VOCAB_LINE, model_vocab, ttml_vocab_size
from ttjax.ttml.config import load_config
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.data import CharTokenizer, load_corpus
from ttjax.ttml.errors import TrainingConfigError

HOME = os.environ.get("TT_METAL_HOME")
CONFIGS = Path(HOME or "/nonexistent") / "tt-train" / "configs"
FILES = sorted(p.name for p in CONFIGS.glob("*.yaml")) if HOME else []
NEEDS_HOME = pytest.mark.skipif(
    not FILES, reason="TT_METAL_HOME is unset (or has no tt-train/configs): tt-train's YAMLs"
)
# One file trains in the fast suite (NanoGPT DDP on the N300 mesh); the rest are slow.
FAST = {"training_shakespeare_nanogpt_ddp_n300.yaml"}


def _raw(name: str) -> dict[str, Any]:
    data = yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def expected_refusal(name: str) -> str | None:
    """The message fragment a file is refused with, or None if it must train."""
    raw = _raw(name)
    if "mlp_config" in (raw.get("training_config") or {}):
        return "MNIST MLP example"
    if (raw.get("multihost_config") or {}).get("enabled"):
        return "multihost_config.enabled = true needs"
    return None


def shrunk(name: str, folder: Path) -> Path:
    """``name`` with small sizes (see the module docstring), written to ``folder``."""
    raw = _raw(name)
    t = raw["training_config"]
    m = t.get("transformer_config") or raw.get("transformer_config")
    heads = m.get("num_heads", 6)
    m.update(num_blocks=min(m.get("num_blocks", 6), 2), embedding_dim=8 * heads)
    m["max_sequence_length"] = 16
    if "intermediate_dim" in m:
        m["intermediate_dim"] = 64
    if m.get("vocab_size", 0) > 1024:
        del m["vocab_size"]  # the tokenizer's, rounded up (TTML's rule)
    ddp = (raw.get("device_config") or {}).get("enable_ddp")
    t["batch_size"] = 8 if ddp else min(t.get("batch_size", 64), 2)
    t["gradient_accumulation_steps"] = min(t.get("gradient_accumulation_steps", 1), 2)
    path = folder / name
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def _cli(name: str) -> Any:
    kind = _raw(name)["training_config"].get("model_type", "gpt2")
    return llama_train.cli if kind == "llama" else nanogpt_train.cli


def _train_two_steps(name: str, tmp_path: Path, monkeypatch: Any, capsys: Any) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)  # checkpoint_dir "checkpoints" and runs/ land here
    monkeypatch.setenv("TTJAX_CACHE_DIR", str(tmp_path / "cache"))
    path = shrunk(name, tmp_path)
    code = _cli(name)(["--config", str(path), "--max-steps", "2", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["segments"][-1]["end_step"] == 2
    assert summary["final_loss"] is not None and summary["final_loss"] > 0
    return {"summary": summary, "out": out}


def _params(names: list[str]) -> list[Any]:
    """Refusals (instant) and the FAST files run in the fast suite; the other trainings are slow."""
    fast = [n in FAST or expected_refusal(n) is not None for n in names]
    return [
        pytest.param(n, marks=() if f else pytest.mark.slow, id=n.removesuffix(".yaml"))
        for n, f in zip(names, fast)
    ]


@NEEDS_HOME
@pytest.mark.parametrize("name", _params(FILES))
def test_tt_train_config(name, tmp_path, monkeypatch, capsys):
    """Each file trains 2 steps, or is refused naming the key and what it needs."""
    refusal = expected_refusal(name)
    if refusal is not None:
        monkeypatch.chdir(tmp_path)
        with pytest.raises(TrainingConfigError, match=refusal) as err:
            _cli(name)(["--config", str(CONFIGS / name), "--max-steps", "2"])
        _, fix = str(err.value).split("\n")
        assert fix.startswith("fix: ")
        return
    result = _train_two_steps(name, tmp_path, monkeypatch, capsys)
    assert list(result["summary"]["mesh_shape"]) == _raw(name).get("device_config", {}).get(
        "mesh_shape", [1, 1]
    )


@NEEDS_HOME
def test_shakespeare_yaml_unchanged_vocab():
    """TTML's own nanogpt YAML, unchanged: vocab_size 96 is TTML's placeholder; the model gets
    the tokenizer's vocabulary rounded up to 32 (the Python docs have 103 characters: 128)."""
    import ttjax as ttnn

    run = load_config(CONFIGS / "training_shakespeare_nanogpt.yaml")
    assert run.model.model_type == "gpt2" and run.model.vocab_size == 96
    chars = CharTokenizer.train(load_corpus()).vocab_size
    par = ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(1, 1)))
    assert model_vocab(run, par, chars) == -(-chars // 32) * 32 == 128


@NEEDS_HOME
def test_llama_yaml_without_transformer_model_type_is_llama():
    """``training_config.model_type: llama`` and no transformer_config.model_type: the model is
    a Llama with TTML's Llama defaults for the keys it leaves out (defaults are defaults)."""
    run = load_config(CONFIGS / "training_shakespeare_nanollama3.yaml")
    assert run.model.model_type == "llama" == run.training.model_type
    assert "model_type" not in run.model.written
    assert (run.model.num_heads, run.model.num_groups, run.model.dropout_prob) == (6, 3, 0.0)


def test_vocab_rule_by_hand():
    """TTML's round_up_to_tile(vocab, (enable_tp ? devices : 1) * 32), by hand."""
    assert ttml_vocab_size(65) == 96  # Shakespeare's 65 characters: 3 tiles
    assert ttml_vocab_size(96) == 96 and ttml_vocab_size(97) == 128
    assert ttml_vocab_size(103, 2) == 128  # 64 per device on 2 TP devices
    assert ttml_vocab_size(103, 8) == 256  # 32 per device on 8
    assert ttml_vocab_size(50257) == 50272  # GPT-2's tokenizer: 1571 tiles of 32
    assert ttml_vocab_size(32000, 8) == 32000  # TinyLlama's: 125 x 256


@pytest.mark.slow
def test_vocab_line_and_a_written_vocab_that_fits_is_kept(tmp_path, monkeypatch, capsys):
    """TTML's line when the tokenizer sets the vocabulary (96 is too small for the 103
    characters); a written vocab_size that holds the tokens is kept, on any TP size."""
    from _tiny import YAML_MODEL

    import ttjax as ttnn

    monkeypatch.chdir(tmp_path)
    chars = CharTokenizer.train(load_corpus()).vocab_size
    doc = {
        "training_config": {
            "project_name": "v96",
            "batch_size": 2,
            "max_steps": 1,
            "eval_every": 0,
            "model_save_interval": 0,
            "checkpoint_dir": str(tmp_path / "ck"),
        },
        "transformer_config": {**YAML_MODEL, "num_blocks": 1, "vocab_size": 96},
    }
    path = tmp_path / "v96.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert nanogpt_train.cli(["--config", str(path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    line = f"{VOCAB_LINE} (tokenizer: {chars} tokens; transformer_config.vocab_size 96 -> 128)"
    assert line in out and "vocab 128," in out, out
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    for written, tp, want in ((96, 1, 128), (96, 8, 256), (160, 1, 160), (160, 8, 160)):
        doc["transformer_config"]["vocab_size"] = written
        path.write_text(yaml.safe_dump(doc))
        par = ParallelismContext.from_axes(mesh, None, 1 if tp > 1 else None)
        assert model_vocab(load_config(path), par, chars) == want, (written, tp)
    del doc["transformer_config"]["vocab_size"]  # not written: the tokenizer's, rounded
    path.write_text(yaml.safe_dump(doc))
    assert model_vocab(load_config(path), ParallelismContext.from_axes(mesh, None, 1), chars) == 256
