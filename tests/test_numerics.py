"""The numerics policy: deterministic sums are bitwise equal across runs, mesh shapes and a
single-device left-to-right sum; the policy is thread-local, nestable and part of the jit key."""

from __future__ import annotations

import functools
import threading

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from _reference import unordered_sums
from conftest import mesh_of
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from ttjax.errors import CCLError, ConfigError

# Mesh shapes that all reduce the same 8 devices, in the same row-major order.
SAME_8 = [(1, 8), (2, 4), (8, 1)]
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def left_fold(pieces: list[np.ndarray], dtype) -> np.ndarray:
    """``((p0 + p1) + p2) + ...`` on the host, float32 accumulation, rounded once to ``dtype``."""
    acc = pieces[0].astype(np.float32)
    for p in pieces[1:]:
        acc = acc + p.astype(np.float32)
    return acc.astype(dtype)


# --- the policy object ---------------------------------------------------------------------------


def test_default_is_fast_and_context_restores() -> None:
    assert ttnn.numerics.mode() == "fast"
    with ttnn.numerics("deterministic") as policy:
        assert ttnn.numerics.mode() == "deterministic"
        assert repr(policy) == "ttjax.numerics('deterministic')"
        with ttnn.numerics("fast"):
            assert ttnn.numerics.mode() == "fast"
        assert ttnn.numerics.deterministic()
    assert ttnn.numerics.mode() == "fast"


def test_setter_is_thread_local() -> None:
    seen: list[str] = []

    def worker() -> None:
        ttnn.numerics("deterministic")  # a setter: stays set in this thread only
        seen.append(ttnn.numerics.mode())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == ["deterministic"]
    assert ttnn.numerics.mode() == "fast"


def test_unknown_mode_names_value_and_fix() -> None:
    with pytest.raises(ConfigError, match=r"'exact'.*\nfix: one of \('fast', 'deterministic'\)"):
        ttnn.numerics("exact")
    assert ttnn.numerics.mode() == "fast"


def test_policy_is_part_of_the_jit_cache_key() -> None:
    traces: list[str] = []

    @jax.jit
    def f(x):
        traces.append(ttnn.numerics.mode())
        return x + 1

    f(jnp.ones(2))
    f(jnp.ones(2))
    with ttnn.numerics("deterministic"):
        f(jnp.ones(2))
    assert traces == ["fast", "deterministic"]


# --- DDP gradient all-reduce ---------------------------------------------------------------------


@functools.lru_cache
def _ddp_step(mesh_shape, reduced: bool):
    """Per-device gradients of a least-squares loss on each batch shard (one model per dtype);
    with ``reduced``, their sum and mean over every device (``numerics.psum`` / ``pmean``), else
    the 8 unreduced ones."""
    mesh = mesh_of(mesh_shape).jax_mesh
    axes = tuple(mesh.axis_names)

    def local(data):
        out = {}
        for name, (w, x) in data.items():
            g = jax.grad(lambda w, x=x: jnp.sum(jnp.square(x @ w)))(w)
            out[name] = (
                (ttnn.numerics.psum(g, axes), ttnn.numerics.pmean(g, axes)) if reduced else g[None]
            )
        return out

    spec = {k: (P(), P(axes)) for k in DTYPES}
    out = {k: (P(), P()) if reduced else P(axes) for k in DTYPES}
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(spec,), out_specs=out))


def _ddp_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 24))
    w = rng.standard_normal((24, 6))
    return {k: (jnp.asarray(w.astype(d)), jnp.asarray(x.astype(d))) for k, d in DTYPES.items()}


