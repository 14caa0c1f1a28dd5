"""See what the compiler made of a ttjax program: HLO, collectives, bytes, memory, FLOPs.

The implementation of :mod:`ttjax.inspect`, whose docstring says more.
"""

from __future__ import annotations

import argparse
import importlib
import inspect as pyinspect
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import jax
import numpy as np

from ttjax._src.core.cli import debug_requested, report_errors
from ttjax._src.core.errors import ConfigError, MeshShapeError, TTJaxError
from ttjax._src.core.mesh import MeshDevice, open_mesh_device, parse_mesh_shape
from ttjax._src.core.tensor import Tensor
from ttjax._src.tools import cost, hlo as _hlo, opcost as _opcost, opmodels as _opmodels
from ttjax._src.tools.hlo import BranchWeights
from ttjax._src.tools.visualize import visualize_system_mesh
from ttjax._src.ttnn import trace


@dataclass(frozen=True)
class CollectiveReport:
    """One collective of a compiled program, in TT-NN terms."""

    kind: str
    mesh_axes: tuple[str, ...]
    cluster_axis: int | tuple[int, ...] | str | None
    replica_groups: tuple[tuple[int, ...], ...]
    source_target_pairs: tuple[tuple[int, int], ...]
    dtype: str
    shape: tuple[int, ...]
    bytes: int
    bytes_per_device: float
    group_size: int
    executions: int = 1
    loops: tuple[str, ...] = ()
    conditional: str | None = None


@dataclass(frozen=True)
class LoopReport:
    """A ``while`` loop (e.g. ``ttjax.scan`` over layers) and what one iteration of it does.

    ``trip_count`` comes from XLA's ``known_trip_count`` or the loop condition (``source``); None
    means unknown, and the body is then counted once. Figures are per device.
    """

    name: str
    trip_count: int | None
    source: str
    depth: int
    collectives_per_iteration: dict[str, int]
    bytes_per_device_per_iteration: float
    flops_per_iteration: float


@dataclass(frozen=True)
class MemoryReport:
    """Compiled per-device memory (bytes), from XLA's ``memory_analysis``."""

    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    alias_bytes: int
    generated_code_bytes: int

    @property
    def resident_bytes(self) -> int:
        """What must sit in one chip's DRAM: arguments (weights, KV cache, inputs) + outputs -
        outputs aliased to donated arguments. This is the figure to hold against 12 GB."""
        return self.argument_bytes + self.output_bytes - self.alias_bytes

    @property
    def total_bytes(self) -> int:
        """Resident bytes plus the CPU backend's temporaries (scratch that a TT chip's program
        would lay out differently)."""
        return self.resident_bytes + self.temp_bytes


