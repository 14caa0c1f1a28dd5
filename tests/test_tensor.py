"""The Tensor type: metadata, Shape, topology, printing, and JAX pytree behaviour."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from _reference import coords, shard
from conftest import mesh_of

import ttjax as ttnn


def _sharded(mesh_shape=(2, 4), dims=(0, 2)):
    mesh = mesh_of(mesh_shape)
    x = np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
    mapper = ttnn.ShardTensor2dMesh(mesh, mesh_shape, dims=dims)
    return mesh, x, ttnn.from_torch(x, mesh_mapper=mapper, device=mesh, layout=ttnn.TILE_LAYOUT)


def test_shape_type():
    s = ttnn.Shape([1, 1, 32, 32])
    assert repr(s) == str(s) == "Shape([1, 1, 32, 32])"
    assert s == (1, 1, 32, 32) and s == [1, 1, 32, 32]
    assert s != [1, 1, 32, 64]
    assert s.rank == 4 and s[-1] == 32 and len(s) == 4
    assert hash(s) == hash((1, 1, 32, 32))
    assert ttnn.Shape([1, 40, 33]).with_tile_padding() == ttnn.Shape([1, 64, 64])


def test_tensor_metadata():
    mesh, _, t = _sharded()
    assert t.shape == ttnn.Shape([1, 3, 2])  # per device
    assert isinstance(t.shape, ttnn.Shape)
    assert t.logical_shape() == t.shape
    assert t.padded_shape == ttnn.Shape([1, 32, 32])
    assert t.dtype == t.get_dtype() == ttnn.float32
    assert t.layout == t.get_layout() == ttnn.TILE_LAYOUT
    assert t.rank == t.ndim == 3
    assert t.storage_type() == ttnn.StorageType.DEVICE
    assert t.device() is mesh and t.mesh_device is mesh
    assert t.placements == (ttnn.PlacementShard(0), ttnn.PlacementShard(2))
    assert t.num_shards == 8
    assert t.is_allocated()
    # The global array is laid out so each device holds exactly its TT-NN shard.
    assert t.value.shape == (2, 3, 8)
    assert t.sharding.mesh == mesh.jax_mesh
    assert t.nbytes_per_device() == 32 * 32 * 4 * 1  # tile padded, float32


def test_tensor_topology():
    _, _, t = _sharded()
    topo = t.tensor_topology()
    assert topo.distribution_shape() == ttnn.MeshShape(2, 4)
    assert topo.placements() == [ttnn.PlacementShard(0), ttnn.PlacementShard(2)]
    assert [tuple(c) for c in topo.mesh_coords()] == coords((2, 4))
    assert topo == t.tensor_topology()
    _, _, other = _sharded(dims=(None, 2))
    assert topo != other.tensor_topology()


def test_tensor_repr_device_and_host():
    mesh = mesh_of((1, 2))
    x = np.stack([np.full((2, 2), 3.0, np.float32), np.full((2, 2), -4.0, np.float32)])
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 0))
    text = repr(t)
    assert text.startswith("device_id:0\nttnn.Tensor(")
    first, second = text.split("device_id:1")
    assert "3.00000" in first and "-4.00000" in second and "-4.00000" not in first
    assert (
        text.count("shape=Shape([1, 2, 2]), dtype=DataType::FLOAT32, layout=Layout::ROW_MAJOR)")
        == 2
    )
    host = ttnn.from_torch(np.array([[1, 2]], np.int32))
    assert (
        repr(host)
        == "ttnn.Tensor([[1, 2]], shape=Shape([1, 2]), dtype=DataType::INT32, layout=Layout::ROW_MAJOR)"
    )


def test_tensor_is_truthy_like_ttnns():
    # TT-NN's Tensor has no __bool__: `if page_table:` in model code means "was one given".
    _, _, t = _sharded()
    assert bool(t) is True
    assert (t if t else None) is t


def test_item():
    dev = mesh_of((1, 1))
    assert ttnn.from_torch(np.array([[2.5]], np.float32), device=dev).item() == 2.5
    with pytest.raises(ttnn.ShapeMismatchError, match=r"Shape\(\[1, 2\]\)"):
        ttnn.from_torch(np.array([[2.5, 1.0]], np.float32), device=dev).item()


# ---------------------------------------------------------------------------------------------
# Pytree
# ---------------------------------------------------------------------------------------------


def test_tree_flatten_round_trip():
    mesh, x, t = _sharded()
    leaves, tree = jax.tree_util.tree_flatten(t)
    assert len(leaves) == 1 and isinstance(leaves[0], jax.Array)
    back = jax.tree_util.tree_unflatten(tree, leaves)
    assert isinstance(back, ttnn.Tensor)
    assert (back.shape, back.dtype, back.layout, back.placements) == (
        t.shape,
        t.dtype,
        t.layout,
        t.placements,
    )
    assert back.mesh_device is mesh
    composer = ttnn.ConcatMesh2dToTensor(mesh, (2, 4), dims=(0, 2))
    np.testing.assert_array_equal(ttnn.to_numpy(back, mesh_composer=composer), x)
    # Inside containers too.
    nested = {"a": [t, t], "b": 3}
    assert len(jax.tree_util.tree_leaves(nested)) == 3


def test_pytree_keeps_the_whole_spec_through_flatten_and_jit():
    """The spec (placements, memory config, dtype, layout, mesh generation) is the pytree's aux
    data: a flatten/unflatten round trip and a jitted identity give back an equal spec."""
    mesh = mesh_of((2, 4))
    x = np.arange(2 * 32 * 64, dtype=np.float32).reshape(2, 32, 64)
    t = ttnn.from_torch(
        x,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0, 2)),
        memory_config=ttnn.L1_MEMORY_CONFIG,
    )
    leaves, tree = jax.tree_util.tree_flatten({"w": [t, t]})
    back = jax.tree_util.tree_unflatten(tree, leaves)["w"][1]
    jitted = jax.jit(lambda a: a)(t)
    for out in (back, jitted):
        assert out._spec == t._spec and hash(out._spec) == hash(t._spec)
        assert out.memory_config() == ttnn.L1_MEMORY_CONFIG
        assert out.placements == t.placements
        composer = ttnn.ConcatMesh2dToTensor(mesh, (2, 4), dims=(0, 2))
        np.testing.assert_array_equal(ttnn.to_numpy(out, mesh_composer=composer), x)


def test_tree_map_keeps_metadata():
    _, x, t = _sharded()
    doubled = jax.tree_util.tree_map(lambda a: a * 2, t)
    assert isinstance(doubled, ttnn.Tensor) and doubled.placements == t.placements
    ref = shard(x * 2, (2, 4), [0, 2])
    for k, c in enumerate(coords((2, 4))):
        np.testing.assert_array_equal(ttnn.to_numpy(ttnn.get_device_tensors(doubled)[k]), ref[c])


def test_jit_identity_returns_tensor_with_same_metadata():
    mesh, x, t = _sharded()
    out = jax.jit(lambda a: a)(t)
    assert isinstance(out, ttnn.Tensor)
    assert (out.shape, out.dtype, out.layout, out.placements) == (
        t.shape,
        t.dtype,
        t.layout,
        t.placements,
    )
    assert out.storage_type() == ttnn.StorageType.DEVICE
    assert out.mesh_device is mesh
    composer = ttnn.ConcatMesh2dToTensor(mesh, (2, 4), dims=(0, 2))
    np.testing.assert_array_equal(ttnn.to_numpy(out, mesh_composer=composer), x)


def test_jit_of_block_float_tensor():
    mesh = mesh_of((1, 2))
    x = np.linspace(-1, 1, 2 * 64, dtype=np.float32).reshape(2, 64)
    t = ttnn.from_torch(
        x, dtype=ttnn.bfloat8_b, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 1)
    )
    leaves = jax.tree_util.tree_leaves(t)
    assert len(leaves) == 2  # mantissas and shared exponents
    out = jax.jit(lambda a: a)(t)
    assert out.dtype == ttnn.bfloat8_b and out.placements == t.placements
    composer = ttnn.ConcatMeshToTensor(mesh, 1)
    np.testing.assert_array_equal(
        ttnn.to_numpy(out, mesh_composer=composer), ttnn.to_numpy(t, mesh_composer=composer)
    )


# -- the spec and the one way to write into a tensor ---------------------------------------------


def test_tensor_is_data_plus_spec():
    mesh, _, t = _sharded()
    spec = t.spec
    assert isinstance(spec, ttnn.tensor.TensorSpec)
    assert (spec.mesh, spec.placements, spec.dtype, spec.layout, spec.shape, spec.storage) == (
        mesh,
        t.placements,
        ttnn.float32,
        ttnn.TILE_LAYOUT,
        (1, 3, 2),
        ttnn.StorageType.DEVICE,
    )
    leaves, treedef = jax.tree_util.tree_flatten(t)
    assert len(leaves) == 1 and leaves[0] is t.value
    assert treedef.node_data()[1] is spec  # the pytree aux data is the spec itself
    with pytest.raises(AttributeError):
        t._placements = ()  # the fields are read-only: Tensor.assign is the way to write
    with pytest.raises(Exception):  # noqa: B017 - dataclasses.FrozenInstanceError
        spec.shape = (2,)


def test_spec_is_the_program_cache_key():
    mesh, x, t = _sharded()
    mesh.clear_program_cache()
    ttnn.neg(t)
    again = ttnn.from_torch(
        x + 1,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0, 2)),
    )
    assert again.spec == t.spec and hash(again.spec) == hash(t.spec)
    ttnn.neg(again)
    assert mesh.num_program_cache_entries() == 1
    other = ttnn.from_torch(
        x, device=mesh, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0, 2))
    )
    assert other.spec != t.spec  # ROW_MAJOR: another program
    ttnn.neg(other)
    assert mesh.num_program_cache_entries() == 2


def test_assign_and_copy_write_in_place():
    mesh = mesh_of((1, 2))
    a = ttnn.from_torch(
        np.arange(8, dtype=np.float32).reshape(2, 4),
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1),
    )
    b = ttnn.zeros((2, 2), ttnn.bfloat16, device=mesh)
    out = ttnn.copy(a, b)
    assert out is b
    assert b.dtype == ttnn.bfloat16 and b.placements == a.placements  # b keeps its dtype
    got = ttnn.to_numpy(b, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1)).astype(np.float32)
    np.testing.assert_array_equal(got, np.arange(8, dtype=np.float32).reshape(2, 4))
    with pytest.raises(ttnn.errors.ShapeMismatchError, match=r"ttnn.copy.*\n.*fix:"):
        ttnn.copy(a, ttnn.zeros((2, 3), device=mesh))
    other = mesh_of((2, 4))
    with pytest.raises(ttnn.errors.MeshMismatchError):
        ttnn.copy(a, ttnn.zeros((2, 2), device=other))


def test_copy_is_replayed_by_a_trace():
    """ttnn.copy (Tensor.assign) inside a capture: execute_trace writes the destination again."""
    mesh = mesh_of((1, 2))
    x = ttnn.from_torch(np.zeros((1, 4), np.float32), device=mesh)
    dst = ttnn.zeros((1, 4), ttnn.float32, device=mesh)
    tid = ttnn.begin_trace_capture(mesh)
    ttnn.copy(ttnn.add(x, 1.0), dst)
    ttnn.end_trace_capture(mesh, tid)
    ttnn.copy_host_to_device_tensor(ttnn.from_torch(np.full((1, 4), 5, np.float32)), x)
    ttnn.execute_trace(mesh, tid)
    np.testing.assert_array_equal(
        ttnn.to_numpy(ttnn.get_device_tensors(dst)[1]), np.full((1, 4), 6)
    )
    ttnn.release_trace(mesh, tid)


def test_same_mesh():
    mesh = mesh_of((2, 4))
    assert mesh.same_mesh(mesh)
    assert not mesh.same_mesh(mesh_of((1, 2)))
    assert not mesh.same_mesh("mesh")


def test_host_tensor_has_no_sharding():
    t = ttnn.from_torch(np.zeros((2, 2), np.float32))
    with pytest.raises(ttnn.errors.ShardingError, match=r"host tensor.*\n.*fix:"):
        _ = t.sharding


def test_shape_is_one_value_like_tt_nns():
    """TT-NN's ``ttnn.Shape`` is a pybind class, not a tuple: config walkers (deepseek_v3's
    ``run_config``) keep it whole; it still indexes, iterates and equals tuples and lists."""
    s = ttnn.Shape([1, 8, 1, 1])
    assert not isinstance(s, (tuple, list))
    assert s == (1, 8, 1, 1) and s == [1, 8, 1, 1] and list(s) == [1, 8, 1, 1]
    assert (len(s), s[1], s[-1], s.rank, hash(s) == hash((1, 8, 1, 1))) == (4, 8, 1, 4, True)
    assert ttnn.Shape([5])[-2] == 1  # stored padded to rank 4 with leading ones
    assert ttnn.Shape([1, 1, 3, 4]).to_rank(2) == (3, 4) and ttnn.Shape([3]).to_rank(3) == (1, 1, 3)
    with pytest.raises(ttnn.ShapeMismatchError, match="Can't convert shape rank"):
        s.to_rank(1)
    with pytest.raises(ttnn.ShapeTypeError, match="every dim must be an int, got None"):
        ttnn.Shape([None])
    with pytest.raises(TypeError):  # the builtin, as TT-NN's binding raises
        ttnn.Shape([1.5])
