"""ttjax.model_preprocessing: TT-NN's preprocess_model_parameters for torch, Flax NNX and linen."""

from __future__ import annotations

import subprocess
import sys

import jax
import numpy as np
import pytest

import ttjax as ttnn
from ttjax.model_preprocessing import ParameterDict, ParameterList, preprocess_model_parameters

torch = pytest.importorskip("torch")
nnx = pytest.importorskip("flax.nnx")

HIDDEN, FF = 64, 256


class TorchMLP(torch.nn.Module):
    """Falcon's MLP layout (with biases, so bias conversion is exercised too)."""

    def __init__(self) -> None:
        super().__init__()
        self.dense_h_to_4h = torch.nn.Linear(HIDDEN, FF)
        self.act = torch.nn.GELU()
        self.dense_4h_to_h = torch.nn.Linear(FF, HIDDEN)

    def forward(self, x):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(x)))


class NnxMLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.dense_h_to_4h = nnx.Linear(HIDDEN, FF, rngs=rngs)
        self.dense_4h_to_h = nnx.Linear(FF, HIDDEN, rngs=rngs)


@pytest.fixture(scope="module")
def torch_mlp() -> TorchMLP:
    torch.manual_seed(0)
    return TorchMLP()


@pytest.fixture(scope="module")
def nnx_mlp(torch_mlp) -> NnxMLP:
    """The NNX twin of ``torch_mlp``: kernel = torch weight.T, same biases."""
    m = NnxMLP(nnx.Rngs(0))
    for name in ("dense_h_to_4h", "dense_4h_to_h"):
        src, dst = getattr(torch_mlp, name), getattr(m, name)
        dst.kernel[...] = jax.numpy.asarray(src.weight.detach().numpy().T)
        dst.bias[...] = jax.numpy.asarray(src.bias.detach().numpy())
    return m


def bf16(x) -> np.ndarray:
    """The bfloat16 rounding of a torch tensor, as float32 numpy (torch does the rounding)."""
    return x.detach().to(torch.bfloat16).to(torch.float32).numpy()


def host(t: ttnn.Tensor) -> np.ndarray:
    """One device's tensor as float32 numpy."""
    return np.asarray(ttnn.to_numpy(t), np.float32)


def pcc(a, b) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(np.corrcoef(a, b)[0, 1])


# ---------------------------------------------------------------------------------------------
# Stored as TT-NN stores weights
# ---------------------------------------------------------------------------------------------


def test_replicated_torch_weights_equal_source_transposed(t3000, torch_mlp):
    with ttnn.distribute(ttnn.ReplicateTensorToMesh(t3000)):
        p = ttnn.model_preprocessing.preprocess_model_parameters(
            initialize_model=lambda: torch_mlp, device=t3000
        )
    assert isinstance(p, ParameterDict)
    assert set(p) == {"dense_h_to_4h", "dense_4h_to_h"}  # GELU has no parameters
    for name, (fan_in, fan_out) in {
        "dense_h_to_4h": (HIDDEN, FF),
        "dense_4h_to_h": (FF, HIDDEN),
    }.items():
        layer = getattr(torch_mlp, name)
        w, b = p[name].weight, p[name].bias
        assert w.shape == (fan_in, fan_out) and b.shape == (1, fan_out)
        for t in (w, b):
            assert t.dtype == ttnn.bfloat16 and t.layout == ttnn.TILE_LAYOUT
            assert t.storage_type() == ttnn.StorageType.DEVICE and t.mesh_device is t3000
            assert all(isinstance(pl, ttnn.PlacementReplicate) for pl in t.placements)
        for dev_w, dev_b in zip(ttnn.get_device_tensors(w), ttnn.get_device_tensors(b)):
            np.testing.assert_array_equal(host(dev_w), bf16(layer.weight.T))
            np.testing.assert_array_equal(host(dev_b), bf16(layer.bias.reshape(1, -1)))


