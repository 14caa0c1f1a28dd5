"""FSDP on the CPU mesh: ``ttjax.ttml``'s jitted FSDP 8 NanoGPT step (1x8, ``enable_fsdp``) against
the same ZeRO-3 written by hand with ``jax.shard_map``: the embeddings all-gathered on their embed
dim, each block all-gathered inside a remat'd ``lax.scan`` (forward, and again in the backward
pass), ``jax.value_and_grad``, the gradients ``lax.psum_scatter``-ed back onto the shards (``psum``
for the few parameters with no embed dim), the same optax AdamW on the shards.

Both variants are checked to give the same gradients and losses before they are timed; the row
also carries the compiled per-device parameter + optimizer bytes of FSDP 8 and DDP 8
(``ttjax.inspect``).

python -m benchmarks.run --only fsdp
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import numpy as np
import optax
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from benchmarks._harness import Row, collectives, compare
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_axes
from ttjax.inspect import inspect
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

CONFIG = GPTConfig(vocab_size=512, block_size=64, n_layer=4, n_head=8, n_embd=256)
BATCH, SEQ = 16, 64
OPT = OptimizerSettings(learning_rate=1e-3, warmup_steps=10, total_steps=1000)


def _fsdp_dim(spec: P) -> int | None:
    """The dimension a spec shards over ``fsdp`` (None: replicated)."""
    for d, entry in enumerate(spec):
        if entry == "fsdp" or (isinstance(entry, tuple) and "fsdp" in entry):
            return d
    return None


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _gather(x: Any, dim: int) -> Any:
    """All-gather over fsdp on ``dim``; backward: reduce-scatter the gradient onto the shard."""
    return lax.all_gather(x, "fsdp", axis=dim, tiled=True)


_gather.defvjp(
    lambda x, dim: (_gather(x, dim), None),
    lambda dim, _, g: (lax.psum_scatter(g, "fsdp", scatter_dimension=dim, tiled=True),),
)


def hand_written_step(mesh: Any, specs: Any, optimizer: optax.GradientTransformation) -> Any:
    """ZeRO-3 by hand: the embeddings gathered up front, each block gathered inside a remat'd
    ``lax.scan`` body (again in the backward pass), gradients reduce-scattered (whole parameters
    psum'd), divided by the fsdp size, then optax."""
    model = GPT(CONFIG)
    dims = jax.tree.map(_fsdp_dim, specs, is_leaf=lambda s: isinstance(s, P))
    dims = jax.tree.map(lambda d: -1 if d is None else d, dims, is_leaf=lambda d: d is None)
    block_dims = jax.tree.map(lambda d: d - 1, dims["blocks"])  # scan takes the layer axis

    def gather(tree: Any, tree_dims: Any) -> Any:
        return jax.tree.map(lambda x, d: x if d < 0 else _gather(x, d), tree, tree_dims)

    def block(h, p):
        return model.block(gather(p, block_dims), h), None

    body = jax.checkpoint(block, policy=jax.checkpoint_policies.nothing_saveable)

    def local_loss(shards, idx, targets):
        top = {k: v for k, v in shards.items() if k != "blocks"}
        top = gather(top, {k: dims[k] for k in top})
        x = model.wte(top["wte"], idx) + top["wpe"][: idx.shape[-1]]
        x = lax.scan(body, x, shards["blocks"])[0]
        logits = model.wte.attend(top["wte"], model.ln_f(top["ln_f"], x))
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    def local(shards, tokens):
        n = lax.axis_size("fsdp")
        tok = tokens[0]
        loss, grads = jax.value_and_grad(local_loss)(shards, tok[:, :-1], tok[:, 1:])
        grads = jax.tree.map(lambda g, d: (lax.psum(g, "fsdp") if d < 0 else g) / n, grads, dims)
        return lax.psum(loss, "fsdp") / n, grads

    grads_fn = jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(specs, P(None, "fsdp", None)),
        out_specs=(P(), specs),
        check_vma=False,
    )

    @jax.jit
    def step(params, opt_state, tokens):
        loss, grads = grads_fn(params, tokens)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step, jax.jit(grads_fn)


def _state_bytes(step: TrainStep, state: Any, tokens: Any) -> int:
    """Compiled per-device argument bytes of the step, less this device's tokens."""
    rep = inspect(step._global_step, state, tokens, mesh=step.mesh)
    assert rep.memory is not None
    return rep.memory.argument_bytes - tokens.nbytes // tokens.sharding.num_devices


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    par = ParallelismContext.from_axes(mesh, fsdp_axis=1)
    optimizer = make_optimizer(OPT)
    ours = TrainStep(  # times the same state again and again: no donation
        GPT(CONFIG).loss, param_axes(CONFIG), par, optimizer, schedule=OPT.schedule(), donate=False
    )
    params = init_params(CONFIG, 5489)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, CONFIG.vocab_size, (1, BATCH, SEQ + 1)).astype(np.int32)
    dev_tokens = jax.device_put(tokens, NamedSharding(ours.mesh, ours.batch_spec))

    state = ours.init_state(params)
    hand, hand_grads = hand_written_step(ours.mesh, ours.param_specs, optimizer)
    hp, ho = state.params, state.opt_state

    # Same algorithm: the same gradients, and three steps give the same losses.
    _, want = ours.grads(hp, tokens)
    _, got = hand_grads(hp, dev_tokens)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-6)

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
        repeats=9,
        number=5,
    )

    rep = inspect(ours._global_step, state, dev_tokens, mesh=ours.mesh, name="ttml FSDP step")
    hand_rep = inspect(hand, hp, ho, dev_tokens, mesh=ours.mesh, name="hand-written FSDP step")
    ddp = TrainStep(
        GPT(CONFIG).loss,
        param_axes(CONFIG),
        ParallelismContext.from_axes(mesh, ddp_axis=1),
        optimizer,
    )
    ddp_tokens = jax.device_put(tokens, NamedSharding(ddp.mesh, ddp.batch_spec))
    fsdp_bytes = _state_bytes(ours, state, dev_tokens)
    ddp_bytes = _state_bytes(ddp, ddp.init_state(params), ddp_tokens)

    return [
        Row(
            "NanoGPT train step, FSDP 8 on 1x8",
            "ttjax.ttml TrainStep (enable_fsdp)",
            "hand-written jax.shard_map FSDP",
            times["ttml"],
            times["hand"],
            "ratio <= 1.05",
            extra={
                "config": str(CONFIG),
                "batch": BATCH,
                "seq": SEQ,
                "collectives_ttml": collectives(rep),
                "collectives_hand": collectives(hand_rep),
                "collective_axes_ttml": sorted(
                    {f"{c.kind} {c.mesh_axes}" for c in rep.collectives}
                ),
                "state_bytes_per_device_fsdp8": fsdp_bytes,
                "state_bytes_per_device_ddp8": ddp_bytes,
                "fsdp_over_ddp_div_8": fsdp_bytes / (ddp_bytes / 8),
            },
        )
    ]


if __name__ == "__main__":
    import json

    rows = run(ttnn.open_mesh_device(ttnn.MeshShape(1, 8)))
    for r in rows:
        print(
            r.name,
            f"{r.subject_s * 1e3:.2f} ms vs {r.baseline_s * 1e3:.2f} ms, ratio {r.ratio:.3f}",
        )
        print(json.dumps(r.extra, indent=1))
