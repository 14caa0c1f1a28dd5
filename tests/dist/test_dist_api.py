"""ttjax.dist (Tessera's names): meshes, shard specs, dist.tensor, dist.local regions and
collectives by axis name, each against numpy per device, eager and jitted; errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference import unordered_sums
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from ttjax import dist
from ttjax.dist import op
from ttjax.errors import CCLError, MeshShapeError, ShardingError, UnsupportedDTypeError


@pytest.fixture(scope="module")
def mesh() -> dist.Mesh:
    return dist.Mesh(axes=["tp", "dp"], devices=range(8), shape=(2, 4))


def blocks(x: jax.Array) -> dict[int, np.ndarray]:
    return {s.device.id: np.asarray(s.data) for s in x.addressable_shards}


# --- Mesh ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("axes", "n", "shape", "topology"),
    [
        (["tp", "dp"], 16, (4, 4), "tp × dp mesh, 4 × 4"),
        (["tp", "pp", "dp"], 8, (2, 2, 2), "tp × pp × dp mesh, 2 × 2 × 2"),
        (["tp", "dp"], 8, (4, 2), "tp × dp mesh, 4 × 2"),
        (["dp"], 8, (8,), "dp mesh, 8"),
    ],
)
def test_balanced_default_shape_and_topology(axes, n, shape, topology) -> None:
    m = dist.Mesh(axes=axes, devices=range(n))
    assert m.shape == shape and m.topology == topology and m.size == n
    assert m.jax_mesh.axis_names == tuple(axes)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(axes=["tp", "dp"], devices=range(8), shape=(4, 4)), r"shape=\(4, 4\) does not fit 8"),
        (dict(axes=["tp", "tp"], devices=range(4)), r"distinct axis names"),
        (dict(axes=["dp"], devices=[0, 1, 4096]), r"\[4096\] are not"),
    ],
)
def test_bad_mesh_raises_with_fix(kwargs, match: str) -> None:
    with pytest.raises(MeshShapeError, match=match + r"[\s\S]*fix:"):
        dist.Mesh(**kwargs)


# --- ShardSpec and dist.tensor -------------------------------------------------------------------


def test_tensor_rows_over_tp_cols_over_dp(mesh: dist.Mesh) -> None:
    host = np.arange(8 * 12, dtype=np.float32).reshape(8, 12)
    layout = dist.ShardSpec(partition=("row", "col"), mesh_axes=("tp", "dp"))
    W = dist.tensor((8, 12), layout=layout, mesh=mesh, dtype="fp32", init=host)
    assert W.sharding.spec == P("tp", "dp")
    ids = mesh.device_ids
    for dev, block in blocks(W).items():
        r, c = np.argwhere(ids == dev)[0]
        np.testing.assert_array_equal(block, host[4 * r : 4 * r + 4, 3 * c : 3 * c + 3])
    Z = dist.tensor((8, 12), layout=layout, mesh=mesh)  # zeros, bf16 by default
    assert Z.dtype == jnp.bfloat16 and not np.asarray(Z, np.float32).any()
    R = dist.tensor((2, 3), mesh=mesh, dtype="bf16", init=lambda s, d: np.ones(s))
    assert R.sharding.is_fully_replicated and np.asarray(R, np.float32).sum() == 6


@pytest.mark.parametrize(
    ("layout", "shape", "match", "err"),
    [
        (dict(partition=("row",), mesh_axes=("pp",)), (8, 4), r"'pp' is not in .*\['tp', 'dp'\]", ShardingError),
        (dict(partition=(0, 1, 2), mesh_axes=("tp", None, None)), (8, 4), r"3 dims but the tensor has rank 2", ShardingError),
        (dict(partition=("row", "col"), mesh_axes=("tp",)), (8, 4), r"differ in length", ShardingError),
    ],
)  # fmt: skip
def test_bad_layout_raises_with_fix(mesh, layout, shape, match, err) -> None:
    with pytest.raises(err, match=match + r"[\s\S]*fix:"):
        dist.tensor(shape, layout=dist.ShardSpec(**layout), mesh=mesh)


def test_bad_dtype_raises(mesh: dist.Mesh) -> None:
    with pytest.raises(UnsupportedDTypeError, match=r"'fp8'[\s\S]*fix:"):
        dist.tensor((4,), mesh=mesh, dtype="fp8")


# --- dist.local and the collectives --------------------------------------------------------------


def test_tessera_tp_matmul_all_reduce_eager_and_jit(mesh: dist.Mesh) -> None:
    """Section 7.4: Y_local = op.matmul(W_local, X_local); all_reduce over dp gives W @ X."""
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((8, 12)), rng.standard_normal((12, 5))
    W_layout = dist.ShardSpec(partition=("row", "col"), mesh_axes=("tp", "dp"))
    X_layout = dist.ShardSpec(partition=("row",), mesh_axes=("dp",))
    W = dist.tensor(w.shape, layout=W_layout, mesh=mesh, dtype="fp32", init=w)
    X = dist.tensor(x.shape, layout=X_layout, mesh=mesh, dtype="fp32", init=x)
    Y_layout = dist.ShardSpec(partition=("row",), mesh_axes=("tp",))

    def tp_matmul(W_local, X_local):
        assert W_local.shape == (4, 3) and X_local.shape == (3, 5)
        return dist.all_reduce(op.matmul(W_local, X_local), axis="dp")

    eager = dist.local(tp_matmul, mesh=mesh, out_layouts=Y_layout)
    jitted = jax.jit(
        dist.local(tp_matmul, mesh=mesh, in_layouts=(W_layout, X_layout), out_layouts=Y_layout)
    )
    for Y in (eager(W, X), jitted(W, X)):
        assert Y.sharding.spec == P("tp")
        np.testing.assert_allclose(np.asarray(Y), w @ x, rtol=1e-5, atol=1e-5)


def test_reduce_scatter_all_gather_send_recv_match_numpy(mesh: dist.Mesh) -> None:
    rng = np.random.default_rng(1)
    host = rng.standard_normal((4 * 8, 6)).astype(np.float32)  # device k holds rows 8k..8k+7
    spec = dist.ShardSpec(partition=(0,), mesh_axes=("dp",))
    x = dist.tensor(host.shape, layout=spec, mesh=mesh, dtype="fp32", init=host)
    pieces = np.split(host, 4)  # along dp; identical on both tp rows

    def body(a):
        rs = dist.reduce_scatter(a, axis="dp", dim=0)  # [2, 6]
        ag = dist.all_gather(a, axis="dp", dim=1)  # [8, 24]
        nxt = dist.send(a, axis="dp", to=1)  # from dp-1
        prv = dist.recv(a, axis="dp", frm=1)  # from dp+1
        return rs, ag, nxt, prv, dist.axis_index("dp")[None]

    outs = dist.local(
        body,
        mesh=mesh,
        out_layouts=(spec, dist.ShardSpec(partition=(0,), mesh_axes=("dp",)), spec, spec, spec),
    )(x)
    rs, ag, nxt, prv, idx = (np.asarray(o) for o in outs)
    total = sum(pieces)
    np.testing.assert_allclose(rs, total, rtol=1e-5, atol=1e-5)  # the 4 slices, in dp order
    np.testing.assert_array_equal(ag, np.tile(np.concatenate(pieces, axis=1), (4, 1)))
    zero = np.zeros_like(pieces[0])
    np.testing.assert_array_equal(nxt, np.concatenate([zero, *pieces[:3]]))
    np.testing.assert_array_equal(prv, np.concatenate([*pieces[1:], zero]))
    np.testing.assert_array_equal(idx, np.arange(4))


def test_all_reduce_follows_the_numerics_policy() -> None:
    m = dist.Mesh(axes=["dp"], devices=range(8))
    host = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32)
    x = dist.tensor(
        host.shape, layout=dist.ShardSpec((0,), ("dp",)), mesh=m, dtype="fp32", init=host
    )
    f = dist.local(lambda a: dist.all_reduce(a, axis="dp"), mesh=m)
    with ttnn.numerics("deterministic"):
        got = np.asarray(f(x))
    acc = host[0]
    for row in host[1:]:
        acc = acc + row
    np.testing.assert_array_equal(got[0], acc)


def test_all_gather_backward_follows_the_numerics_policy() -> None:
    """The gradient of dist.all_gather sums every device's cotangent for this device's block:
    under "deterministic" in device order, bitwise numpy's left fold."""
    m = dist.Mesh(axes=["dp"], devices=range(8))
    rng = np.random.default_rng(3)
    spec = dist.ShardSpec((0,), ("dp",))
    host = rng.standard_normal((8, 4)).astype(np.float32)  # device k: row k
    scale = np.float32(10.0) ** rng.integers(-4, 5, (8, 1, 1))  # magnitudes make the order show
    cot = (rng.standard_normal((8, 8, 4)) * scale).astype(np.float32)  # device k: cot[k], [8, 4]
    x = dist.tensor(host.shape, layout=spec, mesh=m, dtype="fp32", init=host)
    c = dist.tensor((64, 4), layout=spec, mesh=m, dtype="fp32", init=cot.reshape(64, 4))

    def grad(a, c):
        return jax.grad(lambda a: jnp.sum(c * dist.all_gather(a, axis="dp", dim=0)))(a)

    program = jax.jit(dist.local(grad, mesh=m, in_layouts=(spec, spec), out_layouts=spec))
    assert unordered_sums(program.lower(x, c).as_text()) == ["reduce_scatter"]  # fast: XLA's
    with ttnn.numerics("deterministic"):
        assert unordered_sums(program.lower(x, c).as_text()) == []
        got = np.asarray(program(x, c))
    want = cot[0].copy()
    for rows in cot[1:]:
        want = want + rows  # row i: device 0's, then 1's, ... cotangent for device i's block
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want, sum(cot[::-1][1:], cot[-1]))


