"""A tensor-parallel MLP (Megatron): column-sharded w1, row-sharded w2, one all_reduce; jitted
with ``jax.jit`` and inspected with ``ttjax.inspect``.

    python examples/tp_mlp.py

Each of the 8 devices holds 1/8 of w1's columns and of w2's rows, computes a partial
``gelu(x @ w1_i) @ w2_i``, and ``all_reduce`` sums the partials: every device ends with the
full result. The inspect report shows that the compiled program has exactly one all-reduce.
"""

from __future__ import annotations

import math

import jax
import numpy as np

import ttjax as ttnn


def mlp(x: ttnn.Tensor, w1: ttnn.Tensor, w2: ttnn.Tensor) -> ttnn.Tensor:
    hidden = ttnn.linear(x, w1, activation="gelu")  # [.., 32, ffn/8] per device
    partial = ttnn.linear(hidden, w2)  # [.., 32, dim]: this device's share of the sum
    return ttnn.all_reduce(partial)


def main(dim: int = 64, ffn: int = 256) -> float:
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    rng = np.random.default_rng(0)
    x_host = rng.standard_normal((1, 1, 32, dim), dtype=np.float32)
    w1_host = (rng.standard_normal((dim, ffn)) / np.sqrt(dim)).astype(np.float32)
    w2_host = (rng.standard_normal((ffn, dim)) / np.sqrt(ffn)).astype(np.float32)
    x = ttnn.from_torch(x_host, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))
    w1 = ttnn.from_torch(w1_host, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1))
    w2 = ttnn.from_torch(w2_host, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0))

    y = jax.jit(mlp)(x, w1, w2)
    got = ttnn.to_torch(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))[:1]
    pre = x_host.astype(np.float64) @ w1_host
    gelu = 0.5 * pre * (1 + np.vectorize(math.erf)(pre / np.sqrt(2)))  # exact GELU
    want = gelu @ w2_host
    err = float(np.max(np.abs(np.asarray(got) - want)))
    print(f"max |ttjax - numpy| = {err:.2e}")

    report = ttnn.inspect.inspect(mlp, x, w1, w2)
    report.print()
    ttnn.close_mesh_device(mesh)
    return err


if __name__ == "__main__":
    main()
