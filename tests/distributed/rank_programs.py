"""Model programs that ``ttjax-run`` starts in the distributed tests (one process per rank).

``python tests/distributed/rank_programs.py bigmesh|pipeline OUTDIR``. The ``bigmesh`` and ``stage`` results
are computed by functions the tests also call in one process, so the two runs share every line.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as a script by ttjax-run: this checkout's ttjax and models

import ttjax as ttnn  # noqa: E402
from models.falcon.mlp import TtFalconMLP, compose_output  # noqa: E402
from models.llama.config import get_config  # noqa: E402
from models.llama.model import TtLlama  # noqa: E402
from models.llama.weights import random_weights  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Big mesh: Falcon TP MLP, Llama TP decode, a TP+DDP training step (all on a 2x4 mesh)
# ---------------------------------------------------------------------------------------------


def falcon_tp(mesh: ttnn.MeshDevice) -> dict[str, np.ndarray]:
    """The TT-NN guide's tensor-parallel Falcon MLP (section 7) at a small width."""
    rng = np.random.default_rng(1)
    h, f = 64, 256
    x = rng.uniform(-1, 1, (1, 1, 32, h)).astype(np.float32)
    w1, w2 = ((rng.standard_normal(s) * 0.05).astype(np.float32) for s in ((h, f), (f, h)))
    hidden = ttnn.from_torch(
        x, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
    )
    shard = ttnn.ShardTensorToMesh(mesh, dim=-1)

    def put(w: np.ndarray) -> ttnn.Tensor:
        return ttnn.from_torch(w, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=shard)

    params = ttnn.model_preprocessing.make_parameter_dict(
        {"dense_h_to_4h": {"weight": put(w1)}, "dense_4h_to_h": {"weight": put(w2)}}
    )
    out = TtFalconMLP(params, tensor_parallel=True)(hidden)
    return {"falcon": compose_output(mesh, out, "tp")}


def llama_tp(mesh: ttnn.MeshDevice, steps: int = 2) -> dict[str, np.ndarray]:
    """Tensor-parallel Llama decode: ``steps`` jitted decode steps filling the KV cache."""
    config = dataclasses.replace(get_config("tiny"), n_layers=1)
    model = TtLlama(config, random_weights(config, seed=3), mesh, mode="tp", batch=2)
    tokens = np.random.default_rng(4).integers(0, config.vocab_size, (2, steps))
    # The topology lowering fixes the order of every sum (ring steps of ppermute), so the result
    # does not depend on how many processes share the mesh; XLA's native all-reduce and gloo's
    # add the 8 partial sums in different orders.
    with ttnn.ccl_lowering("topology"):
        step = jax.jit(model.decode_fn())
        caches = model.caches
        out = {}
        for t in range(steps):
            tok = model.tokens_to_device(tokens[:, t : t + 1])
            pos = model.positions_to_device(np.full((2,), t, np.int32))
            logits, caches = step(model.params, caches, tok, pos)
            out[f"llama_decode{t}"] = model.logits_to_numpy(logits)
    return out


def _ordered_sum(x: jax.Array, axis: str) -> jax.Array:
    """Sum over a mesh axis in device order (all_gather, then one local reduction)."""
    return jnp.sum(jax.lax.all_gather(x, axis), axis=0)


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _tp_reduce(x: jax.Array, axis: str) -> jax.Array:
    """Megatron's g: sum the row-parallel partial outputs; the gradient passes through."""
    return _ordered_sum(x, axis)


def _tp_reduce_fwd(x: jax.Array, axis: str) -> tuple[jax.Array, None]:
    return _ordered_sum(x, axis), None


def _tp_reduce_bwd(axis: str, _: None, g: jax.Array) -> tuple[jax.Array]:
    return (g,)


_tp_reduce.defvjp(_tp_reduce_fwd, _tp_reduce_bwd)


