"""Seed 004's torch-xla recipe on the Flax Llama: annotate the weights, let XLA insert collectives.

    python -m models.llama.demo --frontend spmd --config tiny

``shard_llama_model(model, mesh)`` annotates every weight, in place, by its logical axes
(``models/llama/axes.py``) under the rule table: q/k/v/gate/up column-parallel
(``("model", None)``), o/down row-parallel (``(None, "model")``), the embedding and LM head split
by vocabulary, norms and RoPE tables replicated. It takes the Flax reference (``reference.py``)
or a transformers ``LlamaForCausalLM`` (converted first with the Hugging Face loader in
``weights.py``). Mesh axes are named by role (``"dp"``, ``"tp"``) or as seed 004 names them
(``"batch"`` -> dp, ``"model"`` -> tp). Calling it again with another mesh re-shards the same
parameters, e.g. from (1, 8) to (2, 4) ("batch", "model"), without reloading.
"""

from __future__ import annotations

import tempfile
from typing import Any

import jax
import numpy as np
from flax import nnx

import ttjax
import ttjax.spmd as xs
from models.llama.axes import KV_CACHE_AXES, weight_axes
from models.llama.reference import LlamaReference
from models.llama.weights import load_hf_checkpoint
from ttjax.plan import LogicalAxes, ParallelDims

#: Seed 004's mesh axis names and the roles they play.
ROLES = {"batch": "dp", "model": "tp"}


def from_transformers(hf_model: Any, dtype: Any = np.float32) -> LlamaReference:
    """A ``LlamaForCausalLM`` (torch) as the Flax reference, through the Hugging Face loader."""
    with tempfile.TemporaryDirectory() as tmp:
        hf_model.save_pretrained(tmp, safe_serialization=True)
        config, weights = load_hf_checkpoint(tmp)
    return LlamaReference(config, weights, dtype=dtype)


def shard_llama_model(model: Any, mesh: xs.Mesh) -> LlamaReference:
    """Seed 004's ``shard_llama_model``: each weight annotated by its logical axes (Megatron TP).

    ``model`` is a ``LlamaReference`` (sharded in place and returned) or a transformers
    ``LlamaForCausalLM`` (converted, then sharded; the new Flax model is returned). Each
    ``nnx.Param`` carries its canonical name (``hf_name``); other variables (RoPE tables) are
    replicated.
    """
    if not isinstance(model, LlamaReference):
        model = from_transformers(model)
    for _, var in nnx.iter_graph(model):
        if isinstance(var, nnx.Variable):
            name = var.get_metadata().get("hf_name")
            axes = weight_axes(name) if name else LogicalAxes(*[None] * np.ndim(var.get_value()))
            xs.mark_sharding(var, mesh, spec(mesh, axes))
    return model


def plan(mesh: xs.Mesh) -> ParallelDims:
    """The roles of ``mesh``'s axes (named by role, or ``"batch"`` / ``"model"``)."""
    return xs.plan_of(mesh, ROLES)


def spec(mesh: xs.Mesh, axes: LogicalAxes) -> tuple[Any, ...]:
    """The ``mark_sharding`` spec of a tensor with logical ``axes`` on ``mesh``."""
    return xs.mesh_axis_spec(mesh, axes, ROLES)


def batch_spec(mesh: xs.Mesh) -> tuple[Any, ...]:
    """Inputs ``[B, T]``: split over the dp axis when it has size > 1, else replicated."""
    return spec(mesh, LogicalAxes("batch", None))


def sharded_forward(model: LlamaReference, mesh: xs.Mesh, tokens: Any) -> jax.Array:
    """Logits of a full causal pass with the inputs annotated (compiled by XLA's SPMD pass)."""
    tokens = xs.mark_sharding(np.asarray(tokens, np.int32), mesh, batch_spec(mesh))
    graphdef, state = nnx.split(model)
    return _forward(graphdef, state, tokens)


@jax.jit(static_argnums=0)
def _forward(graphdef: Any, state: Any, tokens: jax.Array) -> jax.Array:
    return nnx.merge(graphdef, state).forward(tokens)


def decode_step(model: LlamaReference, mesh: xs.Mesh, batch: int) -> tuple[Any, tuple[Any, ...]]:
    """``(fn, args)`` of one jitted decode step over the annotated model (for ttjax.inspect)."""
    graphdef, state = nnx.split(model)
    cache = model.init_cache(batch)
    # The KV cache [B, n_kv, S, hs] is annotated too: split by KV head over tp.
    cache_spec = spec(mesh, KV_CACHE_AXES)
    cache = jax.tree.map(lambda c: xs.mark_sharding(c, mesh, cache_spec), cache)
    tokens = xs.mark_sharding(np.zeros((batch, 1), np.int32), mesh, batch_spec(mesh))
    pos = xs.mark_sharding(np.zeros((batch,), np.int32), mesh, batch_spec(mesh)[:1])

    def step(state, tokens, pos, cache):
        return nnx.merge(graphdef, state).decode(tokens, pos, cache)

    return step, (state, tokens, pos, cache)


def _pcc(a: Any, b: Any) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return 1.0 if np.array_equal(a, b) else float(np.corrcoef(a, b)[0, 1])


def run_demo(
    config: Any, weights: dict[str, np.ndarray], prompt: np.ndarray, new_tokens: int, console: Any
) -> dict[str, Any]:
    """The ``--frontend spmd`` demo: shard on (1, 8), check logits, re-shard to (2, 4), decode.

    Prints the PCC of each mesh's logits against the unsharded model, greedy continuations and the
    collectives XLA inserted into one decode step; returns those numbers.
    """
    reference = LlamaReference(config, weights)
    want = np.asarray(reference.jitted().forward(prompt))
    model = LlamaReference(config, weights)
    out: dict[str, Any] = {}
    for shape in ((1, 8), (2, 4)):
        mesh = xs.Mesh(np.arange(8), shape, ("batch", "model"))
        shard_llama_model(model, mesh)  # the second call re-shards the same parameters
        logits = np.asarray(sharded_forward(model, mesh, prompt))
        out[shape] = _pcc(logits, want)
        console.print(
            f"mesh {shape} ('batch', 'model'): q_proj spec "
            f"{xs.get_partition_spec(model.layers[0].attn.wq)}, PCC vs single device "
            f"{out[shape]:.6f}"
        )
    tokens = np.asarray(prompt)
    for _ in range(new_tokens):
        logits = np.asarray(sharded_forward(model, mesh, tokens))
        tokens = np.concatenate([tokens, logits[:, -1].argmax(-1)[:, None]], axis=1)
    out["tokens"] = tokens
    console.print(f"greedy continuation on {shape}: {tokens[:, prompt.shape[1] :].tolist()}")
    step, args = decode_step(model, mesh, prompt.shape[0])
    report = ttjax.inspect.inspect(step, *args, mesh=mesh.jax_mesh, name="spmd decode step")
    report.print(console)
    out["report"] = report
    return out
