"""Training a tiny MoE language model on a mesh with optax, and its single-device JAX twin.

The model is ``embed -> x + MoE(rms_norm(x)) -> rms_norm -> head`` over byte tokens, trained on
next-byte cross-entropy plus ``aux_loss_coef`` times Switch's load-balancing loss. The mesh
version is written with ttjax ops (the MoE layer's two ``all_to_all`` calls, a cross-entropy
summed with one ``all_reduce``); ``jax.value_and_grad`` differentiates through them, and the
whole step (forward, backward, AdamW) is one ``jax.jit`` program. Gradients of replicated
weights are summed over the devices by the backward of ``shard_map`` itself, so no explicit
``synchronize_gradients`` is needed.

>>> model = TtMoELM(config, mesh, ParallelDims.from_axes(mesh.shape, {"ep": 1}))  # experts: axis 1
>>> step = make_train_step(model, optax.adamw(3e-3))
>>> params, opt_state, metrics = step(params, opt_state, tokens, targets)

From the shell (errors print as one message with its fix; ``--debug`` shows the traceback):

    python -m models.moe.train --mesh 2x4 --steps 100
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import ttjax as ttnn
from models.moe.config import MoEConfig
from models.moe.layer import MoELayer, random_moe_weights
from models.moe.reference import moe_reference
from ttjax.errors import ConfigError
from ttjax.plan import ParallelDims
from ttjax.ttml.cli import add_debug_flag, run_cli

EPS = 1e-6


@dataclass(frozen=True)
class MoELMConfig:
    """A one-MoE-layer language model over ``vocab`` tokens (256: bytes)."""

    moe: MoEConfig
    vocab: int = 256
    aux_loss_coef: float = 0.01


class Metrics(NamedTuple):
    """Per step: the loss that was differentiated, its two parts, and token choices per expert
    per data device: routed (before capacity) and kept ([1, E] per device; [G, E] in the twin)."""

    loss: Any
    cross_entropy: Any
    aux_loss: Any
    routed: Any
    kept: Any


def init_weights(config: MoELMConfig, seed: int = 0) -> dict[str, Any]:
    """Host float32 weights: ``embed`` [V, D], ``norm``/``norm_f`` [D], ``moe``, ``head`` [D, V]."""
    rng = np.random.default_rng(seed)
    d, v = config.moe.dim, config.vocab
    return {
        "embed": rng.standard_normal((v, d), np.float32),
        "norm": np.ones((d,), np.float32),
        "moe": random_moe_weights(config.moe, seed + 1),
        "norm_f": np.ones((d,), np.float32),
        "head": rng.standard_normal((d, v), np.float32) * np.float32(d**-0.5),
    }


class TtMoELM:
    """The model on a mesh: tokens split over the data axes, experts over the plan's ``ep`` axis.

    ``dims`` is the plan (``ttjax.plan.ParallelDims``): its ``ep`` role places the experts, an
    optional ``tp`` role splits each expert's FFN; without it, the experts take the last mesh
    axis.
    """

    def __init__(
        self, config: MoELMConfig, mesh_device: ttnn.MeshDevice, dims: ParallelDims | None = None
    ) -> None:
        shape = tuple(mesh_device.shape)
        dims = ParallelDims.from_axes(shape, {"ep": len(shape) - 1}) if dims is None else dims
        if dims.shape != shape or dims.axis("ep") is None:
            raise ConfigError(
                f"TtMoELM: the plan {dims!r} has no ep axis on the {list(shape)} mesh.\nfix: "
                f"ParallelDims.from_axes({shape}, {{'ep': {len(shape) - 1}}}) (tp optional)."
            )
        self.config, self.mesh, self.dims = config, mesh_device, dims
        self.moe = MoELayer(
            config.moe, mesh_device, ep_axis=dims.axis("ep"), tp_axis=dims.axis("tp")
        )

    def weights_to_device(self, weights: dict[str, Any]) -> dict[str, Any]:
        def replicated(a: Any) -> ttnn.Tensor:
            return ttnn.from_torch(
                np.asarray(a, np.float32),
                dtype=ttnn.float32,
                layout=ttnn.TILE_LAYOUT,
                device=self.mesh,
                mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh),
            )

        return {
            "embed": replicated(weights["embed"]),
            "norm": replicated(weights["norm"]),
            "moe": self.moe.weights_to_device(weights["moe"]),
            "norm_f": replicated(weights["norm_f"]),
            "head": replicated(weights["head"]),
        }

    def tokens_to_device(self, tokens: np.ndarray) -> ttnn.Tensor:
        """Token ids [N, S] -> uint32, rows split over the data devices (one group each)."""
        return ttnn.from_torch(
            np.asarray(tokens, np.uint32),
            dtype=ttnn.uint32,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh,
            mesh_mapper=self.moe.token_mapper(0),
        )

    def loss(self, params: dict[str, Any], tokens: ttnn.Tensor, targets: ttnn.Tensor) -> Any:
        """``(loss, cross_entropy, aux_loss, routed, kept)`` as ttnn Tensors (losses [1, 1],
        replicated; counts [1, E] per device)."""
        v = self.config.vocab
        x = ttnn.embedding(tokens, params["embed"], layout=ttnn.TILE_LAYOUT)  # [b, S, D]
        moe = self.moe(
            params["moe"], ttnn.rms_norm(x, epsilon=EPS, weight=params["norm"]), aux_loss=True
        )
        x = ttnn.add(x, moe.out)
        logits = ttnn.linear(ttnn.rms_norm(x, epsilon=EPS, weight=params["norm_f"]), params["head"])
        top = ttnn.max(logits, dim=-1, keepdim=True)
        lse = ttnn.add(ttnn.log(ttnn.sum(ttnn.exp(ttnn.subtract(logits, top)), -1, True)), top)
        vocab_ids = ttnn.arange(0, v, 1, ttnn.float32, device=self.mesh)
        b, s = targets.shape[0], targets.shape[1]
        onehot = ttnn.eq(ttnn.reshape(ttnn.typecast(targets, ttnn.float32), (b, s, 1)), vocab_ids)
        picked = ttnn.sum(ttnn.multiply(onehot, logits), dim=-1, keepdim=True)
        nll = ttnn.reshape(ttnn.sum(ttnn.subtract(lse, picked)), (1, 1))
        groups = self.moe.groups
        if groups > 1:
            data = self.moe.data_axes
            nll = ttnn.all_reduce(nll, cluster_axis=None if len(data) == 2 else data[0])
        ce = ttnn.multiply(nll, 1.0 / (b * s * groups))
        assert moe.aux_loss is not None
        total = ttnn.add(ce, ttnn.multiply(moe.aux_loss, self.config.aux_loss_coef))
        return total, ce, moe.aux_loss, moe.routed, moe.kept


def make_train_step(model: TtMoELM, optimizer: Any) -> Callable[..., Any]:
    """``step(params, opt_state, tokens, targets) -> (params, opt_state, Metrics)``, jitted.

    ``Metrics.routed`` and ``Metrics.kept`` are ttnn Tensors ([1, E] per device).
    """

    def loss_fn(params: Any, tokens: ttnn.Tensor, targets: ttnn.Tensor) -> Any:
        total, ce, aux, routed, kept = model.loss(params, tokens, targets)
        return jnp.mean(total.value), (jnp.mean(ce.value), jnp.mean(aux.value), routed, kept)

    @jax.jit
    def step(params: Any, opt_state: Any, tokens: ttnn.Tensor, targets: ttnn.Tensor) -> Any:
        (loss, (ce, aux, routed, kept)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, tokens, targets
        )
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, Metrics(loss, ce, aux, routed, kept)

    return step


# ---------------------------------------------------------------------------------------------
# The single-device twin
# ---------------------------------------------------------------------------------------------


def _rms_norm(x: Any, w: Any) -> Any:
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + EPS) * w


def reference_loss(
    weights: dict[str, Any], tokens: Any, targets: Any, config: MoELMConfig
) -> tuple[Any, Metrics]:
    """The same loss on one device; ``tokens``/``targets`` [G, b, S] (G = data devices)."""
    g, b, s = tokens.shape
    hi = jax.lax.Precision.HIGHEST
    x = weights["embed"][tokens]  # [G, b, S, D]
    h = jnp.reshape(_rms_norm(x, weights["norm"]), (g, b * s, -1))
    moe = moe_reference(weights["moe"], h, config.moe)
    x = x + jnp.reshape(moe.out, x.shape)
    logits = jnp.einsum(
        "gbsd,dv->gbsv", _rms_norm(x, weights["norm_f"]), weights["head"], precision=hi
    )
    logp = jax.nn.log_softmax(logits, axis=-1)
    ce = -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))
    loss = ce + config.aux_loss_coef * moe.aux_loss
    return loss, Metrics(loss, ce, moe.aux_loss, moe.routed, moe.kept)


def make_reference_step(config: MoELMConfig, optimizer: Any) -> Callable[..., Any]:
    """The single-device training step: same loss, same optimizer, plain JAX."""

    @jax.jit
    def step(weights: Any, opt_state: Any, tokens: Any, targets: Any) -> Any:
        grads, metrics = jax.grad(reference_loss, has_aux=True)(weights, tokens, targets, config)
        updates, opt_state = optimizer.update(grads, opt_state, weights)
        return optax.apply_updates(weights, updates), opt_state, metrics

    return step


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


def corpus_bytes() -> np.ndarray:
    """The Python documentation's topic pages (stdlib ``pydoc_data.topics``) as byte tokens."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int32)


