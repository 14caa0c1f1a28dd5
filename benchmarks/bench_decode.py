"""One Llama decode step on a 1x8 mesh (TP 8, float32, batch 8), three ways side by side.

* ``execute_trace`` of the captured step against ``jax.jit`` of the same step (caches donated in
  both): target ratio <= 1.02, for the tiny config and the issue's 8-layer one.
* The jitted ttjax step (vocab-parallel embedding, logits left vocab-sharded, on-device greedy
  argmax over the shards) against the same algorithm written by hand with ``jax.shard_map``
  (masked lookup + one psum, local argmax + a gather of one candidate per shard): target
  ratio <= 1.05 with the same collectives.

python -m benchmarks.run --only decode
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

import ttjax as ttnn
from benchmarks._harness import Row, compare
from models.llama.config import LlamaConfig, get_config
from models.llama.model import TtLlama
from models.llama.weights import random_weights

BATCH = 8


def config_named(name: str) -> LlamaConfig:
    """``tiny`` or ``8-layer`` (the issue's shape: ``small`` with 8 layers)."""
    if name == "8-layer":
        return get_config("small").with_(name="small-8l", n_layers=8)
    return get_config(name)


def _model(mesh: ttnn.MeshDevice, config: LlamaConfig, **options: Any) -> tuple[TtLlama, Any, Any]:
    model = TtLlama(config, random_weights(config, seed=0), mesh, mode="tp", batch=BATCH, **options)
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, (BATCH, 8))
    model.prefill(model.tokens_to_device(prompt))
    tok = model.tokens_to_device(prompt[:, -1:])
    pos = model.positions_to_device(np.full(BATCH, 8))
    return model, tok, pos


def trace_vs_jit_row(mesh: ttnn.MeshDevice, name: str, repeats: int, number: int) -> Row:
    model, tok, pos = _model(mesh, config_named(name))
    step = jax.jit(model.decode_fn(), donate_argnums=(1,))
    # The jitted step donates (and so deletes) the caches it is given: it gets its own.
    state = {"caches": [model._new_cache() for _ in range(model.config.n_layers)]}

    def jitted() -> Any:
        logits, state["caches"] = step(model.params, state["caches"], tok, pos)
        return logits

    jitted()  # compile
    tid = ttnn.begin_trace_capture(mesh, cq_id=0)
    out = model.decode(tok, pos)
    ttnn.end_trace_capture(mesh, tid, cq_id=0)

    def replay() -> Any:
        ttnn.execute_trace(mesh, tid, cq_id=0, blocking=False)
        return out.value

    t = compare({"trace": replay, "jit": jitted}, repeats=repeats, number=number)
    info = ttnn.trace.trace_info(tid)["programs"][0]
    ttnn.release_trace(mesh, tid)
    return Row(
        f"decode step, {name} Llama TP {mesh.shape} batch {BATCH}",
        "execute_trace",
        "jax.jit (same step)",
        t["trace"],
        t["jit"],
        "ratio <= 1.02",
        {"ops": len(info["ops"]), "inputs": info["inputs"], "outputs": info["outputs"]},
    )


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    return [
        trace_vs_jit_row(mesh, "tiny", repeats=9, number=20),
        trace_vs_jit_row(mesh, "8-layer", repeats=5, number=3),
    ]
