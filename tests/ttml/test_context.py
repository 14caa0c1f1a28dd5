"""AutoContext and ParallelismContext: TTML's call order, axis rule, errors word for word, clean failures."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jax
import numpy as np
import pytest

import ttjax
from ttjax import ttml
from ttjax.ttml import mgd
from ttjax.ttml.context import AXES_RULE, assign_axes
from ttjax.ttml.core.distributed import enable_fabric
from ttjax.ttml.errors import (
    AutoContextError,
    MeshGraphDescriptorError,
    ParallelismConfigError,
    ParallelismContextError,
    TopologyMismatchError,
    TrainingConfigError,
)

DC = ttml.DistributedConfig
GRID_4x8 = "bh_galaxy_4_8_line_line.textproto"
REPO = Path(__file__).parents[2]


@pytest.fixture(autouse=True)
def ctx(monkeypatch: pytest.MonkeyPatch):
    for var in mgd.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    c = ttml.autograd.AutoContext.get_instance()
    c.reset()
    yield c
    c.reset()


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """Records every mesh the AutoContext asks the core to open."""
    calls: list[tuple[int, ...]] = []
    real = ttjax.open_mesh_device

    def spy(shape, *args, **kwargs):
        calls.append(tuple(shape))
        return real(shape, *args, **kwargs)

    monkeypatch.setattr(ttjax, "open_mesh_device", spy)
    return calls


def test_singleton() -> None:
    assert ttml.autograd.AutoContext.get_instance() is ttml.autograd.ctx()
    assert ttml.AutoContext is ttml.autograd.AutoContext


def test_ttml_call_order_tp_ddp_2x4(ctx) -> None:
    device = ctx.open_device([2, 4])
    assert ctx.get_device() is device and tuple(device.shape) == (2, 4)
    # 8 devices with no variable set: the T3000 1x8 line, which accepts a 2x4 mesh.
    assert ctx.get_mesh_graph_descriptor().device_topology == (1, 8)
    pc = ctx.initialize_parallelism_context(DC(enable_ddp=True, enable_tp=True))
    assert ctx.get_parallelism_context() is pc and ctx.is_parallelism_context_initialized()
    assert (pc.get_ddp_axis(), pc.get_tp_axis(), pc.get_pp_axis()) == (0, 1, None)
    assert (pc.get_ddp_size(), pc.get_tp_size(), pc.get_pp_size()) == (2, 4, 1)
    assert (pc.is_ddp_enabled(), pc.is_tp_enabled(), pc.is_pp_enabled()) == (True, True, False)
    # Mesh axes are named by role: specs, HLO and ttjax.inspect say 'dp' and 'tp'.
    assert (pc.get_ddp_axis_name(), pc.get_tp_axis_name()) == ("dp", "tp")
    assert pc.jax_mesh.axis_names == ("dp", "tp")
    assert (pc.jax_mesh.devices == device.jax_mesh.devices).all()
    # The names are real jax mesh axes: a psum over the DDP axis adds the 2 groups.
    x = jax.device_put(
        np.arange(8.0).reshape(2, 4),
        jax.sharding.NamedSharding(
            pc.jax_mesh, jax.sharding.PartitionSpec(*pc.jax_mesh.axis_names)
        ),
    )
    summed = jax.shard_map(
        lambda b: jax.lax.psum(b, pc.get_ddp_axis_name()),
        mesh=pc.jax_mesh,
        in_specs=jax.sharding.PartitionSpec(*pc.jax_mesh.axis_names),
        out_specs=jax.sharding.PartitionSpec(None, pc.get_tp_axis_name()),
    )(x)
    np.testing.assert_allclose(
        np.asarray(summed), np.arange(8.0).reshape(2, 4).sum(0, keepdims=True)
    )
    ctx.close_device()
    assert not device.is_open and not ctx.is_device_open()
    assert not ctx.is_parallelism_context_initialized()


def test_errors_word_for_word(ctx) -> None:
    with pytest.raises(ParallelismContextError) as e:
        ctx.get_parallelism_context()
    assert str(e.value).startswith("ParallelismContext is not initialized.\n")
    ctx.open_device([1, 1])
    ctx.initialize_parallelism_context(DC())
    with pytest.raises(ParallelismContextError) as e:
        ctx.initialize_parallelism_context(DC())
    assert str(e.value).startswith("ParallelismContext is already initialized.\n")
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(
        AutoContextError, match=re.escape("open_device was called after the device was created")
    ):
        ctx.open_device([1, 1])
    ctx.close_device()
    with pytest.raises(ParallelismConfigError) as e:
        ctx.open_device([2, 4])
        ctx.initialize_parallelism_context(DC(enable_ddp=True))
    assert str(e.value).startswith(AXES_RULE)
    assert "mesh_shape [2, 4] has 2 dimensions but 1 strategies" in str(e.value)


def test_failed_init_leaves_no_context(ctx) -> None:
    ctx.open_device([2, 4])
    with pytest.raises(ParallelismConfigError):
        ctx.initialize_parallelism_context(DC(enable_ddp=True, enable_tp=True, enable_pp=True))
    assert not ctx.is_parallelism_context_initialized()
    assert (
        ctx.initialize_parallelism_context(DC(enable_ddp=True, enable_tp=True)).get_tp_size() == 4
    )


def test_use_before_open(ctx) -> None:
    with pytest.raises(AutoContextError, match="The device is not open"):
        ctx.get_device()
    with pytest.raises(ParallelismContextError, match="needs an open device"):
        ctx.initialize_parallelism_context(DC(enable_ddp=True))
    with pytest.raises(ParallelismContextError, match="takes a DistributedConfig"):
        ctx.initialize_parallelism_context({"enable_ddp": True})


@pytest.mark.parametrize(
    ("shape", "flags", "axes"),
    [
        ((2, 4), "ddp tp", {"ddp": 0, "tp": 1}),
        ((2, 4), "ddp pp", {"ddp": 0, "pp": 1}),
        ((2, 4), "tp pp", {"tp": 0, "pp": 1}),
        ((2, 2, 2), "ddp tp pp", {"ddp": 0, "tp": 1, "pp": 2}),
        ((1, 8), "ddp", {"ddp": 1}),  # a line takes one strategy, on its long axis
        ((1, 8), "tp", {"tp": 1}),
        ((8, 1), "tp", {"tp": 0}),
        ((1, 8), "ddp tp", {"ddp": 0, "tp": 1}),  # count == rank: plain order, DDP size 1
        ((1, 1), "", {}),
        ((1, 1), "ddp", {"ddp": 0}),
        ((2, 4), "", None),
        ((2, 4), "ddp", None),
        ((2, 4), "tp", None),
        ((2, 4), "ddp tp pp", None),
        ((1, 8), "", None),
        ((1, 8), "ddp tp pp", None),
        ((2, 2, 2), "ddp tp", None),
    ],
)
def test_strategies_vs_mesh_rank(shape, flags, axes) -> None:
    cfg = DC(**{f"enable_{f}": True for f in flags.split()})
    if axes is None:
        with pytest.raises(ParallelismConfigError, match=re.escape(AXES_RULE)):
            assign_axes(shape, cfg)
    else:
        assert assign_axes(shape, cfg) == axes


def test_line_mesh_sizes(ctx) -> None:
    ctx.open_device([1, 8])
    pc = ctx.initialize_parallelism_context(DC(enable_ddp=True))
    assert (pc.get_ddp_axis(), pc.get_ddp_size(), pc.get_tp_size()) == (1, 8, 1)
    assert pc.get_ddp_axis_name() == "dp" and pc.get_tp_axis_name() is None


def test_distributed_config_flags_must_be_bools() -> None:
    with pytest.raises(ParallelismConfigError, match="enable_tp = 1"):
        assign_axes((1, 2), DC(enable_tp=1))


def test_refused_open_leaves_no_mesh_open(ctx, opens, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", GRID_4x8)
    for shape in ([1, 32], [32, 1]):
        with pytest.raises(TopologyMismatchError) as e:
            ctx.open_device(shape)
        assert f"Requested mesh shape: {shape}" in str(e.value)
        assert "MGD device_topology dims: [4, 8]" in str(e.value)
        assert not ctx.is_device_open() and ctx.get_mesh_graph_descriptor() is None
    assert opens == []
    ctx.open_device([4, 8])
    assert opens == [(4, 8)] and ctx.get_mesh_graph_descriptor().device_topology == (4, 8)


def test_galaxy_line_default_opens_4x8(ctx) -> None:
    ctx.open_device([4, 8])  # seed 002's complete example: [4, 8] on the Galaxy 1x32 line
    assert ctx.get_mesh_graph_descriptor().device_topology == (1, 32)
    pc = ctx.initialize_parallelism_context(DC(enable_ddp=True, enable_tp=True))
    assert (pc.get_ddp_size(), pc.get_tp_size()) == (4, 8)


def test_no_default_descriptor_opens_nothing(ctx, opens) -> None:
    with pytest.raises(MeshGraphDescriptorError, match="No default mesh graph descriptor for 4"):
        ctx.open_device([2, 2])
    assert opens == [] and not ctx.is_device_open()
    ctx.open_device([1, 1])  # one chip needs no fabric and no descriptor
    assert ctx.get_mesh_graph_descriptor() is None


def test_n300_is_the_default_for_2_devices(ctx, opens) -> None:
    """As on an N300 board: [1, 2] (and [2, 1]) open on the N300 descriptor."""
    ctx.open_device([1, 2])
    mgd = ctx.get_mesh_graph_descriptor()
    assert mgd.device_topology == (1, 2) and mgd.path.endswith(
        "n300_mesh_graph_descriptor.textproto"
    )


def test_a_mesh_larger_than_the_machine_says_what_fits(ctx, opens) -> None:
    """3x4 and 8x8 on 32 devices' worth of fewer: how many exist and the meshes that fit."""
    from ttjax.errors import MeshShapeError

    have = len(jax.devices())
    for shape in ([8, 8], [have + 1, 1]):
        with pytest.raises(MeshShapeError) as e:
            ctx.open_device(shape)
        msg = str(e.value)
        assert f"needs {shape[0] * shape[1]} devices, and {have} exist here" in msg
        assert "1x1; 1x2, 2x1; 1x8, 2x4, 4x2, 8x1" in msg and "\nfix: " in msg
    assert opens == []