@dataclass
class ProgramReport:
    """Everything :func:`inspect` found out about one compiled program."""

    name: str
    mesh_shape: tuple[int, ...]
    axis_names: tuple[str, ...]
    stablehlo: str = field(repr=False)
    hlo: str = field(repr=False)
    collectives: list[CollectiveReport]
    memory: MemoryReport | None
    flops: float | None
    bytes_accessed: float | None
    compile_seconds: float | None
    loops: list[LoopReport] = field(default_factory=list)
    conditionals: list[str] = field(default_factory=list)
    xla_flops: float | None = None
    # Per device per step: matmul FLOPs, and the bytes read from DRAM (each argument it uses whole,
    # the gathered rows of a table, plus the outputs not written in place): ttjax.cost's inputs.
    matmul_flops: float | None = None
    dram_read_bytes: float | None = None
    parameter_reads: list[_hlo.ParameterRead] = field(default_factory=list, repr=False)
    prediction: cost.Prediction | None = None

    def predict(self, system: Any, **kwargs: Any) -> cost.Prediction:
        """This program's step time on ``system`` (``ttjax.cost.predict``; kwargs: ``phase``,
        ``users``, ``math_fidelity``, ...)."""
        return cost.predict(self, system, **kwargs)

    def collective_counts(self, per: str = "step") -> dict[str, int]:
        """``{kind: count}`` for every collective kind (zeros included).

        ``per="step"``: collectives executed by one run (a loop body counts trip-count times);
        ``per="program"``: collective instructions in the compiled program (a body counts once).
        """
        if per not in ("step", "program"):
            raise TTJaxError(f"collective_counts: per={per!r}.\nfix: per='step' or 'program'.")
        counts = dict.fromkeys(_hlo.KINDS, 0)
        for c in self.collectives:
            counts[c.kind] += c.executions if per == "step" else 1
        return counts

    @property
    def bytes_per_device(self) -> float:
        """Bytes each device sends over all collectives in one run (loop bodies x trip count)."""
        return float(sum(c.bytes_per_device * c.executions for c in self.collectives))

    @property
    def layer_loop(self) -> LoopReport | None:
        """The outermost loop with a known trip count > 1 (a scan over layers), if any. A loop
        that carries no collective and holds under 1% of the step's FLOPs is not one: XLA's CPU
        loop emitters make such loops of single ops (a scatter's rows)."""
        outer = [
            lp
            for lp in self.loops
            if lp.depth == 0
            and (lp.trip_count or 0) > 1
            and (
                not self.flops
                or any(lp.collectives_per_iteration.values())
                or (lp.flops_per_iteration or 0.0) * (lp.trip_count or 0) >= 0.01 * self.flops
            )
        ]
        return max(outer, key=lambda lp: lp.trip_count or 0, default=None)

    def to_dict(self, include_text: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "mesh_shape": list(self.mesh_shape),
            "axis_names": list(self.axis_names),
            "collective_counts": self.collective_counts(),
            "collectives": [asdict(c) for c in self.collectives],
            "bytes_per_device": self.bytes_per_device,
            "memory": None
            if self.memory is None
            else {**asdict(self.memory), "total_bytes": self.memory.total_bytes},
            "collective_counts_per_program": self.collective_counts(per="program"),
            "loops": [asdict(lp) for lp in self.loops],
            "conditionals": list(self.conditionals),
            "flops": self.flops,
            "xla_flops_loop_bodies_once": self.xla_flops,
            "bytes_accessed": self.bytes_accessed,
            "matmul_flops": self.matmul_flops,
            "dram_read_bytes": self.dram_read_bytes,
            "compile_seconds": self.compile_seconds,
            "prediction": None if self.prediction is None else self.prediction.to_dict(),
        }
        if include_text:
            d["stablehlo"] = self.stablehlo
            d["hlo"] = self.hlo
        return d

    def to_json(self, include_text: bool = False, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(include_text), **kwargs)

    def table(self) -> Any:
        """A ``rich.table.Table`` of the collectives (rich is imported here, not at import time)."""
        from rich.table import Table

        mesh = "x".join(map(str, self.mesh_shape))
        per_step = sum(self.collective_counts().values())
        t = Table(
            title=f"{self.name} on a {mesh} mesh: {len(self.collectives)} collective instruction(s), "
            f"{per_step} run(s) per step"
        )
        for col in (
            "#",
            "kind",
            "cluster axis",
            "mesh axes",
            "groups",
            "dtype",
            "shape",
            "bytes/device",
            "runs/step",
        ):
            t.add_column(
                col, justify="right" if col in ("#", "bytes/device", "runs/step") else "left"
            )
        for i, c in enumerate(self.collectives):
            t.add_row(
                str(i),
                c.kind,
                str(c.cluster_axis),
                ",".join(c.mesh_axes) or "-",
                _short_groups(c),
                c.dtype,
                str(list(c.shape)),
                _human(c.bytes_per_device),
                f"{c.executions}" + (" (cond)" if c.conditional else ""),
            )
        return t

    def summary_lines(self) -> list[str]:
        """The report in words; every figure says whether it is per step or per loop iteration."""
        step = self.collective_counts()
        lines = [
            f"collectives per step: {sum(step.values())} "
            + str({k: v for k, v in step.items() if v}),
            f"bytes sent per device per step: {_human(self.bytes_per_device)}",
        ]
        if self.flops is not None:
            lines.append(f"FLOPs per device per step: {self.flops:.4g}")
        if self.loops:
            lines.append(
                "per step = loop bodies counted trip-count times "
                f"({sum(self.collective_counts(per='program').values())} collective instructions "
                "in the compiled program)"
            )
        for lp in self.loops:
            trips = f"{lp.trip_count} iterations" if lp.trip_count is not None else "trip count"
            label = "layer" if lp is self.layer_loop else "iteration"
            per = {k: v for k, v in lp.collectives_per_iteration.items() if v}
            lines.append(
                f"{'  ' * lp.depth}loop {lp.name}: {trips} ({lp.source}); per {label}: "
                f"{sum(per.values())} collectives {per or ''}, "
                f"{_human(lp.bytes_per_device_per_iteration)} sent per device, "
                f"{lp.flops_per_iteration:.4g} FLOPs per device"
            )
        for name in self.conditionals:
            inside = [c for c in self.collectives if c.conditional == name]
            lines.append(
                f"conditional {name}: {len(inside)} collective(s) in its branches, counted as if "
                "taken; FLOPs count its most expensive branch"
            )
        if self.memory is not None:
            m = self.memory
            lines.append(
                f"chip-resident memory per device: {_human(m.resident_bytes)} = "
                f"{m.resident_bytes / 1e9:.2f} GB "
                f"(arguments {_human(m.argument_bytes)} + outputs {_human(m.output_bytes)} "
                f"- donated {_human(m.alias_bytes)}: weights, KV cache, inputs, outputs)"
            )
            lines.append(
                f"CPU backend temporaries per device: {_human(m.temp_bytes)} "
                "(XLA CPU scratch buffers, not part of the chip-resident figure)"
            )
        if self.dram_read_bytes is not None:
            lines.append(
                f"DRAM read per device per step: {_human(self.dram_read_bytes)} (arguments used "
                "whole, gathered rows of tables, outputs not written in place)"
            )
        if self.compile_seconds is None:
            lines.append("compile time: cached (no new compile)")
        else:
            lines.append(f"compile time: {self.compile_seconds:.2f} s")
        if self.prediction is not None:
            lines.extend(self.prediction.summary_lines())
        return lines

    def print(self, console: Any = None, width: int | None = None) -> None:
        """Print the collective table and the summary with rich (``width`` columns; when output
        is not a terminal, wide enough that no column is cut)."""
        from rich.console import Console

        if console is None:
            if width is None and not sys.stdout.isatty():
                width = 200
            console = Console(width=width, soft_wrap=False)
        console.print(self.table())
        for line in self.summary_lines():
            console.print(line)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def _short_groups(c: CollectiveReport) -> str:
    if c.source_target_pairs:
        pairs = c.source_target_pairs
        body = ",".join(f"{a}->{b}" for a, b in pairs[:4])
        return body + (f",... ({len(pairs)})" if len(pairs) > 4 else "")
    groups = c.replica_groups
    body = ",".join("{" + ",".join(map(str, g)) + "}" for g in groups[:2])
    return body + (f",... ({len(groups)})" if len(groups) > 2 else "")


