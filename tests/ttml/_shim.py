"""``python tests/ttml/_shim.py MODULE ARGS...``: run ``python -m MODULE ARGS`` with a fault
injected, as the fault tests' subprocesses need (the exit code and stderr are the user's):

- ``SHIM_NO_MATPLOTLIB=1``: matplotlib cannot be imported (as without the ``viz`` extra);
- ``SHIM_ENOSPC_AFTER=N``: orbax's JSON item writes after the first N raise
  ``OSError(ENOSPC)`` in its background save thread, as a full disk does (each checkpoint writes
  two: its meta and its fingerprint).
"""

from __future__ import annotations

import errno
import os
import runpy
import sys

if os.environ.get("SHIM_NO_MATPLOTLIB"):
    sys.modules["matplotlib"] = None  # type: ignore[assignment]  # import raises ImportError

if os.environ.get("SHIM_ENOSPC_AFTER"):
    from orbax.checkpoint._src.handlers import json_checkpoint_handler as _json

    _ok, _calls, _save = (
        int(os.environ["SHIM_ENOSPC_AFTER"]),
        [0],
        _json.JsonCheckpointHandler._save_fn,
    )

    async def _full(self, x, directory):
        _calls[0] += 1
        if _calls[0] > _ok:
            path = str(directory / self._filename)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return await _save(self, x, directory)

    _json.JsonCheckpointHandler._save_fn = _full

if __name__ == "__main__":
    sys.argv = sys.argv[1:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
