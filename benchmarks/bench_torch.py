"""Seed 004's PyTorch Llama against ttjax's Flax Llama under the same specs: one jitted forward.

transformers' ``LlamaForCausalLM`` runs on torchax (``ttjax.torchxla``), every parameter marked
with ``mark_sharding`` by the rule table (``models/llama/torch_spmd.py``); the baseline is the
same weights converted to ttjax's Flax Llama and sharded by ``models/llama/spmd.py``. Both are
``jax.jit`` of a plain JAX function on the same token ids, checked to give the same logits and
the same collectives (``ttjax.inspect``) before they are timed, interleaved, on 1x8 and 2x4.

python -m benchmarks.run --only torch
"""

from __future__ import annotations

from functools import partial

import jax
import numpy as np

import ttjax
import ttjax.compat
import ttjax.spmd as xs
from benchmarks._harness import Row, collectives, compare

LAYERS, DIM, BATCH, SEQ = 4, 256, 8, 128


def run() -> list[Row]:
    from models.llama.torch_spmd import programs, tiny_hf_llama

    rows = []
    try:
        for shape in ((1, 8), (2, 4)):
            mesh = xs.Mesh(np.arange(8), shape, ("batch", "model"))
            tokens = np.random.default_rng(0).integers(0, 512, (BATCH, SEQ))
            built = programs(tiny_hf_llama(LAYERS, DIM), mesh, tokens)
            (flax_fn, flax_args), (torch_fn, torch_args) = list(built.values())[:2]
            flax_jit, torch_jit = jax.jit(flax_fn), jax.jit(torch_fn)
            np.testing.assert_allclose(
                np.asarray(torch_jit(*torch_args)), np.asarray(flax_jit(*flax_args)), atol=1e-4
            )
            seen = [
                collectives(ttjax.inspect.inspect(f, *a, mesh=mesh.jax_mesh))
                for f, a in ((torch_fn, torch_args), (flax_fn, flax_args))
            ]
            assert seen[0] == seen[1], seen
            times = compare(
                {"torch": partial(torch_jit, *torch_args), "flax": partial(flax_jit, *flax_args)}
            )
            rows.append(
                Row(
                    f"Llama forward {LAYERS}x{DIM}, batch {BATCH}x{SEQ}, mesh {shape} "
                    f"(collectives {seen[0]})",
                    "transformers on torchax, mark_sharding",
                    "ttjax Flax Llama, mark_sharding",
                    times["torch"],
                    times["flax"],
                    "ratio <= 1.1",
                    extra={"collectives": seen[0], "mesh": shape},
                )
            )
    finally:
        ttjax.compat.uninstall_torch_xla()
    return rows
