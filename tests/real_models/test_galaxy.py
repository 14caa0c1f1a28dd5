"""The Galaxy Llama-70B's own decode and 2048-token prefill (``tests/real_models/galaxy.py``) at
70B width, one decoder layer, against transformers: logits PCC >= 0.99 and greedy tokens equal.
Full width: 8 to 25 minutes and 16.8 GiB of host memory, hence ``slow`` (``make test-all``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.real_models import harness


@pytest.mark.slow
def test_galaxy_decode_and_ring_distributed_prefill_match_transformers(ttnn_bound: Any) -> None:
    why = harness.missing_llama_reference()
    if why:
        pytest.skip(why)
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [sys.executable, "-m", "tests.real_models.galaxy", "--layers", "1", "--prompt", "2048",
           "--tokens", "2"]  # fmt: skip
    out = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=3600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert "decode PCC" in out.stdout and "prefill PCC" in out.stdout, out.stdout[-2000:]
