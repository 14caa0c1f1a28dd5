"""TT-NN's conv and pooling family (ttjax.conv) against torch.nn.functional, per device, at tiny
sizes: conv2d's argument forms, return forms and configs, a data-parallel conv over a split batch,
conv1d, max_pool2d, global and adaptive pools, and the errors TT-NN raises."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _op_testing import device_arrays
from conftest import mesh_of

import ttjax as ttnn

RNG = np.random.default_rng(26)


def _rand(*shape: int) -> torch.Tensor:
    return torch.from_numpy(RNG.standard_normal(shape).astype(np.float32))


def _nhwc_flat(x: torch.Tensor) -> torch.Tensor:
    n, c, h, w = x.shape
    return x.permute(0, 2, 3, 1).reshape(1, 1, n * h * w, c)


def _conv(mesh, x, w, b=None, *, flat=True, **kw):
    """ttnn.conv2d of torch NCHW ``x`` and OIHW ``w`` (host weights, float32)."""
    n, c, h, wd = x.shape
    src = _nhwc_flat(x) if flat else x.permute(0, 2, 3, 1)
    t = ttnn.from_torch(src, dtype=ttnn.float32, device=mesh)
    bias = None if b is None else ttnn.from_torch(b.reshape(1, 1, 1, -1), dtype=ttnn.float32)
    return ttnn.conv2d(
        input_tensor=t, weight_tensor=ttnn.from_torch(w, dtype=ttnn.float32), device=mesh,
        in_channels=c, out_channels=w.shape[0], batch_size=n, input_height=h, input_width=wd,
        bias_tensor=bias, **kw,
    )  # fmt: skip


def _same_on_every_device(t: ttnn.Tensor, want: np.ndarray, tol: float = 1e-4) -> None:
    for got in device_arrays(t).values():
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "k, stride, padding, dilation, groups, flat",
    [
        ((3, 3), (1, 1), (1, 1), (1, 1), 1, True),  # a ResNet-style 3x3
        ((3, 2), (2, 1), (1, 0, 2, 1), (2, 1), 1, False),  # 4-tuple padding, dilation, NHWC input
        ((3, 3), (1, 2), (0, 1), (1, 1), 2, True),  # grouped
        ((3, 3), (1, 1), (1, 1), (1, 1), 4, True),  # depthwise
        ((1, 1), (1, 1), (0, 0), (1, 1), 1, True),  # 1x1: TT-NN runs it as a matmul
    ],
)
def test_conv2d_matches_torch(k, stride, padding, dilation, groups, flat):
    n, c, h, w, oc = 2, 4, 7, 6, 8
    x, wt, b = _rand(n, c, h, w), _rand(oc, c // groups, *k), _rand(oc)
    mesh = mesh_of((1, 2))
    out, (oh, ow) = _conv(
        mesh, x, wt, b, flat=flat, kernel_size=k, stride=stride, padding=padding,
        dilation=dilation, groups=groups, return_output_dim=True,
    )  # fmt: skip
    p = padding if len(padding) == 4 else (padding[0], padding[0], padding[1], padding[1])
    xp = F.pad(x, (p[2], p[3], p[0], p[1]))
    want = F.conv2d(xp, wt, b, stride=stride, dilation=dilation, groups=groups)
    assert (oh, ow) == tuple(want.shape[2:])
    assert out.shape == (1, 1, n * oh * ow, oc) and out.layout == ttnn.TILE_LAYOUT
    assert out.dtype == ttnn.float32
    _same_on_every_device(out, _nhwc_flat(want).numpy())


def test_data_parallel_conv2d_splits_the_batch_over_the_mesh():
    """A [8, H, W, C] batch split over a 2x4 mesh: each device convolves its image with the
    replicated weights; the composed output is torch's conv of the whole batch."""
    mesh = mesh_of((2, 4))
    x, wt, b = _rand(8, 3, 6, 6), _rand(5, 3, 3, 3), _rand(5)
    nhwc = x.permute(0, 2, 3, 1)
    t = ttnn.from_torch(nhwc, dtype=ttnn.float32, device=mesh,
                        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))  # fmt: skip
    out = ttnn.conv2d(
        input_tensor=t, weight_tensor=ttnn.from_torch(wt, dtype=ttnn.float32), device=mesh,
        in_channels=3, out_channels=5, batch_size=1, input_height=6, input_width=6,
        kernel_size=[3, 3], stride=[2, 2], padding=[1, 1],
        bias_tensor=ttnn.from_torch(b.reshape(1, 1, 1, 5), dtype=ttnn.float32),
    )  # fmt: skip
    want = F.conv2d(x, wt, b, stride=2, padding=1)
    per_image = [_nhwc_flat(want[i : i + 1]).numpy() for i in range(8)]
    got = device_arrays(out)
    assert len(got) == 8
    for i, arr in enumerate(got.values()):
        np.testing.assert_allclose(arr, per_image[i], rtol=1e-4, atol=1e-4)
    assert out.placements[0].is_shard() or out.placements[1].is_shard()
    whole = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=2))
    np.testing.assert_allclose(whole.numpy(), _nhwc_flat(want).numpy(), rtol=1e-4, atol=1e-4)


