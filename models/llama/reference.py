"""A single-device Flax NNX reference of the Llama-3.x decoder, in plain ``jax.numpy``.

Written independently of the ttjax model (``model.py``) to check it: same canonical weight dict
(``weights.py``), same config, no ttjax code. Covers RMSNorm or LayerNorm, RoPE in Hugging Face's
rotate-half layout with Llama-3.1 frequency scaling, grouped-query attention, a SwiGLU or exact-GELU
MLP, Falcon's parallel block, tied embeddings, the final norm and the LM head.

Three entry points: ``forward`` (full causal pass, no cache), and ``prefill`` + ``decode`` over a
``KVCache``. All three are traceable methods (eager calls compile op by op, slowly);
``jitted()`` returns the same three under ``jax.jit`` (parameters passed as arguments, cache
donated) for tests and decode loops.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from models.llama.config import LlamaConfig, rope_tables
from models.llama.weights import check_weights


class KVCache(NamedTuple):
    """Per-layer key/value caches, each ``[B, n_kv_heads, max_len, head_dim]``."""

    k: list[jax.Array]
    v: list[jax.Array]


class ReferenceFns(NamedTuple):
    """Jitted entry points of one ``LlamaReference`` (see ``LlamaReference.jitted``)."""

    forward: Callable[[jax.Array], jax.Array]
    prefill: Callable[[jax.Array, KVCache], tuple[jax.Array, KVCache]]
    decode: Callable[[jax.Array, jax.Array, KVCache], tuple[jax.Array, KVCache]]


class RopeTable(nnx.Variable):
    """A constant table (RoPE cos/sin), kept apart from trainable ``nnx.Param``s."""


def _param(weights: dict[str, np.ndarray], name: str, dtype: Any) -> nnx.Param:
    """A weight of the canonical dict; ``hf_name`` keeps its name (``spmd.py`` places it by it)."""
    return nnx.Param(jnp.asarray(weights[name], dtype=dtype), hf_name=name)


class Norm(nnx.Module):
    """RMSNorm (``norm="rms"``) or LayerNorm with bias (``norm="layer"``), computed in float32."""

    def __init__(self, config: LlamaConfig, weights: dict, prefix: str, dtype: Any):
        self.eps = config.norm_eps
        self.layer = config.norm == "layer"
        self.weight = _param(weights, prefix + ".weight", dtype)
        self.bias = _param(weights, prefix + ".bias", dtype) if self.layer else None

    def __call__(self, x: jax.Array) -> jax.Array:
        h = x.astype(jnp.float32)
        if self.layer:
            h = h - h.mean(-1, keepdims=True)
        h = h * jax.lax.rsqrt((h * h).mean(-1, keepdims=True) + self.eps)
        out = h.astype(x.dtype) * self.weight[...]
        return out + self.bias[...] if self.layer else out


def rotate_half(x: jax.Array) -> jax.Array:
    """``[x1, x2] -> [-x2, x1]`` over the last axis (Hugging Face's RoPE layout)."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([-x2, x1], axis=-1)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate ``x`` (B, nh, T, hs) by the per-position tables ``cos``/``sin`` (B, 1, T, hs)."""
    return (x * cos + rotate_half(x) * sin).astype(x.dtype)


class Attention(nnx.Module):
    """Grouped-query causal self-attention; query head ``h`` reads KV head ``h // (nh / n_kv)``."""

    def __init__(self, config: LlamaConfig, weights: dict, prefix: str, dtype: Any):
        if config.n_heads % config.n_kv_heads:
            raise ValueError(f"n_heads={config.n_heads} is not a multiple of {config.n_kv_heads=}")
        self.n_heads, self.n_kv, self.hs = config.n_heads, config.n_kv_heads, config.head_dim
        self.wq = _param(weights, prefix + ".q_proj.weight", dtype)  # (nh*hs, C)
        self.wk = _param(weights, prefix + ".k_proj.weight", dtype)  # (n_kv*hs, C)
        self.wv = _param(weights, prefix + ".v_proj.weight", dtype)  # (n_kv*hs, C)
        self.wo = _param(weights, prefix + ".o_proj.weight", dtype)  # (C, nh*hs)

    def __call__(
        self,
        x: jax.Array,
        cos: jax.Array,
        sin: jax.Array,
        positions: jax.Array,
        cache: tuple[jax.Array, jax.Array] | None,
    ) -> tuple[jax.Array, tuple[jax.Array, jax.Array] | None]:
        """x (B, T, C) at ``positions`` (B, T); with a cache, write K/V there and attend to it all."""
        B, T, _ = x.shape
        q = (x @ self.wq[...].T).reshape(B, T, self.n_heads, self.hs).transpose(0, 2, 1, 3)
        k = (x @ self.wk[...].T).reshape(B, T, self.n_kv, self.hs).transpose(0, 2, 1, 3)
        v = (x @ self.wv[...].T).reshape(B, T, self.n_kv, self.hs).transpose(0, 2, 1, 3)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)  # (B, nh, T, hs), (B, n_kv, T, hs)

        if cache is None:
            key_pos = positions  # (B, S=T)
        else:  # write T new entries per row, starting at that row's first position
            ck, cv = cache  # (B, n_kv, S, hs)
            write = jax.vmap(lambda c, new, p: jax.lax.dynamic_update_slice(c, new, (0, p, 0)))
            k = write(ck, k.astype(ck.dtype), positions[:, 0])
            v = write(cv, v.astype(cv.dtype), positions[:, 0])
            cache = (k, v)
            key_pos = jnp.broadcast_to(jnp.arange(k.shape[2]), (B, k.shape[2]))  # (B, S)

        g = self.n_heads // self.n_kv
        qg = q.reshape(B, self.n_kv, g, T, self.hs)  # (B, n_kv, g, T, hs)
        att = jnp.einsum("bkgtd,bksd->bkgts", qg, k, preferred_element_type=jnp.float32)
        att = att / math.sqrt(self.hs)
        causal = key_pos[:, None, :] <= positions[:, :, None]  # (B, T, S)
        att = jnp.where(causal[:, None, None], att, jnp.finfo(jnp.float32).min)
        att = jax.nn.softmax(att, axis=-1).astype(v.dtype)
        y = jnp.einsum("bkgts,bksd->bkgtd", att, v)  # (B, n_kv, g, T, hs)
        y = y.reshape(B, self.n_heads, T, self.hs).transpose(0, 2, 1, 3).reshape(B, T, -1)
        return y @ self.wo[...].T, cache  # (B, T, C)


