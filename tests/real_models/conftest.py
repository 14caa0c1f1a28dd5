"""Runs tt-metal's own model files from ``$TT_METAL_HOME`` with ``ttnn`` bound to ttjax.

Skips (with the reason) when ``TT_METAL_HOME`` is unset or the packages those files import are
missing. Writes one tiny random Llama checkpoint per session and points ``HF_MODEL`` at it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import mesh_of
from tests.real_models import harness


@pytest.fixture(scope="session", autouse=True)
def ttnn_bound(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    why = harness.missing_requirements()
    if why:
        pytest.skip(why)
    import ttjax.compat
    from tests.real_models.checkpoint import write_tiny_llama

    folder = tmp_path_factory.mktemp("hf")
    saved = {k: os.environ.get(k) for k in ("HF_MODEL", "TT_CACHE_PATH")}
    os.environ["HF_MODEL"] = str(write_tiny_llama(folder / "tiny-llama"))
    os.environ["TT_CACHE_PATH"] = str(folder / "cache")
    yield ttjax.compat.install_as_ttnn()
    ttjax.compat.uninstall_ttnn()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


_SETUPS: dict[tuple[str, int], harness.Setup] = {}


@pytest.fixture(params=sorted(harness.MESHES))
def real(request: pytest.FixtureRequest, ttnn_bound: Any) -> Any:
    """A factory: ``real(n_layers)`` is the (cached) ``harness.Setup`` on this mesh."""

    def make(n_layers: int = 1) -> harness.Setup:
        key = (request.param, n_layers)
        if key not in _SETUPS:
            _SETUPS[key] = harness.setup(mesh_of(harness.MESHES[request.param]), n_layers)
        return _SETUPS[key]

    return make


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # tt-metal's files (and transformers 4.x) warn in ways the project's `error` filter forbids
    for item in items:
        if "real_models" in str(item.fspath):
            item.add_marker(pytest.mark.filterwarnings("default"))
