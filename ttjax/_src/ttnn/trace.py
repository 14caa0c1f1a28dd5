"""TT-NN trace capture and replay on top of ``jax.jit``.

The implementation of :mod:`ttjax.trace`, whose docstring says more.
"""

from __future__ import annotations

import itertools
import os
import re
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp

from ttjax._src.core import blockfloat as _blockfloat, capture as _capture, dispatch as _dispatch
from ttjax._src.core.dispatch import OpMeta, Program, decode_local, encode_local, storage_spec
from ttjax._src.core.errors import TraceError
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.tensor import Tensor, TensorSpec, deallocated_error, is_traced


class MeshTraceId(int):
    """Handle of a captured trace; ``int(tid)`` works, repr ``MeshTraceId(N)``."""

    def __repr__(self) -> str:
        return f"MeshTraceId({int(self)})"

    __str__ = __repr__


@dataclass
class _Node:
    prog: Program
    mesh: MeshDevice
    in_slots: list[int]
    scalars: tuple[Any, ...]
    out_slots: list[int]


@dataclass
class _Group:
    """The part of a trace that runs on one mesh: one compiled program."""

    mesh: MeshDevice
    nodes: list[_Node]
    inputs: list[tuple[int, Tensor]]
    outputs: list[tuple[weakref.ref[Tensor], int]]
    signature: list[TensorSpec] = field(default_factory=list)
    compiled: Any = None
    donated: tuple[int, ...] = ()  # inputs the replay overwrites: their buffers are reused
    # Flat lists fixed at end_trace_capture, so a replay does no Python work beyond the call:
    in_tensors: list[Tensor] = field(default_factory=list)
    out_targets: list[tuple[weakref.ref[Tensor], TensorSpec]] = field(default_factory=list)


class _Trace:
    def __init__(self, tid: MeshTraceId, mesh: MeshDevice) -> None:
        self.id = tid
        self.mesh = mesh
        self.state = "capturing"
        self.nodes: list[_Node] = []
        self.slot_of: dict[int, int] = {}
        self.inputs: list[tuple[int, Tensor]] = []
        self._input_slots: set[int] = set()
        self.held: list[tuple[Tensor, int]] = []  # every tensor seen, kept alive while capturing
        self.groups: list[_Group] = []
        self._slots = itertools.count()
        self.error: BaseException | None = None

    def interrupted(self, e: BaseException) -> None:
        """Note an error raised during the capture, on the error and on the trace."""
        if self.error is None:
            self.error = e
        if getattr(e, "_ttjax_capture_noted", False):
            return
        e._ttjax_capture_noted = True  # type: ignore[attr-defined]
        e.add_note(
            f"(raised while trace {self.id!r} was being captured on {self.mesh!r}; the capture "
            f"is still open: ttnn.release_trace(mesh, {self.id!r}) discards it, "
            "ttnn.end_trace_capture keeps the ops recorded so far)"
        )

    # -- recording (called from _dispatch.run_op) -------------------------------------------------

    def _slot_for_input(self, t: Tensor) -> int:
        s = self.slot_of.get(id(t))
        if s is None:
            s = next(self._slots)
            self.slot_of[id(t)] = s
            self.inputs.append((s, t))
            self._input_slots.add(s)
            self.held.append((t, s))
        return s

    def record(
        self,
        prog: Program,
        mesh: MeshDevice,
        tensors: Sequence[Tensor],
        scalars: Sequence[Any],
        results: Sequence[Tensor],
    ) -> None:
        if mesh.root() is not self.mesh.root():
            return
        if any(is_traced(t) for t in (*tensors, *results)):
            raise TraceError(
                f"trace {self.id!r}: a jax.jit-compiled function ran during trace capture.\n"
                "fix: call the ttnn ops directly between begin_trace_capture and "
                "end_trace_capture (the trace itself is compiled into one program)."
            )
        in_slots = [self._slot_for_input(t) for t in tensors]
        out_slots = []
        for r in results:
            s = next(self._slots)
            self.slot_of[id(r)] = s
            self.held.append((r, s))
            out_slots.append(s)
        self.nodes.append(_Node(prog, mesh, in_slots, tuple(scalars), out_slots))

    def forward(self, result: Tensor, source: Tensor) -> bool:
        """Record ``result`` as holding ``source``'s value (an op that moves nothing, such as a
        memory-config move), without an op; False when ``source`` is not the result of a captured
        op of this trace (then the caller runs the op, so a replay refreshes ``result``)."""
        mesh = source._mesh
        s = self.slot_of.get(id(source))
        if (
            mesh is None
            or mesh.root() is not self.mesh.root()
            or s is None
            or s in self._input_slots
        ):
            return False
        self.slot_of[id(result)] = s
        self.held.append((result, s))
        return True

    def alias(self, result: Tensor, target: Tensor) -> None:
        """``target`` now holds ``result``'s value (an op's ``output_tensor=``/in-place update)."""
        s = self.slot_of.get(id(result))
        if s is None:
            return
        if id(target) not in self.slot_of:
            self._slot_for_input(target)
        self.slot_of[id(target)] = s
        self.held.append((target, s))

    # -- finishing ---------------------------------------------------------------------------------

    def _output_candidates(self) -> list[tuple[weakref.ref[Tensor], int]]:
        """Weak refs to every tensor whose final value some captured op produced."""
        produced = {s for n in self.nodes for s in n.out_slots}
        final = {id(obj): (obj, self.slot_of[id(obj)]) for obj, _ in self.held}
        return [(weakref.ref(obj), s) for obj, s in final.values() if s in produced]

    def finish(self) -> None:
        candidates = self._output_candidates()
        self.held = []  # intermediates nobody references die here; outputs stay alive
        alive = [(ref, s) for ref, s in candidates if ref() is not None]
        by_mesh: dict[int, list[_Node]] = {}
        meshes: dict[int, MeshDevice] = {}
        for node in self.nodes:
            key = id(node.mesh.jax_mesh)
            by_mesh.setdefault(key, []).append(node)
            meshes[key] = node.mesh
        input_slot = dict(self.inputs)
        for key, nodes in by_mesh.items():
            made = {s for n in nodes for s in n.out_slots}
            kept = {s for _, s in alive if s in made}
            specs = {s: t._spec for s, t in self.inputs}
            specs.update({s: o for n in nodes for s, o in zip(n.out_slots, n.prog.outs)})
            nodes = fuse_all_reduces(nodes, specs, kept)
            used = [s for n in nodes for s in n.in_slots if s not in made]
            ins = []
            for s in dict.fromkeys(used):
                if s not in input_slot:
                    raise TraceError(
                        f"trace {self.id!r}: an op on {meshes[key]!r} uses a tensor produced on "
                        "another mesh inside the same trace.\nfix: keep each submesh's work on "
                        "its own tensors."
                    )
                ins.append((s, input_slot[s]))
            outs = [(ref, s) for ref, s in alive if s in made]
            self.groups.append(_Group(meshes[key], nodes, ins, outs))
        for g in self.groups:
            _compile(self.id, g)
        self.nodes = []
        self.slot_of = {}
        self.state = "captured"


