"""tt-metal's own tt_transformers test files, unchanged, through ``python -m ttjax.ttnn_run``.

Needs a full checkout (its top-level ``conftest.py`` and ``tests/scripts/common.py`` hold the
``mesh_device`` fixtures) and what that conftest imports (torchvision, multiprocess, psutil);
skips otherwise. Runs them as tt-metal's CI does on a T3000 (``MESH_DEVICE=T3K``: a 1x8 mesh) at
the sizes of the tiny checkpoint, selecting the parameter sets with short sequences.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.real_models import harness

FILES = [
    "test_rms_norm.py",
    "test_embedding.py",
    "test_mlp.py",
    "test_lm_head.py",
    "test_attention.py",
    "test_attention_prefill.py",
    "test_decoder.py",
    "test_decoder_prefill.py",
    "test_model.py",
    "test_model_prefill.py",
]
# short sequences only ("max128k" is a model-size id, not a sequence length); "quick" needs a
# model tt-metal knows by name (random weights from its local params), "full" runs the
# checkpoint's layers (2 here); "-performance-" is the precision id ("performance" alone would also
# match test_model.py's marker models_performance_bare_metal and drop the whole file)
SELECT = (
    "not 4096 and not -3k and not -4k and not -8k and not -16k and not -32k and not 32768 "
    "and not 65536 and not 131072 and not quick and not -performance-"
)


def test_tt_transformers_own_tests_pass(ttnn_bound: Any) -> None:
    home = Path(os.environ["TT_METAL_HOME"])
    if not (home / "conftest.py").exists() or not (home / "tests/scripts/common.py").exists():
        pytest.skip(f"{home} is not a full checkout (no conftest.py / tests/scripts/common.py)")
    why = harness.missing_llama_reference()
    if why:
        pytest.skip(why)
    # torchvision: tests.real_models.tt_metal_pytest stands in an empty module when missing
    lacking = [m for m in ("multiprocess", "psutil") if not importlib.util.find_spec(m)]
    if lacking:
        pytest.skip(f"tt-metal's conftest.py imports {', '.join(lacking)}")
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "MESH_DEVICE": "T3K",
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    tests = [f"models/tt_transformers/tests/{f}" for f in FILES]
    runner = "tests.real_models.tt_metal_pytest"
    cmd = [sys.executable, "-m", "ttjax.ttnn_run", "-m", runner, *tests, "-k", SELECT]
    out = subprocess.run(
        [*cmd, "-q", "-p", "no:cacheprovider", "-W", "ignore"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    passed = re.search(r"(\d+) passed", out.stdout)
    assert passed is not None and int(passed.group(1)) >= 16, out.stdout[-4000:]
