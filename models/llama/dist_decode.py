"""One Llama decode step written with Tessera's names (``ttjax.dist``): named ``tp`` axis, shard
specs on the weights and KV cache, a per-device region with ``all_reduce(axis="tp")``.

Each weight's layout comes from its logical axes (``models/llama/axes.py``) under the rule table
on the mesh's role-named axes: q/k/v/gate/up and the LM head split by output rows, o/down by input
columns, the embedding by vocabulary rows (a masked lookup + one all-reduce), the KV cache by KV
heads; norms and RoPE tables replicated. Each layer does two all-reduces (attention and MLP), as
Megatron TP does; the logits come back as one global array split over ``tp`` by vocabulary (no
gather inside the step). RMSNorm + SwiGLU Llamas only.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from models.llama.axes import KV_CACHE_AXES, ROPE_AXES, weight_axes
from models.llama.config import LlamaConfig, rope_tables
from models.llama.reference import apply_rope
from ttjax import dist
from ttjax.dist import op
from ttjax.plan import LogicalAxes, ParallelDims

#: Logits ``[B, 1, V]``: split by vocabulary, as the LM head's output features.
LOGITS_AXES = LogicalAxes(None, None, "vocab")


def plan(mesh: dist.Mesh) -> ParallelDims:
    """The roles of ``mesh``'s axes (named by role: ``"tp"``, ``"dp"``, ...)."""
    return dist.plan_of(mesh)


def layouts(config: LlamaConfig, mesh: dist.Mesh) -> dict[str, Any]:
    """Weight name -> its ShardSpec on ``mesh`` (REPLICATED when not split), from its logical
    axes (RoPE tables: ``ROPE_AXES``)."""
    dims = plan(mesh)
    out = {k: dist.shard_spec(dims, weight_axes(v)) for k, v in hf_names(config).items()}
    out["cos"] = out["sin"] = dist.shard_spec(dims, ROPE_AXES)
    return out


def hf_names(config: LlamaConfig) -> dict[str, str]:
    """This module's weight name -> the canonical dict's (``weights.py``)."""
    names = {
        "embed": "model.embed_tokens.weight",
        "norm": "model.norm.weight",
        "head": "model.embed_tokens.weight" if config.tie_word_embeddings else "lm_head.weight",
    }
    for i in range(config.n_layers):
        p = f"model.layers.{i}."
        names.update(
            {
                f"{i}.wq": p + "self_attn.q_proj.weight",
                f"{i}.wk": p + "self_attn.k_proj.weight",
                f"{i}.wv": p + "self_attn.v_proj.weight",
                f"{i}.wo": p + "self_attn.o_proj.weight",
                f"{i}.gate": p + "mlp.gate_proj.weight",
                f"{i}.up": p + "mlp.up_proj.weight",
                f"{i}.down": p + "mlp.down_proj.weight",
                f"{i}.ln1": p + "input_layernorm.weight",
                f"{i}.ln2": p + "post_attention_layernorm.weight",
            }
        )
    return names


def place_weights(
    config: LlamaConfig, weights: dict[str, np.ndarray], mesh: dist.Mesh
) -> dict[str, jax.Array]:
    """The canonical weight dict (``weights.py``) laid out on ``mesh`` (float32)."""
    if config.norm != "rms" or config.mlp != "swiglu" or config.parallel_block:
        raise ValueError(f"dist_decode supports RMSNorm + SwiGLU Llamas, not {config.name!r}")
    host = {k: weights[v] for k, v in hf_names(config).items()}
    host["cos"], host["sin"] = rope_tables(config)
    lay = layouts(config, mesh)
    return {
        k: dist.tensor(v.shape, layout=lay[k], mesh=mesh, dtype="fp32", init=v)
        for k, v in host.items()
    }


def place_cache(k: list[Any], v: list[Any], mesh: dist.Mesh) -> tuple[list[Any], list[Any]]:
    """Per-layer caches ``[B, n_kv, S, hs]`` split over ``tp`` by KV head."""
    kv = dist.shard_spec(plan(mesh), KV_CACHE_AXES)

    def put(c: Any) -> jax.Array:
        return dist.tensor(c.shape, layout=kv, mesh=mesh, dtype="fp32", init=np.asarray(c))

    return [put(c) for c in k], [put(c) for c in v]


