"""TTML's modules (``ttml.modules``) as small functional layers: ``init`` on the host, ``specs``
for the mesh, ``__call__`` on one device's local parameters inside ``shard_map``.

The Megatron pair (``ColumnParallelLinear`` then ``RowParallelLinear``) costs one all-reduce
forward and one backward; ``VocabParallelEmbedding`` splits the vocabulary over TP and, with
``attend``, serves as the tied LM head whose logits stay split. Weights are ``[in, out]``
(``y = x @ W``). Parameters are created whole from the seed and then sharded, so every mesh
starts from the same values.

>>> fc = ColumnParallelLinear(64, 256)
>>> params = fc.init(jax.random.key(0))            # whole [64, 256] weight
>>> y = fc(local_params, x, par.tp)                # inside shard_map: [.., 256 / tp]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ttjax.errors import ConfigError
from ttjax.plan import LogicalAxes
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.ops.distributed import all_gather, all_reduce, broadcast, scatter

Params = dict[str, Any]


def _check_divisible(module: str, what: str, value: int, par: ParallelismContext) -> None:
    if par.tp_size > 1 and value % par.tp_size:
        raise ConfigError(
            f"{module}: {what} must be divisible by the TP size. {what} = {value}, "
            f"TP size = {par.tp_size}.\nfix: pick sizes that divide by {par.tp_size}, or a "
            "mesh whose TP axis divides them."
        )


def _linear_init(key: Any, n_in: int, n_out: int, std: float, has_bias: bool) -> Params:
    """Whole (unsharded) weights of a linear: ``N(0, std)`` [in, out] and a zero bias."""
    w = std * jax.random.normal(key, (n_in, n_out), jnp.float32)
    return {"weight": w, "bias": jnp.zeros((n_out,), jnp.float32)} if has_bias else {"weight": w}


@dataclass(frozen=True)
class ColumnParallelLinear:
    """``y = x @ W + b`` with ``W``'s output columns split over TP (TTML's ``ColumnParallelLinear``).

    The input enters through ``broadcast`` (its gradient is all-reduced); the output stays split
    unless ``gather_output``.
    """

    in_features: int
    out_features: int
    has_bias: bool = True
    gather_output: bool = False
    std: float = 0.02
    split: str = "mlp"  # the logical axis of the split dim: "mlp", "heads" or "kv_heads"

    def init(self, key: Any) -> Params:
        return _linear_init(key, self.in_features, self.out_features, self.std, self.has_bias)

    def axes(self) -> dict[str, LogicalAxes]:
        """Logical axes: ``(embed, <split>)``; the split output dim goes to TP by the rules."""
        axes = {"weight": LogicalAxes("embed", self.split), "bias": LogicalAxes(self.split)}
        return axes if self.has_bias else {"weight": axes["weight"]}

    def specs(self, par: ParallelismContext) -> Params:
        _check_divisible("ColumnParallelLinear", "Output features", self.out_features, par)
        return par.specs(self.axes())

    def __call__(self, params: Params, x: Any, tp: str | None) -> Any:
        y = broadcast(x, tp) @ params["weight"]
        if "bias" in params:
            y = y + params["bias"]
        return all_gather(y, -1, tp) if self.gather_output else y


@dataclass(frozen=True)
class RowParallelLinear:
    """``y = x @ W + b`` with ``W``'s input rows split over TP (TTML's ``RowParallelLinear``).

    Partial products are summed by ``all_reduce`` (identity backward); the bias is replicated and
    added once, after the sum. TTML's default ``input_is_parallel=False`` takes a whole
    (replicated) input and scatters it itself (backward: all_gather, so every device gets the
    whole input gradient); after a ``ColumnParallelLinear`` pass ``input_is_parallel=True``.
    """

    in_features: int
    out_features: int
    has_bias: bool = True
    input_is_parallel: bool = False
    std: float = 0.02
    split: str = "mlp"  # the logical axis of the split dim: "mlp" or "heads"

    def init(self, key: Any) -> Params:
        return _linear_init(key, self.in_features, self.out_features, self.std, self.has_bias)

    def axes(self) -> dict[str, LogicalAxes]:
        """Logical axes: ``(<split>, embed)``; the bias is added after the sum (``embed``)."""
        axes = {"weight": LogicalAxes(self.split, "embed"), "bias": LogicalAxes("embed")}
        return axes if self.has_bias else {"weight": axes["weight"]}

    def specs(self, par: ParallelismContext) -> Params:
        _check_divisible("RowParallelLinear", "Input features", self.in_features, par)
        return par.specs(self.axes())

    def __call__(self, params: Params, x: Any, tp: str | None) -> Any:
        if not self.input_is_parallel:
            x = scatter(x, -1, tp)
        y = all_reduce(x @ params["weight"], tp)
        if "bias" in params:
            y = y + params["bias"]
        return y


@dataclass(frozen=True)
class VocabParallelEmbedding:
    """Token embedding with the vocabulary (rows) split over TP; ``attend`` is the tied LM head.

    Each device looks up the ids it owns (zeros elsewhere) and one all-reduce sums the rows.
    """

    num_embeddings: int
    embedding_dim: int
    std: float = 0.02

    def init(self, key: Any) -> Params:
        shape = (self.num_embeddings, self.embedding_dim)
        return {"weight": self.std * jax.random.normal(key, shape, jnp.float32)}

    def axes(self) -> dict[str, LogicalAxes]:
        return {"weight": LogicalAxes("vocab", "embed")}

    def specs(self, par: ParallelismContext) -> Params:
        _check_divisible("VocabParallelEmbedding", "Vocabulary size", self.num_embeddings, par)
        return par.specs(self.axes())

    def __call__(self, params: Params, ids: Any, tp: str | None) -> Any:
        w = params["weight"]
        if tp is None:
            return jnp.take(w, ids, axis=0)
        local = ids - lax.axis_index(tp) * w.shape[0]
        inside = (local >= 0) & (local < w.shape[0])
        rows = jnp.take(w, jnp.clip(local, 0, w.shape[0] - 1), axis=0)
        return all_reduce(jnp.where(inside[..., None], rows, 0.0), tp)

    def attend(self, params: Params, h: Any, tp: str | None) -> Any:
        """Logits ``h @ W.T`` for this device's slice of the vocabulary (never gathered)."""
        return broadcast(h, tp) @ params["weight"].T


