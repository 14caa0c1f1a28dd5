"""Mappers and composers over TT-NN's system mesh shapes, against loop-based numpy references.

Every placement combination is swept (Replicate / Shard(d) per mesh axis, ShardTensorToMesh over
all devices, ShardTensor2dMesh, create_mesh_mapper, ReplicateTensorToMesh); per-device shards are
compared with ``_reference.shard`` / ``shard_1d`` in row-major device order, and composed tensors
with ``_reference.concat`` (which never deduplicates replicas).
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from _reference import blockfloat_quantize, concat, coords, pcc, shard, shard_1d
from conftest import MESH_SHAPES, mesh_of
from hypothesis import given
from hypothesis import strategies as st

import ttjax as ttnn

RANK = 3
DTYPES = {
    ttnn.float32: np.float32,
    ttnn.bfloat16: ml_dtypes.bfloat16,
    ttnn.int32: np.int32,
    ttnn.uint32: np.uint32,
}
# The sweeps run every mesh shape in `make test-all`; `make test` keeps 1x1, 2x4, 1x8 and the 8x4
# Galaxy (1x2 is a shorter line than 1x8, 4x8 the Galaxy transposed).
SWEEP = [
    pytest.param(s, marks=pytest.mark.slow) if s in ((1, 2), (4, 8)) else s for s in MESH_SHAPES
]
MESH_IDS = [f"{r}x{c}" for r, c in MESH_SHAPES]
# Every (row placement, col placement) a MeshMapperConfig accepts for a rank-3 tensor: None is
# Replicate, an int is Shard(dim); both axes may not shard the same dim ("dims must be unique").
PAIRS = [
    (a, b)
    for a, b in itertools.product([None, 0, 1, 2], repeat=2)
    if a is None or b is None or a != b
]


def _composer_2d(mesh, mesh_shape, dims):
    """ConcatMesh2dToTensor, which (like TT-NN) refuses one dim twice; the N-D composer then."""
    if dims[0] != dims[1]:
        return ttnn.ConcatMesh2dToTensor(mesh, mesh_shape=mesh_shape, dims=dims)
    config = ttnn.MeshComposerConfig(list(dims), mesh_shape_override=ttnn.MeshShape(mesh_shape))
    return ttnn.create_mesh_composer(mesh, config)


def _pl(d: int | None):
    return ttnn.PlacementReplicate() if d is None else ttnn.PlacementShard(d)


def _values(rng: np.random.Generator, shape: tuple[int, ...], np_dtype) -> np.ndarray:
    """Values that use the whole range of the dtype (sign bits, high bits, fractions)."""
    if np.dtype(np_dtype) == np.uint32:
        return rng.integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32)
    if np.dtype(np_dtype) == np.int32:
        return rng.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)
    return (rng.standard_normal(shape) * 100).astype(np_dtype)


def _assert_bits_equal(actual, expect) -> None:
    actual = np.asarray(actual)
    assert actual.dtype == expect.dtype, (actual.dtype, expect.dtype)
    assert actual.shape == expect.shape, (actual.shape, expect.shape)
    assert actual.tobytes() == np.ascontiguousarray(expect).tobytes()


def _shape_for(counts: list[int], ks: list[int]) -> tuple[int, ...]:
    return tuple(n * k for n, k in zip(counts, ks))


def _counts(mesh_shape, dims) -> list[int]:
    """How many pieces each tensor dim is cut into by ``dims`` (one entry per mesh axis)."""
    return [
        int(np.prod([mesh_shape[i] for i, d in enumerate(dims) if d == k]) or 1)
        for k in range(RANK)
    ]


common = st.fixed_dictionaries(
    {
        "ks": st.lists(st.integers(1, 2), min_size=RANK, max_size=RANK),
        "dtype": st.sampled_from(list(DTYPES)),
        "seed": st.integers(0, 2**16),
        "on_device": st.booleans(),
        "negative": st.booleans(),
    }
)


def _check_shards(t, ref: dict, mesh_shape) -> None:
    shards = ttnn.get_device_tensors(t)
    order = coords(mesh_shape)
    assert len(shards) == len(order)
    for k, c in enumerate(order):
        assert tuple(shards[k].shape) == ref[c].shape
        _assert_bits_equal(ttnn.to_numpy(shards[k]), ref[c])


# ---------------------------------------------------------------------------------------------
# N-D mappers: create_mesh_mapper / ShardTensor2dMesh, every placement pair
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{_pl(a)}-{_pl(b)}" for a, b in PAIRS])
@pytest.mark.parametrize("mesh_shape", SWEEP, ids=MESH_IDS)
@given(case=common, data=st.data())
def test_nd_mapper_shards_and_round_trip(mesh_shape, pair, case, data):
    mesh = mesh_of(mesh_shape)
    dims = list(pair)
    shape = _shape_for(_counts(mesh_shape, dims), case["ks"])
    x = _values(np.random.default_rng(case["seed"]), shape, DTYPES[case["dtype"]])
    ref = shard(x, mesh_shape, dims)

    # Negative dims name the same tensor dims.
    given_dims = [d - RANK if (d is not None and case["negative"]) else d for d in dims]
    if data.draw(st.booleans(), label="ShardTensor2dMesh"):
        mapper = ttnn.ShardTensor2dMesh(mesh, mesh_shape=mesh_shape, dims=given_dims)
    else:
        cfg = ttnn.MeshMapperConfig(placements=[_pl(d) for d in given_dims])
        mapper = ttnn.create_mesh_mapper(mesh, cfg)
    device = mesh if case["on_device"] else None
    t = ttnn.from_torch(x, dtype=case["dtype"], mesh_mapper=mapper, device=device)

    assert tuple(t.shape) == ref[coords(mesh_shape)[0]].shape  # per-device shape
    assert t.dtype == case["dtype"]
    assert t.storage_type() == (ttnn.StorageType.DEVICE if device else ttnn.StorageType.HOST)
    _check_shards(t, ref, mesh_shape)

    # Compose: shard dims where sharded; replicated axes concatenate their copies on any dim.
    cdims = [d if d is not None else data.draw(st.integers(0, RANK - 1)) for d in dims]
    expect = concat([ref[c] for c in coords(mesh_shape)], mesh_shape, cdims)
    neg = [d - RANK for d in cdims] if case["negative"] else cdims
    composers = [
        _composer_2d(mesh, mesh_shape, neg),
        ttnn.create_mesh_composer(mesh, ttnn.MeshComposerConfig(neg)),
    ]
    for composer in composers:
        _assert_bits_equal(ttnn.to_numpy(t, mesh_composer=composer), expect)
    if all(d is not None for d in dims):
        _assert_bits_equal(ttnn.to_numpy(t, mesh_composer=composers[0]), x)


# ---------------------------------------------------------------------------------------------
# 1-D mappers over every device: ShardTensorToMesh, ReplicateTensorToMesh, overrides
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, 2, None], ids=["S0", "S1", "S2", "R"])
@pytest.mark.parametrize("mesh_shape", SWEEP, ids=MESH_IDS)
@given(case=common, data=st.data())
def test_1d_mapper_shards_and_round_trip(mesh_shape, dim, case, data):
    mesh = mesh_of(mesh_shape)
    n = mesh.get_num_devices()
    counts = [n if k == dim else 1 for k in range(RANK)]
    shape = _shape_for(counts, case["ks"])
    x = _values(np.random.default_rng(case["seed"]), shape, DTYPES[case["dtype"]])
    device = mesh if case["on_device"] else None
    style = data.draw(st.sampled_from(["class", "function", "config"]), label="style")
    if dim is None:
        ref = {c: x for c in coords(mesh_shape)}
        mapper = {
            "class": lambda: ttnn.ReplicateTensorToMesh(mesh),
            "function": lambda: ttnn.replicate_tensor_to_mesh_mapper(mesh),
            "config": lambda: ttnn.create_mesh_mapper(
                mesh,
                ttnn.MeshMapperConfig(
                    [ttnn.PlacementReplicate()], mesh_shape_override=ttnn.MeshShape(n)
                ),
            ),
        }[style]()
    else:
        ref = shard_1d(x, mesh_shape, dim)
        d = dim - RANK if case["negative"] else dim
        mapper = {
            "class": lambda: ttnn.ShardTensorToMesh(mesh, dim=d),
            "function": lambda: ttnn.shard_tensor_to_mesh_mapper(mesh, d),
            "config": lambda: ttnn.create_mesh_mapper(
                mesh,
                ttnn.MeshMapperConfig(
                    [ttnn.PlacementShard(d)], mesh_shape_override=ttnn.MeshShape(n)
                ),
            ),
        }[style]()
    t = ttnn.from_torch(x, dtype=case["dtype"], mesh_mapper=mapper, device=device)
    _check_shards(t, ref, mesh_shape)

    # ConcatMeshToTensor concatenates all devices in row-major order (replicas included).
    cdim = dim if dim is not None else data.draw(st.integers(0, RANK - 1), label="cdim")
    expect = np.concatenate([ref[c] for c in coords(mesh_shape)], axis=cdim)
    neg = cdim - RANK if case["negative"] else cdim
    for composer in (
        ttnn.ConcatMeshToTensor(mesh, dim=neg),
        ttnn.concat_mesh_to_tensor_composer(mesh, neg),
        ttnn.create_mesh_composer(
            mesh, ttnn.MeshComposerConfig([neg], mesh_shape_override=ttnn.MeshShape(n))
        ),
    ):
        _assert_bits_equal(ttnn.to_numpy(t, mesh_composer=composer), expect)
    if dim is not None:
        _assert_bits_equal(ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim)), x)
    # A 2-D composer over the same devices sees them as rows of columns.
    cdims = [data.draw(st.integers(0, RANK - 1), label="row"), cdim]
    composer2d = _composer_2d(mesh, mesh_shape, cdims)
    expect2d = concat([ref[c] for c in coords(mesh_shape)], mesh_shape, cdims)
    _assert_bits_equal(ttnn.to_numpy(t, mesh_composer=composer2d), expect2d)


# ---------------------------------------------------------------------------------------------
# Specific layouts from the TT-NN docs and tests
# ---------------------------------------------------------------------------------------------


def test_doc_example_halves_on_n300():
    mesh = mesh_of((1, 2))
    x = np.zeros((1, 1, 32, 64), np.float32)
    x[..., :32] = 1.0
    x[..., 32:] = 2.0
    mapper = ttnn.create_mesh_mapper(
        mesh,
        ttnn.MeshMapperConfig(placements=[ttnn.PlacementReplicate(), ttnn.PlacementShard(3)]),
    )
    host = ttnn.from_torch(x, mesh_mapper=mapper, layout=ttnn.TILE_LAYOUT)
    dev = ttnn.from_torch(x, mesh_mapper=mapper, layout=ttnn.TILE_LAYOUT, device=mesh)
    for t in (host, dev):
        assert t.shape == ttnn.Shape([1, 1, 32, 32])
        shards = ttnn.get_device_tensors(t)
        assert len(shards) == 2
        np.testing.assert_array_equal(ttnn.to_numpy(shards[0]), np.ones((1, 1, 32, 32)))
        np.testing.assert_array_equal(ttnn.to_numpy(shards[1]), np.full((1, 1, 32, 32), 2.0))

    dev_repr = repr(dev)
    assert dev_repr.count("device_id:") == 2
    assert dev_repr.index("device_id:0") < dev_repr.index("device_id:1")
    assert dev_repr.count("shape=Shape([1, 1, 32, 32])") == 2
    assert dev_repr.count("dtype=DataType::FLOAT32") == 2
    assert dev_repr.count("layout=Layout::TILE") == 2
    # Device 0's shard holds 1.0 and device 1's 2.0.
    first, second = dev_repr.split("device_id:1")
    assert "1.00000" in first and "2.00000" not in first
    assert "2.00000" in second and "1.00000" not in second

    host_repr = repr(host)
    assert "device_id" not in host_repr
    assert host_repr.count("ttnn.Tensor(") == 2
    assert host_repr.count("shape=Shape([1, 1, 32, 32])") == 2


def test_galaxy_shard_tensor_to_mesh_is_row_major():
    # ShardTensorToMesh on 8x4 puts chunk k on device (k // 4, k % 4), i.e. device id k.
    mesh = mesh_of((8, 4))
    x = np.arange(32, dtype=np.int32).reshape(1, 32)
    t = ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1), device=mesh)
    values = [int(ttnn.to_numpy(s)[0, 0]) for s in ttnn.get_device_tensors(t)]
    assert values == list(range(32))
    for k in range(32):
        r, c = divmod(k, 4)
        assert mesh.get_device_id(ttnn.MeshCoordinate(r, c)) == k


def test_t3000_hybrid_examples():
    mesh = mesh_of((2, 4))
    x = np.arange(2 * 8, dtype=np.float32).reshape(2, 8)
    # dims=(0, None): row r gets batch slice r, copied across its 4 columns.
    t = ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0, None)))
    rows = [ttnn.to_numpy(s) for s in ttnn.get_device_tensors(t)]
    for k, got in enumerate(rows):
        np.testing.assert_array_equal(got, x[k // 4 : k // 4 + 1])
    # dims=(None, -1): the last dim in 4 pieces, copied down the rows.
    t = ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(None, -1)))
    cols = [ttnn.to_numpy(s) for s in ttnn.get_device_tensors(t)]
    for k, got in enumerate(cols):
        np.testing.assert_array_equal(got, x[:, 2 * (k % 4) : 2 * (k % 4) + 2])


def test_replicated_compose_keeps_every_copy():
    mesh = mesh_of((2, 4))
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    t = ttnn.from_torch(x, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh), device=mesh)
    out = ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))
    assert out.shape == (8, 2, 3)
    np.testing.assert_array_equal(out, np.broadcast_to(x, (8, 2, 3)))
    out2 = ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, (2, 4), dims=(0, 1)))
    assert out2.shape == (2, 8, 3)
    # TT-NN tests slice one copy back out after composing a replicated axis.
    np.testing.assert_array_equal(out2[0:1, 0:2], x)


def test_composer_dims_differ_from_mapper_dims():
    # Sharded on (0, 1) but composed on (1, 0): the blocks are stitched in the composer's order.
    mesh = mesh_of((2, 4))
    x = np.arange(2 * 8 * 3, dtype=np.int32).reshape(2, 8, 3)
    t = ttnn.from_torch(
        x, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0, 1)), device=mesh
    )
    ref = shard(x, (2, 4), [0, 1])
    out = ttnn.to_numpy(
        t, mesh_composer=ttnn.create_mesh_composer(mesh, ttnn.MeshComposerConfig(1, 0))
    )
    expect = concat([ref[c] for c in coords((2, 4))], (2, 4), [1, 0])
    assert out.shape == (4, 4, 3)
    np.testing.assert_array_equal(out, expect)


def test_mapper_placements_and_map():
    mesh = mesh_of((2, 4))
    assert ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(None, 3)).placements == (
        ttnn.PlacementReplicate(),
        ttnn.PlacementShard(3),
    )
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    pieces = ttnn.ShardTensorToMesh(mesh, dim=1).map(x)
    assert [p.tolist() for p in pieces] == [x[:, k : k + 1].tolist() for k in range(8)]


# ---------------------------------------------------------------------------------------------
# Block floats: the round trip holds to TT-NN's tolerances, each shard quantized on its own
# ---------------------------------------------------------------------------------------------

BLOCK_CASES = [
    ((1, 2), (None, 2)),
    ((2, 4), (0, 2)),
    ((2, 4), (2, 1)),
    ((8, 4), (1, None)),
]


@pytest.mark.parametrize(
    ("dtype", "threshold", "bits"),
    [(ttnn.bfloat8_b, 0.99, 7), (ttnn.bfloat4_b, 0.9, 3)],
    ids=["bfloat8_b", "bfloat4_b"],
)
@pytest.mark.parametrize(
    ("mesh_shape", "dims"), BLOCK_CASES, ids=[f"{m[0]}x{m[1]}-{d}" for m, d in BLOCK_CASES]
)
@pytest.mark.parametrize("on_device", [True, False], ids=["device", "host"])
def test_block_float_round_trip(mesh_shape, dims, dtype, threshold, bits, on_device):
    mesh = mesh_of(mesh_shape)
    shape = _shape_for(_counts(mesh_shape, list(dims)), [1, 2, 8])
    rng = np.random.default_rng(7)
    # Small values (|x| < 0.5) next to tile padding: zeros must not set the shared exponent.
    x = (rng.standard_normal(shape) * 0.1).astype(ml_dtypes.bfloat16).astype(np.float32)
    mapper = ttnn.ShardTensor2dMesh(mesh, mesh_shape, dims=dims)
    t = ttnn.from_torch(x, dtype=dtype, mesh_mapper=mapper, device=mesh if on_device else None)
    assert t.layout == ttnn.TILE_LAYOUT  # forced for block floats
    assert t.dtype == dtype
    ref = shard(x, mesh_shape, list(dims))
    # Every device holds its own shard quantized on its own (groups never span devices).
    for k, c in enumerate(coords(mesh_shape)):
        got = ttnn.to_numpy(ttnn.get_device_tensors(t)[k]).astype(np.float64)
        np.testing.assert_array_equal(got, blockfloat_quantize(ref[c], bits), err_msg=f"{c}")
    cdims = [d if d is not None else 0 for d in dims]
    out = ttnn.to_numpy(t, mesh_composer=_composer_2d(mesh, mesh_shape, cdims))
    expect = concat([ref[c] for c in coords(mesh_shape)], mesh_shape, cdims)
    assert out.shape == expect.shape
    assert pcc(out, expect) >= threshold


# ---------------------------------------------------------------------------------------------
# distribute()
# ---------------------------------------------------------------------------------------------


def test_distribute_sets_and_restores_defaults():
    mesh = mesh_of((1, 2))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    mapper = ttnn.ShardTensorToMesh(mesh, dim=1)
    composer = ttnn.ConcatMeshToTensor(mesh, dim=1)
    with ttnn.distribute(mapper):
        t = ttnn.from_torch(x, device=mesh)
        assert t.placements == (ttnn.PlacementReplicate(), ttnn.PlacementShard(1))
        assert t.shape == ttnn.Shape([2, 2])
        # An explicit mapper wins over the default.
        r = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
        assert r.shape == ttnn.Shape([1, 4])
        with ttnn.distribute(composer):
            np.testing.assert_array_equal(ttnn.to_numpy(t), x)
            np.testing.assert_array_equal(
                ttnn.to_numpy(r, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)), x
            )
        with pytest.raises(RuntimeError, match="Supply a mesh composer"):
            ttnn.to_numpy(t)
    # Restored on exit: no default mapper (replicated), no default composer.
    after = ttnn.from_torch(x, device=mesh)
    assert after.shape == ttnn.Shape([2, 4])
    with pytest.raises(RuntimeError, match="Supply a mesh composer"):
        ttnn.to_torch(t)


def test_distribute_restores_after_exception():
    mesh = mesh_of((1, 2))
    with pytest.raises(KeyError), ttnn.distribute(ttnn.ShardTensorToMesh(mesh, dim=0)):
        raise KeyError("boom")
    t = ttnn.from_torch(np.ones((2, 2), np.float32), device=mesh)
    assert t.shape == ttnn.Shape([2, 2])


@pytest.mark.parametrize("bad", [3, "mapper", None])
def test_distribute_rejects_other_objects(bad):
    with (
        pytest.raises(
            ValueError,
            match=r"^Argument must be an instance of either TensorToMesh or MeshToTensor\..*\nfix:",
        ),
        ttnn.distribute(bad),
    ):
        pass


@pytest.mark.parametrize(
    ("mesh_shape", "override"), [((2, 4), (1, 8)), ((8, 4), (1, 32)), ((8, 4), (8, 4))]
)
def test_override_with_other_shape_lays_shards_row_major(mesh_shape, override):
    # Same device count, another shape: TT-NN lays the distribution out row-major over the mesh.
    mesh = mesh_of(mesh_shape)
    n = int(np.prod(mesh_shape))
    x = np.arange(override[0] * 2 * n * 3, dtype=np.int32).reshape(override[0] * 2, n, 3)
    cfg = ttnn.MeshMapperConfig(
        [ttnn.PlacementShard(0), ttnn.PlacementShard(1)]
        if override[0] > 1
        else [_pl(None), _pl(1)],
        mesh_shape_override=ttnn.MeshShape(override),
    )
    t = ttnn.from_torch(x, mesh_mapper=ttnn.create_mesh_mapper(mesh, cfg), device=mesh)
    dims = [0 if override[0] > 1 else None, 1]
    ref_dist = shard(x, override, dims)  # keyed by distribution coordinate
    ref = {c: ref_dist[d] for c, d in zip(coords(mesh_shape), coords(override))}
    _check_shards(t, ref, mesh_shape)
    cdims = [0, 1]
    composer = ttnn.ConcatMesh2dToTensor(mesh, override, dims=cdims)
    expect = concat([ref_dist[d] for d in coords(override)], override, cdims)
    _assert_bits_equal(ttnn.to_numpy(t, mesh_composer=composer), expect)


def test_override_that_does_not_line_up_says_how_to_fix():
    # (2, 16) over 4x8 would need one mesh axis to split two tensor dims.
    mesh = mesh_of((4, 8))
    cfg = ttnn.MeshMapperConfig(
        [ttnn.PlacementShard(0), ttnn.PlacementShard(1)], mesh_shape_override=ttnn.MeshShape(2, 16)
    )
    with pytest.raises(
        ttnn.ShardingError, match=r"MeshShape\(\[2, 16\]\) does not line up"
    ) as info:
        ttnn.create_mesh_mapper(mesh, cfg)
    assert "fix: reshape the mesh" in str(info.value)


def test_concat_mesh_2d_refuses_the_same_dim_twice():
    mesh = mesh_of((2, 4))
    with pytest.raises(ttnn.ShardingError, match=r"dims=\(3, 3\).*must be different"):
        ttnn.ConcatMesh2dToTensor(mesh, mesh_shape=(2, 4), dims=(3, 3))


# ---------------------------------------------------------------------------------------------
# The parallelism plan as a mapper (logical axes under ParallelDims)
# ---------------------------------------------------------------------------------------------


def test_plan_mesh_mapper_on_a_two_axis_plan_places_like_numpy() -> None:
    """On the mesh's own 2-D plan (dp rows, tp columns) a [in, out] weight with logical axes
    (embed, mlp) splits its columns over tp and is whole along dp (``ShardTensor2dMesh``); a
    (batch, embed) tensor splits its rows over dp; (embed,) is replicated."""
    from ttjax.plan import LogicalAxes, ParallelDims

    mesh = mesh_of((2, 4))
    dims = ParallelDims((2, 4), ("dp", "tp"))
    rng = np.random.default_rng(0)
    cases = [
        (LogicalAxes("embed", "mlp"), [None, 1], lambda w, r, c: np.split(w, 4, axis=1)[c]),
        (LogicalAxes("batch", "embed"), [0, None], lambda w, r, c: np.split(w, 2, axis=0)[r]),
        (
            LogicalAxes("batch", "vocab"),
            [0, 1],
            lambda w, r, c: np.split(np.split(w, 2, axis=0)[r], 4, axis=1)[c],
        ),
        (LogicalAxes("embed", None), [None, None], lambda w, r, c: w),
    ]
    for axes, per_axis, piece in cases:
        assert ttnn.shard_dims(dims, axes) == per_axis, axes
        w = rng.standard_normal((8, 16)).astype(np.float32)
        t = ttnn.from_torch(w, device=mesh, mesh_mapper=ttnn.plan_mesh_mapper(mesh, dims, axes))
        pieces = [np.asarray(ttnn.to_torch(d)) for d in ttnn.get_device_tensors(t)]
        for i, p in enumerate(pieces):  # row-major device order
            np.testing.assert_array_equal(p, piece(w, i // 4, i % 4), err_msg=f"{axes} dev {i}")


def test_plan_mesh_mapper_flat_plan_and_a_plan_that_does_not_fit() -> None:
    from ttjax.errors import ShardingError
    from ttjax.plan import LogicalAxes, ParallelDims

    mesh = mesh_of((2, 4))
    flat = ttnn.plan_mesh_mapper(mesh, ParallelDims((8,), ("tp",)), LogicalAxes("vocab", "embed"))
    assert isinstance(flat, ttnn.ShardTensorToMesh) and flat.shard_dim == 0
    w = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    t = ttnn.from_torch(w, device=mesh, mesh_mapper=flat)
    for i, d in enumerate(ttnn.get_device_tensors(t)):
        np.testing.assert_array_equal(np.asarray(ttnn.to_torch(d)), w[2 * i : 2 * i + 2])
    with pytest.raises(ShardingError, match=r"fits neither all 8 devices[\s\S]*fix:"):
        ttnn.plan_mesh_mapper(mesh, ParallelDims((4,), ("tp",)), LogicalAxes("vocab"))


# ---------------------------------------------------------------------------------------------
# Fewer chunks than devices: TT-NN places them on the first devices only
# ---------------------------------------------------------------------------------------------


def _chunks(x: np.ndarray, dim: int, n: int) -> list[np.ndarray]:
    """TT-NN's chunk_ndim along one dim: pieces of ceil(size / n), as many as it takes."""
    size = -(-x.shape[dim] // n)
    return [np.take(x, range(i, i + size), axis=dim) for i in range(0, x.shape[dim], size)]


@pytest.mark.parametrize(
    ("mesh_shape", "rows", "block"),
    [((1, 8), 1, (1, 1)), ((1, 8), 10, (1, 5)), ((2, 4), 2, (1, 2)), ((2, 4), 4, (1, 4))],
)
def test_1d_split_with_fewer_chunks_lives_on_the_first_devices(mesh_shape, rows, block):
    """qwen25_vl's vision input: ShardTensorToMesh(dim=0) of a size-1 dim on 1x8 (model_config.py:
    76). TT-NN gives the chunks to the first devices only; ops with whole-mesh replicated
    weights run there and ConcatMeshToTensor returns just those chunks."""
    mesh = mesh_of(mesh_shape)
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 1, 32, 32)).astype(np.float32)
    t = ttnn.from_torch(
        x,
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    assert tuple(t.mesh_device.shape) == block
    assert t.mesh_device.get_device_ids() == mesh.get_device_ids()[: int(np.prod(block))]
    spec = ttnn.abstract_tensor(
        x.shape, ttnn.float32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )
    assert spec.mesh_device is t.mesh_device and spec.shape == t.shape
    want = _chunks(x, 0, mesh.get_num_devices())
    got = ttnn.get_device_tensors(t)
    assert len(got) == len(want)
    for mine, ref in zip(got, want):
        np.testing.assert_array_equal(ttnn.to_numpy(mine), ref)

    w = rng.standard_normal((1, 1, 32, 64)).astype(np.float32)
    b = rng.standard_normal((1, 1, 1, 64)).astype(np.float32)
    rep = ttnn.ReplicateTensorToMesh(mesh)
    tw, tb = (
        ttnn.from_torch(
            a, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=rep
        )
        for a in (w, b)
    )
    y = ttnn.add(ttnn.matmul(t, tw), tb)
    assert y.mesh_device is t.mesh_device
    for mine, ref in zip(ttnn.get_device_tensors(y), want):
        np.testing.assert_allclose(ttnn.to_numpy(mine), ref @ w + b, rtol=1e-5, atol=1e-5)
    out = ttnn.to_numpy(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))
    np.testing.assert_allclose(out, x @ w + b, rtol=1e-5, atol=1e-5)


