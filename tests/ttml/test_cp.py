"""Context parallelism (``ttjax.ttml.cp`` and the plan's rule ``("seq", "cp")``): NanoGPT and the
TTML Llama under CP 8 (1x8) and CP 2 x TP 4 (2x4) give the single-device run's losses, gradients,
AdamW steps and (Llama) prefill logits; bad sequence lengths are clean plan errors."""

from __future__ import annotations

import functools
import importlib
import json
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from models.llama.config import get_config
from models.llama.train_model import LlamaTrain, param_specs, params_from_weights
from models.llama.weights import random_weights
from models.nanogpt import train as nanogpt_train
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_axes
from ttjax.errors import ConfigError, ParallelPlanError
from ttjax.plan import LogicalAxes, ParallelDims
from ttjax.ttml import cp
from ttjax.ttml.cli import model_vocab, pipeline_step
from ttjax.ttml.config import load_config
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

ROOT = Path(__file__).resolve().parents[2]
SEQ, BATCH = 16, 2
GPT_CONFIG = GPTConfig(vocab_size=64, block_size=SEQ, n_layer=1, n_head=4, n_embd=32)
LLAMA_CONFIG = get_config("tiny").with_(
    vocab_size=64, dim=64, n_layers=1, n_heads=8, n_kv_heads=4, ffn_dim=128, max_seq_len=SEQ
)
OPT = OptimizerSettings(learning_rate=3e-3, warmup_steps=1, total_steps=10)
# name -> (mesh shape, {role keyword: mesh axis}); TTML's order puts cp before tp.
LAYOUTS = {
    "single": ((1, 1), {}),
    "cp8": ((1, 8), {"cp_axis": 1}),
    "cp2_tp4": ((2, 4), {"cp_axis": 0, "tp_axis": 1}),
}


@functools.cache
def _par(layout: str) -> ParallelismContext:
    shape, axes = LAYOUTS[layout]
    return ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(*shape)), **axes)


def _model(name: str, par: ParallelismContext) -> tuple[object, object, object]:
    """(loss fn, whole parameters, layout) of one tiny model on ``par``."""
    if name == "nanogpt":
        return GPT(GPT_CONFIG).loss, init_params(GPT_CONFIG, 5489), param_axes(GPT_CONFIG)
    params = params_from_weights(LLAMA_CONFIG, random_weights(LLAMA_CONFIG, seed=3))
    return LlamaTrain(LLAMA_CONFIG).loss, params, param_specs(LLAMA_CONFIG, par)


def _step(name: str, layout: str) -> tuple[TrainStep, object]:
    par = _par(layout)
    loss, params, specs = _model(name, par)
    return TrainStep(loss, specs, par, make_optimizer(OPT)), params


def _tokens(n: int = 1, seq: int = SEQ, vocab: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, vocab, (n, 1, BATCH, seq + 1)).astype(np.int32)


@functools.cache
def _single_grads(name: str) -> tuple[float, list[np.ndarray]]:
    step, params = _step(name, "single")
    loss, grads = step.grads(params, _tokens()[0])
    return float(loss), [np.asarray(g) for g in jax.tree_util.tree_leaves(grads)]


# ---------------------------------------------------------------------------------------------
# The rule and the placement
# ---------------------------------------------------------------------------------------------


def test_the_seq_rule_splits_inputs_over_cp_and_averages_over_it():
    dims = ParallelDims.from_sizes(dp=2, cp=4)
    assert dims.spec(LogicalAxes(None, "batch", "seq")) == P(None, "dp", "cp")
    step, _ = _step("nanogpt", "cp2_tp4")
    assert step.data_spec == P(None, None, "cp") and step.data_axes == ("cp",)
    assert step.batch_spec == P()  # whole rows; inputs and targets are cut inside the step


