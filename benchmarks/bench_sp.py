"""Megatron sequence parallelism (``device_config.enable_sp``): per-device memory and step time.

``memory_rows`` compiles the trainer's own step (``TrainStep`` with AdamW over NanoGPT or Llama,
blocks scanned with remat) on a 2x4 mesh, TP 4 x DDP 2, once with TP alone and once with SP,
from abstract inputs (``jax.ShapeDtypeStruct``: nothing is allocated), and reads each program's
per-device memory and collectives with ``ttjax.inspect``. Parameters and optimizer state are
the same under both (SP splits activations only); XLA's temporaries (the activations kept for
the backward pass, and the scratch of the step) fall. ``run`` times the two steps on the CPU
mesh after checking that they give the same losses.

python -m benchmarks.bench_sp --memory      # the memory table (markdown) + results/sp_memory.json
python -m benchmarks.run --only sp          # the timing row
"""

from __future__ import annotations

import json
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import ttjax as ttnn
from benchmarks._harness import RESULTS, Row, compare
from models.llama.config import get_config
from models.llama.train_model import LlamaTrain, param_axes, params_from_weights
from models.llama.weights import expected_shapes
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params
from models.nanogpt.weights import param_axes as gpt_axes
from ttjax.inspect import ProgramReport, inspect
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

MIB = 2**20
#: name -> (model, batch, seq): small configs whose activations outweigh their weights.
CONFIGS: dict[str, tuple[str, Any, int, int]] = {
    "NanoGPT 4 x 256, remat full": (
        "nanogpt",
        GPTConfig(vocab_size=1024, block_size=512, n_layer=4, n_head=8, n_embd=256),
        8,
        512,
    ),
    "NanoGPT 4 x 256, remat none": (
        "nanogpt",
        GPTConfig(
            vocab_size=1024, block_size=512, n_layer=4, n_head=8, n_embd=256, remat_policy="none"
        ),
        8,
        512,
    ),
    "Llama 4 x 256 (GQA 8/4), remat full": (
        "llama",
        get_config("tiny").with_(
            vocab_size=1024,
            dim=256,
            n_layers=4,
            n_heads=8,
            n_kv_heads=4,
            ffn_dim=768,
            max_seq_len=512,
        ),
        8,
        512,
    ),
}


def _model(kind: str, config: Any) -> tuple[Any, Any, Any]:
    """``(loss_fn, logical axes, abstract whole parameters)`` of one model."""
    if kind == "nanogpt":
        shapes = jax.eval_shape(lambda: init_params(config, 0))
        return GPT(config).loss, gpt_axes(config), shapes
    hf = {k: jax.ShapeDtypeStruct(v, jnp.float32) for k, v in expected_shapes(config).items()}
    shapes = jax.eval_shape(lambda w: params_from_weights(config, w), hf)
    return LlamaTrain(config).loss, param_axes(config), shapes


def compiled_step(
    mesh: ttnn.MeshDevice, kind: str, config: Any, batch: int, seq: int, sp: bool
) -> ProgramReport:
    """``ttjax.inspect``'s report of the whole train step (forward, backward, AdamW) on ``mesh``
    (DDP on axis 0, TP on axis 1), with SP or TP alone, compiled from abstract inputs."""
    par = ParallelismContext.from_axes(mesh, ddp_axis=0, tp_axis=1, sequence_parallel=sp)
    loss, logical, shapes = _model(kind, config)
    step = TrainStep(loss, logical, par, make_optimizer(OptimizerSettings()))
    state, tokens = step.abstract_inputs(shapes, batch, seq)
    name = f"{kind} {'TP+SP' if sp else 'TP'}"
    return inspect(step._step, state, tokens, mesh=step.mesh, name=name)


def memory_rows(
    mesh: ttnn.MeshDevice, configs: dict[str, tuple[str, Any, int, int]] = CONFIGS
) -> list[dict[str, Any]]:
    """Per-device bytes of TP alone and TP+SP for each config (``ttjax.inspect`` memory)."""
    rows = []
    for name, (kind, config, batch, seq) in configs.items():
        tp, sp = (compiled_step(mesh, kind, config, batch, seq, on) for on in (False, True))
        assert tp.memory is not None and sp.memory is not None
        rows.append(
            {
                "config": name,
                "batch": batch,
                "seq": seq,
                "mesh": "2x4 (DDP 2 x TP 4)",
                "tp_temp_bytes": tp.memory.temp_bytes,
                "sp_temp_bytes": sp.memory.temp_bytes,
                "ratio": sp.memory.temp_bytes / tp.memory.temp_bytes,
                "resident_bytes": tp.memory.resident_bytes,
                "sp_resident_bytes": sp.memory.resident_bytes,
                "tp_collectives": tp.collective_counts(),
                "sp_collectives": sp.collective_counts(),
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as the table docs/sequence_parallel.md shows."""
    out = [
        "| config (batch x seq) | TP alone | TP + SP | SP / TP | weights + AdamW (both) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r['config']} ({r['batch']} x {r['seq']}) | {r['tp_temp_bytes'] / MIB:.1f} MiB "
            f"| {r['sp_temp_bytes'] / MIB:.1f} MiB | {r['ratio']:.2f} "
            f"| {r['resident_bytes'] / MIB:.1f} MiB |"
        )
    return "\n".join(out)


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    """One NanoGPT AdamW step on 2x4 (DDP 2 x TP 4): TP+SP vs TP alone, same losses first."""
    config = GPTConfig(vocab_size=256, block_size=256, n_layer=2, n_head=8, n_embd=128)
    params = init_params(config, 5489)
    tokens = np.random.default_rng(0).integers(0, config.vocab_size, (1, 8, 257)).astype(np.int32)
    steps, states = {}, {}
    for name, on in (("sp", True), ("tp", False)):
        par = ParallelismContext.from_axes(mesh, ddp_axis=0, tp_axis=1, sequence_parallel=on)
        steps[name] = TrainStep(  # times the same state again and again: no donation
            GPT(config).loss,
            gpt_axes(config),
            par,
            make_optimizer(OptimizerSettings(1e-3)),
            donate=False,
        )
        states[name] = steps[name].init_state(params)
    losses = {k: float(steps[k](states[k], tokens)[1]["loss"]) for k in steps}
    assert abs(losses["sp"] - losses["tp"]) < 1e-5, losses
    times = compare(
        {k: (lambda k=k: steps[k](states[k], tokens)) for k in steps}, repeats=5, number=3
    )
    return [
        Row(
            name="NanoGPT AdamW step, 2 layers x 128, 8 x 256 tokens, 2x4 (DDP 2 x TP 4)",
            subject="TP + sequence parallelism (enable_sp)",
            baseline="TP alone",
            subject_s=times["sp"],
            baseline_s=times["tp"],
            target="report only (SP trades one all-reduce for a reduce-scatter + all-gather)",
            extra={"config": str(config)},
        )
    ]


def main(argv: list[str]) -> int:
    if "--memory" not in argv:
        print(__doc__)
        return 2
    rows = memory_rows(ttnn.open_mesh_device(ttnn.MeshShape(2, 4)))
    print(markdown(rows))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sp_memory.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
