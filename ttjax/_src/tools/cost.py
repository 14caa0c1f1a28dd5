"""How fast a compiled program runs on a Wormhole system: a step-time model read off the program.

The implementation of :mod:`ttjax.cost`, whose docstring says more.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ttjax._src.core.errors import ConfigError
from ttjax._src.core.hardware import MathFidelity
from ttjax._src.core.systems import SYSTEMS, System, get_system, tensix_flops

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")
PHASES = ("decode", "prefill")
# Bytes per element as TT-NN stores them on device (block floats: a 16-value group shares an
# exponent byte: 1088 and 576 bytes per 32x32 tile; tech_reports/data_formats).
DTYPE_BYTES = {
    "bfloat16": 2.0,
    "float32": 4.0,
    "uint32": 4.0,
    "int32": 4.0,
    "uint16": 2.0,
    "uint8": 1.0,
    "bfloat8_b": 1.0625,
    "bfloat4_b": 0.5625,
}
_COLLECTIVE_DTYPES = ("bfloat16", "float32", "bfloat8_b", "bfloat4_b")  # what a CCL may carry
_FLOAT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}  # HLO float types a collective may carry


@dataclass(frozen=True)
class Calibration:
    """The fitted parameters of the step-time model (see the module docstring).

    ``dram_efficiency`` and ``compute_efficiency`` scale the published DRAM bandwidth and Tensix
    rate; ``layer_seconds`` is a fixed cost per decoder layer, per phase (decode runs traced,
    prefill is dispatched op by op).
    """

    dram_efficiency: float = 1.0
    compute_efficiency: float = 1.0
    layer_seconds: Mapping[str, float] = field(
        default_factory=lambda: {"decode": 0.0, "prefill": 0.0}
    )
    note: str = "unfitted: published hardware figures only"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "layer_seconds": dict(self.layer_seconds)}


def read_calibration(
    path: str | Path, key: str | None, per_phase: str, refit: str
) -> dict[str, Any] | None:
    """The fitted factors stored in the calibration file ``path`` (JSON), under ``key`` (None:
    the top level), checked: ``dram_efficiency`` and ``compute_efficiency`` in (0, 1.5],
    ``per_phase`` a float per :data:`PHASES`, ``note``; None when ``key`` is absent. One reader
    for both cost models (``refit`` is the command a bad file's message names)."""
    where = f"calibration file {str(path)!r}" + (f": {key}" if key else "")
    fix = f"fix: refit it with `{refit}`."
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"calibration file {str(path)!r} cannot be read ({e}).\n{fix}") from None
    if key is not None:
        raw = raw.get(key) if isinstance(raw, dict) else None
        if raw is None:
            return None
    try:
        dram, compute = float(raw["dram_efficiency"]), float(raw["compute_efficiency"])
        phased = {p: float(raw[per_phase][p]) for p in PHASES}
        note = str(raw.get("note", ""))
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{where} lacks or mistypes {e}.\n{fix}") from None
    if not (0 < dram <= 1.5 and 0 < compute <= 1.5):
        raise ConfigError(f"{where}: efficiencies {dram}, {compute} are outside (0, 1.5].\n{fix}")
    return {"dram_efficiency": dram, "compute_efficiency": compute, per_phase: phased, "note": note}


def load_calibration(path: str | Path = CALIBRATION_FILE) -> Calibration:
    """The :class:`Calibration` stored at ``path`` (JSON, validated)."""
    raw = read_calibration(
        path, None, "layer_seconds", "python -m models.llama.perf calibrate --write"
    )
    return Calibration() if raw is None else Calibration(**raw)


@dataclass(frozen=True)
class CollectiveCost:
    """One collective of the program on the system's Ethernet (per execution, then x runs)."""

    kind: str
    mesh_axes: tuple[str, ...]
    group_size: int
    topology: str
    links: int
    hops: int
    bytes_per_device: float
    executions: int
    latency_seconds: float
    transfer_seconds: float

    @property
    def seconds(self) -> float:
        """Ethernet time of all its executions in one step (latency + transfer)."""
        return self.executions * (self.latency_seconds + self.transfer_seconds)


