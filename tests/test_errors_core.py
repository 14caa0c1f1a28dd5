"""Bad input to the core raises a ttjax error that names the bad value and says how to fix it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import mesh_of

import ttjax as ttnn

R = ttnn.PlacementReplicate()


def S(d: int) -> ttnn.PlacementShard:
    return ttnn.PlacementShard(d)


@pytest.mark.parametrize(
    ("cls", "builtins"),
    [
        (ttnn.ConfigError, (ValueError,)),
        (ttnn.MeshShapeError, (ValueError,)),
        (ttnn.MeshMismatchError, (ValueError,)),
        (ttnn.ShardingError, (ValueError,)),
        (ttnn.ShapeMismatchError, (ValueError,)),
        (ttnn.UnsupportedDTypeError, (TypeError,)),
        (ttnn.LayoutError, (ValueError,)),
        (ttnn.CCLError, (ValueError,)),
        (ttnn.ComposerRequiredError, ()),
        (ttnn.TraceError, ()),
        (ttnn.DeviceClosedError, ()),
    ],
)
def test_hierarchy(cls, builtins):
    # Every ttjax error is a TTJaxError and, like TT-NN's TT_FATAL, a RuntimeError.
    assert issubclass(cls, ttnn.TTJaxError)
    assert issubclass(cls, RuntimeError)
    for b in builtins:
        assert issubclass(cls, b)


def _raises(cls, fn, *fragments):
    with pytest.raises(cls) as info:
        fn()
    msg = str(info.value)
    assert isinstance(info.value, ttnn.TTJaxError)
    assert "fix:" in msg, msg
    for frag in fragments:
        assert frag in msg, (frag, msg)
    return msg


def test_shard_dim_not_divisible_names_dim_size_and_axis():
    mesh = mesh_of((1, 2))
    x = np.zeros((1, 1, 32, 129), np.float32)
    msg = _raises(
        ttnn.ShardingError,
        lambda: ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3), device=mesh),
        "tensor dim 3",
        "size 129",
        "2 shards",
        "x(2)",
        "MeshShape([1, 2])",
    )
    assert "[1, 1, 32, 129]" in msg


def test_nested_split_not_divisible_names_both_axes():
    mesh = mesh_of((2, 4))
    x = np.zeros((12, 3), np.float32)
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)),
        "size 12",
        "8 shards",
        "y(2)",
        "x(4)",
    )
    y = np.zeros((3, 8), np.float32)
    cfg = ttnn.MeshMapperConfig([S(0), S(1)])
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.from_torch(y, mesh_mapper=ttnn.create_mesh_mapper(mesh, cfg)),
        "tensor dim 0",
        "size 3",
        "y(2)",
    )


@pytest.mark.parametrize(("dim", "rank"), [(4, 3), (3, 3), (-4, 3), (-5, 3), (-5, 4)])
def test_shard_dim_out_of_range(dim, rank):
    mesh = mesh_of((2, 4))
    x = np.zeros((8,) * rank, np.float32)
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=dim)),
        f"Invalid dimension index; got dims: {dim}, tensor dimension: {rank}",
        f"[{-rank}, {rank - 1}]",
    )


def test_out_of_range_dim_on_size_one_mesh_axis_still_raises():
    mesh = mesh_of((1, 2))
    cfg = ttnn.MeshMapperConfig([S(7), R])
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.from_torch(
            np.zeros((2, 2), np.float32), mesh_mapper=ttnn.create_mesh_mapper(mesh, cfg)
        ),
        "got dims: 7",
    )


@pytest.mark.parametrize("placements", [[S(0)], [R, R, R]], ids=["too-few", "too-many"])
def test_placements_length_must_match_mesh_rank(placements):
    mesh = mesh_of((2, 4))
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.create_mesh_mapper(mesh, ttnn.MeshMapperConfig(placements)),
        "The number of dimensions in the mesh shape MeshShape([2, 4]) does not match the number "
        "of placements in the config",
        repr(placements),
        "give exactly 2 placements",
    )


def test_same_dim_on_both_axes():
    mesh = mesh_of((2, 4))
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.create_mesh_mapper(mesh, ttnn.MeshMapperConfig([S(1), S(1)])),
        "dims must be unique",
        "PlacementShard(1)",
    )
    # Shard(3) and Shard(-1) are the same dim of a rank-4 tensor: not a nested split.
    mapper = ttnn.create_mesh_mapper(mesh, ttnn.MeshMapperConfig([S(3), S(-1)]))
    x = np.zeros((1, 1, 32, 64), np.float32)
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.from_torch(x, mesh_mapper=mapper),
        "dims must be unique",
        "dim 3",
    )
    two_d = ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(-1, 3))
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.from_torch(x, mesh_mapper=two_d, device=mesh),
        "dims must be unique",
    )


def test_mapper_for_another_mesh():
    a, b = mesh_of((2, 4)), mesh_of((1, 2))
    x = np.zeros((8, 4), np.float32)
    _raises(
        ttnn.MeshMismatchError,
        lambda: ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(a, dim=0), device=b),
        "<MeshDevice: 2x4 grid, 8 devices>",
        "<MeshDevice: 1x2 grid, 2 devices>",
    )
    # Same shape, different devices (two halves of a T3000).
    left, right = a.create_submeshes(ttnn.MeshShape(2, 2))
    _raises(
        ttnn.MeshMismatchError,
        lambda: ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(left, 0), device=right),
        "[0, 1, 4, 5]",
        "[2, 3, 6, 7]",
    )


def test_composer_for_another_mesh_shape():
    a, b = mesh_of((2, 4)), mesh_of((1, 2))
    t = ttnn.from_torch(
        np.zeros((8, 4), np.float32), mesh_mapper=ttnn.ShardTensorToMesh(a, 0), device=a
    )
    _raises(
        ttnn.MeshMismatchError,
        lambda: ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(b, dim=0)),
        "1x2",
        "2x4",
    )
    _raises(
        ttnn.MeshMismatchError,
        lambda: ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh_of((1, 8)), dim=0)),
        "1x8",
    )


def test_composer_config_errors():
    mesh = mesh_of((2, 4))
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.create_mesh_composer(mesh, ttnn.MeshComposerConfig([0])),
        "The number of dimensions in the mesh shape MeshShape([2, 4]) does not match the number "
        "of dimensions in the config [0]",
    )
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.create_mesh_composer(
            mesh, ttnn.MeshComposerConfig([0], mesh_shape_override=ttnn.MeshShape(16))
        ),
        "The size of the supplied mesh shape MeshShape([16]) does not match the device shape "
        "size MeshShape([2, 4])",
    )
    t = ttnn.from_torch(
        np.zeros((8, 4), np.float32), mesh_mapper=ttnn.ShardTensorToMesh(mesh, 0), device=mesh
    )
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=2)),
        "concat dim 2 is out of range for per-device rank 2",
    )
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.ConcatMesh2dToTensor(mesh, (2, 4), dims=(0, None)),
        "(0, None)",
    )
    _raises(ttnn.ShardingError, lambda: ttnn.create_mesh_composer(mesh, [0, 1]), "list")


def test_mapper_construction_errors():
    mesh = mesh_of((2, 4))
    _raises(ttnn.ShardingError, lambda: ttnn.create_mesh_mapper(mesh, [S(0), R]), "got list")
    for make in (
        lambda: ttnn.ShardTensorToMesh("mesh", dim=0),
        lambda: ttnn.ReplicateTensorToMesh("mesh"),
        lambda: ttnn.ShardTensor2dMesh("mesh", (2, 4), dims=(0, 1)),
        lambda: ttnn.ConcatMeshToTensor("mesh", dim=0),
        lambda: ttnn.ConcatMesh2dToTensor("mesh", (2, 4), dims=(0, 1)),
    ):
        _raises(ttnn.ShardingError, make, "got str ('mesh')")
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.ShardTensor2dMesh(mesh, (4, 2), dims=(0, 1)),
        "MeshShape([4, 2])",
    )
    _raises(
        ttnn.ShardingError, lambda: ttnn.ShardTensor2dMesh(mesh, (2, 4), dims=(0,)), "dims=(0,)"
    )
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.create_mesh_mapper(
            mesh, ttnn.MeshMapperConfig([S(0)], mesh_shape_override=ttnn.MeshShape(16))
        ),
        "MeshShape([16])",
    )
    # A distribution over the first 6 devices of 2x4 (row-major) holds no block of it: ttjax
    # asks for a submesh instead. (1, 4) would be row 0, a block (TT-NN's SUBMESH mode).
    _raises(
        ttnn.ShardingError,
        lambda: ttnn.create_mesh_mapper(
            mesh, ttnn.MeshMapperConfig([S(0)], mesh_shape_override=ttnn.MeshShape(6))
        ),
        "MeshShape([6])",
        "create_submesh",
    )


def test_from_torch_bad_arguments():
    mesh = mesh_of((1, 2))
    x = np.zeros((2, 2), np.float32)
    _raises(ttnn.TTJaxError, lambda: ttnn.from_torch(x, device="cpu"), "device='cpu'")
    _raises(
        ttnn.TTJaxError, lambda: ttnn.from_torch(x, mesh_mapper=3, device=mesh), "mesh_mapper=3"
    )
    _raises(ttnn.UnsupportedDTypeError, lambda: ttnn.from_torch(x.astype(np.float64)), "float64")
    _raises(ttnn.LayoutError, lambda: ttnn.from_torch(x, layout="TILE"), "layout='TILE'")
    t = ttnn.from_torch(x, device=mesh)
    _raises(ttnn.TTJaxError, lambda: ttnn.from_torch(t), "ttnn Tensor")
    _raises(ttnn.TTJaxError, lambda: ttnn.to_device(ttnn.from_torch(x), "cuda"), "device='cuda'")
