"""ttnn.experimental.conv3d against torch.nn.functional.conv3d at tiny sizes: the weight in
TT-NN's C_in-blocked row order, zeros and replicate padding, strides, and TT-NN's refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _op_testing import device_arrays
from conftest import mesh_of

import ttjax as ttnn

RNG = np.random.default_rng(33)


def _rand(*shape: int) -> torch.Tensor:
    return torch.from_numpy(RNG.standard_normal(shape).astype(np.float32))


def _blocked_weight(w: torch.Tensor, c_in_block: int) -> torch.Tensor:
    """torch's [C_out, C_in, kT, kH, kW] as rows (block, kt, kh, kw, c) x C_out."""
    c_out, c_in, kt, kh, kw = w.shape
    block = c_in_block or c_in
    rows = w.permute(2, 3, 4, 1, 0).reshape(kt, kh, kw, c_in // block, block, c_out)
    return rows.permute(3, 0, 1, 2, 4, 5).reshape(-1, c_out)


@pytest.mark.parametrize(
    "c_in, c_out, k, stride, padding, mode, c_in_block",
    [
        (32, 32, (3, 3, 3), (1, 1, 1), (0, 1, 1), "zeros", 0),  # a VAE 3x3x3, causal T
        (64, 32, (3, 3, 3), (1, 1, 1), (0, 1, 1), "replicate", 32),  # Mochi's padding, 2 blocks
        (32, 64, (1, 3, 3), (1, 2, 2), (0, 1, 1), "zeros", 16),  # a strided spatial downsample
        (16, 32, (1, 1, 1), (1, 1, 1), (0, 0, 0), "zeros", 0),  # 1x1x1: a per-voxel linear
    ],
)
def test_conv3d_matches_torch(c_in, c_out, k, stride, padding, mode, c_in_block):
    mesh = mesh_of((1, 2))
    t, h, w = 4, 5, 6
    x, wt, b = _rand(1, c_in, t, h, w), _rand(c_out, c_in, *k) * 0.2, _rand(c_out)
    cfg = ttnn.Conv3dConfig(output_channels=c_out, kernel_size=k, stride=stride,
                            padding=padding, padding_mode=mode, C_in_block=c_in_block,
                            compute_with_storage_grid_size=(2, 2))  # fmt: skip
    xt = ttnn.from_torch(x.permute(0, 2, 3, 4, 1), dtype=ttnn.bfloat16, device=mesh,
                         layout=ttnn.ROW_MAJOR_LAYOUT)  # fmt: skip
    wtt = ttnn.from_torch(_blocked_weight(wt, c_in_block), dtype=ttnn.bfloat16, device=mesh,
                          layout=ttnn.TILE_LAYOUT)  # fmt: skip
    bt = ttnn.from_torch(
        b.reshape(1, -1), dtype=ttnn.bfloat16, device=mesh, layout=ttnn.TILE_LAYOUT
    )
    y = ttnn.experimental.conv3d(input_tensor=xt, weight_tensor=wtt, bias_tensor=bt, config=cfg)
    pt, ph, pw = padding
    if mode == "replicate":
        ref = F.conv3d(F.pad(x, (pw, pw, ph, ph, pt, pt), mode="replicate"), wt, b, stride)
    else:
        ref = F.conv3d(x, wt, b, stride, padding)
    want = ref.permute(0, 2, 3, 4, 1).numpy()
    assert tuple(y.shape) == want.shape and y.layout == ttnn.ROW_MAJOR_LAYOUT
    assert y.dtype == ttnn.bfloat16
    for got in device_arrays(y).values():
        np.testing.assert_allclose(got.astype(np.float32), want, atol=0.05 * np.abs(want).max())
        assert np.corrcoef(got.ravel(), want.ravel())[0, 1] > 0.9999


def test_conv3d_blocking_is_read_from_the_config():
    """A weight blocked by 16 read with C_in_block=32 mixes the channels: the rows follow the
    config, as TT-NN's kernel reads them."""
    mesh = mesh_of((1, 1))
    x, wt = _rand(1, 32, 2, 3, 3), _rand(32, 32, 1, 3, 3)
    xt = ttnn.from_torch(x.permute(0, 2, 3, 4, 1), dtype=ttnn.bfloat16, device=mesh)
    rows = ttnn.from_torch(_blocked_weight(wt, 16), dtype=ttnn.bfloat16, device=mesh,
                           layout=ttnn.TILE_LAYOUT)  # fmt: skip
    want = F.conv3d(x, wt, None, 1, (0, 1, 1)).permute(0, 2, 3, 4, 1).numpy().ravel()

    def run(block):
        cfg = ttnn.Conv3dConfig(output_channels=32, kernel_size=(1, 3, 3), stride=(1, 1, 1),
                                padding=(0, 1, 1), C_in_block=block,
                                compute_with_storage_grid_size=(2, 1))  # fmt: skip
        out = ttnn.experimental.conv3d(input_tensor=xt, weight_tensor=rows, config=cfg)
        return next(iter(device_arrays(out).values())).astype(np.float32).ravel()

    assert np.corrcoef(run(16), want)[0, 1] > 0.9999
    assert np.corrcoef(run(32), want)[0, 1] < 0.9


def test_conv3d_refusals_are_tt_nns():
    mesh = mesh_of((1, 1))
    xt = ttnn.from_torch(torch.rand(1, 2, 3, 3, 32), dtype=ttnn.bfloat16, device=mesh)
    w = ttnn.from_torch(torch.rand(9 * 32, 32), dtype=ttnn.bfloat16, device=mesh,
                        layout=ttnn.TILE_LAYOUT)  # fmt: skip

    def cfg(**kw):
        base = dict(output_channels=32, kernel_size=(1, 3, 3), stride=(1, 1, 1), padding=(0, 1, 1))
        return ttnn.Conv3dConfig(**{**base, **kw})

    def run(c, x=xt, weight=w):
        return ttnn.experimental.conv3d(input_tensor=x, weight_tensor=weight, config=c)

    with pytest.raises(ttnn.errors.ConfigError, match="Padding must be \\(0,x,x\\)"):
        run(cfg(padding=(1, 1, 1)))
    with pytest.raises(ttnn.errors.ConfigError, match="zeros or replicate"):
        run(cfg(padding_mode="reflect"))
    with pytest.raises(ttnn.errors.ConfigError, match="Groups must be 1"):
        run(cfg(groups=2))
    with pytest.raises(ttnn.errors.ShapeMismatchError, match="patch size"):
        run(cfg(kernel_size=(3, 3, 3)))
    with pytest.raises(ttnn.errors.ConfigError, match="C_in blocks \\(2\\) must be <="):
        run(cfg(C_in_block=16))
    with pytest.raises(ttnn.errors.LayoutError, match="Weight tensor must be tile"):
        run(cfg(), weight=ttnn.from_torch(torch.rand(9 * 32, 32), dtype=ttnn.bfloat16, device=mesh))
    batch2 = ttnn.from_torch(torch.rand(2, 2, 3, 3, 32), dtype=ttnn.bfloat16, device=mesh)
    with pytest.raises(ttnn.errors.ShapeMismatchError, match="batch size 1"):
        run(cfg(), x=batch2)
    with pytest.raises(ttnn.errors.ConfigError, match="Conv3dConfig"):
        ttnn.experimental.conv3d(input_tensor=xt, weight_tensor=w, config=None)