@dataclass(frozen=True)
class Workload:
    """What one step asks of each chip, read off the compiled program (before calibration)."""

    system: System
    phase: str
    users: int
    replicas: int
    program_chips: int
    dram_bytes: float
    matmul_flops: float
    fidelity: Mapping[MathFidelity, float]
    collectives: tuple[CollectiveCost, ...]
    layers: int
    resident_bytes: int | None
    links: int = 1

    @property
    def dram_seconds_at_peak(self) -> float:
        return self.dram_bytes / self.system.dram_bandwidth

    @property
    def compute_seconds_at_peak(self) -> float:
        cores = self.system.compute_cores
        return sum(
            share * self.matmul_flops / tensix_flops(f, cores) for f, share in self.fidelity.items()
        )

    @property
    def ethernet_seconds(self) -> float:
        return sum(c.seconds for c in self.collectives)


@dataclass(frozen=True)
class Term:
    """One term of a prediction: its name, seconds per step, and where it comes from."""

    name: str
    seconds: float
    detail: str
    hidden: bool = False  # overlapped by a larger term (DRAM vs compute)


@dataclass(frozen=True)
class Prediction:
    """A predicted step: every term, the total, and what it means for tokens.

    Decode: ``tokens_per_second_per_user`` (1 / step) and ``tokens_per_second`` (all users of
    all replicas). Prefill: ``ttft_seconds`` (the step). ``fits`` says whether the chip-resident
    bytes fit in a chip's DRAM.
    """

    workload: Workload
    calibration: Calibration
    terms: tuple[Term, ...]

    @property
    def step_seconds(self) -> float:
        # a floor of 1 ns keeps the rates finite for an empty program
        return max(float(sum(t.seconds for t in self.terms if not t.hidden)), 1e-9)

    @property
    def tokens_per_second_per_user(self) -> float:
        return 1.0 / self.step_seconds

    @property
    def tokens_per_second(self) -> float:
        w = self.workload
        return w.users * w.replicas / self.step_seconds

    @property
    def ttft_seconds(self) -> float:
        return self.step_seconds

    @property
    def dominant(self) -> str:
        """The name of the largest term of the step."""
        return max((t for t in self.terms if not t.hidden), key=lambda t: t.seconds).name

    @property
    def fits(self) -> bool:
        r = self.workload.resident_bytes
        return r is None or r <= self.workload.system.dram_bytes

    def term(self, name: str) -> Term:
        for t in self.terms:
            if t.name == name:
                return t
        raise ConfigError(f"no term {name!r}.\nfix: one of {[t.name for t in self.terms]}.")

    def headline(self) -> str:
        w = self.workload
        where = f"{w.system.name}" + (
            f" ({w.replicas} replicas of {w.program_chips} chips)" if w.replicas > 1 else ""
        )
        if w.phase == "prefill":
            return (
                f"predicted on {where}: time to first token {self.ttft_seconds * 1e3:.1f} ms "
                f"(dominant: {self.dominant})"
            )
        return (
            f"predicted on {where}: {self.tokens_per_second_per_user:.1f} tok/s/user, "
            f"{self.tokens_per_second:.1f} tok/s at {w.users * w.replicas} users "
            f"(step {self.step_seconds * 1e3:.2f} ms, dominant: {self.dominant})"
        )

    def summary_lines(self) -> list[str]:
        lines = [self.headline()]
        for t in self.terms:
            mark = " (overlapped, not added)" if t.hidden else ""
            lines.append(f"  {t.name:<18} {t.seconds * 1e3:9.3f} ms  {t.detail}{mark}")
        w = self.workload
        if w.resident_bytes is not None:
            lines.append(
                f"  chip memory: {w.resident_bytes / 1e9:.2f} GB of {w.system.dram_bytes / 1e9:.0f}"
                f" GB{'' if self.fits else ' -- does NOT fit'}"
            )
        lines.append(f"  calibration: {self.calibration.note}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "system": w.system.name,
            "phase": w.phase,
            "users": w.users,
            "replicas": w.replicas,
            "step_seconds": self.step_seconds,
            "tokens_per_second_per_user": self.tokens_per_second_per_user,
            "tokens_per_second": self.tokens_per_second,
            "ttft_seconds": self.ttft_seconds if w.phase == "prefill" else None,
            "dominant": self.dominant,
            "fits": self.fits,
            "resident_bytes": w.resident_bytes,
            "dram_bytes": w.dram_bytes,
            "matmul_flops": w.matmul_flops,
            "layers": w.layers,
            "terms": [asdict(t) for t in self.terms],
            "collectives": [asdict(c) for c in w.collectives],
            "calibration": self.calibration.to_dict(),
        }