class MLP(nnx.Module):
    """SwiGLU ``down(silu(gate(x)) * up(x))`` or GELU ``4h_to_h(gelu(h_to_4h(x)))`` (exact erf)."""

    def __init__(self, config: LlamaConfig, weights: dict, prefix: str, dtype: Any):
        self.swiglu = config.mlp == "swiglu"
        if self.swiglu:
            self.w_gate = _param(weights, prefix + ".gate_proj.weight", dtype)  # (F, C)
            self.w_up = _param(weights, prefix + ".up_proj.weight", dtype)  # (F, C)
            self.w_down = _param(weights, prefix + ".down_proj.weight", dtype)  # (C, F)
        else:
            self.w_up = _param(weights, prefix + ".dense_h_to_4h.weight", dtype)  # (F, C)
            self.w_down = _param(weights, prefix + ".dense_4h_to_h.weight", dtype)  # (C, F)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.swiglu:
            h = jax.nn.silu(x @ self.w_gate[...].T) * (x @ self.w_up[...].T)  # (B, T, F)
        else:
            h = jax.nn.gelu(x @ self.w_up[...].T, approximate=False)  # (B, T, F)
        return h @ self.w_down[...].T  # (B, T, C)


class Block(nnx.Module):
    """``x + attn(ln1(x))`` then ``+ mlp(ln2(x))``; or ``x + attn(ln(x)) + mlp(ln(x))`` if parallel."""

    def __init__(self, config: LlamaConfig, weights: dict, i: int, dtype: Any):
        p = f"model.layers.{i}"
        self.parallel = config.parallel_block
        self.ln_1 = Norm(config, weights, p + ".input_layernorm", dtype)
        self.attn = Attention(config, weights, p + ".self_attn", dtype)
        self.ln_2 = (
            None if self.parallel else Norm(config, weights, p + ".post_attention_layernorm", dtype)
        )
        self.mlp = MLP(config, weights, p + ".mlp", dtype)

    def __call__(self, x, cos, sin, positions, cache):
        h = self.ln_1(x)
        a, cache = self.attn(h, cos, sin, positions, cache)
        if self.parallel:
            return x + a + self.mlp(h), cache
        x = x + a
        return x + self.mlp(self.ln_2(x)), cache


