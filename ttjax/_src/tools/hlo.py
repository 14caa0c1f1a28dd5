"""Parse the collectives out of optimized HLO text (explicit and iota replica-group formats).

Kept separate from ``ttjax.inspect`` so tests can count collectives cheaply, like JAX's
``pjit_test.py`` (``text.count('all-reduce(')``) but with the replica groups decoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

KINDS = ("all-gather", "reduce-scatter", "all-reduce", "collective-permute", "all-to-all")

_BYTES = {
    "pred": 1,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
}

_OP = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<type>.+?)\s+"
    r"(?P<kind>all-gather|reduce-scatter|all-reduce|collective-permute|all-to-all)"
    r"(?P<suffix>-start)?\((?P<operands>[^)]*)\)(?P<attrs>.*)$"
)
_ARRAY = re.compile(r"(?P<dtype>[a-z]+[0-9]*[a-z0-9]*)\[(?P<dims>[0-9,]*)\]")


@dataclass(frozen=True)
class Collective:
    """One collective in a compiled program."""

    kind: str
    name: str
    dtype: str
    shape: tuple[int, ...]
    replica_groups: tuple[tuple[int, ...], ...]
    source_target_pairs: tuple[tuple[int, int], ...] = ()
    dimensions: tuple[int, ...] = ()
    result_bytes: int = 0
    operand_shapes: tuple[tuple[int, ...], ...] = field(default=())

    @property
    def group_size(self) -> int:
        if self.replica_groups:
            return len(self.replica_groups[0])
        return 2 if self.source_target_pairs else 1


_MESH_GROUPS = re.compile(
    r"mesh\[([^\]]*)\]"
    r"(?:,\s*device_ids=\((\[[0-9,]+\](?:T\([0-9,]+\))?|[0-9,\s]+)\))?"
    r"\s*\{([^}]*)\}"
)


def _parse_groups(text: str) -> tuple[tuple[int, ...], ...]:
    """``{{0,1},{2,3}}``, iota ``[2,4]<=[8]`` / ``[4,2]<=[2,4]T(1,0)`` or Shardy's
    ``mesh['x'=2,'y'=4] {'y'}`` -> tuple of groups."""
    text = text.strip()
    mesh = _MESH_GROUPS.match(text)
    if mesh:  # Shardy's form: mesh['a'=2,'b'=4][, device_ids=(...)] {'b'}: vary along 'b'
        sizes = dict((k, int(v)) for k, v in re.findall(r"'([^']+)'=(\d+)", mesh.group(1)))
        names, dims = list(sizes), list(sizes.values())
        ids = np.arange(int(np.prod(dims)))
        order = mesh.group(2)
        if order and order.startswith("["):
            iota = re.match(r"\[([0-9,]+)\](?:T\(([0-9,]+)\))?", order)
            assert iota is not None
            ids = ids.reshape([int(v) for v in iota.group(1).split(",")])
            if iota.group(2):
                ids = ids.transpose([int(v) for v in iota.group(2).split(",")])
        elif order:
            ids = np.array([int(v) for v in order.split(",") if v.strip()])
        ids = ids.reshape(dims)
        picked = [names.index(a) for a in re.findall(r"'([^']+)'", mesh.group(3))]
        rest = [i for i in range(len(names)) if i not in picked]
        size = int(np.prod([dims[i] for i in picked]))
        return tuple(
            tuple(int(v) for v in row) for row in ids.transpose(rest + picked).reshape(-1, size)
        )
    if text.startswith("{"):
        inner = re.findall(r"\{([0-9,\s]*)\}", text)
        return tuple(tuple(int(v) for v in g.split(",") if v.strip()) for g in inner)
    m = re.match(r"\[([0-9,]+)\]<=\[([0-9,]+)\](?:T\(([0-9,]+)\))?", text)
    if not m:
        return ()
    out_shape = [int(v) for v in m.group(1).split(",")]
    src_shape = [int(v) for v in m.group(2).split(",")]
    ids = np.arange(int(np.prod(src_shape))).reshape(src_shape)
    if m.group(3):
        ids = ids.transpose([int(v) for v in m.group(3).split(",")])
    ids = ids.reshape(out_shape)
    if ids.ndim == 1:
        ids = ids[None, :]
    return tuple(tuple(int(v) for v in row) for row in ids.reshape(ids.shape[0], -1))


def _attr(attrs: str, key: str) -> str | None:
    """The value of ``key=`` in an HLO attribute list (balanced braces, iota form or scalar)."""
    i = attrs.find(key + "=")
    if i < 0:
        return None
    j = i + len(key) + 1
    if j < len(attrs) and attrs[j] == "{":
        depth = 0
        for k in range(j, len(attrs)):
            depth += {"{": 1, "}": -1}.get(attrs[k], 0)
            if depth == 0:
                return attrs[j : k + 1]
        return attrs[j:]
    mesh = _MESH_GROUPS.match(attrs[j:])
    if mesh:
        return mesh.group(0)
    m = re.match(r"\[[0-9,]+\]<=\[[0-9,]+\](?:T\([0-9,]+\))?|[^,\s]+", attrs[j:])
    return m.group(0) if m else None


def parse_collectives(hlo_text: str) -> list[Collective]:
    """Every collective of an HLO module, in program order (async pairs counted once)."""
    out = []
    for line in hlo_text.splitlines():
        m = _OP.match(line)
        if not m:
            continue
        arrays = _ARRAY.findall(m.group("type"))
        if not arrays:
            continue
        dtype = arrays[0][0]
        shapes = [tuple(int(v) for v in dims.split(",") if v) for _, dims in arrays]
        if m.group("suffix") and len(shapes) > 1:
            # async start ops return (operand, result, ...): keep the result.
            shapes = shapes[1:2]
        nbytes = sum(int(np.prod(s)) * _BYTES.get(dtype, 4) for s in shapes)
        attrs = m.group("attrs")
        groups = _parse_groups(_attr(attrs, "replica_groups") or "")
        pairs_raw = _attr(attrs, "source_target_pairs") or ""
        pairs = tuple(
            (int(a), int(b)) for a, b in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", pairs_raw)
        )
        dims_raw = _attr(attrs, "dimensions") or ""
        dims = tuple(int(v) for v in re.findall(r"\d+", dims_raw))
        out.append(
            Collective(
                kind=m.group("kind"),
                name=m.group("name"),
                dtype=dtype,
                shape=shapes[0],
                replica_groups=groups,
                source_target_pairs=pairs,
                dimensions=dims,
                result_bytes=nbytes,
                operand_shapes=tuple(shapes),
            )
        )
    return out


def count_collectives(hlo_text: str) -> dict[str, int]:
    """``{kind: count}`` for every collective kind (zeros included)."""
    counts = dict.fromkeys(KINDS, 0)
    for c in parse_collectives(hlo_text):
        counts[c.kind] += 1
    return counts


def bytes_per_device(c: Collective) -> float:
    """Bytes each device sends, by the standard ring formulas (N = group size).

    all-gather: (N-1)/N of the result; reduce-scatter: (N-1) x the result (= (N-1)/N of the
    input); all-reduce: 2(N-1)/N of the buffer; all-to-all: (N-1)/N of the buffer;
    collective-permute: the whole buffer.
    """
    n = c.group_size
    b = float(c.result_bytes)
    if c.kind == "all-gather":
        return b * (n - 1) / n
    if c.kind == "reduce-scatter":
        return b * (n - 1)
    if c.kind == "all-reduce":
        return 2.0 * b * (n - 1) / n
    if c.kind == "all-to-all":
        return b * (n - 1) / n
    return b


# ---------------------------------------------------------------------------------------------
# Whole-module walk: computations, while loops (trip counts), conditionals, FLOPs
# ---------------------------------------------------------------------------------------------

_COMP_HEAD = re.compile(r"^(?P<entry>ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTR = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<type>.+?)\s+(?P<op>[a-z][\w\-]*)\((?P<rest>.*)$"
)
_TRIP = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')
_INIT_STEP = re.compile(
    r'"known_init_step"\s*:\s*\{\s*"init"\s*:\s*"(-?\d+)"\s*,\s*"step"\s*:\s*"(-?\d+)"'
)
_CONST = re.compile(r"=\s*[su](?:8|16|32|64)\[\]\s+constant\((-?\d+)\)")

# One FLOP per result element (XLA's HloCostAnalysis convention for elementwise ops).
_ELEMENTWISE = frozenset(
    "add subtract multiply divide remainder maximum minimum power atan2 and or xor not negate abs "
    "sign exponential exponential-minus-one log log-plus-one sqrt rsqrt cbrt tanh logistic sine "
    "cosine tan erf floor ceil round-nearest-afz round-nearest-even compare select clamp "
    "is-finite shift-left shift-right-logical shift-right-arithmetic".split()
)


@dataclass(frozen=True)
class Instr:
    """One HLO instruction: its name, opcode, result type text and the rest of the line."""

    name: str
    op: str
    type: str
    rest: str


@dataclass(frozen=True)
class Loop:
    """A ``while`` loop of a compiled program, with the trip count found for it.

    ``trip_count`` is None when neither ``known_trip_count`` nor the loop condition gave it (the
    body is then counted once); ``source`` says where it came from.
    """

    name: str
    body: str
    trip_count: int | None
    source: str
    depth: int
    executions: int


@dataclass(frozen=True)
class Placed:
    """A collective with how often one run of the program executes it.

    ``loops`` is the chain of enclosing ``while`` loops (outermost first); ``conditional`` the
    enclosing conditional instruction's name, if any (then it runs only when its branch is taken).
    """

    collective: Collective
    executions: int
    loops: tuple[str, ...]
    conditional: str | None


@dataclass
class Module:
    """An HLO module split into computations, walked from the entry through loops and calls."""

    computations: dict[str, list[Instr]]
    entry: str
    collectives: list[Placed] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    conditionals: list[str] = field(default_factory=list)
    flops: float = 0.0
    flops_by_loop: dict[str, float] = field(default_factory=dict)
    # Matmul FLOPs per run (dots only, every branch of a conditional counted): the Tensix term.
    dot_flops: float = 0.0


def _array_shapes(type_text: str) -> list[tuple[str, tuple[int, ...]]]:
    return [
        (dt, tuple(int(v) for v in dims.split(",") if v)) for dt, dims in _ARRAY.findall(type_text)
    ]


def _elements(type_text: str) -> int:
    return sum(int(np.prod(s)) for _, s in _array_shapes(type_text))


def split_computations(hlo_text: str) -> tuple[dict[str, list[Instr]], str]:
    """``({computation name: instructions}, entry name)`` of an HLO module's text."""
    comps: dict[str, list[Instr]] = {}
    entry = ""
    current: list[Instr] | None = None
    for line in hlo_text.splitlines():
        head = _COMP_HEAD.match(line)
        if head and "=" not in line.split("(", 1)[0]:
            current = comps.setdefault(head.group("name"), [])
            if head.group("entry"):
                entry = head.group("name")
            continue
        if line.strip() == "}":
            current = None
            continue
        if current is None:
            continue
        m = _INSTR.match(line)
        if m:
            current.append(Instr(m.group("name"), m.group("op"), m.group("type"), m.group("rest")))
    return comps, entry


