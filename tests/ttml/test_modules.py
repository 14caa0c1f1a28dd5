"""TTML's modules: defaults as TTML's constructors have them, and values and per-device gradients
equal to the dense layer (numpy)."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.modules import ColumnParallelLinear, RowParallelLinear

TP = 4


@pytest.fixture(scope="module")
def par() -> ParallelismContext:
    return ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(1, TP)), None, 1)


def test_defaults_are_ttmls():
    """TTML: ``RowParallelLinear(in, out, has_bias=true, input_is_parallel=false)`` and
    ``ColumnParallelLinear(in, out, has_bias=true, gather_output=false)``."""
    row = inspect.signature(RowParallelLinear).parameters
    assert list(row)[:4] == ["in_features", "out_features", "has_bias", "input_is_parallel"]
    assert (row["has_bias"].default, row["input_is_parallel"].default) == (True, False)
    col = inspect.signature(ColumnParallelLinear).parameters
    assert list(col)[:4] == ["in_features", "out_features", "has_bias", "gather_output"]
    assert (col["has_bias"].default, col["gather_output"].default) == (True, False)


def _run(layer: RowParallelLinear, par: ParallelismContext, w, b, x, c, x_spec):
    """Each device's ``(y, dL/dx, dL/dW_local)`` for ``L = sum(c * layer(x))``."""
    specs = layer.specs(par)

    def body(params, x, c):
        def loss(params, x):
            return jnp.sum(c * layer(params, x, par.tp))

        y = layer(params, x, par.tp)
        gp, gx = jax.grad(loss, argnums=(0, 1))(params, x)
        return y[None], gx[None], gp["weight"][None]

    fn = jax.shard_map(
        body,
        mesh=par.jax_mesh,
        in_specs=(specs, x_spec, P()),
        out_specs=(P("tp"), P("tp"), P("tp")),
        check_vma=False,
    )
    y, gx, gw = jax.jit(fn)({"weight": jnp.asarray(w), "bias": jnp.asarray(b)}, x, c)
    return np.asarray(y), np.asarray(gx), np.asarray(gw)


def test_row_parallel_default_scatters_a_replicated_input(par):
    """Default (TTML's): the whole input on every device; the layer keeps its own slice."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((16, 8), np.float32), rng.standard_normal(8).astype(np.float32)
    x, c = rng.standard_normal((3, 16), np.float32), rng.standard_normal((3, 8), np.float32)
    y, gx, gw = _run(RowParallelLinear(16, 8), par, w, b, jnp.asarray(x), jnp.asarray(c), P())
    for d in range(TP):
        np.testing.assert_allclose(y[d], x @ w + b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gx[d], c @ w.T, rtol=1e-5, atol=1e-5)  # the whole gradient
        rows = slice(d * 4, (d + 1) * 4)
        np.testing.assert_allclose(gw[d], x[:, rows].T @ c, rtol=1e-5, atol=1e-5)


def test_row_parallel_with_parallel_input_takes_the_slices(par):
    """``input_is_parallel=True`` (after a column-parallel layer): each device holds its slice."""
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((16, 8), np.float32), rng.standard_normal(8).astype(np.float32)
    x, c = rng.standard_normal((3, 16), np.float32), rng.standard_normal((3, 8), np.float32)
    layer = RowParallelLinear(16, 8, input_is_parallel=True)
    y, gx, gw = _run(layer, par, w, b, jnp.asarray(x), jnp.asarray(c), P(None, "tp"))
    for d in range(TP):
        rows = slice(d * 4, (d + 1) * 4)
        np.testing.assert_allclose(y[d], x @ w + b, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gx[d], (c @ w.T)[:, rows], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gw[d], x[:, rows].T @ c, rtol=1e-5, atol=1e-5)
