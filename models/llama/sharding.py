"""How a Llama's weights and KV caches are laid out on the mesh, and loaded onto it.

Where each weight lies comes from its logical axes (``models/llama/axes.py``) under the model's
plan (:attr:`LlamaSharding.plan`: ``mode`` ``"tp"`` or ``"dp"`` over every device of the mesh):
column-parallel weights (QKV, gate, up, LM head) split on their output dim, row-parallel ones
(O, down) on their input dim, norms and rope tables replicated. Each layer's weights are described
by a :class:`WeightRecipe`; ``models.llama.model.TtLlama`` keeps only the computation.

>>> WeightRecipe(None, (64,), LogicalAxes("norm"), None)
WeightRecipe(value=None, shape=(64,), axes=LogicalAxes('norm'), dtype=None, matrix=False)
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

import ttjax as ttnn
from models.llama.axes import (
    HIDDEN_SHARDED_EMBEDDING_RULES,
    KV_CACHE_AXES,
    ROPE_AXES,
    in_out,
    weight_axes,
)
from models.llama.config import rope_tables
from models.llama.weights import expected_shapes
from ttjax.plan import LogicalAxes, ParallelDims

if TYPE_CHECKING:
    from models.llama.config import LlamaConfig


def _t(a: Any) -> Any:
    """torch/HF [out, in] -> TT-NN [in, out] (None stays None)."""
    return None if a is None else np.asarray(a).T


@lru_cache(maxsize=8)
def _layer_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Each decoder layer's weight shapes in the canonical dict, by name after ``model.layers.0.``."""
    prefix = "model.layers.0."
    return {k[len(prefix) :]: v for k, v in expected_shapes(config).items() if k.startswith(prefix)}


def _per_device_columns(*parts: np.ndarray) -> np.ndarray:
    """``[rows, tp, cols_i]`` pieces -> ``[rows, tp * sum(cols_i)]`` grouped per device
    (``[a_0 b_0 | a_1 b_1 | ...]``), so a width shard over ``tp`` devices hands device ``d`` its
    own columns of every piece side by side."""
    return np.concatenate(parts, axis=2).reshape(parts[0].shape[0], -1)


class WeightRecipe(NamedTuple):
    """One weight: its host value (None when abstract), shape, logical axes, dtype and role.

    ``shape=None`` marks a weight this architecture does not have; ``matrix`` marks a linear
    weight given as TT-NN's [in, out] (stored [out, in] with ``transpose_weights``).
    """

    value: Any
    shape: tuple[int, ...] | None
    axes: LogicalAxes | None
    dtype: Any
    matrix: bool = False

    @classmethod
    def absent(cls) -> WeightRecipe:
        return cls(None, None, None, None)


# Weights whose dtype ``TtLlama(weight_dtypes={name: dtype})`` may set apart from weight_dtype
# (tt_transformers' TensorGroups: WQKV, WO, FF1/FF3 = w_in/w_up/w_gate_up, FF2 = w_out, LM head).
WEIGHT_GROUPS = ("wqkv", "wo", "w_in", "w_up", "w_gate_up", "w_out", "lm_head")