def _called(rest: str, key: str) -> list[str]:
    raw = _attr(rest, key)
    if not raw:
        return []
    return [n.lstrip("%") for n in re.findall(r"%?[\w.\-]+", raw.strip("{}"))]


def trip_count(instr: Instr, comps: dict[str, list[Instr]]) -> tuple[int | None, str]:
    """A while loop's trip count: XLA's ``known_trip_count``, else ``i < N`` in its condition."""
    m = _TRIP.search(instr.rest)
    if m:
        return int(m.group(1)), "known_trip_count"
    init, step = 0, 1
    s = _INIT_STEP.search(instr.rest)
    if s:
        init, step = int(s.group(1)), int(s.group(2))
    cond = _called(instr.rest, "condition")
    if cond and step > 0:
        lines = comps.get(cond[0], [])
        consts = [int(c) for i in lines for c in _CONST.findall(f"= {i.type} {i.op}({i.rest}")]
        texts = " ".join(i.rest for i in lines) + " ".join(
            " ".join(i.rest for i in comps.get(c, []))
            for i in lines
            for c in _called(i.rest, "calls")
        )
        if len(consts) == 1 and "direction=LT" in texts:
            return max(0, -(-(consts[0] - init) // step)), "loop condition"
    return None, "unknown (counted once)"


def _dot_flops(instr: Instr, shapes: dict[str, str]) -> float:
    out = _elements(instr.type)
    operands = instr.rest.split(")", 1)[0]
    first = operands.split(",")[0].strip()
    arrays = _array_shapes(first)
    if not arrays:
        arrays = _array_shapes(shapes.get(first.split()[-1].lstrip("%"), ""))
    dims = re.findall(r"\d+", _attr(instr.rest, "lhs_contracting_dims") or "")
    if not arrays:
        return 2.0 * out
    lhs = arrays[0][1]
    k = int(np.prod([lhs[int(d)] for d in dims])) if dims else 1
    return 2.0 * out * k


def _reduce_flops(instr: Instr, shapes: dict[str, str]) -> float:
    first = instr.rest.split(")", 1)[0].split(",")[0].strip()
    arrays = _array_shapes(first) or _array_shapes(shapes.get(first.split()[-1].lstrip("%"), ""))
    return float(sum(int(np.prod(s)) for _, s in arrays[:1])) if arrays else 0.0


# How often each branch of a conditional runs, as fractions: called with the branches' FLOPs (one
# run each, in branch-index order) and the number of while loops between the conditional and the
# enclosing conditional (or the entry); None keeps the costliest branch.
BranchWeights = Callable[[list[float], int], Sequence[float] | None]


def analyze(hlo_text: str, branch_weights: BranchWeights | None = None) -> Module:
    """Walk an HLO module from its entry: every collective with its execution count, every loop
    with its trip count, conditionals, and FLOPs per run (loop bodies x trip count).

    FLOPs follow XLA's cost-analysis conventions: 2 x M x N x K per dot, one per element of an
    elementwise op or of a reduce's input. A conditional counts its most expensive branch, or,
    with ``branch_weights`` (a program that knows which branch runs how often, such as a
    pipeline's schedule), its branches' FLOPs weighted by it.
    """
    comps, entry = split_computations(hlo_text)
    mod = Module(comps, entry)
    mod.flops = _walk(mod, entry, 1, (), None, set(), branch_weights)
    return mod


def _walk(
    mod: Module,
    comp: str,
    mult: int,
    loops: tuple[str, ...],
    cond: str | None,
    stack: set[str],
    weights: BranchWeights | None = None,
    since: int = 0,
) -> float:
    """FLOPs of one execution of ``comp``; records collectives (x ``mult``) and loops on the way.
    ``since``: while loops entered since the enclosing conditional (for ``weights``)."""
    if comp in stack or comp not in mod.computations:
        return 0.0
    stack = stack | {comp}
    instrs = mod.computations[comp]
    shapes = {i.name: i.type for i in instrs}
    flops = 0.0
    for ins in instrs:
        op = ins.op
        base = op.removesuffix("-start")
        if base in KINDS and not op.endswith("-done"):
            for c in parse_collectives(f"%{ins.name} = {ins.type} {ins.op}({ins.rest}"):
                mod.collectives.append(Placed(c, mult, loops, cond))
            continue
        if op == "while":
            trips, source = trip_count(ins, mod.computations)
            n = trips if trips is not None else 1
            body = _called(ins.rest, "body")
            cnd = _called(ins.rest, "condition")
            mod.loops.append(
                Loop(ins.name, body[0] if body else "", trips, source, len(loops), mult)
            )
            inner = sum(
                _walk(mod, b, mult * n, (*loops, ins.name), cond, stack, weights, since + 1)
                for b in body
            )
            inner_cond = sum(
                _walk(mod, c, mult * n, (*loops, ins.name), cond, stack, weights, since + 1)
                for c in cnd
            )
            mod.flops_by_loop[ins.name] = inner + inner_cond
            flops += n * (inner + inner_cond)
        elif op == "conditional":
            branches = _called(ins.rest, "branch_computations") or (
                _called(ins.rest, "true_computation") + _called(ins.rest, "false_computation")
            )
            mod.conditionals.append(ins.name)
            costs = [_walk(mod, b, mult, loops, ins.name, stack, weights, 0) for b in branches]
            share = weights(costs, since) if weights is not None and costs else None
            if share is not None and len(share) == len(costs):
                flops += sum(w * c for w, c in zip(share, costs))
            else:
                flops += max(costs, default=0.0)
        elif op in ("fusion", "call", "async-start"):
            for callee in _called(ins.rest, "calls") + _called(ins.rest, "to_apply"):
                flops += _walk(mod, callee, mult, loops, cond, stack, weights, since)
        elif op == "dot":
            dot = _dot_flops(ins, shapes)
            mod.dot_flops += mult * dot
            flops += dot
        elif op in ("reduce", "reduce-window"):
            flops += _reduce_flops(ins, shapes)
        elif op in _ELEMENTWISE:
            flops += _elements(ins.type)
    return flops


# ---------------------------------------------------------------------------------------------
# Parameter reads: how many bytes of each argument one run reads
# ---------------------------------------------------------------------------------------------

# Ops that read only the part of an operand they return (an embedding lookup, a table row).
_PARTIAL_READS = frozenset(("gather", "dynamic-slice", "slice"))
_PARAM = re.compile(r"parameter\((\d+)\)")
_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ParameterRead:
    """One argument of the entry computation: its bytes and the bytes one run reads of it.

    ``read_bytes < bytes`` when the program only gathers or slices it (an embedding table, a
    RoPE table): those ops' results are what leaves DRAM. ``name`` is JAX's argument path.
    """

    number: int
    name: str
    bytes: int
    read_bytes: int


def _type_bytes(type_text: str) -> int:
    return sum(int(np.prod(s)) * _BYTES.get(dt, 4) for dt, s in _array_shapes(type_text))


def _operands(instr: Instr) -> list[str]:
    """Names of an instruction's operands (its text up to the closing parenthesis, split at
    top-level commas; each operand's last token, so typed operands work too)."""
    parts, depth, cur = [], 0, ""
    for ch in re.sub(r"/\*.*?\*/", "", instr.rest):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.split()[-1].lstrip("%") for p in parts if p.strip()]


# Ops that pass a value through unchanged in size (XLA fuses them with the slice that follows).
_TRANSPARENT = frozenset(("convert", "bitcast", "bitcast-convert", "copy", "reshape"))


def _partial_read(
    comps: dict[str, list[Instr]], comp: str, name: str, seen: frozenset[str]
) -> int | None:
    """Elements read of value ``name`` in ``comp`` if every use gathers or slices it (through
    converts, reshapes and fusions), else None (also when it has no use: a computation's root
    leaves as a whole)."""
    total, used = 0, False
    for ins in comps.get(comp, []):
        ops = _operands(ins)
        if name not in ops:
            continue
        used = True
        if ins.op in _PARTIAL_READS and ops[0] == name:
            total += _elements(ins.type)
            continue
        if ins.op in _TRANSPARENT:
            got = _partial_read(comps, comp, ins.name, seen)
            if got is None:
                return None
            total += got
            continue
        callee = _called(ins.rest, "calls")
        if ins.op == "fusion" and callee and callee[0] not in seen:
            inner = {
                int(m.group(1)): i.name
                for i in comps.get(callee[0], [])
                if i.op == "parameter" and (m := _PARAM.search(f"{i.op}({i.rest}"))
            }
            for k, op in enumerate(ops):
                if op != name or k not in inner:
                    continue
                got = _partial_read(comps, callee[0], inner[k], seen | {callee[0]})
                if got is None:
                    return None
                total += got
            continue
        return None
    return total if used else None


def parameter_reads(module: Module) -> list[ParameterRead]:
    """Every entry parameter with the bytes one run reads of it (see :class:`ParameterRead`).

    A parameter used only by gathers or slices (directly or inside fusions) counts their results;
    any other use (a dot, a loop carrying it, an elementwise op) counts the whole buffer.
    """
    out: list[ParameterRead] = []
    for ins in module.computations.get(module.entry, []):
        if ins.op != "parameter":
            continue
        m = _PARAM.search(f"{ins.op}({ins.rest}")
        full = _type_bytes(ins.type)
        elements = _elements(ins.type)
        partial = _partial_read(module.computations, module.entry, ins.name, frozenset())
        if partial is not None:
            partial = int(partial * full / max(elements, 1))
        label = _OP_NAME.search(ins.rest)
        out.append(
            ParameterRead(
                number=int(m.group(1)) if m else len(out),
                name=label.group(1).replace("\\'", "'") if label else ins.name,
                bytes=full,
                read_bytes=full if partial is None else min(full, partial),
            )
        )
    return out
