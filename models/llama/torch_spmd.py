"""Seed 004 on the user's own PyTorch Llama (transformers, on torchax) beside ttjax's Flax Llama.

    python -m models.llama.torch_spmd            # tiny Llama on 1x8: collectives, errors, speed

:func:`shard_like_flax` marks every parameter of a transformers ``LlamaForCausalLM`` on
``torch_xla.device()`` with the spec that ``models/llama/spmd.py`` gives the Flax model's same
weight (one rule table, ``models/llama/axes.py``): seed 004's Megatron layers, and the embedding
and LM head split by vocabulary. :func:`programs` builds both forwards on the same weights and
token ids as plain JAX functions, so ``ttjax.inspect`` compiles and reads each one and the
benchmark times both (``benchmarks/bench_torch.py``); ``"torch, seed specs"`` is the torch model
with only seed 004's layer annotations (embedding and LM head replicated).
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import numpy as np
import torch
from flax import nnx
from rich.console import Console
from rich.table import Table
from transformers import LlamaConfig as HFLlamaConfig
from transformers import LlamaForCausalLM

import ttjax
import ttjax.spmd as xs
from models.llama.axes import weight_axes
from models.llama.spmd import batch_spec, from_transformers, shard_llama_model, spec
from ttjax import torchxla

#: Seed 004's annotations: (module path under a decoder layer, spec).
SEED_SPECS = (
    ("mlp.up_proj", ("model", None)),
    ("mlp.gate_proj", ("model", None)),
    ("mlp.down_proj", (None, "model")),
    ("self_attn.q_proj", ("model", None)),
    ("self_attn.k_proj", ("model", None)),
    ("self_attn.v_proj", ("model", None)),
    ("self_attn.o_proj", (None, "model")),
)


def tiny_hf_llama(layers: int = 2, dim: int = 128, seed: int = 0) -> LlamaForCausalLM:
    """A random transformers Llama (8 heads, MLP 2 x dim, vocab 512) on the CPU, float32."""
    config = HFLlamaConfig(
        vocab_size=512,
        hidden_size=dim,
        intermediate_size=2 * dim,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=512,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def shard_like_flax(model: LlamaForCausalLM, mesh: xs.Mesh) -> LlamaForCausalLM:
    """Move ``model`` to the JAX device and mark each parameter as the Flax Llama's same weight."""
    model = model.to(torchxla.device())
    for name, param in model.named_parameters():
        xs.mark_sharding(param, mesh, spec(mesh, weight_axes(name)))
    return model


def shard_like_seed(model: LlamaForCausalLM, mesh: xs.Mesh) -> LlamaForCausalLM:
    """Seed 004's ``shard_llama_model`` on a ``LlamaForCausalLM``: the layers' seven linears
    annotated, everything else replicated."""
    model = model.to(torchxla.device())
    for param in model.parameters():
        xs.clear_sharding(param)
    for layer in model.model.layers:
        for path, layer_spec in SEED_SPECS:
            xs.mark_sharding(layer.get_submodule(path).weight, mesh, layer_spec)
    return model


def torch_program(model: LlamaForCausalLM) -> tuple[Any, dict[str, Any]]:
    """``(fn, state)``: the model's logits as ``fn(state, tokens)`` over its current arrays."""
    forward, state = torchxla.jax_forward(model)

    def logits(state: dict[str, Any], tokens: Any) -> Any:
        return forward(state, tokens, use_cache=False, return_dict=False)[0]

    return logits, state


def flax_program(model: Any) -> tuple[Any, Any]:
    """``(fn, state)``: the Flax Llama's logits as ``fn(state, tokens)``."""
    graphdef, state = nnx.split(model)

    def logits(state: Any, tokens: Any) -> Any:
        return nnx.merge(graphdef, state).forward(tokens)

    return logits, state


def programs(
    hf_model: LlamaForCausalLM, mesh: xs.Mesh, tokens: np.ndarray
) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """``{name: (fn, args)}``: the Flax Llama (converted from ``hf_model``) and the torch model,
    each sharded by the rule table, and the torch model under seed 004's specs; ``hf_model`` is
    moved to the JAX device."""
    flax_model = shard_llama_model(from_transformers(hf_model), mesh)
    placed = xs.mark_sharding(np.asarray(tokens, np.int32), mesh, batch_spec(mesh))
    out: dict[str, tuple[Any, tuple[Any, ...]]] = {}
    fn, state = flax_program(flax_model)
    out["Flax Llama, mark_sharding"] = (fn, (state, placed))
    fn, state = torch_program(shard_like_flax(hf_model, mesh))
    out["torch Llama, same specs"] = (fn, (state, placed))
    fn, state = torch_program(shard_like_seed(hf_model, mesh))
    out["torch Llama, seed 004's specs"] = (fn, (state, placed))
    return out


def side_by_side(
    mesh_shape: tuple[int, int] = (1, 8), batch: int = 8, seq: int = 32, layers: int = 2
) -> dict[str, dict[str, Any]]:
    """Each program's ``ttjax.inspect`` report and its largest logit error against transformers'
    model on the CPU."""
    hf_model = tiny_hf_llama(layers)
    tokens = np.random.default_rng(0).integers(0, 512, (batch, seq)).astype(np.int32)
    with torch.no_grad():
        want = hf_model(torch.from_numpy(tokens).long()).logits.numpy()
    mesh = xs.Mesh(np.arange(8), mesh_shape, ("batch", "model"))
    out = {}
    for name, (fn, args) in programs(hf_model, mesh, tokens).items():
        report = ttjax.inspect.inspect(fn, *args, mesh=mesh.jax_mesh, name=name)
        logits = np.asarray(jax.jit(fn)(*args))
        out[name] = {"report": report, "max_error": float(np.abs(logits - want).max())}
    return out


def table(results: dict[str, dict[str, Any]], layers: int, mesh_shape: tuple[int, int]) -> Table:
    t = Table(title=f"one Llama forward, {layers} layers, mesh {mesh_shape} ('batch', 'model')")
    for col in ("program", "all-reduce", "other collectives", "bytes sent/device", "max |err|"):
        t.add_column(col, justify="left" if col == "program" else "right")
    for name, r in results.items():
        counts = r["report"].collective_counts()
        other = {k: v for k, v in counts.items() if v and k != "all-reduce"}
        t.add_row(
            name,
            str(counts["all-reduce"]),
            str(other or "none"),
            f"{r['report'].bytes_per_device / 1024:.1f} KiB",
            f"{r['max_error']:.1e}",
        )
    return t


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", default="1x8", choices=("1x8", "2x4"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    ns = parser.parse_args(argv)
    shape = tuple(int(s) for s in ns.mesh.split("x"))
    mesh_shape = (shape[0], shape[1])
    results = side_by_side(mesh_shape, ns.batch, ns.seq, ns.layers)
    Console().print(table(results, ns.layers, mesh_shape))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
