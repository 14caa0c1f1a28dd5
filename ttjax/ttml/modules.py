"""TTML's modules (``ttml.modules``) as small functional layers: ``init`` on the host, ``specs``
for the mesh, ``__call__`` on one device's local parameters inside ``shard_map``.

No module takes a mesh axis: inside the step the role-named mesh is the plan
(:meth:`ttjax.plan.ParallelDims.current`), and each module applies the strategies that split it.
Outside ``shard_map`` (or on a mesh without those roles) nothing splits, so the same model code
runs whole on one device.

The Megatron pair (``ColumnParallelLinear`` then ``RowParallelLinear``) costs one all-reduce
forward and one backward; ``VocabParallelEmbedding`` splits the vocabulary over TP and, with
``attend``, serves as the tied LM head whose logits stay split. These linear layers are the only
place TP's collectives are issued. Weights are ``[in, out]`` (``y = x @ W``). Parameters are
created whole from the seed and then sharded, so every mesh starts from the same values.

The strategy hooks a transformer composes: :class:`Attention` (causal, GQA, a RoPE hook; ring
attention when ``cp`` splits the sequence), :class:`Positions` (each token's global position,
CP's load-balanced order) and :class:`Stack` (blocks stacked under ``lax.scan``, a remat policy,
FSDP's per-block gather from the layers' logical axes).

>>> fc = ColumnParallelLinear(64, 256)
>>> params = fc.init(jax.random.key(0))            # whole [64, 256] weight
>>> y = fc(local_params, x)                        # inside shard_map: [.., 256 / tp]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import jax
import jax.numpy as jnp
from jax import lax

from ttjax.errors import ConfigError
from ttjax.plan import LogicalAxes, ParallelDims, is_logical
from ttjax.ttml import sp
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.ops.distributed import all_gather, all_reduce, broadcast
from ttjax.ttml.ops.ring_attention import local_positions, ring_attention
from ttjax.ttml.stacked import RUNNER_REMAT, check_remat_policy, scan_blocks, stack_blocks

Params = dict[str, Any]


def _tp() -> str | None:
    """The TP mesh axis of the step being traced (None: TP does not split here)."""
    return ParallelDims.current().name("tp")


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

    def __call__(self, params: Params, x: Any) -> Any:
        tp = _tp()
        y = sp.column_input(x, tp) @ params["weight"]
        if "bias" in params:
            y = y + params["bias"]
        if self.gather_output:
            sp.refuse_gathered_output("ColumnParallelLinear")
            return all_gather(y, -1, tp)
        return sp.column_output(y)


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

    def __call__(self, params: Params, x: Any) -> Any:
        tp = _tp()
        x = sp.row_input(x, tp, self.input_is_parallel)
        y = sp.row_output(x @ params["weight"], tp)
        if "bias" in params:
            y = y + sp.shared(params["bias"])
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

    def __call__(self, params: Params, ids: Any) -> Any:
        w, tp = params["weight"], _tp()
        if tp is None:
            return jnp.take(w, ids, axis=0)
        local = ids - lax.axis_index(tp) * w.shape[0]
        inside = (local >= 0) & (local < w.shape[0])
        rows = jnp.take(w, jnp.clip(local, 0, w.shape[0] - 1), axis=0)
        return all_reduce(jnp.where(inside[..., None], rows, 0.0), tp)

    def attend(self, params: Params, h: Any) -> Any:
        """Logits ``h @ W.T`` for this device's slice of the vocabulary (never gathered)."""
        return broadcast(h, _tp()) @ params["weight"].T


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
        params = sp.shared(params)  # under SP each device normalises its own tokens
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
        params = sp.shared(params)  # under SP each device normalises its own tokens
        ms = jnp.mean(jnp.square(x), -1, keepdims=True)
        return x * lax.rsqrt(ms + self.eps) * params["gamma"]


Rope = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Positions:
    """The global position of each of this device's tokens (int32 ``[t_local]``).

    On one device (or when ``cp`` does not split) ``arange(t_local)``; when it does, the two
    load-balanced chunks of ``ttjax.ttml.cp`` (device ``i`` holds chunks ``i`` and
    ``2*cp-1-i``). What learned position embeddings and RoPE read.

    >>> Positions()(4).tolist()                      # outside shard_map: nothing splits
    [0, 1, 2, 3]
    """

    def __call__(self, t_local: int) -> Any:
        return local_positions(t_local, ParallelDims.current().name("cp"))

    def length(self, t_local: int) -> int:
        """The whole sequence's length: ``t_local`` times the cp size."""
        return t_local * ParallelDims.current().size("cp")

    def rows(self, table: Any, t_local: int) -> Any:
        """``table[positions]``: the rows (e.g. learned position embeddings) of this device's
        tokens; a plain slice when ``cp`` does not split."""
        if ParallelDims.current().name("cp") is None:
            return table[:t_local]
        return jnp.asarray(table)[self(t_local)]