# ---------------------------------------------------------------------------------------------
# Replica groups -> mesh axes
# ---------------------------------------------------------------------------------------------


def axes_of_groups(
    groups: Sequence[Sequence[int]], mesh_shape: Sequence[int]
) -> tuple[int, ...] | None:
    """The mesh axes whose device groups (row-major within each group) are exactly ``groups``."""
    mesh_shape = tuple(mesh_shape)
    ids = np.arange(int(np.prod(mesh_shape))).reshape(mesh_shape)
    want = {tuple(g) for g in groups}
    for r in range(1, len(mesh_shape) + 1):
        for axes in itertools.combinations(range(len(mesh_shape)), r):
            rest = [a for a in range(len(mesh_shape)) if a not in axes]
            moved = np.transpose(ids, rest + list(axes)).reshape(
                -1, int(np.prod([mesh_shape[a] for a in axes]))
            )
            if {tuple(int(v) for v in row) for row in moved} == want:
                return axes
    return None


def axes_of_pairs(pairs: Sequence[tuple[int, int]], mesh_shape: Sequence[int]) -> tuple[int, ...]:
    """Mesh axes along which a collective-permute's sources and targets differ."""
    axes: set[int] = set()
    for a, b in pairs:
        ca = np.unravel_index(a, tuple(mesh_shape))
        cb = np.unravel_index(b, tuple(mesh_shape))
        axes.update(i for i, (x, y) in enumerate(zip(ca, cb)) if x != y)
    return tuple(sorted(axes))


def _cluster_axis(axes: tuple[int, ...] | None, rank: int) -> int | tuple[int, ...] | str | None:
    if axes is None:
        return "?"
    if len(axes) == rank and rank > 1:
        return None
    if len(axes) == 1:
        return axes[0]
    return axes


