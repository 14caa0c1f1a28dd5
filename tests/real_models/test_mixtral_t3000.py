"""tt-metal's Mixtral 8x7B T3000 modules, unchanged, on 1x8 and 2x4 meshes (PCC >= 0.99)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import mesh_of
from tests.real_models import harness, mixtral

_SETUPS: dict[str, mixtral.MixtralSetup] = {}


@pytest.fixture(params=sorted(harness.MESHES))
def tiny_mixtral(request: pytest.FixtureRequest, ttnn_bound: Any) -> mixtral.MixtralSetup:
    if request.param not in _SETUPS:
        _SETUPS[request.param] = mixtral.setup(mesh_of(harness.MESHES[request.param]))
    return _SETUPS[request.param]


def test_expert_mlp(tiny_mixtral: mixtral.MixtralSetup) -> None:
    assert mixtral.run_mlp(tiny_mixtral) >= harness.PCC_REQUIRED


def test_moe_layer(tiny_mixtral: mixtral.MixtralSetup) -> None:
    assert mixtral.run_moe(tiny_mixtral) >= harness.PCC_REQUIRED
