"""mkdocs hook: generate the op pages from ``ttjax.ops`` (its families' ``__all__`` and docstrings).

A page holding ``<!-- ttjax:ops-table -->`` gets a table of every op (family, what it does per
device: the docstring's first line); ``<!-- ttjax:ops FAMILY -->`` expands to one mkdocstrings
block per op of that family. Nothing about the ops is written by hand. The README is a page of
the site (``readme.md``), and docstrings are read as Markdown (``DocstringMarkdown`` below).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import griffe

FAMILIES = {
    "pointwise": "Pointwise (unary, binary, ternary)",
    "matmul": "Matrix multiplication",
    "reduction": "Reductions and normalization",
    "normalization": "Group norm",
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


def on_files(files: Any, config: Any, **kwargs: Any) -> Any:
    """The repository's README.md as the page ``readme.md`` (its ``docs/`` links made relative)."""
    from mkdocs.structure.files import File

    text = (Path(config["docs_dir"]).parent / "README.md").read_text()
    files.append(File.generated(config, "readme.md", content=text.replace("](docs/", "](")))
    return files


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    markdown = markdown.replace("<!-- ttjax:ops-table -->", ops_table())
    return re.sub(r"<!-- ttjax:ops (\w+) -->", lambda m: family_blocks(m.group(1)), markdown)


# Sphinx roles in docstrings (``:func:`open_mesh_device```, ``:class:`~ttjax.tensor.Tensor```)
# are rendered as links: mkdocstrings reads docstrings as Markdown, where a role would show raw.
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const):`(?P<target>[^`]+)`")


def _candidates(obj: Any, name: str) -> list[str]:
    """Where ``name`` may live, seen from the docstring of ``obj``: as Sphinx looks it up."""
    scopes = []
    scope = obj
    while scope is not None:
        if scope.kind.value in ("class", "module"):
            scopes.append(scope.path)
        scope = scope.parent
    relative = [f"{s}.{name}" for s in scopes]
    return [name, *relative] if "." in name else relative


def _resolve(obj: Any, name: str) -> tuple[str, str] | None:
    """``(path, canonical path)`` of the first candidate griffe knows, else None."""
    collection = obj.modules_collection
    for path in _candidates(obj, name):
        try:
            found = collection[path]
        except (KeyError, ValueError, AttributeError):
            continue
        try:
            canonical = found.final_target.path if found.is_alias else found.path
        except Exception:  # an alias griffe cannot follow (an external package)
            canonical = path
        return path, canonical
    return None


def role_to_markdown(obj: Any, docstring: str) -> str:
    """Each role becomes inline code, linked (an optional autoref) when the target is rendered."""

    def replace(match: re.Match[str]) -> str:
        target = match["target"].strip()
        short = target.startswith("~")
        name = target.lstrip("~.").removesuffix("()")
        shown = name.rsplit(".", 1)[-1] if short else name
        found = _resolve(obj, name)
        if found is None:
            return f"`{shown}`"
        path, canonical = found
        slug = f' slug="{canonical}"' if canonical != path else ""
        return f'<autoref identifier="{path}"{slug} optional>`{shown}`</autoref>'

    return ROLE.sub(replace, docstring)


def fence_doctests(docstring: str) -> str:
    """Bare ``>>>`` examples (up to the next blank line) become fenced ``pycon`` blocks.

    Markdown would otherwise run them into one paragraph, reading ``<MeshDevice: ...>`` as HTML
    and ``[...]`` as a link. Blocks already inside a fence and "Examples:" sections are kept.
    """
    out: list[str] = []
    fenced = in_doctest = examples = False
    indent = ""
    for line in docstring.splitlines():
        stripped = line.strip()
        if in_doctest and not stripped:
            out.append(f"{indent}```")
            in_doctest = False
        if stripped.startswith("```"):
            fenced = not fenced
        elif not in_doctest and not line.startswith((" ", "\t")) and stripped:
            examples = stripped.rstrip(":") in ("Example", "Examples")
        if not (fenced or in_doctest or examples) and stripped.startswith(">>>"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
            in_doctest = True
        out.append(line)
    if in_doctest:
        out.append(f"{indent}```")
    return "\n".join(out)


def literal_blocks(docstring: str) -> str:
    """reST's ``text::`` before an indented block reads ``text:`` (the block is Markdown code)."""
    return re.sub(r"(\S)::\n(\s*\n)( {4})", r"\1:\n\2\3", docstring)


class DocstringMarkdown(griffe.Extension):
    """Griffe extension (mkdocs.yml ``extensions``): rewrite docstrings once a package is loaded:
    Sphinx roles become (linked) inline code, bare doctest examples become code blocks, reST's
    ``::`` literal-block marker is dropped."""

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        stack = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None:
                value = literal_blocks(fence_doctests(obj.docstring.value))
                obj.docstring.value = role_to_markdown(obj, value) if ROLE.search(value) else value
            stack.extend(m for m in obj.members.values() if not m.is_alias)
