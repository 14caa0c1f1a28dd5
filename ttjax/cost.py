"""How fast a compiled program runs on a Wormhole system: a step-time model read off the program.

:func:`predict` takes a :class:`ttjax.inspect.ProgramReport` (any program, compiled on abstract
inputs) and a system (``n150``, ``n300``, ``t3000``, ``galaxy``) and adds up a few terms, each
from the compiled program and a figure of tt-metal's documents (``ttjax.hardware``):

* **DRAM**: the bytes each chip reads per step (every argument it uses whole: weights in their TT
  dtypes, bfloat8_b at 1.0625 and bfloat4_b at 0.5625 bytes per element, the KV cache; only the
  rows of a gathered table) over the chip's DRAM bandwidth;
* **compute**: the matmul FLOPs per chip over the Tensix rate at the math fidelity used;
* **Ethernet**: each collective scheduled on the system's topology (ring or line, links per
  neighbour): per-hop latency x hops plus the busiest link's bytes over its bandwidth;
* **fixed cost**: one per decoder layer (the program's layer loop trip count), fitted; it holds
  what the other terms do not see (small ops, dispatch, synchronisation).

DRAM and compute overlap (a decode matmul streams its weights while it multiplies), so a step is
``max(DRAM, compute) + Ethernet + fixed``. Four free parameters (DRAM and matmul efficiency, and
the per-layer cost for traced decode and for untraced prefill)
are fitted by :func:`fit` on published Llama step times only (``python -m models.llama.perf
calibrate``); they live in ``ttjax/_src/tools/calibration.json`` with a note of how they were fitted.

>>> h = ttnn.abstract_tensor((32, 8192), ttnn.bfloat16, device=mesh)  # 32 users' activations
>>> report = ttjax.inspect.inspect(lambda t: ttnn.all_reduce(t), h)
>>> p = ttjax.cost.predict(report, "t3000", users=32, layers=0)
>>> [t.name for t in p.terms], p.dominant
(['DRAM', 'compute', 'Ethernet', 'layer fixed'], 'Ethernet')
>>> round(p.term("Ethernet").seconds * 1e6, 1)   # 8 hops x 650 ns + 896 KiB over 2 x 12.5 GB/s
41.9

**Per op** (:func:`price`, :func:`capture`, :func:`predict_model`): a TT-NN program priced op by
op, one rule per op family citing its tt-metal source (matmul cycles per tile at its fidelity on
its cores, or its DRAM reads at the measured DRAM-sharded/interleaved rates; SDPA decode; CCLs on
the system's Ethernet; bandwidth-bound ops from DRAM or L1), each op at least a per-op floor;
the step is the sum along the program. :func:`capture` reads the ops a ttjax program dispatches
(abstract tensors, nothing compiled); :func:`model_program` writes out tt_transformers' decoder
for any Hugging Face config (:func:`get_model`), ``predict_model(..., program="llama3_70b_galaxy")``
tt-metal's Galaxy Llama. ``docs/cost_model.md`` has the rules and every published row, predicted.

Public names only; the implementation is :mod:`ttjax._src.tools.cost`, :mod:`ttjax._src.tools.opcost`
and :mod:`ttjax._src.tools.opmodels`.
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
from ttjax._src.tools.opcost import (  # the per-op model
    OP_CALIBRATION as OP_CALIBRATION,
    OpCalibration as OpCalibration,
    OpCost as OpCost,
    OpPrediction as OpPrediction,
    OpRecord as OpRecord,
    TensorInfo as TensorInfo,
    capture as capture,
    family_of as family_of,
    load_op_calibration as load_op_calibration,
    price as price,
    price_op as price_op,
    recording as recording,
    save_op_calibration as save_op_calibration,
)
from ttjax._src.tools.opmodels import (
    MODELS as MODELS,
    ModelSpec as ModelSpec,
    OpPlanRow as OpPlanRow,
    evaluate_rows as evaluate_rows,
    fit_per_op as fit_per_op,
    get_model as get_model,
    model_program as model_program,
    plan_model as plan_model,
    predict_model as predict_model,
    spec_from_hf as spec_from_hf,
)

_publish(globals(), "ttjax._src.tools.cost", "ttjax._src.tools.opcost", "ttjax._src.tools.opmodels")
