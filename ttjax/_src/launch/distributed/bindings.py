"""tt-run's rank-binding YAML: load it as untrusted input and reject every mistake before a rank starts.

The implementation of :mod:`ttjax.distributed.bindings`, whose docstring says more.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ttjax._src.core.errors import ConfigError, MeshGraphDescriptorError
from ttjax._src.core.mgd import parse_mesh_graph_descriptor
from ttjax._src.core.userfile import read_user_text

MAX_RANKS = 1024
MAX_FILE_BYTES = 1 << 20
TOP_LEVEL_KEYS = ("rank_bindings", "mesh_graph_desc_path", "global_env")
BINDING_KEYS = ("rank", "mesh_id", "mesh_host_rank", "env_overrides")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RankBindingError(ConfigError):
    """A rank-binding file (or its mesh graph descriptor) that the launcher refuses to run."""


@dataclass(frozen=True)
class RankBinding:
    """One rank: which mesh it belongs to, its place in that mesh, and its environment."""

    rank: int
    mesh_id: int
    mesh_host_rank: int
    visible_devices: tuple[int, ...]
    env_overrides: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RankBindings:
    """A validated rank-binding file; ``ranks[i].rank == i``."""

    ranks: tuple[RankBinding, ...]
    mesh_graph_desc_path: str | None = None
    global_env: tuple[tuple[str, str], ...] = ()
    source: str = field(default="<string>", compare=False)

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    def mesh_ids(self) -> tuple[int, ...]:
        return tuple(sorted({r.mesh_id for r in self.ranks}))

    def mesh_devices(self, mesh_id: int) -> tuple[int, ...]:
        """The global device ids of one mesh, sorted (row-major mesh order)."""
        return tuple(
            sorted(i for r in self.ranks if r.mesh_id == mesh_id for i in r.visible_devices)
        )


def _fail(source: str, where: str, what: str, fix: str) -> RankBindingError:
    return RankBindingError(f"{source}: {where}: {what}\nfix: {fix}")


def _int(source: str, where: str, value: Any, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _fail(source, where, f"{value!r} is not a non-negative integer.", "e.g. 0 or 1.")
    return value


def _env(source: str, where: str, value: Any) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise _fail(
            source,
            where,
            f"must be a mapping NAME: value, got {type(value).__name__}.",
            f'e.g. {where}: {{TT_VISIBLE_DEVICES: "0,1"}}.',
        )
    out = []
    for k, v in value.items():
        if not isinstance(k, str) or not _ENV_NAME.match(k):
            raise _fail(
                source,
                where,
                f"{k!r} is not an environment variable name.",
                "use letters, digits and underscores, e.g. TT_METAL_LOGGER_LEVEL.",
            )
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise _fail(
                source,
                f"{where}.{k}",
                f"{v!r} is not a string or number.",
                f'quote it: {k}: "value".',
            )
        out.append((k, str(v)))
    return tuple(out)


def parse_visible_devices(source: str, where: str, raw: str) -> tuple[int, ...]:
    """``"0,1, 2"`` -> ``(0, 1, 2)``; rejects junk, negatives and repeats."""
    ids = []
    for part in raw.replace(" ", "").split(","):
        if not part.isdigit():
            raise _fail(
                source,
                where,
                f"{raw!r} holds {part!r}, which is not a device id.",
                'a comma-separated list of ids, e.g. "0,1,2,3".',
            )
        ids.append(int(part))
    if len(set(ids)) != len(ids):
        raise _fail(source, where, f"{raw!r} lists a device twice.", "list each id once.")
    return tuple(ids)


def parse_rank_bindings(
    text: str, source: str = "<string>", base_dir: str | None = None
) -> RankBindings:
    """Validate rank-binding YAML text; ``base_dir`` resolves a relative ``mesh_graph_desc_path``."""
    if len(text) > MAX_FILE_BYTES:
        raise _fail(
            source,
            "file",
            f"is {len(text)} bytes, over the {MAX_FILE_BYTES} limit.",
            "a rank-binding file lists one short entry per rank.",
        )
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise _fail(source, "YAML", str(e).replace("\n", " "), "fix the YAML syntax.") from None
    if not isinstance(doc, Mapping):
        raise _fail(
            source,
            "top level",
            "must be a mapping with a rank_bindings list.",
            "start the file with `rank_bindings:`.",
        )
    unknown = sorted(str(k) for k in doc if k not in TOP_LEVEL_KEYS)
    if unknown:
        raise _fail(
            source, "top level", f"unknown key(s) {unknown}.", f"use only {list(TOP_LEVEL_KEYS)}."
        )
    entries = doc.get("rank_bindings")
    if not isinstance(entries, list) or not entries:
        raise _fail(
            source,
            "rank_bindings",
            "must be a non-empty list.",
            "one entry per rank: - {rank: 0, mesh_id: 0, env_overrides: {...}}.",
        )
    if len(entries) > MAX_RANKS:
        raise _fail(
            source, "rank_bindings", f"{len(entries)} ranks, over {MAX_RANKS}.", "split the job."
        )
    global_env = _env(source, "global_env", doc.get("global_env"))
    ranks: dict[int, RankBinding] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise _fail(
                source,
                f"rank_bindings[{i}]",
                "must be a mapping.",
                "- {rank: 0, mesh_id: 0, mesh_host_rank: 0, env_overrides: {...}}.",
            )
        if "rank" not in entry:
            raise _fail(source, f"rank_bindings[{i}]", "has no `rank`.", f"add rank: {i}.")
        rank = _int(source, f"rank_bindings[{i}].rank", entry["rank"])
        where = f"rank {rank}"
        bad = sorted(str(k) for k in entry if k not in BINDING_KEYS)
        if bad:
            raise _fail(source, where, f"unknown key(s) {bad}.", f"use only {list(BINDING_KEYS)}.")
        if rank in ranks:
            raise _fail(source, where, "appears twice in rank_bindings.", "give each rank once.")
        if "mesh_id" not in entry:
            raise _fail(
                source, where, "has no mesh_id.", "add mesh_id: 0 (ranks sharing it form one mesh)."
            )
        mesh_id = _int(source, f"{where}.mesh_id", entry["mesh_id"])
        host_rank = _int(source, f"{where}.mesh_host_rank", entry.get("mesh_host_rank"), default=0)
        env = _env(source, f"{where}.env_overrides", entry.get("env_overrides"))
        raw = dict(global_env) | dict(env)
        if "TT_VISIBLE_DEVICES" not in raw:
            raise _fail(
                source,
                f"{where}.env_overrides",
                "sets no TT_VISIBLE_DEVICES.",
                'list the global device ids this rank drives, e.g. TT_VISIBLE_DEVICES: "0,1".',
            )
        visible = parse_visible_devices(
            source, f"{where}.env_overrides.TT_VISIBLE_DEVICES", raw["TT_VISIBLE_DEVICES"]
        )
        ranks[rank] = RankBinding(rank, mesh_id, host_rank, visible, env)
    missing = sorted(set(range(len(ranks))) - set(ranks))
    if missing:
        raise _fail(
            source,
            "rank_bindings",
            f"ranks {missing} are missing (ranks must run 0..N-1; found {sorted(ranks)}).",
            f"add rank {missing[0]} or renumber the ranks.",
        )
    ordered = tuple(ranks[i] for i in range(len(ranks)))
    _check_meshes(source, ordered)
    mgd = doc.get("mesh_graph_desc_path")
    if mgd is not None:
        if not isinstance(mgd, str) or not mgd:
            raise _fail(
                source,
                "mesh_graph_desc_path",
                f"{mgd!r} is not a path.",
                'e.g. mesh_graph_desc_path: "t3k_mesh_graph_descriptor.textproto".',
            )
        path = Path(mgd)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise _fail(
                source,
                "mesh_graph_desc_path",
                f"{str(path)!r} does not exist.",
                "give a path relative to the rank-binding file, or an absolute one.",
            )
        mgd = str(path.resolve())
        check_descriptor(source, mgd, ordered)
    return RankBindings(ordered, mgd, global_env, source)


def _check_meshes(source: str, ranks: tuple[RankBinding, ...]) -> None:
    owner: dict[tuple[int, int], int] = {}
    host_ranks: dict[tuple[int, int], int] = {}
    for r in ranks:
        key = (r.mesh_id, r.mesh_host_rank)
        if key in host_ranks:
            raise _fail(
                source,
                f"rank {r.rank}.mesh_host_rank",
                f"{r.mesh_host_rank} is already taken in mesh {r.mesh_id} by rank "
                f"{host_ranks[key]}.",
                "give each rank of a mesh its own mesh_host_rank.",
            )
        host_ranks[key] = r.rank
        for d in r.visible_devices:
            if (r.mesh_id, d) in owner:
                raise _fail(
                    source,
                    f"rank {r.rank}.env_overrides.TT_VISIBLE_DEVICES",
                    f"device {d} of mesh {r.mesh_id} is also visible to rank "
                    f"{owner[(r.mesh_id, d)]}.",
                    "ranks of one mesh must drive disjoint devices.",
                )
            owner[(r.mesh_id, d)] = r.rank


def load_rank_bindings(path: str | os.PathLike[str]) -> RankBindings:
    """Read and validate a rank-binding file (``mesh_graph_desc_path`` is relative to it)."""
    p = Path(path)
    if not p.is_file():
        raise RankBindingError(
            f"Rank-binding file {str(p)!r} does not exist.\n"
            "fix: pass --rank-binding PATH to an existing YAML file."
        )
    text = read_user_text(
        p, "rank-binding file", "a YAML file with `rank_bindings:`", RankBindingError
    )
    return parse_rank_bindings(text, str(p), str(p.parent))


def descriptor_mesh_sizes(text: str, path: str = "<string>") -> dict[int, int]:
    """``{mesh_id: device count}`` of every mesh instance in an MGD 2.0 textproto, read with the
    schema-checked parser (:mod:`ttjax.mgd`) that TTML uses too."""
    return parse_mesh_graph_descriptor(text, path).mesh_sizes()


def check_descriptor(source: str, path: str, ranks: tuple[RankBinding, ...]) -> None:
    """Each mesh of the bindings must exist in the descriptor with as many devices as it binds."""
    try:
        text = read_user_text(
            Path(path), "mesh graph descriptor", "an MGD 2.0 textproto", MeshGraphDescriptorError
        )
        sizes = descriptor_mesh_sizes(text, path)
    except (MeshGraphDescriptorError, OSError) as e:
        what, _, fix = str(e).partition("\nfix: ")
        raise _fail(
            source,
            "mesh_graph_desc_path",
            f"{path!r} cannot be read as an MGD 2.0 textproto: {what}",
            fix or "fix the descriptor.",
        ) from None
    for r in ranks:
        if r.mesh_id not in sizes:
            raise _fail(
                source,
                f"rank {r.rank}.mesh_id",
                f"mesh {r.mesh_id} is not an instance in {path!r} (it has meshes {sorted(sizes)}).",
                "bind ranks only to meshes the descriptor defines.",
            )
    for mesh_id in sorted({r.mesh_id for r in ranks}):
        bound = [r for r in ranks if r.mesh_id == mesh_id]
        n = sum(len(r.visible_devices) for r in bound)
        if sizes[mesh_id] != n:
            ids = ", ".join(f"rank {r.rank}: {len(r.visible_devices)}" for r in bound)
            raise _fail(
                source,
                f"rank {bound[0].rank}.env_overrides.TT_VISIBLE_DEVICES",
                f"mesh {mesh_id} has {sizes[mesh_id]} devices in {path!r} but its ranks "
                f"bind {n} ({ids}).",
                "make the ranks' TT_VISIBLE_DEVICES cover exactly the descriptor's devices.",
            )


__all__ = [
    "RankBinding",
    "RankBindingError",
    "RankBindings",
    "descriptor_mesh_sizes",
    "load_rank_bindings",
    "parse_rank_bindings",
    "parse_visible_devices",
]