def test_width_sharded_torch_weights(t3000, torch_mlp):
    n = t3000.get_num_devices()
    with ttnn.distribute(ttnn.ShardTensorToMesh(t3000, dim=-1)):
        p = preprocess_model_parameters(initialize_model=lambda: torch_mlp, device=t3000)
    assert p.dense_h_to_4h.weight.shape == (HIDDEN, FF // n)
    assert p.dense_h_to_4h.bias.shape == (1, FF // n)
    assert p.dense_4h_to_h.weight.shape == (FF, HIDDEN // n)
    assert p.dense_4h_to_h.bias.shape == (1, HIDDEN // n)
    for name in ("dense_h_to_4h", "dense_4h_to_h"):
        layer = getattr(torch_mlp, name)
        wt, bt = bf16(layer.weight.T), bf16(layer.bias.reshape(1, -1))
        cols = wt.shape[1] // n
        # Device k (row-major) holds output columns [k*cols, (k+1)*cols).
        for k, (dev_w, dev_b) in enumerate(
            zip(ttnn.get_device_tensors(p[name].weight), ttnn.get_device_tensors(p[name].bias))
        ):
            np.testing.assert_array_equal(host(dev_w), wt[:, k * cols : (k + 1) * cols])
            np.testing.assert_array_equal(host(dev_b), bt[:, k * cols : (k + 1) * cols])
        whole = ttnn.to_torch(p[name].weight, mesh_composer=ttnn.ConcatMeshToTensor(t3000, dim=-1))
        np.testing.assert_array_equal(whole.float().numpy(), wt)


def test_nnx_module_matches_torch_twin(n300, torch_mlp, nnx_mlp):
    with ttnn.distribute(ttnn.ShardTensorToMesh(n300, dim=-1)):
        pt = preprocess_model_parameters(initialize_model=lambda: torch_mlp, device=n300)
        pn = preprocess_model_parameters(initialize_model=lambda: nnx_mlp, device=n300)
    assert set(pn) == {"dense_h_to_4h", "dense_4h_to_h"}
    composer = ttnn.ConcatMeshToTensor(n300, dim=-1)
    for name in ("dense_h_to_4h", "dense_4h_to_h"):
        for key in ("weight", "bias"):
            a, b = pn[name][key], pt[name][key]
            assert (a.shape, a.dtype, a.layout, a.placements) == (
                b.shape,
                b.dtype,
                b.layout,
                b.placements,
            )
            np.testing.assert_array_equal(
                ttnn.to_numpy(a, mesh_composer=composer), ttnn.to_numpy(b, mesh_composer=composer)
            )
        kernel = np.asarray(getattr(nnx_mlp, name).kernel[...])
        np.testing.assert_array_equal(
            ttnn.to_torch(pn[name].weight, mesh_composer=composer).float().numpy(),
            bf16(torch.tensor(np.array(kernel))),
        )


def test_nnx_norm_embedding_lists_and_nesting(n300):
    class Block(nnx.Module):
        def __init__(self, rngs):
            self.ln = nnx.LayerNorm(32, rngs=rngs)
            self.mlp = nnx.Dict(up=nnx.Linear(32, 64, use_bias=False, rngs=rngs))

    class Model(nnx.Module):
        def __init__(self, rngs):
            self.embed = nnx.Embed(16, 32, rngs=rngs)
            self.layers = nnx.List([Block(rngs) for _ in range(2)])
            self.norm = nnx.BatchNorm(32, rngs=rngs)  # Params scale/bias; stats are skipped
            self.rngs = rngs  # holds no Params: left out

    model = Model(nnx.Rngs(1))
    p = preprocess_model_parameters(initialize_model=lambda: model, device=n300)
    assert list(p) == ["embed", "layers", "norm"]
    assert isinstance(p.layers, ParameterList) and len(p.layers) == 2 and 1 in p.layers
    assert p.embed.weight.shape == (16, 32) and p.embed.weight.layout == ttnn.ROW_MAJOR_LAYOUT
    np.testing.assert_array_equal(
        host(ttnn.get_device_tensors(p.embed.weight)[0]),
        np.asarray(model.embed.embedding[...]).astype(jax.numpy.bfloat16).astype(np.float32),
    )
    blk = p.layers[1]
    assert blk.ln.weight.shape == (1, 32) and blk.ln.bias.shape == (1, 32)
    assert blk.ln.weight.layout == ttnn.TILE_LAYOUT
    assert set(blk.mlp.up) == {"weight"} and blk.mlp.up.weight.shape == (32, 64)
    assert set(p.norm) == {"scale", "bias"} and p.norm.scale.shape == (32,)


def test_linen_param_dict(n300):
    flax_linen = pytest.importorskip("flax.linen")
    variables = flax_linen.Dense(64).init(jax.random.key(0), np.ones((1, 32), np.float32))
    params = {"dense": variables["params"], "ln": {"scale": np.ones(32), "bias": np.zeros(32)}}
    with ttnn.distribute(ttnn.ReplicateTensorToMesh(n300)):
        p = preprocess_model_parameters(initialize_model=lambda: params, device=n300)
    kernel = np.asarray(params["dense"]["kernel"])
    assert p.dense.weight.shape == (32, 64) and p.dense.bias.shape == (1, 64)
    np.testing.assert_array_equal(
        host(ttnn.get_device_tensors(p.dense.weight)[1]), bf16(torch.tensor(np.array(kernel)))
    )
    assert p.ln.weight.shape == (1, 32) and p.ln.bias.shape == (1, 32)
    # A lone top-level "params" collection is unwrapped.
    q = preprocess_model_parameters(initialize_model=lambda: variables)
    assert set(q) == {"weight", "bias"} and q.weight.storage_type() == ttnn.StorageType.HOST


def test_torch_layernorm_embedding_modulelist_and_generic_params(n300):
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Embedding(16, 32)
            self.h = torch.nn.ModuleList([torch.nn.LayerNorm(32) for _ in range(2)])
            self.seq = torch.nn.Sequential(torch.nn.Linear(32, 32, bias=False), torch.nn.ReLU())
            self.scale = torch.nn.Parameter(torch.arange(4, dtype=torch.float32))
            self.register_buffer("not_a_parameter", torch.ones(3))

    model = Model()
    p = preprocess_model_parameters(initialize_model=lambda: model, device=n300)
    assert p.wte.weight.shape == (16, 32) and p.wte.weight.layout == ttnn.ROW_MAJOR_LAYOUT
    assert isinstance(p.h, ParameterList) and p.h[0].weight.shape == (1, 32)
    assert p.seq[0].weight.shape == (32, 32) and set(p.seq[0]) == {"weight"}
    assert p.scale.dtype == ttnn.bfloat16 and p.scale.layout == ttnn.ROW_MAJOR_LAYOUT
    assert "not_a_parameter" not in p
    np.testing.assert_array_equal(host(ttnn.get_device_tensors(p.scale)[0]), [0, 1, 2, 3])


# ---------------------------------------------------------------------------------------------
# TT-NN's hooks and conventions
# ---------------------------------------------------------------------------------------------


def test_parameter_dict_access(n300, torch_mlp):
    p = preprocess_model_parameters(initialize_model=lambda: torch_mlp, device=n300)
    assert p.dense_h_to_4h.weight is p["dense_h_to_4h"]["weight"]
    assert isinstance(p.dense_h_to_4h, ParameterDict)
    assert not hasattr(p, "missing")
    with pytest.raises(AttributeError, match="'dense_h_to_4h'"):
        _ = p.dense_h_to_5h
    assert "ttnn.Tensor(shape=Shape([64, 256]), layout=Layout::TILE" in repr(p)
    # A pytree: it can be passed through jax.tree utilities and into jax.jit.
    leaves = jax.tree.leaves(p, is_leaf=lambda x: isinstance(x, ttnn.Tensor))
    assert len(leaves) == 4 and all(isinstance(t, ttnn.Tensor) for t in leaves)
    same = jax.tree.map(lambda t: t, p, is_leaf=lambda x: isinstance(x, ttnn.Tensor))
    assert isinstance(same, ParameterDict) and same.dense_4h_to_h.bias is p.dense_4h_to_h.bias
    x = ttnn.from_torch(torch.ones(1, 1, 32, HIDDEN), dtype=ttnn.bfloat16, device=n300)

    @jax.jit
    def forward(params, x):
        return ttnn.linear(x, params.dense_h_to_4h.weight, bias=params.dense_h_to_4h.bias)

    eager = ttnn.linear(x, p.dense_h_to_4h.weight, bias=p.dense_h_to_4h.bias)
    composer = ttnn.ConcatMeshToTensor(n300, dim=0)
    np.testing.assert_array_equal(
        ttnn.to_numpy(forward(p, x), mesh_composer=composer),
        ttnn.to_numpy(eager, mesh_composer=composer),
    )


def test_custom_preprocessor_first_and_names(n300, torch_mlp):
    seen = []

    def custom(model, name):
        seen.append((type(model).__name__, name))
        if name == "mlp.dense_h_to_4h":
            return {"w": ttnn.from_torch(model.weight, dtype=ttnn.float32)}
        return {}

    p = preprocess_model_parameters(
        initialize_model=lambda: torch_mlp, custom_preprocessor=custom, prefix="mlp", device=n300
    )
    assert seen[0] == ("TorchMLP", "mlp")
    assert ("Linear", "mlp.dense_h_to_4h") in seen and ("GELU", "mlp.act") in seen
    assert set(p.dense_h_to_4h) == {"w"} and p.dense_h_to_4h.w.shape == (FF, HIDDEN)
    assert p.dense_h_to_4h.w.storage_type() == ttnn.StorageType.DEVICE  # moved like the rest
    assert p.dense_4h_to_h.weight.shape == (FF, HIDDEN)

    def with_extras(model, name, ttnn_module_args, convert_to_ttnn):
        assert ttnn_module_args is None and convert_to_ttnn(model, name)
        return {}

    preprocess_model_parameters(initialize_model=lambda: torch_mlp, custom_preprocessor=with_extras)

    with pytest.raises(ttnn.TTJaxError, match="at least two"):
        preprocess_model_parameters(initialize_model=lambda: torch_mlp, custom_preprocessor=len)
    with pytest.raises(ttnn.TTJaxError, match="unsupported parameter 'device'"):
        preprocess_model_parameters(
            initialize_model=lambda: torch_mlp, custom_preprocessor=lambda m, n, device: {}
        )


def test_convert_to_ttnn_false_keeps_source_arrays(torch_mlp):
    p = preprocess_model_parameters(
        initialize_model=lambda: torch_mlp,
        convert_to_ttnn=lambda model, name: name != "dense_4h_to_h",
    )
    assert isinstance(p.dense_h_to_4h.weight, ttnn.Tensor)
    w = p.dense_4h_to_h.weight
    assert isinstance(w, torch.Tensor) and torch.equal(w, torch_mlp.dense_4h_to_h.weight.T)
    assert torch.equal(p.dense_4h_to_h.bias, torch_mlp.dense_4h_to_h.bias)


def test_eval_mode_host_tensors_and_bad_input(torch_mlp):
    model = TorchMLP()
    assert model.training
    p = preprocess_model_parameters(initialize_model=lambda: model)
    assert not model.training
    assert p.dense_h_to_4h.weight.storage_type() == ttnn.StorageType.HOST
    assert p.dense_h_to_4h.weight.mesh_device is None
    with pytest.raises(ttnn.TTJaxError, match="initialize_model"):
        preprocess_model_parameters(model_name="falcon")
    with pytest.raises(ttnn.TTJaxError, match="returned a int"):
        preprocess_model_parameters(initialize_model=lambda: 3)
    with pytest.raises(ttnn.TTJaxError, match="is not a MeshDevice"):
        preprocess_model_parameters(initialize_model=lambda: torch_mlp, device="cpu")


def test_sharding_error_names_the_parameter(t3000):
    model = torch.nn.Linear(8, 12)  # 12 output columns do not split over 8 devices
    with ttnn.distribute(ttnn.ShardTensorToMesh(t3000, dim=-1)):
        with pytest.raises(ttnn.ShardingError, match="converting 'proj'"):
            preprocess_model_parameters(initialize_model=lambda: model, prefix="proj")


# ---------------------------------------------------------------------------------------------
# Forward passes against torch
# ---------------------------------------------------------------------------------------------


def test_tensor_parallel_linear_matches_torch(t3000, torch_mlp):
    torch.manual_seed(1)
    x = torch.rand(1, 1, 32, HIDDEN) * 2 - 1
    with ttnn.distribute(ttnn.ShardTensorToMesh(t3000, dim=-1)):
        p = preprocess_model_parameters(initialize_model=lambda: torch_mlp, device=t3000)
    with ttnn.distribute(ttnn.ReplicateTensorToMesh(t3000)):
        xt = ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=t3000)
    y = ttnn.linear(xt, p.dense_h_to_4h.weight, bias=p.dense_h_to_4h.bias)
    assert y.shape == (1, 1, 32, FF // t3000.get_num_devices())
    with ttnn.distribute(ttnn.ConcatMeshToTensor(t3000, dim=3)):
        out = ttnn.to_torch(y)
    with torch.no_grad():
        ref = torch_mlp.dense_h_to_4h(x)
    assert out.shape == ref.shape
    assert pcc(out.float(), ref) >= 0.99


def test_data_parallel_mlp_matches_torch(n300, torch_mlp, nnx_mlp):
    torch.manual_seed(2)
    x = torch.rand(2, 1, 32, HIDDEN) * 2 - 1
    with ttnn.distribute(ttnn.ShardTensorToMesh(n300, dim=0)):
        xt = ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=n300)
    with torch.no_grad():
        ref = torch_mlp(x)
    for model in (torch_mlp, nnx_mlp):
        with ttnn.distribute(ttnn.ReplicateTensorToMesh(n300)):
            p = preprocess_model_parameters(initialize_model=lambda m=model: m, device=n300)
        h = ttnn.linear(xt, p.dense_h_to_4h.weight, bias=p.dense_h_to_4h.bias)
        h = ttnn.gelu(h)
        y = ttnn.linear(h, p.dense_4h_to_h.weight, bias=p.dense_4h_to_h.bias)
        out = ttnn.to_torch(y, mesh_composer=ttnn.ConcatMeshToTensor(n300, dim=0))
        assert out.shape == ref.shape
        assert pcc(out.float(), ref) >= 0.99


def test_importing_ttjax_does_not_import_torch():
    code = "import sys, ttjax; assert 'torch' not in sys.modules, 'torch was imported'"
    env = {"TTJAX_NUM_DEVICES": "2", "JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


@pytest.mark.parametrize("bias", [True, False])
def test_fold_batch_norm2d_into_conv2d_is_the_conv_then_the_norm(bias):
    torch = pytest.importorskip("torch")
    from ttjax.model_preprocessing import fold_batch_norm2d_into_conv2d

    torch.manual_seed(4)
    conv, bn = torch.nn.Conv2d(3, 5, 3, bias=bias), torch.nn.BatchNorm2d(5)
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.normal_()
        bn.bias.normal_()
    bn.eval()
    x = torch.randn(2, 3, 6, 6)
    w, b = fold_batch_norm2d_into_conv2d(conv, bn)
    with torch.no_grad():
        np.testing.assert_allclose(
            torch.nn.functional.conv2d(x, w, b).numpy(), bn(conv(x)).numpy(), rtol=1e-4, atol=1e-5
        )
    with pytest.raises(ttnn.TTJaxError, match="track_running_stats=True"):
        fold_batch_norm2d_into_conv2d(conv, torch.nn.BatchNorm2d(5, track_running_stats=False))


def test_linear_weight_and_bias_take_a_weights_mesh_mapper():
    """TT-NN's ``preprocess_linear_weight/bias(..., weights_mesh_mapper=)`` (whisper's custom
    preprocessor passes one): the transposed weight and [1, out] bias laid over the mesh as the
    mapper says, host tensors; each device's piece against numpy."""
    torch = pytest.importorskip("torch")
    from conftest import mesh_of

    from ttjax.model_preprocessing import preprocess_linear_bias, preprocess_linear_weight

    mesh = mesh_of((1, 2))
    w = torch.randn(6, 4, generator=torch.Generator().manual_seed(5))
    b = torch.randn(6, generator=torch.Generator().manual_seed(6))
    tw = preprocess_linear_weight(w, dtype=ttnn.float32,
                                  weights_mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1))  # fmt: skip
    tb = preprocess_linear_bias(b, dtype=ttnn.float32,
                                weights_mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))  # fmt: skip
    assert tw.storage_type() is ttnn.StorageType.HOST and tw.layout is ttnn.TILE_LAYOUT
    for d, got in enumerate(ttnn.get_device_tensors(tw)):
        np.testing.assert_array_equal(ttnn.to_torch(got).numpy(), w.T[:, 3 * d : 3 * d + 3].numpy())
    for got in ttnn.get_device_tensors(tb):
        np.testing.assert_array_equal(ttnn.to_torch(got).numpy(), b.reshape(1, 6).numpy())
