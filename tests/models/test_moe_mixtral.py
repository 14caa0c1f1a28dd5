"""Mixtral decode on ttjax (data-parallel attention, experts over the ep axis) against Hugging
Face transformers' MixtralForCausalLM, from a checkpoint saved by transformers itself."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _reference import pcc
from conftest import FAST_COMPILE, mesh_of

from models.llama.generate import Generator
from models.moe.inspect_targets import all_to_all_table, mixtral_decode
from models.moe.mixtral import TtMixtral, load_mixtral_checkpoint, tiny_mixtral_config
from ttjax.inspect import inspect, report_compiled

PROMPT, NEW = 6, 5


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


@pytest.mark.slow
@pytest.mark.torch
def test_generator_with_trace_replay_matches_transformers(tmp_path):
    """The Llama demo's Generator drives TtMixtral too: 1x8 (one expert per device), decode
    captured once and replayed with execute_trace."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    hf_config = transformers.MixtralConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=32,
        initializer_range=0.1,
    )
    torch.manual_seed(1)
    hf = transformers.MixtralForCausalLM(hf_config).eval()
    hf.save_pretrained(tmp_path)
    config, weights = load_mixtral_checkpoint(tmp_path)
    mesh = mesh_of((1, 8))
    gen = Generator([TtMixtral(config, weights, mesh, batch=8)], mesh)
    prompt = np.random.default_rng(1).integers(0, config.vocab_size, (8, PROMPT))
    result = gen.generate(prompt, NEW, trace=True)
    gen.release()
    with torch.no_grad():
        want = hf(torch.from_numpy(result.tokens[:, :-1])).logits.numpy()
    assert pcc(result.prefill_logits, want[:, :PROMPT]) > 0.99
    for i, got in enumerate(result.decode_logits):
        assert pcc(got, want[:, PROMPT + i]) > 0.99
    np.testing.assert_array_equal(want[:, PROMPT - 1 :].argmax(-1), result.tokens[:, PROMPT:])


@pytest.mark.slow
def test_full_size_mixtral_decode_inspects_two_all_to_alls_per_layer():
    """Mixtral-8x7B's shapes on 2x4 without weights: per-layer all_to_all bytes."""
    fn, args, opts = mixtral_decode(mesh_of((2, 4)), layers=2, batch=32, context=512)
    report = inspect(fn, *args, **opts)
    counts = report.collective_counts()
    assert counts["all-to-all"] == 4 and counts["all-gather"] == counts["all-reduce"] == 0
    table = all_to_all_table(report)
    assert table.row_count == 4
    # 4 tokens per device and Mixtral's router (no capacity limit): [8 experts, 4 slots, 4096]
    # (bf16 in the program; XLA's CPU backend moves bf16 collectives as f32)
    for c in report.collectives:
        assert c.mesh_axes == ("x",)
        assert c.bytes == 8 * 4 * 4096 * {"f32": 4, "bf16": 2}[c.dtype]
