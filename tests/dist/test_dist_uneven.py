"""Uneven shards in ttjax.dist, as XLA and torch-xla split them: a dim that does not divide by its
mesh axes goes in blocks of ceil(n / k), the last ones padded with zeros (dist.PaddedArray);
per-device blocks, matmuls, reductions, gradients and a training step against numpy; the seed's
section 7.6 W on 72 devices at 100 x 100, and at 100 000 x 100 000 compiled abstractly; errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ttjax import dist
from ttjax.errors import ShardingError

ROOT = Path(__file__).resolve().parents[2]
SEED = dist.ShardSpec(partition=("row", "col"), mesh_axes=("tp", "pp"))


def padded_blocks(host: np.ndarray, ways: tuple[int, int]) -> dict[tuple[int, int], np.ndarray]:
    """numpy's reference: block (i, j) of ``host`` split ceil-wise over ``ways``, zero-padded."""
    per = [-(-n // k) for n, k in zip(host.shape, ways)]
    full = np.zeros([p * k for p, k in zip(per, ways)], host.dtype)
    full[: host.shape[0], : host.shape[1]] = host
    return {
        (i, j): full[i * per[0] : (i + 1) * per[0], j * per[1] : (j + 1) * per[1]]
        for i in range(ways[0])
        for j in range(ways[1])
    }


def check_blocks(W: dist.PaddedArray, mesh: dist.Mesh, host: np.ndarray) -> None:
    want = padded_blocks(host, (mesh.axis_size("tp"), mesh.axis_size("pp")))
    for shard in W.addressable_shards:
        coord = np.argwhere(mesh.device_ids == shard.device.id)[0]
        i, j = int(coord[mesh.axis_index("tp")]), int(coord[mesh.axis_index("pp")])
        np.testing.assert_array_equal(np.asarray(shard.data), want[i, j], err_msg=f"{i},{j}")


@pytest.fixture(scope="module")
def mesh() -> dist.Mesh:
    return dist.Mesh(axes=["tp", "pp"], devices=range(8), shape=(2, 4))


def test_tensor_that_does_not_divide_is_padded_on_the_last_blocks(mesh: dist.Mesh) -> None:
    """9 x 10 over tp x pp = 2 x 4: rows in blocks of 5 (the last 4), columns of 3 (the last 1);
    each device holds numpy's zero-padded block; reading it back gives the logical array."""
    host = np.arange(9 * 10, dtype=np.float32).reshape(9, 10)
    W = dist.tensor(host.shape, layout=SEED, mesh=mesh, dtype="fp32", init=host)
    assert isinstance(W, dist.PaddedArray)
    assert (W.shape, W.padded_shape, W.shard_shape) == ((9, 10), (10, 12), (5, 3))
    assert W.sharding.spec == jax.sharding.PartitionSpec("tp", "pp")
    np.testing.assert_array_equal(np.asarray(W), host)
    check_blocks(W, mesh, host)
    Z = dist.tensor((9, 10), layout=SEED, mesh=mesh)  # zeros, bf16
    assert Z.dtype == jnp.bfloat16 and not np.asarray(Z, np.float32).any()
    assert isinstance(dist.tensor((8, 12), layout=SEED, mesh=mesh), jax.Array)  # even: plain


def test_matmul_reductions_and_gradients_over_uneven_dims_match_numpy(mesh: dist.Mesh) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((9, 10)).astype(np.float32)
    x = rng.standard_normal((10, 3)).astype(np.float32)
    W = dist.tensor(w.shape, layout=SEED, mesh=mesh, dtype="fp32", init=w)

    @jax.jit
    def f(W, x):
        return W @ x, W.sum(axis=0), jnp.asarray(W).T.sum(axis=0), jnp.max(jnp.asarray(W))

    for got, want in zip(f(W, x), (w @ x, w.sum(0), w.sum(1), w.max())):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    loss = lambda W, x: jnp.sum((W @ x) ** 2)  # noqa: E731
    for g in (jax.jit(jax.grad(loss))(W, x), jax.grad(loss)(W, x)):  # compiled and eager
        assert isinstance(g, dist.PaddedArray) and g.padded_shape == (10, 12)
        np.testing.assert_allclose(np.asarray(g), 2 * (w @ x) @ x.T, rtol=1e-4, atol=1e-4)
        pad = np.asarray(g.storage)
        assert not pad[9:].any() and not pad[:, 10:].any()  # no gradient reaches the padding
    tx = optax.adamw(0.1, weight_decay=0.1)  # the padding stays zero under the optimizer

    @jax.jit
    def step(W, state):
        updates, state = tx.update(jax.grad(loss)(W, x), state, W)
        return optax.apply_updates(W, updates), state

    W2, _ = step(W, tx.init(W))
    want_update, _ = tx.update(
        jax.grad(loss)(jnp.asarray(w), x), tx.init(jnp.asarray(w)), jnp.asarray(w)
    )
    np.testing.assert_allclose(
        np.asarray(W2), np.asarray(optax.apply_updates(jnp.asarray(w), want_update)), rtol=1e-5
    )
    assert not np.asarray(W2.storage)[9:].any() and not np.asarray(W2.storage)[:, 10:].any()


def test_per_device_regions_refuse_uneven_layouts_with_fix(mesh: dist.Mesh) -> None:
    W = dist.tensor((9, 10), layout=SEED, mesh=mesh, dtype="fp32")
    with pytest.raises(
        ShardingError,
        match=r"args\[0\] of shape \(9, 10\) is split unevenly .*blocks of \(5, 3\), stored as "
        r"\(10, 12\)[\s\S]*fix: make its split dims multiples",
    ):
        dist.local(lambda a: a, mesh=mesh)(W)
    x = jnp.zeros((9, 10))
    with pytest.raises(
        ShardingError, match=r"size 9, .* size 2 of mesh axes \('tp',\)[\s\S]*pad it to 10"
    ):
        dist.local(lambda a: a, mesh=mesh, in_layouts=(SEED,))(x)


_SEED_72 = """
import json, jax, jax.numpy as jnp, numpy as np
from ttjax import dist
from ttjax.inspect import inspect
mesh = dist.Mesh(axes=["tp","pp","dp"], devices=range(72))
layout = dist.ShardSpec(partition=("row","col"), mesh_axes=("tp","pp"))
host = np.random.default_rng(0).standard_normal((100, 100)).astype(np.float32)
W = dist.tensor((100, 100), layout=layout, mesh=mesh, dtype="fp32", init=host)
x = np.random.default_rng(1).standard_normal((100, 7)).astype(np.float32)
f = jax.jit(lambda W, x: (W @ x, W.sum(axis=1), jnp.asarray(W).mean()))
mm, rows, mean = (np.asarray(a).tolist() for a in f(W, x))
big = dist.tensor((100_000, 100_000), layout=layout, mesh=mesh, abstract=True)
report = inspect(lambda W: jnp.sum(jnp.asarray(W), dtype=jnp.float32), big, mesh=mesh.jax_mesh)
print(json.dumps(dict(
    topology=mesh.topology, shard_shape=W.shard_shape, padded=W.padded_shape,
    blocks={f"{s.device.id}": np.asarray(s.data).tolist() for s in W.addressable_shards},
    mm=mm, rows=rows, mean=mean, big=repr(big), big_bytes=report.memory.argument_bytes,
    big_shards=big.shard_shape, itemsize=jnp.dtype(big.dtype).itemsize,
    big_kinds=sorted({c.kind for c in report.collectives}), big_temp=report.memory.temp_bytes,
    ids=mesh.device_ids.tolist())))
"""


def test_seed_layout_on_72_devices_and_full_size_bytes_per_device() -> None:
    """Section 7.6's layout on its 72-device mesh (6 x 4 x 3): a 100 x 100 W goes in blocks of
    17 x 25 (rows 85..99 on the last tp row, 15 of them), each device's block numpy's; its
    matmul and sums equal numpy's. At 100 000 x 100 000 (bf16) nothing is allocated and the
    compiled program takes ceil(1e5 / 6) * ceil(1e5 / 4) * 2 bytes per device."""
    env = {**os.environ, "TTJAX_NUM_DEVICES": "72", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", _SEED_72],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["topology"] == "tp × pp × dp mesh, 6 × 4 × 3"
    assert tuple(out["shard_shape"]) == (17, 25) and tuple(out["padded"]) == (102, 100)
    host = np.random.default_rng(0).standard_normal((100, 100)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((100, 7)).astype(np.float32)
    want = padded_blocks(host, (6, 4))
    ids = np.asarray(out["ids"])
    assert len(out["blocks"]) == 72
    for dev, block in out["blocks"].items():
        i, j, _ = np.argwhere(ids == int(dev))[0]
        np.testing.assert_array_equal(np.asarray(block, np.float32), want[i, j])
    np.testing.assert_allclose(out["mm"], host @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["rows"], host.sum(axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["mean"], host.mean(), rtol=1e-4, atol=1e-6)
    assert "stored (100002, 100000) as blocks of (16667, 25000)" in out["big"]
    assert tuple(out["big_shards"]) == (-(-100_000 // 6), -(-100_000 // 4))
    assert out["itemsize"] == 2  # the seed's default dtype, bf16
    assert out["big_bytes"] == 16_667 * 25_000 * 2 == 833_350_000
    # XLA sums each device's block where it lies and all-reduces the partial sums: W is never
    # gathered (temporaries: the block in float32 at most, not the 20 GB of W)
    assert out["big_kinds"] == ["all-reduce"], out["big_kinds"]
    assert out["big_temp"] <= 16_667 * 25_000 * 4 + 1024
