"""The README's TT-NN program, runnable: shard, gelu, all-gather per column, bring it back.

    python examples/readme_snippet.py

On a 2x4 mesh (a T3000) the [1, 1, 32, 256] input is split on dim 3 into eight [1, 1, 32, 32]
shards. ``all_gather(dim=3, cluster_axis=0)`` joins the two shards of each mesh column, so every
device then holds [1, 1, 32, 64]. ``ConcatMeshToTensor(dim=3)`` concatenates all eight device
tensors (in device order) on dim 3: ``out`` is [1, 1, 32, 512], i.e. each column's gathered pair
appears once per device of that column.
"""

from __future__ import annotations

import numpy as np

import ttjax as ttnn


def main() -> np.ndarray:
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))  # a T3000 on 8 virtual devices
    host = np.random.default_rng(0).random((1, 1, 32, 256), dtype=np.float32)
    x = ttnn.from_torch(
        host,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    print(x.shape)  # Shape([1, 1, 32, 32]): per device
    y = ttnn.all_gather(
        ttnn.gelu(x),
        dim=3,
        cluster_axis=0,  # Line All-Gather per column
        topology=ttnn.Topology.Linear,
    )
    print(y.shape)  # Shape([1, 1, 32, 64]): per device, after the gather over a column of two
    out = ttnn.to_torch(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    print("out:", list(out.shape), "= all 8 device tensors concatenated on dim 3")
    ttnn.visualize_mesh_device(mesh, tensor=y)
    ttnn.close_mesh_device(mesh)
    return np.asarray(out)


if __name__ == "__main__":
    main()
