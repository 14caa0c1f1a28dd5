"""Llama's training forward on one device's local parameters, composed of TTML's modules.

The model names no mesh axis; the modules read the plan where they run. Q/K/V, gate and up are
column-parallel, O and down row-parallel, the embedding and the LM head (untied unless
``tie_weights``) vocab-parallel; grouped-query heads are split with their key/value heads.
``Attention`` applies RoPE (the :meth:`LlamaTrain.rope` hook) at each token's global position;
``Stack`` scans the blocks (stacked on a leading ``[n_layers]`` axis) under ``jax.checkpoint``
(``remat_policy``). Shared by the trainer
(``models/llama/train.py``) and its pipeline adapter (``models/llama/pipeline.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from models.llama.axes import split_axis
from models.llama.config import LlamaConfig, rope_tables
from models.llama.weights import expected_shapes, random_weight
from ttjax.errors import ConfigError
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.modules import (
    Attention,
    ColumnParallelLinear,
    Positions,
    RMSNorm,
    RowParallelLinear,
    Stack,
    VocabParallelEmbedding,
    check_remat_policy,
    stack_blocks,
)
from ttjax.ttml.ops.loss import cross_entropy_loss


def rotate_half(x: Any) -> Any:
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([-x2, x1], axis=-1)


@dataclass(frozen=True)
class LlamaTrain:
    """Llama's training forward on one device's local parameters.

    ``remat_policy`` (``ttjax.ttml.modules.Stack``): ``"full"`` recomputes each block in the backward
    pass, ``"dots"`` keeps its matmul outputs, ``"none"`` keeps every activation.
    """

    config: LlamaConfig
    remat_policy: str = "full"
    # TTML's weight_tying: True reads the LM head from the embedding (``tok_emb``; no ``fc``).
    tie_weights: bool = False

    def __post_init__(self) -> None:
        check_remat_policy("LlamaTrain", self.remat_policy)

    @property
    def layers(self) -> dict[str, Any]:
        c, hd = self.config, self.config.head_dim
        col = partial(ColumnParallelLinear, has_bias=False)
        row = partial(RowParallelLinear, has_bias=False, input_is_parallel=True)
        heads, kv = split_axis("self_attn.q_proj.weight"), split_axis("self_attn.k_proj.weight")
        mlp = split_axis("mlp.gate_proj.weight")
        return {
            "attention_norm": RMSNorm(c.dim, c.norm_eps),
            "q_linear": col(c.dim, c.n_heads * hd, split=heads),
            "k_linear": col(c.dim, c.n_kv_heads * hd, split=kv),
            "v_linear": col(c.dim, c.n_kv_heads * hd, split=kv),
            "out_linear": row(c.n_heads * hd, c.dim, split=heads),
            "mlp_norm": RMSNorm(c.dim, c.norm_eps),
            "w1": col(c.dim, c.ffn_dim, split=mlp),
            "w3": col(c.dim, c.ffn_dim, split=mlp),
            "w2": row(c.ffn_dim, c.dim, split=mlp),
        }

    @property
    def tok_emb(self) -> VocabParallelEmbedding:
        return VocabParallelEmbedding(self.config.vocab_size, self.config.dim)

    @property
    def fc(self) -> ColumnParallelLinear:
        c = self.config
        return ColumnParallelLinear(
            c.dim, c.vocab_size, has_bias=False, split=split_axis("lm_head.weight")
        )

    def rope(self, x: Any, positions: Any) -> Any:
        """Hugging Face's rotate-half RoPE of ``x`` [B, T, H, D] at ``positions`` [T]."""
        n = Positions().length(x.shape[1])
        cos, sin = (jnp.asarray(a)[positions][:, None, :] for a in rope_tables(self.config, n))
        return x * cos + rotate_half(x) * sin

    def block(self, p: dict[str, Any], x: Any) -> Any:
        m, hd = self.layers, self.config.head_dim
        B, T, _ = x.shape
        h = m["attention_norm"](p["attention_norm"], x)
        q = m["q_linear"](p["q_linear"], h).reshape(B, T, -1, hd)
        k = m["k_linear"](p["k_linear"], h).reshape(B, T, -1, hd)
        v = m["v_linear"](p["v_linear"], h).reshape(B, T, -1, hd)
        y = Attention(rope=self.rope, scale=1 / math.sqrt(hd))(q, k, v)
        x = x + m["out_linear"](p["out_linear"], y)
        h = m["mlp_norm"](p["mlp_norm"], x)
        gate = jax.nn.silu(m["w1"](p["w1"], h)) * m["w3"](p["w3"], h)
        return x + m["w2"](p["w2"], gate)

    @property
    def blocks(self) -> Stack:
        """The ``n_layers`` blocks, scanned."""
        return Stack(self.block, self.layers, self.remat_policy)

    @property
    def ln_fc(self) -> RMSNorm:
        return RMSNorm(self.config.dim, self.config.norm_eps)

    def __call__(self, params: dict[str, Any], idx: Any) -> Any:
        """Logits ``[B, T, vocab / tp]`` (this device's slice of the vocabulary)."""
        x = self.tok_emb(params["tok_emb"], idx)
        x = self.blocks(params["blocks"], x)
        x = self.ln_fc(params["ln_fc"], x)
        if self.tie_weights:
            return self.tok_emb.attend(params["tok_emb"], x)
        return self.fc(params["fc"], x)

    def loss(self, params: dict[str, Any], idx: Any, targets: Any) -> Any:
        """Mean next-token cross-entropy over this device's tokens (vocab-parallel under TP)."""
        return cross_entropy_loss(self(params, idx), targets)


