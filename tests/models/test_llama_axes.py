"""Llama's logical axes, stated once (``models/llama/axes.py``), place every weight alike in its four
variants (TT-NN, TTML, torch-xla ``mark_sharding``, ``ttjax.dist``) on DP x TP meshes (2x4, 8x4):
each device's piece of each weight equals the Megatron split written out here in numpy."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import mesh_of
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
import ttjax.spmd as xs
from models.llama import dist_decode
from models.llama.axes import (
    LAYER_AXES,
    TOP_AXES,
    in_out,
    weight_axes,
)
from models.llama.config import get_config
from models.llama.model import TtLlama
from models.llama.reference import LlamaReference
from models.llama.spmd import shard_llama_model
from models.llama.train_model import param_axes, param_specs, params_from_weights
from models.llama.weights import expected_shapes, random_weights
from ttjax import dist
from ttjax.errors import ShardingError
from ttjax.ttml.context import ParallelismContext

CONFIG = get_config("tiny")

# The Megatron plan written out by hand (the independent reference): the dim of the canonical
# [out, in] weight that TP splits, None = whole on every device.
MEGATRON = {
    "embed_tokens": 0,
    "lm_head": 0,
    "q_proj": 0,
    "k_proj": 0,
    "v_proj": 0,
    "gate_proj": 0,
    "up_proj": 0,
    "o_proj": 1,
    "down_proj": 1,
    "norm": None,
    "layernorm": None,
}

# TTML's training tree -> the canonical names (one layer).
TTML_NAMES = {
    ("attention_norm", "gamma"): "input_layernorm.weight",
    ("q_linear", "weight"): "self_attn.q_proj.weight",
    ("k_linear", "weight"): "self_attn.k_proj.weight",
    ("v_linear", "weight"): "self_attn.v_proj.weight",
    ("out_linear", "weight"): "self_attn.o_proj.weight",
    ("mlp_norm", "gamma"): "post_attention_layernorm.weight",
    ("w1", "weight"): "mlp.gate_proj.weight",
    ("w3", "weight"): "mlp.up_proj.weight",
    ("w2", "weight"): "mlp.down_proj.weight",
}


def _megatron_dim(name: str) -> int | None:
    key = next(k for k in MEGATRON if k in name)
    return MEGATRON[key]


def _expected(weights: dict[str, np.ndarray], name: str, tp: int, c: int) -> np.ndarray:
    """Device column ``c``'s piece of weight ``name`` (canonical [out, in]) under TP ``tp``."""
    w, d = weights[name], _megatron_dim(name)
    return w if d is None else np.split(w, tp, axis=d)[c]