def train_tp_ddp(mesh: ttnn.MeshDevice, steps: int = 2) -> dict[str, np.ndarray]:
    """An MLP trained with TP over the mesh columns and DDP over the rows (plain JAX + optax)."""
    jmesh = mesh.jax_mesh
    dp, tp = mesh.axis_names
    rng = np.random.default_rng(7)
    d, h, batch = 16, 32, 8
    w1 = (rng.standard_normal((d, h)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((h, d)) * 0.3).astype(np.float32)
    x = rng.standard_normal((batch, d)).astype(np.float32)
    y = np.tanh(x[:, ::-1]).astype(np.float32)
    specs = {"w1": P(None, tp), "w2": P(tp, None)}
    params = {
        k: jax.device_put(v, NamedSharding(jmesh, specs[k])) for k, v in (("w1", w1), ("w2", w2))
    }
    xs, ys = (jax.device_put(a, NamedSharding(jmesh, P(dp, None))) for a in (x, y))
    opt = optax.adam(1e-2)
    by_shape = {w1.shape: specs["w1"], w2.shape: specs["w2"]}
    state_specs = jax.tree.map(
        lambda a: by_shape.get(a.shape, P()), jax.eval_shape(opt.init, params)
    )
    shardings = jax.tree.map(lambda sp: NamedSharding(jmesh, sp), state_specs)
    opt_state = jax.jit(opt.init, out_shardings=shardings)(params)

    def local_loss(p, xb, yb):
        hid = jax.nn.gelu(xb @ p["w1"])
        out = _tp_reduce(hid @ p["w2"], tp)
        return jnp.sum((out - yb) ** 2) / (batch * d)

    def step(p, s, xb, yb):
        loss, grads = jax.value_and_grad(local_loss)(p, xb, yb)
        grads = jax.tree.map(lambda g: _ordered_sum(g, dp), grads)  # DDP: sum over the rows
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, _ordered_sum(loss, dp)

    sharded = jax.jit(
        jax.shard_map(
            step,
            mesh=jmesh,
            in_specs=(specs, state_specs, P(dp, None), P(dp, None)),
            out_specs=(specs, state_specs, P()),
            check_vma=False,
        )
    )
    losses = []
    for _ in range(steps):
        params, opt_state, loss = sharded(params, opt_state, xs, ys)
        losses.append(loss)
    return {
        "train_losses": np.stack([_gather(v) for v in losses]),
        "train_w1": _gather(params["w1"]),
        "train_w2": _gather(params["w2"]),
    }


def _gather(a: jax.Array) -> np.ndarray:
    if a.is_fully_addressable or a.is_fully_replicated:
        return np.asarray(a)
    return np.asarray(multihost_utils.process_allgather(a, tiled=True))


def bigmesh(mesh: ttnn.MeshDevice) -> dict[str, np.ndarray]:
    """Every big-mesh result, as host arrays (each rank holds the whole of each)."""
    out = falcon_tp(mesh)
    out |= llama_tp(mesh)
    out |= train_tp_ddp(mesh)
    return out


# ---------------------------------------------------------------------------------------------
# Multi-mesh: a 2-stage pipeline, one 1x4 mesh per stage
# ---------------------------------------------------------------------------------------------

WIDTH, MICROBATCHES = 64, 2


def stage_inputs() -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(11)
    weights = [(rng.standard_normal((WIDTH, WIDTH)) * 0.2).astype(np.float32) for _ in range(2)]
    xs = [rng.uniform(-1, 1, (1, 1, 32, WIDTH)).astype(np.float32) for _ in range(MICROBATCHES)]
    return weights, xs


def stage(mesh: ttnn.MeshDevice, w: ttnn.Tensor, x: ttnn.Tensor) -> ttnn.Tensor:
    """One pipeline stage: a column-parallel linear, gelu, all_gather (replicated output)."""
    return ttnn.all_gather(ttnn.gelu(ttnn.linear(x, w)), dim=3)


def put_weight(mesh: ttnn.MeshDevice, w: np.ndarray) -> ttnn.Tensor:
    return ttnn.from_torch(
        w, device=mesh, layout=ttnn.TILE_LAYOUT, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1)
    )


def put_replicated(mesh: ttnn.MeshDevice, x: np.ndarray) -> ttnn.Tensor:
    return ttnn.from_torch(
        x, device=mesh, layout=ttnn.TILE_LAYOUT, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
    )


def read_replicated(mesh: ttnn.MeshDevice, t: ttnn.Tensor) -> np.ndarray:
    return ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))[:1]


def pipeline_single(mesh: ttnn.MeshDevice) -> np.ndarray:
    """Both stages on one mesh in one process: the reference of the 2-rank pipeline."""
    weights, xs = stage_inputs()
    w0, w1 = (put_weight(mesh, w) for w in weights)
    return np.stack(
        [
            read_replicated(mesh, stage(mesh, w1, stage(mesh, w0, put_replicated(mesh, x))))
            for x in xs
        ]
    )


def pipeline_rank(mesh: ttnn.MeshDevice, mesh_id: int) -> np.ndarray | None:
    """Stage ``mesh_id`` of the pipeline; stage 0 sends each microbatch to stage 1."""
    weights, xs = stage_inputs()
    w = put_weight(mesh, weights[mesh_id])
    if mesh_id == 0:
        for x in xs:
            ttnn.distributed.send(stage(mesh, w, put_replicated(mesh, x)), to_mesh=1)
        return None
    template = put_replicated(mesh, np.zeros((1, 1, 32, WIDTH), np.float32))
    outs = []
    for _ in xs:
        h = ttnn.distributed.recv(template, from_mesh=0)
        outs.append(read_replicated(mesh, stage(mesh, w, h)))
    return np.stack(outs)


def main(argv: list[str]) -> int:
    name, outdir = argv[1], Path(argv[2])
    env = ttnn.distributed.current()  # joins the job (open_mesh_device would do it too)
    if name == "bigmesh":
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
        res = bigmesh(mesh)
        res["global_ids"] = np.array(ttnn.distributed.global_device_ids(mesh))
        res["process_of_device"] = np.array([d.process_index for d in mesh.get_devices()])
        np.savez(outdir / f"rank{env.process_id}.npz", **res)
    elif name == "pipeline":
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 4))
        out = pipeline_rank(mesh, env.mesh_id)
        if out is not None:
            np.save(outdir / f"stage{env.mesh_id}.npy", out)
    else:
        raise SystemExit(f"unknown program {name!r}")
    print(f"done rank={env.process_id}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