def test_ddp_all_reduce_is_bitwise_equal_across_meshes_and_runs() -> None:
    data = _ddp_data()
    per_device = _ddp_step((1, 8), False)(data)  # 8 unreduced gradients per dtype
    with ttnn.numerics("deterministic"):
        runs = [_ddp_step(s, True)(data) for s in SAME_8]
        runs.append(_ddp_step.__wrapped__((2, 4), True)(data))  # a fresh compile, run again
    for name, np_dtype in DTYPES.items():
        want = left_fold(list(np.asarray(per_device[name])), np_dtype)
        for run in runs:
            total, mean = (np.asarray(a) for a in run[name])
            assert total.dtype == np_dtype
            np.testing.assert_array_equal(total.view(np.uint8), want.view(np.uint8))
            want_mean = (want / np_dtype(8)).astype(np_dtype)
            np.testing.assert_array_equal(mean.view(np.uint8), want_mean.view(np.uint8))


def test_fast_mode_is_lax_psum() -> None:
    data = _ddp_data()
    per_device = np.asarray(_ddp_step((1, 8), False)(data)["float32"])
    total, mean = _ddp_step((1, 8), True)(data)["float32"]  # traced again: the policy is in the key
    np.testing.assert_allclose(total, per_device.sum(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean, per_device.mean(0), rtol=1e-5, atol=1e-5)


def test_psum_scatter_orders_and_splits_like_lax() -> None:
    mesh = mesh_of((2, 4)).jax_mesh
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8 * 3, 16)).astype(np.float32)  # 8 devices x [3, 16]

    def run(**kw):
        fn = lambda a: ttnn.numerics.psum_scatter(a, ("y", "x"), **kw)  # noqa: E731
        f = jax.shard_map(fn, mesh=mesh, in_specs=P(("y", "x")), out_specs=P(("y", "x")))
        return np.asarray(jax.jit(f)(x))

    with ttnn.numerics("deterministic"):
        det = run(scatter_dimension=1, tiled=True)  # each device: [3, 2]
    fast = run(scatter_dimension=1, tiled=True)
    pieces = np.split(x, 8)
    want = np.concatenate(np.split(left_fold(pieces, np.float32), 8, axis=1), axis=0)
    np.testing.assert_array_equal(det, want)
    np.testing.assert_allclose(fast, want, rtol=1e-5, atol=1e-6)


def test_backward_of_psum_and_all_gather_sums_in_device_order() -> None:
    """Autodiff of lax.psum / lax.all_gather (without check_vma) sums every device's cotangent in
    XLA's order; under the policy those backward sums are ordered too (numpy left fold)."""
    mesh = mesh_of((2, 4)).jax_mesh
    rng = np.random.default_rng(2)
    scale = np.float32(10.0) ** rng.integers(-3, 4, (8, 1, 1))  # magnitudes make order matter
    x = rng.standard_normal((8, 2, 6)).astype(np.float32)  # device j: x[j], [2, 6]
    c = (rng.standard_normal((8, 2, 6)) * scale).astype(np.float32)  # psum's cotangents
    c_g = (rng.standard_normal((8, 2, 8, 6)) * scale[..., None]).astype(np.float32)  # gather's

    def local(x, c, c_g):
        def loss(x):
            total = ttnn.numerics.psum(x, ("y", "x"))  # [2, 6]
            gathered = ttnn.numerics.all_gather(x, ("y", "x"), axis=1)  # untiled: [2, 8, 6]
            return jnp.sum(c[0] * total) + jnp.sum(c_g * gathered)

        return jax.grad(loss)(x[0])[None]

    spec = P(("y", "x"))
    f = jax.jit(
        jax.shard_map(local, mesh=mesh, in_specs=(spec,) * 3, out_specs=spec, check_vma=False)
    )
    args = (jnp.asarray(x), jnp.asarray(c), jnp.asarray(c_g.reshape(16, 8, 6)))
    # device i: sum_j c[j] (psum transposes to psum) + sum_j c_g[j][:, i] (gather -> scatter-sum)
    want = np.stack(
        [
            left_fold(list(c), np.float32) + left_fold([g[:, i] for g in c_g], np.float32)
            for i in range(8)
        ]
    )
    with ttnn.numerics("deterministic"):
        det = np.asarray(f(*args)).reshape(8, 2, 6)
        assert unordered_sums(f.lower(*args).as_text()) == []
    assert unordered_sums(f.lower(*args).as_text())  # fast: XLA's all-reduce / reduce-scatter
    fast = np.asarray(f(*args)).reshape(8, 2, 6)
    np.testing.assert_array_equal(det, want)
    np.testing.assert_allclose(fast, want, rtol=1e-5, atol=1e-3)
    # the data make the order show: summed from the last device, the psum part differs
    assert not np.array_equal(left_fold(list(c), np.float32), left_fold(list(c[::-1]), np.float32))


