"""Run TT-NN code unchanged: bind the module name ``ttnn`` (and its submodules) to ttjax.

>>> import ttjax.compat
>>> ttjax.compat.install_as_ttnn()            # doctest: +SKIP
>>> import ttnn                               # doctest: +SKIP
>>> ttnn.open_mesh_device(ttnn.MeshShape(1, 8))  # doctest: +SKIP

Every ``ttnn.X`` module that Tenstorrent's model code imports (``ttnn.experimental``,
``ttnn._ttnn.multi_device``, ``ttnn.device``, ...) is an alias module whose names resolve, when
read, in the ttjax module listed for it in :data:`TTNN_MODULES`; the names themselves are ttjax's.
With a tt-metal checkout (``TT_METAL_HOME``), its ``models/`` package becomes importable too.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttjax.errors import ConfigError


@dataclass(frozen=True)
class Alias:
    """One TT-NN module: the ttjax modules its names come from (first hit wins), and renames."""

    sources: tuple[str, ...] = ("ttjax",)
    renames: tuple[tuple[str, str], ...] = field(default_factory=tuple)


# TT-NN's module tree as model code reaches it (``import ttnn.X``, ``from ttnn.X import``, and
# ``ttnn.X.name``), each mapped to where ttjax keeps those names. ``ttnn.distributed`` is TT-NN's
# mapper module, not ``ttjax.distributed`` (ttjax's multi-host runtime).
TTNN_MODULES: dict[str, Alias] = {
    "ttnn": Alias(("ttjax",)),
    "ttnn.experimental": Alias(("ttjax.experimental",)),
    "ttnn.transformer": Alias(("ttjax.transformer",)),
    "ttnn.kv_cache": Alias(("ttjax.kv_cache",)),
    "ttnn.cluster": Alias(("ttjax.cluster",)),
    "ttnn.model_preprocessing": Alias(("ttjax.model_preprocessing",)),
    "ttnn.distributed": Alias(("ttjax.distribute", "ttjax")),
    "ttnn.distributed.distributed": Alias(("ttjax.distribute", "ttjax")),
    "ttnn.device": Alias(("ttjax.device", "ttjax.hardware", "ttjax")),
    "ttnn.types": Alias(("ttjax.enums", "ttjax.hardware", "ttjax")),
    "ttnn.core": Alias(("ttjax.hardware", "ttjax")),
    "ttnn.fabric": Alias(("ttjax.fabric",)),
    "ttnn.operations": Alias(("ttjax",)),
    "ttnn.operations.ccl": Alias(("ttjax",)),
    "ttnn.operations.transformer": Alias(("ttjax.transformer", "ttjax")),
    "ttnn._ttnn": Alias(("ttjax",)),
    "ttnn._ttnn.multi_device": Alias(("ttjax.mesh", "ttjax")),
    "ttnn._ttnn.tensor": Alias(("ttjax",)),
    "ttnn._ttnn.device": Alias(("ttjax.device", "ttjax")),
    "ttnn._ttnn.cluster": Alias(("ttjax.cluster",)),
    "ttnn._ttnn.global_semaphore": Alias(
        ("ttjax",), renames=(("global_semaphore", "GlobalSemaphore"),)
    ),
    "ttnn._ttnn.operations": Alias(("ttjax",)),
    "ttnn._ttnn.operations.ccl": Alias(("ttjax",)),
    "ttnn._ttnn.operations.experimental": Alias(("ttjax.experimental", "ttjax")),
    "ttnn._ttnn.operations.experimental.ccl_experimental": Alias(("ttjax.experimental", "ttjax")),
}


class TTNNModule(types.ModuleType):
    """A ``ttnn.X`` module whose attributes are read from ttjax (see :data:`TTNN_MODULES`)."""

    def __init__(self, name: str, alias: Alias) -> None:
        super().__init__(name, f"TT-NN's {name}, bound to {', '.join(alias.sources)}")
        self.__ttjax_alias__ = alias
        self.__path__: list[str] = []  # a package: ``import ttnn.X.Y`` goes through the finder

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        child = f"{self.__name__}.{name}"
        if child in TTNN_MODULES:
            return importlib.import_module(child)
        alias: Alias = self.__dict__["__ttjax_alias__"]
        target = dict(alias.renames).get(name, name)
        for source in alias.sources:
            module = _source(source)
            if module is not None and hasattr(module, target):
                value = getattr(module, target)
                setattr(self, name, value)
                return value
        raise AttributeError(
            f"module {self.__name__!r} has no attribute {name!r}: ttjax does not provide "
            f"{self.__name__}.{name} yet (looked in {', '.join(alias.sources)})\n"
            "fix: use a TT-NN call ttjax has (see docs/ttnn_api.md), or report the missing name"
        )

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        for source in self.__dict__["__ttjax_alias__"].sources:
            module = _source(source)
            if module is not None:
                names.update(n for n in dir(module) if not n.startswith("_"))
        prefix = self.__name__ + "."
        names.update(k[len(prefix) :] for k in TTNN_MODULES if k.startswith(prefix))
        return sorted(names)


def _source(name: str) -> types.ModuleType | None:
    """The ttjax module ``name``, or None while ttjax has no such module."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and name.startswith(e.name):
            return None
        raise


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Creates the ``ttnn.*`` alias modules on import."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in TTNN_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return TTNNModule(spec.name, TTNN_MODULES[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        parent, _, child = module.__name__.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


