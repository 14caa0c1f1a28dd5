"""Differentiation through ttjax ops and CCL, and TTML's collective backward pairs.

``jax.grad`` of a function of mesh tensors must equal single-device ``jax.grad`` of the same
math on whole arrays, for every op family the models use. TTML's comm ops (``ttml.ops.distributed``)
must have TTML's per-device backward: broadcast -> all_reduce, all_reduce -> identity,
scatter <-> all_gather.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference import unordered_sums
from conftest import mesh_of
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from ttjax.ttml.ops import distributed as dist

RNG = np.random.default_rng(0)
MESH = (2, 4)


@pytest.fixture(scope="module")
def mesh() -> ttnn.MeshDevice:
    return ttnn.open_mesh_device(ttnn.MeshShape(*MESH))


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _put(mesh: ttnn.MeshDevice, a: np.ndarray, dims: tuple[int | None, int | None]) -> ttnn.Tensor:
    """``a`` on the 2x4 mesh: ``dims[i]`` is the tensor dim split over mesh axis i (None: replicate)."""
    return ttnn.from_torch(
        a, device=mesh, mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=dims, mesh_shape=MESH)
    )


def _check(mesh, tt_fn, ref_fn, arrays, dims, out_shape, atol=2e-5):
    """grad of sum(cot * tt_fn(tensors).value) == grad of sum(cot * ref_fn(arrays)), per input."""
    cot = _rand(*out_shape)
    tensors = [_put(mesh, a, d) for a, d in zip(arrays, dims)]
    n = len(arrays)

    def tt_loss(*ts):
        out = tt_fn(*ts)
        assert all(isinstance(p, ttnn.PlacementReplicate) for p in out.placements), out.placements
        return jnp.sum(out.value.reshape(out_shape) * cot)

    def ref_loss(*xs):
        return jnp.sum(ref_fn(*xs) * cot)

    got = jax.grad(tt_loss, argnums=tuple(range(n)))(*tensors)
    want = jax.grad(ref_loss, argnums=tuple(range(n)))(*[jnp.asarray(a) for a in arrays])
    for i, (g, w) in enumerate(zip(got, want)):
        assert isinstance(g, ttnn.Tensor) and g.placements == tensors[i].placements
        np.testing.assert_allclose(
            np.asarray(g.value), np.asarray(w), atol=atol, err_msg=f"input {i}"
        )


def test_column_parallel_matmul_then_all_gather(mesh):
    x, w = _rand(1, 1, 8, 16), _rand(1, 1, 16, 32)
    _check(
        mesh,
        lambda x, w: ttnn.all_gather(ttnn.matmul(x, w), dim=3, cluster_axis=1),
        lambda x, w: x @ w,
        [x, w],
        [(None, None), (None, 3)],
        (1, 1, 8, 32),
    )


def test_row_parallel_linear_then_all_reduce(mesh):
    x, w, b = _rand(1, 1, 8, 16), _rand(1, 1, 16, 12), _rand(1, 1, 1, 12)
    _check(
        mesh,
        lambda x, w, b: ttnn.add(ttnn.all_reduce(ttnn.linear(x, w), cluster_axis=1), b),
        lambda x, w, b: x @ w + b,
        [x, w, b],
        [(None, 3), (None, 2), (None, None)],
        (1, 1, 8, 12),
    )


def test_pointwise(mesh):
    x, y = _rand(1, 1, 8, 16), _rand(1, 1, 8, 16)
    _check(
        mesh,
        lambda x, y: ttnn.all_gather(
            ttnn.all_gather(ttnn.multiply(ttnn.gelu(x), ttnn.exp(ttnn.add(y, 0.5))), 2, 0), 3, 1
        ),
        lambda x, y: jax.nn.gelu(x, approximate=False) * jnp.exp(y + 0.5),
        [x, y],
        [(2, 3), (2, 3)],
        (1, 1, 8, 16),
        atol=1e-4,
    )


@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
def test_norms(mesh, norm):
    x, g, b = _rand(1, 1, 8, 16), _rand(16), _rand(16)

    def ref(x, g, b):
        mu = jnp.mean(x, -1, keepdims=True) if norm == "layer_norm" else 0.0
        var = jnp.mean(jnp.square(x - mu), -1, keepdims=True)
        y = (x - mu) * jax.lax.rsqrt(var + 1e-5) * g
        return y + b if norm == "layer_norm" else y

    def tt(x, g, b):
        fn = getattr(ttnn, norm)
        y = (
            fn(x, weight=g, bias=b, epsilon=1e-5)
            if norm == "layer_norm"
            else fn(x, weight=g, epsilon=1e-5)
        )
        return ttnn.all_gather(y, dim=2, cluster_axis=0)

    arrays = [x, g, b]
    _check(mesh, tt, ref, arrays, [(2, None), (None, None), (None, None)], (1, 1, 8, 16), 1e-4)


def test_softmax_and_reductions(mesh):
    x = _rand(1, 1, 8, 16)
    _check(
        mesh,
        lambda x: ttnn.all_gather(
            ttnn.add(ttnn.softmax(x, dim=-1), ttnn.mean(x, dim=-1, keepdim=True)), 2, 0
        ),
        lambda x: jax.nn.softmax(x, -1) + jnp.mean(x, -1, keepdims=True),
        [x],
        [(2, None)],
        (1, 1, 8, 16),
    )
    _check(
        mesh,
        lambda x: ttnn.all_reduce(ttnn.sum(x, dim=3, keepdim=True), cluster_axis=1),
        lambda x: jnp.sum(x, 3, keepdims=True),
        [x],
        [(None, 3)],
        (1, 1, 8, 1),
    )


def test_embedding_sharded_on_hidden(mesh):
    ids = RNG.integers(0, 32, size=(1, 8)).astype(np.int32)
    w = _rand(32, 16)
    tids = ttnn.from_torch(
        ids, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
    )
    cot = _rand(1, 8, 16)

    def tt_loss(w):
        out = ttnn.all_gather(ttnn.embedding(tids, w), dim=-1, cluster_axis=1)
        return jnp.sum(out.value.reshape(cot.shape) * cot)

    got = jax.grad(tt_loss)(_put(mesh, w, (None, 1)))
    want = jax.grad(lambda w: jnp.sum(jnp.take(w, ids, axis=0) * cot))(jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(got.value), np.asarray(want), atol=1e-6)


def test_ccl_reduce_scatter_broadcast_partition(mesh):
    x = _rand(1, 1, 8, 16)
    # reduce_scatter then all_gather == all_reduce: grad of the sum over the 4 column devices.
    _check(
        mesh,
        lambda x: ttnn.all_gather(ttnn.reduce_scatter(ttnn.gelu(x), 3, cluster_axis=1), 3, 1),
        lambda x: 4 * jax.nn.gelu(x, approximate=False),
        [x],
        [(None, None)],
        (1, 1, 8, 16),
        atol=1e-4,
    )
    # mesh_partition (scatter) then all_gather (its backward pair) is the identity.
    _check(
        mesh,
        lambda x: ttnn.all_gather(ttnn.mesh_partition(x, 3, cluster_axis=1), 3, cluster_axis=1),
        lambda x: x,
        [x],
        [(None, None)],
        (1, 1, 8, 16),
    )
    # broadcast from device (0, 2) along its row: only the sender's rows matter.
    _check(
        mesh,
        lambda x: ttnn.all_gather(
            ttnn.broadcast(x, ttnn.MeshCoordinate(0, 2), cluster_axis=1), 2, cluster_axis=0
        ),
        lambda x: x,
        [x],
        [(2, None)],
        (1, 1, 8, 16),
    )


@pytest.mark.parametrize("mode", ["fast", "deterministic"])
def test_ccl_gradients_under_numerics_policy(mesh, mode):
    """all_gather, broadcast and all_reduce differentiate under either numerics policy; under
    "deterministic" the backward of all_gather is the ordered reduce-scatter, not XLA's."""
    x, w = _rand(1, 1, 8, 16), _rand(1, 1, 16, 32)

    def chain(x, w):
        y = ttnn.all_gather(ttnn.matmul(x, w), dim=3, cluster_axis=1)
        y = ttnn.broadcast(y, ttnn.MeshCoordinate(0, 2), cluster_axis=1)
        return ttnn.all_reduce(y, cluster_axis=0)

    with ttnn.numerics(mode):
        _check(
            mesh, chain, lambda x, w: 2 * (x @ w), [x, w], [(None, None), (None, 3)], (1, 1, 8, 32)
        )
        tensors = (_put(mesh, x, (None, None)), _put(mesh, w, (None, 3)))
        grad = jax.jit(jax.grad(lambda x, w: jnp.sum(chain(x, w).value), argnums=(0, 1)))
        kinds = unordered_sums(grad.lower(*tensors).as_text())
    assert ("reduce_scatter" in kinds) == (mode == "fast")


