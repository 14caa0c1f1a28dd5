"""Run TT-NN code unchanged: bind the module name ``ttnn`` (and its submodules) to ttjax.

(:func:`install_as_torch_xla` does the same for torch-xla's ``torch_xla`` names, bound to
:mod:`ttjax.torchxla` and :mod:`ttjax.spmd`, so a PyTorch model runs on the mesh through torchax.)

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
import importlib.util
import os
import runpy
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttjax._src.core.cli import debug_requested, report_errors
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
    "ttnn.dot_access": Alias(("ttjax.dot_access",)),
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
    "ttnn.operations.normalization": Alias(("ttjax.ops.normalization", "ttjax")),
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


# torch-xla's modules as SPMD code imports them (``import torch_xla.core.xla_model as xm``, ...).
TORCH_XLA_MODULES: dict[str, Alias] = {
    "torch_xla": Alias(("ttjax.torchxla",)),
    "torch_xla.core": Alias(("ttjax.torchxla",)),
    "torch_xla.core.xla_model": Alias(("ttjax.torchxla",)),
    "torch_xla.runtime": Alias(("ttjax.torchxla",)),
    "torch_xla.distributed": Alias(("ttjax.torchxla",)),
    "torch_xla.distributed.spmd": Alias(("ttjax.spmd",)),
    "torch_xla.experimental": Alias(("ttjax.torchxla",)),
    "torch_xla.experimental.plugins": Alias(("ttjax.torchxla",)),
}


# TT-NN names ttjax does not provide on purpose, and why (the binding's AttributeError says so, and
# docs/ttnn_api.md lists them). Everything else missing is "not yet".
_CNN = (
    "the rest of TT-NN's image family (ttjax provides conv1d, conv2d, conv_transpose2d, conv3d, "
    "group_norm, their configs, the 2-D pools and upsample): ttjax covers the multi-device LLM "
    "and training programming model, and none of tt-metal's multi-device LLM demos calls these"
)
_PROFILER = "device profiling and memory reports read a Tenstorrent chip; ttjax has none to read"
_NOT_TTNN = (
    "not a name TT-NN defines at 821525122af5 (ttnn/ttnn/__init__.py and the _ttnn bindings): "
    "its uses in tt-metal's models/ are comments, docstrings, postponed annotations or code that "
    "stops on TT-NN as well"
)
NOT_PROVIDED: dict[str, str] = {
    **{
        f"ttnn.{name}": _CNN
        for name in (
            "convert_conv_weight_tensor_to_tiled_layout",
            "fold",
            "grid_sample",
            "prepare_grid_sample_grid",
            "batch_norm",
        )
    },
    **{
        f"ttnn.{name}": _PROFILER
        for name in (
            "read_device_profiler",
            "dump_device_memory_state",
            "device.EnableMemoryReports",
            "device.DisableMemoryReports",
        )
    },
    **{
        f"ttnn.{name}": _CNN + " (these trace a torch CNN to read its conv/pool arguments)"
        for name in (
            "model_preprocessing.infer_ttnn_module_args",
            "model_preprocessing.Conv2dArgs",
            "torch_tracer",
        )
    },
    **{
        f"ttnn.{name}": _NOT_TTNN
        for name in (
            "ttnn",
            "dtype",
            "ProgramConfig",
            "layernorm",
            "to",
            "Tensors",
            "SiLU",
            "mesh_device",
            "experimental.device",
            "experimental.tensor",
        )
    },
}


class TTNNModule(types.ModuleType):
    """A ``ttnn.X`` module whose attributes are read from ttjax (see :data:`TTNN_MODULES`)."""

    TABLE: dict[str, Alias] = TTNN_MODULES
    WHAT = "TT-NN"
    HELP = "use a TT-NN call ttjax has (see docs/ttnn_api.md), or report the missing name"

    def __init__(self, name: str, alias: Alias) -> None:
        super().__init__(name, f"{self.WHAT}'s {name}, bound to {', '.join(alias.sources)}")
        self.__ttjax_alias__ = alias
        self.__path__: list[str] = []  # a package: ``import ttnn.X.Y`` goes through the finder

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        child = f"{self.__name__}.{name}"
        if child in self.TABLE:
            return importlib.import_module(child)
        alias: Alias = self.__dict__["__ttjax_alias__"]
        target = dict(alias.renames).get(name, name)
        for source in alias.sources:
            module = _source(source)
            if module is not None and hasattr(module, target):
                value = getattr(module, target)
                setattr(self, name, value)
                return value
        why = NOT_PROVIDED.get(f"{self.__name__}.{name}")
        if why is not None:
            raise AttributeError(
                f"module {self.__name__!r} has no attribute {name!r}: ttjax does not provide "
                f"{self.__name__}.{name}: {why}\n"
                "fix: run this code on TT-NN itself (docs/ttnn_api.md lists what ttjax provides)"
            )
        raise AttributeError(
            f"module {self.__name__!r} has no attribute {name!r}: ttjax does not provide "
            f"{self.__name__}.{name} yet (looked in {', '.join(alias.sources)})\n"
            f"fix: {self.HELP}"
        )

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        for source in self.__dict__["__ttjax_alias__"].sources:
            module = _source(source)
            if module is not None:
                names.update(n for n in dir(module) if not n.startswith("_"))
        prefix = self.__name__ + "."
        names.update(k[len(prefix) :] for k in self.TABLE if k.startswith(prefix))
        return sorted(names)


class TorchXLAModule(TTNNModule):
    """A ``torch_xla.X`` module whose attributes are read from ttjax (:data:`TORCH_XLA_MODULES`)."""

    TABLE = TORCH_XLA_MODULES
    WHAT = "torch-xla"
    HELP = "use a torch-xla call ttjax has (see docs/api/torch_xla.md), or report the missing name"


def _source(name: str) -> types.ModuleType | None:
    """The ttjax module ``name``, or None while ttjax has no such module."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and name.startswith(e.name):
            return None
        raise


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Creates the alias modules of one table (``ttnn.*`` or ``torch_xla.*``) on import."""

    def __init__(self, module_type: type[TTNNModule] = TTNNModule) -> None:
        self.module_type = module_type

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.module_type.TABLE:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module_type(spec.name, self.module_type.TABLE[spec.name])

    def exec_module(self, module: types.ModuleType) -> None:
        parent, _, child = module.__name__.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


_FINDER = _Finder()
_TORCH_XLA_FINDER = _Finder(TorchXLAModule)


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
    for name in [n for n, m in sys.modules.items() if type(m) is TTNNModule]:
        del sys.modules[name]


def install_as_torch_xla() -> types.ModuleType:
    """Make ``import torch_xla`` (``torch_xla.core.xla_model``, ``torch_xla.runtime``,
    ``torch_xla.distributed.spmd``, ``torch_xla.experimental.plugins``) ttjax, and turn on the
    ``jax`` device for torch (torchax), so torch-xla SPMD code runs on ttjax's mesh as written.

    >>> torch_xla = ttjax.compat.install_as_torch_xla()     # doctest: +SKIP
    >>> import torch_xla.distributed.spmd as xs              # doctest: +SKIP

    Returns the ``torch_xla`` module. Calling it again is harmless; raises ``ConfigError`` when
    the real torch-xla is already imported. :func:`uninstall_torch_xla` undoes it.
    """
    current = sys.modules.get("torch_xla")
    if current is not None and not isinstance(current, TorchXLAModule):
        raise ConfigError(
            f"module 'torch_xla' is already imported from "
            f"{getattr(current, '__file__', current)!r}; ttjax cannot take its name any more\n"
            "fix: call ttjax.compat.install_as_torch_xla() before anything imports torch_xla"
        )
    importlib.import_module("ttjax.torchxla").enable()
    if _TORCH_XLA_FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _TORCH_XLA_FINDER)
    return importlib.import_module("torch_xla")


def uninstall_torch_xla() -> None:
    """Undo :func:`install_as_torch_xla`: unbind ``torch_xla.*`` and turn torchax's modes off."""
    if _TORCH_XLA_FINDER in sys.meta_path:
        sys.meta_path.remove(_TORCH_XLA_FINDER)
    for name in [n for n, m in sys.modules.items() if isinstance(m, TorchXLAModule)]:
        del sys.modules[name]
    if "ttjax.torchxla" in sys.modules:
        sys.modules["ttjax.torchxla"].disable()


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