def batches(data: np.ndarray, batch: int, seq: int, seed: int = 0) -> Any:
    """An endless stream of ``(tokens, targets)`` [batch, seq] windows at random offsets."""
    rng = np.random.default_rng(seed)
    while True:
        starts = rng.integers(0, len(data) - seq - 1, batch)
        window = np.stack([data[s : s + seq + 1] for s in starts])
        yield window[:, :-1], window[:, 1:]


@dataclass(frozen=True)
class CorpusRun:
    """What :func:`train_on_corpus` saw: per step the losses and [groups, E] routed/kept counts."""

    cross_entropy: np.ndarray  # [steps]
    aux_loss: np.ndarray  # [steps]
    routed: np.ndarray  # [steps, groups, E]
    kept: np.ndarray  # [steps, groups, E]

    def spread(self, last: int = 20) -> float:
        """Coefficient of variation of tokens per expert over the ``last`` steps (0: balanced)."""
        load = self.routed[-last:].sum(axis=(0, 1)).astype(np.float64)
        return float(load.std() / load.mean())


def train_on_corpus(
    model: TtMoELM,
    steps: int,
    *,
    rows: int = 4,
    seq: int = 32,
    learning_rate: float = 1e-2,
    seed: int = 0,
) -> CorpusRun:
    """Train ``model`` from :func:`init_weights` on the pydoc corpus with AdamW; ``rows``
    sequences of ``seq`` bytes per data device and step."""
    optimizer = optax.adamw(learning_rate)
    params = model.weights_to_device(init_weights(model.config, seed))
    state = optimizer.init(params)
    step = make_train_step(model, optimizer)
    data = batches(corpus_bytes(), model.moe.groups * rows, seq, seed=seed + 1)
    ce, aux, routed, kept = [], [], [], []
    for _ in range(steps):
        tokens, targets = next(data)
        params, state, m = step(
            params, state, model.tokens_to_device(tokens), model.tokens_to_device(targets)
        )
        ce.append(float(m.cross_entropy))
        aux.append(float(m.aux_loss))
        routed.append(model.moe.per_group(m.routed)[:, 0])
        kept.append(model.moe.per_group(m.kept)[:, 0])
    return CorpusRun(np.array(ce), np.array(aux), np.stack(routed), np.stack(kept))


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------

