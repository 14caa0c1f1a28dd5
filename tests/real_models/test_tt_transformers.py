"""tt-metal's models/tt_transformers/tt modules, unchanged, on 1x8 and 2x4 meshes (PCC >= 0.99).

Each test mirrors the module's own test in tt-metal's models/tt_transformers/tests and compares
with transformers' LlamaForCausalLM on the same tiny checkpoint.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.real_models import harness

PCC = harness.PCC_REQUIRED


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_rmsnorm(real: Any, mode: str) -> None:
    assert harness.run_rmsnorm(real(), mode) >= PCC


def test_embedding(real: Any) -> None:
    assert harness.run_embedding(real()) >= PCC


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_mlp(real: Any, mode: str) -> None:
    assert harness.run_mlp(real(), mode) >= PCC


def test_lm_head(real: Any) -> None:
    assert harness.run_lm_head(real()) >= PCC


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_attention(real: Any, mode: str) -> None:
    assert harness.run_attention_like(real(), "attention", mode) >= PCC


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_decoder(real: Any, mode: str) -> None:
    assert harness.run_attention_like(real(), "decoder", mode) >= PCC


@pytest.mark.slow
def test_generator_matches_transformers(real: Any) -> None:
    """Transformer + Generator: prefill logits, decode logits and greedy tokens."""
    result = harness.generate(real(2))
    assert result.prefill_pcc >= PCC
    assert result.decode_pcc >= PCC
    assert result.tokens == result.reference_tokens
