"""Compile time of the TP+DDP NanoGPT train step against its depth (2x4: DDP 2 x TP 4).

The training models run their blocks under ``lax.scan`` over parameters stacked ``[n_layer, ...]``
(``ttjax.ttml.stacked``), so one block is traced and compiled whatever the depth. Each figure is
``TrainStep``'s jitted step lowered and compiled (``.lower(...).compile()``) on abstract inputs
(shapes and shardings, no data), a fresh step per measure. The figure is the process's CPU time
for trace + lower + compile: the work done, which other jobs on shared cores move far less than
the wall time (printed, and kept in ``extra``); ratio = time at n layers / time at the fewest
layers measured. ``--unrolled`` also times the same step with the blocks in a Python loop
(what the models did before), for contrast: keep its layer counts small (48 took minutes).

    python -m benchmarks.bench_compile                      # 4, 16, 48, 96 layers
    python -m benchmarks.bench_compile --layers 4,96
    python -m benchmarks.bench_compile --layers 4,16 --unrolled
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding

import ttjax as ttnn
from benchmarks._harness import Row, report
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_specs
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.ops.loss import cross_entropy_loss
from ttjax.ttml.stacked import unstack_blocks
from ttjax.ttml.train import OptimizerSettings, TrainState, TrainStep, make_optimizer

CONFIG = GPTConfig(vocab_size=256, block_size=64, n_layer=4, n_head=4, n_embd=128)
BATCH = 8
LAYERS = (4, 16, 48, 96)
OPT = OptimizerSettings(learning_rate=1e-3, warmup_steps=10, total_steps=1000)


def unrolled_loss(model: GPT) -> Any:
    """``model.loss`` with the blocks in a Python loop over the stacked rows (one trace each)."""

    def loss(params: Any, idx: Any, targets: Any) -> Any:
        x = model.wte(params["wte"], idx) + params["wpe"][: idx.shape[-1]]
        for p in unstack_blocks(params["blocks"]):
            x = model.block(p, x)
        logits = model.wte.attend(params["wte"], model.ln_f(params["ln_f"], x))
        return cross_entropy_loss(logits, targets)

    return loss


def abstract_inputs(step: TrainStep, config: GPTConfig) -> tuple[TrainState, Any]:
    """The step's ``(state, tokens)`` as shapes with their shardings: nothing is allocated."""
    params = jax.eval_shape(lambda: init_params(config, 0))
    shardings = step.state_shardings(params)
    state = TrainState(
        jax.ShapeDtypeStruct((), jnp.int32),
        params,
        jax.eval_shape(step.optimizer.init, params),
    )
    state = jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), state, shardings
    )
    tokens = jax.ShapeDtypeStruct(
        (1, BATCH, config.block_size + 1),
        jnp.int32,
        sharding=NamedSharding(step.mesh, step.batch_spec),
    )
    return state, tokens


def compile_seconds(
    par: ParallelismContext, n_layer: int, unrolled: bool = False
) -> dict[str, float]:
    """Seconds to trace + lower and to compile a fresh TP+DDP step of ``n_layer`` blocks (wall
    time, and the process's CPU time: less moved by other jobs on a shared machine)."""
    config = dataclasses.replace(CONFIG, n_layer=n_layer)
    model = GPT(config)
    loss = unrolled_loss(model) if unrolled else model.loss
    step = TrainStep(
        loss, param_specs(config, par), par, make_optimizer(OPT), schedule=OPT.schedule()
    )
    state, tokens = abstract_inputs(step, config)
    start, cpu = time.perf_counter(), time.process_time()
    lowered = step._step.lower(state, tokens)
    lowered_at = time.perf_counter()
    lowered.compile()
    done = time.perf_counter()
    return {
        "lower_s": lowered_at - start,
        "compile_s": done - lowered_at,
        "total_s": done - start,
        "cpu_s": time.process_time() - cpu,
    }


def measure(
    par: ParallelismContext, layers: Sequence[int], repeats: int, unrolled: bool = False
) -> dict[int, dict[str, float]]:
    """Median (over ``repeats``) lower / compile / total seconds per layer count."""
    out = {}
    for n in layers:
        runs = [compile_seconds(par, n, unrolled) for _ in range(repeats)]
        out[n] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    return out


def run(
    mesh: ttnn.MeshDevice,
    layers: Sequence[int] = LAYERS,
    repeats: int = 1,
    unrolled: bool = False,
) -> list[Row]:
    par = ParallelismContext.from_axes(mesh, ddp_axis=0, tp_axis=1)
    layers = sorted(layers)
    compile_seconds(par, layers[0])  # warm JAX's own caches (first-use imports, tracing rules)
    scanned = measure(par, layers, repeats)
    base = scanned[layers[0]]["cpu_s"]
    rows = [
        Row(
            f"compile TP+DDP NanoGPT step 2x4, {n} layers",
            f"lax.scan, {n} layers",
            f"lax.scan, {layers[0]} layers",
            t["cpu_s"],
            base,
            "ratio <= 2",
            extra={"layers": n, **t, "config": str(dataclasses.replace(CONFIG, n_layer=n))},
        )
        for n, t in scanned.items()
    ]
    if unrolled:
        for n, t in measure(par, layers, repeats, unrolled=True).items():
            rows.append(
                Row(
                    f"compile TP+DDP NanoGPT step 2x4, {n} layers, unrolled",
                    f"Python loop, {n} layers",
                    f"lax.scan, {n} layers",
                    t["cpu_s"],
                    scanned[n]["cpu_s"],
                    "-",
                    extra={"layers": n, **t},
                )
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--layers",
        default=",".join(map(str, LAYERS)),
        help="comma list of block counts (default %(default)s)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="compiles per count (median)")
    parser.add_argument(
        "--unrolled", action="store_true", help="also time the Python-loop step (slow when deep)"
    )
    parser.add_argument("--json", default=None, help="write the rows and the machine here")
    ns = parser.parse_args(argv)
    layers = [int(x) for x in ns.layers.split(",")]
    rows = run(ttnn.open_mesh_device(ttnn.MeshShape(2, 4)), layers, ns.repeats, ns.unrolled)
    report("compile CPU time of the TP+DDP NanoGPT train step", rows, ns.json)
    for r in rows:
        e = r.extra
        print(
            f"{r.subject:>24}: CPU {e['cpu_s']:6.2f} s (x{r.ratio:.2f} of {r.baseline}); wall: "
            f"trace+lower {e['lower_s']:5.2f} s, compile {e['compile_s']:6.2f} s, "
            f"total {e['total_s']:6.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
