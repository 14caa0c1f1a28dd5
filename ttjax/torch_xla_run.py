"""Run a torch-xla SPMD program on ttjax: ``python -m ttjax.torch_xla_run script.py | -m module | pytest``.

``torch_xla`` (``torch_xla.core.xla_model``, ``torch_xla.runtime``, ``torch_xla.distributed.spmd``,
``torch_xla.experimental.plugins``) is bound to ttjax first
(:func:`ttjax.compat.install_as_torch_xla`) and torch's ``jax`` device is on (torchax), so the
script's PyTorch model runs on ttjax's mesh as written:

    python -m ttjax.torch_xla_run examples/seed004_torch_xla.py

``pytest [args]`` is short for ``-m pytest [args]``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ttjax.compat import install_as_torch_xla, run_bound

USAGE = "usage: python -m ttjax.torch_xla_run [--debug] (script.py | -m module | pytest) [args...]"


def main(argv: Sequence[str] | None = None) -> int:
    """Bind ``torch_xla`` to ttjax, then run the script or module with ``sys.argv`` as Python sets it."""
    return run_bound(
        install_as_torch_xla, USAGE, __doc__ or "", argv, prog="python -m ttjax.torch_xla_run"
    )


if __name__ == "__main__":
    sys.exit(main())