def test_tensor_parallel_conv2d_keeps_each_devices_host_weight_shard():
    """Host weights and bias split by output channel over the mesh (tt_dit's Conv2d: from_torch
    with a ShardTensor2dMesh mapper, on host): each device convolves with its own shard, so the
    gathered output is torch's whole conv (not device 0's shard everywhere)."""
    mesh = mesh_of((1, 4))
    x, wt, b = _rand(1, 3, 5, 5), _rand(8, 3, 3, 3), _rand(8)
    t = ttnn.from_torch(x.permute(0, 2, 3, 1), dtype=ttnn.float32, device=mesh)
    split = ttnn.ShardTensor2dMesh(mesh, mesh_shape=(1, 4), dims=(None, 0))
    out = ttnn.conv2d(
        input_tensor=t, device=mesh, in_channels=3, out_channels=2, batch_size=1,
        input_height=5, input_width=5, kernel_size=[3, 3], padding=[1, 1],
        weight_tensor=ttnn.from_torch(wt, dtype=ttnn.float32, mesh_mapper=split),
        bias_tensor=ttnn.from_torch(b.reshape(1, 1, 1, 8), dtype=ttnn.float32,
                                    mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (1, 4), (None, 3))),
    )  # fmt: skip
    whole = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    want = _nhwc_flat(F.conv2d(x, wt, b, padding=1)).numpy()
    np.testing.assert_allclose(whole.numpy(), want, rtol=1e-4, atol=1e-4)


def test_prepared_weights_and_the_returned_ones_give_the_same_conv():
    mesh = mesh_of((1, 2))
    x, wt, b = _rand(1, 4, 5, 5), _rand(6, 2, 3, 3), _rand(6)
    args = dict(in_channels=4, out_channels=6, batch_size=1, input_height=5, input_width=5,
                kernel_size=[3, 3], stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=2,
                device=mesh)  # fmt: skip
    wd = ttnn.prepare_conv_weights(
        weight_tensor=ttnn.from_torch(wt, dtype=ttnn.float32),
        input_memory_config=ttnn.DRAM_MEMORY_CONFIG, input_layout=ttnn.ROW_MAJOR_LAYOUT,
        weights_format="OIHW", has_bias=True, input_dtype=ttnn.float32, **args,
    )  # fmt: skip
    bd = ttnn.prepare_conv_bias(
        bias_tensor=ttnn.from_torch(b.reshape(1, 1, 1, 6), dtype=ttnn.float32),
        input_memory_config=ttnn.DRAM_MEMORY_CONFIG, input_layout=ttnn.ROW_MAJOR_LAYOUT,
        input_dtype=ttnn.float32, **args,
    )  # fmt: skip
    assert wd.shape == (1, 1, 3 * 3 * 4, 6) and wd.layout == ttnn.TILE_LAYOUT
    assert ttnn.is_tensor_storage_on_device(wd) and bd.shape == (1, 1, 1, 6)
    want = _nhwc_flat(F.conv2d(x, wt, b, padding=1, groups=2)).numpy()
    xt = ttnn.from_torch(_nhwc_flat(x), dtype=ttnn.float32, device=mesh)
    conv = {k: v for k, v in args.items() if k not in ("in_channels",)}
    out, (w2, b2) = ttnn.conv2d(
        input_tensor=xt, weight_tensor=wd, bias_tensor=bd, in_channels=4,
        return_weights_and_bias=True, **conv,
    )  # fmt: skip
    _same_on_every_device(out, want)
    again = ttnn.conv2d(input_tensor=xt, weight_tensor=w2, bias_tensor=b2, in_channels=4, **conv)
    _same_on_every_device(again, want)


