"""The deterministic numerics policy against the fast one: a DDP gradient all-reduce (numerics.pmean
inside shard_map over 8 devices) in float32 and bfloat16, and ttnn.all_reduce."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import ml_dtypes
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from benchmarks._harness import Row, compare


def _under(mode: str, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """A call of ``fn`` under numerics ``mode`` (the policy is part of the jit key)."""

    def call() -> Any:
        with ttnn.numerics(mode):
            return fn(*args)

    return call


def run(mesh: ttnn.MeshDevice, mib: int = 4) -> list[Row]:
    rows = []
    n = mesh.get_num_devices()
    axes = tuple(mesh.axis_names)
    ddp = jax.jit(
        jax.shard_map(
            lambda g: ttnn.numerics.pmean(g[0], axes),
            mesh=mesh.jax_mesh,
            in_specs=P(axes),
            out_specs=P(),
        )
    )
    for dtype in (np.float32, ml_dtypes.bfloat16):
        per_device = mib * 1024 * 1024 // np.dtype(dtype).itemsize
        host = np.random.default_rng(0).standard_normal((n, per_device)).astype(dtype)
        grads = jax.device_put(host, NamedSharding(mesh.jax_mesh, P(axes)))
        times = compare(
            {m: _under(m, ddp, grads) for m in ("deterministic", "fast")}, repeats=5, number=3
        )
        rows.append(
            Row(
                f"DDP grad all-reduce {mib} MiB/device {np.dtype(dtype).name}",
                "numerics deterministic",
                "numerics fast (lax.psum)",
                times["deterministic"],
                times["fast"],
                "ratio <= 3",
                {"mesh": str(mesh.shape), "MiB_per_device": mib},
            )
        )
    t = ttnn.from_torch(
        np.random.default_rng(1).standard_normal((n, 256, 1024)).astype(np.float32),
        device=mesh,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    times = compare(
        {m: _under(m, lambda: ttnn.all_reduce(t).value) for m in ("deterministic", "fast")},
        repeats=5,
        number=3,
    )
    rows.append(
        Row(
            "ttnn.all_reduce 1 MiB/device float32",
            "numerics deterministic",
            "numerics fast",
            times["deterministic"],
            times["fast"],
            "ratio <= 3",
            {"mesh": str(mesh.shape)},
        )
    )
    return rows