# ---------------------------------------------------------------------------------------------
# Collectives on Ethernet
# ---------------------------------------------------------------------------------------------


def collective_time(
    kind: str,
    bytes_per_device: float,
    group_size: int,
    system: System | str,
    links: int | None = None,
) -> tuple[str, int, float, float]:
    """``(topology, hops, latency seconds, transfer seconds)`` of one collective.

    ``bytes_per_device`` is the ring-formula figure (what each chip sends; ``ttjax.inspect``).
    A ring runs both directions, each carrying half: transfer ``bytes / (2 x links x bw)`` and
    ``ceil((N-1)/2)`` hops per phase; a line's busiest (middle) link carries ``N/2`` of the ``N``
    chunks each way: transfer ``bytes x N / (2(N-1)) / (links x bw)``, ``N-1`` hops per phase.
    An all-reduce is two phases (reduce-scatter + all-gather); a permute is one hop.

    >>> collective_time("all-reduce", 2 * 7 / 8 * 1e6, 8, "t3000")[:2]
    ('ring', 8)
    """
    s = get_system(system)
    n = int(group_size)
    if n <= 1 or bytes_per_device <= 0:
        return "none", 0, 0.0, 0.0
    k = s.links if links is None else int(links)
    if k < 1:
        raise ConfigError(
            f"a {kind} over {n} chips on {s.name}, which has no Ethernet links between chips.\n"
            "fix: predict on a system with as many chips as the program's mesh."
        )
    bw = k * s.link_bandwidth
    if kind == "collective-permute":
        return "point-to-point", 1, s.hop_seconds, bytes_per_device / bw
    phases = 2 if kind == "all-reduce" else 1
    topo = s.topology(n)
    if topo == "ring":
        hops = phases * math.ceil((n - 1) / 2)
        transfer = bytes_per_device / (2 * bw)
    else:
        hops = phases * (n - 1)
        transfer = bytes_per_device * n / (2 * (n - 1)) / bw
    return topo, hops, hops * s.hop_seconds, transfer


def _collective_costs(
    report: Any, system: System, collective_dtype: str | None, links: int
) -> tuple[CollectiveCost, ...]:
    out = []
    for c in report.collectives:
        scale = 1.0
        if collective_dtype is not None and c.dtype in _FLOAT_BYTES:
            scale = DTYPE_BYTES[collective_dtype] / _FLOAT_BYTES[c.dtype]
        bpd = c.bytes_per_device * scale
        topo, hops, lat, xfer = collective_time(c.kind, bpd, c.group_size, system, links)
        out.append(
            CollectiveCost(
                kind=c.kind,
                mesh_axes=tuple(c.mesh_axes),
                group_size=c.group_size,
                topology=topo,
                links=links,
                hops=hops,
                bytes_per_device=bpd,
                executions=c.executions,
                latency_seconds=lat,
                transfer_seconds=xfer,
            )
        )
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Workload and prediction
# ---------------------------------------------------------------------------------------------


def _fidelity_mix(math_fidelity: Any) -> dict[MathFidelity, float]:
    if isinstance(math_fidelity, MathFidelity):
        return {math_fidelity: 1.0}
    if isinstance(math_fidelity, str):
        try:
            return {MathFidelity(math_fidelity.lower()): 1.0}
        except ValueError:
            pass
    if isinstance(math_fidelity, Mapping) and math_fidelity:
        mix = {
            MathFidelity(getattr(k, "value", str(k).lower())): float(v)
            for k, v in math_fidelity.items()
        }
        total = sum(mix.values())
        if total > 0 and all(v >= 0 for v in mix.values()):
            return {k: v / total for k, v in mix.items()}
    raise ConfigError(
        f"math_fidelity={math_fidelity!r} is not a fidelity or a {{fidelity: share}} mix.\n"
        "fix: e.g. ttnn.MathFidelity.HiFi2, 'lofi', or {MathFidelity.LoFi: 0.7, MathFidelity.HiFi2: 0.3}."
    )


