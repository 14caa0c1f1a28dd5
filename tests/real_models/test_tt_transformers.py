"""tt-metal's models/tt_transformers/tt modules, unchanged, on 1x8, 2x4 and 8x4 (Galaxy) meshes
(PCC >= 0.99).

Each test mirrors the module's own test in tt-metal's models/tt_transformers/tests and compares
with transformers' LlamaForCausalLM on the same tiny checkpoint.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import mesh_of

from tests.real_models import harness
from ttjax.errors import CCLError, MemoryConfigError

PCC = harness.PCC_REQUIRED


@pytest.fixture(autouse=True)
def _llama_reference(ttnn_bound: Any) -> None:
    """tt_transformers' model_config.py imports tt-metal's Llama reference submodule: without it
    these tests skip, saying so (Mixtral and the other demos still run)."""
    why = harness.missing_llama_reference()
    if why:
        pytest.skip(why)


# tt-metal's tt_transformers code assumes a 1xN mesh unless it is a Galaxy (T3000 runs it as 1x8):
# on 2x4 its DRAM-sharded weight configs keep the whole K while the weights are split over the
# rows, which TT-NN refuses too (shard height must match). Strict, and only for that error: a pass
# or any other exception fails.
ONE_ROW_ONLY = "tt-metal's tt_transformers assumes a 1xN mesh outside Galaxy"


# On a Galaxy (8x4, tt-metal's TG paths) below Llama-70B's dim 8192 the MLP's decode all-reduce
# (mlp.py:186 -> ccl.py:124) converts its [1, 1, 32, hidden/8] input to FF1_OUT_GATHERED_MEMCFG,
# whose width shards are 128 rows high (the gathered height): TT-NN refuses that shard spec
# (tensor_spec.cpp: "Shard height 128 must match physical height 32 for width sharded"), and so
# does ttjax. Everything that decodes through the MLP stops there.
GALAXY_DECODE_MLP = "tt-metal's TG MLP decode needs dim 8192 (FF1_OUT_GATHERED_MEMCFG)"


def _one_row_only(
    request: pytest.FixtureRequest,
    galaxy_stops: str | None = None,
    raises: type[Exception] = MemoryConfigError,
) -> None:
    """Strict xfail on 2x4 (tt-metal's non-Galaxy code is 1xN only: TT-NN's ``raises``), and on
    8x4 where ``galaxy_stops`` says why tt-metal's TG path stops (a MemoryConfigError)."""
    if "2x4" in request.node.callspec.id:
        request.applymarker(pytest.mark.xfail(reason=ONE_ROW_ONLY, strict=True, raises=raises))
    if galaxy_stops and "8x4" in request.node.callspec.id:
        request.applymarker(
            pytest.mark.xfail(reason=galaxy_stops, strict=True, raises=MemoryConfigError)
        )


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_rmsnorm(real: Any, mode: str, request: pytest.FixtureRequest) -> None:
    """Prefill runs on every mesh (2x4: distributed, see harness.run_rmsnorm); decode's
    DECODE_RESIDUAL_MEMCFG is sized for 1xN (4 width shards on a 2-core grid on 2x4)."""
    if mode == "decode":
        _one_row_only(request)
    assert harness.run_rmsnorm(real(), mode) >= PCC


def test_embedding(real: Any) -> None:
    assert harness.run_embedding(real()) >= PCC


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_mlp(real: Any, mode: str, request: pytest.FixtureRequest) -> None:
    _one_row_only(request, GALAXY_DECODE_MLP if mode == "decode" else None)
    assert harness.run_mlp(real(), mode) >= PCC


def test_lm_head(real: Any, request: pytest.FixtureRequest) -> None:
    # 2x4: ccl.py tt_all_reduce reduce-scatters on dim 0, which TT-NN's op refuses (dims 1-3)
    _one_row_only(request, raises=CCLError)
    assert harness.run_lm_head(real()) >= PCC


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_attention(real: Any, mode: str, request: pytest.FixtureRequest) -> None:
    _one_row_only(request)
    assert harness.run_attention_like(real(), "attention", mode) >= PCC


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_attention_paged_kv(real: Any, mode: str, request: pytest.FixtureRequest) -> None:
    """Paged KV cache (blocks out of order, page table on every call); decode also reads the
    cache back through the page table and compares K and V with transformers'."""
    _one_row_only(request)
    assert harness.run_attention_like(real(), "attention", mode, paged=True) >= PCC


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_decoder(real: Any, mode: str, request: pytest.FixtureRequest) -> None:
    _one_row_only(request, GALAXY_DECODE_MLP if mode == "decode" else None)
    assert harness.run_attention_like(real(), "decoder", mode) >= PCC


def test_model_generator_prefill(real: Any, request: pytest.FixtureRequest) -> None:
    """Transformer + Generator: prefill logits of the last prompt position."""
    _one_row_only(request)
    assert harness.run_generator_prefill(real(2)) >= PCC


def test_model_generator_decode(real: Any, request: pytest.FixtureRequest) -> None:
    """Transformer + Generator: decode logits, and greedy tokens equal transformers'."""
    _one_row_only(request, GALAXY_DECODE_MLP)
    assert harness.run_generator_decode(real(2)) >= PCC


def test_model_generator_paged_kv_traced_decode(real: Any, request: pytest.FixtureRequest) -> None:
    """simple_text_demo.py's defaults: paged KV cache, decode through a captured trace."""
    _one_row_only(request)
    assert harness.run_generator_prefill(real(2), paged=True, trace=True) >= PCC
    if "8x4" in request.node.callspec.id:
        with pytest.raises(
            MemoryConfigError, match="Shard height 128 must match physical height 32"
        ):
            harness.run_generator_decode(real(2), paged=True, trace=True)
        return  # GALAXY_DECODE_MLP
    assert harness.run_generator_decode(real(2), paged=True, trace=True) >= PCC


_CHUNKED: dict[str, harness.Setup] = {}


@pytest.mark.slow
@pytest.mark.parametrize("mesh_name", ["1x8", "2x4"])  # 8x4: not measured (see docs/tt_metal.md)
def test_model_generator_chunked_prefill(
    ttnn_bound: Any, mesh_name: str, request: pytest.FixtureRequest
) -> None:
    """A 2100-token prompt prefilled in two chunks of 2048 (chunked SDPA over the paged cache),
    then greedy decode: logits and tokens as transformers'."""
    if mesh_name == "2x4":
        request.applymarker(
            pytest.mark.xfail(reason=ONE_ROW_ONLY, strict=True, raises=MemoryConfigError)
        )
    if mesh_name not in _CHUNKED:
        _CHUNKED[mesh_name] = harness.setup_chunked(mesh_of(harness.MESHES[mesh_name]))
    assert harness.run_generator_chunked(_CHUNKED[mesh_name]) >= PCC


_WIDE: dict[str, harness.Setup] = {}


@pytest.mark.slow
@pytest.mark.parametrize("module", ["mlp", "decoder"])
def test_galaxy_decode_at_dim_8192(ttnn_bound: Any, module: str) -> None:
    """8x4 at Llama-70B's dim 8192 (64 heads, 8 kv heads of 128; 1 layer): tt-metal's TG MLP
    decodes through its reduce-scatter path, alone and inside the decoder."""
    if "s" not in _WIDE:
        _WIDE["s"] = harness.setup(mesh_of((8, 4)), 1, wide=True)
    s = _WIDE["s"]
    if module == "mlp":
        assert harness.run_mlp(s, "decode") >= PCC
    else:
        assert harness.run_attention_like(s, "decoder", "decode") >= PCC
