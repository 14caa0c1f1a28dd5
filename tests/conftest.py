"""Shared test set-up: 32 virtual devices, mesh fixtures over TT-NN's system shapes, hypothesis."""

from __future__ import annotations

import os
import shutil
import tempfile

os.environ.setdefault("TTJAX_NUM_DEVICES", "32")
# Tests compile hundreds of small programs and run each a few times: XLA's cheapest CPU backend
# settings halve the suite's compile time, and its older loop emitters (instead of the MLIR fusion
# emitters) halve it again. They reach every compile as XLA_FLAGS (the children's too); a test
# that compiles with its own options passes these (``compile(FAST_COMPILE)``). Benchmarks and user
# code keep XLA's defaults.
FAST_COMPILE = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    _flags = " ".join(f"--{k}={str(v).lower()}" for k, v in FAST_COMPILE.items())
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flags}".strip()
# Many tests (and the CLIs and README commands they start as child processes) compile the same
# programs again: one JAX compilation cache for the session, shared by the xdist workers and every
# child through the environment, compiles each once. It starts empty and goes with the session.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="ttjax-test-jax-cache-")
    os.environ["TTJAX_TEST_CACHE_OWNER"] = str(os.getpid())
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

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
# `make test` (-m "not slow") draws 2 examples a property besides each test's explicit
# `@example`s, `make test-all` the whole 20 (derandomized: the same examples every run).
settings.register_profile("ttjax-fast", settings.get_profile("ttjax"), max_examples=2)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ttjax"))


def pytest_configure(config: pytest.Config) -> None:
    if config.option.markexpr == "not slow":
        # `make test`: the property tests draw their meshes from N300 and T3000 (1x1 is each op
        # test's explicit example; the 32-device shapes compile the longest); `make test-all`
        # draws from all six.
        SWEEP_SHAPES[:] = [(1, 2), (2, 4)]
        if "HYPOTHESIS_PROFILE" not in os.environ:
            settings.load_profile("ttjax-fast")


# The longest files start first, longest to shortest (CPU seconds in `make test`, measured), so
# that two xdist workers (`--dist loadfile`) end together on short files instead of one finishing
# a long file alone; the multi-process launch goes first, its ranks running beside the other file.
LONGEST_FIRST = (
    "tests/distributed/test_train_cli_multiprocess.py",
    "tests/test_readme_commands.py",
    "tests/ttml/test_checkpoint_faults.py",
    "tests/test_ops_pointwise.py",
    "tests/distributed/test_faults.py",
    "tests/test_ops_data_movement.py",
    "tests/models/test_llama.py",
    "tests/test_ops_reduction.py",
    "tests/ttml/test_checkpoint.py",
    "tests/test_ops_transformer.py",
    "tests/test_kernels.py",
    "tests/test_ccl.py",
    "tests/ttml/test_cli.py",
    "tests/distributed/test_bigmesh.py",
    "tests/test_dispatch.py",
    "tests/ttml/test_autodiff.py",
    "tests/models/test_nanogpt.py",
    "tests/ttml/test_memory.py",
    "tests/test_distribute.py",
    "tests/models/test_llama_reference.py",
    "tests/ttml/test_pipeline.py",
    "tests/ttml/test_ring_attention.py",
    "tests/test_doctests.py",
    "tests/distributed/test_resume.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)


def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get("TTJAX_TEST_CACHE_OWNER") == str(os.getpid()):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


# Mesh shapes the suite sweeps: N300, T3000, 1x8 line, Galaxy 8x4 and its transpose, 1x1.
MESH_SHAPES = [(1, 1), (1, 2), (2, 4), (1, 8), (8, 4), (4, 8)]
# The shapes hypothesis draws from (narrowed for `make test` in `pytest_configure`).
SWEEP_SHAPES = list(MESH_SHAPES)
# The same sweep as parameters: `make test` runs 1x1, N300 and T3000 (both axes of a 2-D mesh);
# the 1x8 line and the Galaxy's 8x4 and 4x8 run in `make test-all` (tests that need the Galaxy
# take the `galaxy` fixture and run in both).
MESH_SWEEP = [
    pytest.param(s, marks=pytest.mark.slow, id=f"{s[0]}x{s[1]}")
    if s in ((1, 8), (8, 4), (4, 8))
    else pytest.param(s, id=f"{s[0]}x{s[1]}")
    for s in MESH_SHAPES
]


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


@pytest.fixture(params=MESH_SWEEP)
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
