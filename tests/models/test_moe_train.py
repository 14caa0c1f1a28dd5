"""Training a tiny MoE language model with a jitted optax AdamW step on 2x4 (experts over the
4 columns, data over both axes; slow: 8x4, TP 4 inside each of 8 expert groups): the same
losses, aux losses and routing as the single-device JAX twin, step by step, on the stdlib's
pydoc topics text; and the load-balancing loss evening out the tokens per expert."""

from __future__ import annotations

import jax
import numpy as np
import optax
import pytest
from conftest import FAST_COMPILE, mesh_of

import ttjax as ttnn
from models.moe import demo
from models.moe.config import MoEConfig
from models.moe.picture import RoutingCounts, routing_figure
from models.moe.train import (
    MoELMConfig,
    TtMoELM,
    batches,
    corpus_bytes,
    init_weights,
    make_reference_step,
    make_train_step,
    train_on_corpus,
)
from ttjax.plan import ParallelDims

STEPS, ROWS, SEQ = 20, 2, 16  # ROWS sequences per data device


@pytest.mark.parametrize(
    "shape,ep_axis,tp_axis",
    [
        pytest.param((2, 4), 1, None, marks=pytest.mark.slow),
        pytest.param((8, 4), 0, 1, marks=pytest.mark.slow),
    ],
    ids=["2x4-ep4-dp2", "8x4-ep8-tp4"],
)
def test_training_matches_single_device_for_20_steps(shape, ep_axis, tp_axis):
    mesh = mesh_of(shape)
    config = MoELMConfig(MoEConfig(32, 32, 8, top_k=2, capacity_factor=1.25), aux_loss_coef=0.01)
    model = TtMoELM(config, mesh, ParallelDims.from_axes(shape, {"ep": ep_axis, "tp": tp_axis}))
    weights = init_weights(config, seed=0)
    optimizer = optax.adamw(3e-3)
    params = model.weights_to_device(weights)
    state = optimizer.init(params)
    ref = jax.tree_util.tree_map(jax.numpy.asarray, weights)
    ref_state = optimizer.init(ref)
    groups = model.moe.groups
    shape = (groups, ROWS, SEQ)
    data = batches(corpus_bytes(), groups * ROWS, SEQ, seed=0)
    step = ref_step = None
    losses, ref_losses, dropped = [], [], 0
    for _ in range(STEPS):
        tokens, targets = next(data)
        args = (params, state, model.tokens_to_device(tokens), model.tokens_to_device(targets))
        ref_args = (ref, ref_state, tokens.reshape(shape), targets.reshape(shape))
        if step is None:
            step = make_train_step(model, optimizer).lower(*args).compile(FAST_COMPILE)
            ref_step = make_reference_step(config, optimizer).lower(*ref_args).compile(FAST_COMPILE)
        params, state, m = step(*args)
        ref, ref_state, r = ref_step(*ref_args)
        losses.append([float(m.loss), float(m.cross_entropy), float(m.aux_loss)])
        ref_losses.append([float(r.loss), float(r.cross_entropy), float(r.aux_loss)])
        np.testing.assert_array_equal(model.moe.per_group(m.routed)[:, 0], r.routed)
        np.testing.assert_array_equal(model.moe.per_group(m.kept)[:, 0], r.kept)
        dropped += int(np.sum(r.routed - r.kept))
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-5, atol=2e-5)
    assert dropped > 0  # capacity factor 1.25: the same choices were dropped on both sides
    assert losses[-1][1] < losses[0][1] - 1.0  # it learns (cross-entropy falls by > 1 nat)
    # the trained weights agree too
    got = ttnn.to_numpy(ttnn.get_device_tensors(params["moe"].router)[0])
    np.testing.assert_allclose(got, ref["moe"]["router"], rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_load_balancing_loss_lowers_the_spread_of_tokens_per_expert(tmp_path):
    """150 AdamW steps on the corpus on 1x8, without and with Switch's loss (coefficient 0.1)."""
    mesh = mesh_of((1, 8))
    moe = MoEConfig(32, 64, 8, top_k=2, capacity_factor=None)
    runs = {
        coef: train_on_corpus(TtMoELM(MoELMConfig(moe, aux_loss_coef=coef), mesh), 150)
        for coef in (0.0, 0.1)
    }
    free, balanced = runs[0.0], runs[0.1]
    assert balanced.spread() < 0.5 * free.spread(), (balanced.spread(), free.spread())
    assert np.mean(balanced.aux_loss[-20:]) < np.mean(free.aux_loss[-20:])
    for run in runs.values():  # both learn the bytes
        assert np.mean(run.cross_entropy[-20:]) < run.cross_entropy[0] - 2.5
    layer = TtMoELM(MoELMConfig(moe), mesh).moe
    counts = RoutingCounts.from_arrays(layer, balanced.routed[-1], balanced.kept[-1])
    routing_figure(counts).savefig(tmp_path / "routing.png")
    assert (tmp_path / "routing.png").stat().st_size > 10_000


@pytest.mark.slow
def test_demo_runs(capsys):
    assert demo.main(["--mesh", "1x8", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "spread of tokens" in out and "2 all_to_all, 1 MoE layer" in out
