"""See what the compiler made of a ttjax program: HLO, collectives, bytes, memory, FLOPs.

Public names only; the implementation is :mod:`ttjax._src.tools.inspect`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.tools.inspect import (
    DEFAULT_PLANNER as DEFAULT_PLANNER,
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
