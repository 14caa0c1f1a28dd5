"""Llama training: the per-device training forward equals the existing single-device reference
(``LlamaReference``) with the same weights, and TP+DDP on 2x4 follows the single-device run."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ttjax as ttnn
from models.llama.config import get_config
from models.llama.reference import LlamaReference
from models.llama.train_model import LlamaTrain, param_specs, params_from_weights
from models.llama.weights import random_weights
from ttjax.ttml.parallel import Parallelism
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

CONFIG = get_config("tiny").with_(max_seq_len=16)


def test_training_forward_equals_reference():
    w = random_weights(CONFIG, seed=3)
    ids = np.random.default_rng(0).integers(0, CONFIG.vocab_size, (2, 12)).astype(np.int32)
    want = np.asarray(LlamaReference(CONFIG, w).jitted().forward(ids))
    model = LlamaTrain(CONFIG)
    got = jax.jit(lambda p, x: model(p, x, None))(params_from_weights(CONFIG, w), ids)
    np.testing.assert_allclose(np.asarray(got), want, atol=2e-5, rtol=1e-5)


@pytest.mark.slow
def test_tp_ddp_losses_equal_single_device():
    opt = OptimizerSettings(learning_rate=3e-3, warmup_steps=2, total_steps=10)
    params = params_from_weights(CONFIG, random_weights(CONFIG, seed=5489))
    data = np.random.default_rng(0).integers(0, CONFIG.vocab_size, (10, 1, 4, 13)).astype(np.int32)

    def losses(shape, ddp, tp):
        par = Parallelism(ttnn.open_mesh_device(ttnn.MeshShape(*shape)), ddp, tp)
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
