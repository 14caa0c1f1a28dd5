"""Shared test set-up: 32 virtual devices, mesh fixtures over TT-NN's system shapes, hypothesis."""

from __future__ import annotations

import os

os.environ.setdefault("TTJAX_NUM_DEVICES", "32")
# Tests compile hundreds of small programs and run each a few times: XLA's cheapest CPU backend
# settings halve the suite's compile time. Benchmarks and user code keep XLA's defaults.
_FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE}".strip()

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

import ttjax  # noqa: E402

# JAX's own "deterministic" profile: reproducible, no deadline (compiles are slow on 2 cores).
settings.register_profile(
    "ttjax",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    max_examples=20,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# `make test` (-m "not slow") draws 8 examples a property, `make test-all` the whole 20 (the
# examples derandomized: the same ones every run).
settings.register_profile("ttjax-fast", settings.get_profile("ttjax"), max_examples=8)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ttjax"))


def pytest_configure(config: pytest.Config) -> None:
    if "HYPOTHESIS_PROFILE" not in os.environ and config.option.markexpr == "not slow":
        settings.load_profile("ttjax-fast")


# Mesh shapes the suite sweeps: N300, T3000, 1x8 line, Galaxy 8x4 and its transpose, 1x1.
MESH_SHAPES = [(1, 1), (1, 2), (2, 4), (1, 8), (8, 4), (4, 8)]


def _open(shape: tuple[int, ...]) -> ttjax.MeshDevice:
    if int(__import__("numpy").prod(shape)) > len(jax.devices()):
        pytest.skip(f"needs {shape} devices; have {len(jax.devices())}")
    return ttjax.open_mesh_device(ttjax.MeshShape(shape))


_CACHE: dict[tuple[int, ...], ttjax.MeshDevice] = {}


def mesh_of(shape: tuple[int, ...]) -> ttjax.MeshDevice:
    """A shared open mesh of ``shape`` (kept open for the session so programs stay cached)."""
    mesh = _CACHE.get(tuple(shape))
    if mesh is None or not mesh.is_open:
        mesh = _CACHE[tuple(shape)] = _open(tuple(shape))
    return mesh


@pytest.fixture(params=MESH_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def mesh(request: pytest.FixtureRequest) -> ttjax.MeshDevice:
    return mesh_of(request.param)


@pytest.fixture
def n300() -> ttjax.MeshDevice:
    return mesh_of((1, 2))


@pytest.fixture
def t3000() -> ttjax.MeshDevice:
    return mesh_of((2, 4))


@pytest.fixture
def galaxy() -> ttjax.MeshDevice:
    return mesh_of((8, 4))