def test_reduce_errors_name_axis_and_size() -> None:
    mesh = mesh_of((2, 4)).jax_mesh
    with ttnn.numerics("deterministic"):
        bad_axis = jax.shard_map(
            lambda a: ttnn.numerics.psum(a, "dp"), mesh=mesh, in_specs=P(), out_specs=P()
        )
        with pytest.raises(CCLError, match=r"\['dp'\].*\('y', 'x'\)[\s\S]*fix:"):
            jax.jit(bad_axis)(jnp.ones(4))
        bad_dim = jax.shard_map(
            lambda a: ttnn.numerics.psum_scatter(a, "x", scatter_dimension=0, tiled=True),
            mesh=mesh,
            in_specs=P(),
            out_specs=P("x"),
        )
        with pytest.raises(CCLError, match=r"size 6.*4 devices[\s\S]*fix: make dim 0 a multiple"):
            jax.jit(bad_dim)(jnp.ones(6))


# --- TT-NN CCL under the policy ------------------------------------------------------------------


def _per_device(mesh, local_shape, np_dtype, seed):
    rng = np.random.default_rng(seed)
    n = mesh.get_num_devices()
    data = rng.standard_normal((n * local_shape[0], *local_shape[1:])).astype(np_dtype)
    tt_dtype = ttnn.float32 if np_dtype == np.float32 else ttnn.bfloat16
    t = ttnn.from_torch(
        data, dtype=tt_dtype, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )
    return t, np.split(data, n)


def test_ttnn_all_reduce_deterministic_across_meshes_eager_and_jit() -> None:
    results = []
    with ttnn.numerics("deterministic"):
        for shape in SAME_8:
            t, pieces = _per_device(mesh_of(shape), (1, 32, 32), np.float32, seed=3)
            results += ttnn.get_device_tensors(ttnn.all_reduce(t))
        results += ttnn.get_device_tensors(jax.jit(ttnn.all_reduce)(t))
        t16, pieces16 = _per_device(mesh_of((2, 4)), (1, 32, 32), ml_dtypes.bfloat16, seed=3)
        out16 = ttnn.get_device_tensors(ttnn.all_reduce(t16))
    want = left_fold(pieces, np.float32)
    for got in results:
        np.testing.assert_array_equal(ttnn.to_numpy(got).view(np.uint8), want.view(np.uint8))
    want16 = left_fold(pieces16, ml_dtypes.bfloat16)
    for got in out16:
        np.testing.assert_array_equal(ttnn.to_numpy(got).view(np.uint8), want16.view(np.uint8))


def test_ttnn_reduce_scatter_deterministic_per_cluster_axis() -> None:
    mesh = mesh_of((2, 4))
    t, pieces = _per_device(mesh, (1, 4, 32), np.float32, seed=4)
    with ttnn.numerics("deterministic"):
        out = ttnn.get_device_tensors(ttnn.reduce_scatter(t, dim=2, cluster_axis=1))
    for k, dev in enumerate(out):
        row, col = divmod(k, 4)
        want = left_fold(pieces[row * 4 : row * 4 + 4], np.float32)
        np.testing.assert_array_equal(ttnn.to_numpy(dev), np.split(want, 4, axis=2)[col])
