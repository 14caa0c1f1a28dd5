"""A global-view transformer for Tessera's ``graph.training_step``: its weights carry
``dist.ShardSpec``\\ s over ``tp`` (attention heads, MLP width) and ``pp`` (the stacked layers).

>>> mesh = dist.Mesh(axes=["tp", "pp", "dp"], devices=range(8))
>>> transformer = nn.Transformer(mesh, vocab=24, layers=4, width=12, heads=6, mlp=24)
>>> logits = transformer(tokens, W)       # W [vocab, width]: the LM head (logits = h @ W.T)

The forward is written over global arrays; XLA's partitioner splits it from the layouts. Layers
are stacked ``[layers, ...]`` and laid out over ``pp``; with ``S = pp`` stages the forward runs a
GPipe schedule over ``schedule.pipeline_microbatches(n)`` microbatches: a state ``[S, ...]`` laid
out over ``pp`` advances one stage per tick (``jnp.roll``, a collective-permute), every stage
computing at once (``vmap`` over stages), ``n + S - 1`` ticks in a ``lax.scan``. Each layer's
parameters pass :func:`graph.sync_gradients`, so ``schedule.all_reduce_overlap(True)`` averages
them inside the backward scan.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from ttjax.dist import graph, op, schedule as _schedule
from ttjax.dist.layout import REPLICATED, ShardSpec
from ttjax.dist.mesh import Mesh
from ttjax.errors import ConfigError, ShardingError

_LAYER = ("ln1", "wq", "wk", "wv", "wo", "ln2", "w1", "w2")


def rms_norm(x: Any, scale: Any, eps: float = 1e-6) -> jax.Array:
    """``x / rms(x) * scale`` over the last dim, in float32."""
    x32 = jnp.asarray(x, jnp.float32)
    return (x32 * lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)) * scale


def _constrain(x: Any, spec: PartitionSpec) -> Any:
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or any(a is not None and a not in mesh.axis_names for a in spec):
        return x
    return lax.with_sharding_constraint(x, NamedSharding(mesh, spec))


class Transformer(graph.Module):
    """Pre-norm decoder (RMSNorm, causal multi-head attention, GELU MLP) with ``layers`` blocks.

    ``tp`` splits heads (``heads`` must divide by it) and the MLP width, Megatron-style (q, k, v
    and the first MLP matrix by columns, the output projections by rows); ``pp`` splits the
    stacked layers into stages (``layers`` must divide by it); the token embedding
    ``[vocab, width]`` is split by vocabulary over ``tp``. The LM head is passed to each call (the
    seed's ``W``). Axes the mesh lacks are not split.
    """

    def __init__(
        self,
        mesh: Mesh,
        *,
        vocab: int,
        layers: int,
        width: int,
        heads: int,
        mlp: int,
        name: str = "Transformer",
        seed: int = 0,
        dtype: Any = "fp32",
    ) -> None:
        super().__init__(mesh, name)
        tp = mesh.axis_size("tp") if "tp" in mesh.axes else 1
        self.stages = mesh.axis_size("pp") if "pp" in mesh.axes else 1
        if layers % self.stages:
            raise ConfigError(
                f"Transformer: layers={layers} does not split into the {self.stages} pipeline "
                f"stages of the 'pp' axis.\nfix: layers a multiple of {self.stages}."
            )
        if heads % tp or width % heads:
            raise ShardingError(
                f"Transformer: heads={heads} must divide width={width} and split over the "
                f"{tp} devices of 'tp'.\nfix: heads a multiple of {tp} dividing {width}."
            )
        self.vocab, self.layers, self.width = vocab, layers, width
        self.heads, self.mlp = heads, mlp
        pp, tpa = (a if a in mesh.axes else None for a in ("pp", "tp"))
        col = ShardSpec(partition=(0, "col"), mesh_axes=(pp, tpa))
        row = ShardSpec(partition=(0, "row"), mesh_axes=(pp, tpa))
        stacked = ShardSpec(partition=(0,), mesh_axes=(pp,))
        rng = np.random.default_rng(seed)
        L, D, F = layers, width, mlp

        def normal(*shape: int) -> np.ndarray:
            return rng.standard_normal(shape).astype(np.float32) / np.sqrt(shape[-2])

        ones = np.ones((L, D), np.float32)
        shapes = {
            "ln1": ((L, D), stacked, ones),
            "wq": ((L, D, D), col, normal(L, D, D)),
            "wk": ((L, D, D), col, normal(L, D, D)),
            "wv": ((L, D, D), col, normal(L, D, D)),
            "wo": ((L, D, D), row, normal(L, D, D)),
            "ln2": ((L, D), stacked, ones),
            "w1": ((L, D, F), col, normal(L, D, F)),
            "w2": ((L, F, D), row, normal(L, F, D)),
        }
        for key, (shape, layout, init) in shapes.items():
            self.parameter(f"layers.{key}", shape, layout, init, dtype)
        self.parameter("norm", (D,), REPLICATED, np.ones((D,), np.float32), dtype)
        embed = rng.standard_normal((vocab, D)).astype(np.float32)
        self.parameter(
            "embed", (vocab, D), ShardSpec(partition=("row",), mesh_axes=(tpa,)), embed, dtype
        )
        self.overlapped = tuple(f"layers.{k}" for k in _LAYER)

    def _block(self, x: Any, w: dict[str, Any]) -> Any:
        b, t, d = x.shape
        h = rms_norm(x, w["ln1"])
        dh = d // self.heads
        q, k, v = (op.matmul(h, w[n]).reshape(b, t, self.heads, dh) for n in ("wq", "wk", "wv"))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dh)
        causal = jnp.tril(jnp.ones((t, t), bool))
        probs = op.softmax(jnp.where(causal, scores, -1e30), axis=-1)
        attn = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, t, d)
        x = x + op.matmul(attn, w["wo"])
        h = rms_norm(x, w["ln2"])
        return x + op.matmul(op.gelu(op.matmul(h, w["w1"])), w["w2"])

    def _stage(self, ws: dict[str, Any], x: Any) -> Any:
        def layer(x: Any, w: dict[str, Any]) -> tuple[Any, None]:
            return self._block(x, graph.sync_gradients(w)), None

        return lax.scan(layer, x, ws)[0]

    def _pipeline(self, layers: dict[str, Any], x: Any) -> Any:
        S, n = self.stages, _schedule.current().pipeline_microbatches
        b, t, d = x.shape
        if b % n:
            raise ConfigError(
                f"Transformer: a batch of {b} (per data-parallel replica) does not split into "
                f"schedule.pipeline_microbatches({n}).\nfix: a per-replica batch that is a "
                f"multiple of {n}, or fewer microbatches."
            )
        ws = {k: v.reshape(S, v.shape[0] // S, *v.shape[1:]) for k, v in layers.items()}
        mbs = x.reshape(n, b // n, t, d)
        stage_spec = PartitionSpec("pp")

        def tick(carry: Any, i: Any) -> tuple[Any, None]:
            state, outs = carry
            fed = jnp.roll(state, 1, axis=0).at[0].set(mbs[jnp.minimum(i, n - 1)])
            state = _constrain(jax.vmap(self._stage)(ws, _constrain(fed, stage_spec)), stage_spec)
            done = jnp.maximum(i - (S - 1), 0)  # the microbatch leaving the last stage
            return (state, lax.dynamic_update_index_in_dim(outs, state[S - 1], done, 0)), None

        state0 = jnp.zeros((S, b // n, t, d), mbs.dtype)
        (_, outs), _ = lax.scan(tick, (state0, jnp.zeros_like(mbs)), jnp.arange(n + S - 1))
        return outs.reshape(b, t, d)

    def __call__(self, tokens: Any, head: Any) -> jax.Array:
        """Logits ``[batch, seq, vocab]`` (float32) for ``tokens`` ``[batch, seq]``; ``head``
        ``[vocab, width]`` is the LM head."""
        W = self.input("head", head)
        if jnp.shape(W) != (self.vocab, self.width):
            raise ShardingError(
                f"Transformer: the head has shape {jnp.shape(W)}; expected ({self.vocab}, "
                f"{self.width}).\nfix: dist.tensor(({self.vocab}, {self.width}), ...)."
            )
        p = self.values()
        x = jnp.asarray(p["embed"], jnp.float32)[tokens]
        h = self._pipeline({k: p[f"layers.{k}"] for k in _LAYER}, x)
        return op.matmul(rms_norm(h, p["norm"]), jnp.asarray(W, jnp.float32).T)


__all__ = ["Transformer", "rms_norm"]
