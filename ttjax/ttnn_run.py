"""Run a TT-NN program unchanged on ttjax: ``python -m ttjax.ttnn_run script.py | -m module [args]``.

``ttnn`` (and its submodules) is bound to ttjax first (:func:`ttjax.compat.install_as_ttnn`), and
``$TT_METAL_HOME``'s ``models/`` becomes importable, so a tt-metal checkout runs as is:

    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run my_tt_program.py --flag
    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run -m pytest tests/real_models -q
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Sequence

from ttjax.compat import install_as_ttnn

USAGE = "usage: python -m ttjax.ttnn_run (script.py | -m module) [args...]"


def main(argv: Sequence[str] | None = None) -> int:
    """Bind ``ttnn`` to ttjax, then run the script or module with ``sys.argv`` set as Python does."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + (__doc__ or "").strip(), file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    install_as_ttnn()
    if args[0] == "-m":
        if len(args) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = [args[1], *args[2:]]
        try:
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        except SystemExit as e:
            return _code(e)
        return 0
    sys.argv = list(args)
    sys.path.insert(0, _dirname(args[0]))
    try:
        runpy.run_path(args[0], run_name="__main__")
    except SystemExit as e:
        return _code(e)
    return 0


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
