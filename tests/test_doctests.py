"""Every docstring example of the core runs and prints what it shows.

The examples share a small namespace: ``ttnn``/``ttjax``, ``np``, ``torch``, a 2x4 ``mesh`` and a
few tensors on it (``x`` is [1, 1, 32, 256] sharded on dim 3, so [1, 1, 32, 32] per device).
"""

from __future__ import annotations

import doctest
import functools
import importlib
import inspect
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
    "ttjax._src.launch",  # the implementation of ttjax.distributed and ttjax.run
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


def _home_globals(obj: Any) -> dict[str, Any] | None:
    """The globals of the module that defines ``obj`` (under ``ttjax._src`` for what a public
    module re-exports): a function's own, a wrapper's or a class's first method's."""
    if inspect.isfunction(obj):
        return obj.__globals__
    if isinstance(obj, (staticmethod, classmethod)):
        return _home_globals(obj.__func__)
    if isinstance(obj, property):
        return _home_globals(obj.fget)
    if hasattr(obj, "__wrapped__"):
        return _home_globals(obj.__wrapped__)
    if inspect.isclass(obj):
        for value in vars(obj).values():
            found = _home_globals(value)
            if found is not None and found.get("__name__", "").startswith("ttjax."):
                return found
    return None


class _Finder(doctest.DocTestFinder):
    """doctest's finder for a tree whose public modules re-export ``ttjax._src``: it also takes
    the methods of a class such a module re-exports (the class's ``__module__`` is the public
    module, its methods' globals are not), and runs each example in the globals of the module
    that defines its object, as the examples were written."""

    def __init__(self, extraglobs: dict[str, Any]) -> None:
        super().__init__()
        self.extraglobs = extraglobs

    def _from_module(self, module: Any, object: Any) -> bool:
        if inspect.isfunction(object) and "." in object.__qualname__:
            owner = getattr(module, object.__qualname__.split(".")[0], None)
            if isinstance(owner, type) and owner.__module__ == module.__name__:
                return True
        return super()._from_module(module, object)  # type: ignore[misc]

    def _get_test(self, obj: Any, name: str, module: Any, globs: Any, source_lines: Any) -> Any:
        home = None if inspect.ismodule(obj) else _home_globals(obj)
        if home is not None and home is not module.__dict__:
            globs = {**home, **self.extraglobs}
        return super()._get_test(obj, name, module, globs, source_lines)  # type: ignore[misc]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    module = importlib.import_module(name)
    tests = [
        t for t in _Finder(_namespace()).find(module, name, extraglobs=_namespace()) if t.examples
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
