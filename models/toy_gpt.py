"""A tiny GPT-2 (learned positions, tied embedding, pre-LN blocks) in plain JAX, optionally TP.

It mirrors the shape of ``models/nanogpt``'s functional interface so pipeline tests and
benchmarks can run before NanoGPT and Llama plug into the pipeline: ``embed`` / ``block`` / ``head``
work on one device's local parameters inside ``shard_map``; with ``tp`` set, attention heads and
the MLP are split Megatron-style (column then row parallel, one all-reduce forward and one
backward per pair, written with explicit ``custom_vjp`` pairs as TTML's ``comm_ops`` are).

>>> cfg = ToyGPTConfig(vocab_size=64, embedding_dim=32, num_heads=4, num_blocks=4, seq_len=16)
>>> io, blocks = init_params(cfg, jax.random.key(0))
>>> loss = reference_loss(cfg, io, blocks, tokens, targets)     # one device, whole model
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

Params = dict[str, Any]


@dataclass(frozen=True)
class ToyGPTConfig:
    """Sizes of the toy model (``transformer_config`` names)."""

    vocab_size: int = 64
    embedding_dim: int = 32
    num_heads: int = 4
    num_blocks: int = 4
    seq_len: int = 16
    attention: bool = True  # False: LayerNorm + MLP blocks only (cheaper to compile in tests)


# -- Megatron's f / g pair: identity forward, all-reduce backward, and its mirror ---------------


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _enter(x: Any, axis: str) -> Any:
    return x


_enter.defvjp(lambda x, axis: (x, None), lambda axis, _, g: (lax.psum(g, axis),))


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _leave(x: Any, axis: str) -> Any:
    return lax.psum(x, axis)


_leave.defvjp(lambda x, axis: (lax.psum(x, axis), None), lambda axis, _, g: (g,))


def enter_tp(x: Any, tp: str | None) -> Any:
    """Input of a column-parallel region: identity forward, gradient summed over ``tp``."""
    return x if tp is None else _enter(x, tp)


def leave_tp(x: Any, tp: str | None) -> Any:
    """Output of a row-parallel region: partial sums added over ``tp``, identity backward."""
    return x if tp is None else _leave(x, tp)


# -- parameters ------------------------------------------------------------------------------


def init_params(cfg: ToyGPTConfig, key: Any) -> tuple[Params, Params]:
    """``(io, blocks)``: embedding/positions/final norm, and every block stacked on axis 0."""
    d, n, v = cfg.embedding_dim, cfg.num_blocks, cfg.vocab_size
    k = jax.random.split(key, 6)

    def normal(key: Any, shape: tuple[int, ...], std: float = 0.02) -> Any:
        return std * jax.random.normal(key, shape, jnp.float32)

    io = {
        "wte": normal(k[0], (v, d)),
        "wpe": normal(k[1], (cfg.seq_len, d)),
        "ln_f": {"g": jnp.ones((d,)), "b": jnp.zeros((d,))},
    }
    blocks = {
        "ln1": {"g": jnp.ones((n, d)), "b": jnp.zeros((n, d))},
        "qkv": normal(k[2], (n, d, 3 * d)).reshape(n, d, 3, d),
        "proj": normal(k[3], (n, d, d)),
        "ln2": {"g": jnp.ones((n, d)), "b": jnp.zeros((n, d))},
        "fc": normal(k[4], (n, d, 4 * d)),
        "fc_b": jnp.zeros((n, 4 * d)),
        "out": normal(k[5], (n, 4 * d, d)),
        "out_b": jnp.zeros((n, d)),
    }
    if not cfg.attention:
        blocks = {k: v for k, v in blocks.items() if k not in _ATTENTION}
    return io, blocks


_ATTENTION = ("ln1", "qkv", "proj")


def block_specs(cfg: ToyGPTConfig, tp: str | None) -> Params:
    """PartitionSpecs of one block's parameters: heads and MLP columns split over ``tp``."""
    specs = {
        "ln1": {"g": P(), "b": P()},
        "qkv": P(None, None, tp),
        "proj": P(tp, None),
        "ln2": {"g": P(), "b": P()},
        "fc": P(None, tp),
        "fc_b": P(tp),
        "out": P(tp, None),
        "out_b": P(),
    }
    return specs if cfg.attention else {k: v for k, v in specs.items() if k not in _ATTENTION}


def io_specs() -> Params:
    """The embedding, positions and final norm are replicated."""
    return {"wte": P(), "wpe": P(), "ln_f": {"g": P(), "b": P()}}


# -- the model -----------------------------------------------------------------------------


def _layer_norm(p: Params, x: Any) -> Any:
    mu = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), -1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + 1e-5) * p["g"] + p["b"]


def embed(io: Params, tokens: Any) -> Any:
    """Token plus learned position embeddings: ``[b, T] -> [b, T, d]``."""
    return io["wte"][tokens] + io["wpe"][: tokens.shape[-1]]


def make_block(cfg: ToyGPTConfig, tp: str | None = None, tp_size: int = 1) -> Any:
    """One pre-LN block on local parameters (``tp_size`` splits the heads and the MLP)."""
    heads = cfg.num_heads // tp_size
    hd = cfg.embedding_dim // cfg.num_heads

    def block(p: Params, x: Any) -> Any:
        b, t, _ = x.shape
        if cfg.attention:
            x = x + _attention(p, x, b, t)
        h = enter_tp(_layer_norm(p["ln2"], x), tp)
        h = jax.nn.gelu(h @ p["fc"] + p["fc_b"])
        return x + leave_tp(h @ p["out"], tp) + p["out_b"]

    def _attention(p: Params, x: Any, b: int, t: int) -> Any:
        h = enter_tp(_layer_norm(p["ln1"], x), tp)
        qkv = jnp.einsum("btd,dkh->kbth", h, p["qkv"]).reshape(3, b, t, heads, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = jnp.einsum("bqhe,bkhe->bhqk", q, k) / jnp.sqrt(jnp.float32(hd))
        causal = jnp.tril(jnp.ones((t, t), bool))
        att = jax.nn.softmax(jnp.where(causal, att, -1e9), axis=-1)
        y = jnp.einsum("bhqk,bkhe->bqhe", att, v).reshape(b, t, heads * hd)
        return leave_tp(y @ p["proj"], tp)

    return block


def head(io: Params, x: Any, targets: Any) -> Any:
    """Final norm, tied LM head, mean cross-entropy over the microbatch."""
    logits = _layer_norm(io["ln_f"], x) @ io["wte"].T
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def reference_loss(cfg: ToyGPTConfig, io: Params, blocks: Params, tokens: Any, targets: Any) -> Any:
    """The whole model on one device: the parity reference for every pipeline layout."""
    block = make_block(cfg)
    x = lax.scan(lambda h, bp: (block(bp, h), None), embed(io, tokens), blocks)[0]
    return head(io, x, targets)


def batch(cfg: ToyGPTConfig, key: Any, size: int) -> tuple[Any, Any]:
    """Random ``(tokens, targets)`` of ``size`` sequences (targets = tokens shifted by one)."""
    seq = jax.random.randint(key, (size, cfg.seq_len + 1), 0, cfg.vocab_size)
    return seq[:, :-1], seq[:, 1:]
