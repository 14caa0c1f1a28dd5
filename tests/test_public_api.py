"""Every public import path that worked before the code moved under ``ttjax/_src`` still works.

``public_api.json`` was taken from the tree before the move: each public module of ttjax, every
name it exported (``__all__`` and the functions/classes it defined), which of them it was the
home of (``__module__``), and its ``__all__`` (what ``import *`` takes). The re-export modules must keep all of them, homes
included, so reprs, pickles and the API pages keep naming ``ttjax.mesh.MeshDevice``; new names
may join (the API grows), none may leave.
"""

from __future__ import annotations

import importlib
import json
import pickle
from pathlib import Path

import pytest

import ttjax

SNAPSHOT = json.loads((Path(__file__).with_name("public_api.json")).read_text())


@pytest.mark.parametrize("module", sorted(SNAPSHOT))
def test_every_public_name_still_imports_from_its_module(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [n for n in SNAPSHOT[module]["names"] if not hasattr(mod, n)]
    assert missing == [], f"{module} lost {missing}"
    moved = {
        n: getattr(mod, n).__module__
        for n in SNAPSHOT[module]["defined_here"]
        if getattr(mod, n).__module__ != module
    }
    assert moved == {}, f"{module}: objects no longer say they live here: {moved}"
    listed = getattr(mod, "__all__", None)
    before = SNAPSHOT[module]["all"]
    if before is None:
        assert listed is None, f"{module} gained an ``__all__``: ``import *`` would drop names"
    else:
        lost = sorted(set(before) - set(listed or ()))
        assert lost == [], f"``from {module} import *`` no longer takes {lost}"


def test_the_snapshot_covers_the_tree() -> None:
    assert len(SNAPSHOT) > 80
    assert sum(len(v["names"]) for v in SNAPSHOT.values()) > 1500
    assert {
        "ttjax.mesh",
        "ttjax.experimental",
        "ttjax.ops.transformer",
        "ttjax.ttml.trainer",
    } <= set(SNAPSHOT)


def test_classes_pickle_and_print_under_their_public_path() -> None:
    spec = ttjax.MeshShape(2, 4)
    assert repr(type(spec)) == "<class 'ttjax.mesh.MeshShape'>"
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert pickle.dumps(ttjax.TTJaxError).find(b"ttjax.errors") >= 0


def test_the_code_lives_under_src() -> None:
    """The public modules carry no code of their own: their objects live under ``ttjax._src``."""
    import ttjax.mesh

    assert ttjax.mesh.open_mesh_device.__code__.co_filename.endswith("_src/core/mesh.py")