_FINDER = _Finder()


def install_as_ttnn(tt_metal_home: str | os.PathLike[str] | None = None) -> types.ModuleType:
    """Make ``import ttnn`` (and ``ttnn.experimental``, ``ttnn._ttnn.multi_device``, ...) ttjax.

    With ``tt_metal_home`` (default: ``$TT_METAL_HOME`` when set), that checkout's ``models/``
    package imports as is. Returns the ``ttnn`` module. Calling it again is harmless; raises
    ``ConfigError`` when another ``ttnn`` (the real TT-NN) is already imported.
    """
    current = sys.modules.get("ttnn")
    if current is not None and not isinstance(current, TTNNModule):
        raise ConfigError(
            f"module 'ttnn' is already imported from {getattr(current, '__file__', current)!r}; "
            "ttjax cannot take its name any more\n"
            "fix: call ttjax.compat.install_as_ttnn() before anything imports ttnn"
        )
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    home = tt_metal_home if tt_metal_home is not None else os.environ.get("TT_METAL_HOME")
    if home:
        mount_tt_metal(home)
    return importlib.import_module("ttnn")


def uninstall_ttnn() -> None:
    """Undo :func:`install_as_ttnn`'s module binding (the ``ttnn.*`` entries of ``sys.modules``)."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n, m in sys.modules.items() if isinstance(m, TTNNModule)]:
        del sys.modules[name]


def mount_tt_metal(home: str | os.PathLike[str]) -> Path:
    """Make the checkout's ``models`` package importable beside ttjax's own ``models`` package.

    tt-metal's ``models/`` has no ``__init__.py``; where another ``models`` package (this project's)
    is found first, the checkout's directory joins its ``__path__``, so ``models.tt_transformers``
    and ``models.llama`` both import.
    """
    root = Path(home).expanduser().resolve()
    if not (root / "models").is_dir():
        raise ConfigError(
            f"TT_METAL_HOME={str(home)!r} has no models/ directory\n"
            "fix: point TT_METAL_HOME at a tt-metal checkout (the folder that holds models/)"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    models = importlib.import_module("models")
    paths = models.__path__
    if str(root / "models") not in list(paths):
        if isinstance(paths, list):
            paths.append(str(root / "models"))
        else:  # a namespace package's _NamespacePath: recompute from sys.path
            importlib.invalidate_caches()
    return root


__all__ = [
    "TTNN_MODULES",
    "Alias",
    "TTNNModule",
    "install_as_ttnn",
    "mount_tt_metal",
    "uninstall_ttnn",
]
