"""How long ``ttjax.cost`` takes to predict Llama-3.1-70B: the whole-program model on a Galaxy
(budget 30 s) and the per-op model on a T3000 (budget 120 s, issue 39).

Whole program: one decode step (TP=32 over 8x4, 32 users, performance precision) is built on
abstract inputs, compiled, inspected and predicted (``models.llama.perf.predict``). Per op: the
TT-NN ops of ttjax's own Llama-3.1-70B decode (TP=8 over 2x4, 32 users) are captured on abstract
inputs (``ttjax.cost.capture``, nothing compiled) and priced op by op (``ttjax.cost.price``),
and every published row of ``docs/cost_model.md`` is priced on tt_transformers' program
(``ttjax.cost.evaluate_rows``). Each figure is the wall time against its budget (ratio <= 1).

    python -m benchmarks.bench_cost
"""

from __future__ import annotations

import statistics
import time

import ttjax as ttnn
from benchmarks._harness import Row, report
from models.llama import perf
from ttjax import cost

BUDGET_S = 30.0
PER_OP_BUDGET_S = 120.0


def per_op_rows() -> list[Row]:
    wall = time.perf_counter()
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
    fn, args, _ = perf.decode_target(mesh, "llama-3.1-70b", batch=32)
    ops = cost.capture(fn, *args)
    p = cost.price(ops, "t3000", users=32)
    wall = time.perf_counter() - wall
    rows_wall = time.perf_counter()
    results = cost.evaluate_rows()
    rows_wall = time.perf_counter() - rows_wall
    oos = [abs(r["error"]) for r in results if not r["fitted"]]
    return [
        Row(
            "capture + price ttjax's Llama-3.1-70B decode op by op on a T3000 (batch 32)",
            "ttjax.cost.capture + price",
            "120 s budget",
            wall,
            PER_OP_BUDGET_S,
            "ratio <= 1",
            extra={
                "ops": len(ops),
                "runs_per_step": sum(o.count for o in ops),
                "tokens_per_second_per_user": p.tokens_per_second_per_user,
                "dominant": p.dominant,
            },
        ),
        Row(
            f"price {len(results)} published rows on tt_transformers' program",
            "ttjax.cost.evaluate_rows",
            "120 s budget",
            rows_wall,
            PER_OP_BUDGET_S,
            "ratio <= 1",
            extra={"median_abs_error_out_of_sample": statistics.median(oos)},
        ),
    ]


def run() -> list[Row]:
    wall, cpu = time.perf_counter(), time.process_time()
    prediction, _ = perf.predict("llama-3.1-70b", "galaxy", "decode", tp=32, batch=32)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return [
        Row(
            "predict Llama-3.1-70B decode on 8x4 (build + compile + inspect + cost)",
            "ttjax.cost on abstract inputs",
            "30 s budget",
            wall,
            BUDGET_S,
            "ratio <= 1",
            extra={
                "cpu_s": cpu,
                "tokens_per_second_per_user": prediction.tokens_per_second_per_user,
                "dominant": prediction.dominant,
            },
        ),
        *per_op_rows(),
    ]


if __name__ == "__main__":
    report("ttjax.cost: predicting a 70B step", run())