def workload(
    report: Any,
    system: System | str,
    *,
    phase: str = "decode",
    users: int = 1,
    math_fidelity: Any = MathFidelity.HiFi2,
    collective_dtype: str | None = "bfloat16",
    layers: int | None = None,
    num_links: int | None = None,
) -> Workload:
    """The per-chip demands of one step of ``report``'s program on ``system``.

    ``users``: sequences one program step serves (the batch of one replica). The program may run
    on a submesh: the system then holds ``system chips / program chips`` replicas of it (data
    parallel, as TT-NN's hybrid DP+TP). ``collective_dtype``: the element type collectives are
    costed in (TT-NN runs them in the activations' or a CCL dtype; XLA's CPU backend upcasts bf16
    ones to f32, so every float collective is costed at this size); None keeps the compiled
    one. ``layers``: decoder layers (default: the trip count of the program's layer loop, else
    1). ``num_links``: the Ethernet links the program's CCLs use (TT-NN's ``num_links=``;
    default: all the system has between neighbours; more than it has is capped).
    """
    s = get_system(system)
    links = s.links if num_links is None else min(int(num_links), s.links)
    if num_links is not None and int(num_links) < 1:
        raise ConfigError(f"num_links={num_links!r}: a CCL uses at least one link.\nfix: >= 1.")
    if phase not in PHASES:
        raise ConfigError(f"phase={phase!r} is not a step kind.\nfix: use one of {PHASES}.")
    if int(users) < 1:
        raise ConfigError(f"users={users!r}: a step serves at least one user.\nfix: users >= 1.")
    if collective_dtype is not None and collective_dtype not in _COLLECTIVE_DTYPES:
        raise ConfigError(
            f"collective_dtype={collective_dtype!r} is unknown.\nfix: one of {sorted(_COLLECTIVE_DTYPES)} or None."
        )
    chips = int(np.prod(report.mesh_shape))
    if chips > s.num_chips or s.num_chips % chips:
        raise ConfigError(
            f"a program on a {'x'.join(map(str, report.mesh_shape))} mesh ({chips} chips) does not "
            f"tile a {s.name} ({s.num_chips} chips).\nfix: compile it on a mesh whose chip count "
            f"divides {s.num_chips}, or pick a larger system."
        )
    if report.dram_read_bytes is None or report.matmul_flops is None:
        raise ConfigError(
            f"{report.name}: the report has no byte/FLOP analysis of its HLO.\n"
            "fix: make it with ttjax.inspect.inspect or report_compiled."
        )
    loop = report.layer_loop
    n_layers = int(layers) if layers is not None else (loop.trip_count if loop else 1) or 1
    mem = report.memory
    return Workload(
        system=s,
        phase=phase,
        users=int(users),
        replicas=s.num_chips // chips,
        program_chips=chips,
        dram_bytes=float(report.dram_read_bytes),
        matmul_flops=float(report.matmul_flops),
        fidelity=_fidelity_mix(math_fidelity),
        collectives=_collective_costs(report, s, collective_dtype, links),
        links=links,
        layers=n_layers,
        resident_bytes=mem.resident_bytes if mem is not None else None,
    )


