"""Ops as tt-metal's tt_transformers and Mixtral modules call them (fused activations, mul/div/
eqz/plus_one/topk, 4-D embedding weights, 3-argument reshape, as_tensor's preprocess and
cache), each compared per device with torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _op_testing import Layout, check, device_arrays, put
from conftest import mesh_of

import ttjax as ttnn

COLS = Layout("1d", (3, 3))


def _t(want: dict) -> dict:
    return {c: torch.from_numpy(np.asarray(w, np.float32)) for c, w in want.items()}


@pytest.mark.parametrize("mesh_shape", [(1, 8), (2, 4)])
@pytest.mark.parametrize(
    "act,ref",
    [
        (ttnn.UnaryOpType.SILU, torch.nn.functional.silu),
        (
            ttnn.UnaryWithParam(ttnn.UnaryOpType.GELU, 1.0),
            lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
        ),
        (ttnn.UnaryWithParam(ttnn.UnaryOpType.GELU, 0.0), torch.nn.functional.gelu),
        (ttnn.UnaryOpType.RELU, torch.relu),
    ],
)
def test_mul_applies_input_a_activations_first(mesh_shape, act, ref):
    rng = np.random.default_rng(3)
    shape = COLS.global_shape((1, 1, 32, 64), mesh_shape)
    a, wa = put(rng.standard_normal(shape).astype(np.float32), mesh_shape, COLS, ttnn.float32)
    b, wb = put(rng.standard_normal(shape).astype(np.float32), mesh_shape, COLS, ttnn.float32)
    y = ttnn.mul(a, b, input_tensor_a_activations=[act], memory_config=ttnn.L1_MEMORY_CONFIG)
    ta, tb = _t(wa), _t(wb)
    check(y, {c: (ref(ta[c]) * tb[c]).double().numpy() for c in wa}, tol=(1e-5, 1e-5))
    assert y.memory_config() == ttnn.L1_MEMORY_CONFIG


@pytest.mark.parametrize("mesh_shape", [(1, 8), (2, 4)])
def test_matmul_program_config_fused_activation_is_applied(mesh_shape):
    rng = np.random.default_rng(4)
    a, wa = put(
        rng.standard_normal((1, 1, 32, 64)).astype(np.float32), mesh_shape, dtype=ttnn.float32
    )
    n = 32 * int(np.prod(mesh_shape))
    w, ww = put(
        rng.standard_normal((1, 1, 64, n)).astype(np.float32), mesh_shape, COLS, ttnn.float32
    )
    pc = ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(8, 1),
        in0_block_w=2,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=1,
        fuse_batch=True,
        fused_activation=ttnn.UnaryOpType.SILU,
        mcast_in0=True,
    )
    y = ttnn.matmul(a, w, program_config=pc)
    ta, tw = _t(wa), _t(ww)
    want = {c: torch.nn.functional.silu(ta[c].double() @ tw[c].double()).numpy() for c in wa}
    check(y, want, tol=(1e-4, 1e-4))
    dram = ttnn.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(
        in0_block_w=2,
        per_core_M=1,
        per_core_N=1,
        fused_activation=ttnn.UnaryWithParam(ttnn.UnaryOpType.GELU, 1.0),
    )
    z = ttnn.linear(a, w, program_config=dram)
    want = {
        c: torch.nn.functional.gelu(ta[c].double() @ tw[c].double(), approximate="tanh").numpy()
        for c in wa
    }
    check(z, want, tol=(1e-4, 1e-4))
    plain = ttnn.matmul(
        a,
        w,
        program_config=ttnn.MatmulMultiCoreReuseProgramConfig(
            compute_with_storage_grid_size=(8, 1),
            in0_block_w=2,
            out_subblock_h=1,
            out_subblock_w=1,
            per_core_M=1,
            per_core_N=1,
        ),
    )
    check(plain, {c: (ta[c].double() @ tw[c].double()).numpy() for c in wa}, tol=(1e-4, 1e-4))


def test_div_eqz_and_rounding():
    rng = np.random.default_rng(5)
    x = rng.uniform(-8, 8, (8, 1, 32, 32)).astype(np.float32)
    x[0, 0, 0, :4] = 0.0
    t, w = put(x, (2, 4), Layout("1d", (0, 0)), ttnn.float32)
    check(ttnn.div(t, 8), {c: v / 8 for c, v in w.items()}, tol=(1e-6, 1e-6))
    check(
        ttnn.div(t, 3.0, round_mode="floor"),
        {c: np.floor(v / 3.0) for c, v in w.items()},
        exact=True,
    )
    check(
        ttnn.div(t, 3.0, round_mode="trunc"),
        {c: np.trunc(v / 3.0) for c, v in w.items()},
        exact=True,
    )
    check(ttnn.eqz(t), {c: (v == 0).astype(np.float64) for c, v in w.items()}, exact=True)
    with pytest.raises(ttnn.TTJaxError, match="round_mode"):
        ttnn.div(t, 2.0, round_mode="ceil")


def test_plus_one_increments_in_place_and_skips_negatives():
    mesh = mesh_of((1, 8))
    pos = np.array([3, -1, 7, 0, -5, 11, 2, 9], np.int32)
    t = ttnn.from_torch(
        torch.from_numpy(pos),
        dtype=ttnn.int32,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    assert ttnn.plus_one(t, skip_negative_entries=True) is t
    for got in device_arrays(t).values():
        np.testing.assert_array_equal(got, np.where(pos < 0, pos, pos + 1))
    ttnn.plus_one(t)
    for got in device_arrays(t).values():
        np.testing.assert_array_equal(got, np.where(pos < 0, pos + 1, pos + 2))
    with pytest.raises(ttnn.TTJaxError, match="INT32 or UINT32"):
        ttnn.plus_one(ttnn.from_torch(torch.ones(8), device=mesh))


@pytest.mark.parametrize("mesh_shape", [(1, 8), (2, 4)])
def test_topk_values_and_indices_match_torch(mesh_shape):
    rng = np.random.default_rng(6)
    n = int(np.prod(mesh_shape))
    x = rng.permutation(n * 32 * 64).reshape(n, 1, 32, 64).astype(np.float32)
    t, w = put(x, mesh_shape, Layout("1d", (0, 0)), ttnn.bfloat16)
    values, indices = ttnn.topk(t, 32)
    assert indices.dtype == ttnn.uint16 and values.dtype == ttnn.bfloat16
    got_v, got_i = device_arrays(values), device_arrays(indices)
    for c, v in w.items():
        ref = torch.topk(torch.from_numpy(v.astype(np.float32)), 32, dim=-1)
        np.testing.assert_array_equal(got_v[c].astype(np.float32), ref.values.numpy())
        np.testing.assert_array_equal(
            np.take_along_axis(v, got_i[c].astype(np.int64), -1), ref.values.double().numpy()
        )
    small, idx = ttnn.topk(t, 4, dim=-2, largest=False)
    for c, v in w.items():
        ref = torch.topk(torch.from_numpy(v.astype(np.float32)), 4, dim=-2, largest=False)
        np.testing.assert_array_equal(
            device_arrays(small)[c].astype(np.float32), ref.values.numpy()
        )
        np.testing.assert_array_equal(
            np.take_along_axis(v, device_arrays(idx)[c].astype(np.int64), -2),
            ref.values.double().numpy(),
        )


def test_mixtral_gate_topk_eqz_typecast_chain():
    # mixtral_moe.py (non-fused branch): topk, add mask, eqz(indices), typecast, softmax * mask.
    mesh = mesh_of((1, 8))
    rng = np.random.default_rng(7)
    logits = torch.from_numpy(rng.standard_normal((1, 1, 32, 64)).astype(np.float32))
    g = ttnn.from_torch(logits, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    vals, inds = ttnn.topk(g, 32)
    mask = ttnn.typecast(ttnn.eqz(inds), dtype=ttnn.bfloat16)
    weights = ttnn.sum(ttnn.softmax(vals, dim=-1) * mask, dim=3)
    ref_logits = logits.to(torch.bfloat16).float()
    rv, ri = torch.topk(ref_logits, 32, dim=-1)
    want = (torch.softmax(rv, -1) * (ri == 0)).sum(-1).numpy()
    for got in device_arrays(weights).values():
        np.testing.assert_allclose(got.astype(np.float32), want, atol=2e-2)


@pytest.mark.parametrize("mesh_shape", [(1, 8), (2, 4)])
def test_embedding_reads_rows_of_a_4d_weight(mesh_shape):
    mesh = mesh_of(mesh_shape)
    rng = np.random.default_rng(8)
    vocab, hidden = 50, 64 * int(np.prod(mesh_shape)) // mesh_shape[1]
    weight = torch.from_numpy(rng.standard_normal((vocab, hidden)).astype(np.float32))
    w = ttnn.as_tensor(
        weight[None, None],
        dtype=ttnn.bfloat16,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        device=mesh,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=tuple(mesh.shape)),
    )
    ids = torch.from_numpy(rng.integers(0, vocab, (1, 32)).astype(np.int32))
    x = ttnn.from_torch(
        ids, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
    )
    y = ttnn.embedding(x, w, layout=ttnn.TILE_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    per = hidden // mesh_shape[1]
    assert tuple(y.shape) == (1, 32, per) and y.layout == ttnn.TILE_LAYOUT
    ref = torch.nn.functional.embedding(ids.long(), weight.to(torch.bfloat16).float()).numpy()
    for (_r, col), got in device_arrays(y).items():
        np.testing.assert_array_equal(got.astype(np.float32), ref[..., col * per : (col + 1) * per])
    flat = ttnn.embedding(ttnn.reshape(x, (32,)), w, pad_token=int(ids[0, 0]))
    by_name = ttnn.embedding(ttnn.reshape(x, (32,)), w, padding_idx=int(ids[0, 0]))  # pybind's
    want = ref[0].copy()
    want[ids[0].numpy() == int(ids[0, 0])] = 0
    for out in (flat, by_name):
        for (_r, col), got in device_arrays(out).items():
            np.testing.assert_array_equal(
                got.astype(np.float32), want[:, col * per : (col + 1) * per]
            )


def test_reshape_with_padded_shape():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((8, 1, 32, 64)).astype(np.float32)
    t, w = put(x, (1, 8), Layout("1d", (0, 0)), ttnn.float32)
    # attention.py decode: keep the first `batch` rows of a tile-padded [1, 1, 32, n].
    y = ttnn.reshape(t, (1, 1, 8, 64), (1, 1, 32, 64))
    check(y, {c: v[:, :, :8] for c, v in w.items()}, exact=True)
    z = ttnn.reshape(t, (1, 1, 64, 32), (1, 1, 64, 32))  # same element count: a plain reshape
    check(z, {c: v.reshape(1, 1, 64, 32) for c, v in w.items()}, exact=True)
    # 1-D bias in TILE layout: TT-NN pads it to [32, n]; logical [1, 1, 1, n] keeps the values.
    b, wb = put(
        rng.standard_normal((8 * 32,)).astype(np.float32),
        (1, 8),
        Layout("1d", (0, 0)),
        ttnn.float32,
    )
    assert b.shape[-2] == 1  # TT-NN's Shape pads to rank 4 with leading ones
    rb = ttnn.reshape(b, (1, 1, 1, b.shape[-1]), (1, 1, b.shape[-2], b.shape[-1]))
    check(rb, {c: v.reshape(1, 1, 1, -1) for c, v in wb.items()}, exact=True)
    with pytest.raises(ttnn.ShapeMismatchError, match="padded"):
        ttnn.reshape(t, (1, 1, 8, 64), (1, 1, 16, 64))


def test_as_tensor_preprocess_and_cache(tmp_path):
    mesh = mesh_of((2, 4))
    rng = np.random.default_rng(10)
    host = torch.from_numpy(rng.standard_normal((64, 128)).astype(np.float32))
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(0, 1), mesh_shape=(2, 4))
    kw = dict(
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=ttnn.L1_MEMORY_CONFIG,
        mesh_mapper=mapper,
    )
    calls = []

    def transpose(x):
        calls.append(1)
        return x.T.contiguous()

    name = tmp_path / "w1"
    a = ttnn.as_tensor(host, cache_file_name=name, preprocess=transpose, **kw)
    path = tmp_path / "w1_dtype_FLOAT32_layout_TILE.tensorbin"
    assert path.is_file() and calls == [1]
    assert a.memory_config() == ttnn.L1_MEMORY_CONFIG and tuple(a.shape) == (64, 16)
    ref = host.T.numpy()
    want = {
        (r, c): ref[r * 64 : (r + 1) * 64, c * 16 : (c + 1) * 16]
        for r in range(2)
        for c in range(4)
    }
    check(a, want, exact=True)
    # The cache holds the preprocessed tensor: a second call loads it and never preprocesses.
    b = ttnn.as_tensor(host, cache_file_name=name, preprocess=transpose, **kw)
    assert calls == [1]
    check(b, want, exact=True)
    # No cache: preprocess runs each time.
    ttnn.as_tensor(host, preprocess=transpose, **kw)
    assert calls == [1, 1]
    with pytest.raises(ttnn.TTJaxError, match="memory_config must be specified"):
        ttnn.as_tensor(host, device=mesh)


def test_to_layout_row_major_of_bfloat8_b_gives_bfloat16():
    # model.py's LM-head output: untilize of a bfloat8_b tensor is bfloat16 in TT-NN.
    mesh = mesh_of((1, 8))
    x = np.random.default_rng(11).standard_normal((1, 1, 32, 64)).astype(np.float32)
    t = ttnn.from_torch(x, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=mesh)
    rm = ttnn.to_layout(t, layout=ttnn.ROW_MAJOR_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    assert rm.dtype == ttnn.bfloat16 and rm.layout == ttnn.ROW_MAJOR_LAYOUT
    want = device_arrays(t)
    for c, got in device_arrays(rm).items():
        np.testing.assert_array_equal(got.astype(np.float32), want[c].astype(np.float32))
    with pytest.raises(ttnn.LayoutError):
        ttnn.to_layout(t, ttnn.ROW_MAJOR_LAYOUT, dtype=ttnn.bfloat8_b)


@pytest.mark.parametrize("mapper", ["replicate", "shard"])
def test_reshape_and_unsqueeze_to_4d_of_host_tensors(mapper):
    # model.py prepare_decode_inputs_host: unsqueeze_to_4D(from_torch(tokens, device=None, mesh_mapper=...)).
    mesh = mesh_of((2, 4))
    tokens = torch.arange(64, dtype=torch.int32).reshape(8, 8)
    mm = (
        ttnn.ReplicateTensorToMesh(mesh)
        if mapper == "replicate"
        else ttnn.ShardTensorToMesh(mesh, dim=0)
    )
    host = ttnn.from_torch(tokens, device=None, dtype=ttnn.uint32, mesh_mapper=mm)
    four = ttnn.unsqueeze_to_4D(host)
    assert four.storage_type() == ttnn.StorageType.HOST and tuple(four.shape) == (1, 1) + tuple(
        host.shape
    )
    on_dev = ttnn.to_device(four, mesh)
    ref = tokens.numpy().astype(np.uint32)
    for i, (_c, got) in enumerate(sorted(device_arrays(on_dev).items())):
        want = ref if mapper == "replicate" else ref[i : i + 1]
        np.testing.assert_array_equal(got, want.reshape(1, 1, *want.shape))
    plain = ttnn.reshape(ttnn.from_torch(tokens), (64,))
    np.testing.assert_array_equal(ttnn.to_numpy(plain), tokens.numpy().reshape(64))


def test_clone_copies_with_dtype_and_memory_config():
    t, w = put(
        np.random.default_rng(12).standard_normal((8, 1, 32, 32)).astype(np.float32),
        (2, 4),
        Layout("1d", (0, 0)),
        ttnn.float32,
    )
    c = ttnn.clone(t, dtype=ttnn.bfloat16, memory_config=ttnn.L1_MEMORY_CONFIG)
    assert c.dtype == ttnn.bfloat16 and c.memory_config() == ttnn.L1_MEMORY_CONFIG
    check(
        c,
        {k: v.astype(np.float32).astype("bfloat16").astype(np.float64) for k, v in w.items()},
        exact=True,
    )
    ttnn.deallocate(t)
    assert c.is_allocated()


def test_activation_strings_name_unary_op_types():
    t, w = put(
        np.linspace(-8, 8, 8 * 32 * 32, dtype=np.float32).reshape(8, 1, 32, 32),
        (1, 8),
        Layout("1d", (0, 0)),
        ttnn.float32,
    )
    eye, _ = put(
        np.broadcast_to(np.eye(32, dtype=np.float32), (8, 1, 32, 32)).copy(),
        (1, 8),
        Layout("1d", (0, 0)),
        ttnn.float32,
    )
    y = ttnn.matmul(t, eye, activation="relu6")
    check(y, {c: np.clip(v, 0, 6) for c, v in w.items()}, tol=(1e-6, 1e-6))
    with pytest.raises(ttnn.TTJaxError, match="string_to_unary_with_param"):
        ttnn.matmul(t, eye, activation="swishy")


def test_stack_expand_sub_and_reshape_on_device():
    rng = np.random.default_rng(15)
    a, wa = put(
        rng.standard_normal((8, 1, 1, 32)).astype(np.float32),
        (2, 4),
        Layout("1d", (0, 0)),
        ttnn.float32,
    )
    b, wb = put(
        rng.standard_normal((8, 1, 1, 32)).astype(np.float32),
        (2, 4),
        Layout("1d", (0, 0)),
        ttnn.float32,
    )
    check(ttnn.stack([a, b], dim=1), {c: np.stack([wa[c], wb[c]], axis=1) for c in wa}, exact=True)
    check(ttnn.sub(a, b), {c: wa[c] - wb[c] for c in wa}, tol=(1e-6, 1e-6))
    check(
        ttnn.expand(a, [1, 4, -1, 32]),
        {c: np.broadcast_to(wa[c], (1, 4, 1, 32)) for c in wa},
        exact=True,
    )
    check(
        ttnn.reshape_on_device(a, 1, 1, 2, 16),
        {c: wa[c].reshape(1, 1, 2, 16) for c in wa},
        exact=True,
    )
    assert ttnn.get_memory_config(a) == ttnn.DRAM_MEMORY_CONFIG
    assert ttnn.get_memory_config(ttnn.from_torch(np.ones(2, np.float32))) is None
    with pytest.raises(ttnn.ShapeMismatchError, match="Only size 1 dimensions"):
        ttnn.expand(a, [1, 1, 1, 64])


def test_dump_and_load_tensor_round_trip(tmp_path):
    mesh = mesh_of((2, 4))
    x = np.random.default_rng(16).standard_normal((64, 128)).astype(np.float32)
    t = ttnn.from_torch(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(0, 1), mesh_shape=(2, 4)),
    )
    path = tmp_path / "t.tensorbin"
    ttnn.dump_tensor(path, t)
    back = ttnn.load_tensor(path, device=mesh)
    assert (
        back.dtype == ttnn.bfloat16
        and back.layout == ttnn.TILE_LAYOUT
        and tuple(back.shape) == (32, 32)
    )
    check(back, device_arrays(t), exact=True)
    with pytest.raises(ttnn.TTJaxError, match=r"must have \.tensorbin extension"):
        ttnn.dump_tensor(tmp_path / "t.bin", t)
    with pytest.raises(ttnn.TTJaxError, match="another mesh shape"):
        ttnn.load_tensor(path, device=mesh_of((1, 8)))
    # without device=: a host tensor keeping its shards (over the open 2x4 mesh), then
    # Tensor.to(device, mem_config=) as deepseek_v3's load_weight does
    host = ttnn.load_tensor(path)
    assert host.storage_type() == ttnn.StorageType.HOST
    check(host.to(device=mesh, mem_config=ttnn.L1_MEMORY_CONFIG), device_arrays(t), exact=True)
    with pytest.raises(ttnn.TTJaxError, match="does not exist"):
        ttnn.load_tensor(tmp_path / "missing.tensorbin")
