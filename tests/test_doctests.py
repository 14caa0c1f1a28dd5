"""Every docstring example of the core runs and prints what it shows.

The examples share a small namespace: ``ttnn``/``ttjax``, ``np``, ``torch``, a 2x4 ``mesh`` and a
few tensors on it (``x`` is [1, 1, 32, 256] sharded on dim 3, so [1, 1, 32, 32] per device).
"""

from __future__ import annotations

import doctest
import functools
import importlib
import pkgutil
from typing import Any

import numpy as np
import pytest

import ttjax as ttnn

torch = pytest.importorskip("torch")

# Packages built on top of the core, checked by their own tests.
_FRONTENDS = (
    "ttjax.ttml",
    "ttjax.spmd",
    "ttjax.dist",
    "ttjax.distributed",
    "ttjax.run",
    "ttjax.torchxla",
    "ttjax.torch_xla_run",
)
MODULES = sorted(
    ["ttjax"]
    + [
        m.name
        for m in pkgutil.walk_packages(ttnn.__path__, "ttjax.")
        if not m.name.startswith(_FRONTENDS)
    ]
)


@functools.cache
def _namespace() -> dict[str, Any]:
    torch.manual_seed(0)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
    rep = ttnn.ReplicateTensorToMesh(mesh)
    x = ttnn.from_torch(
        torch.rand(1, 1, 32, 256), device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3)
    )
    mlp = torch.nn.Module()
    mlp.dense_h_to_4h = torch.nn.Linear(32, 128)
    mlp.dense_4h_to_h = torch.nn.Linear(128, 32)
    return {
        "ttnn": ttnn,
        "ttjax": ttnn,
        "np": np,
        "torch": torch,
        "mesh": mesh,
        "x": x,
        "y": x,
        "partial_sums": x,
        "w": ttnn.from_torch(torch.rand(32, 32), device=mesh, mesh_mapper=rep),
        "b": ttnn.from_torch(torch.rand(32), device=mesh, mesh_mapper=rep),
        "gamma": ttnn.from_torch(torch.rand(32), device=mesh, mesh_mapper=rep),
        "beta": ttnn.from_torch(torch.rand(32), device=mesh, mesh_mapper=rep),
        "q": ttnn.from_torch(torch.rand(1, 2, 32, 16), device=mesh, mesh_mapper=rep),
        "k": ttnn.from_torch(torch.rand(1, 2, 32, 16), device=mesh, mesh_mapper=rep),
        "v": ttnn.from_torch(torch.rand(1, 2, 32, 16), device=mesh, mesh_mapper=rep),
        "a_replicated": ttnn.from_torch(torch.rand(1, 1, 32, 64), device=mesh, mesh_mapper=rep),
        "b_sharded_on_dim3": ttnn.from_torch(
            torch.rand(1, 1, 64, 256), device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 3)
        ),
        "batch": torch.rand(8, 32),
        "torch_mlp": mlp,
        "model": mlp,
        "torch_linear": mlp.dense_h_to_4h,
    }


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    tests = [
        t for t in doctest.DocTestFinder().find(module, name, extraglobs=_namespace()) if t.examples
    ]
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    report: list[str] = []
    for t in tests:
        runner.run(t, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "".join(report)
    assert ttnn.numerics.mode() == "fast", f"{name}'s examples left the numerics policy changed"