# ---------------------------------------------------------------------------------------------
# Rewriting the captured graph (values unchanged)
# ---------------------------------------------------------------------------------------------


def _collective(node: _Node, kind: str, like: OpMeta) -> bool:
    m = node.prog.meta
    return (
        m is not None
        and m.kind == kind
        and (m.dim, m.axes) == (like.dim, like.axes)
        and len(node.in_slots) == 1
        and not node.scalars
    )


def _plain(*specs: TensorSpec) -> bool:
    return not any(s.dtype.is_block_float for s in specs)


def _fused_program(
    rs: _Node, ew: _Node | None, pos: int, gathered: _Node | None, ag: _Node, specs: dict[int, Any]
) -> Program:
    """One all-reduce for ``all_gather(ew(reduce_scatter(a), y))`` (``ew`` optional), where
    ``gathered`` is an all-gather of ``y`` over the same axes the trace already has.

    Per device: the group's sum of ``a`` (what the all-gather of the scattered pieces holds),
    cast as the reduce-scatter casts it, then ``ew`` on the whole rows with ``y`` gathered, cast
    as ``ew`` and the all-gather cast: the same numbers, element by element.
    """
    meta = ag.prog.meta
    assert meta is not None and meta.axes is not None
    axes = meta.axes
    a_spec = specs[rs.in_slots[0]]
    rs_dtype = rs.prog.outs[0].dtype.numpy_dtype
    out = ag.prog.outs[0]
    names = ag.mesh.axis_names
    in_specs = [storage_spec(a_spec, names)]
    if ew is not None and gathered is not None:
        g_spec = gathered.prog.outs[0]
        in_specs.append(storage_spec(g_spec, names))
        fn = ew.prog.meta.fn if ew.prog.meta is not None else None
        ew_dtype = ew.prog.outs[0].dtype.numpy_dtype

    def body(a: Any, *rest: Any) -> Any:
        z = jax.lax.psum(decode_local(a, a_spec), axes).astype(rs_dtype)
        if rest:
            g = decode_local(rest[0], g_spec)
            z = jnp.asarray(fn(*((z, g) if pos == 0 else (g, z)))).astype(ew_dtype)  # type: ignore[misc]
        return encode_local(z, out)

    mapped = jax.shard_map(
        body,
        mesh=ag.mesh.jax_mesh,
        in_specs=tuple(in_specs),
        out_specs=storage_spec(out, names),
        check_vma=False,
    )
    name = f"all_reduce (reduce_scatter{' + ' + ew.prog.name if ew else ''} + all_gather)"
    return Program(name, jax.jit(mapped), [out], True)


