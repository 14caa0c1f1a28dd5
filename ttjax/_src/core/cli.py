"""What every ttjax command line does with an error: one message ending in ``fix:``, status 1.

A ttjax error (or an ``OSError``: a path that cannot be read or written) is printed as
``prog: error (Kind): message`` plus its ``fix:`` line, no traceback; ``--debug`` among the
arguments or ``TTJAX_DEBUG`` set (not "0") prints the traceback first. Any other exception is a
bug and keeps Python's traceback.

>>> report_errors(lambda: 0, "ttjax", debug=False)
0
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Sequence

from ttjax._src.core.errors import TTJaxError

DEBUG_ENV = "TTJAX_DEBUG"  # set (not "0") = --debug, for runs started by ttjax-run


def debug_requested(args: Sequence[str]) -> bool:
    """``--debug`` in ``args`` or ``TTJAX_DEBUG`` set (not "0")."""
    return "--debug" in args or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def report_errors(fn: Callable[[], int], prog: str, debug: bool) -> int:
    """``fn()``'s exit status; a ttjax error or ``OSError`` becomes one clean message and 1."""
    try:
        return fn()
    except (TTJaxError, OSError) as e:
        if debug:
            traceback.print_exc()
        message = str(e).strip() or type(e).__name__
        if "fix:" not in message:
            message += "\nfix: check the path and its permissions."
        hint = "" if debug else f"\n(run with --debug or {DEBUG_ENV}=1 for the traceback)"
        print(f"{prog}: error ({type(e).__name__}): {message}{hint}", file=sys.stderr)
        return 1


__all__ = ["DEBUG_ENV", "debug_requested", "report_errors"]
