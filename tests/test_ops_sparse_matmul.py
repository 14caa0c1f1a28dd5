"""ttnn.sparse_matmul (the MoE expert matmul) and ttnn.Tile, against numpy per device.

Each device gets its own sparsity mask (sharded on the mesh), so the per-device reference checks
that each device skips exactly its zero entries, in each of TT-NN's three sparse modes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import mesh_of

import ttjax as ttnn

M, K, N = 5, 32, 48


def _masks(rng: np.random.Generator, devices: int, shape: tuple[int, ...], nnz: int) -> np.ndarray:
    """``devices`` masks of ``shape`` with exactly ``nnz`` non-zero (random positive) entries."""
    out = np.zeros((devices, int(np.prod(shape))), np.float32)
    for d in range(devices):
        on = rng.choice(out.shape[1], nnz, replace=False)
        out[d, on] = rng.uniform(0.1, 1.0, nnz)
    return out.reshape(devices, *shape)


def _run(a: np.ndarray, b: np.ndarray, masks: np.ndarray, nnz: int | None, **kw):
    mesh = mesh_of((1, 2))

    def put(x: np.ndarray, **more) -> ttnn.Tensor:
        return ttnn.from_torch(torch.from_numpy(x), device=mesh, dtype=ttnn.float32, **more)

    sparsity = put(
        masks.reshape(-1, *masks.shape[2:]),
        layout=ttnn.ROW_MAJOR_LAYOUT,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    out = ttnn.sparse_matmul(
        put(a, layout=ttnn.TILE_LAYOUT),
        put(b, layout=ttnn.TILE_LAYOUT),
        sparsity=sparsity,
        nnz=nnz,
        output_tile=ttnn.Tile([32, 32]),
        **kw,
    )
    return [ttnn.to_torch(t).numpy() for t in ttnn.get_device_tensors(out)]


@pytest.mark.parametrize("a_sparse,b_sparse", [(False, True), (True, True), (True, False)])
def test_sparse_matmul_matches_numpy_per_device(a_sparse: bool, b_sparse: bool) -> None:
    rng = np.random.default_rng(0)
    experts = 4
    if a_sparse and b_sparse:  # out[e] = A[e] @ B[e]
        a, rows = rng.standard_normal((1, experts, M, K)), 1
    elif a_sparse:  # out[t, e] = A[t, e] @ B[e], A's batch dims kept
        a, rows = rng.standard_normal((2, experts, M, K)), 2
    else:  # out[t, e] = A[t] @ B[e]
        a, rows = rng.standard_normal((1, 2, M, K)), 2
    a = a.astype(np.float32)
    b = rng.standard_normal((1, experts, K, N)).astype(np.float32)
    masks = _masks(rng, 2, (1, 1, rows, experts), nnz=3)
    got = _run(a, b, masks, nnz=3, is_input_a_sparse=a_sparse, is_input_b_sparse=b_sparse)
    bw = b.reshape(experts, K, N)
    for d in range(2):
        mask = masks[d].reshape(rows, experts)
        if a_sparse and b_sparse:
            want = np.stack([a[0, e] @ bw[e] * (mask[0, e] != 0) for e in range(experts)])
            want = want.reshape(1, experts, M, N)
        elif a_sparse:
            want = np.stack(
                [[a[t, e] @ bw[e] * (mask[t, e] != 0) for e in range(experts)] for t in range(2)]
            )
        else:
            want = np.stack(
                [[a[0, t] @ bw[e] * (mask[t, e] != 0) for e in range(experts)] for t in range(2)]
            ).reshape(1, 2, 1, experts, M, N)
        assert got[d].shape == want.shape
        np.testing.assert_allclose(got[d], want, rtol=1e-4, atol=1e-4)


def test_sparse_matmul_without_nnz_counts_the_mask() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1, 1, M, K)).astype(np.float32)
    b = rng.standard_normal((1, 4, K, N)).astype(np.float32)
    masks = np.zeros((2, 1, 1, 1, 4), np.float32)
    masks[0, ..., 1] = masks[1, ..., 0] = masks[1, ..., 3] = 0.5  # 1 and 2 experts
    got = _run(a, b, masks, nnz=None)
    for d, experts in ((0, [1]), (1, [0, 3])):
        for e in range(4):
            want = a[0, 0] @ b[0, e] if e in experts else np.zeros((M, N))
            np.testing.assert_allclose(got[d][0, 0, 0, e], want, rtol=1e-4, atol=1e-4)


def test_sparse_matmul_refuses_what_tt_nn_refuses() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((1, 1, M, K)).astype(np.float32)
    b = rng.standard_normal((1, 4, K, N)).astype(np.float32)
    masks = _masks(rng, 2, (1, 1, 1, 4), nnz=2)
    with pytest.raises(ttnn.ShapeMismatchError, match=r"nnz=3 but .*\[2\]"):
        _run(a, b, masks, nnz=3)
    with pytest.raises(ttnn.ShapeMismatchError, match="logical_volume"):
        _run(a, b, _masks(rng, 2, (1, 1, 1, 3), nnz=2), nnz=2)
    with pytest.raises(ttnn.ShapeMismatchError, match="Dimension K"):
        _run(np.concatenate([a, a], -1), b, masks, nnz=2)
    with pytest.raises(ttnn.ConfigError, match="Unsupported program config"):
        _run(a, b, masks, nnz=2, program_config=ttnn.MatmulMultiCoreReuseProgramConfig())
    with pytest.raises(ttnn.ConfigError, match="override output tile"):
        ttnn.sparse_matmul(None, None, sparsity=None, output_tile=ttnn.Tile([16, 32]))


def test_tile_follows_tt_metal() -> None:
    t = ttnn.Tile([16, 32])
    assert (t.tile_shape, t.face_shape, t.num_faces, t.partial_face, t.narrow_tile) == (
        [16, 32],
        [16, 16],
        2,
        1,
        0,
    )
    tt = ttnn.Tile((32, 32), transpose_tile=True)
    assert tt.transpose_within_face and tt.transpose_of_faces and tt.num_faces == 4
    assert tt == ttnn.Tile([32, 32]) and repr(tt) == "Tile with shape: [32, 32]"
    with pytest.raises(ttnn.ConfigError, match="not valid for our hardware"):
        ttnn.Tile([64, 32])
    with pytest.raises(ttnn.ConfigError, match="16 or 32 in transpose mode"):
        ttnn.Tile([8, 32], transpose_tile=True)
