"""torch-xla's names on ttjax (ttjax.torchxla, ttjax.compat.install_as_torch_xla, python -m
ttjax.torch_xla_run), and ttjax.spmd on torch tensors living on the JAX device (torchax)."""

from __future__ import annotations

import copy
import sys
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import ttjax.compat
import ttjax.spmd
from ttjax.errors import ConfigError, ShardingError

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
pytest.importorskip("torchax")


@pytest.fixture
def torch_xla():
    yield ttjax.compat.install_as_torch_xla()
    ttjax.compat.uninstall_torch_xla()


def _mesh(shape=(2, 4)):
    return ttjax.spmd.Mesh(np.arange(8), shape, ("batch", "model"))


def test_mark_sharding_annotates_a_torch_tensor_in_place(torch_xla) -> None:
    import torch_xla.distributed.spmd as xs

    host = np.arange(8 * 12, dtype=np.float32).reshape(8, 12)
    t = torch.from_numpy(host.copy()).to(torch_xla.device())
    assert xs.mark_sharding(t, _mesh(), ("batch", "model")) is t
    assert xs.get_partition_spec(t) == P("batch", "model")
    for shard in t._elem.addressable_shards:  # device (r, c) holds rows r, columns c
        np.testing.assert_array_equal(np.asarray(shard.data), host[shard.index])
    assert xs.clear_sharding(t) is t and xs.get_partition_spec(t) == P()
    np.testing.assert_array_equal(t.cpu().numpy(), host)


@pytest.mark.parametrize(
    "spec",
    [("nope", None), ("model",), ("model", "model"), (None, 2), "model"],
)
def test_a_bad_spec_raises_the_same_error_for_torch_and_jax(torch_xla, spec) -> None:
    host = np.ones((8, 3), np.float32)
    with pytest.raises(ShardingError) as on_jax:
        ttjax.spmd.mark_sharding(host, _mesh(), spec)
    t = torch.from_numpy(host).to(torch_xla.device())
    with pytest.raises(ShardingError) as on_torch:
        ttjax.spmd.mark_sharding(t, _mesh(), spec)
    assert str(on_torch.value) == str(on_jax.value) and "fix:" in str(on_torch.value)
    assert ttjax.spmd.get_partition_spec(t) is None  # nothing was placed


def test_padded_shards_on_arrays_and_a_torch_tensor_refused_outside_a_program(torch_xla) -> None:
    """torch-xla pads a dim that does not divide (test_padded_xla_shards): 3 columns over
    'batch' (2) go in blocks of 2, the last padded with a zero column. A numpy array comes back
    stored so (an XLAShardedTensor); a torch tensor on the JAX device is one jax.Array of its own
    shape, so it is refused with the fix, and left unannotated."""
    host = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    xt = ttjax.spmd.mark_sharding(host, _mesh(), (None, "batch"))
    for i, shard in enumerate(xt.local_shards):  # device i on the 2 x 4 mesh: batch row i // 4
        cols = shard.indices[1]
        assert cols == [slice(0, 2, 1), slice(2, 3, 1)][i // 4] and shard.replica_id == i % 4
        block = np.zeros((8, 2), np.float32)  # numpy's block, zero-padded to ceil(3 / 2) = 2
        block[:, : cols.stop - cols.start] = host[:, cols]
        np.testing.assert_array_equal(shard.data, block)
        np.testing.assert_array_equal(shard.unpadded_data, host[tuple(shard.indices)])
    t = torch.from_numpy(host).to(torch_xla.device())
    with pytest.raises(
        ShardingError, match=r"size 3, .* size 2 [\s\S]*fix: pad dim 1 to a multiple"
    ):
        ttjax.spmd.mark_sharding(t, _mesh(), (None, "batch"))
    assert ttjax.spmd.get_partition_spec(t) is None


def test_a_parameter_left_on_the_cpu_is_refused(torch_xla) -> None:
    with pytest.raises(ShardingError, match=r"is on cpu.*\nfix: move the model first"):
        ttjax.spmd.mark_sharding(torch.nn.Parameter(torch.ones(8, 2)), _mesh(), ("model", None))


def test_a_tensor_left_on_the_cpu_is_refused_as_torch_xla_refuses_it(torch_xla) -> None:
    """torch-xla raises ``Input tensor is not an XLA tensor: CPUFloatType``; converting it instead
    would return a new array and leave the caller's tensor unannotated."""
    import torch_xla.distributed.spmd as xs

    host = torch.arange(16.0).reshape(8, 2)
    with pytest.raises(ShardingError) as e:
        xs.mark_sharding(host, _mesh(), ("model", None))
    first, fix = str(e.value).splitlines()
    assert first.startswith("mark_sharding: Input tensor is not an XLA tensor: CPUFloatType: ")
    assert "(shape (8, 2)) is on cpu" in first
    assert fix.startswith("fix: move it first and annotate the moved tensor: t = t.to(")
    np.testing.assert_array_equal(host.numpy(), np.arange(16.0).reshape(8, 2))
    with pytest.raises(ShardingError, match=r"not an XLA tensor: CPULongType"):
        xs.mark_sharding(torch.ones(8, dtype=torch.int64), _mesh(), ("model",))
    moved = host.to(torch_xla.device())  # the fix, as written, annotates the moved tensor
    assert xs.mark_sharding(moved, _mesh(), ("model", None)) is moved
    assert xs.get_partition_spec(moved) == P("model", None)


def test_mesh_takes_torch_device_ids(torch_xla) -> None:
    mesh = ttjax.spmd.Mesh(torch.arange(8).to(torch_xla.device()), (2, 4), ("batch", "model"))
    assert mesh == _mesh()
    ttjax.spmd.set_global_mesh(mesh)
    try:
        t = ttjax.spmd.mark_sharding(torch.ones(4, 8).to(torch_xla.device()), None, (None, 1))
        assert ttjax.spmd.get_partition_spec(t) == P(None, "model")
    finally:
        ttjax.spmd.set_global_mesh(None)


def test_gradients_follow_their_weights_sharding_and_match_torch(torch_xla) -> None:
    import torch_xla.distributed.spmd as xs

    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.SiLU(), torch.nn.Linear(32, 16))
    model = copy.deepcopy(ref)
    x = torch.randn(4, 16)
    ref(x).pow(2).sum().backward()
    model = model.to(torch_xla.device())
    mesh = _mesh((1, 8))
    xs.mark_sharding(model[0].weight, mesh, ("model", None))  # column-parallel
    xs.mark_sharding(model[2].weight, mesh, (None, "model"))  # row-parallel
    model(x.to(torch_xla.device())).pow(2).sum().backward()
    for mine, theirs in zip(model.parameters(), ref.parameters()):
        if mine.ndim == 2:  # the annotated weights (the biases stay where XLA put them)
            assert xs.get_partition_spec(mine.grad) == xs.get_partition_spec(mine)
        np.testing.assert_allclose(mine.grad.cpu().numpy(), theirs.grad.numpy(), atol=1e-5)
    opt, ref_opt = (
        torch.optim.SGD(model.parameters(), lr=0.1),
        torch.optim.SGD(ref.parameters(), 0.1),
    )
    opt.step()
    ref_opt.step()
    assert xs.get_partition_spec(model[2].weight) == P(None, "model")  # the update kept it
    got = model[2].weight.detach().cpu().numpy()
    np.testing.assert_allclose(got, ref[2].weight.detach().numpy(), atol=1e-6)