@dataclass(frozen=True)
class Attention:
    """Attention of ``q`` ``[B, T, H, D]`` over ``k``, ``v`` ``[B, T, KV, D]`` (GQA: KV divides H),
    returning ``[B, T, H * D]``; causal by default.

    ``rope(x, positions)`` (a hook, e.g. Llama's rotate-half RoPE) rotates ``q`` and ``k`` at
    their global :class:`Positions` first. When the plan's ``cp`` splits the sequence the keys
    and values travel round the cp ring (``ring_attention``, load-balanced); otherwise
    ``jax.nn.dot_product_attention`` (``implementation``: None, ``"xla"`` or ``"cudnn"``).

    >>> y = Attention()(q, k, v)                 # [B, T, H * D], inside shard_map or not
    """

    causal: bool = True
    rope: Rope | None = None
    implementation: Literal["xla", "cudnn"] | None = None
    scale: float | None = None

    def __call__(self, q: Any, k: Any, v: Any) -> Any:
        q, k, v = sp.heads(q, k, v)  # SP: the whole sequence, unfolded
        B, T, H, D = q.shape
        if self.rope is not None:
            pos = Positions()(T)
            q, k = self.rope(q, pos), self.rope(k, pos)
        scale = D**-0.5 if self.scale is None else self.scale
        cp = ParallelDims.current().name("cp")
        if cp is not None:
            y = ring_attention(q, k, v, cp, causal=self.causal, scale=scale)
        else:
            y = jax.nn.dot_product_attention(
                q, k, v, scale=scale, is_causal=self.causal, implementation=self.implementation
            )
        return sp.merged(y.reshape(B, T, H * D))


def layer_axes(layers: Mapping[str, Any]) -> dict[str, Any]:
    """The logical axes of a block's parameters: each module's own ``axes()``, by name."""
    return {name: layer.axes() for name, layer in layers.items()}


@dataclass(frozen=True, eq=False)  # hashed by identity (``layers`` is a dict): jax.jit(stack)
class Stack:
    """Blocks stacked on a leading ``[n_layer]`` axis, run as one traced ``block`` under
    ``lax.scan`` (``ttjax.ttml.stacked``), each inside ``jax.checkpoint`` by ``remat_policy``.

    ``layers`` are the block's modules: their logical axes say how each block parameter is
    sharded, so when the plan's ``fsdp`` splits, each block is all-gathered where it runs (and
    again in the backward pass under remat), one block whole at a time (ZeRO-3); the gather's
    transpose reduce-scatters its gradient.

    >>> x = Stack(block, block.layers, "full")(params["blocks"], x)
    """

    block: Callable[[Params, Any], Any]
    layers: Mapping[str, Any]
    remat_policy: str = "full"

    def __post_init__(self) -> None:
        check_remat_policy("Stack", self.remat_policy)

    def block_axes(self) -> dict[str, Any]:
        """One block's logical axes."""
        return layer_axes(self.layers)

    def axes(self) -> dict[str, Any]:
        """The stacked blocks' logical axes: each block's, led by ``"layers"``."""
        return jax.tree.map(lambda a: a.prepend("layers"), self.block_axes(), is_leaf=is_logical)

    def __call__(self, stacked: Params, x: Any) -> Any:
        dims = ParallelDims.current()
        logical = self.block_axes()
        gather = (lambda p: dims.gather(p, logical)) if dims.active("fsdp") else None
        return sp.over_blocks(
            lambda h: scan_blocks(self.block, stacked, h, self.remat_policy, gather), x, dims
        )


__all__ = [
    "RUNNER_REMAT",
    "Attention",
    "ColumnParallelLinear",
    "LayerNorm",
    "Positions",
    "RMSNorm",
    "RowParallelLinear",
    "Stack",
    "VocabParallelEmbedding",
    "check_remat_policy",
    "layer_axes",
    "stack_blocks",
]
