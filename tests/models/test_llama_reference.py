"""The single-device Llama reference against Hugging Face transformers, and its plumbing.

Every numeric check compares against numbers computed elsewhere: transformers' PyTorch models
(Llama and Falcon), or the reference's own full causal forward for the KV-cache path.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from models.llama.config import CONFIGS, LlamaConfig, get_config
from models.llama.reference import LlamaReference
from models.llama.sampling import greedy, probabilities, sample
from models.llama.tokenizer import ByteTokenizer, HFTokenizer, load_tokenizer
from models.llama.weights import (
    expected_shapes,
    load_hf_checkpoint,
    random_weights,
    save_hf_checkpoint,
)

TINY = get_config("tiny")


def pcc(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(np.ravel(a), np.ravel(b))[0, 1])


def assert_logits_match(got: np.ndarray, want: np.ndarray, atol: float = 1e-5) -> None:
    assert got.shape == want.shape
    assert pcc(got, want) >= 0.999
    np.testing.assert_allclose(got, want, atol=atol, rtol=0)


# --- transformers parity ------------------------------------------------------------------------


def _hf_llama(torch, transformers, **overrides):
    """A random ``LlamaForCausalLM`` shaped like ``tiny``, with norm weights perturbed off 1."""
    kwargs = dict(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=16,
        num_key_value_heads=8,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        max_position_embeddings=131072,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    kwargs.update(overrides)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**kwargs)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return model


def _hf_logits(torch, model, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.as_tensor(tokens)).logits.float().numpy()


VARIANTS = {
    # tiny's shapes: GQA (2 query heads per KV head), Llama-3.1 RoPE scaling.
    "gqa-llama31": {},
    # Multi-query attention, tied embeddings, and a RoPE scaling whose three frequency bands
    # (kept, smoothed, divided by the factor) all move logits within 48 positions.
    "mqa-tied-short-rope": dict(
        num_key_value_heads=1,
        tie_word_embeddings=True,
        rope_theta=100.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 4.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
    ),
}


@pytest.mark.torch
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_matches_transformers_llama(tmp_path: Path, variant: str) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = _hf_llama(torch, transformers, **VARIANTS[variant])
    hf.save_pretrained(tmp_path, safe_serialization=True)

    config, weights = load_hf_checkpoint(tmp_path)
    assert config.n_kv_heads == hf.config.num_key_value_heads
    assert config.tie_word_embeddings == hf.config.tie_word_embeddings
    assert config.rope_scaling is not None
    assert ("lm_head.weight" in weights) != config.tie_word_embeddings

    tokens = np.random.default_rng(1).integers(0, config.vocab_size, (2, 48))
    got = np.asarray(LlamaReference(config, weights).jitted().forward(tokens))
    assert_logits_match(got, _hf_logits(torch, hf, tokens))


@pytest.mark.torch
def test_loads_sharded_bf16_checkpoint(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = _hf_llama(torch, transformers).to(torch.bfloat16)
    hf.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="100KB")
    assert len(list(tmp_path.glob("model-0000*-of-*.safetensors"))) > 1

    want = {k: v.float().numpy() for k, v in hf.state_dict().items()}
    _, with_index = load_hf_checkpoint(tmp_path)
    (tmp_path / "model.safetensors.index.json").unlink()
    config, without_index = load_hf_checkpoint(tmp_path)
    for weights in (with_index, without_index):
        assert weights.keys() == want.keys()
        for k, v in weights.items():
            assert v.dtype == np.float32
            np.testing.assert_array_equal(v, want[k], err_msg=k)

    # bf16 weights, float32 math on both sides.
    tokens = np.random.default_rng(2).integers(0, config.vocab_size, (1, 16))
    got = np.asarray(LlamaReference(config, without_index).jitted().forward(tokens))
    assert_logits_match(got, _hf_logits(torch, hf.float(), tokens))


@pytest.mark.torch
def test_saved_checkpoint_runs_in_transformers(tmp_path: Path) -> None:
    """``save_hf_checkpoint``'s config.json means the same model to transformers."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    weights = random_weights(TINY, seed=3)
    save_hf_checkpoint(TINY, weights, tmp_path)
    hf = transformers.LlamaForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager", dtype=torch.float32
    ).eval()
    tokens = np.random.default_rng(3).integers(0, TINY.vocab_size, (2, 40))
    got = np.asarray(LlamaReference(TINY, weights).jitted().forward(tokens))
    assert_logits_match(got, _hf_logits(torch, hf, tokens))