def test_enable_fabric_before_open(ctx, monkeypatch: pytest.MonkeyPatch, opens) -> None:
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_mesh_graph_descriptor.textproto")
    assert enable_fabric(8).device_topology == (2, 4)
    with pytest.raises(TopologyMismatchError, match=re.escape("Requested mesh shape: [1, 8]")):
        ctx.open_device([1, 8])
    assert opens == [] and not ctx.is_device_open()
    ctx.open_device([2, 4])
    with pytest.raises(AutoContextError, match="enable_fabric was called after the device"):
        enable_fabric(8)


@pytest.mark.parametrize("bad", [[8], [2, 0], [2, 4.0], "2x4", [True, 2], [1, 2, 2, 2]])
def test_bad_mesh_shape(ctx, bad) -> None:
    with pytest.raises(
        AutoContextError, match=re.escape("mesh_shape must be a list/tuple of 2 integers")
    ):
        ctx.open_device(bad)


def test_bad_device_ids_open_nothing(ctx, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTJAX_MESH_GRAPH_DESC_PATH", "n300_mesh_graph_descriptor.textproto")
    with pytest.raises(ttjax.MeshShapeError):
        ctx.open_device([1, 2], device_ids=[0, 99])
    assert not ctx.is_device_open()


def test_seed_and_keys(ctx) -> None:
    assert ctx.get_seed() == 5489
    ctx.set_seed(7)
    np.testing.assert_array_equal(ctx.get_rng_key(), jax.random.PRNGKey(7))
    first = [ctx.next_rng_key() for _ in range(2)]
    ctx.set_seed(7)
    again = [ctx.next_rng_key() for _ in range(2)]
    np.testing.assert_array_equal(np.stack(first), np.stack(again))
    assert not np.array_equal(first[0], first[1])
    with pytest.raises(AutoContextError, match="seed -1"):
        ctx.set_seed(-1)
    ctx.reset()
    assert ctx.get_seed() == 5489


def test_validate_batch(ctx) -> None:
    ctx.open_device([2, 4])
    pc = ctx.initialize_parallelism_context(DC(enable_ddp=True, enable_tp=True))
    assert ttml.validate_batch(6, pc) == 3
    assert ttml.validate_batch(7, None) == 7
    with pytest.raises(TrainingConfigError) as e:
        ttml.validate_batch(7, pc)
    assert str(e.value).startswith("batch_size (7) must be divisible by dp_size (2)")
    cfg = ttml.load_config(REPO / "configs" / "training_nanogpt_tp_ddp.yaml")
    assert ttml.validate_batch(cfg, pc) == cfg.training.batch_size // 2
    odd = dataclasses.replace(cfg, training=dataclasses.replace(cfg.training, batch_size=5))
    with pytest.raises(TrainingConfigError, match=r"tp_ddp.yaml: training_config.batch_size"):
        ttml.validate_batch(odd, pc)