def test_collective_errors_name_axis_and_fix(mesh: dist.Mesh) -> None:
    x = dist.tensor((8, 8), mesh=mesh, dtype="fp32")
    only_tp = dist.local(lambda a: dist.all_reduce(a, axis="dp"), mesh=mesh, axes=["tp"])
    with pytest.raises(
        CCLError, match=r"'dp' is not mapped by this dist.local region.*\['tp'\][\s\S]*fix:"
    ):
        only_tp(x)
    unknown = dist.local(lambda a: dist.all_gather(a, axis="pp"), mesh=mesh)
    with pytest.raises(CCLError, match=r"'pp' is not an axis of the mesh[\s\S]*fix:"):
        unknown(x)
    with pytest.raises(CCLError, match=r"outside a dist.local region[\s\S]*fix:"):
        dist.all_reduce(jnp.ones(2), axis="dp")
    in_jit = jax.jit(dist.local(lambda a: a, mesh=mesh))
    with pytest.raises(ShardingError, match=r"args\[0\] is traced[\s\S]*fix: pass in_layouts="):
        in_jit(x)
    not_replicated = dist.local(lambda a: a * dist.axis_index("dp"), mesh=mesh)
    with pytest.raises(ShardingError, match=r"not replicated[\s\S]*fix: all_reduce"):
        not_replicated(x)