def evaluate(w: Workload, calibration: Calibration | None = None) -> Prediction:
    """The :class:`Prediction` of a :class:`Workload` under ``calibration`` (default: stored)."""
    cal = calibration if calibration is not None else CALIBRATION
    s = w.system
    dram = w.dram_seconds_at_peak / cal.dram_efficiency
    compute = w.compute_seconds_at_peak / cal.compute_efficiency
    mix = ", ".join(f"{f.name} {share:.0%}" for f, share in w.fidelity.items())
    eth = w.ethernet_seconds
    lat = sum(c.executions * c.latency_seconds for c in w.collectives)
    kinds: dict[str, int] = {}
    for c in w.collectives:
        kinds[c.kind] = kinds.get(c.kind, 0) + c.executions
    topo = sorted({f"{c.topology} of {c.group_size}" for c in w.collectives if c.group_size > 1})
    per_layer = cal.layer_seconds.get(w.phase, 0.0)
    terms = (
        Term(
            "DRAM",
            dram,
            f"{w.dram_bytes / 1e9:.3f} GB/chip at {s.dram_bandwidth / 1e9:.0f} GB/s x "
            f"{cal.dram_efficiency:.2f}",
            hidden=dram < compute,
        ),
        Term(
            "compute",
            compute,
            f"{w.matmul_flops / 1e12:.3f} TFLOP/chip (matmul) on {s.compute_cores} cores ({mix}) x "
            f"{cal.compute_efficiency:.2f}",
            hidden=compute <= dram,
        ),
        Term(
            "Ethernet",
            eth,
            f"{sum(kinds.values())} collectives {kinds or ''} {', '.join(topo)}, "
            f"{w.links} link(s) x {s.link_bandwidth / 1e9:.1f} GB/s; hop latency {lat * 1e3:.3f} ms",
        ),
        Term(
            "layer fixed",
            w.layers * per_layer,
            f"{w.layers} layers x {per_layer * 1e6:.1f} us ({w.phase}, fitted)",
        ),
    )
    return Prediction(w, cal, terms)


def predict(
    report: Any,
    system: System | str,
    *,
    calibration: Calibration | None = None,
    **kwargs: Any,
) -> Prediction:
    """Predict one step of ``report``'s program on ``system``: :func:`evaluate` of its
    :func:`workload` (``kwargs``: ``phase``, ``users``, ``math_fidelity``, ``collective_dtype``,
    ``layers``, ``num_links``) under ``calibration`` (default: the stored one).

    >>> report = ttjax.inspect.inspect(lambda t: ttnn.all_gather(t, dim=3), x)
    >>> p = predict(report, "galaxy", phase="prefill", layers=0)
    >>> p.workload.replicas, p.workload.collectives[0].topology   # 4 replicas of a 2x4 program
    (4, 'ring')
    """
    w = workload(report, system, **kwargs)
    return evaluate(w, calibration)


# ---------------------------------------------------------------------------------------------
# Fitting
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """A calibration row: a workload and the published step time it must reproduce."""

    label: str
    workload: Workload
    measured_seconds: float
    source: str = ""


def _calibration_of(x: Any, note: str) -> Calibration:
    return Calibration(
        dram_efficiency=float(x[0]),
        compute_efficiency=float(x[1]),
        layer_seconds={"decode": float(x[2]) * 1e-6, "prefill": float(x[3]) * 1e-6},
        note=note,
    )


def fit(samples: Sequence[Sample], note: str = "") -> Calibration:
    """Least-squares fit of the four free parameters on ``samples`` (relative error, log scale).

    Bounds keep each parameter physical: efficiencies in (0.05, 1], fixed costs >= 0. Only the
    samples given are used; the hardware figures stay as published.
    """
    from scipy.optimize import least_squares

    phases = {s.workload.phase for s in samples}
    if len(samples) < 4 or phases != set(PHASES):
        raise ConfigError(
            f"fit: {len(samples)} calibration rows ({sorted(phases)}) for 4 parameters.\n"
            "fix: give at least 4 rows, decode and prefill ones."
        )

    def residuals(x: np.ndarray) -> np.ndarray:
        cal = _calibration_of(x, "")
        return np.array(
            [math.log(evaluate(s.workload, cal).step_seconds / s.measured_seconds) for s in samples]
        )

    x0 = np.array([0.8, 0.3, 100.0, 500.0])  # efficiencies; microseconds per layer
    sol = least_squares(
        residuals,
        x0,
        bounds=([0.05, 0.05, 0.0, 0.0], [1.0, 1.0, 1e5, 1e5]),
        x_scale=[0.1, 0.1, 100.0, 100.0],
    )
    rms = float(np.sqrt(np.mean(sol.fun**2)))
    return _calibration_of(
        sol.x, note or f"least squares on {len(samples)} rows, rms log error {rms:.3f}"
    )


