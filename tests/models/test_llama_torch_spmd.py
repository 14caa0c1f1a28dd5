"""models/llama/torch_spmd.py: transformers' Llama on torchax, sharded by mark_sharding, compiles to
the same collectives as ttjax's Flax Llama under the same specs, and both match transformers."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.torch
pytest.importorskip("torchax")
pytest.importorskip("transformers")


@pytest.fixture
def torch_spmd():
    import ttjax.compat
    from models.llama import torch_spmd

    yield torch_spmd
    ttjax.compat.uninstall_torch_xla()


def test_torch_and_flax_llama_compile_to_the_same_collectives(torch_spmd) -> None:
    layers = 2
    results = torch_spmd.side_by_side((1, 8), batch=4, seq=16, layers=layers)
    counts = {name: r["report"].collective_counts() for name, r in results.items()}
    flax, torch_same, torch_seed = counts.values()
    # 2 all-reduces per layer (after o_proj and down_proj) + 1 after the vocab-split embedding
    assert flax == torch_same
    assert {k: v for k, v in flax.items() if v} == {"all-reduce": 2 * layers + 1}
    # seed 004's specs leave the embedding replicated: exactly 2 per layer
    assert {k: v for k, v in torch_seed.items() if v} == {"all-reduce": 2 * layers}
    reports = [r["report"] for r in results.values()]
    assert reports[0].bytes_per_device == reports[1].bytes_per_device
    for name, r in results.items():
        assert r["max_error"] < 1e-5, name  # logits against transformers on the CPU
