"""Llama step times on Wormhole systems: the cost model's calibration rows and a layout search.

    python -m models.llama.perf calibrate            # fit ttjax.cost on the published rows, table
    python -m models.llama.perf calibrate --write    # ... and store the fit (ttjax/_src/tools/calibration.json)
    python -m models.llama.perf predict --config llama-3.1-70b --system galaxy --batch 32
    ttjax plan --model llama-3.1-70b --system galaxy --batch 128   # the layout search (plan())

Every program is ttjax's own Llama (``TtLlama``) compiled on abstract inputs, at the precision
tt-metal's ``tt_transformers`` runs in *performance* mode (models/tt_transformers/tt/
model_config.py ``ModelOptimizations.performance``: FF1/FF3 in bfloat4_b at LoFi, every other
weight and the KV cache in bfloat8_b at HiFi2; the LM head bfloat8_b, lm_head.py; SDPA prefill
at HiFi4), its CCLs in bfloat8_b (``ccl_dtype``) on one link (``num_reduce_scatter_links = 1``,
``num_all_gather_links = 2 if self.is_galaxy else 1``). The published rows run a 128-token prompt and 200 decode steps
(tt_transformers/PERF.md, demo/simple_text_demo.py), so the KV cache is read at ``context=256``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import ttjax as ttnn
from models.llama.config import LlamaConfig, get_config
from models.llama.model import TtLlama
from ttjax import cost
from ttjax.hardware import MathFidelity, get_system

# tt_transformers' precision recipes (ModelOptimizations), as TtLlama weight dtypes.
RECIPES: dict[str, dict[str, Any]] = {
    # performance(): FF1_FF3 BFP4 + LoFi; the rest keeps the default BFP8 / HiFi2.
    "performance": {
        "weight_dtypes": {
            "w_in": ttnn.bfloat4_b,
            "w_up": ttnn.bfloat4_b,
            "w_out": ttnn.bfloat8_b,
            "wqkv": ttnn.bfloat8_b,
            "wo": ttnn.bfloat8_b,
            "lm_head": ttnn.bfloat8_b,
        },
        "cache_dtype": ttnn.bfloat8_b,
        "ff13_fidelity": MathFidelity.LoFi,
    },
    # The default decoder configuration: BFP8 everywhere, HiFi2 (model_config.py, "Default is
    # BFP8/HIFI2 everywhere").
    "bfp8": {
        "weight_dtypes": dict.fromkeys(
            ("w_in", "w_up", "w_out", "wqkv", "wo", "lm_head"), ttnn.bfloat8_b
        ),
        "cache_dtype": ttnn.bfloat8_b,
        "ff13_fidelity": MathFidelity.HiFi2,
    },
}

# Positions a decode step attends to in the published runs: a 128-token prompt + up to 200 tokens.
CONTEXT = 256
PROMPT = 128


def fidelity_mix(
    cfg: LlamaConfig, recipe: str, phase: str, context: int
) -> dict[MathFidelity, float]:
    """Each math fidelity's share of a step's matmul FLOPs under ``recipe``."""
    hd, d, f = cfg.head_dim, cfg.dim, cfg.ffn_dim
    ff13 = 2 * 2 * d * f
    rest = 2 * d * f + 2 * d * (cfg.n_heads + 2 * cfg.n_kv_heads) * hd + 2 * d * d
    rest += 2 * d * cfg.vocab_size / cfg.n_layers
    sdpa = 2 * 2 * cfg.n_heads * hd * (context if phase == "decode" else context / 2)
    mix: dict[MathFidelity, float] = {}
    lofi = RECIPES[recipe]["ff13_fidelity"]
    mix[lofi] = mix.get(lofi, 0.0) + ff13
    mix[MathFidelity.HiFi2] = mix.get(MathFidelity.HiFi2, 0.0) + rest
    sdpa_fid = MathFidelity.HiFi4 if phase == "prefill" else MathFidelity.HiFi2
    mix[sdpa_fid] = mix.get(sdpa_fid, 0.0) + sdpa
    total = sum(mix.values())
    return {k: v / total for k, v in mix.items()}


def model(
    mesh: ttnn.MeshDevice,
    config: str = "llama-3.1-8b",
    batch: int = 1,
    context: int = CONTEXT,
    recipe: str = "performance",
) -> TtLlama:
    """An abstract (weightless) ``TtLlama``, TP over every chip of ``mesh``, at ``recipe``."""
    if recipe not in RECIPES:
        raise ttnn.errors.ConfigError(
            f"recipe={recipe!r} is not a precision recipe.\nfix: one of {sorted(RECIPES)}."
        )
    r = RECIPES[recipe]
    return TtLlama(
        get_config(config),
        None,
        mesh,
        mode="tp",
        batch=batch,
        dtype=ttnn.bfloat16,
        weight_dtype=ttnn.bfloat8_b,
        weight_dtypes=r["weight_dtypes"],
        cache_dtype=r["cache_dtype"],
        max_seq_len=context,
        scan_layers=True,
    )


def decode_target(
    mesh: ttnn.MeshDevice,
    config: str = "llama-3.1-8b",
    batch: int = 1,
    context: int = CONTEXT,
    recipe: str = "performance",
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """``ttjax inspect`` target: one decode step (``--system`` predicts it; ``users=batch``)."""
    m = model(mesh, config, batch, context, recipe)
    tokens = ttnn.abstract_tensor((batch, 1), ttnn.uint32, device=mesh)
    pos = ttnn.abstract_tensor((batch,), ttnn.int32, device=mesh)
    return m.decode_fn(), (m.params, m.caches, tokens, pos), _options(m, recipe, "decode", context)


def _options(m: TtLlama, recipe: str, phase: str, positions: int) -> dict[str, Any]:
    """``ttjax.inspect`` keywords of a step: the donated cache and what the prediction needs."""
    return {
        "donate_argnums": (1,),
        "phase": phase,
        "users": m.batch,
        "math_fidelity": fidelity_mix(m.config, recipe, phase, positions),
    }


def prefill_target(
    mesh: ttnn.MeshDevice,
    config: str = "llama-3.1-8b",
    batch: int = 1,
    prompt: int = PROMPT,
    recipe: str = "performance",
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """``ttjax inspect`` target: the prefill of a ``prompt``-token prompt (time to first token)."""
    m = model(mesh, config, batch, prompt, recipe)
    tokens = ttnn.abstract_tensor((batch, prompt), ttnn.uint32, device=mesh)

    def step(params: Any, caches: Any, tokens: ttnn.Tensor) -> Any:
        return m.forward(tokens, None, params, caches), caches

    return step, (m.params, m.caches, tokens), _options(m, recipe, "prefill", prompt)


def _mesh_for(system: str, tp: int) -> ttnn.MeshDevice:
    """A submesh of ``tp`` chips of ``system``'s shape (whole rows when it spans rows)."""
    _rows, cols = get_system(system).mesh_shape
    shape = (1, tp) if tp <= cols else (tp // cols, cols)
    return ttnn.open_mesh_device(ttnn.MeshShape(shape))


def predict(
    config: str,
    system: str,
    phase: str = "decode",
    tp: int | None = None,
    batch: int = 1,
    recipe: str = "performance",
    context: int = CONTEXT,
    calibration: cost.Calibration | None = None,
    num_links: int | None = None,
    collective_dtype: str = "bfloat8_b",
) -> tuple[cost.Prediction, Any]:
    """``(prediction, report)`` for one replica of TP=``tp`` (default: every chip) on ``system``."""
    s = get_system(system)
    mesh = _mesh_for(s.name, tp or s.num_chips)
    if phase == "decode":
        fn, args, opts = decode_target(mesh, config, batch, context, recipe)
    else:
        fn, args, opts = prefill_target(mesh, config, batch, PROMPT, recipe)
    users, mix = opts.pop("users"), opts.pop("math_fidelity")
    opts.pop("phase")
    report = ttnn.inspect.inspect(fn, *args, **opts, name=f"{config} {phase}")
    p = cost.predict(
        report,
        s,
        phase=phase,
        users=users,
        math_fidelity=mix,
        calibration=calibration,
        num_links=num_links,
        collective_dtype=collective_dtype,
    )
    return p, report


# ---------------------------------------------------------------------------------------------
# Calibration rows: published figures only
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """A published figure: a model, a layout on a system, and tok/s/u (decode) or TTFT (prefill)."""

    label: str
    config: str
    system: str
    tp: int
    phase: str
    batch: int
    published: float  # tok/s/user for decode, seconds for prefill
    source: str
    num_links: int | None = None  # the CCLs' num_links (None: every link the system has)
    collective_dtype: str = "bfloat8_b"  # tt_transformers' ccl_dtype (model_config.py)

    @property
    def seconds(self) -> float:
        return 1.0 / self.published if self.phase == "decode" else self.published


PERF_MD = "tt-metal models/tt_transformers/PERF.md (performance)"
# The guide's §8.2 runs models/demos/t3000/llama2_70b (its hybrid DP+TP perf test, §8.3.2): w1/w3
# bfloat4_b, w2 bfloat8_b (tt/llama_mlp_optimized.py) as the performance recipe, and CCLs on one
# link ("ALL_GATHER_NUM_LINKS": 1, tt/model_config.py).
SEED = "TT-NN guide §8.2 (seed 000/001)"
ROWS = (
    Row("8B N150 decode", "llama-3.1-8b", "n150", 1, "decode", 1, 28.3, PERF_MD),
    Row("8B N300 decode", "llama-3.1-8b", "n300", 2, "decode", 1, 44.2, PERF_MD),
    Row("8B T3K decode", "llama-3.1-8b", "t3000", 8, "decode", 1, 64.3, PERF_MD),
    Row("70B T3K decode", "llama-3.1-70b", "t3000", 8, "decode", 1, 16.6, PERF_MD),
    Row(
        "70B T3000 b32 decode", "llama-3.1-70b", "t3000", 8, "decode", 32, 15.1, SEED, 1, "bfloat16"
    ),
    Row(
        "70B Galaxy 4x(2x4) b128",
        "llama-3.1-70b",
        "galaxy",
        8,
        "decode",
        32,
        14.3,
        SEED,
        1,
        "bfloat16",
    ),
    Row("8B N150 TTFT", "llama-3.1-8b", "n150", 1, "prefill", 1, 0.104, PERF_MD),
    Row("8B N300 TTFT", "llama-3.1-8b", "n300", 2, "prefill", 1, 0.067, PERF_MD),
    Row("8B T3K TTFT", "llama-3.1-8b", "t3000", 8, "prefill", 1, 0.053, PERF_MD),
    Row("70B T3K TTFT", "llama-3.1-70b", "t3000", 8, "prefill", 1, 0.164, PERF_MD),
)


def samples(rows: Sequence[Row] = ROWS) -> list[cost.Sample]:
    """Each row's workload (compiled abstractly) with its published step time."""
    out = []
    for r in rows:
        p, _ = predict(
            r.config,
            r.system,
            r.phase,
            r.tp,
            r.batch,
            num_links=r.num_links,
            collective_dtype=r.collective_dtype,
        )
        out.append(cost.Sample(r.label, p.workload, r.seconds, r.source))
    return out


def calibration_table(
    rows: Sequence[Row], found: Sequence[cost.Sample], cal: cost.Calibration
) -> list[dict[str, Any]]:
    """Published vs predicted for every row under ``cal``."""
    table = []
    for r, s in zip(rows, found):
        p = cost.evaluate(s.workload, cal)
        pred = p.tokens_per_second_per_user if r.phase == "decode" else p.ttft_seconds
        table.append(
            {
                "row": r.label,
                "metric": "tok/s/u" if r.phase == "decode" else "TTFT ms",
                "published": r.published if r.phase == "decode" else r.published * 1e3,
                "predicted": pred if r.phase == "decode" else pred * 1e3,
                "error": pred / r.published - 1.0,
                "dominant": p.dominant,
                "source": r.source,
            }
        )
    return table


def _print_calibration(table: list[dict[str, Any]], cal: cost.Calibration) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title="ttjax.cost calibration: published vs predicted")
    for col in ("row", "metric", "published", "predicted", "error", "dominant term", "source"):
        t.add_column(col, justify="right" if col in ("published", "predicted", "error") else "left")
    for r in table:
        t.add_row(
            r["row"],
            r["metric"],
            f"{r['published']:.1f}",
            f"{r['predicted']:.1f}",
            f"{r['error']:+.1%}",
            r["dominant"],
            r["source"],
        )
    console = Console(width=200 if not sys.stdout.isatty() else None)
    console.print(t)
    c = cal.to_dict()
    console.print(
        f"fitted: DRAM efficiency {c['dram_efficiency']:.3f} "
        f"({c['dram_efficiency'] * 288:.0f} GB/s of 288), matmul efficiency "
        f"{c['compute_efficiency']:.3f}, per layer {c['layer_seconds']['decode'] * 1e6:.1f} us decode / "
        f"{c['layer_seconds']['prefill'] * 1e6:.1f} us prefill ({c['note']})"
    )


