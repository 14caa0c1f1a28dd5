"""Training step on the CPU mesh: ``ttjax.ttml``'s jitted TP+DDP NanoGPT step (2x4: DDP 2 x TP 4)
against the same algorithm written by hand with ``jax.shard_map`` (plain ``lax`` collectives,
JAX's own transposes under ``check_vma``, the same optax AdamW), plus the collectives of each step
from ``ttjax.inspect``.

Both variants are checked to give the same losses before they are timed.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from benchmarks._harness import Row, collectives, compare
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_specs
from ttjax.inspect import inspect
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.stacked import stack_blocks, unstack_blocks
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

# Remat off: the hand-written step keeps its activations too (the same algorithm, no recompute).
CONFIG = GPTConfig(
    vocab_size=512, block_size=64, n_layer=4, n_head=8, n_embd=256, remat_policy="none"
)
BATCH, SEQ = 16, 64
OPT = OptimizerSettings(learning_rate=1e-3, warmup_steps=10, total_steps=1000)


def hand_written_step(mesh: Mesh, specs, optimizer):
    """NanoGPT's TP+DDP step by hand: Megatron with raw psums, vocab-parallel loss, DDP mean
    (a Python loop over a list of blocks, where the model scans them stacked)."""
    dp, tp = mesh.axis_names  # rows: DDP, cols: TP (named by role: "dp", "tp")
    hs = CONFIG.n_embd // CONFIG.n_head

    def ln(p, x):
        mu = x.mean(-1, keepdims=True)
        var = jnp.square(x - mu).mean(-1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]

    def block(p, x):
        B, T, _ = x.shape
        h = ln(p["ln_1"], x)
        qkv = h @ p["c_attn"]["weight"] + p["c_attn"]["bias"]
        q, k, v = jnp.moveaxis(qkv.reshape(B, T, -1, 3, hs), 3, 0)
        att = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(hs)
        att = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((T, T), bool)), att, -jnp.inf), -1)
        y = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(B, T, -1)
        x = x + lax.psum(y @ p["attn_proj"]["weight"], tp) + p["attn_proj"]["bias"]
        h = jax.nn.gelu(
            ln(p["ln_2"], x) @ p["c_fc"]["weight"] + p["c_fc"]["bias"], approximate=True
        )
        return x + lax.psum(h @ p["mlp_proj"]["weight"], tp) + p["mlp_proj"]["bias"]

    def local_loss(params, idx, targets):
        w = params["wte"]["weight"]
        v = w.shape[0]
        start = lax.axis_index(tp) * v
        local = idx - start
        inside = (local >= 0) & (local < v)
        rows = jnp.where(inside[..., None], jnp.take(w, jnp.clip(local, 0, v - 1), axis=0), 0.0)
        x = lax.psum(rows, tp) + params["wpe"][: idx.shape[-1]]
        for p in params["blocks"]:  # a list here: see ``local``
            x = block(p, x)
        logits = ln(params["ln_f"], x) @ w.T
        m = lax.pmax(lax.stop_gradient(logits.max(-1, keepdims=True)), tp)
        z = logits - m
        sumexp = lax.psum(jnp.exp(z).sum(-1), tp)
        t = targets - start
        ok = (t >= 0) & (t < v)
        picked = jnp.take_along_axis(z, jnp.clip(t, 0, v - 1)[..., None], -1)[..., 0]
        picked = lax.psum(jnp.where(ok, picked, 0.0), tp)
        return jnp.mean(jnp.log(sumexp) - picked)

    def local(params, tokens):
        tok = tokens[0]
        # The stacked blocks as a list of per-block dicts, and the gradients stacked back.
        params = {**params, "blocks": unstack_blocks(params["blocks"])}
        loss, grads = jax.value_and_grad(local_loss)(params, tok[:, :-1], tok[:, 1:])
        grads = {**grads, "blocks": stack_blocks(grads["blocks"])}
        # The grad of a DDP-varying loss w.r.t. DDP-invariant params arrives summed over DDP.
        n = lax.axis_size(dp)
        grads = jax.tree_util.tree_map(lambda g: g / n, grads)
        return lax.psum(loss, dp) / n, grads

    grads_fn = jax.shard_map(
        local, mesh=mesh, in_specs=(specs, P(None, dp, None)), out_specs=(P(), specs)
    )

    @jax.jit
    def step(params, opt_state, tokens):
        loss, grads = grads_fn(params, tokens)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    par = ParallelismContext.from_axes(mesh, ddp_axis=0, tp_axis=1)
    specs = param_specs(CONFIG, par)
    optimizer = make_optimizer(OPT)
    ours = TrainStep(  # times the same state again and again: no donation
        GPT(CONFIG).loss, specs, par, optimizer, schedule=OPT.schedule(), donate=False
    )
    params = init_params(CONFIG, 5489)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, CONFIG.vocab_size, (1, BATCH, SEQ + 1)).astype(np.int32)
    dev_tokens = jax.device_put(tokens, NamedSharding(par.jax_mesh, P(None, "dp", None)))

    state = ours.init_state(params)
    hand = hand_written_step(par.jax_mesh, specs, optimizer)
    hp, ho = state.params, state.opt_state

    # Same algorithm: three steps give the same losses.
    s, hs = state, (hp, ho)
    for _ in range(3):
        s, m = ours(s, dev_tokens)
        p2, o2, l2 = hand(*hs, dev_tokens)
        hs = (p2, o2)
        assert abs(float(m["loss"]) - float(l2)) < 1e-4, (float(m["loss"]), float(l2))

    times = compare(
        {
            "ttml": lambda: ours(state, dev_tokens),
            "hand": lambda: hand(hp, ho, dev_tokens),
        },
        repeats=5,
        number=5,
    )

    rep = inspect(ours._global_step, state, dev_tokens, mesh=mesh, name="ttml TP+DDP step")
    hand_rep = inspect(hand, hp, ho, dev_tokens, mesh=mesh, name="hand-written step")
    ddp_mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    ddp = ParallelismContext.from_axes(ddp_mesh, ddp_axis=1)
    ddp_step = TrainStep(GPT(CONFIG).loss, param_specs(CONFIG, ddp), ddp, optimizer)
    ddp_state = ddp_step.init_state(params)
    ddp_tokens = jax.device_put(tokens, NamedSharding(ddp.jax_mesh, P(None, "dp", None)))
    ddp_rep = inspect(ddp_step._global_step, ddp_state, ddp_tokens, mesh=ddp_mesh, name="DDP 1x8")
    n_params = len(jax.tree_util.tree_leaves(params))

    return [
        Row(
            "NanoGPT train step, TP+DDP 2x4",
            "ttjax.ttml TrainStep",
            "hand-written jax.shard_map",
            times["ttml"],
            times["hand"],
            "ratio <= 1.05",
            extra={
                "config": str(CONFIG),
                "batch": BATCH,
                "seq": SEQ,
                "collectives_ttml": collectives(rep),
                "collectives_hand": collectives(hand_rep),
                "collectives_ddp_1x8": collectives(ddp_rep),
                "ddp_all_reduces": [
                    {"shape": list(c.shape), "axes": list(c.mesh_axes)}
                    for c in ddp_rep.collectives
                    if c.kind == "all-reduce"
                ],
                "parameter_tensors": n_params,
            },
        )
    ]


if __name__ == "__main__":
    import json

    rows = run(ttnn.open_mesh_device(ttnn.MeshShape(2, 4)))
    for r in rows:
        print(
            r.name,
            f"{r.subject_s * 1e3:.2f} ms vs {r.baseline_s * 1e3:.2f} ms, ratio {r.ratio:.3f}",
        )
        print(json.dumps(r.extra, indent=1))
