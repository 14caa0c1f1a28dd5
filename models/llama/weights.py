"""The canonical Llama weight dict, shared by every implementation, and its safetensors I/O.

A model's weights are a flat ``dict[str, np.ndarray]`` of float32 arrays with Hugging Face Llama
names and orientation: projections are ``[out_features, in_features]`` (``y = x @ W.T``).

    model.embed_tokens.weight                          [vocab, dim]
    model.layers.{i}.input_layernorm.weight            [dim]       (+ .bias when norm == "layer")
    model.layers.{i}.self_attn.q_proj.weight           [n_heads * head_dim, dim]
    model.layers.{i}.self_attn.{k,v}_proj.weight       [n_kv_heads * head_dim, dim]
    model.layers.{i}.self_attn.o_proj.weight           [dim, n_heads * head_dim]
    model.layers.{i}.post_attention_layernorm.weight   [dim]       (+ .bias; absent if parallel_block)
    model.layers.{i}.mlp.{gate,up}_proj.weight         [ffn, dim]  (mlp == "swiglu")
    model.layers.{i}.mlp.down_proj.weight              [dim, ffn]
    model.layers.{i}.mlp.dense_h_to_4h.weight          [ffn, dim]  (mlp == "gelu")
    model.layers.{i}.mlp.dense_4h_to_h.weight          [dim, ffn]
    model.norm.weight                                  [dim]       (+ .bias when norm == "layer")
    lm_head.weight                                     [vocab, dim] (absent if tie_word_embeddings)

Query/key rows are in Hugging Face's rotate-half RoPE layout (``config.rope_tables``), not Meta's
interleaved one; ``head h`` owns rows ``h * head_dim : (h + 1) * head_dim``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from models.llama.config import LlamaConfig

# Keys that Hugging Face checkpoints may carry but that hold no weights of ours (old Llama
# checkpoints saved RoPE's inverse frequencies as buffers).
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def expected_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Every weight name the config needs, mapped to its shape (in a fixed order)."""
    c, hd = config, config.head_dim
    norm = ("weight", "bias") if c.norm == "layer" else ("weight",)
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (c.vocab_size, c.dim)}
    for i in range(c.n_layers):
        p = f"model.layers.{i}."
        for s in norm:
            shapes[p + f"input_layernorm.{s}"] = (c.dim,)
        shapes[p + "self_attn.q_proj.weight"] = (c.n_heads * hd, c.dim)
        shapes[p + "self_attn.k_proj.weight"] = (c.n_kv_heads * hd, c.dim)
        shapes[p + "self_attn.v_proj.weight"] = (c.n_kv_heads * hd, c.dim)
        shapes[p + "self_attn.o_proj.weight"] = (c.dim, c.n_heads * hd)
        if not c.parallel_block:
            for s in norm:
                shapes[p + f"post_attention_layernorm.{s}"] = (c.dim,)
        if c.mlp == "swiglu":
            shapes[p + "mlp.gate_proj.weight"] = (c.ffn_dim, c.dim)
            shapes[p + "mlp.up_proj.weight"] = (c.ffn_dim, c.dim)
            shapes[p + "mlp.down_proj.weight"] = (c.dim, c.ffn_dim)
        elif c.mlp == "gelu":
            shapes[p + "mlp.dense_h_to_4h.weight"] = (c.ffn_dim, c.dim)
            shapes[p + "mlp.dense_4h_to_h.weight"] = (c.dim, c.ffn_dim)
        else:
            raise ValueError(f"config.mlp={c.mlp!r}; expected 'swiglu' or 'gelu'")
    for s in norm:
        shapes[f"model.norm.{s}"] = (c.dim,)
    if not c.tie_word_embeddings:
        shapes["lm_head.weight"] = (c.vocab_size, c.dim)
    return shapes


