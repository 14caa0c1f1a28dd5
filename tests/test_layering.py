"""The import layers: the import-linter contracts hold, and break on an upward import.

Also: no ``ttjax`` import hides inside a function (only optional dependencies load lazily), the
tree shows the layers (``ttjax/_src/<layer>/``, public modules at the top), no source file is over
1,000 lines, and docs/architecture.md's layer tables are the contracts' own.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(cwd / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
    )


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ttjax/ and pyproject.toml that a test may break."""
    if not LINT_IMPORTS.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    dst = tmp_path_factory.mktemp("layering")
    shutil.copytree(ROOT / "ttjax", dst / "ttjax", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


def test_layer_contract_kept(package_copy: Path) -> None:
    result = _lint_imports(package_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ttjax layers KEPT" in result.stdout
    assert "BROKEN" not in result.stdout


def test_upward_import_breaks_the_contract(package_copy: Path) -> None:
    """The core's tensor.py importing the ops (a layer above it) must fail ``make lint``."""
    tensor_py = package_copy / "ttjax" / "_src" / "core" / "tensor.py"
    original = tensor_py.read_text()
    try:
        tensor_py.write_text(original + "\nfrom ttjax._src.ttnn import ops  # noqa: E402\n")
        result = _lint_imports(package_copy)
    finally:
        tensor_py.write_text(original)
    assert result.returncode != 0
    assert "ttjax layers BROKEN" in result.stdout
    assert "ttjax._src.core.tensor -> ttjax._src.ttnn.ops" in result.stdout


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement names (``from ttjax import ops``: ``ttjax.ops``; a relative
    import: its dots); [] for any other node."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            return ["." * node.level]
        if node.module == "ttjax":
            return [f"ttjax.{a.name}" for a in node.names]
        return [node.module or ""]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return []


def _imports_inside_functions(path: Path, root: Path = ROOT) -> list[str]:
    """``path:line module`` for every ttjax import nested inside a function body."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            for name in _imported(node):
                if name.startswith(".") or name == "ttjax" or name.startswith("ttjax."):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return found


def test_no_ttjax_import_inside_functions() -> None:
    """Lazy imports are for optional dependencies (rich, torch, matplotlib) only."""
    files = sorted((ROOT / "ttjax").rglob("*.py")) + sorted((ROOT / "models").rglob("*.py"))
    assert len(files) > 20
    offenders = [hit for f in files for hit in _imports_inside_functions(f)]
    assert offenders == []


def test_the_scan_sees_a_lazy_import(tmp_path: Path) -> None:
    """The check above can fail: a function-level ``from ttjax ...`` is reported."""
    bad = tmp_path / "probe.py"
    bad.write_text("import ttjax\n\ndef f():\n    from ttjax.ops import add\n    return add\n")
    assert _imports_inside_functions(bad, tmp_path) == ["probe.py:4 ttjax.ops"]


def _logic_lines(path: Path) -> int:
    """Lines of top-level statements other than imports and the docstring."""
    tree = ast.parse(path.read_text())
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    return sum(
        n.end_lineno - n.lineno + 1 for n in body if not isinstance(n, (ast.Import, ast.ImportFrom))
    )


# The frontends' public entry points, which are modules of their own at the top level.
FRONTEND_MODULES = {"__init__.py", "spmd.py", "torchxla.py", "compat.py"}


def test_the_top_level_holds_public_modules_and_the_code_lives_under_src() -> None:
    top = sorted(p.name for p in (ROOT / "ttjax").glob("*.py"))
    assert [n for n in top if n.startswith("_") and n != "__init__.py"] == []
    big = {n for n in top if _logic_lines(ROOT / "ttjax" / n) > 120}
    assert big <= FRONTEND_MODULES and len(big) <= 4, big
    layers = {p.name for p in (ROOT / "ttjax" / "_src").iterdir() if (p / "__init__.py").exists()}
    assert layers == {"core", "ttnn", "tools", "launch"}


def test_no_source_file_is_over_1000_lines() -> None:
    files = [*(ROOT / "ttjax").rglob("*.py"), *(ROOT / "models").rglob("*.py")]
    long = {
        str(f.relative_to(ROOT)): n
        for f in files
        if not f.name.endswith("_pb2.py") and (n := len(f.read_text().splitlines())) > 1000
    }
    assert long == {}


def test_the_implementation_never_imports_the_public_modules() -> None:
    """``ttjax._src`` imports ``ttjax._src`` (and the generated ``ttjax.proto``) only."""
    offenders = [
        f"{f.relative_to(ROOT)}: {name}"
        for f in sorted((ROOT / "ttjax" / "_src").rglob("*.py"))
        for node in ast.walk(ast.parse(f.read_text()))
        for name in _imported(node)
        if name.split(".")[0] == "ttjax" and not name.startswith(("ttjax._src", "ttjax.proto"))
    ]
    assert offenders == []


def _layers_doc():
    spec = importlib.util.spec_from_file_location("ttjax_docs_layers", ROOT / "docs" / "layers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_architecture_page_is_generated_from_the_contracts() -> None:
    """docs/architecture.md's folder and layer tables are what docs/layers.py makes of
    pyproject.toml's contracts now (regenerate: .venv/bin/python docs/layers.py)."""
    layers = _layers_doc()
    assert layers.current() == layers.render()
    (main,) = [c for c in layers.contracts() if c["name"] == "ttjax layers"]
    assert len(main["layers"]) <= 7
    page = layers.current()
    for row in main["layers"]:
        for name in re.split(r"[|:]", row):
            assert f"`{name.strip(' ()')}`" in page


def test_the_page_check_can_fail(tmp_path: Path) -> None:
    """A layer added to the contracts but not to the page is caught."""
    layers = _layers_doc()
    text = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "docs").mkdir()
    (tmp_path / "ttjax").symlink_to(ROOT / "ttjax")
    (tmp_path / "docs" / "architecture.md").write_text(
        (ROOT / "docs" / "architecture.md").read_text()
    )
    (tmp_path / "pyproject.toml").write_text(
        text.replace('  "_src.ttnn",\n', '  "_src.ttnn",\n  "_src.extra",\n', 1)
    )
    layers.ROOT, layers.PAGE = tmp_path, tmp_path / "docs" / "architecture.md"
    assert "_src.extra" in layers.render()
    assert layers.current() != layers.render()
