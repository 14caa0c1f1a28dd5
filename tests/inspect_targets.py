"""Targets for the `ttjax inspect` command-line test: factory(mesh, **kwargs) -> (fn, args)."""

from __future__ import annotations

import ttjax as ttnn


def gather_then_reduce(mesh: ttnn.MeshDevice, width: int = 64):
    x = ttnn.abstract_tensor(
        (1, 1, 32, width),
        ttnn.float32,
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )

    def step(t):
        return ttnn.all_reduce(ttnn.all_gather(t, dim=3, cluster_axis=1), cluster_axis=0)

    return step, (x,)
