"""Llama's training forward on one device's local parameters (TTML's modules, Megatron TP).

Q/K/V, gate and up are column-parallel, O and down row-parallel, the embedding and the LM head
(untied unless ``tie_weights``) vocab-parallel; grouped-query heads are split with their key/value heads. Shared by the
trainer (``models/llama/train.py``) and its pipeline adapter (``models/llama/pipeline.py``).
``params["blocks"]`` holds the blocks stacked on a leading ``[n_layers]`` axis, run under
``lax.scan`` with ``jax.checkpoint`` (``remat_policy``), so compile time does not grow with depth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from models.llama.axes import split_axis
from models.llama.config import LlamaConfig, rope_tables
from models.llama.weights import expected_shapes
from ttjax.errors import ConfigError
from ttjax.plan import Axes, is_logical
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.fsdp import block_gather
from ttjax.ttml.modules import (
    ColumnParallelLinear,
    RMSNorm,
    RowParallelLinear,
    VocabParallelEmbedding,
)
from ttjax.ttml.ops.loss import cross_entropy_loss
from ttjax.ttml.ops.ring_attention import local_positions, ring_attention
from ttjax.ttml.stacked import check_remat_policy, scan_blocks, stack_blocks


def rotate_half(x: Any) -> Any:
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([-x2, x1], axis=-1)


@dataclass(frozen=True)
class LlamaTrain:
    """Llama's training forward on one device's local parameters.

    ``axes``: the plan's :class:`ttjax.plan.Axes` (or a TP axis name, or None); under CP
    (``axes.cp``) RoPE takes each token's global position and attention runs as a ring.
    ``remat_policy`` (``ttjax.ttml.stacked``): ``"full"`` recomputes each block in the backward
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

    def block(self, p: dict[str, Any], x: Any, cos: Any, sin: Any, axes: Axes | str | None) -> Any:
        m, hd = self.layers, self.config.head_dim
        tp, cp = Axes.of(axes).tp, Axes.of(axes).cp
        B, T, _ = x.shape
        h = m["attention_norm"](p["attention_norm"], x)
        q = m["q_linear"](p["q_linear"], h, tp).reshape(B, T, -1, hd)
        k = m["k_linear"](p["k_linear"], h, tp).reshape(B, T, -1, hd)
        v = m["v_linear"](p["v_linear"], h, tp).reshape(B, T, -1, hd)
        q, k = (a * cos + rotate_half(a) * sin for a in (q, k))
        if cp is not None:
            y = ring_attention(q, k, v, cp).reshape(B, T, -1)
        else:
            group = q.shape[2] // k.shape[2]
            k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
            att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hd)
            att = jnp.where(jnp.tril(jnp.ones((T, T), bool)), att, -jnp.inf)
            y = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(att, -1), v).reshape(B, T, -1)
        x = x + m["out_linear"](p["out_linear"], y, tp)
        h = m["mlp_norm"](p["mlp_norm"], x)
        gate = jax.nn.silu(m["w1"](p["w1"], h, tp)) * m["w3"](p["w3"], h, tp)
        return x + m["w2"](p["w2"], gate, tp)

    def __call__(self, params: dict[str, Any], idx: Any, axes: Axes | str | None) -> Any:
        """Logits ``[B, T, vocab / tp]`` (this device's slice of the vocabulary)."""
        ax = Axes.of(axes)
        tp, T = ax.tp, idx.shape[-1]
        if ax.cp is None:
            cos, sin = (jnp.asarray(a)[:T, None, :] for a in rope_tables(self.config, T))
        else:  # this device's tokens sit at scattered global positions (load balancing)
            pos = local_positions(T, ax.cp)
            tables = rope_tables(self.config, T * lax.axis_size(ax.cp))
            cos, sin = (jnp.asarray(a)[pos][:, None, :] for a in tables)
        x = self.tok_emb(params["tok_emb"], idx, tp)
        logical = {name: layer.axes() for name, layer in self.layers.items()}
        x = scan_blocks(
            lambda p, h: self.block(p, h, cos, sin, ax),
            params["blocks"],
            x,
            self.remat_policy,
            gather=block_gather(ax, logical),  # FSDP: one block whole at a time
        )
        x = RMSNorm(self.config.dim, self.config.norm_eps)(params["ln_fc"], x)
        if self.tie_weights:
            return self.tok_emb.attend(params["tok_emb"], x, tp)
        return self.fc(params["fc"], x, tp)

    def loss(self, params: dict[str, Any], idx: Any, targets: Any, axes: Axes | str | None) -> Any:
        """Mean next-token cross-entropy over this device's tokens (vocab-parallel under TP)."""
        return cross_entropy_loss(self(params, idx, axes), targets, Axes.of(axes).tp)


def params_from_weights(config: LlamaConfig, w: dict[str, np.ndarray]) -> dict[str, Any]:
    """The canonical (Hugging Face) weight dict -> the training tree (projections as [in, out],
    the blocks stacked on a leading ``[n_layers]`` axis)."""

    def lin(name: str) -> dict[str, Any]:
        return {"weight": jnp.asarray(w[name].T)}

    blocks = []
    for i in range(config.n_layers):
        p = f"model.layers.{i}."
        blocks.append(
            {
                "attention_norm": {"gamma": jnp.asarray(w[p + "input_layernorm.weight"])},
                "q_linear": lin(p + "self_attn.q_proj.weight"),
                "k_linear": lin(p + "self_attn.k_proj.weight"),
                "v_linear": lin(p + "self_attn.v_proj.weight"),
                "out_linear": lin(p + "self_attn.o_proj.weight"),
                "mlp_norm": {"gamma": jnp.asarray(w[p + "post_attention_layernorm.weight"])},
                "w1": lin(p + "mlp.gate_proj.weight"),
                "w3": lin(p + "mlp.up_proj.weight"),
                "w2": lin(p + "mlp.down_proj.weight"),
            }
        )
    return {
        "tok_emb": {"weight": jnp.asarray(w["model.embed_tokens.weight"])},
        "blocks": stack_blocks(blocks),
        "ln_fc": {"gamma": jnp.asarray(w["model.norm.weight"])},
        "fc": lin("lm_head.weight"),
    }


def block_axes(config: LlamaConfig) -> dict[str, Any]:
    """The logical axes of one block's parameters: the modules' own, split as
    ``models/llama/axes.py`` states."""
    return {name: layer.axes() for name, layer in LlamaTrain(config).layers.items()}


def param_axes(config: LlamaConfig) -> dict[str, Any]:
    """The logical axes of every parameter (the plan's rules place them); the stacked blocks
    lead with ``"layers"``."""
    model = LlamaTrain(config)
    return {
        "tok_emb": model.tok_emb.axes(),
        "blocks": jax.tree.map(
            lambda a: a.prepend("layers"), block_axes(config), is_leaf=is_logical
        ),
        "ln_fc": RMSNorm(config.dim, config.norm_eps).axes(),
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
