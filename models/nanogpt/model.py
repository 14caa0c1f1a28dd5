"""NanoGPT: a GPT-2 style decoder (learned positions, tied embeddings by default), like karpathy's model.py.

The compute only: the model names no mesh axis and picks no strategy. It composes TTML's
modules, which apply the plan where they run (inside the train step's ``shard_map``): each
attention block and each MLP is a Megatron pair (``ColumnParallelLinear`` then
``RowParallelLinear``), the embedding doubles as the tied LM head, ``Attention`` and
``Positions`` handle a split sequence, ``Stack`` scans the blocks. Called outside
``shard_map``, it is the whole model on one device.

>>> model = GPT(GPTConfig(vocab_size=512, block_size=64, n_layer=4, n_head=4, n_embd=128))
>>> loss = model.loss(params, idx, targets)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from ttjax.errors import ConfigError
from ttjax.ttml.modules import (
    Attention,
    ColumnParallelLinear,
    LayerNorm,
    Positions,
    RowParallelLinear,
    Stack,
    VocabParallelEmbedding,
    check_remat_policy,
)
from ttjax.ttml.ops.loss import cross_entropy_loss


@dataclass(frozen=True)
class GPTConfig:
    """GPT-2 hyper-parameters (nanoGPT's names); ``vocab_size`` must divide by the TP size."""

    vocab_size: int = 512
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    bias: bool = True
    # jax.nn.dot_product_attention's implementation: None (JAX's choice: XLA), "xla", or "cudnn"
    # (cuDNN flash attention: a GPU, bf16/fp16, head size a multiple of 8 up to 128).
    attention: str | None = None
    # jax.checkpoint around each block (ttjax.ttml.modules.Stack): "full" recomputes it in the
    # backward pass, "dots" keeps its matmul outputs, "none" keeps every activation.
    remat_policy: str = "full"
    # TTML's weight_tying: True reuses wte as the LM head; False adds its own ``lm_head`` (same
    # vocabulary-parallel layout as wte).
    tie_weights: bool = True

    def __post_init__(self) -> None:
        check_remat_policy("GPTConfig", self.remat_policy)
        if self.attention not in (None, "xla", "cudnn"):
            raise ConfigError(
                f"GPTConfig: attention={self.attention!r} is not an attention implementation.\n"
                "fix: None (JAX's default), 'xla', or 'cudnn' (GPU, bf16)."
            )


@dataclass(frozen=True)
class Block:
    """``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))``.

    ``c_attn``'s output columns are ordered per head as (q, k, v), so a column split over TP
    hands each device whole heads.
    """

    config: GPTConfig

    @property
    def layers(self) -> dict[str, Any]:
        c = self.config
        proj_std = 0.02 / math.sqrt(2 * c.n_layer)  # GPT-2's scaled init of residual projections
        return {
            "ln_1": LayerNorm(c.n_embd),
            "c_attn": ColumnParallelLinear(c.n_embd, 3 * c.n_embd, c.bias, split="heads"),
            "attn_proj": RowParallelLinear(
                c.n_embd, c.n_embd, c.bias, input_is_parallel=True, std=proj_std, split="heads"
            ),
            "ln_2": LayerNorm(c.n_embd),
            "c_fc": ColumnParallelLinear(c.n_embd, 4 * c.n_embd, c.bias),
            "mlp_proj": RowParallelLinear(
                4 * c.n_embd, c.n_embd, c.bias, input_is_parallel=True, std=proj_std
            ),
        }

    def attn(self, p: dict[str, Any], x: Any) -> Any:
        """Causal self-attention."""
        m, hs = self.layers, self.config.n_embd // self.config.n_head
        B, T, _ = x.shape
        qkv = m["c_attn"](p["c_attn"], x)  # [B, T, local heads * 3 * hs]
        q, k, v = jnp.moveaxis(qkv.reshape(B, T, -1, 3, hs), 3, 0)  # each [B, T, nh, hs]
        y = Attention(implementation=self.config.attention, scale=1 / math.sqrt(hs))(q, k, v)
        return m["attn_proj"](p["attn_proj"], y)

    def mlp(self, p: dict[str, Any], x: Any) -> Any:
        m = self.layers
        h = jax.nn.gelu(m["c_fc"](p["c_fc"], x), approximate=True)
        return m["mlp_proj"](p["mlp_proj"], h)

    def __call__(self, p: dict[str, Any], x: Any) -> Any:
        m = self.layers
        x = x + self.attn(p, m["ln_1"](p["ln_1"], x))
        return x + self.mlp(p, m["ln_2"](p["ln_2"], x))


@dataclass(frozen=True)
class GPT:
    """Token + position embeddings, ``n_layer`` blocks, a final LayerNorm, the tied LM head.

    ``params["blocks"]`` holds the blocks stacked on a leading ``[n_layer]`` axis; they run under
    ``lax.scan`` (one traced block, so compile time does not grow with depth).
    """

    config: GPTConfig

    @property
    def wte(self) -> VocabParallelEmbedding:
        return VocabParallelEmbedding(self.config.vocab_size, self.config.n_embd)

    @property
    def block(self) -> Block:
        return Block(self.config)

    @property
    def ln_f(self) -> LayerNorm:
        return LayerNorm(self.config.n_embd)

    @property
    def blocks(self) -> Stack:
        """The ``n_layer`` blocks, scanned."""
        return Stack(self.block, self.block.layers, self.config.remat_policy)

    def __call__(self, params: dict[str, Any], idx: Any) -> Any:
        """Logits ``[B, T, vocab / tp]``: this device's slice of the vocabulary."""
        x = self.wte(params["wte"], idx) + Positions().rows(params["wpe"], idx.shape[-1])
        x = self.blocks(params["blocks"], x)
        x = self.ln_f(params["ln_f"], x)
        return self.wte.attend(params[self.head_key], x)

    @property
    def head_key(self) -> str:
        """The parameter the LM head reads: ``wte`` when tied, else ``lm_head``."""
        return "wte" if self.config.tie_weights else "lm_head"

    def loss(self, params: dict[str, Any], idx: Any, targets: Any) -> Any:
        """Mean next-token cross-entropy over this device's tokens (vocab-parallel under TP)."""
        return cross_entropy_loss(self(params, idx), targets)


__all__ = ["GPT", "Block", "GPTConfig"]
