"""Context parallelism: ring attention's per-device memory and time (``ttml.ops.ring_attention``).

``memory_sweep`` compiles one attention forward and one forward+backward for a 16k-token
sequence at cp = 1, 2, 4, 8 on 8 devices (a (8/cp) x cp mesh, one sequence per device row) from
abstract inputs (``jax.ShapeDtypeStruct``: nothing is allocated) and reads XLA's temporary bytes
per device (``memory_analysis().temp_size_in_bytes``), next to the same attention done by
all-gathering K/V (``[T_local, T]`` scores instead of ``[T_local, T_local]`` blocks). ``run`` times the load-balanced ring
(cp 8 on 1x8) against single-device causal attention on the whole sequence, values checked equal,
and ``ttjax.ttml``'s CP train step (NanoGPT, CP 8 on 1x8) against the same algorithm written by
hand with ``jax.shard_map`` (permute, ring attention, ``value_and_grad``, psum over cp, optax),
both checked to give the same losses first.

python -m benchmarks.bench_cp --memory      # the memory table (markdown) + results/cp_memory.json
python -m benchmarks.run --only cp          # the timing rows
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from benchmarks._harness import RESULTS, Row, compare
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_axes
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.ops.ring_attention import (
    inverse_load_balance_order,
    load_balance_order,
    local_positions,
    ring_attention,
)
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

SEQ, HEADS, KV_HEADS, HEAD_DIM = 16384, 8, 2, 64  # a Llama-style GQA layer, bfloat16 inputs


def _ring_fn(mesh: Mesh, load_balanced: bool = True) -> Callable[..., Any]:
    """Global ``f(q, k, v)`` on [B, T, H, D] already in the device order: batch over ``dp``,
    sequence over ``cp``."""
    spec = P("dp", "cp")
    return jax.shard_map(
        lambda q, k, v: ring_attention(q, k, v, "cp", load_balanced=load_balanced),
        mesh=mesh,
        in_specs=(spec, spec, spec),
        out_specs=spec,
    )


def _gather_fn(mesh: Mesh) -> Callable[..., Any]:
    """The same attention without a ring: all-gather K/V over ``cp``, then local queries against
    the whole sequence under the causal mask of their global positions."""
    spec = P("dp", "cp")

    def local(q: Any, k: Any, v: Any) -> Any:
        t_local = q.shape[1]
        k, v = (jax.lax.all_gather(x, "cp", axis=1, tiled=True) for x in (k, v))
        qpos = local_positions(t_local, "cp")
        kpos = jnp.asarray(load_balance_order(k.shape[1], jax.lax.axis_size("cp")))
        mask = qpos[:, None] >= kpos[None, :]
        return jax.nn.dot_product_attention(q, k, v, mask=mask[None, None])

    return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec), out_specs=spec)


def _temp_bytes(fn: Callable[..., Any], *args: Any) -> int:
    return int(jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes)


def memory_sweep(
    devices: Any = None, seq: int = SEQ, cps: tuple[int, ...] = (1, 2, 4, 8)
) -> list[dict[str, Any]]:
    """Per-device temporary bytes of ring attention, forward and forward+backward, per cp."""
    devices = np.asarray(jax.devices()[:8] if devices is None else devices).reshape(-1)
    out = []
    for cp in cps:
        dp = devices.size // cp
        mesh = Mesh(devices.reshape(dp, cp), ("dp", "cp"))
        q = jax.ShapeDtypeStruct((dp, seq, HEADS, HEAD_DIM), jnp.bfloat16)
        kv = jax.ShapeDtypeStruct((dp, seq, KV_HEADS, HEAD_DIM), jnp.bfloat16)
        ring, gather = _ring_fn(mesh), _gather_fn(mesh)
        out.append(
            {
                "seq": seq,
                "cp": cp,
                "t_local": seq // cp,
                "forward_temp_bytes": _temp_bytes(ring, q, kv, kv),
                "train_temp_bytes": _temp_bytes(_grad(ring), q, kv, kv),
                "gather_train_temp_bytes": _temp_bytes(_grad(gather), q, kv, kv),
            }
        )
    for row in out:
        row["train_vs_cp1"] = row["train_temp_bytes"] / out[0]["train_temp_bytes"]
    return out


def _grad(f: Callable[..., Any]) -> Callable[..., Any]:
    return jax.grad(lambda q, k, v: jnp.sum(f(q, k, v).astype(jnp.float32)), argnums=(0, 1, 2))


def markdown(rows: list[dict[str, Any]]) -> str:
    """The sweep as a markdown table (MiB per device)."""
    lines = [
        f"Causal attention, {rows[0]['seq']} tokens, {HEADS} heads / {KV_HEADS} KV heads x {HEAD_DIM}, "
        "bfloat16, 1 sequence per device; XLA temp bytes per device (CPU backend)",
        "",
        "| cp | T_local | ring fwd MiB | ring fwd+bwd MiB | ring fwd+bwd vs cp=1 | 1/cp "
        "| all-gather K/V fwd+bwd MiB |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['cp']} | {r['t_local']} | {r['forward_temp_bytes'] / 2**20:,.1f} | "
            f"{r['train_temp_bytes'] / 2**20:,.1f} | {r['train_vs_cp1']:.3f} | {1 / r['cp']:.3f} | "
            f"{r['gather_train_temp_bytes'] / 2**20:,.1f} |"
        )
    return "\n".join(lines)


STEP_CONFIG = GPTConfig(vocab_size=256, block_size=512, n_layer=2, n_head=4, n_embd=128)
STEP_BATCH, STEP_SEQ = 4, 512
STEP_OPT = OptimizerSettings(learning_rate=1e-3, warmup_steps=10, total_steps=1000)


def hand_written_cp_step(mesh: Mesh, optimizer: optax.GradientTransformation) -> Callable[..., Any]:
    """NanoGPT's CP step by hand on a mesh with a ``cp`` axis: cut and permute the sequence,
    then per device the model with ring attention, ``value_and_grad``, a psum over cp, optax."""
    hs = STEP_CONFIG.n_embd // STEP_CONFIG.n_head
    cp = mesh.shape["cp"]

    def ln(p: Any, x: Any) -> Any:
        mu = x.mean(-1, keepdims=True)
        var = jnp.square(x - mu).mean(-1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]

    def block(p: Any, x: Any) -> Any:
        b, t, _ = x.shape
        qkv = ln(p["ln_1"], x) @ p["c_attn"]["weight"] + p["c_attn"]["bias"]
        q, k, v = jnp.moveaxis(qkv.reshape(b, t, -1, 3, hs), 3, 0)
        y = ring_attention(q, k, v, "cp", scale=1 / np.sqrt(hs)).reshape(b, t, -1)
        x = x + y @ p["attn_proj"]["weight"] + p["attn_proj"]["bias"]
        h = jax.nn.gelu(
            ln(p["ln_2"], x) @ p["c_fc"]["weight"] + p["c_fc"]["bias"], approximate=True
        )
        return x + h @ p["mlp_proj"]["weight"] + p["mlp_proj"]["bias"]

    def local_loss(params: Any, idx: Any, targets: Any) -> Any:
        w = params["wte"]["weight"]
        x = jnp.take(w, idx, axis=0) + params["wpe"][local_positions(idx.shape[-1], "cp")]
        for p in params["blocks"]:
            x = block(p, x)
        logits = ln(params["ln_f"], x) @ w.T
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], -1))

    def local(params: Any, inputs: Any, targets: Any) -> tuple[Any, Any]:
        loss, grads = jax.value_and_grad(local_loss)(params, inputs, targets)
        grads = jax.tree_util.tree_map(lambda g: lax.psum(g, "cp") / cp, grads)
        return lax.psum(loss, "cp") / cp, grads

    seq = P(None, "cp")
    grads_fn = jax.shard_map(
        local, mesh=mesh, in_specs=(P(), seq, seq), out_specs=(P(), P()), check_vma=False
    )
    order = jnp.asarray(load_balance_order(STEP_SEQ, cp))

    @jax.jit
    def step(params: Any, opt_state: Any, tokens: Any) -> tuple[Any, Any, Any]:
        inputs, targets = tokens[0, :, :-1][:, order], tokens[0, :, 1:][:, order]
        loss, grads = grads_fn(params, inputs, targets)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return step


def train_step_row(mesh: ttnn.MeshDevice) -> Row:
    """CP 8 (1x8) NanoGPT train step: ``TrainStep`` vs :func:`hand_written_cp_step`."""
    par = ParallelismContext.from_axes(mesh, cp_axis=len(mesh.shape) - 1)
    optimizer = make_optimizer(STEP_OPT)
    # The benchmark times the same state again and again: no donation.
    ours = TrainStep(GPT(STEP_CONFIG).loss, param_axes(STEP_CONFIG), par, optimizer, donate=False)
    params = init_params(STEP_CONFIG, 5489)
    tokens = np.random.default_rng(0).integers(
        0, STEP_CONFIG.vocab_size, (1, STEP_BATCH, STEP_SEQ + 1)
    )
    tokens = jax.device_put(tokens.astype(np.int32), NamedSharding(par.jax_mesh, P()))
    state = ours.init_state(params)
    hand = hand_written_cp_step(par.jax_mesh, optimizer)
    hp, ho = state.params, state.opt_state

    # Same algorithm: three steps give the same losses.
    s, hs = state, (hp, ho)
    for _ in range(3):
        s, m = ours(s, tokens)
        *hs, loss = hand(*hs, tokens)
        assert abs(float(m["loss"]) - float(loss)) < 1e-4, (float(m["loss"]), float(loss))

    times = compare(
        {"ttml": lambda: ours(state, tokens), "hand": lambda: hand(hp, ho, tokens)},
        repeats=7,
        number=5,
    )
    return Row(
        name=(
            f"NanoGPT train step, CP {par.cp_size} ({STEP_BATCH} x {STEP_SEQ} tokens, "
            f"{STEP_CONFIG.n_layer} layers, dim {STEP_CONFIG.n_embd})"
        ),
        subject="ttjax.ttml TrainStep (enable_cp)",
        baseline="hand-written jax.shard_map",
        subject_s=times["ttml"],
        baseline_s=times["hand"],
        target="ratio <= 1.05",
        extra={"config": str(STEP_CONFIG), "batch": STEP_BATCH, "seq": STEP_SEQ},
    )


def run(mesh: ttnn.MeshDevice, seq: int = 2048) -> list[Row]:
    """Ring attention fwd+bwd on the 1x8 mesh (cp 8) vs one device, and the CP train step."""
    cp = mesh.shape[-1]
    jmesh = Mesh(np.asarray(mesh.jax_mesh.devices).reshape(1, cp), ("dp", "cp"))
    order, inverse = load_balance_order(seq, cp), inverse_load_balance_order(seq, cp)
    ring = _ring_fn(jmesh)
    rng = np.random.default_rng(0)
    q, k, v = (
        jnp.asarray(rng.standard_normal((1, seq, h, HEAD_DIM)), jnp.float32)
        for h in (HEADS, KV_HEADS, KV_HEADS)
    )

    def grads(f: Callable[..., Any]) -> Callable[..., Any]:
        return jax.jit(jax.grad(lambda q, k, v: jnp.sum(f(q, k, v) ** 2), argnums=(0, 1, 2)))

    ring_grad = grads(ring)
    full_grad = grads(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True))
    permuted = tuple(x[:, order] for x in (q, k, v))
    for got, want in zip(ring_grad(*permuted), full_grad(q, k, v)):
        np.testing.assert_allclose(np.asarray(got)[:, inverse], want, atol=1e-3, rtol=1e-3)
    times = compare(
        {"ring": lambda: ring_grad(*permuted), "full": lambda: full_grad(q, k, v)},
        repeats=5,
        number=3,
    )
    return [
        Row(
            name=(
                f"causal attention fwd+bwd, {seq} tokens, {HEADS}/{KV_HEADS} heads x {HEAD_DIM}: "
                f"ring (CP {cp}, load-balanced) vs one device"
            ),
            subject=f"ring attention, 1x{cp}",
            baseline="jax.nn.dot_product_attention",
            subject_s=times["ring"],
            baseline_s=times["full"],
            target="-",
        ),
        train_step_row(mesh),
    ]


if __name__ == "__main__":
    if "--memory" in sys.argv:
        rows = memory_sweep()
        print(markdown(rows))
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "cp_memory.json").write_text(json.dumps(rows, indent=2))
    else:
        from benchmarks._harness import report

        rows_ = run(ttnn.open_mesh_device(ttnn.MeshShape(1, 8)))
        report("ttjax benchmarks: cp", rows_, RESULTS / "cp.json")