def calibrate(write: bool = False) -> tuple[cost.Calibration, list[dict[str, Any]]]:
    """Fit ``ttjax.cost`` on :data:`ROWS` (compiling each abstractly); ``write`` stores the fit."""
    found = samples(ROWS)
    cal = cost.fit(
        found,
        note=f"fitted by `python -m models.llama.perf calibrate --write` on {len(ROWS)} published "
        "rows (PERF.md Llama-3.1-8B/70B performance mode, seed §8.2), least squares on log error",
    )
    if write:
        cost.save_calibration(cal)
    return cal, calibration_table(ROWS, found, cal)


# ---------------------------------------------------------------------------------------------
# Layout search
# ---------------------------------------------------------------------------------------------


# Published tok/s/user of layouts (model, system, tp, users per replica) at performance precision.
PUBLISHED = {
    ("llama-3.1-70b", "galaxy", 8, 32): (14.3, SEED + ": four TP=8 (2x4) replicas"),
    ("llama-3.1-70b", "t3000", 8, 32): (15.1, SEED),
    ("llama-3.1-70b", "t3000", 8, 1): (16.6, PERF_MD),
    ("llama-3.1-8b", "t3000", 8, 1): (64.3, PERF_MD),
    ("llama-3.1-8b", "t3000", 2, 1): (39.6, PERF_MD + ", T3K (DP=4)"),
    ("llama-3.1-8b", "t3000", 1, 1): (24.9, PERF_MD + ", T3K (DP=8)"),
}