class LlamaSharding:
    """Parameter and KV-cache placement for :class:`~models.llama.model.TtLlama` (a mixin)."""

    config: LlamaConfig
    mesh: Any
    mode: str
    batch: int
    dtype: Any
    weight_dtype: Any
    weight_dtypes: dict[str, Any]
    cache_dtype: Any
    max_seq_len: int
    abstract: bool
    vocab_parallel: bool
    vocab_start: Any
    scan_layers: bool
    transpose_weights: bool
    fuse_gate_up: bool
    tp: int
    dp: int
    q_heads: int
    kv_heads: int

    @property
    def plan(self) -> ParallelDims:
        """``mode`` (``"tp"`` or ``"dp"``) over every device of the mesh, in row-major order."""
        return ParallelDims((self.mesh.get_num_devices(),), (self.mode,))

    def _mapper(self, axes: LogicalAxes, plan: ParallelDims | None = None) -> Any:
        """The mesh mapper of a tensor with logical ``axes`` under ``plan`` (the model's)."""
        return ttnn.plan_mesh_mapper(self.mesh, plan or self.plan, axes)

    def _check_divisible(self) -> None:
        c = self.config
        problems = []
        if self.tp > 1:
            for name, value in (
                ("n_heads", c.n_heads),
                ("ffn_dim", c.ffn_dim),
                ("vocab_size", c.vocab_size),
            ):
                if value % self.tp:
                    problems.append(f"{name}={value} is not divisible by {self.tp} devices")
            if c.n_kv_heads % self.tp and self.tp % c.n_kv_heads:
                problems.append(
                    f"n_kv_heads={c.n_kv_heads} neither divides nor is divisible by {self.tp} devices"
                )
        if self.batch % self.dp:
            problems.append(
                f"batch={self.batch} is not divisible by {self.dp} data-parallel devices"
            )
        if problems:
            raise ttnn.errors.ShardingError(
                f"{c.name} in mode {self.mode!r} on {self.mesh!r}: " + "; ".join(problems) + ".\n"
                "fix: pick a mesh whose device count divides these, or use mode='dp'."
            )

    def _put(
        self,
        value: Any,
        shape: tuple[int, ...],
        axes: LogicalAxes,
        dtype: Any,
        matrix: bool = False,
        plan: ParallelDims | None = None,
    ) -> ttnn.Tensor:
        """Host array (or just its shape when abstract) -> device tensor, laid out by its logical
        ``axes`` under ``plan`` (the model's).

        ``matrix`` marks a linear weight given as TT-NN's [in, out]; with
        ``transpose_weights`` it is stored [out, in] instead (and used with ``transpose_b``).
        """
        mesh = self.mesh
        if matrix and self.transpose_weights:
            value = None if value is None else np.swapaxes(np.asarray(value), -1, -2)
            shape = (*shape[:-2], shape[-1], shape[-2])
            axes = in_out(axes)
        mapper = self._mapper(axes, plan)
        layout = ttnn.TILE_LAYOUT
        if self.abstract:
            return ttnn.abstract_tensor(
                shape, dtype, device=mesh, mesh_mapper=mapper, layout=layout
            )
        return ttnn.from_torch(
            np.asarray(value, np.float32),
            dtype=dtype,
            layout=layout,
            device=mesh,
            mesh_mapper=mapper,
        )

    def _load(self, w: dict[str, np.ndarray]) -> None:
        c, tp, ad = self.config, self.tp, self.dtype
        layer_norm = c.norm == "layer"

        def get(name: str) -> Any:
            return None if self.abstract else w[name]

        embed = get("model.embed_tokens.weight")
        head = embed if c.tie_word_embeddings else get("lm_head.weight")
        cos, sin = rope_tables(c, self.max_seq_len)
        # Vocab-parallel rows (the rule table's layout; all_reduce after a masked lookup), or
        # TT-NN's hidden-sharded table (all_gather after the lookup; replicated if dim does not
        # divide).
        embed_axes, embed_plan = weight_axes("model.embed_tokens.weight"), self.plan
        if not self.vocab_parallel:
            embed_plan = replace(self.plan, rules=HIDDEN_SHARDED_EMBEDDING_RULES)
            if c.dim % tp:
                embed_axes = LogicalAxes(None, None)
        head_axes = in_out(weight_axes("lm_head.weight"))
        norm_axes = weight_axes("model.norm.weight")
        self.params: dict[str, Any] = {
            "embed": self._put(embed, (c.vocab_size, c.dim), embed_axes, ad, plan=embed_plan),
            "lm_head": self._put(
                _t(head),
                (c.dim, c.vocab_size),
                head_axes,
                self.weight_dtypes.get("lm_head", self.weight_dtype),
                True,
            ),
            "norm": self._put(get("model.norm.weight"), (c.dim,), norm_axes, ad),
            "norm_bias": self._put(get("model.norm.bias"), (c.dim,), norm_axes, ad)
            if layer_norm
            else None,
            "cos": self._put(cos, cos.shape, ROPE_AXES, ad),
            "sin": self._put(sin, sin.shape, ROPE_AXES, ad),
        }
        if tp > 1:
            # Each device's first vocabulary row (embedding rows and LM-head columns alike); not a
            # parameter (nothing trains it), so it lives beside ``params``.
            self.vocab_start = ttnn.from_torch(
                np.arange(tp, dtype=np.uint32) * (c.vocab_size // tp),
                dtype=ttnn.uint32,
                device=self.mesh,
                mesh_mapper=self._mapper(LogicalAxes("vocab")),
            )
        specs = [self._layer_specs(w, i) for i in range(c.n_layers)]
        if self.scan_layers:
            # One stacked tensor per weight ([n_layers, ...] per device) for ttnn.scan.
            self.params["layers"] = {
                name: None
                if r.shape is None or r.axes is None
                else self._put(
                    None if self.abstract else np.stack([s[name].value for s in specs]),
                    (c.n_layers, *r.shape),
                    r.axes.prepend("layers"),
                    r.dtype,
                    r.matrix,
                )
                for name, r in specs[0].items()
            }
        else:
            self.params["layers"] = [
                {name: None if r.shape is None else self._put(*r) for name, r in s.items()}
                for s in specs
            ]

    def _layer_specs(self, w: dict[str, np.ndarray], i: int) -> dict[str, WeightRecipe]:
        """Layer ``i``'s weights as ``name -> WeightRecipe``.

        Each weight's logical axes are the canonical dict's (``axes.py``), as [in, out] for
        linears; a ``None`` shape marks a weight this architecture does not have.
        """
        c, tp, hd = self.config, self.tp, self.config.head_dim
        wd, ad = self.weight_dtype, self.dtype
        p = f"model.layers.{i}."
        layer_norm = c.norm == "layer"

        def get(name: str) -> Any:
            return None if self.abstract else w[p + name]

        qkv_cols = tp * (self.q_heads + 2 * self.kv_heads) * hd
        wqkv = None
        if not self.abstract:
            # Group columns per device, [q_0 k_0 v_0 | q_1 k_1 v_1 | ...], so a width shard gives
            # each device whole heads of q, k and v.
            q = _t(get("self_attn.q_proj.weight")).reshape(c.dim, tp, -1)
            k = self._kv_columns(_t(get("self_attn.k_proj.weight")))
            v = self._kv_columns(_t(get("self_attn.v_proj.weight")))
            wqkv = _per_device_columns(q, k, v)
        q_axes, kv_axes = (in_out(weight_axes(p + f"self_attn.{n}_proj.weight")) for n in "qk")
        if ttnn.shard_dims(self.plan, q_axes) != ttnn.shard_dims(self.plan, kv_axes):
            raise ttnn.errors.ShardingError(
                f"{c.name}: the fused QKV weight needs q ({q_axes!r}) and k/v ({kv_axes!r}) split "
                f"alike, but {self.plan!r} splits them differently.\n"
                "fix: map 'heads' and 'kv_heads' to the same roles in the rule table."
            )
        swiglu = c.mlp == "swiglu"
        none = WeightRecipe.absent()
        R = WeightRecipe
        fused = swiglu and self.fuse_gate_up
        gate_up = None
        if fused and not self.abstract:
            gate = _t(get("mlp.gate_proj.weight")).reshape(c.dim, tp, -1)
            up = _t(get("mlp.up_proj.weight")).reshape(c.dim, tp, -1)
            gate_up = _per_device_columns(gate, up)  # [gate_0 up_0 | gate_1 up_1 | ...]
        w_in = "mlp.gate_proj.weight" if swiglu else "mlp.dense_h_to_4h.weight"
        w_out = "mlp.down_proj.weight" if swiglu else "mlp.dense_4h_to_h.weight"

        def norm(name: str, present: bool = True) -> WeightRecipe:
            return R(get(name), (c.dim,), weight_axes(p + name), ad) if present else none

        def linear(
            name: str, value: Any = None, shape: tuple[int, ...] | None = None, group: str = ""
        ) -> WeightRecipe:
            """A linear as TT-NN's [in, out] (``value`` / ``shape`` for a fused one)."""
            axes = in_out(weight_axes(p + name))
            if shape is None:
                value, shape = _t(get(name)), _layer_shapes(c)[name][::-1]
            return R(value, shape, axes, self.weight_dtypes.get(group, wd), True)

        specs: dict[str, WeightRecipe] = {
            "attn_norm": norm("input_layernorm.weight"),
            "attn_norm_bias": norm("input_layernorm.bias", layer_norm),
            "wqkv": linear("self_attn.q_proj.weight", wqkv, (c.dim, qkv_cols), "wqkv"),
            "wo": linear("self_attn.o_proj.weight", group="wo"),
            "mlp_norm": norm("post_attention_layernorm.weight", not c.parallel_block),
            "mlp_norm_bias": norm(
                "post_attention_layernorm.bias", layer_norm and not c.parallel_block
            ),
            "w_in": none if fused else linear(w_in, group="w_in"),
            "w_up": linear("mlp.up_proj.weight", group="w_up") if swiglu and not fused else none,
            "w_gate_up": linear(
                "mlp.gate_proj.weight", gate_up, (c.dim, 2 * c.ffn_dim), "w_gate_up"
            )
            if fused
            else none,
            "w_out": linear(w_out, group="w_out"),
        }
        return specs

    def _kv_columns(self, w: np.ndarray) -> np.ndarray:
        """[dim, n_kv_heads * hd] -> [dim, tp, local kv heads * hd] (KV heads replicated if needed)."""
        c = self.config
        heads = w.reshape(c.dim, c.n_kv_heads, c.head_dim)
        owner = np.arange(self.tp) * c.n_kv_heads // self.tp  # first KV head of each device
        cols = [heads[:, o : o + self.kv_heads] for o in owner]
        return np.stack(cols, axis=1).reshape(c.dim, self.tp, self.kv_heads * c.head_dim)

    def _new_cache(self, layers: tuple[int, ...] = ()) -> list[ttnn.Tensor]:
        """Zeroed K and V caches [*layers, B, kv heads, max_seq_len, hd] per device.

        The KV heads (TP) or the users (DP) differ per device, so the cache is sharded on that
        dim from the start; its per-device shape is what TT-NN allocates.
        """
        c = self.config
        shape = [*layers, self.batch // self.dp, self.kv_heads, self.max_seq_len, c.head_dim]
        n = self.mesh.get_num_devices()
        mapper = None
        if n > 1:
            axes = KV_CACHE_AXES.prepend(*("layers" for _ in layers))
            (dim,) = (d for d in ttnn.shard_dims(self.plan, axes) if d is not None)
            shape[dim] *= n
            mapper = self._mapper(axes)
        if self.abstract:
            make = lambda: ttnn.abstract_tensor(  # noqa: E731
                shape,
                self.cache_dtype,
                device=self.mesh,
                mesh_mapper=mapper,
                layout=ttnn.TILE_LAYOUT,
            )
        else:
            zeros = np.zeros(shape, np.float32)
            make = lambda: ttnn.from_torch(  # noqa: E731
                zeros,
                dtype=self.cache_dtype,
                layout=ttnn.TILE_LAYOUT,
                device=self.mesh,
                mesh_mapper=mapper,
            )
        return [make(), make()]

    def reset_cache(self) -> None:
        """Fresh zeroed KV caches (a list of [K, V] per layer, or one stacked [K, V] with scan)."""
        if self.scan_layers:
            self.caches: Any = self._new_cache((self.config.n_layers,))
        else:
            self.caches = [self._new_cache() for _ in range(self.config.n_layers)]


__all__ = ["WEIGHT_GROUPS", "LlamaSharding", "WeightRecipe"]
