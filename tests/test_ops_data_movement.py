"""Shape and data-movement ops: every shape argument is per device, and every device's result
equals numpy on its own shard, exactly."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _op_testing import (
    BF16,
    F32,
    REPLICATED,
    Layout,
    check,
    layouts,
    mesh_of,
    mesh_shapes,
    put,
    put_local,
    reference,
    seeds,
    stored_blocks,
    unnormalized_blocks,
)
from hypothesis import example, given
from hypothesis import strategies as st

import ttjax as ttnn

LOCAL = (1, 2, 8, 12)


@st.composite
def cases(draw, n_layouts: int = 1, dtypes=(F32, F32, BF16)):
    return (
        draw(mesh_shapes),
        tuple(draw(layouts(4)) for _ in range(n_layouts)),
        draw(st.sampled_from(dtypes)),
        draw(seeds),
    )


def one_by_one(n: int = 1):
    return ((1, 1), (Layout("2d", (2, 3)),) * n, F32, 0)


@given(case=cases())
@example(case=one_by_one())
def test_reshape_permute_transpose_per_device(case):
    mesh_shape, (layout,), dtype, seed = case
    x, xs = put_local(np.random.default_rng(seed), LOCAL, mesh_shape, layout, dtype)
    for shape in [(2, 8, 12), (1, 1, -1, 12), (16, 12)]:
        want = reference(lambda s, shape=shape: s.reshape(shape), xs)
        y = ttnn.reshape(x, shape)
        check(y, want, exact=True)
    check(x.reshape(4, 48), reference(lambda s: s.reshape(4, 48), xs), exact=True)
    for perm in [(0, 1, 3, 2), (2, 0, 3, 1)]:
        check(ttnn.permute(x, perm), reference(lambda s, p=perm: s.transpose(p), xs), exact=True)
    check(ttnn.transpose(x, -2, -1), reference(lambda s: s.swapaxes(-2, -1), xs), exact=True)
    check(ttnn.transpose(x, 1, 2), reference(lambda s: s.swapaxes(1, 2), xs), exact=True)
    y = ttnn.unsqueeze(ttnn.squeeze(x, 0), 0)
    check(y, xs, exact=True)


@given(case=cases(n_layouts=3), dim=st.sampled_from([3, -1, 1, 0]))
@example(case=one_by_one(3), dim=3)
def test_concat_per_device(case, dim):
    mesh_shape, (la, lb, lc), dtype, seed = case
    rng = np.random.default_rng(seed)
    sizes = [12, 5, 3]
    tensors, shards = [], []
    for lay, n in zip((la, lb, lc), sizes):
        local = list(LOCAL)
        local[dim] = n
        t, s = put_local(rng, tuple(local), mesh_shape, lay, dtype)
        tensors.append(t)
        shards.append(s)
    y = ttnn.concat(tensors, dim=dim)
    check(y, reference(lambda *s: np.concatenate(s, axis=dim), *shards), exact=True)
    y2 = ttnn.concat(tensors[:2], dim)
    check(y2, reference(lambda *s: np.concatenate(s, axis=dim), *shards[:2]), exact=True)


@pytest.mark.parametrize(("widths", "blocks"), [((32, 64), True), ((48, 32), False)])
def test_concat_of_block_floats_joins_the_stored_blocks(widths, blocks):
    # Pieces of whole tiles are joined as stored (TT-NN concatenates tiles); a piece padded
    # inside a tile (width 48) is decoded and re-encoded: the same values either way.
    mesh = mesh_of((1, 2))
    rng = np.random.default_rng(sum(widths))
    tensors = [
        unnormalized_blocks(
            ttnn.from_torch(
                np.zeros((2, 32, w), np.float32),
                dtype=ttnn.bfloat8_b,
                layout=ttnn.TILE_LAYOUT,
                device=mesh,
                mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
            ),
            rng,
        )
        for w in widths
    ]
    values = [[ttnn.to_numpy(d) for d in ttnn.get_device_tensors(t)] for t in tensors]
    out = ttnn.concat(tensors, dim=-1)
    for i, d in enumerate(ttnn.get_device_tensors(out)):
        np.testing.assert_array_equal(ttnn.to_numpy(d), np.concatenate([v[i] for v in values], -1))
    if blocks:
        parts = [stored_blocks(t) for t in tensors]
        for i, got in enumerate(stored_blocks(out)):
            for field in range(2):
                whole = np.concatenate([p[i][field] for p in parts], -1)
                np.testing.assert_array_equal(got[field], whole)


def test_concat_of_one_tensor_is_a_memory_config_move():
    # TT-NN (concat.cpp): one input is to_memory_config(input, memory_config or DRAM); inside a
    # program a memory-config move is nothing, for block floats no decode and re-encode.
    mesh = mesh_of((1, 2))
    x = ttnn.from_torch(
        np.random.default_rng(0).standard_normal((2, 32, 64)).astype(np.float32),
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
        memory_config=ttnn.L1_MEMORY_CONFIG,
    )
    y = ttnn.concat([x], dim=2)
    assert y.memory_config() == ttnn.DRAM_MEMORY_CONFIG and y.dtype == ttnn.bfloat8_b
    for a, b in zip(ttnn.get_device_tensors(y), ttnn.get_device_tensors(x)):
        np.testing.assert_array_equal(ttnn.to_numpy(a), ttnn.to_numpy(b))
    assert not jax.make_jaxpr(lambda t: ttnn.concat([t], dim=1))(x).eqns
    z = ttnn.concat([x], dim=2, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert z.memory_config() == ttnn.L1_MEMORY_CONFIG


INDEXES = [
    (slice(None), slice(1, None), slice(None, None, 2), 3),
    (Ellipsis, slice(None, 5)),
    (0,),
    (None, Ellipsis, slice(-3, None)),
    (0, 1, slice(2, 7), slice(None, None, -1)),
]


@given(case=cases())
@example(case=one_by_one())
def test_slice_and_getitem_per_device(case):
    mesh_shape, (layout,), dtype, seed = case
    x, xs = put_local(np.random.default_rng(seed), LOCAL, mesh_shape, layout, dtype)
    y = ttnn.slice(x, [0, 0, 1, 2], [1, 2, 7, 11])
    check(y, reference(lambda s: s[0:1, 0:2, 1:7, 2:11], xs), exact=True)
    y = ttnn.slice(x, [0, 1, 0, 1], [1, 2, 8, 12], [1, 1, 3, 2])
    check(y, reference(lambda s: s[0:1, 1:2, 0:8:3, 1:12:2], xs), exact=True)
    for index in INDEXES:
        check(x[index], reference(lambda s, i=index: s[i], xs), exact=True)


def test_slice_takes_tt_nn_keyword_names():
    """starts= / ends= / steps= (TT-NN's 4-D overload, as Falcon-7B's attention calls it)."""
    x, xs = put_local(np.random.default_rng(3), LOCAL, (1, 2), REPLICATED, ttnn.float32)
    y = ttnn.slice(x, starts=(0, 1, 0, 1), ends=(1, 2, 8, 12), steps=(1, 1, 3, 2))
    check(y, reference(lambda s: s[0:1, 1:2, 0:8:3, 1:12:2], xs), exact=True)
    with pytest.raises(ttnn.TTJaxError, match="both given"):
        ttnn.slice(x, [0, 0, 0, 0], [1, 1, 1, 1], starts=(0, 0, 0, 0))
    with pytest.raises(ttnn.TTJaxError, match="are required"):
        ttnn.slice(x, ends=(1, 1, 1, 1))


@given(case=cases())
@example(case=one_by_one())
def test_split_repeat_pad_per_device(case):
    mesh_shape, (layout,), dtype, seed = case
    x, xs = put_local(np.random.default_rng(seed), LOCAL, mesh_shape, layout, dtype)
    pieces = ttnn.split(x, 5, dim=3)  # 12 = 5 + 5 + 2 per device
    assert len(pieces) == 3
    for k, piece in enumerate(pieces):
        check(piece, reference(lambda s, k=k: s[..., 5 * k : 5 * (k + 1)], xs), exact=True)
    pieces = ttnn.split(x, [3, 5], dim=2)
    assert [tuple(p.shape) for p in pieces] == [(1, 2, 3, 12), (1, 2, 5, 12)]
    check(pieces[0], reference(lambda s: s[:, :, :3], xs), exact=True)
    check(pieces[1], reference(lambda s: s[:, :, 3:], xs), exact=True)
    check(
        ttnn.repeat(x, (1, 2, 1, 3)), reference(lambda s: np.tile(s, (1, 2, 1, 3)), xs), exact=True
    )
    check(
        ttnn.repeat_interleave(x, 2, dim=2),
        reference(lambda s: np.repeat(s, 2, axis=2), xs),
        exact=True,
    )
    # TT-NN's padding lists (before, after) pairs for the trailing dims.
    y = ttnn.pad(x, [(0, 1), (2, 3)], value=-1.5)
    want = reference(
        lambda s: np.pad(s, [(0, 0), (0, 0), (0, 1), (2, 3)], constant_values=-1.5), xs
    )
    check(y, want, exact=True)
    y = ttnn.pad(x, [(0, 0), (1, 0), (0, 0), (0, 4)], 0.0)
    want = reference(lambda s: np.pad(s, [(0, 0), (1, 0), (0, 0), (0, 4)]), xs)
    check(y, want, exact=True)


@given(case=cases(dtypes=(F32, BF16)))
@example(case=one_by_one())
def test_to_layout_keeps_values(case):
    mesh_shape, (layout,), dtype, seed = case
    x, xs = put_local(np.random.default_rng(seed), LOCAL, mesh_shape, layout, dtype)
    assert x.layout == ttnn.TILE_LAYOUT
    rm = ttnn.to_layout(x, ttnn.ROW_MAJOR_LAYOUT)
    assert rm.layout == ttnn.ROW_MAJOR_LAYOUT and rm.dtype == dtype
    check(rm, xs, exact=True)
    tile = ttnn.to_layout(rm, ttnn.TILE_LAYOUT)
    assert tile.layout == ttnn.TILE_LAYOUT
    check(tile, xs, exact=True)
    assert ttnn.to_layout(tile, ttnn.TILE_LAYOUT) is tile
    if dtype == F32:
        bf = ttnn.to_layout(x, ttnn.TILE_LAYOUT, dtype=BF16)
        assert bf.dtype == BF16
        check(bf, xs)


@st.composite
def embedding_cases(draw):
    return (
        draw(mesh_shapes),
        draw(layouts(2)),  # ids [batch, seq]
        draw(layouts(2)),  # weight [vocab, hidden]
        draw(st.sampled_from([F32, BF16])),
        draw(seeds),
    )


@given(case=embedding_cases())
@example(case=((1, 1), REPLICATED, Layout("2d", (None, 1)), F32, 0))
def test_embedding_per_device(case):
    mesh_shape, li, lw, dtype, seed = case
    rng = np.random.default_rng(seed)
    vocab, hidden = 10, 8  # per device
    ids_host = rng.integers(0, vocab, li.global_shape((2, 5), mesh_shape)).astype(np.uint32)
    ids, idss = put(ids_host, mesh_shape, li, ttnn.uint32, ttnn.ROW_MAJOR_LAYOUT)
    w, ws = put_local(rng, (vocab, hidden), mesh_shape, lw, dtype)
    out = ttnn.embedding(ids, w)
    assert out.shape == (2, 5, hidden) and out.dtype == dtype
    check(out, reference(lambda i, table: table[i.astype(np.int64)], idss, ws), exact=True)


def test_permute_keeps_shards_composable():
    """A width-sharded tensor transposed per device composes back (along the new dim) into the
    transpose of the global tensor."""
    mesh = mesh_of((1, 8))
    x = np.arange(2 * 8 * 64, dtype=np.float32).reshape(1, 2, 8, 64)
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    y = ttnn.transpose(t, -2, -1)
    assert y.shape == (1, 2, 8, 8)
    full = ttnn.to_numpy(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=2))
    np.testing.assert_array_equal(full, x.swapaxes(-2, -1))
    r = ttnn.reshape(t, (2, 8, 8))
    full = ttnn.to_numpy(r, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=2))
    np.testing.assert_array_equal(full, x.reshape(2, 8, 64))


@pytest.mark.parametrize("mesh_shape", [(1, 1), (2, 4)], ids=["1x1", "2x4"])
def test_reshape_rejects_a_global_shape(mesh_shape):
    """Shapes are per device: asking for the global shape of a sharded tensor is an error."""
    x, _ = put(np.zeros((1, 1, 32, 64), np.float32), mesh_shape, Layout("1d", (3, 3)))
    n = mesh_shape[0] * mesh_shape[1]
    if n == 1:
        assert ttnn.reshape(x, (32, 64)).shape == (32, 64)
        return
    with pytest.raises(ttnn.ShapeMismatchError, match="per device"):
        ttnn.reshape(x, (32, 64))


def test_scatter_and_gather_match_torch_per_device():
    """ttnn.scatter and ttnn.gather on a 1x4 mesh (rows sharded): torch.scatter on each device's shard."""
    import torch

    mesh = mesh_of((1, 4))
    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 1, 32, 64, generator=g)
    index = torch.stack([torch.randperm(64, generator=g)[:16] for _ in range(8 * 32)])
    index = index.reshape(8, 1, 32, 16)
    src = torch.randn(8, 1, 32, 16, generator=g)
    mapper = ttnn.ShardTensorToMesh(mesh, dim=0)

    def put(t, dtype):
        return ttnn.from_torch(
            t, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=mapper
        )

    out = ttnn.scatter(
        put(x, ttnn.float32), 3, put(index.int(), ttnn.int32), put(src, ttnn.float32)
    )
    picked = ttnn.gather(put(x, ttnn.float32), 3, put(index.int(), ttnn.int32))
    np.testing.assert_array_equal(
        ttnn.to_torch(picked, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)).numpy(),
        torch.gather(x, 3, index).numpy(),
    )
    got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))
    np.testing.assert_array_equal(got.numpy(), torch.scatter(x, 3, index, src).numpy())
    with pytest.raises(ttnn.TTJaxError, match="reduce"):
        ttnn.scatter(
            put(x, ttnn.float32),
            3,
            put(index.int(), ttnn.int32),
            put(src, ttnn.float32),
            reduce="sum",
        )
    with pytest.raises(ttnn.ShapeMismatchError, match="one shape"):
        ttnn.scatter(put(x, ttnn.float32), 3, put(index.int(), ttnn.int32), put(x, ttnn.float32))


