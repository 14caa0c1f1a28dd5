"""How a Llama's weights and KV caches are laid out on the mesh, and loaded onto it.

Column-parallel weights (QKV, gate, up, LM head) are sharded on their output dim and row-parallel
ones (O, down) on their input dim; norms and rope tables are replicated. Each layer's weights are
described by a :class:`WeightRecipe`; ``models.llama.model.TtLlama`` keeps only the computation.

>>> WeightRecipe(None, (64,), None, None)
WeightRecipe(value=None, shape=(64,), shard_dim=None, dtype=None, matrix=False)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

import ttjax as ttnn
from models.llama.config import rope_tables

if TYPE_CHECKING:
    from models.llama.config import LlamaConfig


def _t(a: Any) -> Any:
    """torch/HF [out, in] -> TT-NN [in, out] (None stays None)."""
    return None if a is None else np.asarray(a).T


def _per_device_columns(*parts: np.ndarray) -> np.ndarray:
    """``[rows, tp, cols_i]`` pieces -> ``[rows, tp * sum(cols_i)]`` grouped per device
    (``[a_0 b_0 | a_1 b_1 | ...]``), so a width shard over ``tp`` devices hands device ``d`` its
    own columns of every piece side by side."""
    return np.concatenate(parts, axis=2).reshape(parts[0].shape[0], -1)


class WeightRecipe(NamedTuple):
    """One weight: its host value (None when abstract), shape, shard dim, dtype and role.

    ``shape=None`` marks a weight this architecture does not have; ``matrix`` marks a linear
    weight given as TT-NN's [in, out] (stored [out, in] with ``transpose_weights``).
    """

    value: Any
    shape: tuple[int, ...] | None
    shard_dim: int | None
    dtype: Any
    matrix: bool = False

    @classmethod
    def absent(cls) -> WeightRecipe:
        return cls(None, None, None, None)


class LlamaSharding:
    """Parameter and KV-cache placement for :class:`~models.llama.model.TtLlama` (a mixin)."""

    config: LlamaConfig
    mesh: Any
    mode: str
    batch: int
    dtype: Any
    weight_dtype: Any
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
        shard_dim: int | None,
        dtype: Any,
        matrix: bool = False,
    ) -> ttnn.Tensor:
        """Host array (or just its shape when abstract) -> device tensor, sharded on ``shard_dim``.

        ``matrix`` marks a linear weight given as TT-NN's [in, out]; with
        ``transpose_weights`` it is stored [out, in] instead (and used with ``transpose_b``).
        """
        mesh = self.mesh
        if matrix and self.transpose_weights:
            value = None if value is None else np.swapaxes(np.asarray(value), -1, -2)
            shape = (*shape[:-2], shape[-1], shape[-2])
            if shard_dim is not None:
                shard_dim = len(shape) - 2 if shard_dim == len(shape) - 1 else len(shape) - 1
        mapper = (
            ttnn.ShardTensorToMesh(mesh, dim=shard_dim)
            if shard_dim is not None and self.tp > 1
            else ttnn.ReplicateTensorToMesh(mesh)
        )
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
        # Hidden-sharded table (all_gather after the lookup) or vocab-parallel rows (all_reduce).
        embed_dim = 0 if self.vocab_parallel else (1 if c.dim % tp == 0 else None)
        self.params: dict[str, Any] = {
            "embed": self._put(embed, (c.vocab_size, c.dim), embed_dim, ad),
            "lm_head": self._put(_t(head), (c.dim, c.vocab_size), 1, self.weight_dtype, True),
            "norm": self._put(get("model.norm.weight"), (c.dim,), None, ad),
            "norm_bias": self._put(get("model.norm.bias"), (c.dim,), None, ad)
            if layer_norm
            else None,
            "cos": self._put(cos, cos.shape, None, ad),
            "sin": self._put(sin, sin.shape, None, ad),
        }
        if tp > 1:
            # Each device's first vocabulary row (embedding rows and LM-head columns alike); not a
            # parameter (nothing trains it), so it lives beside ``params``.
            self.vocab_start = ttnn.from_torch(
                np.arange(tp, dtype=np.uint32) * (c.vocab_size // tp),
                dtype=ttnn.uint32,
                device=self.mesh,
                mesh_mapper=ttnn.ShardTensorToMesh(self.mesh, dim=0),
            )
        specs = [self._layer_specs(w, i) for i in range(c.n_layers)]
        if self.scan_layers:
            # One stacked tensor per weight ([n_layers, ...] per device) for ttnn.scan.
            self.params["layers"] = {
                name: None
                if r.shape is None
                else self._put(
                    None if self.abstract else np.stack([s[name].value for s in specs]),
                    (c.n_layers, *r.shape),
                    None if r.shard_dim is None else r.shard_dim + 1,
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

        Column-parallel weights are sharded on their last dim, row-parallel ones on their first;
        norms are replicated. A ``None`` shape marks a weight this architecture does not have.
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
        swiglu = c.mlp == "swiglu"
        dim, ffn, none = (c.dim,), (c.dim, c.ffn_dim), WeightRecipe.absent()
        R = WeightRecipe
        fused = swiglu and self.fuse_gate_up
        gate_up = None
        if fused and not self.abstract:
            gate = _t(get("mlp.gate_proj.weight")).reshape(c.dim, tp, -1)
            up = _t(get("mlp.up_proj.weight")).reshape(c.dim, tp, -1)
            gate_up = _per_device_columns(gate, up)  # [gate_0 up_0 | gate_1 up_1 | ...]
        specs: dict[str, WeightRecipe] = {
            "attn_norm": R(get("input_layernorm.weight"), dim, None, ad),
            "attn_norm_bias": R(get("input_layernorm.bias"), dim, None, ad) if layer_norm else none,
            "wqkv": R(wqkv, (c.dim, qkv_cols), 1, wd, True),  # column-parallel
            "wo": R(_t(get("self_attn.o_proj.weight")), (c.n_heads * hd, c.dim), 0, wd, True),
            "mlp_norm": none
            if c.parallel_block
            else R(get("post_attention_layernorm.weight"), dim, None, ad),
            "mlp_norm_bias": R(get("post_attention_layernorm.bias"), dim, None, ad)
            if layer_norm and not c.parallel_block
            else none,
            # gate (swiglu) or dense_h_to_4h (gelu): column-parallel
            "w_in": none
            if fused
            else R(
                _t(get("mlp.gate_proj.weight" if swiglu else "mlp.dense_h_to_4h.weight")),
                ffn,
                1,
                wd,
                True,
            ),
            "w_up": R(_t(get("mlp.up_proj.weight")), ffn, 1, wd, True)
            if swiglu and not fused
            else none,
            "w_gate_up": R(gate_up, (c.dim, 2 * c.ffn_dim), 1, wd, True) if fused else none,
            # down / dense_4h_to_h: row-parallel
            "w_out": R(
                _t(get("mlp.down_proj.weight" if swiglu else "mlp.dense_4h_to_h.weight")),
                (c.ffn_dim, c.dim),
                0,
                wd,
                True,
            ),
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
            dim = len(layers) + (1 if self.tp > 1 else 0)
            shape[dim] *= n
            mapper = ttnn.ShardTensorToMesh(self.mesh, dim=dim)
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


__all__ = ["LlamaSharding", "WeightRecipe"]