def random_weights(config: LlamaConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic random float32 weights: projections N(0, 0.02²), norms 1 + 0.1·N(0, 1).

    Norm biases are 0.1·N(0, 1) too (not zero), so a test catches an implementation that drops a
    norm's weight or bias.
    """
    rng = np.random.default_rng(seed)
    return {
        name: random_weight(rng, name, shape) for name, shape in expected_shapes(config).items()
    }


def random_weight(rng: np.random.Generator, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The next weight ``name`` of :func:`random_weights`' stream (drawn in its fixed order)."""
    w = rng.standard_normal(shape, dtype=np.float32)
    if "norm." in name:  # model.norm.* and *_layernorm.*
        w *= np.float32(0.1)
        if name.endswith(".weight"):
            w += np.float32(1.0)
    else:
        w *= np.float32(0.02)
    return w


def check_weights(config: LlamaConfig, weights: dict[str, Any]) -> None:
    """Raise ``ValueError`` listing every missing key, unexpected key and shape mismatch."""
    want = expected_shapes(config)
    missing = [k for k in want if k not in weights]
    unexpected = [k for k in weights if k not in want]
    bad = [
        f"{k}: got {tuple(weights[k].shape)}, expected {want[k]}"
        for k in want
        if k in weights and tuple(weights[k].shape) != want[k]
    ]
    if not (missing or unexpected or bad):
        return
    lines = [f"weights do not match config {config.name!r}:"]
    if missing:
        lines.append(f"  missing keys ({len(missing)}): {_preview(missing)}")
    if unexpected:
        lines.append(f"  unexpected keys ({len(unexpected)}): {_preview(unexpected)}")
    if bad:
        lines.append(f"  shape mismatches ({len(bad)}):")
        lines += [f"    {b}" for b in bad[:20]]
        if len(bad) > 20:
            lines.append(f"    ... ({len(bad) - 20} more)")
    lines.append(
        "  fix: check that config.json matches the weights (n_kv_heads, ffn_dim, "
        "tie_word_embeddings, norm/mlp/parallel_block)."
    )
    raise ValueError("\n".join(lines))


def _preview(names: list[str], n: int = 12) -> str:
    return ", ".join(names[:n]) + (f", ... ({len(names) - n} more)" if len(names) > n else "")


def hf_config_dict(config: LlamaConfig) -> dict[str, Any]:
    """A Hugging Face ``config.json`` (LlamaForCausalLM) for ``config``.

    Writes the classic ``rope_theta`` + ``rope_scaling`` keys (transformers 4.x and 5.x read both).
    Falcon-style variants, which Hugging Face's Llama cannot express, go under a ``"ttjax"`` key.
    """
    c = config
    out: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "_name_or_path": c.name,
        "vocab_size": c.vocab_size,
        "hidden_size": c.dim,
        "intermediate_size": c.ffn_dim,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.n_kv_heads,
        "head_dim": c.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": c.max_seq_len,
        "rms_norm_eps": c.norm_eps,
        "rope_theta": c.rope_theta,
        "rope_scaling": None,
        "tie_word_embeddings": c.tie_word_embeddings,
        "attention_bias": False,
        "mlp_bias": False,
        "dtype": "float32",
    }
    if c.rope_scaling is not None:
        s = c.rope_scaling
        out["rope_scaling"] = {
            "rope_type": "llama3",
            "factor": s.factor,
            "low_freq_factor": s.low_freq_factor,
            "high_freq_factor": s.high_freq_factor,
            "original_max_position_embeddings": s.original_max_position_embeddings,
        }
    if (c.norm, c.mlp, c.parallel_block) != ("rms", "swiglu", False):
        out["ttjax"] = {"norm": c.norm, "mlp": c.mlp, "parallel_block": c.parallel_block}
    return out


def _config_from_hf(raw: dict[str, Any], name: str) -> LlamaConfig:
    """``LlamaConfig.from_hf`` plus transformers 5's ``rope_parameters`` and our ``ttjax`` key."""
    raw = dict(raw)
    rope = raw.get("rope_parameters")
    if isinstance(rope, dict) and rope.get("rope_type", rope.get("type")) not in (None, "default"):
        raw["rope_scaling"] = rope
    if raw.get("rope_scaling"):
        kind = raw["rope_scaling"].get("rope_type", raw["rope_scaling"].get("type"))
        if kind not in ("llama3", "default"):
            raise ValueError(f"rope_scaling type {kind!r} is not supported (only 'llama3')")
    config = LlamaConfig.from_hf(raw, name=raw.get("_name_or_path") or name)
    extra = raw.get("ttjax") or {}
    if extra:
        config = config.with_(**{k: extra[k] for k in ("norm", "mlp", "parallel_block")})
    return config


def _safetensors_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        return [folder / f for f in sorted(set(weight_map.values()))]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors files in {folder}")
    return files


def load_hf_checkpoint(
    path: str | Path, *, dtype: Any = np.float32
) -> tuple[LlamaConfig, dict[str, np.ndarray]]:
    """Read a Hugging Face Llama folder (``config.json`` + ``*.safetensors``, sharded or not).

    Tensors of any stored dtype (bf16 included, through ``ml_dtypes``) are cast to ``dtype``.
    Raises ``ValueError`` naming missing/unexpected keys and shape mismatches.
    """
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy, which safetensors then uses)
    from safetensors import safe_open

    folder = Path(path)
    config = _config_from_hf(json.loads((folder / "config.json").read_text()), folder.name)
    weights: dict[str, np.ndarray] = {}
    for file in _safetensors_files(folder):
        with safe_open(file, framework="numpy") as f:
            for name in f.keys():
                if name.endswith(_IGNORED_SUFFIXES):
                    continue
                weights[name] = np.asarray(f.get_tensor(name)).astype(dtype, copy=False)
    if config.tie_word_embeddings:
        weights.pop("lm_head.weight", None)  # some tied checkpoints store the shared copy too
    check_weights(config, weights)
    return config, weights


def save_hf_checkpoint(
    config: LlamaConfig, weights: dict[str, np.ndarray], path: str | Path
) -> None:
    """Write ``config.json`` and ``model.safetensors`` (float32) that ``load_hf_checkpoint`` and
    ``transformers.LlamaForCausalLM.from_pretrained`` read back."""
    from safetensors.numpy import save_file

    check_weights(config, weights)
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(hf_config_dict(config), indent=2) + "\n")
    tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()}
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