def test_iterating_a_tensor_stops_at_its_end():
    """An int index past the end raises IndexError (TT-NN's __getitem__ does), so Python's
    iteration protocol (``for row in t``, ``zip(t, ...)``) ends there."""
    mesh = mesh_of((1, 2))
    x = np.arange(3 * 32, dtype=np.float32).reshape(3, 32)
    t = ttnn.from_torch(x, layout=ttnn.TILE_LAYOUT, device=mesh)
    rows = [ttnn.to_torch(ttnn.get_device_tensors(r)[0]).numpy() for r in t]
    np.testing.assert_array_equal(np.stack(rows), x)
    with pytest.raises(IndexError, match="out of range"):
        t[3]
    with pytest.raises(ttnn.ShapeMismatchError):
        t[-4]


def test_pad_to_an_output_shape_from_a_start_as_tt_nn():
    """TT-NN's 4-D form pad(x, output_padded_shape, input_tensor_start, value) (Falcon-7B pads
    its query heads so), against numpy; the (before, after) form gives the same tensor."""
    x, xs = put_local(np.random.default_rng(4), LOCAL, (1, 2), REPLICATED, ttnn.float32)
    y = ttnn.pad(x, [1, 4, 16, 12], [0, 1, 4, 0], -2.0)
    want = reference(
        lambda s: np.pad(s, ((0, 0), (1, 1), (4, 4), (0, 0)), constant_values=-2.0), xs
    )
    check(y, want, exact=True)
    check(ttnn.pad(x, ((1, 1), (4, 4), (0, 0)), -2.0), want, exact=True)
    k = ttnn.pad(x, output_padded_shape=[1, 4, 16, 12], input_tensor_start=[0, 1, 4, 0], value=-2.0)
    check(k, want, exact=True)
    with pytest.raises(ttnn.ShapeMismatchError, match="non-negative"):
        ttnn.pad(x, [1, 2, 8, 12], [0, 1, 0, 0], 0.0)