def save_calibration(cal: Calibration, path: str | Path = CALIBRATION_FILE) -> None:
    """Write ``cal`` as the JSON :func:`load_calibration` reads (other keys, such as the per-op
    model's ``per_op``, are kept)."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text()) if p.exists() else {}
    except json.JSONDecodeError:
        raw = {}
    raw.update(cal.to_dict())
    p.write_text(json.dumps(raw, indent=2) + "\n")


CALIBRATION = load_calibration() if CALIBRATION_FILE.exists() else Calibration()


# ---------------------------------------------------------------------------------------------
# Layout search: ranking and the table
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanRow:
    """One layout of a plan search: DP replicas x TP chips, users per replica, weight recipe."""

    layout: str
    tp: int
    dp: int
    batch_per_replica: int
    recipe: str
    prediction: Prediction
    collectives_per_step: int
    seconds: float = 0.0  # compile + predict wall time
    published: float | None = None  # a published tok/s/user of this layout, if any
    source: str = ""

    @property
    def fits(self) -> bool:
        return self.prediction.fits

    def to_dict(self) -> dict[str, Any]:
        p = self.prediction
        return {
            "layout": self.layout,
            "tp": self.tp,
            "dp": self.dp,
            "batch_per_replica": self.batch_per_replica,
            "recipe": self.recipe,
            "fits": self.fits,
            "resident_gb": None
            if p.workload.resident_bytes is None
            else p.workload.resident_bytes / 1e9,
            "collectives_per_step": self.collectives_per_step,
            "published_tokens_per_second_per_user": self.published,
            "source": self.source,
            "tokens_per_second_per_user": p.tokens_per_second_per_user,
            "tokens_per_second": p.tokens_per_second,
            "step_ms": p.step_seconds * 1e3,
            "dominant": p.dominant,
            "terms_ms": {t.name: t.seconds * 1e3 for t in p.terms if not t.hidden},
        }


def rank(rows: Sequence[PlanRow]) -> list[PlanRow]:
    """Layouts that fit first, by predicted tokens/s/user, then tokens/s (best first)."""
    return sorted(
        rows,
        key=lambda r: (
            not r.fits,
            -round(r.prediction.tokens_per_second_per_user, 6),
            -r.prediction.tokens_per_second,
        ),
    )


def reference_row(rows: Sequence[PlanRow]) -> PlanRow | None:
    """The layout to compare the others with: the first with a published figure (a plan lists
    the published layout of its model and system first among equals), else None."""
    return next((r for r in rows if r.published is not None), None)


def plan_notes(rows: Sequence[PlanRow], reference: PlanRow | None) -> list[str]:
    """The plan in words: the published layout's predicted figures, whether the published
    layouts come out in their published order, and which layouts beat the reference and why."""
    lines = []
    published = [r for r in rows if r.published is not None]
    if reference is not None:
        p = reference.prediction
        lines.append(
            f"published layout {reference.layout} ({reference.recipe}, {reference.batch_per_replica}"
            f" users/replica, CCLs on {p.workload.links} link(s)): predicted "
            f"{p.tokens_per_second_per_user:.1f} tok/s/u and {p.tokens_per_second:.1f} tok/s "
            f"(published {reference.published} tok/s/u; {reference.source})"
        )
    if len(published) > 1:
        by_pred = [r.layout for r in published]  # rows are ranked by prediction already
        by_pub = [r.layout for r in sorted(published, key=lambda r: -(r.published or 0.0))]
        same = by_pred == by_pub
        lines.append(
            f"published layouts, published order: {' > '.join(by_pub)}; predicted order: "
            f"{' > '.join(by_pred)} ({'reproduced' if same else 'NOT reproduced'})"
        )
    if reference is not None:
        ref_s = reference.prediction.step_seconds
        for r in rows:
            if r is reference or not r.fits or r.prediction.step_seconds >= ref_s:
                continue
            lines.append(
                f"{r.layout} ({r.recipe}) is predicted faster per user than {reference.layout}: "
                f"{why_faster(r.prediction, reference.prediction)}"
            )
    dropped = [r for r in rows if not r.fits]
    if dropped:
        lines.append(
            "do not fit in a chip's DRAM (dropped from the ranking): "
            + ", ".join(f"{r.layout} {r.recipe}" for r in dropped)
        )
    return lines


def why_faster(faster: Prediction, slower: Prediction) -> str:
    """Which term makes ``faster`` faster than ``slower``: the term whose seconds differ most.

    >>> h = ttnn.abstract_tensor((32, 8192), ttnn.bfloat16, device=mesh)
    >>> r = ttjax.inspect.inspect(lambda t: ttnn.all_reduce(t), h)
    >>> why_faster(predict(r, "galaxy", layers=0), predict(r, "galaxy", layers=0, num_links=1))
    'Ethernet: 0.0419 -> 0.0144 ms'
    """

    def terms(p: Prediction) -> tuple[dict[str, float], str]:
        d = {t.name: (0.0 if t.hidden else t.seconds) for t in p.terms}
        # DRAM and compute overlap: the one that counts (the larger) stands for both.
        counted = "DRAM" if d["DRAM"] > 0 else "compute"
        d["DRAM|compute"] = d.pop("DRAM") + d.pop("compute")
        return d, counted

    (a, a_name), (b, b_name) = terms(faster), terms(slower)
    name = max(a, key=lambda k: b[k] - a[k])
    if name == "DRAM|compute":
        if a_name == b_name:
            return f"{a_name}: {b[name] * 1e3:.3g} -> {a[name] * 1e3:.3g} ms"
        return f"{b_name} {b[name] * 1e3:.3g} ms -> {a_name} {a[name] * 1e3:.3g} ms"
    return f"{name}: {b[name] * 1e3:.3g} -> {a[name] * 1e3:.3g} ms"


def plan_table(rows: Sequence[PlanRow], title: str, reference: PlanRow | None = None) -> Any:
    """A ``rich.table.Table`` of ranked layouts; with ``reference``, each faster layout says
    which term makes it faster than the reference."""
    from rich.table import Table

    t = Table(title=title)
    cols = (
        "#",
        "layout",
        "users/replica",
        "weights",
        "GB/chip",
        "fits",
        "CCL/step",
        "CCL/token",
        "tok/s/u",
        "published",
        "tok/s",
        "step ms",
        "DRAM|compute ms",
        "Ethernet ms",
        "fixed ms",
        "dominant",
        "vs reference",
    )
    for col in cols:
        left = col in ("layout", "weights", "fits", "dominant", "vs reference")
        t.add_column(col, justify="left" if left else "right")
    for i, r in enumerate(rows):
        p = r.prediction
        w = p.workload
        terms = {x.name: x.seconds for x in p.terms}
        note = ""
        if reference is not None:
            if r is reference:
                note = "reference"
            elif r.fits and p.step_seconds < reference.prediction.step_seconds:
                note = "faster by " + why_faster(p, reference.prediction)
        users = w.users * w.replicas
        t.add_row(
            str(i + 1),
            r.layout,
            str(r.batch_per_replica),
            r.recipe,
            "?" if w.resident_bytes is None else f"{w.resident_bytes / 1e9:.1f}",
            "yes" if r.fits else "NO",
            str(r.collectives_per_step),
            f"{r.collectives_per_step * w.replicas / users:.2f}",
            f"{p.tokens_per_second_per_user:.1f}",
            "" if r.published is None else f"{r.published:.1f}",
            f"{p.tokens_per_second:.0f}",
            f"{p.step_seconds * 1e3:.2f}",
            f"{max(terms['DRAM'], terms['compute']) * 1e3:.2f}",
            f"{terms['Ethernet'] * 1e3:.2f}",
            f"{terms['layer fixed'] * 1e3:.2f}",
            p.dominant,
            note,
        )
    return t


__all__ = [
    "CALIBRATION",
    "SYSTEMS",
    "Calibration",
    "CollectiveCost",
    "PlanRow",
    "Prediction",
    "Sample",
    "Term",
    "Workload",
    "collective_time",
    "evaluate",
    "fit",
    "load_calibration",
    "plan_notes",
    "plan_table",
    "predict",
    "rank",
    "reference_row",
    "save_calibration",
    "why_faster",
    "workload",
]
