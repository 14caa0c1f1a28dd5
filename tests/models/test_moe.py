"""The ttjax MoE layer against its dense single-device reference on 1x8, 2x4 (EP 4 x DP 2) and
8x4 (EP 8 x TP 4): outputs, routed and dropped tokens, the aux loss; its compiled collectives;
and the errors for a bad config."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import mesh_of

import ttjax as ttnn
from models.moe.config import MoEConfig
from models.moe.layer import MoELayer, random_moe_weights
from models.moe.reference import moe_reference
from ttjax.inspect import inspect

DIM, FFN, EXPERTS, TOKENS = 16, 32, 8, 16  # TOKENS per data device (one GShard group)

# (top_k, capacity_factor): None drops nothing; the others give 4 slots per expert for both k.
CASES = [(1, None), (2, None), (1, 2.0), (2, 1.0)]


@pytest.mark.parametrize(
    "shape,ep_axis,tp_axis",
    [((1, 8), 1, None), ((2, 4), 1, None), ((8, 4), 0, 1)],
    ids=["1x8-ep8", "2x4-ep4-dp2", "8x4-ep8-tp4"],
)
def test_layer_matches_dense_reference(shape, ep_axis, tp_axis):
    mesh = mesh_of(shape)
    for top_k, cf in CASES:
        config = MoEConfig(DIM, FFN, EXPERTS, top_k=top_k, capacity_factor=cf)
        layer = MoELayer(config, mesh, ep_axis=ep_axis, tp_axis=tp_axis)
        weights = random_moe_weights(config, seed=1)
        x = np.random.default_rng(2).standard_normal((layer.groups * TOKENS, DIM), np.float32)
        got = layer(layer.weights_to_device(weights), layer.tokens_to_device(x), aux_loss=True)
        want = moe_reference(weights, x.reshape(layer.groups, TOKENS, DIM), config)
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
        assert np.sum(want.routed) == layer.groups * TOKENS * top_k
        aux = ttnn.to_numpy(ttnn.get_device_tensors(got.aux_loss)[0])
        np.testing.assert_allclose(aux.reshape(()), want.aux_loss, rtol=1e-5, err_msg=case)
        if tp_axis is not None:  # the TP copies of the output agree after the all_reduce
            per = layer.per_device(got.out)
            for i in range(1, shape[tp_axis]):
                np.testing.assert_allclose(np.take(per, i, tp_axis), np.take(per, 0, tp_axis))


@pytest.mark.parametrize(
    "shape,ep_axis,tp_axis", [((2, 4), 1, None), ((8, 4), 0, 1)], ids=["2x4", "8x4-tp"]
)
def test_compiled_layer_has_two_all_to_alls_and_no_token_gather(shape, ep_axis, tp_axis):
    mesh = mesh_of(shape)
    config = MoEConfig(DIM, FFN, EXPERTS, top_k=2, capacity_factor=1.25)
    layer = MoELayer(config, mesh, ep_axis=ep_axis, tp_axis=tp_axis)
    params = layer.weights_to_device(random_moe_weights(config))
    x = layer.tokens_to_device(np.zeros((layer.groups * TOKENS, DIM), np.float32))
    report = inspect(lambda p, x: layer(p, x).out, params, x, name="moe")
    counts = report.collective_counts()
    assert counts["all-to-all"] == 2
    assert counts["all-gather"] == 0
    assert counts["collective-permute"] == 0
    assert counts["all-reduce"] == (1 if tp_axis is not None else 0)  # TP's partial sums
    cap = config.capacity(TOKENS)
    a2a = [c for c in report.collectives if c.kind == "all-to-all"]
    axis_name = mesh.axis_names[ep_axis]
    for c in a2a:  # dispatch and combine: [E, C, D] float32 per device over the ep axis
        assert c.mesh_axes == (axis_name,)
        assert c.bytes == EXPERTS * cap * DIM * 4
    ep = shape[ep_axis]
    assert report.bytes_per_device >= 2 * EXPERTS * cap * DIM * 4 * (ep - 1) / ep


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
