"""Mesh graph descriptors (MGD 2.0): TT-Fabric's textproto files that say how the chips are wired.

The implementation of :mod:`ttjax.mgd`, whose docstring says more.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from ttjax._src.core.errors import MeshGraphDescriptorError, TopologyMismatchError
from ttjax._src.core.userfile import read_user_text
from ttjax.proto import mesh_graph_descriptor_pb2 as pb

#: Environment variables that select a descriptor, in the order they are read.
ENV_VARS = ("TTJAX_MESH_GRAPH_DESC_PATH", "TT_MESH_GRAPH_DESC_PATH")

#: Descriptor picked when no variable is set, by device count: TTML's for 8 and 32 devices, and
#: the N150 and N300 boards' own for 1 and 2 (what tt-metal finds on those boards).
DEFAULT_DESCRIPTORS: Mapping[int, str] = {
    1: "n150_mesh_graph_descriptor.textproto",
    2: "n300_mesh_graph_descriptor.textproto",
    8: "t3k_1x8_mesh_graph_descriptor.textproto",
    32: "galaxy_1x32_mesh_graph_descriptor.textproto",
}

# Mesh dimensions each architecture's fabric supports (tt-metal mesh_graph_descriptor.cpp).
_MAX_DIMS = {"WORMHOLE_B0": 2, "BLACKHOLE": 3}


class UnknownFieldWarning(UserWarning):
    """A descriptor field that ttjax's MGD schema lacks: skipped, as tt-metal's parser does."""


@dataclass(frozen=True)
class MeshSpec:
    """One ``mesh_descriptors`` entry: ``MeshSpec(name='M0', arch='WORMHOLE_B0', dims=(2, 4), ...)``."""

    name: str
    arch: str
    dims: tuple[int, ...]
    dim_types: tuple[str, ...]
    channels: int
    policy: str
    host_dims: tuple[int, ...]

    @property
    def num_devices(self) -> int:
        return math.prod(self.dims)

    @property
    def is_line(self) -> bool:
        """True when at most one dimension is above 1 (1x8, 1x32, 32x1)."""
        return sum(d > 1 for d in self.dims) <= 1


@dataclass(frozen=True)
class MeshGraphDescriptor:
    """A parsed, validated MGD file; ``device_topology`` is the dims of its top-level mesh."""

    path: str
    meshes: tuple[MeshSpec, ...]
    top_level: str
    instances: tuple[tuple[int, str], ...] = ()
    proto: Any = field(repr=False, compare=False, default=None)

    def mesh_sizes(self) -> dict[int, int]:
        """``{mesh_id: device count}`` of every mesh instance under the top-level instance."""
        by_name = {m.name: m.num_devices for m in self.meshes}
        return {mesh_id: by_name[name] for mesh_id, name in self.instances}

    @property
    def mesh(self) -> MeshSpec:
        """The mesh this process opens (the top-level mesh, or the meshes of a top-level graph)."""
        return next(m for m in self.meshes if m.name == self.top_level)

    @property
    def device_topology(self) -> tuple[int, ...]:
        return self.mesh.dims

    @property
    def num_devices(self) -> int:
        return self.mesh.num_devices

    def accepts(self, mesh_shape: Sequence[int]) -> bool:
        """Whether ``mesh_shape`` may open on this descriptor (see the module docstring)."""
        shape = tuple(int(d) for d in mesh_shape)
        if shape == self.device_topology:
            return True
        return self.mesh.is_line and math.prod(shape) == self.num_devices

    def check_mesh_shape(self, mesh_shape: Sequence[int]) -> None:
        """Raise ``TopologyMismatchError`` naming both shapes unless :meth:`accepts` holds."""
        shape = [int(d) for d in mesh_shape]
        if self.accepts(shape):
            return
        topo = list(self.device_topology)
        if math.prod(shape) != self.num_devices:
            why = f"it has {math.prod(shape)} devices and the descriptor {self.num_devices}"
        else:
            why = (
                "a grid topology only opens with its own shape; only a line topology "
                "(one dimension above 1) accepts any mesh of the same device count"
            )
        raise TopologyMismatchError(
            f"Mesh shape mismatch!\n  Requested mesh shape: {shape}\n"
            f"  MGD device_topology dims: {topo}\n"
            f"Please ensure your mesh dimensions match the MGD file ({self.path}): {why}.\n"
            f"fix: set device_config.mesh_shape to {topo}, or point TT_MESH_GRAPH_DESC_PATH at a "
            "descriptor for this shape (shipped: "
            f"{', '.join(sorted(shipped_descriptors()))})."
        )


def shipped_descriptors() -> dict[str, Path]:
    """The descriptors that ship with ttjax (``ttjax/descriptors/``), by file name."""
    root = Path(__file__).resolve().parents[2] / "descriptors"
    return {p.name: p for p in sorted(root.glob("*.textproto"), key=lambda p: p.name)}


def _enum_name(enum: Any, value: int) -> str:
    return enum.Name(value) if value in enum.values() else str(value)


def _invalid(path: str, what: str, fix: str) -> MeshGraphDescriptorError:
    return MeshGraphDescriptorError(f"{path}: {what}\nfix: {fix}")


def _mesh_spec(path: str, m: Any) -> MeshSpec:
    topo = m.device_topology
    dims = tuple(int(d) for d in topo.dims)
    if not dims or any(d <= 0 for d in dims):
        raise _invalid(
            path,
            f"mesh_descriptors {m.name!r} has device_topology dims {list(dims)}; it needs at "
            "least one dimension, each >= 1.",
            "write e.g. device_topology { dims: [ 2, 4 ] }.",
        )
    if topo.types and topo.dim_types:
        raise _invalid(
            path,
            f"mesh_descriptors {m.name!r} gives both `types` and `dim_types`.",
            "keep one of them (`dim_types` is the current name).",
        )
    raw_types = list(topo.dim_types or topo.types)
    if len(raw_types) > len(dims):
        raise _invalid(
            path,
            f"mesh_descriptors {m.name!r} has {len(raw_types)} dim_types for {len(dims)} dims.",
            "give at most one LINE/RING per dimension.",
        )
    types = tuple(_enum_name(pb.TorusTopology.Type, t) for t in raw_types)
    if "INVALID_TYPE" in types:
        raise _invalid(
            path, f"mesh_descriptors {m.name!r} has dim_types {list(types)}.", "use LINE or RING."
        )
    types += ("LINE",) * (len(dims) - len(types))
    host = tuple(int(d) for d in m.host_topology.dims)
    if len(host) != len(dims):
        raise _invalid(
            path,
            f"Device and host topology dimensions must be the same size (Mesh: {m.name}): "
            f"device_topology dims {list(dims)}, host_topology dims {list(host)}.",
            f"give host_topology one entry per device dimension, e.g. host_topology "
            f"{{ dims: [ {', '.join('1' * len(dims))} ] }} for one host.",
        )
    if any(h <= 0 or d % h for d, h in zip(dims, host)):
        raise _invalid(
            path,
            f"Device topology dimensions must be divisible by host topology dimensions "
            f"(Mesh: {m.name}): device_topology dims {list(dims)}, host_topology dims "
            f"{list(host)}.",
            "make each host_topology dim a divisor (>= 1) of the device_topology dim.",
        )
    arch = _enum_name(pb.Architecture, m.arch)
    if arch not in _MAX_DIMS:
        raise _invalid(
            path,
            f"mesh_descriptors {m.name!r} has arch {arch}: Mesh descriptor must have a valid "
            f"architecture (Mesh: {m.name}).",
            f"set arch to one of {sorted(_MAX_DIMS)}.",
        )
    if len(dims) > _MAX_DIMS[arch]:
        raise _invalid(
            path,
            f"Mesh has {len(dims)} dimensions but arch {arch} supports at most {_MAX_DIMS[arch]}.",
            "use fewer device_topology dims or arch BLACKHOLE (3).",
        )
    if m.channels.count <= 0:
        raise _invalid(
            path,
            f"mesh_descriptors {m.name!r} has channels count {m.channels.count}.",
            "give the links per neighbour, e.g. channels { count: 2 policy: RELAXED }.",
        )
    policy = _enum_name(pb.Policy, m.channels.policy) if m.channels.HasField("policy") else "STRICT"
    return MeshSpec(
        name=m.name,
        arch=arch,
        dims=dims,
        dim_types=types,
        channels=int(m.channels.count),
        policy=policy,
        host_dims=host,
    )


def _top_level_mesh(path: str, msg: Any, names: set[str]) -> str:
    top = msg.top_level_instance
    kind = top.WhichOneof("node_ref")
    if kind == "mesh":
        name = top.mesh.mesh_descriptor
    elif kind == "graph":
        graphs = {g.name: g for g in msg.graph_descriptors}
        graph = graphs.get(top.graph.graph_descriptor)
        if graph is None:
            raise _invalid(
                path,
                f"top_level_instance names graph {top.graph.graph_descriptor!r}, which no "
                f"graph_descriptors entry defines (have {sorted(graphs)}).",
                "name an existing GraphDescriptor.",
            )
        refs = {
            i.mesh.mesh_descriptor for i in graph.instances if i.WhichOneof("node_ref") == "mesh"
        }
        if len(refs) != 1 or len(refs) != len({i.WhichOneof("node_ref") for i in graph.instances}):
            raise _invalid(
                path,
                f"graph {graph.name!r} must hold instances of exactly one mesh descriptor for "
                f"ttjax to open (has {sorted(refs)}).",
                "use one mesh descriptor per process, as in TTML's pipeline-parallel MGDs.",
            )
        name = refs.pop()
    else:
        raise _invalid(
            path,
            "top_level_instance is missing.",
            'add top_level_instance { mesh { mesh_descriptor: "M0" mesh_id: 0 } }.',
        )
    if name not in names:
        raise _invalid(
            path,
            f"top_level_instance names mesh {name!r}, which no mesh_descriptors entry defines "
            f"(have {sorted(names)}).",
            "name an existing MeshDescriptor.",
        )
    return name


def _mesh_instances(path: str, msg: Any) -> tuple[tuple[int, str], ...]:
    """``(mesh_id, mesh descriptor name)`` of every mesh instance under the top-level instance,
    through nested graphs (a graph that contains itself is refused)."""
    graphs = {g.name: g for g in msg.graph_descriptors}
    out: dict[int, str] = {}

    def visit(ref: Any, seen: tuple[str, ...]) -> None:
        kind = ref.WhichOneof("node_ref")
        if kind == "mesh":
            out.setdefault(int(ref.mesh.mesh_id), ref.mesh.mesh_descriptor)
        elif kind == "graph":
            name = ref.graph.graph_descriptor
            if name in seen:
                raise _invalid(
                    path,
                    f"graph {name!r} contains itself ({' -> '.join((*seen, name))}).",
                    "a graph may only instantiate meshes and other graphs.",
                )
            for inst in graphs[name].instances if name in graphs else ():
                visit(inst, (*seen, name))

    visit(msg.top_level_instance, ())
    return tuple(sorted(out.items()))


class _RecordingParser(text_format._Parser):  # protobuf's own parser, noting what it skips
    def __init__(self) -> None:
        super().__init__(allow_unknown_extension=True, allow_unknown_field=True)
        self.skipped: list[tuple[str, str, int, int]] = []
        self._depth = 0  # the fields inside a skipped message are not reported again

    def _SkipFieldContents(self, tokenizer: Any, field_name: str, message_type: str) -> None:
        if not self._depth:
            line = getattr(tokenizer, "_previous_line", -1) + 1
            col = getattr(tokenizer, "_previous_column", -1) + 1
            self.skipped.append((message_type, field_name, line, col))
        self._depth += 1
        try:
            super()._SkipFieldContents(tokenizer, field_name, message_type)
        finally:
            self._depth -= 1


def _parse_text(text: str, path: str, msg: Any) -> None:
    """Parse like tt-metal (AllowUnknownField / AllowUnknownExtension) and warn per skipped field."""
    parser = _RecordingParser()
    parser.ParseLines(text.split("\n"), msg)
    for message_type, name, line, col in parser.skipped:
        warnings.warn(
            f"{path}:{line}:{col}: field {name!r} of {message_type} is not in ttjax's MGD 2.0 "
            "schema; skipped (tt-metal parses descriptors with unknown fields for forward "
            "compatibility).",
            UnknownFieldWarning,
            stacklevel=4,
        )


def parse_mesh_graph_descriptor(text: str, path: str = "<string>") -> MeshGraphDescriptor:
    """Parse and validate MGD textproto ``text``; errors name ``path``, line and column."""
    msg = pb.MeshGraphDescriptor()
    try:
        _parse_text(text, path, msg)
    except text_format.ParseError as e:
        line, col = e.GetLine(), e.GetColumn()
        detail = str(e).split(" : ", 1)[-1]
        raise MeshGraphDescriptorError(
            f"{path}:{line}:{col}: malformed mesh graph descriptor (line {line}, column {col}): "
            f"{detail}\nfix: correct the textproto against ttjax/proto/"
            "mesh_graph_descriptor.proto (MGD 2.0), or start from a shipped descriptor."
        ) from None
    if not msg.mesh_descriptors:
        raise _invalid(
            path, "no mesh_descriptors.", 'add mesh_descriptors { name: "M0" ... } (see MGD 2.0).'
        )
    meshes = tuple(_mesh_spec(path, m) for m in msg.mesh_descriptors)
    names = [m.name for m in meshes]
    if len(set(names)) != len(names):
        raise _invalid(path, f"mesh descriptor names repeat: {names}.", "give each a unique name.")
    archs = {m.name: m.arch for m in meshes}
    if len(set(archs.values())) > 1:
        raise _invalid(
            path,
            f"All mesh descriptors must have the same architecture (have {archs}).",
            "one fabric runs one architecture: give every mesh_descriptors entry the same arch.",
        )
    top = _top_level_mesh(path, msg, set(names))
    return MeshGraphDescriptor(
        path=path,
        meshes=meshes,
        top_level=top,
        instances=_mesh_instances(path, msg),
        proto=msg,
    )


def _not_found(path: Path, source: str) -> MeshGraphDescriptorError:
    return MeshGraphDescriptorError(
        f"mesh graph descriptor {str(path)!r} does not exist ({source}).\n"
        f"fix: point {ENV_VARS[1]} (or {ENV_VARS[0]}) at an existing .textproto, or at one of the "
        f"shipped descriptors: {', '.join(shipped_descriptors())}."
    )


def load_mesh_graph_descriptor(
    path: str | os.PathLike[str], *, source: str = ""
) -> MeshGraphDescriptor:
    """Read and validate the MGD file at ``path``; ``source`` says where the path came from."""
    p = Path(path)
    if not p.is_file():
        raise _not_found(p, source or "given path")
    text = read_user_text(
        p, "mesh graph descriptor", "an MGD 2.0 textproto", MeshGraphDescriptorError
    )
    return parse_mesh_graph_descriptor(text, str(p))


def mesh_graph_descriptor_path(num_devices: int) -> tuple[Path, str]:
    """The descriptor path for ``num_devices`` and where it came from (a variable or the default).

    A variable may hold a path or the bare name of a shipped descriptor.
    """
    for var in ENV_VARS:
        raw = os.environ.get(var, "").strip()
        if raw:
            p = Path(raw).expanduser()
            shipped = shipped_descriptors()
            if not p.exists() and raw in shipped:
                p = shipped[raw]
            return p, f"{var}={raw}"
    name = DEFAULT_DESCRIPTORS.get(int(num_devices))
    if name is None:
        raise MeshGraphDescriptorError(
            f"No default mesh graph descriptor for {num_devices} devices ({ENV_VARS[1]} and "
            f"{ENV_VARS[0]} are unset); the default meshes are {fitting_meshes()}.\n"
            f"fix: use one of those meshes (device_config.mesh_shape or --mesh-shape), or set "
            f"{ENV_VARS[1]} to your descriptor for {num_devices} devices."
        )
    return shipped_descriptors()[name], f"default for {num_devices} devices"


def _shapes(n: int) -> list[str]:
    return [f"{r}x{n // r}" for r in range(1, n + 1) if n % r == 0]


def fitting_meshes(max_devices: int | None = None) -> str:
    """The meshes the default descriptors open, up to ``max_devices`` devices, as text:
    ``"1x1; 1x2, 2x1; 1x8, 2x4, 4x2, 8x1"`` (a line descriptor opens any mesh of its count)."""
    groups = []
    for n, name in sorted(DEFAULT_DESCRIPTORS.items()):
        if max_devices is not None and n > max_devices:
            continue
        mesh = load_mesh_graph_descriptor(shipped_descriptors()[name]).mesh
        groups.append(", ".join(_shapes(n) if mesh.is_line else ["x".join(map(str, mesh.dims))]))
    return "; ".join(groups) or "none"


def select_mesh_graph_descriptor(num_devices: int) -> MeshGraphDescriptor:
    """The descriptor TTML's ``enable_fabric(num_devices)`` would use, loaded and validated."""
    path, source = mesh_graph_descriptor_path(num_devices)
    return load_mesh_graph_descriptor(path, source=source)


__all__ = [
    "DEFAULT_DESCRIPTORS",
    "ENV_VARS",
    "MeshGraphDescriptor",
    "MeshSpec",
    "UnknownFieldWarning",
    "fitting_meshes",
    "load_mesh_graph_descriptor",
    "mesh_graph_descriptor_path",
    "parse_mesh_graph_descriptor",
    "select_mesh_graph_descriptor",
    "shipped_descriptors",
]
