"""Mesh mappers and composers: how a host tensor is split over a mesh, and how shards come back.

A mapper turns a host tensor into placements on the mesh (``PlacementShard``/``PlacementReplicate``
per mesh axis); the global array is then the host tensor itself, placed with one ``device_put``.
A composer concatenates the per-device shards in TT-NN's order (row-major device order;
``ConcatMesh2dToTensor`` concatenates within each row, then the rows).

>>> import ttjax as ttnn
>>> mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
>>> mapper = ttnn.ShardTensor2dMesh(mesh, mesh_shape=(2, 4), dims=(None, 3))
>>> mapper.placements
(PlacementReplicate(), PlacementShard(3))

Public names only; the implementation is :mod:`ttjax._src.ttnn.distribute`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.distribute import (
    ConcatMesh2dToTensor as ConcatMesh2dToTensor,
    ConcatMeshToTensor as ConcatMeshToTensor,
    CppMeshToTensor as CppMeshToTensor,
    CppTensorToMesh as CppTensorToMesh,
    MeshComposerConfig as MeshComposerConfig,
    MeshMapperConfig as MeshMapperConfig,
    MeshToTensor as MeshToTensor,
    ReplicateTensorToMesh as ReplicateTensorToMesh,
    ShardTensor2dMesh as ShardTensor2dMesh,
    ShardTensorToMesh as ShardTensorToMesh,
    TensorToMesh as TensorToMesh,
    canonical as canonical,
    concat_mesh_to_tensor_composer as concat_mesh_to_tensor_composer,
    create_mesh_composer as create_mesh_composer,
    create_mesh_mapper as create_mesh_mapper,
    default_composer as default_composer,
    default_mapper as default_mapper,
    distribute as distribute,
    distribution_block as distribution_block,
    first_devices_block as first_devices_block,
    placements_over as placements_over,
    plan_mesh_mapper as plan_mesh_mapper,
    replicate_tensor_to_mesh_mapper as replicate_tensor_to_mesh_mapper,
    resolve_mapper_placements as resolve_mapper_placements,
    shard_dims as shard_dims,
    shard_tensor_to_mesh_mapper as shard_tensor_to_mesh_mapper,
)

_publish(globals(), "ttjax._src.ttnn.distribute")
