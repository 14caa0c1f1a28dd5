"""Seed 004's ``shard_llama_model`` with ttjax.spmd: logits equal the single-device Flax model (and
transformers' torch model), and the same parameters re-shard from (1, 8) to (2, 4) in place."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import ttjax.spmd as xs
from models.llama.config import get_config
from models.llama.reference import LlamaReference
from models.llama.spmd import shard_llama_model, sharded_forward
from models.llama.weights import random_weights
from ttjax.errors import ShardingError

TINY = get_config("tiny").with_(n_layers=1, name="tiny-1")
P = jax.sharding.PartitionSpec


def pcc(a, b) -> float:
    return float(np.corrcoef(np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64))[0, 1])


def test_flax_reference_sharded_then_resharded() -> None:
    weights = random_weights(TINY, seed=0)
    tokens = np.random.default_rng(0).integers(0, TINY.vocab_size, (2, 12))
    want = np.asarray(LlamaReference(TINY, weights).jitted().forward(tokens))

    model = LlamaReference(TINY, weights)
    wq = model.layers[0].attn.wq
    mesh18 = xs.Mesh(np.arange(8), (1, 8), ("batch", "model"))
    shard_llama_model(model, mesh18)
    assert xs.get_partition_spec(wq) == P("model", None)
    assert xs.get_partition_spec(model.layers[0].mlp.w_down) == P(None, "model")
    assert xs.get_partition_spec(model.embed) == P("model", None)  # vocab-split, as everywhere
    assert xs.get_partition_spec(model.layers[0].ln_1.weight) == P(None)
    assert wq.get_value().addressable_shards[0].data.shape == (TINY.dim // 8, TINY.dim)
    got18 = np.asarray(sharded_forward(model, mesh18, tokens))
    assert pcc(got18, want) > 0.99
    np.testing.assert_allclose(got18, want, rtol=2e-4, atol=2e-4)

    mesh24 = xs.Mesh(np.arange(8), (2, 4), ("batch", "model"))
    shard_llama_model(model, mesh24)  # same Variables, new placement, nothing reloaded
    assert model.layers[0].attn.wq is wq
    assert wq.get_value().addressable_shards[0].data.shape == (TINY.dim // 4, TINY.dim)
    got24 = np.asarray(sharded_forward(model, mesh24, tokens))
    assert got24.shape == want.shape and pcc(got24, want) > 0.99
    np.testing.assert_allclose(got24, want, rtol=2e-4, atol=2e-4)


@pytest.mark.torch
@pytest.mark.slow  # imports transformers (~10-40 s alone)
def test_transformers_llama_is_converted_and_sharded() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config).eval()
    tokens = np.random.default_rng(1).integers(0, 256, (2, 8))
    with torch.no_grad():
        want = hf(torch.as_tensor(tokens)).logits.float().numpy()
    mesh = xs.Mesh(np.arange(8), (1, 8), ("batch", "model"))
    model = shard_llama_model(hf, mesh)
    assert isinstance(model, LlamaReference)
    assert xs.get_partition_spec(model.layers[0].attn.wo) == P(None, "model")
    got = np.asarray(sharded_forward(model, mesh, tokens))
    assert pcc(got, want) > 0.99
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    # a torch tensor on the host is refused, as torch-xla refuses it; its numpy copy is placed
    with pytest.raises(ShardingError, match="Input tensor is not an XLA tensor: CPUFloatType"):
        xs.mark_sharding(hf.model.embed_tokens.weight, mesh, (None, "model"))
    host = hf.model.embed_tokens.weight.detach().numpy()
    emb = xs.mark_sharding(host, mesh, (None, "model"))
    np.testing.assert_array_equal(np.asarray(emb), host)
