"""Context parallelism: ring attention's per-device memory and time (``ttml.ops.ring_attention``).

``memory_sweep`` compiles one attention forward and one forward+backward for a 16k-token
sequence at cp = 1, 2, 4, 8 on 8 devices (a (8/cp) x cp mesh, one sequence per device row) from
abstract inputs (``jax.ShapeDtypeStruct``: nothing is allocated) and reads XLA's temporary bytes
per device (``memory_analysis().temp_size_in_bytes``), next to the same attention done by
all-gathering K/V (``[T_local, T]`` scores instead of ``[T_local, T_local]`` blocks). ``run`` times the load-balanced ring
(cp 8 on 1x8) against single-device causal attention on the whole sequence, values checked equal.

python -m benchmarks.bench_cp --memory      # the memory table (markdown) + results/cp_memory.json
python -m benchmarks.run --only cp          # the timing row
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from benchmarks._harness import RESULTS, Row, compare
from ttjax.ttml.ops.ring_attention import (
    inverse_load_balance_order,
    load_balance_order,
    local_positions,
    ring_attention,
)

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


def run(mesh: ttnn.MeshDevice, seq: int = 2048) -> list[Row]:
    """Forward+backward time: ring attention on the 1x8 mesh (cp 8) vs one device, same math."""
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
        )
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