def test_torch_xla_names_are_ttjax(torch_xla) -> None:
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    from torch_xla.experimental import plugins

    import ttjax.torchxla

    assert xs.mark_sharding is ttjax.spmd.mark_sharding and xs.Mesh is ttjax.spmd.Mesh
    assert xm.xla_device() == torch_xla.device() == torch.device("jax", 0)
    assert xr.global_runtime_device_count() == len(jax.devices())
    assert plugins.DevicePlugin is ttjax.torchxla.DevicePlugin
    xr.use_spmd()
    assert xr.is_spmd()
    with pytest.raises(ConfigError, match="no automatic sharding"):
        xr.use_spmd(auto=True)
    with pytest.raises(
        AttributeError, match=r"ttjax does not provide torch_xla\.core\.xla_model\.nope"
    ):
        xm.nope  # noqa: B018
    t = torch.ones(3, device=torch_xla.device()) * 2
    xm.mark_step()
    assert t._elem.is_fully_replicated and t.cpu().tolist() == [2.0, 2.0, 2.0]


def test_a_plugin_registration_is_accepted_with_one_line(torch_xla) -> None:
    from torch_xla.experimental import plugins

    class TTPjrtPlugin(plugins.DevicePlugin):
        def library_path(self):
            raise AssertionError("never loaded")

    with pytest.warns(plugins.PluginNotLoadedWarning) as caught:
        plugins.register_plugin("TT", TTPjrtPlugin())
    (message,) = [str(w.message) for w in caught]
    assert "\n" not in message and "accepted, not loaded" in message


def test_compile_runs_a_module_as_one_program(torch_xla) -> None:
    torch.manual_seed(0)
    ref = torch.nn.Linear(8, 16)
    x = torch.randn(2, 8)
    want = ref(x).detach().numpy()
    model = torch.nn.Linear(8, 16)
    model.load_state_dict(ref.state_dict())
    model = model.to(torch_xla.device())
    ttjax.spmd.mark_sharding(model.weight, _mesh((1, 8)), ("model", None))
    forward = torch_xla.compile(model)
    got = forward(x.to(torch_xla.device()))
    np.testing.assert_allclose(got.cpu().numpy(), want, atol=1e-6)
    assert ttjax.spmd.get_partition_spec(got) == P(None, "model")


def test_uninstall_unbinds_and_gives_torch_back(torch_xla) -> None:
    ttjax.compat.uninstall_torch_xla()
    with pytest.raises(ModuleNotFoundError):
        import torch_xla.runtime  # noqa: F401
    assert type(torch.ones(2) + 1) is torch.Tensor
    assert ttjax.compat.install_as_torch_xla().device() == torch.device("jax", 0)


def test_the_real_torch_xla_is_not_shadowed(monkeypatch) -> None:
    fake = type(sys)("torch_xla")
    fake.__file__ = "/site-packages/torch_xla/__init__.py"
    monkeypatch.setitem(sys.modules, "torch_xla", fake)
    with pytest.raises(ConfigError, match="already imported from '/site-packages/torch_xla"):
        ttjax.compat.install_as_torch_xla()


def test_torch_xla_run_runs_a_script_with_torch_xla_bound(tmp_path: Path, capsys) -> None:
    from ttjax import torch_xla_run

    script = tmp_path / "prog.py"
    script.write_text(
        "import sys, torch, torch_xla, torch_xla.runtime as xr\n"
        "print('devices', xr.global_runtime_device_count(), sys.argv[1:])\n"
        "print((torch.arange(3).to(torch_xla.device()) + 1).cpu().tolist())\n"
    )
    try:
        with warnings.catch_warnings():
            assert torch_xla_run.main([str(script), "--flag"]) == 0
    finally:
        ttjax.compat.uninstall_torch_xla()
    out = capsys.readouterr().out
    assert f"devices {len(jax.devices())} ['--flag']" in out and "[1, 2, 3]" in out
    assert torch_xla_run.main([]) == 2
