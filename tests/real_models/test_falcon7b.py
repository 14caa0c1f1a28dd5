"""tt-metal's Falcon-7B data-parallel modules, unchanged, on the meshes of its T3000 (1x8) and
Galaxy (8x4) demos, against transformers' Falcon (PCC >= 0.99).

Each case runs ``python -m tests.real_models.falcon7b`` in a subprocess: tt-metal's
``model_config.py`` reads Falcon-7B's config from the hub cache at import, which needs ``HF_HOME``
set before transformers is imported (this session imported it already).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.real_models import harness

ROOT = Path(__file__).resolve().parents[2]


def _pcc(ttnn_bound: Any, *args: str) -> float:
    cmd = [sys.executable, "-m", "tests.real_models.falcon7b", *args]
    out = subprocess.run(
        cmd, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=1200
    )
    found = re.search(r"^PCC ([0-9.]+)$", out.stdout, re.M)
    assert out.returncode == 0 and found, (out.stdout + out.stderr)[-3000:]
    return float(found.group(1))


@pytest.mark.parametrize(
    ("mode", "mesh"),
    [("decode", "1x8"), pytest.param("prefill", "8x4", marks=pytest.mark.slow)],
)
def test_mlp(ttnn_bound: Any, mode: str, mesh: str) -> None:
    """TtFalconMLPDecode / TtFalconMLPPrefill at hidden 256, users split over the mesh."""
    assert _pcc(ttnn_bound, "mlp", mode, mesh) >= harness.PCC_REQUIRED


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "config"),  # the demo: DRAM for prefill, L1_SHARDED for decode
    [("prefill", "BFLOAT16-DRAM"), ("decode", "BFLOAT16-DRAM"), ("decode", "BFLOAT16-L1_SHARDED")],
)
def test_causallm(ttnn_bound: Any, mode: str, config: str) -> None:
    """TtFalconCausalLM, one layer at Falcon-7B's width (embedding, sliced prefill attention or
    decode attention on a KV cache, MLP, layernorms, LM head): logits against transformers, on
    1x8 (the T3000 demo). Each device holds every weight: at this width 8x4 would need 32 copies
    (~32 GB of host memory), more than this machine has."""
    assert _pcc(ttnn_bound, "causallm", mode, "1x8", config) >= harness.PCC_REQUIRED
