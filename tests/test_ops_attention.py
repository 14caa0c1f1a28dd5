"""ttjax.ops.attention (and ring joint attention in ttjax.transformer) against numpy/torch per
device: attention_softmax(_), joint and ring-joint SDPA, BERT's fused-QKV split and the KV-cache
slice load."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _op_testing import F32, Layout, device_arrays, mesh_of, put

import ttjax as ttnn

D = 32


def tt(x: np.ndarray, mesh, dtype=F32, **kw) -> ttnn.Tensor:
    return ttnn.from_torch(torch.from_numpy(np.ascontiguousarray(x)), dtype=dtype,
                           layout=ttnn.TILE_LAYOUT, device=mesh, **kw)  # fmt: skip


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def close(got, want, tol=1e-5) -> None:
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol, atol=tol)


def test_attention_softmax_scales_masks_and_writes_in_place():
    mesh = mesh_of((1, 2))
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 4, 32, 64)).astype(np.float32)
    mask = np.where(rng.random((2, 1, 1, 64)) < 0.3, -1e9, 0.0).astype(np.float32)
    x, m = tt(scores, mesh), tt(mask, mesh)
    plain = ttnn.transformer.attention_softmax(x, head_size=16)
    masked = ttnn.transformer.attention_softmax(x, head_size=16, attention_mask=m)
    for got in device_arrays(plain).values():
        close(got, softmax(scores / 4.0))
    for got in device_arrays(masked).values():
        close(got, softmax(scores / 4.0 + mask))
    inplace = ttnn.transformer.attention_softmax_(x, head_size=16, attention_mask=m)
    assert inplace is x
    for got in device_arrays(x).values():
        close(got, softmax(scores / 4.0 + mask))
    with pytest.raises(ttnn.ShapeMismatchError, match="attention_mask is not set"):
        ttnn.transformer.attention_softmax_(x, head_size=16)


def joint_reference(q, k, v, jq, jk, jv, scale, keep=None):
    """torch's SDPA over [q; jq] x [k; jk] (keys of the first part past ``keep`` masked)."""
    qq, kk, vv = (torch.from_numpy(np.concatenate(p, 2)) for p in ((q, jq), (k, jk), (v, jv)))
    mask = torch.zeros(1, kk.shape[2])
    if keep is not None:
        mask[:, keep : k.shape[2]] = float("-inf")
    out = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, attn_mask=mask,
                                                           scale=scale)  # fmt: skip
    scores = (qq @ kk.transpose(-1, -2)) * scale + mask
    return out.numpy(), torch.logsumexp(scores, -1, keepdim=True).numpy()


def test_joint_sdpa_equals_attention_over_both_sequences():
    mesh = mesh_of((1, 2))
    rng = np.random.default_rng(1)
    b, nh, n, length = 1, 2, 64, 32
    parts = [
        rng.normal(size=(b, nh, s, D)).astype(np.float32) for s in (n, n, n, length, length, length)
    ]
    cfg = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=32,
                                 k_chunk_size=32)  # fmt: skip
    out, joint = ttnn.transformer.joint_scaled_dot_product_attention(
        *(tt(p, mesh) for p in parts), joint_strategy="rear", program_config=cfg
    )
    want, _ = joint_reference(*parts, scale=D**-0.5)
    assert out.shape == (b, nh, n, D) and joint.shape == (b, nh, length, D)
    for got in device_arrays(out).values():
        close(got, want[:, :, :n], 1e-4)
    for got in device_arrays(joint).values():
        close(got, want[:, :, n:], 1e-4)
    with pytest.raises(ttnn.ShapeMismatchError, match="Joint strategy must be 'rear'"):
        ttnn.transformer.joint_scaled_dot_product_attention(
            *(tt(p, mesh) for p in parts), joint_strategy="front", program_config=cfg
        )


