"""How long ``ttjax.cost`` takes to predict Llama-3.1-70B on a Galaxy: the issue's budget is 30 s.

One decode step (TP=32 over 8x4, 32 users, performance precision) is built on abstract inputs,
compiled, inspected and predicted (``models.llama.perf.predict``), in a fresh mesh; the figure is
the wall time against the 30 s budget (ratio <= 1), with the process CPU time in ``extra``.

    python -m benchmarks.bench_cost
"""

from __future__ import annotations

import time

from benchmarks._harness import Row, report
from models.llama import perf

BUDGET_S = 30.0


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
        )
    ]


if __name__ == "__main__":
    report("ttjax.cost: predicting a 70B step", run())
