"""Host-to-mesh and mesh-to-host transfer of a 256 MiB tensor vs jax.device_put / np.asarray."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from benchmarks._harness import Row, compare


def run(mesh: ttnn.MeshDevice, mib: int = 256) -> list[Row]:
    n = mib * 1024 * 1024 // 4
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32).reshape(-1, 4096)
    mapper = ttnn.ShardTensorToMesh(mesh, dim=0)
    composer = ttnn.ConcatMeshToTensor(mesh, dim=0)
    sharding = NamedSharding(mesh.jax_mesh, P(tuple(mesh.axis_names)))
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=mapper)
    arr = jax.device_put(x, sharding)
    up = compare(
        {
            "ttjax": lambda: ttnn.from_torch(x, device=mesh, mesh_mapper=mapper).value,
            "device_put": lambda: jax.device_put(x, sharding),
        },
        repeats=5,
        number=1,
        warmup=1,
    )
    # Fresh device arrays for every read (JAX caches an array's host copy after the first read).
    fresh = jax.jit(lambda a: a + 0, out_shardings=sharding)
    down = compare(
        {
            "ttjax": lambda tt: ttnn.to_numpy(tt, mesh_composer=composer),
            "asarray": lambda a: np.asarray(a),
        },
        setups={
            "ttjax": lambda: ttnn.multiply(t, 1.0),
            "asarray": lambda: fresh(arr),
        },
        repeats=5,
        number=1,
        warmup=1,
    )
    meta = {"mesh": str(mesh.shape), "MiB": mib}
    return [
        Row(
            f"host->mesh {mib} MiB",
            "from_torch",
            "jax.device_put",
            up["ttjax"],
            up["device_put"],
            "ratio <= 1.1",
            meta,
        ),
        Row(
            f"mesh->host {mib} MiB",
            "to_numpy+composer",
            "np.asarray",
            down["ttjax"],
            down["asarray"],
            "ratio <= 1.1",
            meta,
        ),
    ]
