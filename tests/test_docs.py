"""The API reference: every public name and package is documented, grouped as TT-NN groups it, the
op pages are generated from ``ttjax.ops`` (a new op cannot be left out), and docstrings render as
Markdown (Sphinx roles become links or code, doctest examples become code blocks)."""

from __future__ import annotations

import importlib.util
import pkgutil
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


# Every public package has a reference page (``::: package`` in docs/api/*.md).
PACKAGES = [
    "ttjax.ttml",
    "ttjax.ttml.config",
    "ttjax.ttml.autograd",
    "ttjax.ttml.context",
    "ttjax.ttml.modules",
    "ttjax.ttml.trainer",
    "ttjax.ttml.checkpoint",
    "ttjax.ttml.pipeline",
    "ttjax.ttml.mgd",
    "ttjax.spmd",
    "ttjax.dist",
    "ttjax.distributed",
    "ttjax.run",
    "ttjax.experimental",
    "ttjax.transformer",
    "ttjax.inspect",
    "models.llama",
    "models.nanogpt",
    "models.moe",
    "models.falcon",
]


def test_every_public_package_has_a_reference_page():
    text = "\n".join(p.read_text() for p in (DOCS / "api").glob("*.md"))
    blocks = set(re.findall(r"^::: ([\w.]+)\s*$", text, re.M))
    assert sorted(set(PACKAGES) - blocks) == []
    for pkg in ("ttjax", "models"):  # every top-level package of the project is listed above
        root = ROOT / pkg
        subpackages = {f"{pkg}.{p.name}" for p in root.iterdir() if (p / "__init__.py").is_file()}
        subpackages -= {"ttjax.ops"}  # documented op by op (the op pages)
        subpackages -= {"ttjax.proto"}  # protoc's output for the MGD schema (see ttjax.mgd)
        assert subpackages <= set(PACKAGES) | {"ttjax.ttml.core", "ttjax.ttml.ops"} | blocks
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    for page in (DOCS / "api").glob("*.md"):
        assert f"api/{page.name}" in mkdocs, f"{page.name} is not in mkdocs.yml's nav"


def test_every_public_module_of_ttjax_is_in_the_reference():
    """A module is documented by its own page block, or through the ``ttjax`` names it defines."""
    text = "\n".join(p.read_text() for p in (DOCS / "api").glob("*.md"))
    blocks = set(re.findall(r"^::: ([\w.]+)\s*$", text, re.M))
    homes = {getattr(getattr(ttjax, n), "__module__", "") for n in ttjax.__all__}
    public = [m.name for m in pkgutil.iter_modules(ttjax.__path__) if not m.name.startswith("_")]
    missing = [
        f"ttjax.{m}"
        for m in public
        if f"ttjax.{m}" not in blocks | homes and m not in ("ops", "proto")
    ]
    assert missing == [], f"no reference page: {missing}"


def test_sphinx_roles_become_links_or_code_and_doctests_become_code_blocks():
    griffe = pytest.importorskip("griffe")
    hooks = _hooks()
    source = {
        "__init__.py": '''
from pkg.mod import helper

def top():
    """Calls :func:`helper` and :class:`~pkg.mod.Thing`, not :func:`missing`.

    >>> top()
    [1]
    """
''',
        "mod.py": '''
class Thing:
    """See :meth:`go`."""

    def go(self):
        """Go."""

def helper():
    """Help."""
''',
    }
    with griffe.temporary_visited_package("pkg", source) as pkg:
        hooks.DocstringMarkdown().on_package(pkg=pkg)
        top = pkg["top"].docstring.value
        go = pkg["mod"]["Thing"].docstring.value
    assert ":func:" not in top and ":class:" not in top
    assert (
        '<autoref identifier="pkg.helper" slug="pkg.mod.helper" optional>`helper`</autoref>' in top
    )
    assert '<autoref identifier="pkg.mod.Thing" optional>`Thing`</autoref>' in top
    assert "not `missing`." in top  # unknown: plain code, no link
    assert "```pycon\n>>> top()\n[1]\n```" in top
    assert go == 'See <autoref identifier="pkg.mod.Thing.go" optional>`go`</autoref>.'
    assert hooks.literal_blocks("style::\n\n    x -> y\n") == "style:\n\n    x -> y\n"
    examples = "Examples:\n    >>> 1\n    1"  # griffe renders Examples sections itself
    assert hooks.fence_doctests(examples) == examples


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
    assert expanded == (
        "::: ttjax.bmm\n\n::: ttjax.linear\n\n::: ttjax.matmul\n\n::: ttjax.sparse_matmul"
    )


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
    assert set(PACKAGES) <= set(re.findall(r'id="([\w.]+)"', html))
    raw = re.findall(r":(?:func|class|meth|attr|mod):<code>[^<]*", html)
    assert raw == [], f"Sphinx roles shown raw: {raw[:5]}"
    assert "&gt;&gt;&gt;" not in re.sub(r"<pre>.*?</pre>", "", html, flags=re.S)  # doctests fenced
    # the README is a page of the site (readme.md); its links and the home's that name a heading
    # (page.md#heading) land on one
    assert (site / "readme" / "index.html").is_file()

    def headings(page: str) -> set[str]:
        html = site / ("index.html" if page == "index" else f"{page}/index.html")
        return set(re.findall(r'<h\d id="([^"]+)"', html.read_text()))

    for source in (ROOT / "README.md", DOCS / "index.md"):
        for page, anchor in re.findall(r"\]\((?:docs/)?([\w/]+)\.md#([^)]+)\)", source.read_text()):
            assert anchor in headings(page), (source.name, page, anchor)
    assert "training-ttml" in headings("training")
    assert "multi-process-and-multi-host-ttjax-run" in headings("multihost")
    assert "running-tenstorrents-model-code" in headings("tt_metal")