def test_conv2d_config_fuses_the_activation_and_sets_layout_and_weight_dtype():
    mesh = mesh_of((1, 1))
    x, wt = _rand(1, 3, 6, 6), _rand(4, 3, 3, 3)
    relu = ttnn.Conv2dConfig(
        activation=ttnn.UnaryWithParam(ttnn.UnaryOpType.RELU), output_layout=ttnn.ROW_MAJOR_LAYOUT
    )
    out = _conv(mesh, x, wt, kernel_size=(3, 3), conv_config=relu)
    assert out.layout == ttnn.ROW_MAJOR_LAYOUT
    _same_on_every_device(out, _nhwc_flat(F.relu(F.conv2d(x, wt))).numpy())
    pair = ttnn.Conv2dConfig(activation=[ttnn.UnaryOpType.GELU, True])
    out = _conv(mesh, x, wt, kernel_size=(3, 3), conv_config=pair)
    want = F.gelu(F.conv2d(x, wt), approximate="tanh")
    _same_on_every_device(out, _nhwc_flat(want).numpy(), tol=2e-3)
    bf8 = ttnn.Conv2dConfig(weights_dtype=ttnn.bfloat8_b)
    out, (wd, _) = _conv(mesh, x, wt, kernel_size=(3, 3), conv_config=bf8,
                         return_weights_and_bias=True)  # fmt: skip
    assert wd.dtype == ttnn.bfloat8_b
    exact = _nhwc_flat(F.conv2d(x, wt)).numpy()
    for got in device_arrays(out).values():
        assert 0 < np.abs(got - exact).max() < 0.1 * np.abs(exact).max()


def test_slice_configs_change_no_values_and_too_many_slices_are_refused():
    mesh = mesh_of((1, 1))
    x, wt = _rand(1, 3, 8, 8), _rand(4, 3, 3, 3)
    want = _nhwc_flat(F.conv2d(x, wt, padding=1)).numpy()
    for sc in (
        ttnn.Conv2dSliceConfig(slice_type=ttnn.Conv2dDRAMSliceWidth, num_slices=4),
        ttnn.Conv2dSliceConfig(slice_type=ttnn.Conv2dDRAMSliceHeight, num_slices=2),
        ttnn.Conv2dL1FullSliceConfig,
    ):
        out = _conv(mesh, x, wt, kernel_size=(3, 3), padding=(1, 1), slice_config=sc)
        _same_on_every_device(out, want)
        dram = sc.slice_type is not ttnn.Conv2dL1Full
        assert out.memory_config().buffer_type == (
            ttnn.BufferType.DRAM if dram else ttnn.BufferType.L1
        )
    many = ttnn.Conv2dSliceConfig(slice_type=ttnn.Conv2dDRAMSliceWidth, num_slices=9)
    with pytest.raises(ttnn.ConfigError, match="Number of slices 9 should be less or equal"):
        _conv(mesh, x, wt, kernel_size=(3, 3), padding=(1, 1), slice_config=many)


def test_configs_are_plain_structs_checked_when_the_conv_runs():
    cfg = ttnn.Conv2dConfig(act_block_h_override=30)  # built freely, as TT-NN's struct
    cfg.activation = "relu"
    assert ttnn.Conv1dConfig is ttnn.Conv2dConfig
    with pytest.raises(TypeError):
        ttnn.Conv2dConfig(ttnn.bfloat16)  # keyword only, as TT-NN's binding
    mesh = mesh_of((1, 1))
    x, wt = _rand(1, 3, 4, 4), _rand(2, 3, 3, 3)
    with pytest.raises(ttnn.ConfigError, match="multiple of 32") as e:
        _conv(mesh, x, wt, kernel_size=(3, 3), conv_config=cfg)
    assert "fix:" in str(e.value)
    cfg.act_block_h_override = 32
    with pytest.raises(ttnn.ConfigError, match="takes a UnaryWithParam"):
        _conv(mesh, x, wt, kernel_size=(3, 3), conv_config=cfg)
    over = ttnn.Conv2dConfig(override_sharding_config=True)
    with pytest.raises(ttnn.ConfigError, match="core_grid must be set as well"):
        _conv(mesh, x, wt, kernel_size=(3, 3), conv_config=over)


