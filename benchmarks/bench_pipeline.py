"""Pipeline parallelism: a PP 1x4 train step with 8 microbatches (1F1B) vs 1 (TTML's schedule).

TTML keeps one microbatch in flight, so three of four stages idle at any time (bubble
(p-1)/(m+p-1) = 0.75 for m = 1); with m = 8 the bubble is 3/11 = 0.27. Both variants run the same
model, batch, optimizer and mesh, side by side in one run. On the CPU mesh the four "devices"
share the machine's cores, so the speed-up is capped by the cores, not by the bubble; the
``ideal`` column is what the tick tables predict when every stage has its own chip.
"""

from __future__ import annotations

import jax
import optax

import ttjax as ttnn
from benchmarks._harness import Row, compare
from models.nanogpt import pipeline as gpt_pipeline
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params
from ttjax.plan import ParallelDims
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.pipeline import Pipeline
from ttjax.ttml.pipeline_train import PipelineTrainStep

CFG = GPTConfig(vocab_size=256, block_size=64, n_layer=8, n_head=4, n_embd=128)
BATCH = 32


def _step(
    mesh: ttnn.MeshDevice, m: int, schedule: str
) -> tuple[Pipeline, object, PipelineTrainStep]:
    par = ParallelismContext.from_axes(
        mesh, pp_axis=len(tuple(mesh.shape)) - 1
    )  # the stages on the last axis
    pipe = Pipeline(
        mesh,
        *gpt_pipeline.stage_functions(GPT(CFG)),
        num_blocks=CFG.n_layer,
        dims=par.dims,
        num_microbatches=m,
        schedule=schedule,
        io_specs=gpt_pipeline.io_specs(CFG, par),
        block_specs=gpt_pipeline.block_specs(CFG, par),
    )
    # The benchmark times the same state again and again: no donation.
    step = PipelineTrainStep(pipe, optax.adamw(1e-3), split=gpt_pipeline.split_params, donate=False)
    return pipe, step.init_state(init_params(CFG, 0)), step


def _batch(cfg: GPTConfig, size: int) -> jax.Array:
    """``[1, size, seq + 1]``: one block of random sequences (the step shifts the targets)."""
    return jax.random.randint(jax.random.key(1), (1, size, cfg.block_size + 1), 0, cfg.vocab_size)


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    tokens = _batch(CFG, BATCH)
    pipe8, state8, step8 = _step(mesh, 8, "1f1b")
    pipe1, state1, step1 = _step(mesh, 1, "1f1b")
    times = compare(
        {
            "m=8": lambda: step8(state8, tokens),
            "m=1": lambda: step1(state1, tokens),
        },
        repeats=5,
        number=3,
    )
    t8, t1 = pipe8.table, pipe1.table
    # Ideal time ~ ticks x work per tick, and a tick's work scales with the microbatch size.
    ideal = (t8.num_ticks / 8) / (t1.num_ticks / 1)
    return [
        Row(
            name=(
                f"PP {'x'.join(map(str, mesh.shape))} train step, NanoGPT {CFG.n_layer} blocks, "
                f"batch {BATCH}: 8 microbatches (1F1B) vs 1 (TTML)"
            ),
            subject="m=8, 1F1B",
            baseline="m=1",
            subject_s=times["m=8"],
            baseline_s=times["m=1"],
            target="-",
            extra={
                "idle_fraction_m8": t8.idle_fraction,
                "idle_fraction_m1": t1.idle_fraction,
                "ticks_m8": t8.num_ticks,
                "ticks_m1": t1.num_ticks,
                "ideal_ratio_one_chip_per_stage": ideal,
            },
        )
    ]


def memory_sweep(mesh: ttnn.MeshDevice, microbatch: int = 2) -> list[dict[str, object]]:
    """Compiled temporary bytes per device of one step, GPipe vs 1F1B, m = 4, 8, 16.

    The microbatch size is fixed, so GPipe's stash grows with m and 1F1B's stays at p.
    """
    cfg = GPTConfig(vocab_size=64, block_size=32, n_layer=4, n_head=4, n_embd=64)
    io, blocks = gpt_pipeline.split_params(init_params(cfg, 0))
    act = microbatch * cfg.block_size * cfg.n_embd * 4
    out = []
    for schedule in ("gpipe", "1f1b"):
        for m in (4, 8, 16):
            pipe = Pipeline(
                mesh,
                *gpt_pipeline.stage_functions(GPT(cfg)),
                num_blocks=cfg.n_layer,
                dims=ParallelDims.from_axes(tuple(mesh.shape), {"pp": len(tuple(mesh.shape)) - 1}),
                num_microbatches=m,
                schedule=schedule,
            )
            tokens = jax.ShapeDtypeStruct((m * microbatch, cfg.block_size), jax.numpy.int32)
            lowered = jax.jit(pipe.value_and_grad).lower(
                pipe.place_io(io), pipe.stage_blocks(blocks), tokens, tokens
            )
            temp = int(lowered.compile().memory_analysis().temp_size_in_bytes)
            out.append(
                {
                    "schedule": schedule,
                    "m": m,
                    "stash_slots": pipe.table.stash_slots,
                    "temp_bytes": temp,
                    "temp_in_microbatch_activations": temp / act,
                }
            )
    return out


if __name__ == "__main__":
    import json
    import sys

    from benchmarks._harness import RESULTS, report

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 4))
    if "--memory" in sys.argv:
        rows = memory_sweep(mesh)
        for r in rows:
            print(r)
        (RESULTS / "pipeline_memory.json").write_text(json.dumps(rows, indent=2))
    else:
        rows = run(mesh)
        report("ttjax benchmarks: pipeline", rows, RESULTS / "pipeline.json")
        for r in rows:
            print(r.extra)