def test_split_with_fewer_chunks_round_trips_through_host_and_to_device():
    mesh = mesh_of((1, 8))
    x = np.arange(2 * 3, dtype=np.float32).reshape(2, 3)
    host = ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    t = ttnn.to_device(host, mesh)
    assert tuple(t.mesh_device.shape) == (1, 2)
    np.testing.assert_array_equal(
        ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1)),
        np.concatenate([x[:1], x[1:]], axis=1),
    )


def test_partial_2d_distribution_lives_on_its_submesh_block():
    """A 2-D distribution shape that fits in the mesh keeps its coordinates (TT-NN's SUBMESH
    mode): (2, 2) over 2x4 fills the left half; a composer of that shape reads it back."""
    mesh = mesh_of((2, 4))
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    t = ttnn.from_torch(
        x, device=mesh, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, mesh_shape=(2, 2), dims=(0, 1))
    )
    assert tuple(t.mesh_device.shape) == (2, 2)
    assert t.mesh_device.get_device_ids() == [mesh.get_device_ids()[i] for i in (0, 1, 4, 5)]
    ref = shard(x, (2, 2), [0, 1])
    for mine, c in zip(ttnn.get_device_tensors(t), coords((2, 2))):
        np.testing.assert_array_equal(ttnn.to_numpy(mine), ref[c])
    composer = ttnn.ConcatMesh2dToTensor(mesh, mesh_shape=(2, 2), dims=(0, 1))
    np.testing.assert_array_equal(ttnn.to_numpy(t, mesh_composer=composer), x)
    with pytest.raises(
        ttnn.ShardingError, match=r"ND composition requires the number of tensors 4"
    ):
        ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, (2, 4), dims=(0, 1)))
    # A 1-D composer over part of the mesh reads its first devices (row-major), as TT-NN does.
    y = np.arange(2 * 8, dtype=np.float32).reshape(2, 8)
    full = ttnn.from_torch(y, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1))
    half = ttnn.create_mesh_composer(
        mesh, ttnn.MeshComposerConfig([1], mesh_shape_override=ttnn.MeshShape(2))
    )
    np.testing.assert_array_equal(ttnn.to_numpy(full, mesh_composer=half), y[:, :2])


def test_fewer_chunks_that_make_no_block_or_uneven_chunks_say_how_to_fix():
    wide = mesh_of((2, 4))
    with pytest.raises(ttnn.ShardingError, match=r"shape \[6, 2\].*6 chunks of 1") as e:
        ttnn.from_torch(
            np.zeros((6, 2), np.float32), device=wide, mesh_mapper=ttnn.ShardTensorToMesh(wide, 0)
        )
    assert "fix: pad dim 0 to a multiple of 8" in str(e.value)
    row = mesh_of((1, 8))
    with pytest.raises(ttnn.ShardingError, match=r"size 9.*Shard shape mismatch: 9 % 8") as e:
        ttnn.from_torch(
            np.zeros((9, 2), np.float32), device=row, mesh_mapper=ttnn.ShardTensorToMesh(row, 0)
        )
    assert "fix:" in str(e.value)
    # An N-D split needs one chunk per position (TT-NN: "ND sharding requires ...").
    with pytest.raises(ttnn.ShardingError, match="does not split evenly"):
        ttnn.from_torch(
            np.zeros((1, 8), np.float32),
            device=wide,
            mesh_mapper=ttnn.ShardTensor2dMesh(wide, (2, 4), dims=(0, 1)),
        )