def _fuse_one(
    ag: _Node,
    producer: dict[int, _Node],
    gathers: dict[tuple[int, Any, Any], _Node],
    specs: dict[int, Any],
) -> tuple[_Node, list[_Node]] | None:
    """The all-reduce that ``ag`` can become, and the nodes it bypasses; None if none."""
    meta = ag.prog.meta
    assert meta is not None
    src = producer.get(ag.in_slots[0])
    if src is None:
        return None
    out = ag.prog.outs[0]
    if _collective(src, "reduce_scatter", meta):
        a_spec = specs[src.in_slots[0]]
        if a_spec.shape != out.shape or not _plain(a_spec, src.prog.outs[0], out):
            return None
        prog = _fused_program(src, None, 0, None, ag, specs)
        return _Node(prog, ag.mesh, [src.in_slots[0]], (), ag.out_slots), [src]
    m = src.prog.meta
    if m is None or m.kind != "elementwise" or len(src.in_slots) != 2 or src.scalars:
        return None
    ew_out = src.prog.outs[0]
    for pos in (0, 1):
        x, y = src.in_slots[pos], src.in_slots[1 - pos]
        rs = producer.get(x)
        gathered = gathers.get((y, meta.dim, meta.axes))
        if x == y or rs is None or gathered is None or not _collective(rs, "reduce_scatter", meta):
            continue
        a_spec, rs_out, y_spec, g_out = (
            specs[rs.in_slots[0]],
            rs.prog.outs[0],
            specs[y],
            gathered.prog.outs[0],
        )
        if (
            a_spec.shape == out.shape == g_out.shape
            and rs_out.shape == y_spec.shape == ew_out.shape
            and g_out.placements == out.placements
            and _plain(a_spec, rs_out, y_spec, ew_out, g_out, out)
        ):
            prog = _fused_program(rs, src, pos, gathered, ag, specs)
            node = _Node(prog, ag.mesh, [rs.in_slots[0], gathered.out_slots[0]], (), ag.out_slots)
            return node, [src, rs]
    return None


def fuse_all_reduces(nodes: list[_Node], specs: dict[int, Any], kept: set[int]) -> list[_Node]:
    """The captured ops with each reduce-scatter followed by an all-gather over the same axes and
    dim (TT-NN model code's all-reduce) turned into one all-reduce; values unchanged.

    Also ``all_gather(reduce_scatter(a) + h)`` where the trace already all-gathers ``h`` (the
    residual stream kept scattered between layers, as tt_transformers does on a T3000) becomes
    ``all_reduce(a) + all_gather(h)``: one collective instead of two. The bypassed ops go when
    nothing else uses their results (``kept``: slots the trace writes back). ``TTJAX_TRACE_FUSE=0``
    keeps the graph as captured.
    """
    if os.environ.get("TTJAX_TRACE_FUSE", "") == "0":
        return nodes
    producer: dict[int, _Node] = {}
    gathers: dict[tuple[int, Any, Any], _Node] = {}
    result = list(nodes)
    bypassed: list[_Node] = []
    for i, node in enumerate(nodes):
        meta = node.prog.meta
        if meta is not None and meta.kind == "all_gather" and _collective(node, "all_gather", meta):
            fused = _fuse_one(node, producer, gathers, specs)
            if fused is not None:
                result[i] = fused[0]
                bypassed += fused[1]
            gathers.setdefault((node.in_slots[0], meta.dim, meta.axes), result[i])
        for s in node.out_slots:
            producer[s] = node
    dead = {id(n) for n in bypassed}
    while True:
        used = set(kept)
        used.update(s for n in result for s in n.in_slots)
        gone = {id(n) for n in result if id(n) in dead and not any(s in used for s in n.out_slots)}
        if not gone:
            return result
        result = [n for n in result if id(n) not in gone]


