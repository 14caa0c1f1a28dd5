"""Run a TT-NN program unchanged on ttjax: ``python -m ttjax.ttnn_run script.py | -m module | pytest``.

``ttnn`` (and its submodules) is bound to ttjax first (:func:`ttjax.compat.install_as_ttnn`), and
``$TT_METAL_HOME``'s ``models/`` becomes importable, so a tt-metal checkout runs as is:

    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run my_tt_program.py --flag
    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run pytest models/tt_transformers/tests -k mlp

``pytest [args]`` is short for ``-m pytest [args]``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ttjax.compat import install_as_ttnn, run_bound

USAGE = "usage: python -m ttjax.ttnn_run (script.py | -m module | pytest) [args...]"


def main(argv: Sequence[str] | None = None) -> int:
    """Bind ``ttnn`` to ttjax, then run the script or module with ``sys.argv`` set as Python does."""
    return run_bound(install_as_ttnn, USAGE, __doc__ or "", argv)


if __name__ == "__main__":
    sys.exit(main())