PROG = "python -m models.moe.train"


def _positive(kind: type, name: str, value: Any) -> None:
    if value <= 0:
        raise ConfigError(
            f"{name} {value!r} must be a positive {kind.__name__}.\nfix: pass {name} "
            f"{kind(1) if kind is int else kind(0.01)} or more."
        )


def cli(argv: Sequence[str] | None = None) -> int:
    """Train the tiny MoE LM on the pydoc corpus and print its losses (errors raise)."""
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Train the tiny MoE language model (experts over one mesh axis) on the "
        "Python documentation text with optax AdamW.",
    )
    p.add_argument("--mesh", default="1x8", help="mesh RxC or a system name (default 1x8)")
    p.add_argument("--ep-axis", type=int, default=1, help="mesh axis the experts split over")
    p.add_argument("--steps", type=int, default=100, help="training steps (default 100)")
    p.add_argument("--aux", type=float, default=0.01, help="load-balancing loss coefficient")
    p.add_argument("--learning-rate", type=float, default=1e-2)
    p.add_argument("--rows", type=int, default=4, help="sequences per data device and step")
    p.add_argument("--seq", type=int, default=32, help="bytes per sequence")
    p.add_argument("--seed", type=int, default=0)
    add_debug_flag(p)
    args = p.parse_args(argv)
    for name, kind in (("--steps", int), ("--rows", int), ("--seq", int)):
        _positive(kind, name, getattr(args, name[2:]))
    _positive(float, "--learning-rate", args.learning_rate)
    if args.aux < 0:
        raise ConfigError(f"--aux {args.aux!r} is negative.\nfix: pass --aux 0 or more.")
    shape = ttnn.parse_mesh_shape(args.mesh)
    mesh = ttnn.open_mesh_device(shape)
    try:
        moe = MoEConfig(32, 64, 8, top_k=2)
        dims = ParallelDims.from_axes(tuple(shape), {"ep": args.ep_axis}, "--ep-axis")
        model = TtMoELM(MoELMConfig(moe, aux_loss_coef=args.aux), mesh, dims)
        run = train_on_corpus(
            model,
            args.steps,
            rows=args.rows,
            seq=args.seq,
            learning_rate=args.learning_rate,
            seed=args.seed,
        )
    finally:
        ttnn.close_mesh_device(mesh)
    last = min(20, args.steps)
    print(
        json.dumps(
            {
                "mesh": list(shape),
                "experts": moe.n_experts,
                "expert_groups": model.moe.ep,
                "data_groups": model.moe.groups,
                "steps": args.steps,
                "first_cross_entropy": float(run.cross_entropy[0]),
                "final_cross_entropy": float(np.mean(run.cross_entropy[-last:])),
                "final_aux_loss": float(np.mean(run.aux_loss[-last:])),
                "spread_of_tokens_per_expert": run.spread(last),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(run_cli(cli, None, PROG))
