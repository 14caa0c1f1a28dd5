"""The ttjax MoE layer against its dense single-device reference on 1x8, 2x4 (EP 4 x DP 2) and
8x4 (EP 8 x TP 4): outputs, routed and dropped tokens, the aux loss; the compiled program's
collectives; and the errors for a bad config."""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from conftest import FAST_COMPILE, mesh_of

import ttjax as ttnn
from models.moe.config import MoEConfig
from models.moe.layer import MoELayer, random_moe_weights
from models.moe.picture import RoutingCounts, routing_table
from models.moe.reference import moe_reference
from ttjax.inspect import report_compiled

DIM, FFN, EXPERTS, TOKENS, GROUPS = 16, 32, 8, 16, 8  # TOKENS per data device (a GShard group)
# (top_k, capacity_factor): None drops nothing; the others give 4 slots per expert for both k.
CASES = [(1, None), (2, None), (1, 2.0), (2, 1.0)]


def _config(top_k, cf):
    return MoEConfig(DIM, FFN, EXPERTS, top_k=top_k, capacity_factor=cf)


@functools.cache
def _inputs():
    weights = random_moe_weights(_config(1, None), seed=1)
    x = np.random.default_rng(2).standard_normal((GROUPS, TOKENS, DIM), np.float32)
    fn = jax.jit(lambda w, x: [moe_reference(w, x, _config(*case)) for case in CASES])
    return weights, x, jax.device_get(fn(weights, x))


@pytest.mark.parametrize(
    "shape,ep_axis,tp_axis",
    [
        pytest.param((1, 8), 1, None, marks=pytest.mark.slow),
        ((2, 4), 1, None),
        pytest.param((8, 4), 0, 1, marks=pytest.mark.slow),
    ],
    ids=["1x8-ep8", "2x4-ep4-dp2", "8x4-ep8-tp4"],
)
def test_layer_matches_dense_reference(shape, ep_axis, tp_axis):
    mesh = mesh_of(shape)
    weights, x, wants = _inputs()
    layers = [MoELayer(_config(*c), mesh, ep_axis=ep_axis, tp_axis=tp_axis) for c in CASES]
    assert layers[0].groups == GROUPS
    params = [layer.weights_to_device(weights) for layer in layers]
    tokens = layers[0].tokens_to_device(x.reshape(-1, DIM))

    def run(params, tokens):
        return [layer(p, tokens, aux_loss=True) for layer, p in zip(layers, params)]

    compiled = jax.jit(run).lower(params, tokens).compile(FAST_COMPILE)

    # Two all_to_alls per layer (dispatch, combine) over the ep axis; tokens are never gathered.
    report = report_compiled(compiled, mesh=mesh)
    counts = report.collective_counts()
    assert counts["all-to-all"] == 2 * len(CASES)
    assert counts["all-gather"] == counts["collective-permute"] == counts["reduce-scatter"] == 0
    for c in report.collectives:
        if c.kind == "all-to-all":  # [E, C, D] float32 per device, C = 16 or 4 slots
            assert c.mesh_axes == (mesh.axis_names[ep_axis],)
            assert c.bytes in (EXPERTS * DIM * 4 * 16, EXPERTS * DIM * 4 * 4)
        else:  # TP's partial sums and the aux loss's [2, E] statistics
            assert c.kind == "all-reduce"

    for (top_k, cf), layer, got, want in zip(CASES, layers, compiled(params, tokens), wants):
        case = f"top-{top_k}, capacity_factor={cf}"
        np.testing.assert_allclose(
            layer.per_group(got.out), want.out, rtol=1e-5, atol=1e-5, err_msg=case
        )
        # the same choices routed, and the same ones kept (so the same ones dropped)
        np.testing.assert_array_equal(layer.per_group(got.kept_mask), want.kept_mask, case)
        np.testing.assert_array_equal(layer.per_group(got.routed)[:, 0], want.routed, case)
        np.testing.assert_array_equal(layer.per_group(got.kept)[:, 0], want.kept, case)
        dropped = int(np.sum(want.routed - want.kept))
        assert (dropped == 0) == (cf is None), (case, dropped)
        assert np.sum(want.routed) == GROUPS * TOKENS * top_k
        aux = ttnn.to_numpy(ttnn.get_device_tensors(got.aux_loss)[0])
        np.testing.assert_allclose(aux.reshape(()), want.aux_loss, rtol=1e-5, err_msg=case)
        if tp_axis is not None:  # the TP copies of the output agree after the all_reduce
            per = layer.per_device(got.out)
            for i in range(1, shape[tp_axis]):
                np.testing.assert_allclose(np.take(per, i, tp_axis), np.take(per, 0, tp_axis))


def test_bad_config_raises_ttjax_errors_naming_the_value():
    mesh = mesh_of((1, 8))
    with pytest.raises(ttnn.ShardingError, match=r"n_experts=6 .*expert-parallel size 8"):
        MoELayer(MoEConfig(DIM, FFN, 6), mesh, ep_axis=1)
    with pytest.raises(ttnn.ConfigError, match=r"top_k=3 is larger than n_experts=2"):
        MoEConfig(DIM, FFN, 2, top_k=3)
    for cf in (0, -1.5):
        with pytest.raises(ttnn.ConfigError, match=rf"capacity_factor={cf}\b.*> 0") as e:
            MoEConfig(DIM, FFN, 8, capacity_factor=cf)
        assert "fix:" in str(e.value)
    with pytest.raises(ttnn.ShardingError, match=r"ffn_dim=30 .*tensor-parallel size 4"):
        MoELayer(MoEConfig(DIM, 30, 8), mesh_of((8, 4)), ep_axis=0, tp_axis=1)
    with pytest.raises(ValueError, match=r"ep_axis=2"):  # ttjax errors are ValueErrors too
        MoELayer(MoEConfig(DIM, FFN, 8), mesh, ep_axis=2)


def test_routing_counts_name_devices_and_experts():
    """The picture's numbers: owner devices of tokens (groups) and of experts, drops, spread."""
    galaxy = MoELayer(_config(2, 1.0), mesh_of((8, 4)), ep_axis=0, tp_axis=1)
    assert galaxy.group_coords() == [(i, 0) for i in range(8)]  # first TP copy of each row
    assert [galaxy.expert_owner(e) for e in range(EXPERTS)] == list(range(8))
    t3000 = MoELayer(_config(2, 1.0), mesh_of((2, 4)), ep_axis=1)
    assert t3000.group_coords()[:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert [t3000.expert_owner(e) for e in range(EXPERTS)] == [0, 0, 1, 1, 2, 2, 3, 3]
    routed = np.tile(np.arange(EXPERTS), (GROUPS, 1))
    kept = np.minimum(routed, 4)
    counts = RoutingCounts.from_arrays(t3000, routed, kept)
    np.testing.assert_array_equal(counts.per_expert, 8 * np.minimum(np.arange(8), 4))
    assert counts.dropped.sum() == 8 * (1 + 2 + 3)
    assert counts.spread == pytest.approx(np.std(np.arange(8)) / np.mean(np.arange(8)))
    table = routing_table(counts)
    assert table.row_count == GROUPS + 1 and len(table.columns) == EXPERTS + 2
    assert table.columns[3].header == "e2@ep1"
