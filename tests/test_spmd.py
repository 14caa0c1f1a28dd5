"""ttjax.spmd (torch-xla's names): Mesh, mark_sharding on arrays / jit tracers / ttjax tensors /
nnx variables, clear_sharding, the global mesh, errors; checked against numpy slices and the
single-device computation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import mesh_of
from flax import nnx

import ttjax as ttnn
import ttjax.spmd as xs
from ttjax.errors import MeshMismatchError, MeshShapeError, ShardingError


@pytest.fixture(scope="module")
def mesh24() -> xs.Mesh:
    return xs.Mesh(np.arange(8), (2, 4), ("batch", "model"))


def shards(x: jax.Array) -> dict[int, np.ndarray]:
    return {s.device.id: np.asarray(s.data) for s in x.addressable_shards}


def test_mesh_shape_size_and_logical_mesh(mesh24: xs.Mesh) -> None:
    assert list(mesh24.shape().items()) == [("batch", 2), ("model", 4)]
    assert mesh24.size() == 8
    np.testing.assert_array_equal(mesh24.get_logical_mesh(), np.arange(8).reshape(2, 4))
    assert mesh24.get_axis_name_idx("model") == 1
    assert xs.Mesh.from_mesh_device(mesh_of((2, 4))).axis_names == ("y", "x")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((np.arange(8), (2, 2), ("a", "b")), r"holds 4 devices but device_ids has 8[\s\S]*fix:"),
        (([0, 0, 1, 2], (2, 2), ("a", "b")), r"\[0\] more than once[\s\S]*fix:"),
        (([0, 1, 2, 999], (2, 2), ("a", "b")), r"\[999\] do not exist[\s\S]*fix:"),
        ((np.arange(4), (2, 2), ("a",)), r"2 distinct names[\s\S]*fix:"),
    ],
)
def test_bad_mesh_raises(args, match: str) -> None:
    with pytest.raises(MeshShapeError, match=match):
        xs.Mesh(*args)


@pytest.mark.parametrize(
    ("spec", "split"),  # split: mesh axes per tensor dim, for the numpy reference
    [
        (("model", None), [("model",), ()]),
        ((1, 0), [("model",), ("batch",)]),
        ((None, ("batch", "model")), [(), ("batch", "model")]),
        ((None, None), [(), ()]),
        (("batch", None), [("batch",), ()]),
    ],
)
def test_mark_sharding_places_blocks_like_numpy(mesh24: xs.Mesh, spec, split) -> None:
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    y = xs.mark_sharding(x, mesh24, spec)
    np.testing.assert_array_equal(np.asarray(y), x)
    sizes = mesh24.shape()
    for dev_id, block in shards(y).items():
        coord = dict(zip(mesh24.axis_names, np.argwhere(mesh24.get_logical_mesh() == dev_id)[0]))
        want = x
        for d, axes in enumerate(split):
            n, k = 1, 0
            for a in axes:  # major axis first
                n, k = n * sizes[a], k * sizes[a] + int(coord[a])
            want = np.split(want, n, axis=d)[k]
        np.testing.assert_array_equal(block, want, err_msg=f"device {dev_id}")


def test_mark_sharding_inside_jit_constrains_and_matches_single_device(mesh24: xs.Mesh) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((32, 16)).astype(np.float32)
    x = rng.standard_normal((4, 16)).astype(np.float32)

    @jax.jit
    def f(w, x):
        w = xs.mark_sharding(w, mesh24, ("model", None))  # column-parallel
        h = xs.mark_sharding(x @ w.T, mesh24, ("batch", "model"))
        return h

    out = f(w, x)
    assert out.sharding.spec == jax.sharding.PartitionSpec("batch", "model")
    np.testing.assert_allclose(np.asarray(out), x @ w.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (("modle", None), r"'modle'.*not in the mesh's axes \('batch', 'model'\)[\s\S]*fix:"),
        ((None, None, None), r"3 entries but the tensor has rank 2[\s\S]*fix:"),
        # torch-xla asserts "Partition spec length (1) should be equal to the input rank (2)."
        (("model",), r"Partition spec length \(1\) should be equal to the input rank \(2\)"),
        ((), r"Partition spec length \(0\) should be equal to the input rank \(2\)[\s\S]*fix:"),
        (("model", "model"), r"'model' shards both dim 0 and dim 1[\s\S]*fix:"),
        ((5, None), r"index 5 .* out of range[\s\S]*fix:"),
        ("model", r"not a tuple[\s\S]*fix:"),
    ],
)
def test_bad_partition_spec_raises(mesh24: xs.Mesh, spec, match: str) -> None:
    with pytest.raises(ShardingError, match=match):
        xs.mark_sharding(np.zeros((8, 6), np.float32), mesh24, spec)


def test_clear_sharding_and_global_mesh(mesh24: xs.Mesh) -> None:
    xs.set_global_mesh(None)
    with pytest.raises(ShardingError, match=r"no global mesh[\s\S]*fix: .*set_global_mesh"):
        xs.mark_sharding(np.zeros((8, 4)), None, ("batch", None))
    xs.set_global_mesh(mesh24)
    try:
        assert xs.get_global_mesh() is mesh24
        y = xs.mark_sharding(np.ones((8, 4), np.float32), None, ("model", "batch"))
        assert xs.get_partition_spec(y) == jax.sharding.PartitionSpec("model", "batch")
        z = xs.clear_sharding(y)
        assert z.sharding.is_fully_replicated and len(z.sharding.device_set) == 8
        np.testing.assert_array_equal(np.asarray(z), np.ones((8, 4)))
    finally:
        xs.set_global_mesh(None)


def test_ttjax_tensor_gets_tt_nn_placements() -> None:
    mesh = mesh_of((2, 4))
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    t = ttnn.from_torch(x, device=mesh, dtype=ttnn.float32)  # replicated
    s = xs.mark_sharding(t, mesh, ("y", "x"))
    assert s.placements == (ttnn.PlacementShard(0), ttnn.PlacementShard(1))
    assert s.shape == ttnn.Shape([2, 2])
    composer = ttnn.ConcatMesh2dToTensor(mesh, mesh_shape=(2, 4), dims=(0, 1))
    np.testing.assert_array_equal(ttnn.to_numpy(s, mesh_composer=composer), x)
    np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(s)[5]), x[2:4, 2:4])
    back = xs.clear_sharding(s)
    assert back.placements == (ttnn.PlacementReplicate(), ttnn.PlacementReplicate())
    with pytest.raises(MeshMismatchError, match=r"not the mesh the tensor lives on[\s\S]*fix:"):
        xs.mark_sharding(t, xs.Mesh(np.arange(8)[::-1], (2, 4), ("y", "x")), ("y", None))
    with pytest.raises(ShardingError, match=r"not in mesh order[\s\S]*fix: write \('y', 'x'\)"):
        xs.mark_sharding(t, mesh, (None, ("x", "y")))


class _Linear(nnx.Module):
    def __init__(self, w: np.ndarray) -> None:
        self.kernel = nnx.Param(jnp.asarray(w))

    def __call__(self, x: jax.Array) -> jax.Array:
        return x @ self.kernel[...]


def test_nnx_variable_is_annotated_in_place(mesh24: xs.Mesh) -> None:
    before = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    lin = _Linear(before)
    kernel = lin.kernel
    out = xs.mark_sharding(lin.kernel, mesh24, (None, "model"))
    assert out is kernel and lin.kernel is kernel
    assert xs.get_partition_spec(lin.kernel) == jax.sharding.PartitionSpec(None, "model")
    np.testing.assert_array_equal(np.asarray(lin.kernel[...]), before)
    x = np.ones((2, 16), np.float32)
    np.testing.assert_allclose(np.asarray(lin(x)), x @ before, rtol=1e-5)


def test_inspect_maps_partitioner_collectives_to_mesh_axes(mesh24: xs.Mesh) -> None:
    """Column- then row-parallel: XLA inserts one all-reduce over 'model' (groups of 4)."""
    rng = np.random.default_rng(3)
    w1 = xs.mark_sharding(rng.standard_normal((32, 16)).astype(np.float32), mesh24, ("model", None))
    w2 = xs.mark_sharding(rng.standard_normal((16, 32)).astype(np.float32), mesh24, (None, "model"))
    x = xs.mark_sharding(rng.standard_normal((4, 16)).astype(np.float32), mesh24, (None, None))

    def mlp(w1, w2, x):
        return xs.mark_sharding(jax.nn.relu(x @ w1.T) @ w2.T, mesh24, (None, None))

    report = ttnn.inspect.inspect(mlp, w1, w2, x, mesh=mesh24.jax_mesh)
    reduces = [c for c in report.collectives if c.kind == "all-reduce"]
    assert len(reduces) == 1 and reduces[0].mesh_axes == ("model",)
    assert reduces[0].replica_groups == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert reduces[0].bytes_per_device > 0


# torch-xla's own test suite (test/spmd/test_xla_sharding.py), rewritten for ttjax.spmd.


def test_unnamed_mesh_keeps_axis_names_none_and_takes_indices() -> None:
    """``Mesh(ids, shape)``: no invented names; ``shape()`` is keyed by axis index; partition
    specs use indices (a name is refused); placement matches numpy blocks."""
    mesh = xs.Mesh(np.arange(8), (2, 4))
    assert mesh.axis_names is None
    assert list(mesh.shape().items()) == [(0, 2), (1, 4)]
    assert mesh.get_axis_name_idx("model") is None
    assert "axis_names=None" in repr(mesh)
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    y = xs.mark_sharding(x, mesh, (1, 0))  # dim 0 over mesh axis 1 (4), dim 1 over axis 0 (2)
    for dev_id, block in shards(y).items():
        r, c = np.argwhere(mesh.get_logical_mesh() == dev_id)[0]
        np.testing.assert_array_equal(block, np.split(np.split(x, 4, 0)[c], 2, 1)[r])
    with pytest.raises(
        ShardingError, match=r"'model'.*its axes are unnamed[\s\S]*fix: use an index"
    ):
        xs.mark_sharding(x, mesh, ("model", None))


def test_get_axis_name_idx_of_an_unknown_name_is_none(mesh24: xs.Mesh) -> None:
    assert [mesh24.get_axis_name_idx(n) for n in ("batch", "model", "data")] == [0, 1, None]


def test_get_1d_mesh() -> None:
    n = ttnn.get_num_devices()
    named = xs.get_1d_mesh("data")
    assert (named.mesh_shape, named.axis_names) == ((n,), ("data",))
    assert list(named.shape().items()) == [("data", n)]
    x = np.arange(n * 8, dtype=np.float32).reshape(n, 8)
    y = xs.mark_sharding(x, named, ("data", None))
    assert len(shards(y)) == n
    for dev_id, block in shards(y).items():
        np.testing.assert_array_equal(block, x[dev_id : dev_id + 1])
    unnamed = xs.get_1d_mesh()
    assert (unnamed.mesh_shape, unnamed.axis_names) == ((n,), None)
    np.testing.assert_array_equal(unnamed.get_logical_mesh(), np.arange(n))


def test_uneven_dim_is_padded_inside_jit_and_when_placed(mesh24: xs.Mesh) -> None:
    """10 rows over 4 devices (blocks of 3, 3, 3, 1): inside jax.jit XLA pads the shards and the
    logical shape and values stay; a concrete array comes back as an XLAShardedTensor stored
    padded (12 rows, zeros past row 10), whose matmuls, sums and gradients equal numpy's."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((10, 8)).astype(np.float32)

    @jax.jit
    def f(x):
        return xs.mark_sharding(x * 2.0, mesh24, ("model", None)).sum(axis=1)

    out = f(x)
    assert out.shape == (10,)
    np.testing.assert_allclose(np.asarray(out), (x * 2.0).sum(axis=1), rtol=1e-6)

    w = xs.mark_sharding(x, mesh24, ("model", None))
    assert isinstance(w, xs.XLAShardedTensor)
    assert w.shape == (10, 8) and w.storage.shape == (12, 8)
    assert xs.get_partition_spec(w) == jax.sharding.PartitionSpec("model", None)
    np.testing.assert_array_equal(np.asarray(w), x)
    padded = np.concatenate([x, np.zeros((2, 8), np.float32)])
    for dev_id, block in shards(w.storage).items():
        c = int(np.argwhere(mesh24.get_logical_mesh() == dev_id)[0][1])
        np.testing.assert_array_equal(block, padded[3 * c : 3 * c + 3], err_msg=f"{dev_id}")
    v = rng.standard_normal((8, 5)).astype(np.float32)
    u = rng.standard_normal((3, 10)).astype(np.float32)
    prog = jax.jit(lambda w, v, u: (w @ v, u @ w, w.sum(axis=0), jnp.max(jnp.asarray(w), 0)))
    for got, want in zip(prog(w, v, u), (x @ v, u @ x, x.sum(axis=0), x.max(axis=0))):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    square = jax.grad(lambda w: jnp.sum(jnp.asarray(w) ** 2))
    for g in (jax.jit(square)(w), square(w)):  # compiled, and eager autodiff
        assert isinstance(g, xs.XLAShardedTensor) and g.storage.shape == (12, 8)
        np.testing.assert_allclose(np.asarray(g), 2 * x, rtol=1e-6)
        assert not np.asarray(g.storage)[10:].any()  # the padding's gradient is zero
    back = xs.clear_sharding(w)
    assert back.sharding.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(back), x)
    again = xs.mark_sharding(w, mesh24, (None, "model"))  # 8 columns over 4: even again
    assert isinstance(again, jax.Array) and again.sharding.spec == jax.sharding.PartitionSpec(
        None, "model"
    )