def test_pad_of_a_host_tensor_keeps_its_logical_shape_as_tt_nn():
    """TT-NN pads a host tensor's storage only (segformer pads 3 image channels to 8 so): the
    values and logical shape stay; a device tensor grows. Padding before the values is refused."""
    x = np.random.default_rng(5).standard_normal((1, 4, 4, 3)).astype(np.float32)
    host = ttnn.from_torch(x, dtype=ttnn.float32, layout=ttnn.ROW_MAJOR_LAYOUT)
    y = ttnn.pad(host, [1, 4, 4, 8], [0, 0, 0, 0], 0)
    assert tuple(y.shape) == (1, 4, 4, 3)
    np.testing.assert_array_equal(ttnn.to_torch(y).numpy(), x)
    grown = ttnn.pad(ttnn.to_device(host, mesh_of((1, 1))), [1, 4, 4, 8], [0, 0, 0, 0], 0)
    want = np.pad(x, ((0, 0), (0, 0), (0, 0), (0, 5)))
    np.testing.assert_array_equal(ttnn.to_torch(grown).numpy(), want)
    with pytest.raises(ttnn.ShapeMismatchError, match="host tensor starts past 0"):
        ttnn.pad(host, [1, 4, 4, 8], [0, 0, 0, 2], 0)


def test_repeat_takes_tt_nns_keyword_and_a_shape():
    """``ttnn.repeat(x, repeat_dims=ttnn.Shape(...))``, as deepseek_v3's RepeatConfig calls it."""
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3)
    t = ttnn.from_torch(x, device=mesh_of((1, 2)))
    got = ttnn.repeat(t, repeat_dims=ttnn.Shape((2, 1, 3, 1)))
    for shard in ttnn.get_device_tensors(got):
        np.testing.assert_array_equal(ttnn.to_torch(shard).numpy(), np.tile(x, (2, 1, 3, 1)))
