"""jit and eager-dispatch overheads of ttjax against hand-written JAX on the same mesh.

* A jitted ttjax program (TP MLP: linear, gelu, all_gather, linear) against the same algorithm
  written with ``jax.shard_map`` + ``NamedSharding`` (target: ratio <= 1.05, same collectives).
* An eager ttjax op against the same op as a jitted raw JAX function on the same sharded array
  (target: ratio <= 1.25, thanks to the per-mesh program cache).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from benchmarks._harness import Row, compare
from ttjax._src.tools.hlo import count_collectives


def jit_vs_shard_map(
    mesh: ttnn.MeshDevice, hidden: int = 1024, ffn: int = 4096, seq: int = 128
) -> Row:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, seq, hidden)).astype(np.float32)
    w1 = (rng.standard_normal((hidden, ffn)) * 0.02).astype(np.float32)
    w2 = (rng.standard_normal((ffn, hidden)) * 0.02).astype(np.float32)
    shard = ttnn.ShardTensorToMesh(mesh, dim=-1)
    tx = ttnn.from_torch(x, device=mesh)
    tw1 = ttnn.from_torch(w1, device=mesh, mesh_mapper=shard)
    tw2 = ttnn.from_torch(w2, device=mesh, mesh_mapper=shard)

    def ttjax_mlp(x, w1, w2):
        h = ttnn.gelu(ttnn.linear(x, w1))
        return ttnn.linear(ttnn.all_gather(h, dim=3), w2)

    ours = jax.jit(ttjax_mlp)

    jm = mesh.jax_mesh
    axes = tuple(mesh.axis_names)
    jx = jax.device_put(x, NamedSharding(jm, P()))
    jw1 = jax.device_put(w1, NamedSharding(jm, P(None, axes)))
    jw2 = jax.device_put(w2, NamedSharding(jm, P(None, axes)))

    def local(x, w1, w2):
        h = jax.nn.gelu(jnp.matmul(x, w1, preferred_element_type=jnp.float32), approximate=False)
        h = jax.lax.all_gather(h, axes, axis=3, tiled=True)
        return jnp.matmul(h, w2, preferred_element_type=jnp.float32)

    hand = jax.jit(
        jax.shard_map(
            local,
            mesh=jm,
            in_specs=(P(), P(None, axes), P(None, axes)),
            out_specs=P(None, None, None, axes),
            check_vma=False,
        )
    )
    ours_c = count_collectives(ours.lower(tx, tw1, tw2).compile().as_text())
    hand_c = count_collectives(hand.lower(jx, jw1, jw2).compile().as_text())
    t = compare({"ttjax": lambda: ours(tx, tw1, tw2), "shard_map": lambda: hand(jx, jw1, jw2)})
    return Row(
        "jit TP MLP vs hand-written shard_map",
        "ttjax jit",
        "jax.shard_map",
        t["ttjax"],
        t["shard_map"],
        "ratio <= 1.05",
        {"mesh": str(mesh.shape), "same_collectives": ours_c == hand_c, "collectives": ours_c},
    )


def eager_op_vs_raw(mesh: ttnn.MeshDevice, shape: tuple[int, ...] = (8, 1, 128, 1024)) -> Row:
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    raw = jax.jit(lambda a: jax.nn.gelu(a, approximate=False))
    arr = t.value
    times = compare({"eager": lambda: ttnn.gelu(t), "raw": lambda: raw(arr)}, number=50)
    return Row(
        "eager op (gelu) vs jitted raw JAX",
        "ttnn.gelu eager",
        "jax.jit(gelu)",
        times["eager"],
        times["raw"],
        "ratio <= 1.25",
        {"mesh": str(mesh.shape), "shape": list(shape)},
    )


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    return [jit_vs_shard_map(mesh), eager_op_vs_raw(mesh)]
