"""Parse the collectives out of optimized HLO text (explicit and iota replica-group formats).

Kept separate from ``ttjax.inspect`` so tests can count collectives cheaply, like JAX's
``pjit_test.py`` (``text.count('all-reduce(')``) but with the replica groups decoded.
"""

from __future__ import annotations

import re
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
    m = re.match(r"[^,\s]+(?:T\([0-9,]+\))?", attrs[j:])
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