# ---------------------------------------------------------------------------------------------
# TTML's comm ops: per-device gradients inside shard_map (numpy reference per device)
# ---------------------------------------------------------------------------------------------


def _per_device_grad_program(mesh, local_loss, x_spec):
    """Jitted: each device's grad of ``local_loss(x_local, c_local)`` (c: one cotangent per device)."""

    def body(x, c):
        return jax.grad(local_loss)(x, c[0])[None]

    return jax.jit(
        jax.shard_map(
            body,
            mesh=mesh.jax_mesh,
            in_specs=(x_spec, P(("y", "x"))),
            out_specs=P(("y", "x")),
            check_vma=False,
        )
    )


def _per_device_grad(mesh, local_loss, x_spec, x, c):
    """Each device's grad of ``local_loss(x_local, c_local)`` (c: one cotangent per device)."""
    out = np.asarray(
        _per_device_grad_program(mesh, local_loss, x_spec)(jnp.asarray(x), jnp.asarray(c))
    )
    assert out.shape[0] == mesh.get_num_devices()
    return out


@pytest.fixture(scope="module")
def line() -> ttnn.MeshDevice:
    return ttnn.open_mesh_device(ttnn.MeshShape(1, 4))


def test_ttml_pairs_broadcast_and_all_reduce(line):
    x, c = _rand(3), _rand(4, 3)
    assert line.axis_names == ("y", "x")
    g = _per_device_grad(line, lambda x, c: jnp.sum(c * dist.broadcast(x, "x")), P(), x, c)
    np.testing.assert_allclose(g, np.broadcast_to(c.sum(0), (4, 3)), rtol=1e-6)  # all_reduce
    xs = _rand(4, 3)
    g = _per_device_grad(line, lambda x, c: jnp.sum(c * dist.all_reduce(x[0], "x")), P("x"), xs, c)
    np.testing.assert_allclose(g.reshape(4, 3), c, rtol=1e-6)  # identity
    y = jax.jit(
        jax.shard_map(
            lambda x: dist.all_reduce(x[0], "x"),
            mesh=line.jax_mesh,
            in_specs=P("x"),
            out_specs=P(),
            check_vma=False,
        )
    )(jnp.asarray(xs))
    np.testing.assert_allclose(np.asarray(y), xs.sum(0), rtol=1e-6)