def test_conv2d_errors_name_the_bad_value_with_a_fix():
    mesh = mesh_of((1, 1))
    x, wt = _rand(1, 3, 4, 4), _rand(2, 3, 3, 3)
    with pytest.raises(ttnn.ShapeMismatchError, match="expected \\[2, 3, 2, 2\\]"):
        _conv(mesh, x, wt, kernel_size=(2, 2))
    t = ttnn.from_torch(_nhwc_flat(x), dtype=ttnn.float32, device=mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match="input_height=5") as e:
        ttnn.conv2d(input_tensor=t, weight_tensor=ttnn.from_torch(wt), device=mesh,
                    in_channels=3, out_channels=2, batch_size=1, input_height=5, input_width=4,
                    kernel_size=[3, 3])  # fmt: skip
    assert "fix:" in str(e.value)
    with pytest.raises(ttnn.ConfigError, match="divisible by groups=2"):
        _conv(mesh, x, _rand(2, 1, 3, 3), kernel_size=(3, 3), groups=2)
    with pytest.raises(ttnn.LayoutError, match="Row Major if output dtype is BFloat8_B"):
        _conv(mesh, x, wt, kernel_size=(3, 3), dtype=ttnn.bfloat8_b,
              conv_config=ttnn.Conv2dConfig(output_layout=ttnn.ROW_MAJOR_LAYOUT))  # fmt: skip
    with pytest.raises(ttnn.TTJaxError, match="is not a MeshDevice"):
        _conv(None, x, wt, kernel_size=(3, 3))


def test_get_conv_output_dim_is_torchs_output_size():
    for size, k, s, p, d in [(224, 7, 2, 3, 1), (9, 3, 1, 0, 2), (10, 4, 3, 1, 1)]:
        out = F.conv2d(torch.zeros(1, 1, size, size), torch.zeros(1, 1, k, k), stride=s,
                       padding=p, dilation=d)  # fmt: skip
        assert ttnn.get_conv_output_dim(size, k, s, p, d) == out.shape[-1]


def test_conv1d_matches_torch():
    mesh = mesh_of((1, 2))
    x, wt, b = _rand(2, 4, 10), _rand(6, 2, 3), _rand(6)
    t = ttnn.from_torch(x.permute(0, 2, 1), dtype=ttnn.float32, device=mesh)  # [N, L, C]
    out, length = ttnn.conv1d(
        input_tensor=t, weight_tensor=ttnn.from_torch(wt.unsqueeze(-1), dtype=ttnn.float32),
        device=mesh, in_channels=4, out_channels=6, batch_size=2, input_length=10,
        kernel_size=3, stride=2, padding=(2, 1), groups=2,
        bias_tensor=ttnn.from_torch(b.reshape(1, 1, 1, 6), dtype=ttnn.float32),
        return_output_dim=True,
    )  # fmt: skip
    want = F.conv1d(F.pad(x, (2, 1)), wt, b, stride=2, groups=2)
    assert length == want.shape[-1]
    _same_on_every_device(out, want.permute(0, 2, 1).reshape(1, 1, -1, 6).numpy())


def test_conv1d_takes_torchs_3d_weight_replicated_over_the_mesh():
    """torch's Conv1d weight [out, in, k] as it is, a host tensor replicated over the mesh
    (whisper's encoder convs): TT-NN reads it as [out, in, k, 1] for a 1-D conv
    (``prepare_conv2d_weights.cpp``)."""
    mesh = mesh_of((1, 2))
    x, wt = _rand(2, 4, 12), _rand(6, 4, 3)
    t = ttnn.from_torch(x.permute(0, 2, 1), dtype=ttnn.float32, device=mesh)  # [N, L, C]
    host_w = ttnn.from_torch(wt, dtype=ttnn.float32, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))
    out = ttnn.conv1d(
        input_tensor=t, weight_tensor=host_w, device=mesh, in_channels=4, out_channels=6,
        batch_size=2, input_length=12, kernel_size=3, padding=1,
    )  # fmt: skip
    want = F.conv1d(x, wt, padding=1)
    _same_on_every_device(out, want.permute(0, 2, 1).reshape(1, 1, -1, 6).numpy())


