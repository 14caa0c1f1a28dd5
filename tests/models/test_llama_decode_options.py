"""The Llama decode options that reach the hand-written collective count: a vocab-parallel
embedding (masked lookup + all_reduce) and logits left vocab-sharded (greedy argmax over the
shards). Same tokens and logits as the Flax reference, eager and traced; same collectives as a
hand-written ``jax.shard_map`` step (``benchmarks/bench_decode.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from _reference import llama_teacher_forced
from conftest import mesh_of

import ttjax as ttnn
from benchmarks.bench_decode import handwritten_greedy_step, ttjax_greedy_step
from models.llama.config import get_config
from models.llama.generate import Generator
from models.llama.model import TtLlama
from models.llama.weights import random_weights

CONFIG = get_config("tiny")
OPTIONS = {"embedding": "vocab_parallel", "gather_logits": False}
PROMPT_LEN, NEW_TOKENS = 6, 4


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return random_weights(CONFIG, seed=5)


@pytest.mark.slow
def test_vocab_parallel_options_match_reference(weights):
    """Eager, then traced (the same generator: the capture reuses the eager programs)."""
    prompt = np.random.default_rng(6).integers(0, CONFIG.vocab_size, (8, PROMPT_LEN))
    gen = Generator.build(CONFIG, weights, mesh_of((1, 8)), mode="tp", batch=8, **OPTIONS)
    model = gen.models[0]
    assert model.vocab_parallel and not model.gather_logits
    eager = gen.generate(prompt, NEW_TOKENS, trace=False)
    traced = gen.generate(prompt, NEW_TOKENS, trace=True)
    ref_prefill, ref_steps = llama_teacher_forced(CONFIG, weights, eager.tokens, PROMPT_LEN)
    assert np.array_equal(traced.tokens, eager.tokens)
    for result in (eager, traced):
        np.testing.assert_allclose(result.prefill_logits, ref_prefill, atol=2e-4, rtol=1e-4)
        assert np.array_equal(result.tokens[:, PROMPT_LEN], ref_prefill[:, -1].argmax(-1))
        assert len(result.decode_logits) == NEW_TOKENS - 1
        for i, (got, want) in enumerate(zip(result.decode_logits, ref_steps)):
            np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-4)
            # the on-device argmax over vocab shards picks the reference's greedy token
            assert np.array_equal(result.tokens[:, PROMPT_LEN + 1 + i], want.argmax(-1))
    gen.release()


def test_sharded_greedy_tokens_break_ties_like_numpy(weights):
    """Equal maxima on several shards: the smallest vocabulary index wins, as in np.argmax."""
    mesh = mesh_of((1, 8))
    model = TtLlama(CONFIG, weights, mesh, mode="tp", batch=2, **OPTIONS)
    logits = np.zeros((2, 1, CONFIG.vocab_size), np.float32)
    logits[0, 0, [300, 70, 511]] = 5.0  # shards 4, 1 and 7
    logits[1, 0, 3] = -1.0  # all others 0: the first index of shard 0 wins
    sharded = ttnn.from_torch(logits, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1))
    tokens = ttnn.to_numpy(ttnn.get_device_tensors(model.greedy_tokens(sharded))[0])
    assert tokens.ravel().tolist() == logits.argmax(-1).ravel().tolist() == [70, 0]


@pytest.mark.slow
def test_decode_step_has_the_handwritten_collectives(weights):
    """ttjax's greedy decode step and the hand-written shard_map one: 2 all-reduces per layer +
    1 for the embedding, and one all-gather of (value, index) pairs; no logits gather."""
    mesh = mesh_of((1, 8))
    model = TtLlama(CONFIG, weights, mesh, mode="tp", batch=8, **OPTIONS)
    tok = model.tokens_to_device(np.arange(8)[:, None] * 61 % CONFIG.vocab_size)
    pos = model.positions_to_device(np.zeros(8))
    ours = ttnn.inspect.inspect(
        ttjax_greedy_step(model), model.params, model.caches, tok, pos, donate_argnums=(1,)
    )
    hand, (params, caches) = handwritten_greedy_step(model)
    theirs = ttnn.inspect.inspect(
        lambda *a: hand(*a), params, caches, tok.value, pos.value, mesh=mesh
    )
    want = dict.fromkeys(ours.collective_counts(), 0)
    want.update({"all-reduce": 2 * CONFIG.n_layers + 1, "all-gather": 1})
    assert ours.collective_counts() == theirs.collective_counts() == want
    gathered = [c for c in ours.collectives if c.kind == "all-gather"]
    assert gathered[0].bytes_per_device < 8 * 2 * 4 * 8  # candidates only, not [8, 1, vocab]
    # and both compute the same step
    logits, token, _ = hand(params, caches, tok.value, pos.value)
    ours_logits = model.decode(tok, pos)
    ours_token = model.greedy_tokens(ours_logits)
    np.testing.assert_allclose(
        np.asarray(logits), model.logits_to_numpy(ours_logits), atol=1e-5, rtol=1e-5
    )
    assert np.array_equal(np.asarray(token), ttnn.to_numpy(ttnn.get_device_tensors(ours_token)[0]))


def test_embedding_option_errors_name_the_value(weights):
    with pytest.raises(ttnn.errors.ConfigError, match="embedding='rows'"):
        TtLlama(CONFIG, weights, mesh_of((1, 8)), embedding="rows")


@pytest.mark.parametrize(
    ("scan_layers", "transpose_weights"),
    [pytest.param(False, False, marks=pytest.mark.slow), (True, True)],
    ids=["layers", "scan_out_in"],
)
def test_fused_gate_up_matches_reference(weights, scan_layers, transpose_weights):
    """One [gate_i | up_i] weight per device (TP 8): the Flax reference's prefill and decode
    logits, in both weight layouts and under ``ttnn.scan``."""
    mesh = mesh_of((1, 8))
    kw = {"mode": "tp", "batch": 8, "scan_layers": scan_layers}
    model = TtLlama(
        CONFIG, weights, mesh, fuse_gate_up=True, transpose_weights=transpose_weights, **kw
    )
    layer = model.params["layers"] if scan_layers else model.params["layers"][0]
    assert layer["w_in"] is None and layer["w_up"] is None
    assert layer["w_gate_up"].shape[-1 - int(transpose_weights)] == 2 * CONFIG.ffn_dim // 8
    tokens = np.random.default_rng(7).integers(0, CONFIG.vocab_size, (8, PROMPT_LEN + 2))
    logits = ttnn.to_numpy(
        ttnn.get_device_tensors(model.prefill(model.tokens_to_device(tokens[:, :PROMPT_LEN])))[0]
    )
    step = model.decode(
        model.tokens_to_device(tokens[:, PROMPT_LEN : PROMPT_LEN + 1]),
        model.positions_to_device(np.full((8,), PROMPT_LEN)),
    )
    ref_prefill, ref_steps = llama_teacher_forced(CONFIG, weights, tokens, PROMPT_LEN)
    np.testing.assert_allclose(logits, ref_prefill, atol=2e-4, rtol=1e-4)
    np.testing.assert_allclose(
        ttnn.to_numpy(ttnn.get_device_tensors(step)[0])[:, 0], ref_steps[0], atol=2e-4, rtol=1e-4
    )


def test_fused_gate_up_needs_swiglu():
    falcon = get_config("falcon-7b")
    with pytest.raises(
        ttnn.errors.ConfigError, match=r"fuse_gate_up=True needs a SwiGLU MLP.*'gelu'"
    ):
        TtLlama(falcon, None, mesh_of((1, 8)), fuse_gate_up=True)
