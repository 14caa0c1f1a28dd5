"""Llama training: the per-device training forward equals the existing single-device reference
(``LlamaReference``) with the same weights, and TP+DDP on 2x4 follows the single-device run."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from _reference import assert_trees_close
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from models.llama import train as llama_train
from models.llama import train_model
from models.llama.config import get_config
from models.llama.reference import LlamaReference
from models.llama.train_model import LlamaTrain, param_specs, params_from_weights
from models.llama.weights import expected_shapes, random_weights
from ttjax.errors import ConfigError
from ttjax.ttml import memory
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.cli import train_step
from ttjax.ttml.config import load_config
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.modules import RMSNorm
from ttjax.ttml.ops.loss import cross_entropy_loss
from ttjax.ttml.stacked import unstack_blocks
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

CONFIG = get_config("tiny").with_(max_seq_len=16)


def test_training_forward_equals_reference():
    w = random_weights(CONFIG, seed=3)
    ids = np.random.default_rng(0).integers(0, CONFIG.vocab_size, (2, 12)).astype(np.int32)
    want = np.asarray(LlamaReference(CONFIG, w).jitted().forward(ids))
    model = LlamaTrain(CONFIG)
    got = jax.jit(lambda p, x: model(p, x))(params_from_weights(CONFIG, w), ids)
    np.testing.assert_allclose(np.asarray(got), want, atol=2e-5, rtol=1e-5)


def _unrolled_loss(params, idx, targets):
    """Llama's training loss with its blocks in a Python loop over the stacked parameters' rows."""
    model = LlamaTrain(CONFIG)
    x = model.tok_emb(params["tok_emb"], idx)
    for p in unstack_blocks(params["blocks"]):
        x = model.block(p, x)
    x = RMSNorm(CONFIG.dim, CONFIG.norm_eps)(params["ln_fc"], x)
    return cross_entropy_loss(model.fc(params["fc"], x), targets)


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param("full", marks=pytest.mark.slow),
        pytest.param("dots", marks=pytest.mark.slow),
        pytest.param("none", marks=pytest.mark.slow),
    ],
)
def test_scanned_blocks_equal_the_unrolled_loop(policy):
    """The scan over stacked blocks (each remat policy): loss and gradients of the Python loop."""
    params = params_from_weights(CONFIG, random_weights(CONFIG, seed=3))
    assert params["blocks"]["w1"]["weight"].shape[0] == CONFIG.n_layers
    ids = jnp.asarray(np.random.default_rng(1).integers(0, CONFIG.vocab_size, (2, 13)), jnp.int32)
    model = LlamaTrain(CONFIG, remat_policy=policy)
    loss, grads = jax.jit(jax.value_and_grad(lambda p: model.loss(p, ids[:, :-1], ids[:, 1:])))(
        params
    )
    want_loss, want = jax.jit(
        jax.value_and_grad(lambda p: _unrolled_loss(p, ids[:, :-1], ids[:, 1:]))
    )(params)
    assert float(loss) == pytest.approx(float(want_loss), abs=1e-6)
    assert_trees_close(grads, want)


def test_unknown_remat_policy_is_a_config_error():
    with pytest.raises(ConfigError, match="LlamaTrain: remat_policy='dot'"):
        LlamaTrain(CONFIG, remat_policy="dot")


@pytest.mark.slow
def test_tp_ddp_losses_equal_single_device():
    opt = OptimizerSettings(learning_rate=3e-3, warmup_steps=2, total_steps=10)
    params = params_from_weights(CONFIG, random_weights(CONFIG, seed=5489))
    data = np.random.default_rng(0).integers(0, CONFIG.vocab_size, (10, 1, 4, 13)).astype(np.int32)

    def losses(shape, ddp, tp):
        par = ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(*shape)), ddp, tp)
        specs = param_specs(CONFIG, par)
        step = TrainStep(LlamaTrain(CONFIG).loss, specs, par, make_optimizer(opt))
        state, out = step.init_state(params), []
        for tokens in data:
            state, m = step(state, tokens)
            out.append(float(m["loss"]))
        return np.asarray(out)

    single = losses((1, 1), None, None)
    np.testing.assert_allclose(losses((2, 4), 0, 1), single, rtol=2e-5, atol=2e-5)
    assert jnp.isfinite(single).all()


def test_tied_head_equals_the_reference_with_lm_head_set_to_the_embedding():
    """TTML's weight_tying: enabled: LlamaTrain(tie_weights=True) has no ``fc`` and reads the LM
    head from ``tok_emb`` (vocab-parallel under TP 4); the reference with
    ``lm_head.weight = embed_tokens.weight`` gives its logits."""
    w = random_weights(CONFIG, seed=3)
    w["lm_head.weight"] = w["model.embed_tokens.weight"].copy()
    ids = np.random.default_rng(0).integers(0, CONFIG.vocab_size, (2, 12)).astype(np.int32)
    want = np.asarray(LlamaReference(CONFIG, w).jitted().forward(ids))
    params = params_from_weights(CONFIG, w)
    del params["fc"]
    par = ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(2, 4)), 0, 1)
    specs = {k: v for k, v in param_specs(CONFIG, par).items() if k != "fc"}
    model = LlamaTrain(CONFIG, tie_weights=True)
    fn = jax.jit(
        jax.shard_map(
            lambda p, x: model(p, x),
            mesh=par.jax_mesh,
            in_specs=(specs, P("dp")),
            out_specs=P("dp", None, "tp"),
            check_vma=False,
        )
    )
    np.testing.assert_allclose(np.asarray(fn(params, ids)), want, atol=2e-5, rtol=1e-5)


def _cli_yaml(tmp: Path, tying: str = "disabled", dim: int = 32, layers: int = 2) -> Path:
    """A Llama run of the training CLI: TP 2, character tokens."""
    doc = {
        "training_config": {
            "project_name": "llama_mem",
            "seed": 11,
            "batch_size": 4,
            "max_steps": 2,
            "eval_every": 0,
            "model_save_interval": 0,
            "checkpoint_dir": str(tmp / "ckpt"),
            "tokenizer_type": "char",
            "transformer_config": {
                "model_type": "llama",
                "num_heads": 4,
                "num_groups": 2,
                "embedding_dim": dim,
                "intermediate_dim": 2 * dim,
                "num_blocks": layers,
                "vocab_size": 128,
                "max_sequence_length": 16,
                "weight_tying": tying,
            },
        },
        "device_config": {"mesh_shape": [1, 2], "enable_tp": True},
    }
    path = tmp / "llama.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _load(tmp: Path, tying: str = "disabled") -> Any:
    return load_config(str(_cli_yaml(tmp, tying)))


def _count_draws(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the weights drawn from now on (the CLI's ``init`` draws each once)."""
    drawn: list[str] = []
    real = train_model.random_weight

    def counted(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
        drawn.append(name)
        return real(rng, name, shape)

    monkeypatch.setattr(train_model, "random_weight", counted)
    return drawn


@pytest.mark.slow
def test_cli_refuses_an_oversized_llama_before_any_weight_exists(tmp_path, monkeypatch):
    """The preflight runs on the parameters' shapes: a run over the host's (set) memory is refused
    in one message before any weight is drawn or any array of the model's size allocated
    (TinyLlama at full size used to pass 10 GB building its weights first). The model's weights
    are 134 MB; numpy's allocations during the refused run stay far below that."""
    drawn = _count_draws(monkeypatch)
    monkeypatch.setenv(memory.ENV_AVAILABLE, "100MB")
    path = _cli_yaml(tmp_path, dim=512, layers=8)
    argv = ["--config", str(path), "--no-progress", "--out", str(tmp_path / "o")]
    tracemalloc.start()
    try:
        with pytest.raises(memory.HostMemoryError, match="this run needs about") as err:
            llama_train.cli(argv)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "the host has 0.09 GiB available" in str(err.value)
    assert drawn == []
    assert peak < 30e6, peak  # the old build: 2 x 134 MB of numpy weights


@pytest.mark.parametrize("tying", ["disabled", "enabled"])
def test_abstract_build_equals_the_concrete_one(tmp_path, monkeypatch, tying):
    """``build``'s shapes (what the preflight compiles on) have the drawn parameters' shapes,
    dtypes and, placed by the step, shardings; the values are ``params_from_weights`` of
    ``random_weights`` bit for bit (the build before it went abstract)."""
    run = _load(tmp_path, tying)
    ctx = AutoContext.get_instance()
    ctx.open_device([1, 2])
    try:
        par = ctx.initialize_parallelism_context(run.device.dims)
        parts = llama_train.build(run, par, 128)
        assert all(isinstance(a, jax.ShapeDtypeStruct) for a in jax.tree.leaves(parts.params))
        drawn = _count_draws(monkeypatch)
        whole = parts.whole_params()
        assert jax.tree.structure(parts.params) == jax.tree.structure(whole)
        config = llama_train.llama_config(run, 128)
        names = [n for n in expected_shapes(config) if tying == "disabled" or "lm_head" not in n]
        assert drawn == names  # each once, in random_weights' order
        want = params_from_weights(config, random_weights(config, seed=11))
        if tying == "enabled":
            del want["fc"]
        assert jax.tree.structure(want) == jax.tree.structure(whole)
        for a, w, r in zip(*map(jax.tree.leaves, (parts.params, whole, want)), strict=True):
            assert (a.shape, a.dtype) == (w.shape, w.dtype) == (r.shape, r.dtype)
            np.testing.assert_array_equal(np.asarray(w), np.asarray(r))
        step = train_step(run, par, parts, OptimizerSettings.from_config(run))
        abstract, _ = step.abstract_inputs(parts.params, 4, 16)
        state = step.init_state(whole)
        shardings = jax.tree.map(lambda a: a.sharding, (abstract.params, abstract.opt_state))
        placed = jax.tree.map(lambda a: a.sharding, (state.params, state.opt_state))
        assert shardings == placed
        assert any(s.spec != P() for s in jax.tree.leaves(placed))  # TP splits some
    finally:
        ctx.close_device()