def test_split_tokens_permutes_inputs_and_targets_alike():
    dims = ParallelDims.from_sizes(cp=4)
    tokens = np.arange(2 * 17).reshape(2, 17)
    inputs, targets = (np.asarray(a) for a in cp.split_tokens(tokens, dims))
    order = np.concatenate([np.r_[2 * i : 2 * i + 2, 14 - 2 * i : 16 - 2 * i] for i in range(4)])
    np.testing.assert_array_equal(inputs, tokens[:, :-1][:, order])
    np.testing.assert_array_equal(targets, inputs + 1)  # each target still follows its input
    np.testing.assert_array_equal(cp.restore_sequence(inputs, dims), tokens[:, :-1])


def test_seq_len_that_does_not_split_into_2cp_chunks_is_a_plan_error():
    step, params = _step("nanogpt", "cp8")
    with pytest.raises(ParallelPlanError, match=r"seq_len=12 does not split into 2\*cp = 16") as e:
        step.grads(params, _tokens(seq=12)[0])
    assert "fix: " in str(e.value) and "e.g. 16" in str(e.value)
    with pytest.raises(ParallelPlanError, match="seq_len=10"):
        cp.place_sequence(np.zeros((1, 10)), ParallelDims.from_sizes(cp=4))


# ---------------------------------------------------------------------------------------------
# Equal to one device
# ---------------------------------------------------------------------------------------------


# `make test` runs Llama under CP 8 here (loss and gradients); the other cases and the AdamW
# steps below run in `make test-all`.
@pytest.mark.parametrize(
    ("name", "layout"),
    [
        pytest.param("nanogpt", "cp2_tp4", marks=pytest.mark.slow),
        ("llama", "cp8"),
        pytest.param("nanogpt", "cp8", marks=pytest.mark.slow),
        pytest.param("llama", "cp2_tp4", marks=pytest.mark.slow),
    ],
)
def test_loss_and_gradients_equal_single_device(name, layout):
    want_loss, want = _single_grads(name)
    step, params = _step(name, layout)
    loss, grads = step.grads(params, _tokens()[0])
    np.testing.assert_allclose(float(loss), want_loss, rtol=1e-5)
    got = [np.asarray(g) for g in jax.tree_util.tree_leaves(grads)]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    if name == "nanogpt":  # validation cuts and places the sequence the same way
        val = _tokens(2, seed=4)[:, 0]
        single, _ = _step(name, "single")
        np.testing.assert_allclose(
            float(step.eval_loss(params, val)), float(single.eval_loss(params, val)), rtol=1e-5
        )


def _adamw(name: str, layout: str, steps: int = 3) -> np.ndarray:
    """Loss and gradient norm of each of ``steps`` AdamW steps."""
    step, params = _step(name, layout)
    state, out = step.init_state(params), []
    for tokens in _tokens(steps, seed=1):
        state, m = step(state, tokens)
        out.append((float(m["loss"]), float(m["grad_norm"])))
    return np.asarray(out)


@pytest.mark.parametrize(
    ("name", "layout"),
    [
        pytest.param("nanogpt", "cp8", marks=pytest.mark.slow),
        pytest.param("llama", "cp2_tp4", marks=pytest.mark.slow),
        pytest.param("nanogpt", "cp2_tp4", marks=pytest.mark.slow),
        pytest.param("llama", "cp8", marks=pytest.mark.slow),
    ],
)
def test_adamw_steps_equal_single_device(name, layout):
    """Losses and gradient norms (parameters are not compared: Adam scales a gradient that is
    zero up to rounding, such as a key bias's, to a full step of either sign)."""
    want = _adamw(name, "single")
    np.testing.assert_allclose(_adamw(name, layout), want, rtol=1e-5)
    assert want[-1, 0] < want[0, 0]  # it trains


