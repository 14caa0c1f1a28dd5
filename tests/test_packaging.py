"""Type checkers use ttjax's hints (``py.typed`` is shipped) and the package passes mypy at the
level configured in pyproject.toml (what ``make lint`` runs)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_py_typed_is_package_data():
    assert (ROOT / "ttjax" / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["ttjax"]
    assert pyproject["tool"]["mypy"]["files"] == ["ttjax"]
    assert "-m mypy" in (ROOT / "Makefile").read_text()


@pytest.mark.slow
def test_package_type_checks():
    run = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:]
