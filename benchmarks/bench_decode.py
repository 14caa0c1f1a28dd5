"""One Llama decode step on a 1x8 mesh (TP 8, float32, batch 8), three ways side by side.

* ``execute_trace`` of the captured step against ``jax.jit`` of the same step (caches donated in
  both), both ways from one interleaved timing: the trace no slower than jit, and the jitted
  Tensor step (which flattens its Tensor pytrees in Python on each call) no slower than the
  trace; target ratio <= 1.02 each, for the tiny config and the issue's 8-layer one.
* The jitted ttjax step (vocab-parallel embedding, logits left vocab-sharded, on-device greedy
  argmax over the shards) against the same algorithm written by hand with ``jax.shard_map``
  (masked lookup + one psum, local argmax + a gather of one candidate per shard): target
  ratio <= 1.05 with the same collectives.

python -m benchmarks.run --only decode
"""

from __future__ import annotations

import timeit
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import ttjax as ttnn
from benchmarks._harness import Row, compare
from models.llama.config import LlamaConfig, get_config
from models.llama.model import TtLlama
from models.llama.weights import random_weights

BATCH = 8


def config_named(name: str) -> LlamaConfig:
    """``tiny`` or ``8-layer`` (the issue's shape: ``small`` with 8 layers)."""
    if name == "8-layer":
        return get_config("small").with_(name="small-8l", n_layers=8)
    return get_config(name)


def _model(mesh: ttnn.MeshDevice, config: LlamaConfig, **options: Any) -> tuple[TtLlama, Any, Any]:
    model = TtLlama(config, random_weights(config, seed=0), mesh, mode="tp", batch=BATCH, **options)
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, (BATCH, 8))
    model.prefill(model.tokens_to_device(prompt))
    tok = model.tokens_to_device(prompt[:, -1:])
    pos = model.positions_to_device(np.full(BATCH, 8))
    return model, tok, pos


def trace_vs_jit_rows(mesh: ttnn.MeshDevice, name: str, repeats: int, number: int) -> list[Row]:
    model, tok, pos = _model(mesh, config_named(name))
    step = jax.jit(model.decode_fn(), donate_argnums=(1,))
    # The jitted step donates (and so deletes) the caches it is given: it gets its own.
    state = {"caches": [model._new_cache() for _ in range(model.config.n_layers)]}

    def jitted() -> Any:
        logits, state["caches"] = step(model.params, state["caches"], tok, pos)
        return logits

    jitted()  # compile
    tid = ttnn.begin_trace_capture(mesh, cq_id=0)
    out = model.decode(tok, pos)
    ttnn.end_trace_capture(mesh, tid, cq_id=0)

    def replay() -> Any:
        ttnn.execute_trace(mesh, tid, cq_id=0, blocking=False)
        return out.value

    t = compare({"trace": replay, "jit": jitted}, repeats=repeats, number=number)
    info = ttnn.trace.trace_info(tid)["programs"][0]
    ttnn.release_trace(mesh, tid)
    args = (model.params, state["caches"], tok, pos)
    leaves, tree = jax.tree_util.tree_flatten(args)
    flatten_us = (
        1e6 * min(timeit.repeat(lambda: jax.tree_util.tree_flatten(args), number=200)) / 200
    )
    unflatten_us = 1e6 * min(timeit.repeat(lambda: tree.unflatten(leaves), number=200)) / 200
    details = {
        "ops": len(info["ops"]),
        "inputs": info["inputs"],
        "outputs": info["outputs"],
        "jit_arg_leaves": len(leaves),
        "flatten_args_us": round(flatten_us, 1),
        "unflatten_args_us": round(unflatten_us, 1),
    }
    label = f"decode step, {name} Llama TP {mesh.shape} batch {BATCH}"
    return [
        Row(
            label,
            "execute_trace",
            "jax.jit (same step)",
            t["trace"],
            t["jit"],
            "ratio <= 1.02",
            details,
        ),
        Row(
            label,
            "jax.jit (same step)",
            "execute_trace",
            t["jit"],
            t["trace"],
            "ratio <= 1.02",
            details,
        ),
    ]


