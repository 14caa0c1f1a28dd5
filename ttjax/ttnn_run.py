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

import sys
from collections.abc import Sequence

from ttjax.compat import install_as_ttnn, run_bound, unshadow  # noqa: F401  (re-exported: the runner restores a shadowed package)

USAGE = "usage: python -m ttjax.ttnn_run [--debug] (script.py | -m module | pytest) [args...]"
PROG = "python -m ttjax.ttnn_run"


def main(argv: Sequence[str] | None = None) -> int:
    """Bind ``ttnn`` to ttjax, then run the script or module with ``sys.argv`` set as Python does."""
    return run_bound(install_as_ttnn, USAGE, __doc__ or "", argv, prog=PROG)


if __name__ == "__main__":
    sys.exit(main())
