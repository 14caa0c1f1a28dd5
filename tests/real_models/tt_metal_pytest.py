"""``python -m tests.real_models.tt_metal_pytest <pytest args>``: pytest for tt-metal's own test
files, with an empty ``torchvision`` module when none is installed (and ``tracy.signpost``, a
profiler marker, when tt-metal's profiler package is absent).

tt-metal's ``models/conftest.py`` imports torchvision only for its image fixtures, which the
tt_transformers text tests never request; no CPU build of torchvision matching this torch is
installable here, so the harness (never ttjax) stands in an empty module for that import.
Run it under the binding: ``python -m ttjax.ttnn_run -m tests.real_models.tt_metal_pytest ...``.

Some demos' tests (gpt_oss's) assert a PCC without printing it: the harness logs every
``models.common.utility_functions.comp_pcc`` result with the callers' names
(``harness comp_pcc: PCC 0.99812 (bar 0.99) in run_full_mlp_pipeline``), so a run's PCCs can be
read from its log. The values are comp_pcc's own; nothing in the test changes.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types

import pytest


def empty_module(name: str) -> types.ModuleType | None:
    """A new empty module importable as ``name``, or None where ``name`` is installed (a stand-in
    for an import tt-metal's code makes and the run never uses)."""
    if importlib.util.find_spec(name) is not None:
        return None
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = module
    return module


def _stand_in_torchvision() -> None:
    tv = empty_module("torchvision")
    if tv is None:
        return
    transforms = types.ModuleType("torchvision.transforms")
    tv.transforms = transforms  # type: ignore[attr-defined]
    sys.modules["torchvision.transforms"] = transforms


def _stand_in_tracy() -> None:
    """tt-metal's ``tracy`` (tools/tracy, its profiler) is no pip package; the Galaxy tests import
    only ``signpost``, which marks a profile (none is taken here) and logs its header."""
    tracy = empty_module("tracy")
    if tracy is None:
        return

    def signpost(header: str, message: str | None = None) -> None:
        print(f"signpost: {header}" + (f" : {message}" if message else ""), flush=True)

    tracy.signpost = signpost  # type: ignore[attr-defined]


def _log_comp_pcc() -> None:
    try:
        import models.common.utility_functions as uf
    except ImportError:  # not run from a tt-metal checkout
        return
    original = uf.comp_pcc

    def comp_pcc(golden: object, calculated: object, pcc: float = 0.99) -> tuple[bool, object]:
        ok, value = original(golden, calculated, pcc)
        callers = [sys._getframe(k).f_code.co_name for k in (1, 2, 3, 4)]
        where = " < ".join(c for c in callers if c not in ("compare_tensors", "<module>"))
        print(f"harness comp_pcc: PCC {value} (bar {pcc}) in {where}", flush=True)
        return ok, value

    uf.comp_pcc = comp_pcc


if __name__ == "__main__":
    _stand_in_torchvision()
    _stand_in_tracy()
    _log_comp_pcc()
    sys.exit(pytest.main(sys.argv[1:]))
