"""A mixture-of-experts SwiGLU layer written with ttjax ops, experts split over an ``ep`` mesh axis.

Every device routes its own tokens (one GShard *group* per device) and talks to the devices of its
expert-parallel group through exactly two collectives, TT-NN style::

    x [T, D] --router--> top-k experts, capacity slots --dispatch [T, E, C]-->
    expert inputs [E, C, D] --all_to_all(ep)--> [E/ep, ep*C, D] (this device's experts, all senders)
    --SwiGLU experts--> [E/ep, ep*C, D] --all_to_all(ep)--> [E, C, D] --combine--> y [T, D]

Tokens are sharded over every mesh axis except ``tp_axis``; the other axis of a 2-D mesh is data
parallel (2x4: experts over the 4 columns, data over the 2 rows). With ``tp_axis`` each expert's
FFN is also split Megatron-style over that axis and one ``all_reduce`` over it ends the layer
(8x4: 8 expert groups, TP 4 inside each). Choices over an expert's capacity are dropped and
counted (Switch/GShard); Switch's load-balancing loss is returned on request.

>>> layer = MoELayer(MoEConfig(dim=64, ffn_dim=128, n_experts=8), mesh, ep_axis=1)
>>> params = layer.weights_to_device(random_moe_weights(layer.config))
>>> y = layer(params, layer.tokens_to_device(x)).out
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

import ttjax as ttnn
from models.moe.config import MoEConfig
from ttjax.errors import ConfigError, ShardingError

WEIGHT_NAMES = ("router", "w_gate", "w_up", "w_down")


class MoEParams(NamedTuple):
    """The layer's device tensors (a pytree; TT-NN's ``[in, out]`` orientation).

    ``router`` [dim, E] is replicated; ``w_gate``/``w_up`` [E, dim, ffn] and ``w_down``
    [E, ffn, dim] are split on the expert dim over ``ep`` (and on ffn over ``tp``).
    """

    router: ttnn.Tensor
    w_gate: ttnn.Tensor
    w_up: ttnn.Tensor
    w_down: ttnn.Tensor


class MoEOutput(NamedTuple):
    """What one MoE layer returns (a pytree, so a jitted step can return it).

    ``routed`` and ``kept`` are per device ``[1, E]``: how many of this device's token choices
    went to each expert, and how many of those fitted its capacity (``routed - kept`` dropped).
    ``kept_mask`` [T, E] is 1 where token t's choice of expert e fitted. ``aux_loss`` is Switch's
    ``E * sum_e f_e * P_e`` over all tokens ([1, 1], replicated), or None when not asked for.
    """

    out: ttnn.Tensor
    routed: ttnn.Tensor
    kept: ttnn.Tensor
    kept_mask: ttnn.Tensor
    aux_loss: ttnn.Tensor | None


def random_moe_weights(config: MoEConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic float32 weights ``{router [D, E], w_gate/w_up [E, D, F], w_down [E, F, D]}``.

    The router is scaled up (N(0, 1)) so that routing is decisive and top-k choices differ.
    """
    rng = np.random.default_rng(seed)
    d, f, e = config.dim, config.ffn_dim, config.n_experts

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    return {
        "router": normal((d, e), 1.0 / np.sqrt(d) * 4),
        "w_gate": normal((e, d, f), 1.0 / np.sqrt(d)),
        "w_up": normal((e, d, f), 1.0 / np.sqrt(d)),
        "w_down": normal((e, f, d), 1.0 / np.sqrt(f)),
    }


def _cast(t: ttnn.Tensor, dtype: ttnn.DataType) -> ttnn.Tensor:
    return t if t.dtype == dtype else ttnn.typecast(t, dtype)


@dataclass(frozen=True)
class ExpertParallel:
    """How the layer lies on a 2-D mesh: experts over ``ep_axis``, each expert's FFN over
    ``tp_axis`` (or None), tokens over every axis but ``tp_axis``.

    >>> ExpertParallel(ep_axis=0, tp_axis=1)     # 8x4 Galaxy: 8 expert groups, TP 4 inside each
    """

    ep_axis: int = 1
    tp_axis: int | None = None