def test_ttml_pairs_scatter_and_all_gather(line):
    x, c = _rand(8), _rand(4, 2)
    g = _per_device_grad(line, lambda x, c: jnp.sum(c * dist.scatter(x, 0, "x")), P(), x, c)
    np.testing.assert_allclose(g, np.broadcast_to(c.reshape(8), (4, 8)), rtol=1e-6)  # all_gather
    xs, c8 = _rand(8), _rand(4, 8)
    g = _per_device_grad(line, lambda x, c: jnp.sum(c * dist.all_gather(x, 0, "x")), P("x"), xs, c8)
    want = np.stack([c8[i, 2 * i : 2 * i + 2] for i in range(4)])  # scatter: own slice
    np.testing.assert_allclose(g.reshape(4, 2), want, rtol=1e-6)


def _left_fold(rows: np.ndarray) -> np.ndarray:
    """``((rows[0] + rows[1]) + rows[2]) + ...`` in float32: device order."""
    acc = rows[0].astype(np.float32)
    for r in rows[1:]:
        acc = acc + r.astype(np.float32)
    return acc


def test_ttml_pairs_sum_in_device_order_under_deterministic_numerics():
    """Forward and backward sums of TTML's pairs follow ttjax.numerics: bitwise numpy's left fold
    over the 8 devices of a 1x8 line, and no XLA-ordered sum in the program."""
    mesh = mesh_of((1, 8))
    rng = np.random.default_rng(3)
    scale = np.float32(10.0) ** rng.integers(-4, 5, (8, 1))  # magnitudes make the order show
    x = rng.standard_normal(16).astype(np.float32)
    xs = (rng.standard_normal((8, 16)) * scale).astype(np.float32)
    c = (rng.standard_normal((8, 16)) * scale).astype(np.float32)
    for rows in (c, xs):
        assert not np.array_equal(_left_fold(rows), _left_fold(rows[::-1]))
    cases = [  # (local loss, x's spec, x, each device's gradient)
        (lambda x, c: jnp.sum(c * dist.broadcast(x, "x")), P(), x, np.tile(_left_fold(c), (8, 1))),
        (lambda x, c: jnp.sum(c * dist.all_reduce(x[0], "x")), P("x"), xs, c),
        (
            lambda x, c: jnp.sum(c * dist.all_reduce(x[0], "x", noop_backward=False)),
            P("x"),
            xs,
            np.tile(_left_fold(c), (8, 1)),
        ),
        (lambda x, c: jnp.sum(c[:1] * dist.scatter(x, 0, "x")), P(), xs.reshape(-1)[:8], None),
        (  # all_gather: its backward keeps this device's slice, exact
            lambda x, c: jnp.sum(c * dist.all_gather(x, 0, "x")),
            P("x"),
            xs[0],  # 2 per device
            np.stack([c[i, 2 * i : 2 * i + 2] for i in range(8)]),
        ),
    ]
    with ttnn.numerics("deterministic"):
        for i, (loss, spec, arg, want) in enumerate(cases):
            program = _per_device_grad_program(mesh, loss, spec)
            got = np.asarray(program(jnp.asarray(arg), jnp.asarray(c))).reshape(8, -1)
            assert unordered_sums(program.lower(jnp.asarray(arg), jnp.asarray(c)).as_text()) == []
            if want is None:  # scatter: its backward all-gathers c[:, 0], exact
                want = np.tile(c[:, 0], (8, 1))
            np.testing.assert_array_equal(got, want.reshape(8, -1), err_msg=f"case {i}")
        total = jax.jit(
            jax.shard_map(
                lambda x: dist.all_reduce(x[0], "x"),
                mesh=mesh.jax_mesh,
                in_specs=P("x"),
                out_specs=P(),
                check_vma=False,
            )
        )(jnp.asarray(xs))
    np.testing.assert_array_equal(np.asarray(total), _left_fold(xs))
