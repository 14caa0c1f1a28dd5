"""The Llama decode step written with ttjax.dist (named tp axis) equals the single-device Flax
reference's decode step (jit of dist.local itself is covered in tests/dist)."""

from __future__ import annotations

import numpy as np

from models.llama.config import get_config
from models.llama.dist_decode import decode_step, place_cache, place_weights
from models.llama.reference import LlamaReference
from models.llama.weights import random_weights
from ttjax import dist

TINY = get_config("tiny").with_(n_layers=1, name="tiny-1")


def test_dist_decode_matches_reference() -> None:
    weights = random_weights(TINY, seed=0)
    ref = LlamaReference(TINY, weights)
    fns = ref.jitted()
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, TINY.vocab_size, (2, 6))
    _, cache = fns.prefill(prompt, ref.init_cache(2, 16))
    k_host = [np.asarray(c) for c in cache.k]
    v_host = [np.asarray(c) for c in cache.v]
    nxt = rng.integers(0, TINY.vocab_size, (2, 1)).astype(np.int32)
    pos = np.array([6, 6], np.int32)
    want, _ = fns.decode(nxt, pos, cache)

    mesh = dist.Mesh(axes=["tp"], devices=range(8))
    params = place_weights(TINY, weights, mesh)
    assert params["0.wq"].addressable_shards[0].data.shape == (TINY.dim // 8, TINY.dim)
    step = decode_step(TINY, mesh)
    k, v = place_cache(k_host, v_host, mesh)
    logits, k2, _ = step(params, nxt, pos, k, v)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(want), rtol=1e-4, atol=1e-4)
    assert k2[0].addressable_shards[0].data.shape == (2, TINY.n_kv_heads // 8, 16, TINY.head_dim)
    np.testing.assert_array_equal(np.asarray(k2[0])[:, :, :6], k_host[0][:, :, :6])