@dataclass(frozen=True)
class LayerNorm:
    """LayerNorm over the last dim with scale and bias (replicated on every device)."""

    dim: int
    eps: float = 1e-5

    def init(self, key: Any = None) -> Params:
        return {"scale": jnp.ones((self.dim,), jnp.float32), "bias": jnp.zeros((self.dim,))}

    def axes(self) -> dict[str, LogicalAxes]:
        return {"scale": LogicalAxes("norm"), "bias": LogicalAxes("norm")}

    def specs(self, par: ParallelismContext) -> Params:
        return par.specs(self.axes())

    def __call__(self, params: Params, x: Any) -> Any:
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean(jnp.square(x - mu), -1, keepdims=True)
        return (x - mu) * lax.rsqrt(var + self.eps) * params["scale"] + params["bias"]


@dataclass(frozen=True)
class RMSNorm:
    """RMSNorm over the last dim with a scale (TTML's ``gamma``), replicated."""

    dim: int
    eps: float = 1e-5

    def init(self, key: Any = None) -> Params:
        return {"gamma": jnp.ones((self.dim,), jnp.float32)}

    def axes(self) -> dict[str, LogicalAxes]:
        return {"gamma": LogicalAxes("norm")}

    def specs(self, par: ParallelismContext) -> Params:
        return par.specs(self.axes())

    def __call__(self, params: Params, x: Any) -> Any:
        ms = jnp.mean(jnp.square(x), -1, keepdims=True)
        return x * lax.rsqrt(ms + self.eps) * params["gamma"]


__all__ = [
    "ColumnParallelLinear",
    "LayerNorm",
    "RMSNorm",
    "RowParallelLinear",
    "VocabParallelEmbedding",
]