def _program(group: _Group) -> Any:
    in_slots = [s for s, _ in group.inputs]
    out_slots = [s for _, s in group.outputs]
    nodes = group.nodes

    def program(*datas: Any) -> list[Any]:
        env = dict(zip(in_slots, datas))
        for node in nodes:
            # Each captured op names its instructions (HLO op_name metadata, profiler scopes).
            with jax.named_scope(re.sub(r"\W+", "_", node.prog.name).strip("_") or "op"):
                out = node.prog.fn(*[env[s] for s in node.in_slots], *node.scalars)
            leaves = [out] if node.prog.single else list(out)
            env.update(zip(node.out_slots, leaves))
        return [env[s] for s in out_slots]

    return program


def _donated(group: _Group) -> tuple[int, ...]:
    """Positions of the inputs a replay overwrites (KV caches, ``output_tensor=`` targets).

    Their old buffers are dead once the replay writes the new values back, so XLA may write the
    results in place (``donate_argnums``) instead of allocating and copying. An input whose array
    is also held by another input is not donated (the other would lose it).
    """
    overwritten = {id(ref()) for ref, _ in group.outputs if ref() is not None}
    datas = [id(t._data) for _, t in group.inputs]
    return tuple(
        i
        for i, (_, t) in enumerate(group.inputs)
        if id(t) in overwritten and datas.count(id(t._data)) == 1
    )


def _compile(tid: MeshTraceId, group: _Group) -> None:
    group.signature = [t.spec for _, t in group.inputs]
    group.in_tensors = [t for _, t in group.inputs]
    group.out_targets = [(ref, obj.spec) for ref, _ in group.outputs if (obj := ref()) is not None]
    group.outputs = [(ref, s) for ref, s in group.outputs if ref() is not None]
    group.donated = _donated(group)
    datas = [t._data for t in group.in_tensors]
    try:
        with warnings.catch_warnings():
            # A donated buffer XLA cannot alias to a result (another shape) is simply not reused.
            warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
            lowered = jax.jit(_program(group), donate_argnums=group.donated).lower(*datas)
            group.compiled = lowered.compile()
    except Exception as e:  # pragma: no cover - surfaced with context
        raise TraceError(
            f"trace {tid!r}: compiling the captured ops failed ({type(e).__name__}: {e}).\n"
            "fix: check that every captured op also runs eagerly."
        ) from e


# ---------------------------------------------------------------------------------------------
# TT-NN API
# ---------------------------------------------------------------------------------------------

_traces: dict[int, _Trace] = {}
_next_id = itertools.count(1)


def _disabled() -> bool:
    return os.environ.get("TTNN_DISABLE_TRACE_CAPTURE", "") not in ("", "0")


def _lookup(mesh_device: MeshDevice, trace_id: Any, action: str) -> _Trace:
    tr = _traces.get(int(trace_id))
    if tr is None:
        raise TraceError(
            f"{action}: there is no trace {MeshTraceId(int(trace_id))!r} (never captured, or "
            "released).\nfix: use the id returned by begin_trace_capture, and do not use it after "
            "release_trace."
        )
    if mesh_device is not tr.mesh and mesh_device.root() is not tr.mesh.root():
        raise TraceError(
            f"{action}: trace {tr.id!r} was captured on {tr.mesh!r}, not {mesh_device!r}.\n"
            "fix: pass the mesh the trace was captured on."
        )
    return tr


def begin_trace_capture(mesh_device: MeshDevice, *, cq_id: int | None = 0) -> MeshTraceId:
    """Start recording ops dispatched to ``mesh_device`` (and its submeshes); returns the trace id."""
    if _disabled():
        return MeshTraceId(0)
    mesh_device._check_open()
    tid = MeshTraceId(next(_next_id))
    tr = _Trace(tid, mesh_device)
    _capture.begin(tr)
    _traces[int(tid)] = tr
    return tid


def end_trace_capture(mesh_device: MeshDevice, trace_id: Any, *, cq_id: int | None = 0) -> None:
    """Stop recording and compile the captured ops into one program per (sub)mesh."""
    if _disabled():
        return
    tr = _lookup(mesh_device, trace_id, "end_trace_capture")
    if tr.state != "capturing" or _capture.current() is not tr:
        raise TraceError(
            f"end_trace_capture: trace {tr.id!r} is not being captured (state: {tr.state}).\n"
            "fix: call begin_trace_capture first, and end each capture once."
        )
    _capture.end()
    try:
        tr.finish()
    except BaseException:
        _traces.pop(int(tr.id), None)
        raise