class LlamaReference(nnx.Module):
    """The whole decoder on one device, built from the canonical weight dict (``weights.py``).

    Parameters are ``nnx.Param``s in ``dtype`` (float32 by default); norms and softmax run in
    float32; logits come back as float32. RoPE tables cover ``config.max_seq_len`` positions.
    """

    def __init__(
        self, config: LlamaConfig, weights: dict[str, np.ndarray], dtype: Any = jnp.float32
    ):
        check_weights(config, weights)
        self.config = config
        self.dtype = dtype
        self.embed = _param(weights, "model.embed_tokens.weight", dtype)  # (V, C)
        self.layers = nnx.List([Block(config, weights, i, dtype) for i in range(config.n_layers)])
        self.norm = Norm(config, weights, "model.norm", dtype)
        self.lm_head = (
            None if config.tie_word_embeddings else _param(weights, "lm_head.weight", dtype)
        )
        cos, sin = rope_tables(config)
        self.cos, self.sin = RopeTable(jnp.asarray(cos)), RopeTable(jnp.asarray(sin))  # (L, hs)

    def _run(
        self, tokens: jax.Array, positions: jax.Array, cache: KVCache | None
    ) -> tuple[jax.Array, KVCache | None]:
        """tokens (B, T) at positions (B, T) -> float32 logits (B, T, V)."""
        x = self.embed[...][tokens]  # (B, T, C)
        cos = self.cos[...][positions][:, None].astype(self.dtype)  # (B, 1, T, hs)
        sin = self.sin[...][positions][:, None].astype(self.dtype)
        new_k, new_v = [], []
        for i, block in enumerate(self.layers):
            layer_cache = None if cache is None else (cache.k[i], cache.v[i])
            x, layer_cache = block(x, cos, sin, positions, layer_cache)
            if layer_cache is not None:
                new_k.append(layer_cache[0])
                new_v.append(layer_cache[1])
        x = self.norm(x)
        head = self.embed[...] if self.lm_head is None else self.lm_head[...]  # (V, C)
        logits = jnp.einsum("btc,vc->btv", x, head, preferred_element_type=jnp.float32)
        return logits, (None if cache is None else KVCache(new_k, new_v))

    def _check_len(self, n: int) -> None:
        if n > self.config.max_seq_len:
            raise ValueError(f"{n} positions exceed config.max_seq_len={self.config.max_seq_len}")

    def forward(self, tokens: jax.Array) -> jax.Array:
        """Full causal pass: tokens (B, T) int -> logits (B, T, V) float32, no cache."""
        B, T = tokens.shape
        self._check_len(T)
        positions = jnp.broadcast_to(jnp.arange(T, dtype=jnp.int32), (B, T))
        return self._run(jnp.asarray(tokens), positions, None)[0]

    __call__ = forward

    def init_cache(self, batch: int, max_len: int | None = None) -> KVCache:
        """A zeroed cache of ``max_len`` (default ``config.max_seq_len``) positions per row."""
        c = self.config
        max_len = max_len or c.max_seq_len
        self._check_len(max_len)
        shape = (batch, c.n_kv_heads, max_len, c.head_dim)
        return KVCache(
            [jnp.zeros(shape, self.dtype) for _ in range(c.n_layers)],
            [jnp.zeros(shape, self.dtype) for _ in range(c.n_layers)],
        )

    def prefill(self, tokens: jax.Array, cache: KVCache) -> tuple[jax.Array, KVCache]:
        """Run prompts (B, T) at positions 0..T-1 (same length for every row; no padding).

        Returns logits (B, T, V) and the cache holding those T positions.
        """
        B, T = tokens.shape
        positions = jnp.broadcast_to(jnp.arange(T, dtype=jnp.int32), (B, T))
        return self._run(jnp.asarray(tokens), positions, cache)

    def decode(
        self, tokens: jax.Array, positions: jax.Array, cache: KVCache
    ) -> tuple[jax.Array, KVCache]:
        """One step: tokens (B, 1) at per-row ``positions`` (B,) int32 -> logits (B, 1, V), cache.

        Row ``b`` attends to cache entries ``0..positions[b]``.
        """
        positions = jnp.asarray(positions, jnp.int32)[:, None]  # (B, 1)
        return self._run(jnp.asarray(tokens), positions, cache)

    def jitted(self) -> ReferenceFns:
        """``forward``, ``prefill`` and ``decode`` compiled with ``jax.jit``, same signatures.

        The parameters are split out once (``nnx.split``) and passed as jit arguments, so a call
        costs one jit dispatch. ``prefill``/``decode`` donate their cache argument (updated in
        place where the backend allows): do not reuse a cache after passing it in.
        """
        graphdef, state = nnx.split(self)

        @jax.jit
        def _forward(state, tokens):
            return nnx.merge(graphdef, state).forward(tokens)

        @partial(jax.jit, donate_argnums=2)
        def _prefill(state, tokens, cache):
            return nnx.merge(graphdef, state).prefill(tokens, cache)

        @partial(jax.jit, donate_argnums=3)
        def _decode(state, tokens, positions, cache):
            return nnx.merge(graphdef, state).decode(tokens, positions, cache)

        return ReferenceFns(
            forward=partial(_forward, state),
            prefill=partial(_prefill, state),
            decode=partial(_decode, state),
        )
