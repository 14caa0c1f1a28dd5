"""DDP gradient averaging follows the numerics policy: deterministic mode adds the replicas in
device order (bitwise equal to numpy's left-to-right sum), fast mode matches it to rounding."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec

import ttjax
from ttjax.ttml.core.distributed import synchronize_gradients


def _averaged(grads: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    mesh = Mesh(np.array(jax.devices()[:8]), ("dp",))
    spec = PartitionSpec("dp")
    step = jax.jit(
        jax.shard_map(
            lambda g: synchronize_gradients(g, "dp"), mesh=mesh, in_specs=spec, out_specs=spec
        )
    )
    hlo = step.lower(grads).compile().as_text()
    return {k: np.asarray(v) for k, v in step(grads).items()}, hlo


@pytest.mark.parametrize("mode", ["deterministic", "fast"])
def test_synchronize_gradients_sums_in_device_order(mode: str) -> None:
    rng = np.random.default_rng(0)
    grads = {
        "w": (rng.standard_normal((8, 4, 16)) * 1e3).astype(np.float32),
        "b": rng.standard_normal((8, 3)).astype(np.float32),
    }
    with ttjax.numerics(mode):
        out, hlo = _averaged(grads)
    # deterministic: one all-to-all brings each device its pieces, summed in order; fast: psum
    assert ("all-to-all" in hlo) == (mode == "deterministic"), hlo[-2000:]
    for name, g in grads.items():
        ordered = g[0].copy()
        for row in g[1:]:
            ordered = ordered + row  # float32, left to right: device 0, 1, ..., 7
        want = ordered * np.float32(1 / 8)
        per_device = out[name].reshape(8, *g.shape[1:])
        for got in per_device:
            if mode == "deterministic":
                np.testing.assert_array_equal(got, want)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-3)