def test_shard_spec_of_logical_axes_places_like_numpy() -> None:
    """The plan's rule table in Tessera's names: on a role-named (dp, tp) mesh a column-parallel
    weight [out, in] splits its rows over tp, a (batch, vocab) tensor rows over dp and columns
    over tp, norms stay REPLICATED; each device holds numpy's block."""
    from ttjax.plan import LogicalAxes, ParallelDims

    m = dist.Mesh(axes=["dp", "tp"], devices=range(8), shape=(2, 4))
    dims = dist.plan_of(m)
    assert dims == ParallelDims((2, 4), ("dp", "tp"))
    assert dist.plan_of(dist.Mesh(axes=["tp", "x"], devices=range(8), shape=(4, 2))).roles == (
        "tp",
        None,
    )
    host = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    cases = {  # logical axes -> (layout, device (r, c)'s block)
        ("mlp", "embed"): (
            dist.ShardSpec(partition=(0,), mesh_axes=("tp",)),
            lambda r, c: np.split(host, 4, axis=0)[c],
        ),
        ("batch", "vocab"): (
            dist.ShardSpec(partition=(0, 1), mesh_axes=("dp", "tp")),
            lambda r, c: np.split(np.split(host, 2, axis=0)[r], 4, axis=1)[c],
        ),
        ("embed", None): (dist.REPLICATED, lambda r, c: host),
    }
    for names, (want, piece) in cases.items():
        layout = dist.shard_spec(dims, LogicalAxes(*names))
        assert layout == want, names
        x = dist.tensor(host.shape, layout=layout, mesh=m, dtype="fp32", init=host)
        for dev, block in blocks(x).items():
            r, c = np.argwhere(m.device_ids == dev)[0]
            np.testing.assert_array_equal(block, piece(r, c), err_msg=f"{names} device {dev}")
