"""Mixtral decode on ttjax (data-parallel attention, experts over the ep axis) against Hugging
Face transformers' MixtralForCausalLM, from a checkpoint saved by transformers itself."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _reference import pcc
from conftest import mesh_of

from models.moe.mixtral import TtMixtral, load_mixtral_checkpoint, tiny_mixtral_config
from ttjax.inspect import report_compiled

PROMPT, NEW = 6, 5
# Tiny programs: skipping LLVM's expensive passes halves XLA's CPU compile time.
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@pytest.mark.torch
def test_mixtral_decode_matches_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    tiny = tiny_mixtral_config()
    hf_config = transformers.MixtralConfig(
        vocab_size=tiny.vocab_size,
        hidden_size=tiny.dim,
        intermediate_size=tiny.ffn_dim,
        num_hidden_layers=tiny.n_layers,
        num_attention_heads=tiny.n_heads,
        num_key_value_heads=tiny.n_kv_heads,
        num_local_experts=tiny.n_experts,
        num_experts_per_tok=tiny.top_k,
        max_position_embeddings=tiny.max_seq_len,
        initializer_range=0.1,  # decisive routing and logits that are far from ties
    )
    torch.manual_seed(0)
    hf = transformers.MixtralForCausalLM(hf_config).eval()
    hf.save_pretrained(tmp_path)
    config, weights = load_mixtral_checkpoint(tmp_path)
    assert (config.n_experts, config.top_k, config.capacity_factor) == (8, 2, None)

    mesh = mesh_of((2, 4))  # experts 2 per device over the 4 columns, users over all 8 devices
    model = TtMixtral(config, weights, mesh, batch=8, ep_axis=1)
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, (8, PROMPT))

    def prefill(params, caches, tokens):
        return model.forward(tokens, None, params, caches), caches

    params, caches = model.params, model.caches
    args = (params, caches, model.tokens_to_device(prompt))
    logits, caches = jax.jit(prefill).lower(*args).compile(FAST_COMPILE)(*args)
    got = [model.logits_to_numpy(logits)]
    tokens = [got[0][:, -1].argmax(-1)]
    decode = None
    for i in range(NEW - 1):
        args = (
            params,
            caches,
            model.tokens_to_device(tokens[-1][:, None]),
            model.positions_to_device(np.full(8, PROMPT + i)),
        )
        if decode is None:
            decode = jax.jit(model.decode_fn()).lower(*args).compile(FAST_COMPILE)
            # The compiled decode step: two all_to_alls per MoE layer, no all-gather of tokens.
            counts = report_compiled(decode, mesh=mesh).collective_counts()
            assert counts["all-to-all"] == 2 * config.n_layers
            assert counts["all-gather"] == counts["all-reduce"] == 0
            assert counts["collective-permute"] == counts["reduce-scatter"] == 0
        logits, caches = decode(*args)
        got.append(model.logits_to_numpy(logits))
        tokens.append(got[-1][:, -1].argmax(-1))
    sequence = np.concatenate([prompt, np.stack(tokens, 1)], axis=1)
    with torch.no_grad():
        want = hf(torch.from_numpy(sequence[:, :-1])).logits.numpy()
    assert pcc(got[0], want[:, :PROMPT]) > 0.99
    np.testing.assert_allclose(got[0], want[:, :PROMPT], atol=1e-4)
    for i, step in enumerate(got[1:]):
        assert pcc(step[:, 0], want[:, PROMPT + i]) > 0.99
        np.testing.assert_allclose(step[:, 0], want[:, PROMPT + i], atol=1e-4)
    # the same greedy tokens: each generated token is transformers' argmax at that position
    np.testing.assert_array_equal(want[:, PROMPT - 1 :].argmax(-1), sequence[:, PROMPT:])
