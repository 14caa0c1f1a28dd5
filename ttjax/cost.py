"""How fast a compiled program runs on a Wormhole system: a step-time model read off the program.

Public names only; the implementation is :mod:`ttjax._src.tools.cost`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.tools.cost import (
    CALIBRATION as CALIBRATION,
    CALIBRATION_FILE as CALIBRATION_FILE,
    PHASES as PHASES,
    SYSTEMS as SYSTEMS,
    Calibration as Calibration,
    CollectiveCost as CollectiveCost,
    PlanRow as PlanRow,
    Prediction as Prediction,
    Sample as Sample,
    Term as Term,
    Workload as Workload,
    collective_time as collective_time,
    evaluate as evaluate,
    fit as fit,
    load_calibration as load_calibration,
    plan_notes as plan_notes,
    plan_table as plan_table,
    predict as predict,
    rank as rank,
    reference_row as reference_row,
    save_calibration as save_calibration,
    why_faster as why_faster,
    workload as workload,
)

_publish(globals(), "ttjax._src.tools.cost")