def execute_trace(
    mesh_device: MeshDevice, trace_id: Any, *, cq_id: int | None = 0, blocking: bool = True
) -> None:
    """Replay a captured trace over the current contents of its input tensors.

    Results are written into the tensors the captured ops returned. Every submesh's program is
    dispatched before any is waited on; ``blocking=True`` waits for all of them.
    """
    if _disabled():
        return
    tr = _lookup(mesh_device, trace_id, "execute_trace")
    if tr.state != "captured":
        raise TraceError(
            f"execute_trace: trace {tr.id!r} is {tr.state}.\nfix: call end_trace_capture before "
            "execute_trace."
        )
    if _capture.active():
        raise TraceError(
            "execute_trace inside another trace capture is not supported.\n"
            "fix: end the capture first."
        )
    pending = []
    for g in tr.groups:
        g.mesh._check_open()
        datas = []
        for t, want in zip(g.in_tensors, g.signature):
            if (
                t._spec is not want
            ):  # refreshed by copy_host_to_device_tensor: same spec, new object
                _check_input(tr, t, want)
            if t._data is None:
                raise deallocated_error(f"execute_trace: an input of trace {tr.id!r}", t)
            datas.append(t._data)
        outs = g.compiled(*datas)
        for (ref, spec), data in zip(g.out_targets, outs):
            obj = ref()
            if obj is not None:  # written like Tensor.assign (no capture is open here)
                obj._data = data
                obj._spec = spec
        if outs:
            g.mesh._last_outputs = (_blockfloat.primary(outs[0]),)
            _dispatch.launched(g.mesh._last_outputs[0])
        pending.append(outs)
    if blocking:
        jax.block_until_ready(pending)


def _check_input(tr: _Trace, t: Tensor, want: TensorSpec) -> None:
    """Refuse an input whose spec changed since capture; an equal spec is adopted (fast path)."""
    got = t._spec
    if got != want:
        raise TraceError(
            f"execute_trace: trace {tr.id!r} was captured with an input "
            f"{want.describe()}, but that tensor is now {got.describe()}.\n"
            "fix: refresh inputs with copy_host_to_device_tensor using a host tensor of the "
            "same per-device shape, dtype, layout and mesh mapper; or capture a new trace."
        )
    t._spec = want


def release_trace(mesh_device: MeshDevice, trace_id: Any) -> None:
    """Free a captured trace; using its id afterwards raises ``TraceError``."""
    if _disabled():
        return
    tr = _lookup(mesh_device, trace_id, "release_trace")
    if tr.state == "capturing":
        _capture.end()
    tr.state = "released"
    tr.groups = []
    _traces.pop(int(tr.id), None)


def trace_info(trace_id: Any) -> dict[str, Any]:
    """What a captured trace holds: per mesh, the number of ops, inputs and outputs."""
    tr = _traces.get(int(trace_id))
    if tr is None:
        raise TraceError(f"trace_info: there is no trace {MeshTraceId(int(trace_id))!r}.")
    return {
        "id": int(tr.id),
        "state": tr.state,
        "programs": [
            {
                "mesh": repr(g.mesh),
                "ops": [n.prog.name for n in g.nodes],
                "inputs": len(g.inputs),
                "outputs": sum(1 for ref, _ in g.outputs if ref() is not None),
            }
            for g in tr.groups
        ],
    }


def trace_programs(trace_id: Any) -> list[tuple[MeshDevice, Any]]:
    """``(mesh, compiled executable)`` for each program of a trace; raises for an unknown id."""
    trace_info(trace_id)
    return [(g.mesh, g.compiled) for g in _traces[int(trace_id)].groups]


def compiled_programs(trace_id: Any) -> list[Any]:
    """The compiled XLA executables of a trace (one per mesh), for ``ttjax.inspect``."""
    tr = _traces.get(int(trace_id))
    if tr is None or tr.state != "captured":
        raise TraceError(
            f"compiled_programs: trace {MeshTraceId(int(trace_id))!r} is not captured."
        )
    return [g.compiled for g in tr.groups]


__all__ = [
    "MeshTraceId",
    "begin_trace_capture",
    "compiled_programs",
    "end_trace_capture",
    "execute_trace",
    "release_trace",
    "trace_info",
    "trace_programs",
]
