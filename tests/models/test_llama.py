"""The ttjax Llama against the single-device Flax reference and Hugging Face transformers:
TP on 1x8 and 2x4, DP on 1x4, hybrid DP+TP on 8x4 (2x4 submeshes, trace replay); the Megatron
collective count; full-size models compiled on abstract inputs."""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np
import pytest
from _reference import llama_teacher_forced, pcc
from conftest import mesh_of

import ttjax as ttnn
from models.llama.config import get_config
from models.llama.generate import Generator
from models.llama.inspect_targets import decode_step
from models.llama.model import TtLlama
from models.llama.weights import load_hf_checkpoint, random_weights, save_hf_checkpoint

CONFIG = get_config("tiny")
PROMPT_LEN, NEW_TOKENS = 8, 17  # 1 token from the prefill + 16 decode steps


@pytest.fixture(scope="module")
def weights() -> dict[str, np.ndarray]:
    return random_weights(CONFIG, seed=3)


@pytest.fixture(scope="module")
def prompt() -> np.ndarray:
    return np.random.default_rng(4).integers(0, CONFIG.vocab_size, (8, PROMPT_LEN))


def _check_against_reference(result, weights):
    ref_prefill, ref_steps = llama_teacher_forced(CONFIG, weights, result.tokens, PROMPT_LEN)
    assert pcc(result.prefill_logits, ref_prefill) >= 0.99
    assert len(result.decode_logits) == NEW_TOKENS - 1 == 16
    for got, want in zip(result.decode_logits, ref_steps):
        assert pcc(got, want) >= 0.99
    # identical greedy tokens: every token the mesh chose is the reference's argmax
    assert np.array_equal(ref_prefill[:, -1].argmax(-1), result.tokens[:, PROMPT_LEN])
    for i, want in enumerate(ref_steps):
        assert np.array_equal(want.argmax(-1), result.tokens[:, PROMPT_LEN + 1 + i])


@pytest.mark.parametrize(
    "shape,mode,trace",
    [
        pytest.param((1, 8), "tp", False, marks=pytest.mark.slow),
        ((2, 4), "tp", True),
        pytest.param((1, 4), "dp", False, marks=pytest.mark.slow),
        pytest.param((1, 4), "dp", True, marks=pytest.mark.slow),
    ],
    ids=["tp-1x8", "tp-2x4-trace", "dp-1x4", "dp-1x4-trace"],
)
def test_generation_matches_reference(weights, prompt, shape, mode, trace):
    gen = Generator.build(CONFIG, weights, mesh_of(shape), mode=mode, batch=len(prompt))
    result = gen.generate(prompt, NEW_TOKENS, trace=trace)
    _check_against_reference(result, weights)


@pytest.mark.slow  # `make test-all`: keeps `make test` under 10 minutes (`make demo` runs it too)
def test_hybrid_galaxy_with_trace_matches_reference(weights, prompt):
    galaxy = mesh_of((8, 4))
    gen = Generator.build(CONFIG, weights, galaxy, mode="hybrid", submesh=(2, 4), batch=len(prompt))
    assert [m.mesh.get_device_ids()[0] for m in gen.models] == [0, 8, 16, 24]
    result = gen.generate(prompt, NEW_TOKENS, trace=True)
    _check_against_reference(result, weights)
    eager = gen.generate(prompt, NEW_TOKENS, trace=False)
    np.testing.assert_array_equal(eager.tokens, result.tokens)


def test_top_k_top_p_sampling_is_seeded(weights, prompt):
    gen = Generator.build(CONFIG, weights, mesh_of((2, 4)), mode="tp", batch=len(prompt))
    kwargs = dict(temperature=0.8, top_k=20, top_p=0.9, seed=7)
    a = gen.generate(prompt, 6, trace=True, **kwargs).tokens
    b = gen.generate(prompt, 6, trace=False, **kwargs).tokens
    np.testing.assert_array_equal(a, b)
    greedy = gen.generate(prompt, 6, temperature=0.0).tokens
    assert not np.array_equal(a, greedy)


