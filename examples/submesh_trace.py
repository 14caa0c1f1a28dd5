"""Submeshes and trace: split a 2x4 mesh into two 1x4 submeshes, run a data-parallel copy of
the same program on each, capture it once as a trace, and replay it on new inputs.

    python examples/submesh_trace.py

A trace records the ops issued between ``begin_trace_capture`` and ``end_trace_capture`` on the
parent mesh and compiles one program per submesh; ``execute_trace`` replays them on whatever the
captured input tensors hold now (write new data with ``copy_host_to_device_tensor``).
"""

from __future__ import annotations

import numpy as np

import ttjax as ttnn


def main() -> float:
    parent = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
    submeshes = parent.create_submeshes(ttnn.MeshShape(1, 4))
    for i, sub in enumerate(submeshes):
        print(f"submesh {i}: {sub!r}, device ids {sub.get_device_ids()}")

    def place(host: np.ndarray, mesh: ttnn.MeshDevice) -> ttnn.Tensor:
        return ttnn.from_torch(host, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))

    rng = np.random.default_rng(0)
    hosts = [rng.standard_normal((1, 1, 32, 128), dtype=np.float32) for _ in submeshes]
    inputs = [place(h, m) for h, m in zip(hosts, submeshes)]

    def program(x: ttnn.Tensor) -> ttnn.Tensor:
        # per device: exp of the shard, then a sum over the 4 devices of the submesh
        return ttnn.all_reduce(ttnn.exp(x))

    tid = ttnn.begin_trace_capture(parent, cq_id=0)
    outputs = [program(x) for x in inputs]
    ttnn.end_trace_capture(parent, tid, cq_id=0)

    worst = 0.0
    for step in range(3):
        new = [rng.standard_normal((1, 1, 32, 128), dtype=np.float32) for _ in submeshes]
        for host, x, mesh in zip(new, inputs, submeshes):
            ttnn.copy_host_to_device_tensor(place(host, mesh).cpu(), x)
        ttnn.execute_trace(parent, tid, cq_id=0, blocking=True)
        for host, out, mesh in zip(new, outputs, submeshes):
            got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))[:1]
            want = np.exp(host).reshape(1, 1, 32, 4, 32).sum(axis=3)
            worst = max(worst, float(np.max(np.abs(np.asarray(got) - want))))
        print(f"replay {step}: max |trace - numpy| so far {worst:.2e}")
    ttnn.release_trace(parent, tid)
    ttnn.close_mesh_device(parent)
    return worst


if __name__ == "__main__":
    main()
