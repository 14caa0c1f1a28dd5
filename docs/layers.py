"""docs/architecture.md's folder table and layer tables, generated from the import-linter contracts.

The contracts in ``pyproject.toml`` are the one layer list: this renders them (and each folder's
docstring) between the ``<!-- layers:begin -->`` / ``<!-- layers:end -->`` markers of
architecture.md, and ``tests/test_layering.py`` fails when the page and the contracts disagree.

    .venv/bin/python docs/layers.py          # rewrite the generated part of docs/architecture.md
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- layers:begin -->", "<!-- layers:end -->"

# Folders that are not packages (no __init__.py), said by hand.
DATA_FOLDERS = {
    "ttjax/descriptors": "the shipped MGD mesh graph descriptors (text protos) that `ttjax.mgd` reads",
}


def contracts() -> list[dict]:
    """The ``layers`` contracts of pyproject.toml, in file order."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]


def _names(row: str) -> list[str]:
    return [n.strip(" ()") for n in re.split(r"[|:]", row)]


def _summary(init: Path) -> str:
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _may_import(module: str) -> list[str] | None:
    """What ``module`` (dotted) may import: the layers below it in every contract that places it
    (None: no contract places it)."""
    below: list[str] | None = None
    for contract in contracts():
        for container in contract["containers"]:
            for i, row in enumerate(contract["layers"]):
                if any(
                    module == f"{container}.{n}" or module.startswith(f"{container}.{n}.")
                    for n in _names(row)
                ):
                    below = below or []
                    for lower in contract["layers"][i + 1 :]:
                        below += [f"{container}.{n}".removeprefix("ttjax.") for n in _names(lower)]
    return below


def folder_table() -> str:
    rows = ["| folder | what lives there | may import (of ttjax) |", "| --- | --- | --- |"]
    folders = sorted(
        p.parent for p in (ROOT / "ttjax").rglob("__init__.py") if "__pycache__" not in p.parts
    )
    for folder in folders:
        rel = folder.relative_to(ROOT).as_posix()
        module = rel.replace("/", ".")
        below = _may_import(module)
        if module == "ttjax":
            may = "everything: its public modules re-export `ttjax._src`"
        elif module == "ttjax._src":
            may = "(the layers below)"
        elif below is None:
            may = "re-exports `ttjax._src` (no layer of its own)"
        else:
            may = ", ".join(f"`{n}`" for n in below) or "nothing of ttjax"
        rows.append(f"| `{rel}/` | {_summary(folder / '__init__.py')} | {may} |")
    for rel, what in DATA_FOLDERS.items():
        rows.append(f"| `{rel}/` | {what} | (data) |")
    return "\n".join(rows)


def layer_tables() -> str:
    out = []
    for contract in contracts():
        out.append(
            f"**{contract['name']}** (`{', '.join(contract['containers'])}`; top imports bottom):\n"
        )
        out.append("| layer | modules | siblings |")
        out.append("| --- | --- | --- |")
        for i, row in enumerate(contract["layers"]):
            names = ", ".join(f"`{n}`" for n in _names(row))
            kind = "independent" if "|" in row else "may import each other" if ":" in row else ""
            out.append(f"| {i + 1} | {names} | {kind} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render() -> str:
    return f"{BEGIN}\n\n{folder_table()}\n\n{layer_tables()}\n{END}"


def current() -> str:
    text = PAGE.read_text()
    return text[text.index(BEGIN) : text.index(END) + len(END)]


def write() -> None:
    text = PAGE.read_text()
    PAGE.write_text(text.replace(current(), render()))


if __name__ == "__main__":
    write()
