"""``make bench``: run every benchmark side by side, print one table, write JSON.

python -m benchmarks.run                 # all suites
python -m benchmarks.run --only trace    # one suite
"""

from __future__ import annotations

import argparse
import importlib
import time

import ttjax as ttnn
from benchmarks._harness import RESULTS, Row, report

SUITES = {
    "dispatch": ("benchmarks.bench_dispatch", (2, 4)),
    "transfer": ("benchmarks.bench_transfer", (2, 4)),
    "trace": ("benchmarks.bench_trace", (2, 4)),
    "decode": ("benchmarks.bench_decode", (1, 8)),
    "models": ("benchmarks.bench_models", None),
    "train": ("benchmarks.bench_train", (2, 4)),
    "numerics": ("benchmarks.bench_numerics", (2, 4)),
    "pipeline": ("benchmarks.bench_pipeline", (1, 4)),
    "cp": ("benchmarks.bench_cp", (1, 8)),
    "sp": ("benchmarks.bench_sp", (2, 4)),
    "compile": ("benchmarks.bench_compile", (2, 4)),
    "fsdp": ("benchmarks.bench_fsdp", (1, 8)),
    "torch": ("benchmarks.bench_torch", None),
    "cost": ("benchmarks.bench_cost", None),
    "tessera": ("benchmarks.bench_tessera", None),
    "tt_transformers": ("benchmarks.bench_tt_transformers", (1, 8)),
    "memory": ("benchmarks.bench_memory", None),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SUITES), help=f"comma list of {sorted(SUITES)}")
    ns = parser.parse_args(argv)
    rows: list[Row] = []
    for name in ns.only.split(","):
        module_name, shape = SUITES[name]
        module = importlib.import_module(module_name)
        start = time.perf_counter()
        if shape is None:
            suite_rows = module.run()
        else:
            suite_rows = module.run(ttnn.open_mesh_device(ttnn.MeshShape(shape)))
        print(f"[{name}] {len(suite_rows)} figure(s) in {time.perf_counter() - start:.0f} s")
        report(f"ttjax benchmarks: {name}", suite_rows, RESULTS / f"{name}.json")
        rows += suite_rows
    report("ttjax benchmarks (ratio = subject / baseline, medians)", rows, RESULTS / "all.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