class MoELayer:
    """One MoE feed-forward layer on ``mesh``; ``layer(params, x)`` runs it on each device's tokens.

    >>> layer = MoELayer(config, mesh, ep_axis=1)             # 1x8 or 2x4 (data over the rows)
    >>> layer = MoELayer(config, galaxy, ep_axis=0, tp_axis=1)  # 8x4: TP inside each expert group
    """

    def __init__(
        self,
        config: MoEConfig,
        mesh_device: ttnn.MeshDevice,
        *,
        ep_axis: int = 1,
        tp_axis: int | None = None,
        dtype: ttnn.DataType = ttnn.float32,
    ) -> None:
        self.config = config
        self.mesh = mesh_device
        self.dtype = dtype
        shape = tuple(mesh_device.shape)
        rank = len(shape)
        for name, axis in (("ep_axis", ep_axis), ("tp_axis", tp_axis)):
            if axis is None and name == "tp_axis":
                continue
            if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < rank:
                raise ConfigError(
                    f"MoELayer: {name}={axis!r} is not an axis of the {mesh_device.shape!r} mesh.\n"
                    f"fix: an int in [0, {rank - 1}]."
                )
        if tp_axis == ep_axis:
            raise ConfigError(
                f"MoELayer: tp_axis={tp_axis} is the expert axis too.\n"
                "fix: put tensor parallelism on the other mesh axis, or tp_axis=None."
            )
        self.layout = ExpertParallel(ep_axis, tp_axis)
        self.ep = shape[ep_axis]
        self.tp = 1 if tp_axis is None else shape[tp_axis]
        self.data_axes = tuple(a for a in range(rank) if a != tp_axis)
        self.groups = int(np.prod([shape[a] for a in self.data_axes]))
        if config.n_experts % self.ep:
            raise ShardingError(
                f"MoELayer: n_experts={config.n_experts} is not divisible by the expert-parallel "
                f"size {self.ep} (mesh axis {ep_axis} of {mesh_device.shape!r}).\n"
                f"fix: use a multiple of {self.ep} experts, or put the experts on an axis whose "
                f"size divides {config.n_experts}."
            )
        if config.ffn_dim % self.tp:
            raise ShardingError(
                f"MoELayer: ffn_dim={config.ffn_dim} is not divisible by the tensor-parallel size "
                f"{self.tp} (mesh axis {tp_axis} of {mesh_device.shape!r}).\n"
                f"fix: use an ffn_dim that is a multiple of {self.tp}, or tp_axis=None."
            )
        self.local_experts = config.n_experts // self.ep

    # ------------------------------------------------------------------------------------------
    # Placement
    # ------------------------------------------------------------------------------------------

    def _mapper(self, dims_by_axis: dict[int, int]) -> Any:
        """Shard tensor dim ``dims_by_axis[a]`` over mesh axis ``a``; replicate over the others."""
        shape = tuple(self.mesh.shape)
        dims = [dims_by_axis.get(a) for a in range(len(shape))]
        if all(d is None for d in dims):
            return ttnn.ReplicateTensorToMesh(self.mesh)
        return ttnn.ShardTensor2dMesh(self.mesh, mesh_shape=shape, dims=dims)

    def _weight_mappers(self) -> dict[str, Any]:
        ep, tp = self.layout.ep_axis, self.layout.tp_axis
        col = {ep: 0} if tp is None else {ep: 0, tp: 2}  # [E, D, F]: F split over tp
        row = {ep: 0} if tp is None else {ep: 0, tp: 1}  # [E, F, D]: F split over tp
        return {
            "router": ttnn.ReplicateTensorToMesh(self.mesh),
            "w_gate": self._mapper(col),
            "w_up": self._mapper(col),
            "w_down": self._mapper(row),
        }

    def weights_to_device(self, weights: dict[str, np.ndarray]) -> MoEParams:
        """Host weights (``random_moe_weights`` layout) -> device tensors placed for EP (+ TP)."""
        c = self.config
        want = {
            "router": (c.dim, c.n_experts),
            "w_gate": (c.n_experts, c.dim, c.ffn_dim),
            "w_up": (c.n_experts, c.dim, c.ffn_dim),
            "w_down": (c.n_experts, c.ffn_dim, c.dim),
        }
        for name, shape in want.items():
            got = None if name not in weights else tuple(np.shape(weights[name]))
            if got != shape:
                raise ConfigError(
                    f"MoELayer.weights_to_device: {name} has shape {got}, expected {shape} for "
                    f"{c}.\nfix: pass router [dim, E], w_gate/w_up [E, dim, ffn], w_down [E, ffn, dim]."
                )
        mappers = self._weight_mappers()
        return MoEParams(
            *(
                ttnn.from_torch(
                    np.asarray(weights[n], np.float32),
                    dtype=self.dtype,
                    layout=ttnn.TILE_LAYOUT,
                    device=self.mesh,
                    mesh_mapper=mappers[n],
                )
                for n in WEIGHT_NAMES
            )
        )

    def abstract_tokens(self, tokens: int) -> ttnn.Tensor:
        """Shape-only activations: ``tokens`` per data device ([groups * tokens, dim] in all)."""
        return ttnn.abstract_tensor(
            (self.groups * tokens, self.config.dim),
            self.dtype,
            device=self.mesh,
            mesh_mapper=self.token_mapper(0),
            layout=ttnn.TILE_LAYOUT,
        )

    def abstract_params(self) -> MoEParams:
        """Shape-only parameters (for ``ttjax.inspect`` of a full-size layer without weights)."""
        c = self.config
        shapes = {
            "router": (c.dim, c.n_experts),
            "w_gate": (c.n_experts, c.dim, c.ffn_dim),
            "w_up": (c.n_experts, c.dim, c.ffn_dim),
            "w_down": (c.n_experts, c.ffn_dim, c.dim),
        }
        mappers = self._weight_mappers()
        return MoEParams(
            *(
                ttnn.abstract_tensor(
                    shapes[n],
                    self.dtype,
                    device=self.mesh,
                    mesh_mapper=mappers[n],
                    layout=ttnn.TILE_LAYOUT,
                )
                for n in WEIGHT_NAMES
            )
        )

    def token_mapper(self, dim: int = 0) -> Any:
        """Split tensor dim ``dim`` over the data axes in row-major device order (group order)."""
        if self.layout.tp_axis is None:
            return ttnn.ShardTensorToMesh(self.mesh, dim=dim)
        return self._mapper({a: dim for a in self.data_axes})

    def tokens_to_device(self, x: np.ndarray) -> ttnn.Tensor:
        """Host activations [tokens, dim] (or [batch, ..., dim]) -> one group per data device."""
        x = np.asarray(x, np.float32)
        if x.shape[0] % self.groups:
            raise ShardingError(
                f"MoELayer.tokens_to_device: {x.shape[0]} rows (shape {list(x.shape)}) do not split "
                f"over {self.groups} data-parallel devices.\nfix: use a multiple of {self.groups}."
            )
        return ttnn.from_torch(
            x,
            dtype=self.dtype,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh,
            mesh_mapper=self.token_mapper(0),
        )

    def per_device(self, t: ttnn.Tensor) -> np.ndarray:
        """A per-device tensor -> host ``[rows, cols, *shape]`` in mesh order (stats, outputs)."""
        parts = [ttnn.to_numpy(d) for d in ttnn.get_device_tensors(t)]
        return np.stack(parts).reshape(*self.mesh.shape, *parts[0].shape)

    def group_coords(self) -> list[tuple[int, ...]]:
        """The mesh coordinate of each token group's device, in group order (first TP copy)."""
        shape = tuple(self.mesh.shape)
        data = [shape[a] for a in self.data_axes]
        coords = []
        for g in range(self.groups):
            c = [0] * len(shape)
            for a, i in zip(self.data_axes, np.unravel_index(g, data)):
                c[a] = int(i)
            coords.append(tuple(c))
        return coords

    def expert_owner(self, expert: int) -> int:
        """The index along ``ep_axis`` of the devices that hold ``expert``."""
        return expert // self.local_experts

    def per_group(self, t: ttnn.Tensor) -> np.ndarray:
        """A tensor with one block per data device -> host ``[groups, *shape]`` in group order
        (the first copy along ``tp_axis``, where every copy is the same)."""
        per = self.per_device(t)
        if self.layout.tp_axis is not None:
            per = np.take(per, 0, axis=self.layout.tp_axis)
        return per.reshape(self.groups, *per.shape[len(self.data_axes) :])

    # ------------------------------------------------------------------------------------------
    # Forward
    # ------------------------------------------------------------------------------------------

    def route(self, router: ttnn.Tensor, x: ttnn.Tensor) -> tuple[Any, ...]:
        """Top-k routing of this device's tokens ``x`` [T, D] with capacity.

        Returns ``(probs [T, E], choices)`` where each choice (first, second, ...) is
        ``(onehot [T, E], gate [T, 1], kept [T, E], slot [T, C])``: the chosen expert, its gate
        weight, whether the choice fits its capacity, and the slot it takes in the expert.
        """
        c, mesh = self.config, self.mesh
        t = x.shape[0]
        cap = c.capacity(t)
        f32 = ttnn.float32
        probs = ttnn.softmax(_cast(ttnn.linear(x, router), f32), dim=-1)  # [T, E]
        expert_ids = ttnn.reshape(ttnn.arange(0, c.n_experts, 1, f32, device=mesh), (1, -1))
        token_ids = ttnn.arange(0, t, 1, f32, device=mesh)
        # Inclusive prefix sums along tokens as one matmul with a lower-triangular ones matrix.
        lower = ttnn.ge(ttnn.reshape(token_ids, (t, 1)), ttnn.reshape(token_ids, (1, t)))
        slot_ids = ttnn.reshape(ttnn.arange(0, cap, 1, f32, device=mesh), (1, cap))
        remaining = probs
        taken: ttnn.Tensor | None = None  # slots already claimed per expert [1, E]
        picks = []
        for _ in range(c.top_k):
            idx = ttnn.typecast(ttnn.argmax(remaining, dim=-1, keepdim=True), f32)  # [T, 1]
            onehot = ttnn.eq(idx, expert_ids)  # [T, E]
            gate = ttnn.sum(ttnn.multiply(probs, onehot), dim=-1, keepdim=True)  # [T, 1]
            remaining = ttnn.where(onehot, -1.0, remaining)
            # Slot of each choice in its expert: earlier tokens first, earlier rounds first.
            fill = ttnn.matmul(lower, onehot)  # [T, E]: this token's rank (1-based) per expert
            if taken is not None:
                fill = ttnn.add(fill, taken)
            pos = ttnn.subtract(ttnn.sum(ttnn.multiply(fill, onehot), dim=-1, keepdim=True), 1.0)
            kept = ttnn.multiply(onehot, ttnn.lt(pos, float(cap)))  # [T, E]
            slot = ttnn.eq(pos, slot_ids)  # [T, C]; all zero when over capacity
            count = ttnn.sum(onehot, dim=0, keepdim=True)
            taken = count if taken is None else ttnn.add(taken, count)
            picks.append((onehot, gate, kept, slot))
        if c.normalize_gates and c.top_k > 1:
            total = picks[0][1]
            for p in picks[1:]:
                total = ttnn.add(total, p[1])
            picks = [(o, ttnn.divide(g, total), k, s) for o, g, k, s in picks]
        return probs, picks

    def __call__(self, params: MoEParams, x: ttnn.Tensor, *, aux_loss: bool = False) -> MoEOutput:
        """The layer on each device's tokens ``x`` [..., dim] (tokens split over the data axes)."""
        c = self.config
        shape = tuple(x.shape)
        if shape[-1] != c.dim:
            raise ConfigError(
                f"MoELayer: input per-device shape {list(shape)} does not end in dim={c.dim}.\n"
                "fix: pass activations [..., dim] (dim as in the MoEConfig)."
            )
        t = int(np.prod(shape[:-1]))
        cap = c.capacity(t)
        e, d = c.n_experts, c.dim
        x2 = ttnn.reshape(x, (t, d))
        probs, picks = self.route(params.router, x2)

        # dispatch[t, e, s] = 1 if token t sits in slot s of expert e; combine adds its gate.
        dispatch = combine = None
        for _, gate, kept, slot in picks:
            mask = ttnn.multiply(ttnn.reshape(kept, (t, e, 1)), ttnn.reshape(slot, (t, 1, cap)))
            weighted = ttnn.multiply(mask, ttnn.reshape(gate, (t, 1, 1)))
            dispatch = mask if dispatch is None else ttnn.add(dispatch, mask)
            combine = weighted if combine is None else ttnn.add(combine, weighted)
        assert dispatch is not None and combine is not None
        # Routing runs in float32; the token traffic stays in the activations' dtype.
        dispatch = _cast(ttnn.reshape(dispatch, (t, e * cap)), x.dtype)
        combine = _cast(ttnn.reshape(combine, (t, e * cap)), x.dtype)

        # [E*C, D] -> every device sends expert block i to device i of its ep group.
        expert_in = ttnn.reshape(ttnn.matmul(dispatch, x2, transpose_a=True), (e, cap, d))
        ep_axis = self.layout.ep_axis
        expert_in = ttnn.all_to_all(expert_in, in_dim=1, out_dim=0, cluster_axis=ep_axis)
        h = ttnn.multiply(
            ttnn.matmul(expert_in, params.w_gate, activation="silu"),
            ttnn.matmul(expert_in, params.w_up),
        )
        expert_out = ttnn.matmul(h, params.w_down)  # [E/ep, ep*C, D] (partial sums under TP)
        # Back to the senders: slot block j of every local expert returns to device j.
        expert_out = ttnn.all_to_all(expert_out, in_dim=0, out_dim=1, cluster_axis=ep_axis)
        y = ttnn.matmul(combine, ttnn.reshape(expert_out, (e * cap, d)))  # [T, D]
        if self.tp > 1:
            y = ttnn.all_reduce(y, cluster_axis=self.layout.tp_axis)
        y = ttnn.reshape(y, shape)

        routed = kept_mask = None
        for onehot, _, kept, _ in picks:
            r = ttnn.sum(onehot, dim=0, keepdim=True)
            routed = r if routed is None else ttnn.add(routed, r)
            kept_mask = kept if kept_mask is None else ttnn.add(kept_mask, kept)
        assert routed is not None and kept_mask is not None
        kept_count = ttnn.sum(kept_mask, dim=0, keepdim=True)
        loss = self._aux_loss(probs, routed, t) if aux_loss else None
        return MoEOutput(y, routed, kept_count, kept_mask, loss)

    def _aux_loss(self, probs: ttnn.Tensor, routed: ttnn.Tensor, t: int) -> ttnn.Tensor:
        """Switch's load-balancing loss ``E * sum_e f_e P_e`` over every token of the mesh.

        ``f_e`` is the share of token choices that picked expert e (summed over the top-k rounds,
        as in Hugging Face's Mixtral) and ``P_e`` the mean router probability of e; both are sums
        over the data axes, one small ``all_reduce`` of [2, E].
        """
        e = self.config.n_experts
        stats = ttnn.concat([routed, ttnn.sum(probs, dim=0, keepdim=True)], dim=0)  # [2, E]
        if self.groups > 1:
            axis = None if len(self.data_axes) == len(self.mesh.shape) else self.data_axes[0]
            stats = ttnn.all_reduce(stats, cluster_axis=axis)
        total = float(t * self.groups)
        f = ttnn.multiply(stats[0:1, :], 1.0 / total)
        p = ttnn.multiply(stats[1:2, :], 1.0 / total)
        return ttnn.multiply(ttnn.sum(ttnn.multiply(f, p), dim=-1, keepdim=True), float(e))