def _tp_sizes(cfg: LlamaConfig, chips: int) -> list[int]:
    out = []
    for tp in range(1, chips + 1):
        if chips % tp:
            continue
        if tp > 1 and (cfg.n_heads % tp or cfg.ffn_dim % tp or cfg.vocab_size % tp):
            continue
        if tp > 1 and cfg.n_kv_heads % tp and tp % cfg.n_kv_heads:
            continue
        out.append(tp)
    return out


def plan(
    model: str = "llama-3.1-70b",
    system: str = "galaxy",
    batch: int | None = None,
    batch_per_replica: int | None = None,
    recipes: Sequence[str] = ("performance", "bfp8"),
    context: int = CONTEXT,
    num_links: int | None = None,
) -> list[cost.PlanRow]:
    """Every layout of ``model`` on ``system`` (TP size; DP replicas as submeshes; batch per
    replica; weight recipe), compiled abstractly and predicted, best tok/s/user first.

    ``batch``: users over the whole system (split over the replicas); or ``batch_per_replica``.
    Layouts whose chip memory exceeds 12 GB are kept but marked (and ranked last); a batch that
    does not split over a layout's replicas skips it. ``num_links``: the links the CCLs use
    (default: every link the system has between neighbours).
    """
    if (batch is None) == (batch_per_replica is None):
        raise ttnn.errors.ConfigError(
            f"plan: batch={batch!r}, batch_per_replica={batch_per_replica!r}.\n"
            "fix: give exactly one of them."
        )
    s = get_system(system)
    try:
        cfg = get_config(model)
    except KeyError as e:
        raise ttnn.errors.ConfigError(
            f"plan: {e.args[0]}.\nfix: pass one of those names."
        ) from None
    for name, value in (("batch", batch), ("batch_per_replica", batch_per_replica)):
        if value is not None and int(value) < 1:
            raise ttnn.errors.ConfigError(f"plan: {name}={value!r}.\nfix: at least 1 user.")
    rows = []
    for tp in _tp_sizes(cfg, s.num_chips):
        dp = s.num_chips // tp
        if batch is not None:
            if batch % dp:
                continue
            b = batch // dp
        else:
            b = int(batch_per_replica or 1)
        for recipe in recipes:
            start = time.perf_counter()
            p, report = predict(
                cfg.name, s.name, "decode", tp, b, recipe, context, num_links=num_links
            )
            pub = PUBLISHED.get((cfg.name, s.name, tp, b)) if recipe == "performance" else None
            rows.append(
                cost.PlanRow(
                    layout=f"DP={dp} x TP={tp}" if dp > 1 else f"TP={tp}",
                    tp=tp,
                    dp=dp,
                    batch_per_replica=b,
                    recipe=recipe,
                    prediction=p,
                    collectives_per_step=sum(report.collective_counts().values()),
                    seconds=time.perf_counter() - start,
                    published=None if pub is None else pub[0],
                    source="" if pub is None else pub[1],
                )
            )
    if not rows:
        raise ttnn.errors.ConfigError(
            f"plan: batch={batch} splits over none of {cfg.name}'s layouts on {s.name} "
            f"(replicas: {[s.num_chips // tp for tp in _tp_sizes(cfg, s.num_chips)]}).\n"
            "fix: a batch divisible by a replica count, or --batch-per-replica."
        )
    return cost.rank(rows)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m models.llama.perf", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("calibrate", help="fit ttjax.cost on the published rows and print the table")
    c.add_argument(
        "--write", action="store_true", help="store the fit in ttjax/_src/tools/calibration.json"
    )
    c.add_argument("--json", help="write the table here")
    p = sub.add_parser("predict", help="predict one layout")
    p.add_argument("--config", default="llama-3.1-8b")
    p.add_argument("--system", default="n150")
    p.add_argument("--phase", choices=cost.PHASES, default="decode")
    p.add_argument("--tp", type=int, default=None, help="chips per replica (default: all)")
    p.add_argument("--batch", type=int, default=1, help="users per replica")
    p.add_argument("--recipe", choices=sorted(RECIPES), default="performance")
    p.add_argument("--context", type=int, default=CONTEXT)
    ns = parser.parse_args(argv)
    if ns.command == "calibrate":
        cal, table = calibrate(write=ns.write)
        _print_calibration(table, cal)
        if ns.json:
            with open(ns.json, "w") as f:
                json.dump({"calibration": cal.to_dict(), "rows": table}, f, indent=2)
        return 0
    start = time.perf_counter()
    pred, _ = predict(ns.config, ns.system, ns.phase, ns.tp, ns.batch, ns.recipe, ns.context)
    for line in pred.summary_lines():
        print(line)
    print(f"compiled and predicted in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