# ---------------------------------------------------------------------------------------------
# The hand-written ceiling: the same decode step in plain JAX under jax.shard_map
# ---------------------------------------------------------------------------------------------

VOCAB_OPTIONS = {"embedding": "vocab_parallel", "gather_logits": False}


def ttjax_greedy_step(model: TtLlama) -> Any:
    """``step(params, caches, tokens, pos) -> (logits, next_tokens, caches)`` written with ttjax."""

    def step(params: Any, caches: Any, tokens: ttnn.Tensor, pos: ttnn.Tensor) -> Any:
        logits = model.forward(tokens, pos, params, caches)
        return logits, model.greedy_tokens(logits), caches

    return step


def _rms(x: Any, w: Any, eps: float) -> Any:
    return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope(x: Any, cos: Any, sin: Any) -> Any:
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def handwritten_greedy_step(model: TtLlama) -> tuple[Any, Any]:
    """The same step written by hand: ``(jitted step, its arguments)`` on the model's weights.

    Vocab-parallel embedding (masked local lookup + one psum), Megatron layers (one psum after
    attention and one after the MLP), logits left vocab-sharded, greedy token from one
    all_gather of a (max, global index) pair per device. Caches are fresh copies (donated).
    """
    c, mesh = model.config, model.mesh
    tp, qh, kvh, hd = model.tp, model.q_heads, model.kv_heads, c.head_dim
    vocab = c.vocab_size // tp
    axes = tuple(mesh.axis_names)
    eps, scale = c.norm_eps, 1.0 / hd**0.5

    def local(params: Any, caches: Any, tokens: Any, pos: Any) -> Any:
        b = tokens.shape[0]
        start = (lax.axis_index(axes) * vocab).astype(jnp.uint32)
        ids = tokens - start  # [B, 1]; ids owned elsewhere wrap out of range
        rows = jnp.take(params["embed"], ids.astype(jnp.int32), axis=0, mode="clip")
        x = lax.psum(jnp.where((ids < vocab)[..., None], rows, 0.0), axes)  # [B, 1, dim]
        cos = params["cos"][pos][:, None, None, :]  # [B, 1, 1, hd]
        sin = params["sin"][pos][:, None, None, :]
        users = jnp.arange(b)
        allowed = jnp.arange(model.max_seq_len)[None, :] <= pos[:, None]  # [B, S]
        new_caches = []
        for layer, (ck, cv) in zip(params["layers"], caches):
            h = _rms(x, layer["attn_norm"], eps)
            qkv = h @ layer["wqkv"]
            q = _rope(qkv[..., : qh * hd].reshape(b, 1, qh, hd), cos, sin)
            k = _rope(qkv[..., qh * hd : (qh + kvh) * hd].reshape(b, 1, kvh, hd), cos, sin)
            v = qkv[..., (qh + kvh) * hd :].reshape(b, 1, kvh, hd)
            ck = ck.at[users, :, pos, :].set(k[:, 0])
            cv = cv.at[users, :, pos, :].set(v[:, 0])
            qg = q.reshape(b, kvh, qh // kvh, hd)
            scores = jnp.einsum("bkgd,bktd->bkgt", qg, ck) * scale
            scores = jnp.where(allowed[:, None, None, :], scores, -jnp.inf)
            out = jnp.einsum("bkgt,bktd->bkgd", jax.nn.softmax(scores, axis=-1), cv)
            x = x + lax.psum(out.reshape(b, 1, qh * hd) @ layer["wo"], axes)
            h = _rms(x, layer["mlp_norm"], eps)
            mlp = (jax.nn.silu(h @ layer["w_in"]) * (h @ layer["w_up"])) @ layer["w_out"]
            x = x + lax.psum(mlp, axes)
            new_caches.append([ck, cv])
        logits = _rms(x, params["norm"], eps) @ params["lm_head"]  # [B, 1, vocab / tp]
        index = (jnp.argmax(logits, axis=-1) + start).astype(jnp.float32)
        pair = jnp.stack([jnp.max(logits, axis=-1), index], axis=-1)  # [B, 1, 2]
        pairs = lax.all_gather(pair, axes, axis=2, tiled=True).reshape(b, 1, tp, 2)
        values, index = pairs[..., 0], pairs[..., 1]
        best = values == jnp.max(values, axis=-1, keepdims=True)
        token = jnp.min(jnp.where(best, index, float(2**24)), axis=-1).astype(jnp.uint32)
        return logits, token, new_caches

    keep = ("embed", "cos", "sin", "norm", "lm_head")
    names = ("attn_norm", "wqkv", "wo", "mlp_norm", "w_in", "w_up", "w_out")
    params = {k: model.params[k] for k in keep}
    params["layers"] = [{k: layer[k] for k in names} for layer in model.params["layers"]]
    caches = [model._new_cache() for _ in range(c.n_layers)]
    tensors = (params, caches)
    is_tensor = lambda t: isinstance(t, ttnn.Tensor)  # noqa: E731
    arrays = jax.tree.map(lambda t: t.value, tensors, is_leaf=is_tensor)
    specs = jax.tree.map(lambda t: t.sharding.spec, tensors, is_leaf=is_tensor)
    replicated = jax.sharding.PartitionSpec()
    step = jax.jit(
        jax.shard_map(
            local,
            mesh=mesh.jax_mesh,
            in_specs=(*specs, replicated, replicated),
            out_specs=(jax.sharding.PartitionSpec(None, None, axes), replicated, specs[1]),
            check_vma=False,
        ),
        donate_argnums=(1,),
    )
    return step, arrays


def jit_vs_handwritten_row(mesh: ttnn.MeshDevice, name: str, repeats: int, number: int) -> Row:
    model, tok, pos = _model(mesh, config_named(name), **VOCAB_OPTIONS)
    ours = jax.jit(ttjax_greedy_step(model), donate_argnums=(1,))
    hand, (hparams, hcaches) = handwritten_greedy_step(model)
    htok, hpos = tok.value, pos.value
    state = {"ours": model.caches, "hand": hcaches}
    ours_c = ttnn.inspect.inspect(ttjax_greedy_step(model), model.params, model.caches, tok, pos)
    hand_c = ttnn.inspect.inspect(lambda *a: hand(*a), hparams, hcaches, htok, hpos, mesh=mesh)

    def run_ours() -> Any:
        _logits, token, state["ours"] = ours(model.params, state["ours"], tok, pos)
        return token

    def run_hand() -> Any:
        _logits, token, state["hand"] = hand(hparams, state["hand"], htok, hpos)
        return token

    t = compare({"ours": run_ours, "hand": run_hand}, repeats=repeats, number=number)
    ours_counts, hand_counts = ours_c.collective_counts(), hand_c.collective_counts()
    return Row(
        f"greedy decode step, {name} Llama TP {mesh.shape} batch {BATCH} (vocab-parallel)",
        "ttjax jit",
        "hand-written shard_map",
        t["ours"],
        t["hand"],
        "ratio <= 1.05",
        {
            "same_collectives": ours_counts == hand_counts,
            "collectives": {k: v for k, v in ours_counts.items() if v},
        },
    )


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    return [
        *trace_vs_jit_rows(mesh, "tiny", repeats=15, number=20),
        *trace_vs_jit_rows(mesh, "8-layer", repeats=9, number=3),
        jit_vs_handwritten_row(mesh, "tiny", repeats=15, number=20),
        jit_vs_handwritten_row(mesh, "8-layer", repeats=7, number=2),
    ]
