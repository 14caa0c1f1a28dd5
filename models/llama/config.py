"""Llama-3.x model configs: the tiny test model, the ~100M demo model, and the real shapes.

One frozen dataclass describes the architecture for both the ttjax model (``model.py``) and the
single-device Flax reference (``reference.py``). A few flags also describe Falcon-7B's decoder
(LayerNorm, GELU MLP, parallel attention+MLP, multi-query attention) so its real shape can be
compiled and inspected with the same code.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RopeScaling:
    """Llama-3.1's frequency scaling of RoPE (``rope_type: llama3`` in Hugging Face configs)."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class LlamaConfig:
    name: str
    vocab_size: int
    dim: int  # hidden size
    n_layers: int
    n_heads: int
    n_kv_heads: int  # grouped-query attention: n_heads is a multiple of n_kv_heads
    ffn_dim: int  # SwiGLU inner size (GELU MLP inner size when mlp == "gelu")
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    rope_scaling: RopeScaling | None = None
    max_seq_len: int = 2048  # KV-cache length
    tie_word_embeddings: bool = False
    # Falcon-style variants (all False/"rms"/"swiglu" for Llama):
    norm: str = "rms"  # "rms" (RMSNorm) or "layer" (LayerNorm with bias)
    mlp: str = "swiglu"  # "swiglu" (gate/up/down) or "gelu" (dense_h_to_4h, gelu, dense_4h_to_h)
    parallel_block: bool = False  # x + attn(norm(x)) + mlp(norm(x)) with one shared norm

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def num_params(self) -> int:
        """Parameter count (embeddings and LM head included)."""
        attn = self.dim * self.head_dim * (2 * self.n_heads + 2 * self.n_kv_heads)
        mlp = (3 if self.mlp == "swiglu" else 2) * self.dim * self.ffn_dim
        norms = (1 if self.parallel_block else 2) * self.dim * (2 if self.norm == "layer" else 1)
        head = 0 if self.tie_word_embeddings else self.vocab_size * self.dim
        final_norm = self.dim * (2 if self.norm == "layer" else 1)
        return self.n_layers * (attn + mlp + norms) + self.vocab_size * self.dim + head + final_norm

    def flops_per_token(self, context: int) -> float:
        """Forward FLOPs for one token at ``context`` positions (2 per MAC; PaLM appendix B)."""
        matmul = 2 * (self.num_params() - self.vocab_size * self.dim)
        attn = 2 * 2 * self.n_layers * self.n_heads * self.head_dim * context
        return float(matmul + attn)

    def with_(self, **changes: Any) -> LlamaConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_hf(config: dict[str, Any] | str | Path, name: str | None = None) -> LlamaConfig:
        """Read a Hugging Face ``config.json`` (LlamaForCausalLM)."""
        if not isinstance(config, dict):
            path = Path(config)
            if path.is_dir():
                path = path / "config.json"
            config = json.loads(path.read_text())
        config = dict(config)
        rope_params = config.get("rope_parameters")
        if isinstance(rope_params, dict):  # transformers >= 5: rope_theta and scaling in one dict
            if "rope_theta" in rope_params:
                config["rope_theta"] = rope_params["rope_theta"]
            if rope_params.get("rope_type", rope_params.get("type")) not in (None, "default"):
                config["rope_scaling"] = rope_params
        scaling = config.get("rope_scaling") or None
        rope = None
        if scaling and scaling.get("rope_type", scaling.get("type")) == "llama3":
            rope = RopeScaling(
                factor=float(scaling["factor"]),
                low_freq_factor=float(scaling["low_freq_factor"]),
                high_freq_factor=float(scaling["high_freq_factor"]),
                original_max_position_embeddings=int(scaling["original_max_position_embeddings"]),
            )
        dim = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        if int(config.get("head_dim", dim // heads)) != dim // heads:
            raise ValueError(
                f"head_dim={config['head_dim']} differs from hidden_size/num_attention_heads="
                f"{dim // heads}; this model code assumes they are equal."
            )
        return LlamaConfig(
            name=name or str(config.get("_name_or_path", "hf")),
            vocab_size=int(config["vocab_size"]),
            dim=dim,
            n_layers=int(config["num_hidden_layers"]),
            n_heads=heads,
            n_kv_heads=int(config.get("num_key_value_heads", heads)),
            ffn_dim=int(config["intermediate_size"]),
            norm_eps=float(config.get("rms_norm_eps", 1e-5)),
            rope_theta=float(config.get("rope_theta", 10000.0)),
            rope_scaling=rope,
            max_seq_len=int(min(config.get("max_position_embeddings", 2048), 4096)),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        )


LLAMA31 = RopeScaling()

CONFIGS: dict[str, LlamaConfig] = {
    # Tests: every dim divides by 8 devices, GQA with 2 query heads per KV head.
    "tiny": LlamaConfig(
        name="tiny",
        vocab_size=512,
        dim=128,
        n_layers=2,
        n_heads=16,
        n_kv_heads=8,
        ffn_dim=256,
        rope_scaling=LLAMA31,
        max_seq_len=64,
    ),
    # The demo model, about 114M parameters; runs on the CPU mesh.
    "small": LlamaConfig(
        name="small",
        vocab_size=32768,
        dim=768,
        n_layers=10,
        n_heads=16,
        n_kv_heads=8,
        ffn_dim=2048,
        rope_scaling=LLAMA31,
        max_seq_len=256,
    ),
    "llama-3.1-8b": LlamaConfig(
        name="llama-3.1-8b",
        vocab_size=128256,
        dim=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        ffn_dim=14336,
        rope_scaling=LLAMA31,
        max_seq_len=2048,
    ),
    "llama-3.1-70b": LlamaConfig(
        name="llama-3.1-70b",
        vocab_size=128256,
        dim=8192,
        n_layers=80,
        n_heads=64,
        n_kv_heads=8,
        ffn_dim=28672,
        rope_scaling=LLAMA31,
        max_seq_len=2048,
    ),
    # Falcon-7B's decoder: 71 query heads sharing one KV head, parallel attention + GELU MLP.
    "falcon-7b": LlamaConfig(
        name="falcon-7b",
        vocab_size=65024,
        dim=4544,
        n_layers=32,
        n_heads=71,
        n_kv_heads=1,
        ffn_dim=18176,
        norm_eps=1e-5,
        rope_theta=10000.0,
        max_seq_len=2048,
        tie_word_embeddings=True,
        norm="layer",
        mlp="gelu",
        parallel_block=True,
    ),
}


def get_config(name: str) -> LlamaConfig:
    """A named config (``tiny``, ``small``, ``llama-3.1-8b``, ``llama-3.1-70b``, ``falcon-7b``)."""
    key = name.lower()
    aliases = {"8b": "llama-3.1-8b", "70b": "llama-3.1-70b", "falcon": "falcon-7b"}
    key = aliases.get(key, key)
    if key not in CONFIGS:
        raise KeyError(f"unknown config {name!r}; choose one of {sorted(CONFIGS)}")
    return CONFIGS[key]


def rope_frequencies(config: LlamaConfig) -> Any:
    """Inverse frequencies [head_dim/2], with Llama-3.1 scaling when configured (float64 numpy)."""
    import numpy as np

    hd = config.head_dim
    inv = 1.0 / (config.rope_theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    s = config.rope_scaling
    if s is None:
        return inv
    low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
    high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > low_wavelen, inv / s.factor, inv)
    smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor
    )
    mid = (1 - smooth) * scaled / s.factor + smooth * scaled
    is_mid = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return np.where(is_mid, mid, scaled)


def rope_tables(config: LlamaConfig, length: int | None = None) -> tuple[Any, Any]:
    """cos and sin tables [length, head_dim] in Hugging Face's rotate-half layout (float32)."""
    import numpy as np

    n = length or config.max_seq_len
    freqs = np.outer(np.arange(n, dtype=np.float64), rope_frequencies(config))
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)
