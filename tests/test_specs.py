"""Pure layout math in ``ttjax._specs``, checked against loop-based numpy references.

No devices are touched: mesh shapes are plain tuples (including 1-D and 3-D meshes that the
device suite never opens).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from _reference import concat, coords, shard
from hypothesis import given
from hypothesis import strategies as st
from jax.sharding import PartitionSpec as P

from ttjax._src.core import specs as _specs
from ttjax.placements import PlacementLocal, PlacementReplicate, PlacementShard

R = PlacementReplicate()
L = PlacementLocal()


def S(d: int) -> PlacementShard:
    return PlacementShard(d)


MESHES = [(1,), (8,), (1, 2), (2, 4), (8, 4), (4, 8), (2, 2, 2)]


@st.composite
def layouts(draw, allow_nested: bool = True):
    """(mesh_shape, dims per mesh axis (None = replicate), tensor shape) that divide evenly."""
    mesh_shape = draw(st.sampled_from(MESHES))
    rank = draw(st.integers(1, 3))
    dims = [draw(st.one_of(st.none(), st.integers(0, rank - 1))) for _ in mesh_shape]
    if not allow_nested:
        seen: set[int] = set()
        for i, d in enumerate(dims):
            if d in seen:
                dims[i] = None
            elif d is not None:
                seen.add(d)
    shape = []
    for d in range(rank):
        n = int(np.prod([mesh_shape[i] for i, x in enumerate(dims) if x == d]))
        shape.append(n * draw(st.integers(1, 3)))
    return tuple(mesh_shape), dims, tuple(shape)


def _placements(dims):
    return tuple(R if d is None else S(d) for d in dims)


def _arange(shape):
    return np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)


# ---------------------------------------------------------------------------------------------
# Scalars and specs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dim", "rank", "expect"),
    [
        (0, 4, 0),
        (3, 4, 3),
        (-1, 4, 3),
        (-4, 4, 0),
        (4, 4, None),
        (-5, 4, None),
        (True, 4, None),
        (1.0, 4, None),
    ],
)
def test_normalize_dim(dim, rank, expect):
    assert _specs.normalize_dim(dim, rank) == expect


@pytest.mark.parametrize(
    ("placements", "names", "rank", "expect"),
    [
        ((R, R), ("y", "x"), 4, P(None, None, None, None)),
        ((R, S(3)), ("y", "x"), 4, P(None, None, None, "x")),
        ((S(0), S(3)), ("y", "x"), 4, P("y", None, None, "x")),
        ((S(3), S(0)), ("y", "x"), 4, P("x", None, None, "y")),
        ((S(2), S(2)), ("y", "x"), 3, P(None, None, ("y", "x"))),
        ((L, S(1)), ("y", "x"), 2, P("y", None, "x")),
        ((L, L), ("y", "x"), 1, P("y", "x", None)),
        ((S(0),), ("x",), 2, P("x", None)),
    ],
)
def test_partition_spec(placements, names, rank, expect):
    assert _specs.partition_spec(placements, names, rank) == expect


def test_global_shape_and_shard_count():
    assert _specs.global_shape((1, 1, 32, 32), (R, S(3)), (1, 2)) == (1, 1, 32, 64)
    assert _specs.global_shape((2, 3), (S(0), S(0)), (2, 4)) == (16, 3)
    assert _specs.global_shape((2, 3), (L, S(1)), (2, 4)) == (2, 2, 12)
    assert _specs.global_shape((2, 3), (S(1), L), (8, 4)) == (4, 2, 24)
    assert _specs.shard_count((S(2), S(2)), (8, 4), 2) == 32
    assert _specs.shard_count((S(2), R), (8, 4), 2) == 8
    assert _specs.shard_count((R, R), (8, 4), 2) == 1
    assert _specs.axes_sharding((S(1), R, S(1)), 1) == [0, 2]
    assert _specs.local_axes((L, R, L)) == [0, 2]


def test_placement_from_dims():
    assert _specs.placement_from_dims([None, 3]) == (R, S(3))
    assert _specs.placement_from_dims([0, None]) == (S(0), R)
    assert _specs.placement_from_dims([None, None]) == (R, R)


# ---------------------------------------------------------------------------------------------
# Blocks: global array <-> per-device blocks
# ---------------------------------------------------------------------------------------------


@given(layouts())
def test_local_blocks_match_reference_shard(layout):
    mesh_shape, dims, shape = layout
    x = _arange(shape)
    placements = _placements(dims)
    local = tuple(
        s // int(np.prod([mesh_shape[i] for i, d in enumerate(dims) if d == k]))
        for k, s in enumerate(shape)
    )
    blocks = _specs.local_blocks(np, x, placements, mesh_shape, local)
    assert blocks.shape == mesh_shape + local
    ref = shard(x, mesh_shape, dims)
    for c in coords(mesh_shape):
        np.testing.assert_array_equal(blocks[c], ref[c], err_msg=f"device {c}")


@given(layouts())
def test_from_local_blocks_inverts_local_blocks(layout):
    mesh_shape, dims, shape = layout
    x = _arange(shape)
    placements = _placements(dims)
    ref = shard(x, mesh_shape, dims)
    blocks = np.stack([ref[c] for c in coords(mesh_shape)]).reshape(
        mesh_shape + ref[coords(mesh_shape)[0]].shape
    )
    back = _specs.from_local_blocks(np, blocks, placements, mesh_shape)
    np.testing.assert_array_equal(back, x)


def test_nested_split_is_row_major():
    # Two mesh axes on one tensor dim: device (r, c) of a 2x4 mesh holds piece r * 4 + c.
    x = _arange((16, 3))
    blocks = _specs.local_blocks(np, x, (S(0), S(0)), (2, 4), (2, 3))
    for r, c in coords((2, 4)):
        k = r * 4 + c
        np.testing.assert_array_equal(blocks[r, c], x[2 * k : 2 * k + 2])


def test_local_placement_uses_hidden_leading_axis():
    mesh_shape = (2, 4)
    local = (3, 2)
    rng = np.random.default_rng(0)
    per_device = {c: rng.integers(0, 100, local) for c in coords(mesh_shape)}
    blocks = np.stack([per_device[c] for c in coords(mesh_shape)]).reshape(mesh_shape + local)
    # (Local, Shard(1)): row r's blocks live at global[r]; column c at [:, 2c:2c+2].
    g = _specs.from_local_blocks(np, blocks, (L, S(1)), mesh_shape)
    assert g.shape == (2, 3, 8)
    for r, c in coords(mesh_shape):
        np.testing.assert_array_equal(g[r][:, 2 * c : 2 * c + 2], per_device[(r, c)])
    back = _specs.local_blocks(np, g, (L, S(1)), mesh_shape, local)
    np.testing.assert_array_equal(back, blocks)
    # (Local, Local): every device's block is addressed by its coordinate.
    g2 = _specs.from_local_blocks(np, blocks, (L, L), mesh_shape)
    assert g2.shape == (2, 4, 3, 2)
    for c in coords(mesh_shape):
        np.testing.assert_array_equal(g2[c], per_device[c])


def test_local_blocks_with_jax_numpy_matches_numpy():
    x = _arange((4, 8, 6))
    placements = (S(2), S(0))
    np_blocks = _specs.local_blocks(np, x, placements, (2, 4), (1, 8, 3))
    jnp_blocks = _specs.local_blocks(jnp, jnp.asarray(x), placements, (2, 4), (1, 8, 3))
    np.testing.assert_array_equal(np.asarray(jnp_blocks), np_blocks)


# ---------------------------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------------------------


@given(layouts(), st.data())
def test_concat_blocks_matches_reference_concat(layout, data):
    mesh_shape, dims, shape = layout
    rank = len(shape)
    cdims = [data.draw(st.integers(0, rank - 1)) for _ in mesh_shape]
    x = _arange(shape)
    ref = shard(x, mesh_shape, dims)
    local = ref[coords(mesh_shape)[0]].shape
    blocks = np.stack([ref[c] for c in coords(mesh_shape)]).reshape(mesh_shape + local)
    out = _specs.concat_blocks(blocks, len(mesh_shape), mesh_shape, cdims)
    expect = concat([ref[c] for c in coords(mesh_shape)], mesh_shape, cdims)
    np.testing.assert_array_equal(out, expect)


def test_concat_blocks_over_other_distribution_shape():
    # 8 devices of a 2x4 mesh composed as MeshShape([8]) along dim 1: row-major order.
    pieces = [np.full((1, 2), k) for k in range(8)]
    blocks = np.stack(pieces).reshape(2, 4, 1, 2)
    out = _specs.concat_blocks(blocks, 2, (8,), [1])
    np.testing.assert_array_equal(out, np.repeat(np.arange(8), 2)[None, :])
    # Composed as 2x4 with dims (0, 1): rows stacked on dim 0, columns on dim 1.
    out2 = _specs.concat_blocks(blocks, 2, (2, 4), [0, 1])
    np.testing.assert_array_equal(out2, np.repeat(np.arange(8).reshape(2, 4), 2, axis=1))
