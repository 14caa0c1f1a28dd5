"""``python -m tests.real_models.tt_metal_pytest <pytest args>``: pytest for tt-metal's own test
files, with an empty ``torchvision`` module when none is installed.

tt-metal's ``models/conftest.py`` imports torchvision only for its image fixtures, which the
tt_transformers text tests never request; no CPU build of torchvision matching this torch is
installable here, so the harness (never ttjax) stands in an empty module for that import.
Run it under the binding: ``python -m ttjax.ttnn_run -m tests.real_models.tt_metal_pytest ...``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types

import pytest


def _stand_in_torchvision() -> None:
    if importlib.util.find_spec("torchvision") is not None:
        return
    tv = types.ModuleType("torchvision")
    tv.__spec__ = importlib.machinery.ModuleSpec("torchvision", None)
    transforms = types.ModuleType("torchvision.transforms")
    tv.transforms = transforms  # type: ignore[attr-defined]
    sys.modules["torchvision"] = tv
    sys.modules["torchvision.transforms"] = transforms


if __name__ == "__main__":
    _stand_in_torchvision()
    sys.exit(pytest.main(sys.argv[1:]))