def test_matches_transformers_checkpoint(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    hf_config = transformers.LlamaConfig(
        vocab_size=CONFIG.vocab_size,
        hidden_size=CONFIG.dim,
        intermediate_size=CONFIG.ffn_dim,
        num_hidden_layers=CONFIG.n_layers,
        num_attention_heads=CONFIG.n_heads,
        num_key_value_heads=CONFIG.n_kv_heads,
        max_position_embeddings=CONFIG.max_seq_len,
        rms_norm_eps=CONFIG.norm_eps,
        rope_theta=CONFIG.rope_theta,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    )
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(hf_config).eval()
    hf.save_pretrained(tmp_path, safe_serialization=True)
    config, w = load_hf_checkpoint(tmp_path)
    tokens = np.random.default_rng(5).integers(0, config.vocab_size, (2, 12))
    with torch.no_grad():
        want = hf(torch.from_numpy(tokens)).logits.float().numpy()
    mesh = mesh_of((2, 4))
    model = TtLlama(config, w, mesh, mode="tp", batch=2)
    got = model.logits_to_numpy(model.prefill(model.tokens_to_device(tokens)))
    assert pcc(got, want) >= 0.99
    np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.slow
def test_checkpoint_round_trip_loads_into_model(tmp_path, weights, prompt):
    save_hf_checkpoint(CONFIG, weights, tmp_path)
    config, loaded = load_hf_checkpoint(tmp_path)
    mesh = mesh_of((1, 8))
    a = TtLlama(CONFIG, weights, mesh, batch=8)
    b = TtLlama(config, loaded, mesh, batch=8)
    la = a.logits_to_numpy(a.prefill(a.tokens_to_device(prompt)))
    lb = b.logits_to_numpy(b.prefill(b.tokens_to_device(prompt)))
    np.testing.assert_array_equal(la, lb)


def test_tp_decode_step_has_two_all_reduces_per_layer():
    """The Megatron optimum: one all_reduce after attention, one after the MLP, per layer. The
    scanned and the unrolled model report the same per-step totals (the loop body counts
    trip-count times), and the scanned one reports the per-layer figures of its loop."""
    mesh = mesh_of((2, 4))
    reports = []
    for scan in (False, True):
        fn, args, opts = decode_step(
            mesh, config="tiny", batch=8, context=64, weight_dtype="bfloat16", scan_layers=scan
        )
        report = ttnn.inspect.inspect(fn, *args, **opts)
        counts = report.collective_counts()
        assert counts["all-reduce"] == 2 * CONFIG.n_layers, counts
        assert counts["all-gather"] == 2  # embedding (hidden-sharded) and LM head (vocab-sharded)
        assert counts["reduce-scatter"] == counts["collective-permute"] == counts["all-to-all"] == 0
        assert all(c.cluster_axis is None and c.group_size == 8 for c in report.collectives)
        reports.append(report)
    unrolled, scanned = reports
    # No loop of layers in the unrolled program: under the suite's compile flags (XLA's CPU loop
    # emitters, tests/conftest.py) each KV-cache scatter is a loop over the batch's 8 rows, with
    # no collective and no matmul; XLA's default emitters make no loop at all.
    assert unrolled.layer_loop is None
    for loop in unrolled.loops:
        assert loop.trip_count == 8 and loop.flops_per_iteration < 100, loop
        assert not any(loop.collectives_per_iteration.values()), loop
    assert scanned.collective_counts(per="program")["all-reduce"] == 2
    layer = scanned.layer_loop
    assert layer is not None and layer.trip_count == CONFIG.n_layers
    assert layer.source == "known_trip_count"
    assert layer.collectives_per_iteration["all-reduce"] == 2
    assert scanned.bytes_per_device == pytest.approx(unrolled.bytes_per_device)
    assert scanned.flops == pytest.approx(unrolled.flops, rel=0.01)
    # ttjax.cost's inputs read alike through the layer loop: DRAM bytes and matmul FLOPs
    assert scanned.matmul_flops == pytest.approx(unrolled.matmul_flops, rel=1e-6)
    assert scanned.dram_read_bytes == pytest.approx(unrolled.dram_read_bytes, abs=64)  # indices
    text = "\n".join(scanned.summary_lines())
    assert f"collectives per step: {2 * CONFIG.n_layers + 2}" in text
    assert f"{CONFIG.n_layers} iterations (known_trip_count); per layer: 2 collectives" in text


def test_dp_decode_step_has_no_collectives():
    fn, args, opts = decode_step(mesh_of((1, 4)), config="tiny", mode="dp", batch=8, context=64)
    assert sum(ttnn.inspect.inspect(fn, *args, **opts).collective_counts().values()) == 0


def _inspect_70b(shape: tuple[int, int]) -> tuple[Any, Any, float]:
    """Llama-3.1-70B's decode step inspected on ``shape``: (report, inputs, seconds taken)."""
    start = time.perf_counter()
    fn, args, opts = decode_step(
        mesh_of(shape),
        config="llama-3.1-70b",
        batch=32,
        context=2048,
        weight_dtype="bfloat8_b",
        cache_dtype="bfloat8_b",
    )
    report = ttnn.inspect.inspect(fn, *args, **opts)
    return report, args, time.perf_counter() - start


@pytest.mark.slow
def test_llama_70b_abstract_inspection_is_fast():
    """The wall-clock figure (make test-all only: a loaded host can stretch it)."""
    *_, seconds = _inspect_70b((8, 4))
    assert seconds < 30, f"took {seconds:.1f} s"


@pytest.mark.timeout(600)  # a generous outer bound; being abstract is what keeps it quick
@pytest.mark.parametrize(
    "shape", [pytest.param((2, 4), marks=pytest.mark.slow), (8, 4)], ids=["t3000", "galaxy"]
)
def test_llama_70b_abstract_inspection_fits(shape):
    report, args, _ = _inspect_70b(shape)
    leaves = jax.tree_util.tree_leaves(args)  # no weight is made: 70B would not fit the host
    assert leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
    assert report.memory is not None
    counts = report.collective_counts()
    assert counts["all-reduce"] == 2 * 80 and counts["all-gather"] == 2  # 80 layers per step
    assert report.layer_loop is not None and report.layer_loop.trip_count == 80
    resident = report.memory.resident_bytes  # bfloat8_b weights + batch-32 KV cache, per device
    if shape == (2, 4):
        assert resident <= 12 * 10**9  # Wormhole: 12 GB of DRAM per chip
        assert resident > 9 * 2**30  # 70B / 8 devices at ~1.06 bytes per weight, plus the cache


def test_mode_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"n_heads=16 is not divisible by 3"):
        TtLlama(CONFIG, None, mesh_of((1, 3)), mode="tp")
    with pytest.raises(ValueError, match=r"batch=6 is not divisible by 4"):
        TtLlama(CONFIG, None, mesh_of((1, 4)), mode="dp", batch=6)