# torch-xla's test_xla_sharding.py (test_xla_shards, test_padded_xla_shards,
# test_replicated_xla_shards, test_partially_replicated_xla_shards) against numpy.


@pytest.mark.parametrize("extra", [0, 1], ids=["even", "padded"])
def test_xla_shards_and_padded_xla_shards(extra: int) -> None:
    """n (or n + 1) elements over a 1-D mesh of n devices: every shard holds ceil(len / n)
    elements, zero-padded; indices clip at the end; unpadded_data is the global slice."""
    n = 8
    mesh = xs.Mesh(np.arange(n), (n,))
    t = np.arange(n + extra, dtype=np.float32)
    xt = xs.mark_sharding(t, mesh, (0,))
    assert isinstance(xt, xs.XLAShardedTensor) == bool(extra)
    shards = xs.local_shards(xt)
    assert len(shards) == n
    shard_len = -(-(n + extra) // n)
    for i, shard in enumerate(shards):
        assert shard.data.shape == (shard_len,)
        start, end = min(i * shard_len, t.shape[0]), min((i + 1) * shard_len, t.shape[0])
        expected = np.pad(np.arange(start, end, dtype=np.float32), (0, shard_len - (end - start)))
        np.testing.assert_array_equal(shard.data, expected)
        assert shard.indices == [slice(start, end, 1)]
        np.testing.assert_array_equal(shard.unpadded_data, t[tuple(shard.indices)])
        assert shard.replica_id == 0 and shard.shard_device.endswith(str(i))
    if extra:
        assert [s.data.tolist() for s in shards[4:6]] == [[8.0, 0.0], [0.0, 0.0]]
        assert xt.local_shards[4].indices == [slice(8, 9, 1)]


def test_replicated_and_partially_replicated_xla_shards() -> None:
    n = 8
    t = np.arange(n, dtype=np.float32)
    rep = xs.local_shards(xs.mark_sharding(t, xs.Mesh(np.arange(n), (n,)), (None,)))
    assert [s.replica_id for s in rep] == list(range(n))
    for s in rep:
        assert s.indices is Ellipsis
        np.testing.assert_array_equal(s.data, t)
        np.testing.assert_array_equal(s.unpadded_data, t)
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    part = xs.local_shards(xs.mark_sharding(x, xs.Mesh(np.arange(n), (n // 2, 2)), (None, 1)))
    for i, s in enumerate(part):
        start, end = (i % 2) * 8, (i % 2 + 1) * 8
        assert s.data.shape == (16, 8) and s.indices == [slice(0, 16, 1), slice(start, end, 1)]
        np.testing.assert_array_equal(s.data, x[tuple(s.indices)])
        assert s.replica_id == i // 2


def test_tt_nn_mapper_keeps_torch_chunk_pieces_where_spmd_pads() -> None:
    """The same 10 rows over 8 devices: TT-NN's ShardTensorToMesh cuts torch.chunk's pieces (5
    of 2, on the first 5 devices), spmd pads (8 blocks of 2, the last 3 all padding); a ttjax
    Tensor keeps TT-NN's even rule under mark_sharding, so an uneven spec is refused."""
    torch = pytest.importorskip("torch")
    mesh = mesh_of((1, 8))
    x = np.arange(10 * 4, dtype=np.float32).reshape(10, 4)
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))
    pieces = [p.numpy() for p in torch.chunk(torch.from_numpy(x), 8, dim=0)]
    got = [ttnn.to_numpy(d) for d in ttnn.get_device_tensors(t)]
    assert len(got) == len(pieces) == 5
    for mine, ref in zip(got, pieces):
        np.testing.assert_array_equal(mine, ref)
    spmd = xs.local_shards(xs.mark_sharding(x, xs.Mesh.from_mesh_device(mesh), (("y", "x"), None)))
    assert [s.unpadded_data.shape[0] for s in spmd] == [2, 2, 2, 2, 2, 0, 0, 0]
    whole = ttnn.from_torch(x, device=mesh, dtype=ttnn.float32)
    with pytest.raises(ShardingError, match=r"size 10, .* size 8 [\s\S]*TT-NN's even split"):
        xs.mark_sharding(whole, mesh, (("y", "x"), None))


def test_mesh_axis_spec_from_logical_axes_places_like_numpy(mesh24: xs.Mesh) -> None:
    """The plan's rule table on a torch-xla mesh: seed 004's names mapped to roles, each logical
    axis to its mesh axis name; placing with the spec gives each device numpy's block."""
    from ttjax.plan import LogicalAxes, ParallelDims

    roles = {"batch": "dp", "model": "tp"}
    assert xs.plan_of(mesh24, roles) == ParallelDims((2, 4), ("dp", "tp"))
    assert xs.plan_of(mesh24).roles == (None, None)  # names that are no role play none
    assert xs.plan_of(xs.Mesh(np.arange(8), (2, 4), ("dp", "tp"))).roles == ("dp", "tp")
    assert xs.plan_of(xs.Mesh(np.arange(8), (2, 4))).roles == (None, None)  # unnamed
    cases = {
        ("mlp", "embed"): ("model", None),  # column-parallel [out, in]
        ("embed", "heads"): (None, "model"),  # row-parallel
        ("batch", "vocab"): ("batch", "model"),
        ("embed", None): (None, None),
    }
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    for names, want in cases.items():
        spec = xs.mesh_axis_spec(mesh24, LogicalAxes(*names), roles)
        assert spec == want, names
        y = xs.mark_sharding(x, mesh24, spec)
        for dev_id, block in shards(y).items():
            r, c = np.argwhere(mesh24.get_logical_mesh() == dev_id)[0]
            piece = x
            for d, axis in enumerate(spec):
                if axis is not None:
                    n, k = (2, r) if axis == "batch" else (4, c)
                    piece = np.split(piece, n, axis=d)[k]
            np.testing.assert_array_equal(block, piece, err_msg=f"{names} device {dev_id}")
    assert xs.mesh_axis_spec(mesh24, LogicalAxes("mlp", "embed")) == (None, None)  # no roles
