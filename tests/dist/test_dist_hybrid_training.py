"""Tessera's hybrid-parallel training example (section 7.6) at small size, written with ttjax.dist:
a 2-stage MLP language model on a tp x pp x dp = 2 x 2 x 2 mesh (Megatron TP inside each stage,
a GPipe schedule over pp with ``dist.send``, DDP over dp with an explicit gradient all-reduce),
trained with optax AdamW; its losses equal the single-device model's, step by step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import ttjax as ttnn
from ttjax import dist
from ttjax.dist import op

V, D, F, T, B, M = (
    64,
    16,
    32,
    8,
    8,
    2,
)  # vocab, width, MLP width, sequence, global batch, microbatches
STAGES = 2
STEPS = 3


def init_params(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "embed": rng.standard_normal((V, D)).astype(np.float32) * 0.5,
        "w1": rng.standard_normal((STAGES, D, F)).astype(np.float32) / np.sqrt(D),
        "w2": rng.standard_normal((STAGES, F, D)).astype(np.float32) / np.sqrt(F),
        "head": rng.standard_normal((D, V)).astype(np.float32) / np.sqrt(D),
    }


def batches(seed: int = 1) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(STEPS):
        seq = rng.integers(0, V, (B, T + 1))
        out.append((seq[:, :-1].astype(np.int32), seq[:, 1:].astype(np.int32)))
    return out


# --- the single-device reference -----------------------------------------------------------------


def reference_loss(p, tokens, labels):
    x = p["embed"][tokens]
    for s in range(STAGES):
        x = x + jax.nn.gelu(x @ p["w1"][s], approximate=False) @ p["w2"][s]
    return op.cross_entropy(x @ p["head"], labels)


# --- the same model with dist: layouts, one region, an explicit DDP all-reduce -------------------

LAYOUTS = {
    "embed": dist.REPLICATED,
    "w1": dist.ShardSpec(partition=(0, "col"), mesh_axes=("pp", "tp")),  # column-parallel per stage
    "w2": dist.ShardSpec(partition=(0, "row"), mesh_axes=("pp", "tp")),  # row-parallel per stage
    "head": dist.REPLICATED,
}
BATCH = dist.ShardSpec(partition=(0,), mesh_axes=("dp",))


def replica_loss(p, tokens, labels):
    """One dp replica's loss: TP blocks on every pp stage, microbatches flow stage to stage."""
    stage = dist.axis_index("pp")
    mbs, lbs = tokens.reshape(M, -1, T), labels.reshape(M, -1, T)
    carry = jnp.zeros((mbs.shape[1], T, D), jnp.float32)
    outs = []
    for tick in range(M + STAGES - 1):
        x = jnp.where(stage == 0, p["embed"][mbs[min(tick, M - 1)]], carry)
        h = op.gelu(op.matmul(x, p["w1"][0]))  # [mb, T, F / tp]
        x = x + dist.all_reduce(op.matmul(h, p["w2"][0]), axis="tp")  # Megatron row-parallel sum
        if tick >= STAGES - 1:
            outs.append(x)  # the last stage's output for microbatch tick - (STAGES - 1)
        carry = dist.send(x, axis="pp", to=1)
    loss = op.cross_entropy(op.matmul(jnp.stack(outs), p["head"]), lbs)
    return dist.all_reduce(jnp.where(stage == STAGES - 1, loss, 0.0), axis="pp")


def local_step(p, tokens, labels):
    p = dist.per_replica(p, "dp")  # gradients stay per replica until the explicit all-reduce
    loss, grads = jax.value_and_grad(replica_loss)(p, tokens, labels)
    grads = dist.all_reduce(grads, axis="dp", op="mean")  # DDP, under ttjax.numerics
    return dist.all_reduce(loss, axis="dp", op="mean"), grads


def train(mesh: dist.Mesh, tx, steps) -> list[float]:
    host = init_params()
    params = {
        k: dist.tensor(v.shape, layout=LAYOUTS[k], mesh=mesh, dtype="fp32", init=v)
        for k, v in host.items()
    }
    grads_fn = dist.local(
        local_step,
        mesh=mesh,
        in_layouts=(LAYOUTS, BATCH, BATCH),
        out_layouts=(dist.REPLICATED, LAYOUTS),
    )

    @jax.jit
    def step(params, opt_state, tokens, labels):
        loss, grads = grads_fn(params, tokens, labels)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    opt_state = tx.init(params)
    losses = []
    for tokens, labels in steps:
        tokens = dist.tensor(tokens.shape, layout=BATCH, mesh=mesh, dtype="int32", init=tokens)
        labels = dist.tensor(labels.shape, layout=BATCH, mesh=mesh, dtype="int32", init=labels)
        params, opt_state, loss = step(params, opt_state, tokens, labels)
        losses.append(float(loss))
    assert params["w1"].sharding.spec == jax.sharding.PartitionSpec("pp", None, "tp")
    return losses


def reference_train(tx, steps) -> list[float]:
    params = jax.tree.map(jnp.asarray, init_params())
    opt_state = tx.init(params)

    @jax.jit
    def step(params, opt_state, tokens, labels):
        loss, grads = jax.value_and_grad(reference_loss)(params, tokens, labels)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    losses = []
    for tokens, labels in steps:
        params, opt_state, loss = step(params, opt_state, tokens, labels)
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize(
    "numerics", ["deterministic", pytest.param("fast", marks=pytest.mark.slow)]
)
def test_hybrid_tp_pp_dp_training_matches_single_device(numerics: str) -> None:
    mesh = dist.Mesh(axes=["tp", "pp", "dp"], devices=range(8))
    assert mesh.topology == "tp × pp × dp mesh, 2 × 2 × 2"
    tx = optax.adamw(1e-2, weight_decay=0.1)
    steps = batches()
    want = reference_train(tx, steps)
    with ttnn.numerics(numerics):
        got = train(mesh, tx, steps)
    assert want[-1] < want[0]  # it learns
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
