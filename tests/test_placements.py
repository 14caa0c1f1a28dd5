"""Placements: TT-NN reprs, short strings, equality/hashing, predicates; config reprs."""

from __future__ import annotations

import dataclasses

import pytest

import ttjax as ttnn
from ttjax.placements import placements_str


def test_reprs_match_ttnn():
    assert repr(ttnn.PlacementShard(3)) == "PlacementShard(3)"
    assert repr(ttnn.PlacementShard(-1)) == "PlacementShard(-1)"
    assert repr(ttnn.PlacementReplicate()) == "PlacementReplicate()"
    assert repr(ttnn.PlacementLocal()) == "PlacementLocal()"


def test_short_strings():
    assert str(ttnn.PlacementShard(3)) == "S(3)"
    assert str(ttnn.PlacementReplicate()) == "R"
    assert str(ttnn.PlacementLocal()) == "L"
    pl = (ttnn.PlacementReplicate(), ttnn.PlacementShard(3), ttnn.PlacementLocal())
    assert placements_str(pl) == "[R, S(3), L]"


def test_equality_and_hash():
    assert ttnn.PlacementShard(3) == ttnn.PlacementShard(3)
    assert ttnn.PlacementShard(3) != ttnn.PlacementShard(2)
    assert ttnn.PlacementReplicate() == ttnn.PlacementReplicate()
    assert ttnn.PlacementShard(0) != ttnn.PlacementReplicate()
    assert ttnn.PlacementReplicate() != ttnn.PlacementLocal()
    assert ttnn.PlacementShard(1).dim == 1
    s = {ttnn.PlacementShard(1), ttnn.PlacementShard(1), ttnn.PlacementReplicate()}
    assert len(s) == 2


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ttnn.PlacementShard(1).dim = 2  # type: ignore[misc]


def test_predicates():
    s = ttnn.PlacementShard(2)
    assert s.is_shard() and s.is_shard(2) and not s.is_shard(1)
    assert not s.is_replicate() and not s.is_local()
    r = ttnn.PlacementReplicate()
    assert r.is_replicate() and not r.is_shard() and not r.is_shard(0) and not r.is_local()
    loc = ttnn.PlacementLocal()
    assert loc.is_local() and not loc.is_shard() and not loc.is_replicate()


def test_mapper_config_repr_and_forms():
    cfg = ttnn.MeshMapperConfig(placements=[ttnn.PlacementReplicate(), ttnn.PlacementShard(3)])
    assert repr(cfg) == "MeshMapperConfig(placements: [PlacementReplicate(), PlacementShard(3)])"
    cfg2 = ttnn.MeshMapperConfig([ttnn.PlacementShard(0)], mesh_shape_override=ttnn.MeshShape(8))
    assert repr(cfg2) == (
        "MeshMapperConfig(placements: [PlacementShard(0)], mesh_shape_override=MeshShape([8]))"
    )
    # The 2-D convenience form: an int shards, None replicates; the override is ignored.
    two_d = ttnn.MeshMapperConfig(row_dim=None, col_dim=3, mesh_shape_override=ttnn.MeshShape(2, 4))
    assert two_d == cfg
    assert two_d.mesh_shape_override is None
    assert ttnn.MeshMapperConfig(0, None).placements == (
        ttnn.PlacementShard(0),
        ttnn.PlacementReplicate(),
    )


def test_mapper_config_rejects_non_placements():
    with pytest.raises(ttnn.ShardingError, match=r"placement 1 is 3") as info:
        ttnn.MeshMapperConfig([ttnn.PlacementReplicate(), 3])
    assert "fix:" in str(info.value)


def test_composer_config_repr_and_forms():
    cfg = ttnn.MeshComposerConfig(dims=[0, 3])
    assert repr(cfg).startswith("MeshComposerConfig(dims: [")
    assert repr(cfg) == "MeshComposerConfig(dims: [0, 3])"
    assert ttnn.MeshComposerConfig(0, 3) == cfg
    assert ttnn.MeshComposerConfig(row_dim=0, col_dim=3) == cfg
    over = ttnn.MeshComposerConfig([3], mesh_shape_override=ttnn.MeshShape(8))
    assert repr(over) == "MeshComposerConfig(dims: [3], mesh_shape_override=MeshShape([8]))"
    with pytest.raises(ttnn.ShardingError, match=r"row_dim=0, col_dim=None") as info:
        ttnn.MeshComposerConfig(0)
    assert "fix:" in str(info.value)
