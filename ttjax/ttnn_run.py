"""Run a TT-NN program unchanged on ttjax: ``python -m ttjax.ttnn_run script.py | -m module | pytest``.

``ttnn`` (and its submodules) is bound to ttjax first (:func:`ttjax.compat.install_as_ttnn`), and
``$TT_METAL_HOME``'s ``models/`` becomes importable, so a tt-metal checkout runs as is:

    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run my_tt_program.py --flag
    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run pytest models/tt_transformers/tests -k mlp

``pytest [args]`` is short for ``-m pytest [args]``. A ttjax error (an op TT-NN has and ttjax
does not, a bad mesh, ...) prints as one message ending with its ``fix:`` line, exit status 1;
``--debug`` before the script (or ``TTJAX_DEBUG=1``) shows the traceback too.

A folder named ``ttjax`` in the working directory (a clone of this repository, say) would be
imported instead of the package by the script's ``import ttjax`` (Python takes a folder without
``__init__.py`` as a namespace package when no other ``ttjax`` is on ``sys.path``, e.g. under an
editable install); the runner puts the real package back and says so.
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from ttjax._cli import debug_requested, report_errors
from ttjax.compat import install_as_ttnn
from ttjax.errors import ConfigError

USAGE = "usage: python -m ttjax.ttnn_run [--debug] (script.py | -m module | pytest) [args...]"
PROG = "python -m ttjax.ttnn_run"


def main(argv: Sequence[str] | None = None) -> int:
    """Bind ``ttnn`` to ttjax, then run the script or module with ``sys.argv`` set as Python does."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args[:1])
    if args[:1] == ["--debug"]:
        args = args[1:]
    if not args or args[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + (__doc__ or "").strip(), file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    return report_errors(lambda: _run(args), PROG, debug)


def _run(args: list[str]) -> int:
    unshadow()
    install_as_ttnn()
    if args[0] == "pytest":
        args = ["-m", *args]
    if args[0] == "-m":
        if len(args) < 2:
            print(USAGE, file=sys.stderr)
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
    sys.path.insert(0, _dirname(args[0]))
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


def unshadow() -> str | None:
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
        f"{PROG}: note: the folder {shadow} (no __init__.py) was imported as `ttjax`; using the "
        f"package at {real} instead (run from another folder to avoid this).",
        file=sys.stderr,
    )
    return shadow


def _dirname(path: str) -> str:
    import os

    return os.path.dirname(os.path.abspath(path))


def _code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