@pytest.mark.torch
def test_falcon_variant_matches_transformers_falcon() -> None:
    """LayerNorm, exact-GELU MLP, parallel block, multi-query and tied embeddings (Falcon-7B)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    n_heads, dim, hd = 8, 64, 8
    hf_config = transformers.FalconConfig(
        vocab_size=256,
        hidden_size=dim,
        num_hidden_layers=2,
        num_attention_heads=n_heads,
        ffn_hidden_size=4 * dim,
        multi_query=True,
        parallel_attn=True,
        new_decoder_architecture=False,
        bias=False,
        alibi=False,
        layer_norm_epsilon=1e-5,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    hf = transformers.FalconForCausalLM(hf_config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "ln" in name or "layernorm" in name:
                p.add_(0.1 * torch.randn_like(p))
            if "dense_h_to_4h" in name:  # pre-activations of order 1, where tanh-GELU differs
                p.mul_(40.0)

    sd = {k: v.numpy() for k, v in hf.state_dict().items()}
    weights = {"model.embed_tokens.weight": sd["transformer.word_embeddings.weight"]}
    for i in range(2):
        src, dst = f"transformer.h.{i}.", f"model.layers.{i}."
        qkv = sd[src + "self_attention.query_key_value.weight"]  # rows: nh query heads, k, v
        weights[dst + "self_attn.q_proj.weight"] = qkv[: n_heads * hd]
        weights[dst + "self_attn.k_proj.weight"] = qkv[n_heads * hd : (n_heads + 1) * hd]
        weights[dst + "self_attn.v_proj.weight"] = qkv[(n_heads + 1) * hd :]
        weights[dst + "self_attn.o_proj.weight"] = sd[src + "self_attention.dense.weight"]
        for s in ("weight", "bias"):
            weights[dst + f"input_layernorm.{s}"] = sd[src + f"input_layernorm.{s}"]
        for s in ("dense_h_to_4h", "dense_4h_to_h"):
            weights[dst + f"mlp.{s}.weight"] = sd[src + f"mlp.{s}.weight"]
    for s in ("weight", "bias"):
        weights[f"model.norm.{s}"] = sd[f"transformer.ln_f.{s}"]

    config = get_config("falcon-7b").with_(
        name="falcon-mini", vocab_size=256, dim=dim, n_layers=2, n_heads=n_heads, ffn_dim=4 * dim
    )
    assert (config.norm, config.mlp, config.parallel_block) == ("layer", "gelu", True)
    tokens = np.random.default_rng(4).integers(0, 256, (2, 24))
    got = np.asarray(LlamaReference(config, weights).jitted().forward(tokens))
    assert_logits_match(got, _hf_logits(torch, hf, tokens))


# --- KV cache ------------------------------------------------------------------------------------


def test_prefill_then_decode_equals_full_forward() -> None:
    """16 jitted decode steps after an 8-token prefill; row 1 re-decodes position 7 four times
    (an idempotent cache write) so the two rows sit at different positions."""
    ref = LlamaReference(TINY, random_weights(TINY, seed=5))
    tokens = np.random.default_rng(5).integers(0, TINY.vocab_size, (2, 24))
    fns = ref.jitted()
    want = np.asarray(fns.forward(tokens))  # (B, T, V)
    logits, cache = fns.prefill(jnp.asarray(tokens[:, :8]), ref.init_cache(2, 32))
    np.testing.assert_allclose(np.asarray(logits), want[:, :8], atol=1e-5, rtol=0)
    pos = np.array([8, 7])
    for step in range(16):
        step_tokens = tokens[np.arange(2), pos][:, None]  # (B, 1)
        logits, cache = fns.decode(jnp.asarray(step_tokens), jnp.asarray(pos, jnp.int32), cache)
        assert logits.shape == (2, 1, TINY.vocab_size)
        expected = want[np.arange(2), pos][:, None]
        np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-5, rtol=0)
        pos = pos + np.array([1, 1 if step >= 3 else 0])
    assert pos.tolist() == [24, 20]


# --- weights -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [n for n in sorted(CONFIGS)],
)
def test_expected_shapes_count_matches_num_params(name: str) -> None:
    config = CONFIGS[name]
    assert sum(int(np.prod(s)) for s in expected_shapes(config).values()) == config.num_params()


def test_random_weights_are_deterministic() -> None:
    a, b, c = random_weights(TINY, 0), random_weights(TINY, 0), random_weights(TINY, 1)
    assert {k: v.shape for k, v in a.items()} == expected_shapes(TINY)
    assert all(v.dtype == np.float32 for v in a.values())
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["model.norm.weight"], c["model.norm.weight"])
    assert abs(float(a["model.norm.weight"].mean()) - 1.0) < 0.05


FALCONISH = TINY.with_(norm="layer", mlp="gelu", parallel_block=True, tie_word_embeddings=True)


@pytest.mark.parametrize("config", [TINY, FALCONISH], ids=["llama", "falcon-style"])
def test_weights_round_trip(tmp_path: Path, config: LlamaConfig) -> None:
    weights = random_weights(config, seed=7)
    save_hf_checkpoint(config, weights, tmp_path)
    loaded_config, loaded = load_hf_checkpoint(tmp_path)
    assert loaded_config == config
    assert loaded.keys() == weights.keys()
    for k in weights:
        np.testing.assert_array_equal(loaded[k], weights[k], err_msg=k)
    hf = json.loads((tmp_path / "config.json").read_text())
    assert hf["rope_scaling"]["rope_type"] == "llama3"


def _write_tensors(tmp_path: Path, weights: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    save_file(weights, tmp_path / "model.safetensors")


def test_load_names_missing_unexpected_and_misshapen_keys(tmp_path: Path) -> None:
    weights = random_weights(TINY)
    save_hf_checkpoint(TINY, weights, tmp_path)
    broken = dict(weights)
    del broken["model.layers.1.mlp.up_proj.weight"]
    broken["model.layers.0.self_attn.k_proj.weight"] = np.zeros((128, 128), np.float32)
    broken["model.layers.0.self_attn.q_norm.weight"] = np.ones(8, np.float32)
    _write_tensors(tmp_path, broken)
    with pytest.raises(ValueError) as info:
        load_hf_checkpoint(tmp_path)
    message = str(info.value)
    assert "missing keys (1): model.layers.1.mlp.up_proj.weight" in message
    assert "unexpected keys (1): model.layers.0.self_attn.q_norm.weight" in message
    assert "model.layers.0.self_attn.k_proj.weight: got (128, 128), expected (64, 128)" in message


def test_load_rejects_config_that_disagrees_with_weights(tmp_path: Path) -> None:
    save_hf_checkpoint(TINY, random_weights(TINY), tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["num_key_value_heads"] = 4
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"shape mismatches \(4\)"):
        load_hf_checkpoint(tmp_path)


# --- sampling ------------------------------------------------------------------------------------


def test_top_k_1_and_zero_temperature_are_greedy() -> None:
    logits = np.random.default_rng(8).standard_normal((6, 50))
    rng = np.random.default_rng(0)
    want = np.argmax(logits, axis=-1)
    np.testing.assert_array_equal(greedy(logits), want)
    np.testing.assert_array_equal(sample(logits, top_k=1, rng=rng), want)
    np.testing.assert_array_equal(sample(logits, temperature=0.0, rng=rng), want)
    np.testing.assert_array_equal(sample(logits, top_p=1e-9, rng=rng), want)


def test_top_p_keeps_smallest_set_reaching_p() -> None:
    probs = np.array([[0.1, 0.4, 0.05, 0.3, 0.15]])
    logits = np.log(probs)
    kept = lambda p: set(np.flatnonzero(probabilities(logits, top_p=p)[0]))  # noqa: E731
    assert kept(0.4) == {1}  # 0.4 alone reaches 0.4
    assert kept(0.41) == {1, 3}
    assert kept(0.7) == {1, 3}  # 0.4 + 0.3 = 0.7 (float round-off must not add a third)
    assert kept(0.71) == {1, 3, 4}
    assert kept(1.0) == {0, 1, 2, 3, 4}
    np.testing.assert_allclose(
        probabilities(logits, top_p=0.71)[0], np.array([0, 0.4, 0, 0.3, 0.15]) / 0.85
    )
    # top-k applies before top-p: of {1, 3}, renormalised to (4/7, 3/7), p=0.5 keeps only 1.
    assert set(np.flatnonzero(probabilities(logits, top_k=2, top_p=0.5)[0])) == {1}


def test_sampling_is_seeded_and_follows_the_distribution() -> None:
    logits = np.log(np.array([[0.1, 0.4, 0.05, 0.3, 0.15]] * 4000))
    a = sample(logits, rng=np.random.default_rng(9))
    b = sample(logits, rng=np.random.default_rng(9))
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.int32 and a.shape == (4000,)
    freq = np.bincount(a, minlength=5) / len(a)
    np.testing.assert_allclose(freq, [0.1, 0.4, 0.05, 0.3, 0.15], atol=0.03)
    cut = sample(logits, top_p=0.7, rng=np.random.default_rng(9))
    assert set(np.unique(cut)) == {1, 3}
    hot = sample(logits, temperature=100.0, rng=np.random.default_rng(9))
    assert set(np.unique(hot)) == {0, 1, 2, 3, 4}


# --- tokenizer -----------------------------------------------------------------------------------


def test_byte_tokenizer_round_trip() -> None:
    tok = ByteTokenizer(TINY.vocab_size)
    text = "Hello, Tenstorrent! ÿ 👋"
    ids = tok.encode(text, bos=True)
    assert ids[0] == tok.bos_id and all(3 <= i < 259 for i in ids[1:])
    assert tok.decode(ids) == text
    assert tok.decode([tok.pad_id, *tok.encode("ab"), tok.eos_id]) == "ab"
    assert tok.decode([3 + ord("a") + 256]) == "a"  # ids >= 259 wrap modulo 256
    with pytest.raises(ValueError, match="vocab_size >= 259"):
        ByteTokenizer(100)


def test_load_tokenizer_prefers_tokenizer_json(tmp_path: Path) -> None:
    assert isinstance(load_tokenizer(None, 512), ByteTokenizer)
    assert isinstance(load_tokenizer(tmp_path, 512), ByteTokenizer)
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2, "hello": 3, "world": 4}
    tk = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tk.decoder = tokenizers.decoders.WordPiece()
    tk.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": [2, 0]}))
    tok = load_tokenizer(tmp_path, 512)
    assert isinstance(tok, HFTokenizer)
    assert (tok.bos_id, tok.eos_id, tok.vocab_size) == (1, 2, 5)
    assert tok.encode("hello world", bos=True) == [1, 3, 4]
    assert tok.decode([3, 4]) == "hello world"