@pytest.mark.parametrize(
    "k, stride, padding, dilation, ceil_mode",
    [((3, 3), (2, 2), (1, 1), (1, 1), False), ((2, 3), (2, 1), (1, 0), (2, 1), True)],
)
def test_max_pool2d_matches_torch(k, stride, padding, dilation, ceil_mode):
    n, c, h, w = 2, 8, 9, 7
    x = _rand(n, c, h, w)
    mesh = mesh_of((1, 2))
    t = ttnn.from_torch(_nhwc_flat(x), dtype=ttnn.bfloat16, device=mesh)
    y, idx = ttnn.max_pool2d(
        t, n, h, w, c, k, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True
    )
    xb = x.to(torch.bfloat16).float()
    want, wi = F.max_pool2d(xb, k, stride, padding, dilation, ceil_mode=ceil_mode,
                            return_indices=True)  # fmt: skip
    assert y.layout == ttnn.ROW_MAJOR_LAYOUT and y.dtype == ttnn.bfloat16
    assert idx.dtype == ttnn.uint16
    _same_on_every_device(y, _nhwc_flat(want).numpy(), tol=0)
    _same_on_every_device(idx, _nhwc_flat(wi).numpy(), tol=0)


def test_max_pool2d_rejects_what_tt_nn_rejects():
    mesh = mesh_of((1, 1))
    t = ttnn.from_torch(np.zeros((1, 1, 60, 8), np.float32), device=mesh)
    with pytest.raises(ttnn.ShapeMismatchError, match="does not match expected shape") as e:
        ttnn.max_pool2d(t, 1, 8, 8, 8, [2, 2], [2, 2], [0, 0], [1, 1])
    assert "fix:" in str(e.value)
    t = ttnn.from_torch(np.zeros((1, 1, 64, 8), np.float32), device=mesh)
    with pytest.raises(ttnn.LayoutError, match="not supported with ROW_MAJOR"):
        ttnn.max_pool2d(t, 1, 8, 8, 8, [2, 2], [2, 2], [0, 0], [1, 1], dtype=ttnn.bfloat8_b)


def test_global_and_adaptive_pools_match_torch():
    mesh = mesh_of((1, 2))
    x = _rand(2, 8, 5, 7)
    nhwc = ttnn.from_torch(x.permute(0, 2, 3, 1), dtype=ttnn.float32, device=mesh)
    g = ttnn.global_avg_pool2d(nhwc)
    assert g.shape == (2, 1, 1, 8)
    _same_on_every_device(g, x.mean(dim=(2, 3)).reshape(2, 1, 1, 8).numpy())
    flat = ttnn.from_torch(_nhwc_flat(x), dtype=ttnn.float32, device=mesh)
    # 5 -> 3 (windows 2, 3, 2: padded to 3, stride 2) and 7 -> 3 (uniform windows of 3)
    a = ttnn.adaptive_avg_pool2d(flat, 2, 5, 7, 8, [3, 3])
    assert a.dtype == ttnn.bfloat16  # TT-NN's avg_pool2d default, which it calls
    _same_on_every_device(a, _nhwc_flat(F.adaptive_avg_pool2d(x, (3, 3))).numpy(), tol=1e-2)
    m = ttnn.adaptive_max_pool2d(flat, 2, 5, 7, 8, [3, 3])
    want = F.adaptive_max_pool2d(x.to(torch.bfloat16).float(), (3, 3))
    _same_on_every_device(m, _nhwc_flat(want).numpy(), tol=0)
    with pytest.raises(ttnn.ConfigError, match="Adaptive pooling configuration not supported"):
        ttnn.adaptive_avg_pool2d(flat, 2, 5, 7, 8, [3, 5])  # width 7 -> 5: windows 2,2,3,2,2