def run_bound(
    install: Callable[[], Any],
    usage: str,
    doc: str,
    argv: Sequence[str] | None = None,
    *,
    prog: str = "python -m ttjax.ttnn_run",
) -> int:
    """``python -m RUNNER [--debug] (script.py | -m module | pytest) [args]``: ``install()`` binds
    the module names, then the script or module runs with ``sys.argv`` set as Python sets it. A
    ttjax error prints as one message ending in its ``fix:`` line (status 1); ``--debug`` (or
    ``TTJAX_DEBUG=1``) shows the traceback too."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args[:1])
    if args[:1] == ["--debug"]:
        args = args[1:]
    if not args or args[0] in ("-h", "--help"):
        print(usage + "\n\n" + doc.strip(), file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    return report_errors(lambda: _run_bound(install, usage, args, prog), prog, debug)


def _run_bound(install: Callable[[], Any], usage: str, args: list[str], prog: str) -> int:
    unshadow(prog)
    install()
    if args[0] == "pytest":
        args = ["-m", *args]
    if args[0] == "-m":
        if len(args) < 2:
            print(usage, file=sys.stderr)
            return 2
        _check_module(args[1])
        sys.argv = [args[1], *args[2:]]
        try:
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        except SystemExit as e:
            return _code(e)
        return 0
    if not os.path.isfile(args[0]):
        raise ConfigError(
            f"script {args[0]!r} does not exist (working directory {os.getcwd()}).\nfix: pass the "
            "path of a Python file, -m package.module, or pytest [args]."
        )
    sys.argv = list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
    try:
        runpy.run_path(args[0], run_name="__main__")
    except SystemExit as e:
        return _code(e)
    return 0


def _check_module(name: str) -> None:
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(
            f"no module named {name!r} (sys.path starts with {sys.path[:2]}).\nfix: install it, "
            "or set TT_METAL_HOME / PYTHONPATH so that it is importable."
        )


def unshadow(prog: str = "python -m ttjax.ttnn_run") -> str | None:
    """Put the real ``ttjax`` package in ``sys.modules`` when a folder without ``__init__.py``
    named ``ttjax`` (e.g. a clone in the working directory) was imported as a namespace package
    in its place; returns that folder (None when nothing was shadowed)."""
    mod = sys.modules.get("ttjax")
    real = Path(__file__).resolve().parent
    if mod is None or getattr(mod, "__file__", None):
        return None
    spec = importlib.util.spec_from_file_location(
        "ttjax", real / "__init__.py", submodule_search_locations=[str(real)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    shadow = ", ".join(getattr(mod, "__path__", [])) or "a folder"
    sys.modules["ttjax"] = package
    spec.loader.exec_module(package)
    print(
        f"{prog}: note: the folder {shadow} (no __init__.py) was imported as `ttjax`; using the "
        f"package at {real} instead (run from another folder to avoid this).",
        file=sys.stderr,
    )
    return shadow


def _code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def provided_names() -> dict[str, list[str]]:
    """``{ttjax module: [its names]}`` for every module a ``ttnn.*`` alias reads from: its
    ``__all__`` (and the alias renames), what ``ttnn.X.name`` resolves to under
    :func:`install_as_ttnn`."""
    out: dict[str, set[str]] = {}
    for alias in TTNN_MODULES.values():
        for source in alias.sources:
            found = _source(source)
            if found is not None:
                out.setdefault(source, set()).update(getattr(found, "__all__", ()))
        for new, old in alias.renames:
            out.setdefault(alias.sources[0], set()).add(f"{old} (as {new})")
    return {k: sorted(n for n in v if not n.startswith("_")) for k, v in sorted(out.items())}


NAMES_PAGE = "docs/ttnn_api.md"


def names_page() -> str:
    """The Markdown of :data:`NAMES_PAGE`: the TT-NN module tree, every name each ttjax module
    behind it provides, then :data:`NOT_PROVIDED` with the reasons (tests/test_compat.py keeps it
    current)."""
    lines = [
        "# TT-NN names ttjax provides",
        "",
        "Generated from the code (`ttjax.compat.names_page()`; `tests/test_compat.py` fails when "
        "this page is stale). With `ttjax.compat.install_as_ttnn()`, `ttnn.X.name` resolves in "
        "the ttjax modules listed for `ttnn.X` (first hit wins), whose names follow. A name in no "
        "list raises `AttributeError` saying ttjax lacks it *yet*; the names at the end are "
        "refused on purpose, with the reason.",
        "",
        "| TT-NN module | read from |",
        "| --- | --- |",
    ]
    for module, alias in sorted(TTNN_MODULES.items()):
        lines.append(f"| `{module}` | {', '.join(f'`{s}`' for s in alias.sources)} |")
    lines.append("")
    for source, names in provided_names().items():
        lines += [f"## `{source}`", "", f"{len(names)} names.", ""]
        lines += [", ".join(f"`{n}`" for n in names), ""]
    lines += ["## Refused on purpose", "", "| name | why |", "| --- | --- |"]
    lines += [f"| `{name}` | {why} |" for name, why in sorted(NOT_PROVIDED.items())]
    return "\n".join(lines) + "\n"


def write_names_page(root: str | os.PathLike[str] = ".") -> Path:
    """Write :func:`names_page` to ``root``/:data:`NAMES_PAGE`."""
    path = Path(root) / NAMES_PAGE
    path.write_text(names_page())
    return path


__all__ = [
    "NAMES_PAGE",
    "NOT_PROVIDED",
    "TORCH_XLA_MODULES",
    "TTNN_MODULES",
    "Alias",
    "TTNNModule",
    "TorchXLAModule",
    "install_as_torch_xla",
    "install_as_ttnn",
    "mount_tt_metal",
    "names_page",
    "provided_names",
    "run_bound",
    "uninstall_torch_xla",
    "uninstall_ttnn",
    "unshadow",
    "write_names_page",
]
