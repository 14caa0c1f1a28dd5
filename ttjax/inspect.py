"""See what the compiler made of a ttjax program: HLO, collectives, bytes, memory, FLOPs.

:func:`inspect` lowers and compiles any function of ttjax Tensors (real or abstract, see
``ttjax.abstract_tensor``) and reports the StableHLO, the optimized HLO, every collective with
the mesh axes it runs over (replica groups mapped back to TT-NN cluster axes) and the bytes each
device sends (standard ring formulas), the compiled per-device memory and the FLOPs.

>>> def step(x, params):                 # two row-parallel linears, one all_reduce each
...     h = ttnn.all_reduce(ttnn.linear(x, params["w1"]))
...     return ttnn.all_reduce(ttnn.linear(h, params["w2"]))
>>> report = ttjax.inspect.inspect(step, x, {"w1": w, "w2": w})
>>> report.summary_lines()[0]           # report.print() shows these under a rich table
"collectives per step: 2 {'all-reduce': 2}"
>>> report.collective_counts()
{'all-gather': 0, 'reduce-scatter': 0, 'all-reduce': 2, 'collective-permute': 0, 'all-to-all': 0}

Command line: ``python -m ttjax.inspect pkg.module:target --mesh 2x4 --json out.json`` (or the
``ttjax inspect`` console script), where ``target(mesh_device, **kwargs)`` returns ``(fn, args)`` or ``(fn, args, options)`` (keyword
arguments of :func:`inspect`, e.g. ``{"donate_argnums": (1,)}``). ``--system t3000`` adds the
predicted step time (``ttjax.cost``); ``ttjax plan --model llama-3.1-70b --system galaxy --batch
128`` ranks a model's layouts by it.

Public names only; the implementation is :mod:`ttjax._src.tools.inspect`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.tools.inspect import (
    DEFAULT_PLANNER as DEFAULT_PLANNER,
    BranchWeights as BranchWeights,
    CollectiveReport as CollectiveReport,
    LoopReport as LoopReport,
    MemoryReport as MemoryReport,
    ProgramReport as ProgramReport,
    axes_of_groups as axes_of_groups,
    axes_of_pairs as axes_of_pairs,
    collective_reports as collective_reports,
    inspect as inspect,
    inspect_trace as inspect_trace,
    main as main,
    report_compiled as report_compiled,
)

_publish(globals(), "ttjax._src.tools.inspect")

if __name__ == "__main__":
    raise SystemExit(main())
