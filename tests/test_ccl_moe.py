"""ttnn.all_to_all_dispatch / all_to_all_combine (MoE token routing) against numpy per device.

A 2x4 mesh with 16 experts, two per device (TT-NN's one-hot ``expert_mapping_tensor``), each
device its own tokens and top-3 experts; the reference follows TT-NN's kernels device by device:
dispatch gathers the cluster-axis group's tokens and keeps those routed to this device, combine
sends every expert row back to the token's device at the token's top-k position.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import mesh_of

import ttjax as ttnn

R, C, B, H, K = 2, 4, 2, 8, 3  # mesh rows x cols, tokens per device, hidden, top-k
E, PER = 16, 2  # experts, experts per device


def _put(mesh: ttnn.MeshDevice, x: np.ndarray, dtype: ttnn.DataType, dims=(0, 1)) -> ttnn.Tensor:
    return ttnn.from_torch(
        torch.from_numpy(x),
        device=mesh,
        dtype=dtype,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, mesh_shape=(R, C), dims=dims),
    )


def _bf16(a: np.ndarray) -> np.ndarray:
    return torch.from_numpy(a.astype(np.float32)).bfloat16().float().numpy()


def _per_device(t: ttnn.Tensor) -> list[np.ndarray]:
    return [ttnn.to_torch(s).float().numpy() for s in ttnn.get_device_tensors(t)]


def _routing():
    rng = np.random.default_rng(0)
    x = (rng.integers(-64, 64, (R * B, C, 1, H)) / 8).astype(np.float32)  # exact in bfloat16
    idx = np.stack([rng.choice(E, K, replace=False) for _ in range(R * B * C)]).astype(np.int32)
    idx = idx.reshape(R * B, C, 1, K)
    mapping = np.eye(R * C, dtype=np.int32).repeat(PER, axis=0)[None, None]  # [1, 1, E, D]
    return x, idx, mapping


@pytest.mark.parametrize("axis", [0, 1])
def test_dispatch_then_combine_match_numpy(axis: int) -> None:
    mesh = mesh_of((R, C))
    x, idx, mapping = _routing()
    tx = _put(mesh, x, ttnn.bfloat16)
    ti = _put(mesh, idx, ttnn.uint16)
    tm = ttnn.from_torch(
        torch.from_numpy(mapping),
        device=mesh,
        dtype=ttnn.uint16,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    tokens, meta = ttnn.all_to_all_dispatch(tx, ti, tm, cluster_axis=axis)
    got_tokens, got_meta = _per_device(tokens), _per_device(meta)

    def local(a: np.ndarray, r: int, c: int) -> np.ndarray:  # device (r, c)'s [B, 1, 1, *]
        return a[r * B : (r + 1) * B, c : c + 1]

    def group(r: int, c: int) -> list[tuple[int, int]]:
        return [(g, c) for g in range(R)] if axis == 0 else [(r, g) for g in range(C)]

    n = R if axis == 0 else C
    expert_out = {}
    for r in range(R):
        for c in range(C):
            me = r * C + c
            xs = np.concatenate([local(x, *d).reshape(B, H) for d in group(r, c)])
            ids = np.concatenate([local(idx, *d).reshape(B, K) for d in group(r, c)])
            routed = (ids // PER == me).any(axis=1)
            want = np.where(routed[:, None], xs, 0).reshape(1, B * n, 1, H)
            np.testing.assert_array_equal(got_tokens[me], want)
            np.testing.assert_array_equal(got_meta[me], ids.reshape(1, B * n, 1, K))
            # the experts' outputs: a different value per (expert, token)
            expert_out[me] = _bf16(np.stack([xs * (1 + PER * me + j) / 4 for j in range(PER)]))

    ex = np.concatenate([expert_out[d].reshape(PER, B * n, 1, H) for d in range(R * C)])
    ex = (
        ex.reshape(R, C, PER, B * n, 1, H)
        .transpose(0, 2, 1, 3, 4, 5)
        .reshape(R * PER, C * B * n, 1, H)
    )
    combined = ttnn.all_to_all_combine(
        _put(mesh, ex.astype(np.float32), ttnn.bfloat16), meta, tm, cluster_axis=axis
    )
    got = _per_device(combined)
    for r in range(R):
        for c in range(C):
            me, pos = r * C + c, (r if axis == 0 else c)
            ids = np.concatenate([local(idx, *d).reshape(B, K) for d in group(r, c)])
            want = np.zeros((K, B, 1, H), np.float32)
            for t in range(B):
                tg = pos * B + t
                for k in range(K):
                    owner = int(ids[tg, k]) // PER
                    if owner in [d[0] * C + d[1] for d in group(r, c)]:
                        want[k, t, 0] = expert_out[owner][int(ids[tg, k]) % PER, tg]
            np.testing.assert_array_equal(got[me], want)


def test_moe_routing_refuses_what_tt_nn_refuses() -> None:
    mesh = mesh_of((R, C))
    x, idx, mapping = _routing()
    tx, ti = _put(mesh, x, ttnn.bfloat16), _put(mesh, idx, ttnn.uint16)
    tm = ttnn.from_torch(
        torch.from_numpy(mapping), device=mesh, dtype=ttnn.uint16, layout=ttnn.ROW_MAJOR_LAYOUT,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )  # fmt: skip
    with pytest.raises(ttnn.CCLError, match="same shape for all dimensions except the last"):
        ttnn.all_to_all_dispatch(tx, ttnn.reshape(ti, (1, B, 1, K)), tm, cluster_axis=0)
    with pytest.raises(ttnn.CCLError, match="Output concat dimension must be 1 or 2"):
        ttnn.all_to_all_dispatch(tx, ti, tm, cluster_axis=0, output_concat_dim=3)
    with pytest.raises(ttnn.CCLError, match=r"\[1, 1, experts, 8\]"):
        ttnn.all_to_all_dispatch(tx, ti, ttnn.reshape(tm, (1, 16, 8, 1)), cluster_axis=0)
    _, meta = ttnn.all_to_all_dispatch(tx, ti, tm, cluster_axis=0)
    with pytest.raises(ttnn.CCLError, match="Axis must be specified"):
        ttnn.all_to_all_combine(tx, meta, tm)
    with pytest.raises(ttnn.CCLError, match="Expected input shape dim 0 to be 2"):
        ttnn.all_to_all_combine(ttnn.reshape(tx, (1, B, 1, H)), meta, tm, cluster_axis=0)