def collective_reports(
    hlo_text: str, mesh_shape: Sequence[int], axis_names: Sequence[str]
) -> list[CollectiveReport]:
    """Every collective of ``hlo_text`` mapped onto the mesh."""
    return _reports(_hlo.analyze(hlo_text), mesh_shape, axis_names)


def _reports(
    module: _hlo.Module, mesh_shape: Sequence[int], axis_names: Sequence[str]
) -> list[CollectiveReport]:
    out = []
    rank = len(mesh_shape)
    for placed in module.collectives:
        c = placed.collective
        if c.kind == "collective-permute":
            axes: tuple[int, ...] | None = axes_of_pairs(c.source_target_pairs, mesh_shape)
        elif c.replica_groups:
            axes = axes_of_groups(c.replica_groups, mesh_shape)
        else:
            axes = tuple(range(rank))
        out.append(
            CollectiveReport(
                kind=c.kind,
                mesh_axes=tuple(axis_names[a] for a in axes) if axes is not None else (),
                cluster_axis=_cluster_axis(axes, rank),
                replica_groups=c.replica_groups,
                source_target_pairs=c.source_target_pairs,
                dtype=c.dtype,
                shape=c.shape,
                bytes=c.result_bytes,
                bytes_per_device=_hlo.bytes_per_device(c),
                group_size=c.group_size,
                executions=placed.executions,
                loops=placed.loops,
                conditional=placed.conditional,
            )
        )
    return out