@pytest.mark.parametrize("mode, scale", [("nearest", 2), ("nearest", (2, 3)), ("bilinear", (2, 2))])
def test_upsample_matches_torch(mode, scale):
    mesh = mesh_of((1, 2))
    x = _rand(2, 8, 3, 5).to(torch.bfloat16).float()
    t = ttnn.from_torch(x.permute(0, 2, 3, 1), dtype=ttnn.bfloat16, device=mesh)
    y = ttnn.upsample(t, scale, mode=mode)
    sf = (scale, scale) if isinstance(scale, int) else scale
    want = F.interpolate(x, scale_factor=sf, mode=mode).permute(0, 2, 3, 1)
    assert y.shape == tuple(want.shape)
    _same_on_every_device(y, want.to(torch.bfloat16).float().numpy(), tol=1e-2)
    with pytest.raises(ttnn.ConfigError, match="only supports bilinear or nearest"):
        ttnn.upsample(t, 2, mode="bicubic")


def test_conv2d_takes_a_host_input_with_channels_padded_past_in_channels():
    """TT-NN pads 3 input channels to 16 (weights of zeros there): the padding never counts."""
    mesh = mesh_of((1, 2))
    x, wt = _rand(1, 3, 5, 5), _rand(4, 3, 3, 3)
    padded = torch.cat([_nhwc_flat(x), torch.full((1, 1, 25, 13), 7.0)], dim=-1)
    out = ttnn.conv2d(
        input_tensor=ttnn.from_torch(padded, dtype=ttnn.float32), weight_tensor=ttnn.from_torch(wt),
        device=mesh, in_channels=3, out_channels=4, batch_size=1, input_height=5, input_width=5,
        kernel_size=[3, 3], padding=[1, 1], dtype=ttnn.float32,
    )  # fmt: skip
    _same_on_every_device(out, _nhwc_flat(F.conv2d(x, wt, padding=1)).numpy(), tol=1e-4)


def test_conv2d_pads_a_weight_of_fewer_input_channels_with_zeros():
    """segformer pads 3 image channels to 8 on device and passes in_channels=8 with the 3-channel
    weight: TT-NN pads the weight's channels with zeros, so channels 3..7 never count."""
    mesh = mesh_of((1, 2))
    x, wt = _rand(1, 8, 5, 5), _rand(4, 3, 3, 3)
    kw = dict(in_channels=8, out_channels=4, batch_size=1, input_height=5, input_width=5,
              kernel_size=[3, 3], padding=[1, 1], device=mesh)  # fmt: skip
    host_w = ttnn.from_torch(wt)
    out = ttnn.conv2d(input_tensor=ttnn.from_torch(_nhwc_flat(x), dtype=ttnn.float32),
                      weight_tensor=host_w, dtype=ttnn.float32, **kw)  # fmt: skip
    _same_on_every_device(out, _nhwc_flat(F.conv2d(x[:, :3], wt, padding=1)).numpy(), tol=1e-4)
    with pytest.raises(ttnn.ShapeMismatchError, match="does not match"):
        ttnn.conv2d(input_tensor=ttnn.from_torch(_nhwc_flat(x)), weight_tensor=host_w,
                    **dict(kw, in_channels=2))  # fmt: skip


@pytest.mark.parametrize(
    "k, stride, padding, out_pad, dilation, groups",
    [((2, 2), (2, 2), (0, 0), (0, 0), (1, 1), 1), ((3, 3), (2, 1), (1, 0), (1, 0), (1, 2), 2)],
)
def test_conv_transpose2d_matches_torch(k, stride, padding, out_pad, dilation, groups):
    mesh = mesh_of((1, 2))
    n, c, h, w, oc = 2, 4, 4, 5, 6
    x, wt, b = _rand(n, c, h, w), _rand(c, oc // groups, *k), _rand(oc)
    out, (oh, ow) = ttnn.conv_transpose2d(
        input_tensor=ttnn.from_torch(_nhwc_flat(x), dtype=ttnn.float32, device=mesh),
        weight_tensor=ttnn.from_torch(wt, dtype=ttnn.float32), device=mesh, in_channels=c,
        out_channels=oc, batch_size=n, input_height=h, input_width=w, kernel_size=k,
        stride=stride, padding=padding, output_padding=out_pad, dilation=dilation, groups=groups,
        bias_tensor=ttnn.from_torch(b.reshape(1, 1, 1, oc), dtype=ttnn.float32),
        return_output_dim=True,
    )  # fmt: skip
    want = F.conv_transpose2d(x, wt, b, stride, padding, out_pad, groups, dilation)
    assert (oh, ow) == tuple(want.shape[2:])
    _same_on_every_device(out, _nhwc_flat(want).numpy())
