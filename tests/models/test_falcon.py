"""Falcon-7B MLP at the real sizes (hidden 4544, ffn 18176), TT-NN guide sections 6 and 7:
data parallel over 1x4 and 8x4, tensor parallel over 2x4, against the Flax reference FalconMLP
(and Hugging Face's FalconMLP when transformers is installed)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _reference import pcc
from conftest import mesh_of
from flax import nnx

import ttjax as ttnn
from models.falcon.mlp import (
    TtFalconMLP,
    compose_output,
    setup_data_parallel,
    setup_tensor_parallel,
)
from models.falcon.reference import FALCON_7B, FalconMLP

PCC = {ttnn.float32: 0.99, ttnn.bfloat16: 0.98}


@pytest.fixture(scope="module")
def falcon() -> FalconMLP:
    return FalconMLP(FALCON_7B, rngs=nnx.Rngs(0))


def _hidden_states(batch: int, seq: int) -> np.ndarray:
    rng = np.random.default_rng(batch * 1000 + seq)
    return (rng.random((batch, 1, seq, FALCON_7B.hidden_size), np.float32) * 2) - 1


def _check(mesh, model, mode, batch, seq, dtype):
    x = _hidden_states(batch, seq)
    want = np.asarray(jax.jit(model.__call__)(x))
    setup = setup_data_parallel if mode == "dp" else setup_tensor_parallel
    tt_model, hidden = setup(mesh, model, x, dtype)
    out = tt_model(hidden)
    got = compose_output(mesh, out, mode)
    assert got.shape == want.shape
    assert pcc(got, want) >= PCC[dtype], (mode, dtype, pcc(got, want))
    return out


@pytest.mark.parametrize(
    "dtype",
    # real width: `make test-all` (`make test` checks the TP program's collectives abstractly)
    [pytest.param(d, marks=pytest.mark.slow) for d in (ttnn.float32, ttnn.bfloat16)],
    ids=["f32", "bf16"],
)
def test_data_parallel_1x4(falcon, dtype):
    out = _check(mesh_of((1, 4)), falcon, "dp", 4, 128, dtype)
    assert out.shape == (1, 1, 128, FALCON_7B.hidden_size)  # each device: its own batch row


@pytest.mark.parametrize(
    "dtype",
    [ttnn.float32, pytest.param(ttnn.bfloat16, marks=pytest.mark.slow)],  # bf16: `make test-all`
    ids=["f32", "bf16"],
)
@pytest.mark.slow  # real width: 85 GFLOP on the host; the 2x4 program's collectives are checked below
def test_tensor_parallel_2x4(falcon, dtype):
    out = _check(mesh_of((2, 4)), falcon, "tp", 1, 256, dtype)
    assert out.shape == (1, 1, 256, FALCON_7B.hidden_size // 8)  # width-sharded output


@pytest.mark.slow
@pytest.mark.parametrize(
    "dtype",
    [ttnn.float32, pytest.param(ttnn.bfloat16, marks=pytest.mark.slow)],  # bf16: `make test-all`
    ids=["f32", "bf16"],
)
def test_data_parallel_galaxy_8x4(falcon, dtype):
    _check(mesh_of((8, 4)), falcon, "dp", 32, 128, dtype)


@pytest.mark.slow
def test_tensor_parallel_has_one_all_gather(falcon):
    mesh = mesh_of((2, 4))
    x = ttnn.abstract_tensor((1, 1, 256, FALCON_7B.hidden_size), ttnn.bfloat16, device=mesh)
    shard = ttnn.ShardTensorToMesh(mesh, dim=-1)
    h, f = FALCON_7B.hidden_size, FALCON_7B.ffn_hidden_size
    params = {
        "dense_h_to_4h": {
            "weight": ttnn.abstract_tensor((h, f), ttnn.bfloat16, device=mesh, mesh_mapper=shard)
        },
        "dense_4h_to_h": {
            "weight": ttnn.abstract_tensor((f, h), ttnn.bfloat16, device=mesh, mesh_mapper=shard)
        },
    }
    params = ttnn.model_preprocessing.make_parameter_dict(params)
    report = ttnn.inspect.inspect(lambda p, a: TtFalconMLP(p, tensor_parallel=True)(a), params, x)
    assert report.collective_counts()["all-gather"] == 1
    assert sum(report.collective_counts().values()) == 1


@pytest.mark.slow  # `make test-all`: keeps `make test` under 10 minutes
def test_matches_hugging_face_falcon_mlp():
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from transformers.models.falcon.modeling_falcon import FalconMLP as HFFalconMLP

    config = transformers.FalconConfig(hidden_size=FALCON_7B.hidden_size, num_attention_heads=71)
    torch.manual_seed(0)
    hf = HFFalconMLP(config).eval()
    x = _hidden_states(1, 64)
    with torch.no_grad():
        want = hf(torch.from_numpy(x)).numpy()
    mesh = mesh_of((2, 4))
    tt_model, hidden = setup_tensor_parallel(mesh, hf, x, ttnn.float32)
    got = compose_output(mesh, tt_model(hidden), "tp")
    assert pcc(got, want) >= 0.99
    ref = FalconMLP.from_torch_weights(
        hf.dense_h_to_4h.weight.detach().numpy(), hf.dense_4h_to_h.weight.detach().numpy()
    )
    assert pcc(np.asarray(ref(x)), want) >= 0.999