def _loop_reports(module: _hlo.Module, collectives: list[CollectiveReport]) -> list[LoopReport]:
    out = []
    for lp in module.loops:
        runs = lp.executions * (lp.trip_count if lp.trip_count is not None else 1)
        inside = [c for c in collectives if lp.name in c.loops]
        counts = dict.fromkeys(_hlo.KINDS, 0)
        for c in inside:
            counts[c.kind] += c.executions // runs
        out.append(
            LoopReport(
                name=lp.name,
                trip_count=lp.trip_count,
                source=lp.source,
                depth=lp.depth,
                collectives_per_iteration=counts,
                bytes_per_device_per_iteration=sum(
                    c.bytes_per_device * c.executions for c in inside
                )
                / runs,
                flops_per_iteration=module.flops_by_loop.get(lp.name, 0.0),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# inspect()
# ---------------------------------------------------------------------------------------------


def _find_mesh(args: Any) -> MeshDevice | None:
    for leaf in jax.tree_util.tree_leaves(args, is_leaf=lambda x: isinstance(x, Tensor)):
        if isinstance(leaf, Tensor) and leaf._mesh is not None:
            return leaf._mesh
    return None


def _memory(compiled: Any) -> MemoryReport | None:
    try:
        m = compiled.memory_analysis()
    except Exception:
        return None
    if m is None:
        return None
    return MemoryReport(
        argument_bytes=int(m.argument_size_in_bytes),
        output_bytes=int(m.output_size_in_bytes),
        temp_bytes=int(m.temp_size_in_bytes),
        alias_bytes=int(m.alias_size_in_bytes),
        generated_code_bytes=int(m.generated_code_size_in_bytes),
    )


def _cost(compiled: Any) -> tuple[float | None, float | None]:
    try:
        cost = compiled.cost_analysis()
    except Exception:
        return None, None
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    if not cost:
        return None, None
    return cost.get("flops"), cost.get("bytes accessed")


def report_compiled(
    compiled: Any,
    *,
    mesh: MeshDevice | Any,
    name: str = "program",
    stablehlo: str = "",
    compile_seconds: float | None = None,
    branch_weights: BranchWeights | None = None,
) -> ProgramReport:
    """A :class:`ProgramReport` for an already compiled executable (e.g. a trace's program);
    ``compile_seconds=None`` reports the compile as cached. ``branch_weights`` says how often
    each branch of a conditional runs (default: its costliest branch counts; see
    :data:`BranchWeights`)."""
    if isinstance(mesh, MeshDevice):
        shape, names = tuple(mesh.shape), tuple(mesh.axis_names)
    else:
        shape, names = tuple(mesh.devices.shape), tuple(mesh.axis_names)
    hlo = compiled.as_text()
    xla_flops, accessed = _cost(compiled)
    module = _hlo.analyze(hlo, branch_weights)
    collectives = _reports(module, shape, names)
    memory = _memory(compiled)
    reads = _hlo.parameter_reads(module)
    written = 0 if memory is None else max(0, memory.output_bytes - memory.alias_bytes)
    return ProgramReport(
        name=name,
        mesh_shape=shape,
        axis_names=names,
        stablehlo=stablehlo,
        hlo=hlo,
        collectives=collectives,
        memory=memory,
        flops=module.flops,
        bytes_accessed=accessed,
        compile_seconds=compile_seconds,
        loops=_loop_reports(module, collectives),
        conditionals=list(module.conditionals),
        xla_flops=xla_flops,
        matmul_flops=module.dot_flops,
        dram_read_bytes=float(sum(r.read_bytes for r in reads) + written),
        parameter_reads=reads,
    )


@dataclass(frozen=True, eq=False)
class _CompileListener:
    """Records XLA backend compiles (JAX's ``backend_compile_duration`` event) while inspecting."""

    seen: list[float]

    def __call__(self, event: str, duration_secs: float, **kwargs: str | int) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            self.seen.append(duration_secs)


def inspect(
    fn: Callable[..., Any],
    *args: Any,
    mesh: MeshDevice | Any = None,
    name: str | None = None,
    static_argnums: Sequence[int] = (),
    donate_argnums: Sequence[int] = (),
    system: Any = None,
    phase: str = "decode",
    users: int = 1,
    math_fidelity: Any = "hifi2",
    **kwargs: Any,
) -> ProgramReport:
    """Compile ``fn(*args, **kwargs)`` with ``jax.jit`` and report what XLA made of it.

    ``args`` may hold ttjax Tensors (real or abstract), ``jax.Array``s or ``jax.ShapeDtypeStruct``s;
    the mesh is taken from the first Tensor unless ``mesh`` is given. ``donate_argnums`` marks
    arguments updated in place (a KV cache), so their buffers count once in the memory report.
    ``system`` (``"n150"``, ``"n300"``, ``"t3000"``, ``"galaxy"``) adds ``report.prediction``:
    the step time on that system (``ttjax.cost``) of a ``phase`` step serving ``users`` sequences
    with matmuls at ``math_fidelity`` (a fidelity or a ``{fidelity: share}`` mix).
    """
    if system is not None:
        cost.get_system(system)  # a bad name fails before the compile, not after
    mesh = mesh if mesh is not None else _find_mesh((args, kwargs))
    if mesh is None:
        raise TTJaxError(
            "inspect: no ttjax Tensor among the arguments, so the mesh is unknown.\n"
            "fix: pass mesh=mesh_device."
        )
    jitted = jax.jit(fn, static_argnums=tuple(static_argnums), donate_argnums=tuple(donate_argnums))
    backend_compiles: list[float] = []
    listener = _CompileListener(backend_compiles)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        start = time.perf_counter()
        lowered = jitted.lower(*args, **kwargs)
        compiled = lowered.compile()
        seconds: float | None = time.perf_counter() - start
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    if not backend_compiles:
        seconds = None  # served from JAX's compilation cache
    report = report_compiled(
        compiled,
        mesh=mesh,
        name=name or str(getattr(fn, "__name__", "program")),
        stablehlo=lowered.as_text(),
        compile_seconds=seconds,
    )
    if system is not None:
        report.prediction = report.predict(
            system, phase=phase, users=users, math_fidelity=math_fidelity
        )
    return report


def inspect_trace(mesh_device: MeshDevice, trace_id: Any) -> list[ProgramReport]:
    """Reports for every program of a captured trace (one per submesh)."""
    return [
        report_compiled(compiled, mesh=mesh, name=f"trace {int(trace_id)} program {i}")
        for i, (mesh, compiled) in enumerate(trace.trace_programs(trace_id))
    ]


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _mesh_arg(text: str) -> Any:
    try:
        return parse_mesh_shape(text)
    except MeshShapeError as e:
        raise argparse.ArgumentTypeError(str(e).splitlines()[0]) from None


# The layout search reaches a model package by name, as `ttjax inspect` reaches its targets: the
# core never imports models/ (import-linter's contract), the command line loads it on demand.
DEFAULT_PLANNER = "ttjax._src.tools.opmodels:plan_model"  # the per-op model (models.llama.perf:plan
# ranks ttjax's own compiled Llama with the older whole-program model)


def _load(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not attr:
        raise TTJaxError(f"{target!r} is not module:function.\nfix: e.g. {DEFAULT_PLANNER}.")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise TTJaxError(
            f"cannot load {target!r} ({e}).\nfix: run from the repository root, or pass "
            "--planner module:function."
        ) from None


def _plan(ns: argparse.Namespace) -> int:
    from rich.console import Console

    try:
        planner = _load(ns.planner)
    except TTJaxError as e:
        print(f"ttjax plan: {e}", file=sys.stderr)
        return 2
    kwargs: dict[str, Any] = {"batch": ns.batch, "batch_per_replica": ns.batch_per_replica}
    if ns.context is not None:
        kwargs["context"] = ns.context
    if ns.num_links is not None:
        kwargs["num_links"] = ns.num_links
    if ns.ttft:
        kwargs["phase"] = "prefill"
    for name, value in (("batch", ns.batch), ("batch-per-replica", ns.batch_per_replica)):
        if value is not None and value < 1:
            print(f"ttjax plan: --{name} {value}: at least one user.\nfix: >= 1.", file=sys.stderr)
            return 2
    width = ns.width or (None if sys.stdout.isatty() else 250)
    console = Console(width=width, soft_wrap=False)
    start = time.perf_counter()
    try:
        with console.status(f"pricing the layouts of {ns.model} on {ns.system} ..."):
            rows = planner(ns.model, ns.system, **kwargs)
    except TTJaxError as e:
        print(f"ttjax plan: {e}", file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    what = f"batch {ns.batch}" if ns.batch else f"{ns.batch_per_replica} per replica"
    if rows and isinstance(rows[0], _opmodels.OpPlanRow):
        title = f"{ns.model} on {ns.system}, {what}: {len(rows)} layouts, per-op model"
        console.print(_opmodels.plan_table(rows, title))
        best = rows[0].prediction
        console.print(f"best: {rows[0].layout} ({rows[0].recipe}): {best.headline()}", markup=False)
        for fam, sec, n, rule in best.by_family():
            console.print(f"  {fam:<14} {sec * 1e3:8.2f} ms  {n:5d} ops  {rule}", markup=False)
        console.print(f"  the {ns.top} costliest ops (ms per step, runs, bound, rule):")
        for name, sec, runs, bound, rule in best.top_ops(ns.top):
            console.print(
                f"    {name:<36} {sec * 1e3:7.2f} ms {runs:5d}x {bound:<8} {rule}", markup=False
            )
        console.print(f"{len(rows)} layouts priced in {seconds:.1f} s")
        if ns.json:
            with open(ns.json, "w") as f:
                json.dump([r.to_dict() for r in rows], f, indent=2)
        return 0
    reference = cost.reference_row(rows)
    console.print(
        cost.plan_table(
            rows,
            f"{ns.model} on {ns.system}, {what}: {len(rows)} layouts ranked by predicted tok/s/user",
            reference,
        )
    )
    for line in cost.plan_notes(rows, reference):
        console.print(line)
    console.print(f"{len(rows)} layouts compiled abstractly and predicted in {seconds:.1f} s")
    if ns.json:
        with open(ns.json, "w") as f:
            json.dump([r.to_dict() for r in rows], f, indent=2)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``ttjax inspect TARGET --mesh 2x4 [--arg k=v ...] [--json F] [--hlo F] [--stablehlo F]``."""
    parser = argparse.ArgumentParser(prog="ttjax", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("inspect", help="compile a target and report its collectives and memory")
    p.add_argument("target", help="module:factory; factory(mesh_device, **args) -> (fn, args)")
    p.add_argument("--mesh", type=_mesh_arg, default=None, help="RxC or n300/t3000/galaxy")
    p.add_argument("--arg", action="append", default=[], help="key=value passed to the factory")
    p.add_argument(
        "--list-args",
        action="store_true",
        help="list the target's arguments and defaults, and exit",
    )
    p.add_argument(
        "--top",
        type=int,
        default=10,
        help="with --system: the costliest ops to list (per-op model)",
    )
    p.add_argument("--json", help="write the report as JSON here")
    p.add_argument("--hlo", help="write the optimized HLO text here")
    p.add_argument("--stablehlo", help="write the StableHLO text here")
    p.add_argument(
        "--width", type=int, default=None, help="table width (default: the terminal's, else 200)"
    )
    p.add_argument(
        "--system",
        choices=sorted(cost.SYSTEMS),
        default=None,
        help="predict the step time on this system (ttjax.cost); the target's options give "
        "phase, users and math_fidelity",
    )
    p.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (also TTJAX_DEBUG=1)"
    )
    sub.add_parser("devices", help="show the system mesh")
    q = sub.add_parser("plan", help="rank a model's layouts on a system by predicted speed")
    q.add_argument(
        "--model",
        default="llama-3.1-70b",
        help="a Hugging Face config.json path or a listed model: "
        + ", ".join(sorted(_opmodels.MODELS)),
    )
    q.add_argument(
        "--ttft", action="store_true", help="rank by time to first token (prefill) instead"
    )
    q.add_argument("--system", choices=sorted(cost.SYSTEMS), default="galaxy")
    batch = q.add_mutually_exclusive_group(required=True)
    batch.add_argument("--batch", type=int, help="users over the whole system")
    batch.add_argument("--batch-per-replica", type=int, help="users per replica")
    q.add_argument("--context", type=int, default=None, help="KV-cache positions read per step")
    q.add_argument(
        "--num-links", type=int, default=None, help="Ethernet links the CCLs use (default: all)"
    )
    q.add_argument(
        "--planner",
        default=DEFAULT_PLANNER,
        help="module:function that enumerates and predicts the layouts (default: %(default)s)",
    )
    q.add_argument("--json", help="write the ranked layouts as JSON here")
    q.add_argument("--top", type=int, default=10, help="the best layout's costliest ops to list")
    q.add_argument("--width", type=int, default=None, help="table width")
    q.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (also TTJAX_DEBUG=1)"
    )
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw and raw[0] not in ("inspect", "devices", "plan", "-h", "--help"):
        raw = ["inspect", *raw]
    ns = parser.parse_args(raw)
    if ns.command == "devices":
        visualize_system_mesh()
        return 0
    if ns.command == "plan":
        return report_errors(lambda: _plan(ns), "ttjax plan", debug_requested(raw))
    if ns.command != "inspect":
        parser.print_help()
        return 2
    return report_errors(lambda: _inspect_cli(ns), "ttjax inspect", debug_requested(raw))


def _factory(target: str) -> Any:
    """``package.module:factory`` -> the factory; a bad target is a ConfigError with the fix."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ConfigError(
            f"target {target!r} must look like package.module:factory.\nfix: e.g. ttjax inspect "
            "models.llama.inspect_targets:mlp --mesh 2x4."
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is None or not module_name.startswith(e.name):
            raise  # the module exists; one of its own imports failed: its traceback says where
        raise ConfigError(
            f"target {target!r}: no module named {e.name!r} (from {os.getcwd()}).\nfix: give an "
            "importable module (run from the folder above it, or set PYTHONPATH)."
        ) from None
    if not hasattr(module, attr):
        names = sorted(
            n
            for n, v in vars(module).items()
            if callable(v) and not n.startswith("_") and getattr(v, "__module__", "") == module_name
        )
        raise ConfigError(
            f"target {target!r}: module {module_name!r} has no {attr!r}.\nfix: one of "
            f"{', '.join(names[:12]) or '(no callables)'}."
        )
    return getattr(module, attr)


def _parameters(factory: Any) -> dict[str, Any] | None:
    """The factory's keyword parameters after the mesh (None: it takes ``**kwargs``)."""
    sig = pyinspect.signature(factory)
    params = list(sig.parameters.values())[1:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {
        p.name: p.default for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def _choices(tb: Any, bad: Any) -> list[str]:
    """Names a failed lookup could have used: the smallest string-keyed mapping visible where
    the ``KeyError`` was raised (its locals, then its module's globals)."""
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    for scope in (frame.f_locals, frame.f_globals):
        maps: list[dict[str, Any]] = [
            v
            for v in scope.values()
            if isinstance(v, dict)
            and 1 < len(v) <= 200
            and all(isinstance(k, str) for k in v)
            and bad not in v
        ]
        if maps:
            smallest: dict[str, Any] = sorted(maps, key=len)[0]
            return sorted(smallest)
    return []


def _call_factory(factory: Any, target: str, mesh: Any, kwargs: dict[str, str]) -> Any:
    """``factory(mesh, **kwargs)``; a bad key or value is one ConfigError naming the valid ones."""
    params = _parameters(factory)
    if params is not None:
        for key in kwargs:
            if key not in params:
                raise ConfigError(
                    f"--arg {key}=...: {target} has no argument {key!r}.\nfix: one of "
                    f"{', '.join(params) or '(none)'} (ttjax inspect {target} --list-args)."
                )
    values = {k: _parse_value(v) for k, v in kwargs.items()}
    try:
        return factory(mesh, **values)
    except TTJaxError:
        raise  # already one message with its fix
    except (KeyError, ValueError) as e:
        bad = e.args[0] if e.args else None
        exact = [k for k, v in values.items() if v == bad or kwargs[k] == str(bad)]
        named = [k for k in kwargs if kwargs[k] and kwargs[k] in str(bad)]
        key = (exact or named or [""])[0]
        shown = f"--arg {key}={kwargs[key]}" if key else "--arg " + " ".join(ns_args(kwargs))
        if isinstance(e, KeyError) and exact:
            valid = _choices(e.__traceback__, bad)
            detail = f"valid values: {', '.join(valid)}" if valid else "see --list-args"
            raise ConfigError(f"{shown}: {target} does not know {bad!r}.\nfix: {detail}.") from None
        first = str(bad if isinstance(e, KeyError) and bad else e).splitlines()[0]
        raise ConfigError(
            f"{shown}: {first or type(e).__name__}.\nfix: a valid value (ttjax inspect {target} "
            "--list-args)."
        ) from None


def ns_args(kwargs: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in kwargs.items()]


def _list_args(factory: Any, target: str) -> int:
    params = _parameters(factory)
    if params is None:
        print(f"{target} takes any keyword (**kwargs); its docstring says which.")
        return 0
    print(f"{target} arguments (--arg key=value):")
    for name, default in params.items():
        shown = "(required)" if default is pyinspect.Parameter.empty else f"default {default!r}"
        print(f"  {name:<20} {shown}")
    return 0


def _inspect_cli(ns: argparse.Namespace) -> int:
    factory = _factory(ns.target)
    if ns.list_args:
        return _list_args(factory, ns.target)
    bad = [a for a in ns.arg if "=" not in a]
    if bad:
        raise ConfigError(f"--arg {bad[0]!r} is not key=value.\nfix: e.g. --arg batch=8.")
    kwargs = dict(a.split("=", 1) for a in ns.arg)
    mesh = open_mesh_device(ns.mesh)
    made = _call_factory(factory, ns.target, mesh, kwargs)
    fn, args = made[0], made[1]
    options = made[2] if len(made) > 2 else {}
    if ns.system is None:
        for key in ("phase", "users", "math_fidelity"):
            options.pop(key, None)
    phase, users = options.get("phase", "decode"), int(options.get("users", 1))
    from rich.console import Console

    with Console(stderr=True).status(f"compiling {ns.target} ..."):
        report = inspect(fn, *args, mesh=mesh, name=ns.target, system=ns.system, **options)
    report.print(width=ns.width)
    if ns.system is not None:
        # the per-op model on the TT-NN ops the target dispatches (captured, not compiled)
        ops = _opcost.capture(fn, *args)
        chips = mesh.get_num_devices()
        system = cost.get_system(ns.system)
        p = _opcost.price(
            ops, system, phase=phase, users=users, replicas=max(1, system.num_chips // chips)
        )
        for line in p.summary_lines():
            print(line)
        print(f"  the {ns.top} costliest ops (name, ms per step, runs, bound, rule):")
        for name, sec, runs, bound, rule in p.top_ops(ns.top):
            print(f"    {name:<28} {sec * 1e3:8.3f} ms {runs:5d}x {bound:<8} {rule}")
    if ns.json:
        with open(ns.json, "w") as f:
            f.write(report.to_json(indent=2))
    if ns.hlo:
        with open(ns.hlo, "w") as f:
            f.write(report.hlo)
    if ns.stablehlo:
        with open(ns.stablehlo, "w") as f:
            f.write(report.stablehlo)
    return 0


__all__ = [
    "BranchWeights",
    "CollectiveReport",
    "LoopReport",
    "MemoryReport",
    "ProgramReport",
    "axes_of_groups",
    "collective_reports",
    "inspect",
    "inspect_trace",
    "main",
    "report_compiled",
]

if __name__ == "__main__":
    sys.exit(main())
