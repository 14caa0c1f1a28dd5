"""tt-metal's Mixtral 8x7B T3000 modules, unchanged, on 1x8 and 2x4 meshes (PCC >= 0.99)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import mesh_of

from tests.real_models import harness, mixtral

_SETUPS: dict[str, mixtral.MixtralSetup] = {}
T3000_MESHES = ("1x8", "2x4")  # the demo is tt-metal's T3000 Mixtral: 8 devices, one per expert


@pytest.fixture(params=T3000_MESHES)
def tiny_mixtral(request: pytest.FixtureRequest, ttnn_bound: Any) -> mixtral.MixtralSetup:
    if request.param not in _SETUPS:
        _SETUPS[request.param] = mixtral.setup(mesh_of(harness.MESHES[request.param]))
    return _SETUPS[request.param]


def test_expert_weights_are_stored_as_tt_nn_block_floats(
    tiny_mixtral: mixtral.MixtralSetup,
) -> None:
    """Each device holds its expert's w1/w3 as bfloat4_b and w2 as bfloat8_b, exactly."""
    import numpy as np
    import ttnn

    s = tiny_mixtral
    experts = mixtral._experts(s)
    for name in ("w1", "w2", "w3"):
        got = ttnn.to_torch(
            getattr(experts, name), mesh_composer=ttnn.ConcatMeshToTensor(s.mesh, dim=0)
        )
        for e in range(8):
            w = s.state_dict[f"layers.0.feed_forward.experts.{e}.{name}.weight"].T.double().numpy()
            bits = mixtral.MAG_BITS[mixtral.EXPERT_DTYPES[name]]
            np.testing.assert_array_equal(
                got[e, 0].double().numpy(), mixtral.blockfloat_round(w, bits)
            )


def test_expert_mlp(tiny_mixtral: mixtral.MixtralSetup) -> None:
    """Against the torch reference holding the stored weights, and against float weights."""
    assert mixtral.run_mlp(tiny_mixtral) >= 0.999
    assert mixtral.run_mlp(tiny_mixtral, rounded=False) >= harness.PCC_REQUIRED


def test_moe_layer(tiny_mixtral: mixtral.MixtralSetup) -> None:
    assert mixtral.run_moe(tiny_mixtral) >= 0.999
    assert mixtral.run_moe(tiny_mixtral, rounded=False) >= harness.PCC_REQUIRED


def test_model_decode(tiny_mixtral: mixtral.MixtralSetup) -> None:
    """TtTransformer (1 layer), 32 users, 3 teacher-forced decode steps: logits vs reference."""
    assert mixtral.run_model(tiny_mixtral) >= harness.PCC_REQUIRED