@pytest.mark.parametrize("mesh_shape", [(1, 4), (2, 4)], ids=["1x4", "2x4"])
def test_ring_joint_sdpa_gathers_kv_and_masks_padding(mesh_shape):
    """Spatial q/k/v sharded on the sequence over the ring (cluster_axis 1): every device's
    output rows equal torch's joint attention over the whole (padded, masked) sequence."""
    mesh = mesh_of(mesh_shape)
    ring = mesh_shape[1]
    rng = np.random.default_rng(2)
    b, nh, n_local, length = 1, 2, 32, 32
    n, logical = n_local * ring, n_local * ring - 20
    q, k, v = (rng.normal(size=(b, nh, n, D)).astype(np.float32) for _ in range(3))
    jq, jk, jv = (rng.normal(size=(b, nh, length, D)).astype(np.float32) for _ in range(3))
    seq = Layout("2d", (None, 2))
    qt, kt, vt = (put(a, mesh_shape, seq, F32)[0] for a in (q, k, v))
    jqt, jkt, jvt = (tt(a, mesh) for a in (jq, jk, jv))
    buf_k = ttnn.allocate_tensor_on_device((b, nh, n, D), F32, ttnn.TILE_LAYOUT, mesh)
    buf_v = ttnn.allocate_tensor_on_device((b, nh, n, D), F32, ttnn.TILE_LAYOUT, mesh)
    cfg = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(8, 6),
                                 q_chunk_size=32, k_chunk_size=32)  # fmt: skip
    sems = [ttnn.create_global_semaphore(mesh, ttnn.CoreRangeSet(
        {ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 0))}), 0) for _ in range(2)]  # fmt: skip

    def ring_joint(ccl_row: int):
        return ttnn.transformer.ring_joint_scaled_dot_product_attention(
            qt, kt, vt, jqt, jkt, jvt,
            persistent_output_buffer_k=buf_k, persistent_output_buffer_v=buf_v,
            joint_strategy="rear", logical_n=logical, program_config=cfg, dim=2,
            multi_device_global_semaphore=sems, num_links=1, cluster_axis=1, mesh_device=mesh,
            topology=ttnn.Topology.Linear, ccl_core_grid_offset=ttnn.CoreCoord(0, ccl_row),
        )  # fmt: skip

    out, joint, lse = ring_joint(6)
    want, want_lse = joint_reference(q, k, v, jq, jk, jv, D**-0.5, keep=logical)
    assert lse.shape == (b, nh, n_local + length, 1)
    for (_, c), got in device_arrays(out).items():
        close(got, want[:, :, c * n_local : (c + 1) * n_local], 1e-4)
    for got in device_arrays(joint).values():
        close(got, want[:, :, n:], 1e-4)
    for (_, c), got in device_arrays(lse).items():
        rows = np.concatenate(
            [want_lse[:, :, c * n_local : (c + 1) * n_local], want_lse[:, :, n:]], 2
        )
        close(got, rows, 1e-4)
    for got in device_arrays(buf_k).values():
        close(got, k)
    with pytest.raises(ttnn.ShapeMismatchError, match="overlaps with AllGather coregrid"):
        ring_joint(2)  # the SDPA grid has 6 rows: CCL cores from row 2 overlap it


def bert_heads(x: np.ndarray, nh: int, groups: int):
    """The BERT-large unit test's reference: G column blocks of [q | k | v], heads in order."""
    b, _, s, w = x.shape
    blocks = np.split(x, groups, axis=-1)
    q, k, v = (np.concatenate([np.split(blk, 3, -1)[i] for blk in blocks], -1) for i in range(3))
    d = w // (3 * nh)

    def heads(t):
        return t.reshape(b, s, nh, d).transpose(0, 2, 1, 3)

    return heads(q), heads(k).transpose(0, 1, 3, 2), heads(v)


def test_bert_split_fused_qkv_interleaved_and_block_sharded():
    mesh = mesh_of((1, 2))
    rng = np.random.default_rng(3)
    nh = 4
    x = rng.normal(size=(8, 1, 32, 3 * nh * D)).astype(np.float32)
    q, k, v = ttnn.experimental.split_query_key_value_and_split_heads(
        tt(x, mesh), ttnn.CoreCoord(8, 8), num_heads=nh
    )
    for got, want in zip((q, k, v), bert_heads(x, nh, 1)):
        for arr in device_arrays(got).values():
            close(arr, want, 0)
    # block-sharded: 2 core rows (COL_MAJOR) -> 2 [q|k|v] blocks of 2 heads each
    xs = ttnn.interleaved_to_sharded(tt(x, mesh), ttnn.CoreCoord(8, 2), [32, 3 * nh * D // 2],
                                     ttnn.TensorMemoryLayout.BLOCK_SHARDED,
                                     ttnn.ShardOrientation.COL_MAJOR)  # fmt: skip
    q, k, v = ttnn.experimental.split_query_key_value_and_split_heads(
        xs, ttnn.CoreCoord(8, 8), num_heads=nh, memory_config=ttnn.DRAM_MEMORY_CONFIG
    )
    for got, want in zip((q, k, v), bert_heads(x, nh, 2)):
        for arr in device_arrays(got).values():
            close(arr, want, 0)
    with pytest.raises(ttnn.ShapeMismatchError, match="batch size must be between"):
        ttnn.experimental.split_query_key_value_and_split_heads(
            tt(x[:2], mesh), ttnn.CoreCoord(8, 8), num_heads=nh
        )


def test_nlp_kv_cache_load_slice_height_shards_one_user_head_per_core():
    mesh = mesh_of((1, 2))
    cache = np.random.default_rng(4).normal(size=(2, 4, 128, D)).astype(np.float32)
    out = ttnn.experimental.nlp_kv_cache_load_slice(tt(cache, mesh), seq_len_start=32,
                                                    seq_len_end=96)  # fmt: skip
    assert out.shape == (2, 4, 64, D)
    spec = out.memory_config().shard_spec
    assert out.memory_config().memory_layout == ttnn.TensorMemoryLayout.HEIGHT_SHARDED
    assert spec.shape == (64, D) and spec.num_cores() == 8
    for got in device_arrays(out).values():
        close(got, cache[:, :, 32:96], 0)
    with pytest.raises(ttnn.ShapeMismatchError, match="full tiles"):
        ttnn.experimental.nlp_kv_cache_load_slice(tt(cache, mesh), seq_len_start=8, seq_len_end=40)
