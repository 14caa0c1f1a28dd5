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
        ((None, "model"), r"dim 1 .* size 6, .* size 4 of mesh axes \('model',\)[\s\S]*fix: pad"),
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


def test_uneven_dim_is_padded_inside_jit_and_refused_when_placed(mesh24: xs.Mesh) -> None:
    """10 rows over 4 devices: inside jax.jit XLA pads the shards and the logical shape (and
    values) stay; a concrete array cannot hold uneven shards, so placing one is refused."""
    x = np.arange(10 * 8, dtype=np.float32).reshape(10, 8)

    @jax.jit
    def f(x):
        return xs.mark_sharding(x * 2.0, mesh24, ("model", None)).sum(axis=1)

    out = f(x)
    assert out.shape == (10,)
    np.testing.assert_allclose(np.asarray(out), (x * 2.0).sum(axis=1), rtol=1e-6)
    with pytest.raises(ShardingError, match=r"size 10, .* size 4 .*uneven shards[\s\S]*fix:"):
        xs.mark_sharding(x, mesh24, ("model", None))


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
