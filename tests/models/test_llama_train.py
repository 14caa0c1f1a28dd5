"""Llama training: the per-device training forward equals the existing single-device reference
(``LlamaReference``) with the same weights, and TP+DDP on 2x4 follows the single-device run."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference import assert_trees_close
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from models.llama.config import get_config
from models.llama.reference import LlamaReference
from models.llama.train_model import LlamaTrain, param_specs, params_from_weights
from models.llama.weights import random_weights
from ttjax.errors import ConfigError
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


@pytest.mark.parametrize("policy", ["full", "dots", "none"])
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
