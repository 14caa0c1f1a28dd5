"""Trace replay vs eager op-by-op execution of one Llama decode step (TP on the mesh)."""

from __future__ import annotations

import numpy as np

import ttjax as ttnn
from benchmarks._harness import Row, compare
from models.llama.config import get_config
from models.llama.model import TtLlama
from models.llama.weights import random_weights


def decode_step_row(mesh: ttnn.MeshDevice, config_name: str, batch: int = 8) -> Row:
    config = get_config(config_name)
    model = TtLlama(config, random_weights(config, seed=0), mesh, mode="tp", batch=batch)
    prompt = np.random.default_rng(0).integers(0, config.vocab_size, (batch, 8))
    model.prefill(model.tokens_to_device(prompt))
    tok = model.tokens_to_device(prompt[:, -1:])
    pos = model.positions_to_device(np.full(batch, 8))

    def eager():
        return model.decode(tok, pos)

    eager()  # compile every op
    tid = ttnn.begin_trace_capture(mesh, cq_id=0)
    out = model.decode(tok, pos)
    ttnn.end_trace_capture(mesh, tid, cq_id=0)

    def replay():
        ttnn.execute_trace(mesh, tid, cq_id=0, blocking=False)
        return out.value

    times = compare({"trace": replay, "eager": eager}, repeats=5, number=5)
    ops = len(ttnn.trace.trace_info(tid)["programs"][0]["ops"])
    ttnn.release_trace(mesh, tid)
    return Row(
        f"decode step, {config_name} Llama TP {mesh.shape}",
        "execute_trace",
        "eager op-by-op",
        times["trace"],
        times["eager"],
        "speedup >= 20x" if config_name == "tiny" else "-",
        {"batch": batch, "ops_per_step": ops},
    )


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    return [decode_step_row(mesh, "tiny"), decode_step_row(mesh, "small")]