@pytest.mark.parametrize("layout", ["cp2_tp4", pytest.param("cp8", marks=pytest.mark.slow)])
def test_llama_prefill_under_cp_equals_single_device(layout):
    """The training model's forward on a prompt: logits of every position, sequence split."""
    par = _par(layout)
    model = LlamaTrain(LLAMA_CONFIG)
    params = params_from_weights(LLAMA_CONFIG, random_weights(LLAMA_CONFIG, seed=3))
    ids = _tokens(seq=SEQ - 1, seed=2)[0, 0]  # [BATCH, SEQ]
    want = np.asarray(jax.jit(lambda p, x: model(p, x))(params, ids))
    specs = param_specs(LLAMA_CONFIG, par)
    io = par.dims.spec(LogicalAxes("batch", "seq"))
    out = par.dims.spec(LogicalAxes("batch", "seq", "vocab"))
    fwd = jax.jit(
        jax.shard_map(
            lambda p, x: model(p, x),
            mesh=par.jax_mesh,
            in_specs=(specs, io),
            out_specs=out,
            check_vma=False,
        )
    )
    logits = fwd(params, cp.place_sequence(ids, par.dims))
    got = np.asarray(cp.restore_sequence(logits, par.dims, axis=1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# The shipped YAML files train through the CLI
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # ~1 min each: the shipped model sizes, two compiles (train and eval)
@pytest.mark.parametrize(
    ("config", "module", "banner"),
    [
        ("training_nanogpt_cp.yaml", "nanogpt", "CP 8 over mesh axis 'cp', TP off"),
        ("training_llama_cp_tp.yaml", "llama", "DDP off, CP 2 over mesh axis 'cp', TP 4 over"),
    ],
)
def test_shipped_cp_config_trains_two_steps_through_the_cli(
    config, module, banner, tmp_path, capsys
):
    src = ROOT / "configs" / config
    doc = yaml.safe_load(src.read_text())
    doc["training_config"]["checkpoint_dir"] = str(tmp_path / "ckpt")
    model = doc["training_config"]["model_config"]
    doc["training_config"]["model_config"] = str(src.parent / model)
    path = tmp_path / config
    path.write_text(yaml.safe_dump(doc))
    cli = importlib.import_module(f"models.{module}.train").cli
    argv = ["--config", str(path), "--max-steps", "2", "--no-progress", "--out", str(tmp_path)]
    assert cli(argv) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(line for line in out if " on mesh " in line)  # after the preflight's memory line
    assert banner in line, line
    summary = json.loads(out[-1])
    assert np.isfinite(summary["final_loss"]) and summary["mesh_shape"] == list(
        doc["device_config"]["mesh_shape"]
    )


def test_cp_with_pp_is_refused_by_the_cli(tmp_path):
    """The pipeline's stages take whole sequences: CP with PP is one clean error, not ignored."""
    doc = yaml.safe_load((ROOT / "configs" / "training_nanogpt_cp.yaml").read_text())
    doc["training_config"]["model_config"] = str(
        ROOT / "configs" / "model_configs" / "nanogpt_tiny.yaml"
    )
    doc["device_config"] = {"mesh_shape": [2, 4], "enable_cp": True, "enable_pp": True}
    path = tmp_path / "cp_pp.yaml"
    path.write_text(yaml.safe_dump(doc))
    run = load_config(path)
    par = ParallelismContext.from_axes(_par("cp2_tp4").mesh_device, cp_axis=0, pp_axis=1)
    parts = nanogpt_train.build(run, par, model_vocab(run, par))
    with pytest.raises(ConfigError, match="enable_cp with enable_pp") as e:
        pipeline_step(run, par, parts, OptimizerSettings.from_config(run))
    assert "\nfix: set enable_cp: false" in str(e.value)


def test_cli_names_a_sequence_length_cp_cannot_split(tmp_path):
    doc = yaml.safe_load((ROOT / "configs" / "training_nanogpt_cp.yaml").read_text())
    model = yaml.safe_load((ROOT / "configs" / "model_configs" / "nanogpt_tiny.yaml").read_text())
    model["transformer_config"]["max_sequence_length"] = 60  # not a multiple of 2 * 8
    (tmp_path / "model.yaml").write_text(yaml.safe_dump(model))
    doc["training_config"].update(
        model_config=str(tmp_path / "model.yaml"), checkpoint_dir=str(tmp_path / "c")
    )
    path = tmp_path / "cp60.yaml"
    path.write_text(yaml.safe_dump(doc))
    argv = ["--config", str(path), "--max-steps", "1", "--no-progress", "--out", str(tmp_path)]
    with pytest.raises(ParallelPlanError, match=r"seq_len=60 does not split into 2\*cp = 16"):
        nanogpt_train.cli(argv)
