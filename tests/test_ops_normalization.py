"""ttnn.group_norm and its input helpers against torch.nn.functional.group_norm, at tiny sizes:
the DRAM program's virtual columns and a sharded input's columns, the mask's and gamma's chunked
layout (a mask or gamma built for other chunks gives other numbers, as on TT-NN), the helpers'
tensors against hand-worked layouts, and TT-NN's refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _op_testing import device_arrays
from conftest import mesh_of

import ttjax as ttnn
from ttjax.ops import normalization as gn

RNG = np.random.default_rng(38)


def _rand(*shape: int) -> torch.Tensor:
    return torch.from_numpy(RNG.standard_normal(shape).astype(np.float32))


def _reference(x, groups, w, b, eps=1e-5):
    n, c, h, wd = x.shape
    y = torch.nn.functional.group_norm(x, groups, w, b, eps=eps)
    return y.permute(0, 2, 3, 1).reshape(n, 1, h * wd, c).numpy()


def _inputs(mesh, x, groups, w, b, chunks, *, layout=ttnn.TILE_LAYOUT, memory_config=None):
    n, c, h, wd = x.shape
    xt = ttnn.from_torch(
        x.permute(0, 2, 3, 1).reshape(n, 1, h * wd, c), dtype=ttnn.bfloat16, layout=layout,
        device=mesh, memory_config=memory_config,
    )  # fmt: skip
    mask = ttnn.create_group_norm_input_mask(c, groups, chunks)
    mask_t = ttnn.from_torch(mask, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=mesh)

    def rows(p):
        t = ttnn.create_group_norm_weight_bias_rm(p, c, chunks)
        return ttnn.from_torch(t, dtype=ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT, device=mesh)

    return xt, mask_t, rows(w), rows(b)


def _pcc(a, b) -> float:
    return float(np.corrcoef(np.ravel(a), np.ravel(b))[0, 1])


@pytest.mark.parametrize(
    "n, c, h, w, groups, grid_x",
    [
        (1, 64, 4, 8, 2, 1),  # one tile per group, one column
        (2, 96, 4, 8, 6, 8),  # 16-channel groups, 3 virtual columns of 32
        (1, 128, 8, 4, 8, 8),  # SD3.5's VAE per device (C 512/4, 32/4 groups): 4 columns
        (1, 160, 5, 4, 8, 1),  # 20-channel groups straddle tiles (block_wt 2); H*W=20 pads
    ],
)
def test_group_norm_dram_matches_torch(n, c, h, w, groups, grid_x):
    mesh = mesh_of((1, 2))
    x, wt, b = _rand(n, c, h, w) * 3 + 1, _rand(c), _rand(c)
    grid = ttnn.CoreGrid(y=1, x=grid_x)
    cols = gn.dram_group_norm_virtual_columns(grid, c, groups)
    xt, mask, g, bb = _inputs(mesh, x, groups, wt, b, cols)
    y = ttnn.group_norm(xt, num_groups=groups, epsilon=1e-5, input_mask=mask, weight=g, bias=bb,
                        core_grid=grid, inplace=False)  # fmt: skip
    assert (tuple(y.shape), y.dtype, y.layout) == (
        (n, 1, h * w, c),
        ttnn.bfloat16,
        ttnn.TILE_LAYOUT,
    )
    want = _reference(x, groups, wt, b)
    if (h * w) % 32 == 0:
        for got in device_arrays(y).values():
            assert _pcc(want, got) > 0.9999
            np.testing.assert_allclose(got, want, atol=0.06 * np.abs(want).max())
    else:  # TT-NN counts each batch's tile-padding rows (zeros) in the statistics
        got = next(iter(device_arrays(y).values()))
        xs = x.permute(0, 2, 3, 1).reshape(n, h * w, c)
        xs = torch.cat([xs, torch.zeros(n, 32 - (h * w) % 32, c)], 1)
        grouped = xs.reshape(n, -1, groups, c // groups)
        mean = grouped.mean((1, 3), keepdim=True)
        var = ((grouped - mean) ** 2).mean((1, 3), keepdim=True)
        ref = ((grouped - mean) / torch.sqrt(var + 1e-5)).reshape(n, -1, c)[:, : h * w] * wt + b
        assert _pcc(ref.reshape(n, 1, h * w, c).numpy(), got) > 0.9999


def test_group_norm_sharded_row_major_inplace_and_height_sharded():
    mesh = mesh_of((1, 2))
    n, c, h, w, groups = 1, 64, 8, 8, 4
    x, wt, b = _rand(n, c, h, w), _rand(c), _rand(c)
    cfg, grid = ttnn.determine_expected_group_norm_sharded_config_and_grid_size(
        device=mesh, num_channels=c, num_groups=groups, input_nhw=n * h * w,
        is_height_sharded=False, is_row_major=True,
    )  # fmt: skip
    chunks = c // cfg.shard_spec.shape[1]
    assert cfg.memory_layout is ttnn.TensorMemoryLayout.BLOCK_SHARDED and chunks > 1
    xt, mask, g, bb = _inputs(mesh, x, groups, wt, b, chunks, layout=ttnn.ROW_MAJOR_LAYOUT,
                              memory_config=cfg)  # fmt: skip
    y = ttnn.group_norm(
        xt,
        num_groups=groups,
        epsilon=1e-5,
        input_mask=mask,
        weight=g,
        bias=bb,
        memory_config=cfg,
        core_grid=grid,
    )  # fmt: skip (inplace: TT-NN's default)
    assert y is xt and y.layout == ttnn.ROW_MAJOR_LAYOUT
    want = _reference(x, groups, wt, b)
    for got in device_arrays(y).values():
        assert _pcc(want, got) > 0.9999
    cfg_h, grid_h = ttnn.determine_expected_group_norm_sharded_config_and_grid_size(
        device=mesh, num_channels=c, num_groups=groups, input_nhw=n * h * w,
        is_height_sharded=True, is_row_major=True,
    )  # fmt: skip
    assert cfg_h.shard_spec.shape == (32, 64)
    xt, mask, g, bb = _inputs(mesh, x, groups, wt, b, 1, layout=ttnn.ROW_MAJOR_LAYOUT,
                              memory_config=cfg_h)  # fmt: skip
    y = ttnn.group_norm(xt, num_groups=groups, epsilon=1e-5, input_mask=mask, weight=g, bias=bb,
                        core_grid=grid_h, inplace=False, output_layout=ttnn.TILE_LAYOUT)  # fmt: skip
    assert y.layout == ttnn.TILE_LAYOUT
    assert _pcc(want, next(iter(device_arrays(y).values()))) > 0.9999


def test_group_norm_reads_the_layout_it_is_given():
    """A mask built for other chunks gives TT-NN's (wrong) numbers, not torch's: the op follows
    the layout it is given, it does not guess."""
    mesh = mesh_of((1, 1))
    n, c, h, w, groups = 1, 64, 4, 8, 4  # 16-channel groups, one column
    grid = ttnn.CoreGrid(y=1, x=1)
    x, wt = _rand(n, c, h, w), _rand(c)
    want = _reference(x, groups, wt, torch.zeros(c))
    xt, mask, g, _ = _inputs(mesh, x, groups, wt, wt, 1)
    y = ttnn.group_norm(xt, num_groups=groups, epsilon=1e-5, input_mask=mask, weight=g,
                        core_grid=grid, inplace=False)  # fmt: skip
    assert _pcc(want, next(iter(device_arrays(y).values()))) > 0.9999
    # a mask built for 4 chunks starts every group at channel 0 of its tile: groups 1 and 3
    # then read the first half-tile, as TT-NN's kernel does with it
    bad = ttnn.from_torch(ttnn.create_group_norm_input_mask(c, groups, 4), dtype=ttnn.bfloat16,
                          layout=ttnn.TILE_LAYOUT, device=mesh)  # fmt: skip
    y_bad = ttnn.group_norm(xt, num_groups=groups, epsilon=1e-5, input_mask=bad, weight=g,
                            core_grid=grid, inplace=False)  # fmt: skip
    y_bad = next(iter(device_arrays(y_bad).values()))
    assert _pcc(want, y_bad) < 0.99
    # the kernel's arithmetic with that mask: group 1 (channels 16-31) gets the stats and mask of
    # channels 0-15 of its tile, and only those channels are written
    got = np.asarray(y_bad, np.float64).reshape(h * w, c)
    xs = x.permute(0, 2, 3, 1).reshape(h * w, c).numpy().astype(np.float64)
    lo = xs[:, 0:16]
    expect0 = (lo - lo.mean()) / np.sqrt(lo.var() + 1e-5) * wt.numpy()[0:16]
    assert np.allclose(got[:, 0:16], 2 * expect0, atol=0.1)  # groups 0 and 1 both write there
    assert np.allclose(got[:, 16:32], 0.0, atol=1e-6)


def test_helpers_match_hand_worked_layouts():
    mask = ttnn.create_group_norm_input_mask(96, 6, 3)  # 16-channel groups, 3 chunks of 32
    assert tuple(mask.shape) == (1, 6, 32, 32)
    starts = [int(torch.nonzero(mask[0, g, 0])[0]) for g in range(6)]
    assert starts == [0, 16, 0, 16, 0, 16] and mask[0, :, :, :].sum() == 6 * 32 * 16
    mask = ttnn.create_group_norm_input_mask(160, 8, 1)  # 20-channel groups cross tiles
    assert tuple(mask.shape) == (1, 8, 32, 64)
    assert [int(torch.nonzero(mask[0, g, 0])[0]) for g in range(4)] == [0, 20, 8, 28]
    neg = ttnn.create_group_norm_input_negative_mask(160, 8, 1)
    assert torch.equal(neg + ttnn.create_group_norm_input_mask(160, 8, 1), torch.ones_like(neg))
    rows = ttnn.create_group_norm_weight_bias_rm(torch.arange(1.0, 49.0), 48, 2)
    assert tuple(rows.shape) == (1, 1, 2, 32)
    assert rows[0, 0, 0, :24].tolist() == list(range(1, 25)) and rows[0, 0, 0, 24:].sum() == 0
    assert rows[0, 0, 1, :24].tolist() == list(range(25, 49))
    rec = ttnn.create_group_norm_reciprocals(1, 64, 8, 4, 4, ttnn.CoreGrid(y=2, x=4))
    assert tuple(rec.shape) == (8, 4) and rec[0, 2].item() == pytest.approx(1 / 3)
    assert gn.find_max_tile_span(96, 24) == 2 and gn.find_closest_largest_divisor(24, 7) == 6
    mesh = mesh_of((1, 2))
    (g, b), m = ttnn.dram_group_norm_params_from_torch(
        [torch.arange(128.0), torch.ones(128)], 64, 4, mesh, mesh_axis=1
    )
    per = device_arrays(g)
    assert np.array_equal(np.ravel(per[(0, 1)]), np.arange(64.0, 128.0))
    assert all(np.all(np.asarray(v) == 1) for v in device_arrays(b).values())
    assert tuple(m.shape) == (1, 4, 32, 32) and m.layout == ttnn.TILE_LAYOUT


def test_group_norm_refusals_are_tt_nns():
    mesh = mesh_of((1, 1))
    xt = ttnn.from_torch(torch.rand(1, 1, 32, 64), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
                         device=mesh)  # fmt: skip
    grid = ttnn.CoreGrid(y=1, x=1)
    with pytest.raises(ttnn.errors.ConfigError, match="Tile layout requires non-inplace"):
        ttnn.group_norm(xt, num_groups=2, core_grid=grid)  # TT-NN's default inplace=True
    with pytest.raises(ttnn.errors.ConfigError, match="Automatic grid size"):
        ttnn.group_norm(xt, num_groups=2, inplace=False)
    with pytest.raises(ttnn.errors.ShapeMismatchError, match="divisible by the number of groups"):
        ttnn.group_norm(xt, num_groups=3, core_grid=grid, inplace=False)
    mask = ttnn.from_torch(torch.ones(1, 2, 32, 64), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT,
                           device=mesh)  # fmt: skip
    with pytest.raises(ttnn.errors.ShapeMismatchError, match="block_wt"):
        ttnn.group_norm(xt, num_groups=2, input_mask=mask, core_grid=grid, inplace=False)
    rm = ttnn.from_torch(torch.rand(1, 1, 32, 64), dtype=ttnn.bfloat16, device=mesh)
    with pytest.raises(ttnn.errors.ConfigError, match="not supported for unsharded"):
        ttnn.group_norm(rm, num_groups=2, core_grid=grid)
    gamma = ttnn.from_torch(torch.rand(1, 1, 1, 64), dtype=ttnn.bfloat16, device=mesh)
    with pytest.raises(ttnn.errors.ShapeMismatchError, match="TILE_WIDTH"):
        ttnn.group_norm(xt, num_groups=2, weight=gamma, core_grid=grid, inplace=False)
