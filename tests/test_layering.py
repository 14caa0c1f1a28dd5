"""The core's import layers: the import-linter contract holds, and breaks on an upward import.

Also: no ``ttjax`` import hides inside a function (only optional dependencies load lazily).
"""

from __future__ import annotations

import ast
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
    assert "ttjax core layers KEPT" in result.stdout


def test_upward_import_breaks_the_contract(package_copy: Path) -> None:
    """tensor.py importing the ops (a layer above it) must fail ``make lint``."""
    tensor_py = package_copy / "ttjax" / "tensor.py"
    original = tensor_py.read_text()
    try:
        tensor_py.write_text(original + "\nfrom ttjax import ops  # noqa: E402\n")
        result = _lint_imports(package_copy)
    finally:
        tensor_py.write_text(original)
    assert result.returncode != 0
    assert "ttjax core layers BROKEN" in result.stdout
    assert "ttjax.tensor -> ttjax.ops" in result.stdout


def _imports_inside_functions(path: Path, root: Path = ROOT) -> list[str]:
    """``path:line module`` for every ttjax import nested inside a function body."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else ["." * node.level]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
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
