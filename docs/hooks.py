"""mkdocs hook: generate the op pages from ``ttjax.ops`` (its families' ``__all__`` and docstrings).

A page holding ``<!-- ttjax:ops-table -->`` gets a table of every op (family, what it does per
device: the docstring's first line); ``<!-- ttjax:ops FAMILY -->`` expands to one mkdocstrings
block per op of that family. Nothing about the ops is written by hand.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

FAMILIES = {
    "pointwise": "Pointwise (unary, binary, ternary)",
    "matmul": "Matrix multiplication",
    "reduction": "Reductions and normalization",
    "data_movement": "Data movement",
    "creation": "Creation",
    "memory": "Memory configs and lifetime",
    "transformer": "Transformer",
    "fused": "Fused transformer ops",
}


def ops_by_family() -> dict[str, list[str]]:
    """``{family: [op names]}`` for every name in ``ttjax.ops.__all__``, by defining module."""
    ops = importlib.import_module("ttjax.ops")
    out: dict[str, list[str]] = {f: [] for f in FAMILIES}
    for name in ops.__all__:
        module = getattr(getattr(ops, name), "__module__", "")
        family = module.rsplit(".", 1)[-1]
        out.setdefault(family, []).append(name)
    return {f: sorted(names) for f, names in out.items() if names}


def first_line(name: str) -> str:
    ops = importlib.import_module("ttjax.ops")
    doc = (getattr(ops, name).__doc__ or "").strip()
    return doc.splitlines()[0].replace("|", "\\|") if doc else ""


def ops_table() -> str:
    rows = ["| op | family | per device |", "| --- | --- | --- |"]
    for family, names in ops_by_family().items():
        for name in names:
            link = f"[`ttnn.{name}`](ops.md#ttjax.{name})"
            rows.append(f"| {link} | {FAMILIES.get(family, family)} | {first_line(name)} |")
    return "\n".join(rows)


def family_blocks(family: str) -> str:
    names = ops_by_family().get(family, [])
    return "\n\n".join(f"::: ttjax.{name}" for name in names)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    markdown = markdown.replace("<!-- ttjax:ops-table -->", ops_table())
    return re.sub(r"<!-- ttjax:ops (\w+) -->", lambda m: family_blocks(m.group(1)), markdown)