def _rms(x: Any, w: Any, eps: float) -> Any:
    h = x.astype(jnp.float32)
    return (h * jax.lax.rsqrt((h * h).mean(-1, keepdims=True) + eps)).astype(x.dtype) * w


def decode_step(config: LlamaConfig, mesh: dist.Mesh) -> Any:
    """``step(params, tokens [B, 1], pos [B], cache_k, cache_v) -> (logits [B, 1, V], k, v)``."""
    c = config
    hs, eps = c.head_dim, c.norm_eps
    tp = mesh.axis_size("tp")
    nh, nkv = c.n_heads // tp, c.n_kv_heads // tp  # heads per device
    lay = layouts(c, mesh)
    vocab_split = lay["embed"] is not dist.REPLICATED

    def embed(table: Any, tokens: Any) -> Any:
        """Rows of the table; split by vocabulary, each device looks up the ids it owns (zeros
        elsewhere) and one all-reduce sums the single owner's row into place."""
        if not vocab_split:
            return table[tokens]
        rows = table.shape[0]
        ids = tokens - dist.axis_index("tp") * rows
        owned = (ids >= 0) & (ids < rows)
        x = jnp.where(owned[..., None], table[jnp.clip(ids, 0, rows - 1)], 0.0)
        return dist.all_reduce(x, axis="tp")

    def local(p: dict[str, Any], tokens: Any, pos: Any, ks: list[Any], vs: list[Any]) -> Any:
        B = tokens.shape[0]
        x = embed(p["embed"], tokens)  # [B, 1, C]
        cos, sin = p["cos"][pos][:, None, None], p["sin"][pos][:, None, None]  # [B, 1, 1, hs]
        new_k, new_v = [], []
        for i in range(c.n_layers):
            h = _rms(x, p[f"{i}.ln1"], eps)
            q = op.matmul(h, p[f"{i}.wq"].T).reshape(B, 1, nh, hs).transpose(0, 2, 1, 3)
            k = op.matmul(h, p[f"{i}.wk"].T).reshape(B, 1, nkv, hs).transpose(0, 2, 1, 3)
            v = op.matmul(h, p[f"{i}.wv"].T).reshape(B, 1, nkv, hs).transpose(0, 2, 1, 3)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            write = jax.vmap(
                lambda cache, new, t: jax.lax.dynamic_update_slice(cache, new, (0, t, 0))
            )
            kc, vc = write(ks[i], k, pos), write(vs[i], v, pos)
            new_k.append(kc)
            new_v.append(vc)
            qg = q.reshape(B, nkv, nh // nkv, 1, hs)
            att = jnp.einsum("bkgtd,bksd->bkgts", qg, kc, preferred_element_type=jnp.float32)
            att = att / math.sqrt(hs)
            visible = jnp.arange(kc.shape[2])[None, :] <= pos[:, None]  # [B, S]
            att = jnp.where(visible[:, None, None, None], att, jnp.finfo(jnp.float32).min)
            y = jnp.einsum("bkgts,bksd->bkgtd", jax.nn.softmax(att, axis=-1), vc)
            y = y.reshape(B, nh, 1, hs).transpose(0, 2, 1, 3).reshape(B, 1, nh * hs)
            x = x + dist.all_reduce(op.matmul(y, p[f"{i}.wo"].T), axis="tp")
            h = _rms(x, p[f"{i}.ln2"], eps)
            m = jax.nn.silu(op.matmul(h, p[f"{i}.gate"].T)) * op.matmul(h, p[f"{i}.up"].T)
            x = x + dist.all_reduce(op.matmul(m, p[f"{i}.down"].T), axis="tp")
        x = _rms(x, p["norm"], eps)
        logits = jnp.einsum("btc,vc->btv", x, p["head"], preferred_element_type=jnp.float32)
        return logits, new_k, new_v  # [B, 1, V / tp]: the vocab-parallel head's slice

    cache = [dist.shard_spec(plan(mesh), KV_CACHE_AXES)] * c.n_layers
    return dist.local(
        local,
        mesh=mesh,
        in_layouts=(lay, None, None, cache, cache),
        out_layouts=(dist.shard_spec(plan(mesh), LOGITS_AXES), cache, cache),
    )