def _pieces(arr: jax.Array, devices: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """``{(row, col): that device's data}`` of a placed jax array on a 2-D device grid."""
    where = {d: rc for rc, d in np.ndenumerate(devices)}
    return {where[s.device]: np.asarray(s.data) for s in arr.addressable_shards}


def test_every_weight_has_logical_axes_of_its_rank() -> None:
    for cfg in (CONFIG, get_config("falcon-7b")):
        for name, shape in expected_shapes(cfg).items():
            assert len(weight_axes(name)) == len(shape), name
    with pytest.raises(ShardingError, match="no logical axes"):
        weight_axes("model.layers.0.self_attn.qkv.weight")


def test_ttml_param_axes_are_the_tables() -> None:
    axes = param_axes(CONFIG)
    for (module, leaf), name in TTML_NAMES.items():
        want = LAYER_AXES[name]
        want = in_out(want) if leaf == "weight" else want  # TTML stores linears [in, out]
        assert axes["blocks"][module][leaf] == want.prepend("layers"), name  # stacked blocks
    assert axes["tok_emb"]["weight"] == TOP_AXES["model.embed_tokens.weight"]
    assert axes["fc"]["weight"] == in_out(TOP_AXES["lm_head.weight"])
    assert axes["ln_fc"]["gamma"] == TOP_AXES["model.norm.weight"]


@pytest.mark.parametrize(
    "shape", [(2, 4), pytest.param((8, 4), marks=pytest.mark.slow)], ids=["2x4", "8x4"]
)
def test_four_variants_place_every_weight_alike(shape: tuple[int, int]) -> None:
    rows, tp = shape
    weights = random_weights(CONFIG, seed=1)
    mesh = mesh_of(shape)
    ids = mesh.get_device_ids()
    grid = np.asarray(mesh.jax_mesh.devices)
    # got[variant][canonical name][(r, c)] -> that device's piece, as canonical [out, in]
    got: dict[str, dict[str, dict[tuple[int, int], np.ndarray]]] = {}

    # TTML: DDP over rows, TP over columns.
    par = ParallelismContext.from_axes(mesh, ddp_axis=0, tp_axis=1)
    specs, params = param_specs(CONFIG, par), params_from_weights(CONFIG, weights)
    ttml: dict[str, dict[tuple[int, int], np.ndarray]] = {}
    devices = np.asarray(par.jax_mesh.devices)

    def place(name: str, value: jax.Array, spec: P, layer: int | None = None) -> None:
        pieces = _pieces(jax.device_put(value, NamedSharding(par.jax_mesh, spec)), devices)
        stored_io = name.endswith("proj.weight") or name == "lm_head.weight"
        for rc, piece in pieces.items():
            piece = piece if layer is None else piece[layer]  # the stacked blocks' layer axis
            ttml.setdefault(name, {})[rc] = piece.T if stored_io else piece

    for (module, leaf), name in TTML_NAMES.items():
        for i in range(CONFIG.n_layers):
            spec = specs["blocks"][module][leaf]
            place(f"model.layers.{i}.{name}", params["blocks"][module][leaf], spec, i)
    place("model.embed_tokens.weight", params["tok_emb"]["weight"], specs["tok_emb"]["weight"])
    place("lm_head.weight", params["fc"]["weight"], specs["fc"]["weight"])
    place("model.norm.weight", params["ln_fc"]["gamma"], specs["ln_fc"]["gamma"])
    got["ttml"] = ttml

    # torch-xla mark_sharding on the Flax reference, seed 004's ("batch", "model") names.
    model = LlamaReference(CONFIG, weights)
    shard_llama_model(model, xs.Mesh(ids, shape, ("batch", "model")))
    got["mark_sharding"] = {}
    for _, var in nnx.iter_graph(model):
        name = var.get_metadata().get("hf_name") if isinstance(var, nnx.Variable) else None
        if name:
            got["mark_sharding"][name] = _pieces(var.get_value(), grid)

    # ttjax.dist on a role-named (dp, tp) mesh.
    dmesh = dist.Mesh(axes=["dp", "tp"], devices=ids, shape=shape)
    placed = dist_decode.place_weights(CONFIG, weights, dmesh)
    got["dist"] = {hf: _pieces(placed[k], grid) for k, hf in dist_decode.hf_names(CONFIG).items()}

    # TT-NN: one TP model per 1 x tp submesh (hybrid DP+TP), the vocab-parallel embedding.
    hd, q_cols = CONFIG.head_dim, CONFIG.n_heads // tp * CONFIG.head_dim
    kv_cols = CONFIG.n_kv_heads // tp * hd
    tt: dict[str, dict[tuple[int, int], np.ndarray]] = {}
    for r, sub in enumerate(mesh.create_submeshes(ttnn.MeshShape(1, tp))):
        assert sub.get_device_ids() == list(np.asarray(ids).reshape(shape)[r])
        m = TtLlama(CONFIG, weights, sub, mode="tp", embedding="vocab_parallel")

        def per_device(t: ttnn.Tensor) -> list[np.ndarray]:
            return [np.asarray(ttnn.to_torch(d)) for d in ttnn.get_device_tensors(t)]

        def put(name: str, pieces: list[np.ndarray], r: int = r) -> None:
            for c, p in enumerate(pieces):
                tt.setdefault(name, {})[(r, c)] = p

        put("model.embed_tokens.weight", per_device(m.params["embed"]))
        put("lm_head.weight", [p.T for p in per_device(m.params["lm_head"])])
        put("model.norm.weight", per_device(m.params["norm"]))
        for i, layer in enumerate(m.params["layers"]):
            p = f"model.layers.{i}."
            qkv = per_device(layer["wqkv"])  # each device's [q_c k_c v_c] columns
            put(p + "self_attn.q_proj.weight", [a[:, :q_cols].T for a in qkv])
            put(p + "self_attn.k_proj.weight", [a[:, q_cols : q_cols + kv_cols].T for a in qkv])
            put(p + "self_attn.v_proj.weight", [a[:, q_cols + kv_cols :].T for a in qkv])
            put(p + "self_attn.o_proj.weight", [a.T for a in per_device(layer["wo"])])
            put(p + "mlp.gate_proj.weight", [a.T for a in per_device(layer["w_in"])])
            put(p + "mlp.up_proj.weight", [a.T for a in per_device(layer["w_up"])])
            put(p + "mlp.down_proj.weight", [a.T for a in per_device(layer["w_out"])])
            put(p + "input_layernorm.weight", per_device(layer["attn_norm"]))
            put(p + "post_attention_layernorm.weight", per_device(layer["mlp_norm"]))
    got["ttnn"] = tt

    names = set(expected_shapes(CONFIG))
    for variant, placed_by_name in got.items():
        assert set(placed_by_name) == names, variant
        for name, pieces in placed_by_name.items():
            assert set(pieces) == {(r, c) for r in range(rows) for c in range(tp)}
            for (r, c), piece in pieces.items():
                np.testing.assert_array_equal(
                    piece, _expected(weights, name, tp, c), err_msg=f"{variant} {name} ({r},{c})"
                )


def test_ttnn_hidden_sharded_embedding_is_the_one_override() -> None:
    """TT-NN's default embedding splits ``embed`` (its own rule), every other weight the table's."""
    mesh = mesh_of((1, 4))
    m = TtLlama(CONFIG, random_weights(CONFIG, seed=1), mesh, mode="tp")
    table = random_weights(CONFIG, seed=1)["model.embed_tokens.weight"]
    pieces = [np.asarray(ttnn.to_torch(d)) for d in ttnn.get_device_tensors(m.params["embed"])]
    for c, p in enumerate(pieces):
        np.testing.assert_array_equal(p, np.split(table, 4, axis=1)[c])
