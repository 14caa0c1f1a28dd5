"""The API reference: every public name is documented, grouped as TT-NN groups it, and the op
pages are generated from ``ttjax.ops`` (a new op cannot be left out)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ttjax

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _hooks():
    spec = importlib.util.spec_from_file_location("ttjax_docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _documented() -> set[str]:
    text = "\n".join(p.read_text() for p in (DOCS / "api").glob("*.md"))
    return set(re.findall(r"^::: ttjax\.(\w+)\s*$", text, re.M))


def test_every_public_name_is_in_the_reference():
    hooks = _hooks()
    ops = {name for names in hooks.ops_by_family().values() for name in names}
    missing = sorted(set(ttjax.__all__) - _documented() - ops)
    assert missing == [], f"not in docs/api/*.md: {missing}"
    assert ops == set(ttjax.ops.__all__)
    ops_page = (DOCS / "api" / "ops.md").read_text()
    for family in hooks.ops_by_family():
        assert f"<!-- ttjax:ops {family} -->" in ops_page, family


def test_the_op_table_lists_every_op_with_its_per_device_semantics():
    hooks = _hooks()
    table = hooks.ops_table()
    rows = table.splitlines()[2:]
    assert len(rows) == len(ttjax.ops.__all__)
    for name in ttjax.ops.__all__:
        (row,) = [r for r in rows if r.startswith(f"| [`ttnn.{name}`]")]
        semantics = row.rsplit("|", 2)[-2].strip()
        assert semantics, f"ttnn.{name} has no docstring"
    expanded = hooks.on_page_markdown("<!-- ttjax:ops matmul -->")
    assert expanded == "::: ttjax.linear\n\n::: ttjax.matmul"


@pytest.mark.slow
def test_mkdocs_build_is_strict_clean_and_has_every_name(tmp_path):
    site = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    html = "\n".join(p.read_text() for p in site.rglob("*.html"))
    ids = set(re.findall(r'id="ttjax\.(\w+)"', html))
    assert sorted(set(ttjax.__all__) - ids) == []