#: A block's Hugging Face weight -> (module, leaf, stored transposed as [in, out]), in the
#: order :func:`models.llama.weights.expected_shapes` lists them.
BLOCK_WEIGHTS = {
    "input_layernorm.weight": ("attention_norm", "gamma", False),
    "self_attn.q_proj.weight": ("q_linear", "weight", True),
    "self_attn.k_proj.weight": ("k_linear", "weight", True),
    "self_attn.v_proj.weight": ("v_linear", "weight", True),
    "self_attn.o_proj.weight": ("out_linear", "weight", True),
    "post_attention_layernorm.weight": ("mlp_norm", "gamma", False),
    "mlp.gate_proj.weight": ("w1", "weight", True),
    "mlp.up_proj.weight": ("w3", "weight", True),
    "mlp.down_proj.weight": ("w2", "weight", True),
}
#: The weights outside the blocks, the same way.
TOP_WEIGHTS = {
    "model.embed_tokens.weight": ("tok_emb", "weight", False),
    "model.norm.weight": ("ln_fc", "gamma", False),
    "lm_head.weight": ("fc", "weight", True),
}


def params_from_weights(config: LlamaConfig, w: dict[str, np.ndarray]) -> dict[str, Any]:
    """The canonical (Hugging Face) weight dict -> the training tree (projections as [in, out],
    the blocks stacked on a leading ``[n_layers]`` axis)."""

    def tree(table: dict[str, tuple[str, str, bool]], prefix: str = "") -> dict[str, Any]:
        return {
            module: {leaf: jnp.asarray(w[prefix + name].T if t else w[prefix + name])}
            for name, (module, leaf, t) in table.items()
        }

    blocks = [tree(BLOCK_WEIGHTS, f"model.layers.{i}.") for i in range(config.n_layers)]
    return {**tree(TOP_WEIGHTS), "blocks": stack_blocks(blocks)}


def abstract_params(config: LlamaConfig, tied: bool = False) -> dict[str, Any]:
    """The training tree as ``jax.ShapeDtypeStruct``\\ s (nothing allocated): what the memory
    preflight compiles the step on before any weight exists. ``tied`` leaves out the LM head."""
    hf = {k: jax.ShapeDtypeStruct(v, jnp.float32) for k, v in expected_shapes(config).items()}
    shapes = jax.eval_shape(lambda w: params_from_weights(config, w), hf)
    if tied:
        del shapes["fc"]
    return shapes


def random_params(config: LlamaConfig, seed: int = 0, tied: bool = False) -> dict[str, Any]:
    """``params_from_weights(config, random_weights(config, seed))``, bit for bit, built in place:
    each weight is drawn in :func:`random_weights`' order and written into its stacked
    ``[n_layers, in, out]`` numpy array, so the model exists once (not as the weight dict, then
    the stacked copy). ``tied`` skips the LM head (drawn last, so nothing else changes)."""
    out = jax.tree.map(lambda a: np.empty(a.shape, a.dtype), abstract_params(config, tied))
    rng = np.random.default_rng(seed)
    prefix = "model.layers."
    for name, shape in expected_shapes(config).items():
        if tied and name == "lm_head.weight":
            continue
        w = random_weight(rng, name, shape)
        if name.startswith(prefix):
            layer, _, rest = name[len(prefix) :].partition(".")
            module, leaf, t = BLOCK_WEIGHTS[rest]
            out["blocks"][module][leaf][int(layer)] = w.T if t else w
        else:
            module, leaf, t = TOP_WEIGHTS[name]
            out[module][leaf][...] = w.T if t else w
    return out


def block_axes(config: LlamaConfig) -> dict[str, Any]:
    """The logical axes of one block's parameters: the modules' own, split as
    ``models/llama/axes.py`` states."""
    return LlamaTrain(config).blocks.block_axes()


def param_axes(config: LlamaConfig) -> dict[str, Any]:
    """The logical axes of every parameter (the plan's rules place them); the stacked blocks
    lead with ``"layers"``."""
    model = LlamaTrain(config)
    return {
        "tok_emb": model.tok_emb.axes(),
        "blocks": model.blocks.axes(),
        "ln_fc": model.ln_fc.axes(),
        "fc": model.fc.axes(),
    }


def check_heads(config: LlamaConfig, par: ParallelismContext) -> None:
    """Whole heads per TP device, with their key/value heads."""
    if par.tp_size > 1 and (config.n_heads % par.tp_size or config.n_kv_heads % par.tp_size):
        raise ConfigError(
            f"Llama: num_heads={config.n_heads} and num_groups={config.n_kv_heads} must both be "
            f"divisible by the TP size {par.tp_size}.\nfix: pick head counts that are multiples "
            "of the TP size, or a smaller TP axis."
        )


def block_specs(config: LlamaConfig, par: ParallelismContext) -> dict[str, Any]:
    """PartitionSpecs of one block's parameters (the pipeline stages blocks one by one)."""
    check_heads(config, par)
    return par.specs(block_axes(config))


def param_specs(config: LlamaConfig, par: ParallelismContext) -> dict[str, Any]:
    """How each parameter lies on ``par``'s mesh: :func:`param_axes` through the plan's rules."""
    check_heads(config, par)
    shapes = jax.eval_shape(
        lambda w: params_from_weights(config, w),
        {k: jax.ShapeDtypeStruct(v, jnp.float32) for k, v in expected_shapes(config).items()},
    )
    return par.specs(param_axes(config), shapes)
