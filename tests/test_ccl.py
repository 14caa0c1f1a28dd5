"""CCL: every collective against a per-device numpy reference, eager and jitted; one HLO collective
per call with TT-NN's device groups; topology-faithful lowerings; errors."""

from __future__ import annotations

import re

import jax
import ml_dtypes
import numpy as np
import pytest
from _op_testing import stored_blocks, unnormalized_blocks
from _reference import coords
from conftest import mesh_of
from hypothesis import given
from hypothesis import strategies as st

import ttjax as ttnn
from ttjax._src.tools.hlo import count_collectives, parse_collectives
from ttjax._src.ttnn import ccl as _ccl  # the lowering's private cache key

CCL_MESHES = [(1, 2), (2, 4), (1, 8), (8, 4), (1, 32)]
DTYPES = {
    "float32": (np.float32, ttnn.float32),
    "bfloat16": (ml_dtypes.bfloat16, ttnn.bfloat16),
    "int32": (np.int32, ttnn.int32),
}

# ---------------------------------------------------------------------------------------------
# Reference: groups of devices and the collectives, by loops over coordinates
# ---------------------------------------------------------------------------------------------


def group_of(c: tuple[int, ...], mesh_shape: tuple[int, ...], cluster_axis: int | None):
    """Coordinates in ``c``'s group, in TT-NN order (row-major over the group's axes)."""
    if cluster_axis is None:
        return coords(mesh_shape)
    out = []
    for k in range(mesh_shape[cluster_axis]):
        g = list(c)
        g[cluster_axis] = k
        out.append(tuple(g))
    return out


def ref_all_gather(data, mesh_shape, dim, axis):
    return {
        c: np.concatenate([data[g] for g in group_of(c, mesh_shape, axis)], axis=dim) for c in data
    }


def _reduce(arrays, op):
    stack = np.stack([a.astype(np.float64) for a in arrays])
    return {"sum": stack.sum(0), "max": stack.max(0), "min": stack.min(0)}[op]


def ref_all_reduce(data, mesh_shape, axis, op="sum"):
    return {c: _reduce([data[g] for g in group_of(c, mesh_shape, axis)], op) for c in data}


def ref_reduce_scatter(data, mesh_shape, dim, axis, op="sum"):
    out = {}
    for c in data:
        group = group_of(c, mesh_shape, axis)
        red = _reduce([data[g] for g in group], op)
        out[c] = np.split(red, len(group), axis=dim)[group.index(c)]
    return out


def ref_all_to_all(data, mesh_shape, in_dim, out_dim, axis):
    out = {}
    for c in data:
        group = group_of(c, mesh_shape, axis)
        i = group.index(c)
        out[c] = np.concatenate(
            [np.split(data[g], len(group), axis=out_dim)[i] for g in group], axis=in_dim
        )
    return out


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def per_device_input(mesh, local_shape, np_dtype, tt_dtype, seed):
    """A tensor whose every device holds different random data; returns (tensor, {coord: data})."""
    rng = np.random.default_rng(seed)
    n = mesh.get_num_devices()
    if np.dtype(np_dtype).kind == "i":
        data = rng.integers(-50, 50, (n * local_shape[0], *local_shape[1:])).astype(np_dtype)
    else:
        data = rng.standard_normal((n * local_shape[0], *local_shape[1:])).astype(np_dtype)
    t = ttnn.from_torch(
        data, dtype=tt_dtype, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )
    pieces = np.split(data, n, axis=0)
    return t, {c: pieces[k] for k, c in enumerate(coords(tuple(mesh.shape)))}


def per_device_output(t):
    mesh_shape = tuple(t.mesh_device.shape)
    return {c: ttnn.to_numpy(d) for c, d in zip(coords(mesh_shape), ttnn.get_device_tensors(t))}


def assert_close(got, want, np_dtype, exact=False):
    for c in want:
        g = np.asarray(got[c], np.float64)
        w = np.asarray(want[c], np.float64)
        assert g.shape == w.shape, (c, g.shape, w.shape)
        if exact or np.dtype(np_dtype).kind == "i":
            np.testing.assert_array_equal(g, w, err_msg=f"device {c}")
        elif np_dtype == ml_dtypes.bfloat16:
            np.testing.assert_allclose(g, w, rtol=3e-2, atol=0.2, err_msg=f"device {c}")
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"device {c}")


cases = st.fixed_dictionaries(
    {
        "mesh": st.sampled_from(CCL_MESHES),
        "rank": st.integers(2, 4),
        "dtype": st.sampled_from(sorted(DTYPES)),
        "axis": st.sampled_from([None, 0, 1]),
        "dim_pick": st.integers(0, 3),
        "jit": st.booleans(),
        "seed": st.integers(0, 2**16),
    }
)


def _setup(case):
    mesh = mesh_of(case["mesh"])
    rank = case["rank"]
    dim = case["dim_pick"] % rank
    axis = case["axis"]
    shape_axes = case["mesh"]
    group = int(np.prod(shape_axes)) if axis is None else shape_axes[axis]
    local = [2, 3, 4, 5][:rank]
    local[dim] = group * 2  # divisible for reduce_scatter / all_to_all
    np_dtype, tt_dtype = DTYPES[case["dtype"]]
    t, data = per_device_input(mesh, tuple(local), np_dtype, tt_dtype, case["seed"])
    return mesh, t, data, dim, axis, np_dtype


def _call(case, fn, t):
    return jax.jit(fn)(t) if case["jit"] else fn(t)


# ---------------------------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------------------------


@given(cases)
def test_all_gather_matches_reference(case):
    mesh, t, data, dim, axis, np_dtype = _setup(case)
    out = _call(case, lambda x: ttnn.all_gather(x, dim, cluster_axis=axis), t)
    want = ref_all_gather(data, tuple(mesh.shape), dim, axis)
    assert_close(per_device_output(out), want, np_dtype, exact=True)
    grown = list(t.shape)
    grown[dim] *= int(np.prod(mesh.shape)) if axis is None else mesh.shape[axis]
    assert list(out.shape) == grown


@given(cases)
def test_reduce_scatter_matches_reference(case):
    mesh, t, data, dim, axis, np_dtype = _setup(case)
    out = _call(case, lambda x: ttnn.reduce_scatter(x, dim, cluster_axis=axis), t)
    want = ref_reduce_scatter(data, tuple(mesh.shape), dim, axis)
    assert_close(per_device_output(out), want, np_dtype)


@given(cases, st.sampled_from(["sum", "max", "min"]))
def test_all_reduce_matches_reference(case, op):
    mesh, t, data, _, axis, np_dtype = _setup(case)
    math_op = {"sum": ttnn.ReduceType.Sum, "max": ttnn.ReduceType.Max, "min": ttnn.ReduceType.Min}
    out = _call(case, lambda x: ttnn.all_reduce(x, cluster_axis=axis, math_op=math_op[op]), t)
    want = ref_all_reduce(data, tuple(mesh.shape), axis, op)
    assert_close(per_device_output(out), want, np_dtype)


@given(cases, st.integers(0, 3))
def test_all_to_all_matches_reference(case, in_pick):
    mesh, t, data, dim, axis, np_dtype = _setup(case)
    in_dim = in_pick % len(t.shape)
    out = _call(
        case, lambda x: ttnn.all_to_all(x, in_dim=in_dim, out_dim=dim, cluster_axis=axis), t
    )
    want = ref_all_to_all(data, tuple(mesh.shape), in_dim, dim, axis)
    assert_close(per_device_output(out), want, np_dtype, exact=True)


# 8x4 unrolls 31-step rings (a long compile): `make test-all`; `make test` runs the ring on 2x4
# (both axes and the whole mesh of a 2-D mesh) and the line on 1x8.
@pytest.mark.parametrize(
    ("shape", "topology"),
    [
        ((2, 4), ttnn.Topology.Ring),
        ((1, 8), ttnn.Topology.Linear),
        pytest.param((2, 4), ttnn.Topology.Linear, marks=pytest.mark.slow),
        pytest.param((1, 8), ttnn.Topology.Ring, marks=pytest.mark.slow),
        pytest.param((8, 4), ttnn.Topology.Ring, marks=pytest.mark.slow),
        pytest.param((8, 4), ttnn.Topology.Linear, marks=pytest.mark.slow),
    ],
    ids=lambda v: f"{v[0]}x{v[1]}" if isinstance(v, tuple) else str(v),
)
def test_topology_lowering_gives_native_values(shape, topology):
    mesh = mesh_of(shape)
    t, data = per_device_input(mesh, (2, 3, 4 * 32), np.float32, ttnn.float32, seed=1)
    for axis in (None, 0, 1):
        if (mesh.shape[axis] if axis is not None else 2) == 1:
            continue
        for op in (ttnn.ReduceType.Sum, ttnn.ReduceType.Max):
            native = ttnn.reduce_scatter(t, 2, op, cluster_axis=axis, topology=topology)
            faithful = ttnn.reduce_scatter(
                t, 2, op, cluster_axis=axis, topology=topology, lowering="topology"
            )
            assert_close(per_device_output(faithful), per_device_output(native), np.float32)
        with ttnn.ccl_lowering("topology"):
            g = ttnn.all_gather(t, 2, cluster_axis=axis, topology=topology)
            r = ttnn.all_reduce(t, cluster_axis=axis, topology=topology)
        assert_close(
            per_device_output(g), ref_all_gather(data, tuple(mesh.shape), 2, axis), np.float32
        )
        assert_close(
            per_device_output(r), ref_all_reduce(data, tuple(mesh.shape), axis), np.float32
        )


def test_topology_lowering_is_n_minus_1_permute_steps(t3000):
    t, _ = per_device_input(t3000, (1, 2, 64), np.float32, ttnn.float32, seed=2)
    ring = jax.jit(lambda x: ttnn.all_gather(x, 2, lowering="topology")).lower(t).compile()
    counts = count_collectives(ring.as_text())
    assert counts["collective-permute"] == 7 and counts["all-gather"] == 0
    line = jax.jit(
        lambda x: ttnn.reduce_scatter(
            x, 2, cluster_axis=1, topology=ttnn.Topology.Linear, lowering="topology"
        )
    )
    c = count_collectives(line.lower(t).compile().as_text())
    # bidirectional line over 4 devices: 3 steps, one permute each way per step
    assert c["collective-permute"] == 6 and c["reduce-scatter"] == 0


def test_ccl_lowering_is_part_of_the_jit_cache_key(t3000):
    t, data = per_device_input(t3000, (1, 2, 64), np.float32, ttnn.float32, seed=3)
    traces = []

    @jax.jit
    def gather(x):
        traces.append(_ccl._lowering("all_gather", None))
        return ttnn.all_gather(x, 2)

    want = ref_all_gather(data, tuple(t3000.shape), 2, None)
    native = gather(t)
    with ttnn.ccl_lowering("topology"):
        ring = gather(t)  # traced again, not the native program from the cache
        counts = count_collectives(gather.lower(t).compile().as_text())
    assert counts["collective-permute"] == 7 and counts["all-gather"] == 0
    assert count_collectives(gather.lower(t).compile().as_text())["all-gather"] == 1
    gather(t)  # native again: served from the cache
    assert traces == ["native", "topology"]
    for out in (native, ring):
        assert_close(per_device_output(out), want, np.float32, exact=True)
    ttnn.ccl_lowering("topology")  # a setter for this thread, too
    try:
        assert _ccl._lowering("all_gather", None) == "topology"
    finally:
        ttnn.ccl_lowering("native")
    with pytest.raises(ttnn.CCLError, match=r"ccl_lowering\('ring'\): unknown lowering"):
        ttnn.ccl_lowering("ring")


# ---------------------------------------------------------------------------------------------
# TT-NN doc examples
# ---------------------------------------------------------------------------------------------


def test_doc_all_gather_of_replicated_concatenates_copies(n300):
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 256)).astype(np.float32)
    t = ttnn.from_torch(x, device=n300, layout=ttnn.TILE_LAYOUT)
    out = ttnn.all_gather(t, dim=0)
    assert out.shape == (2, 1, 32, 256)
    for d in ttnn.get_device_tensors(out):
        np.testing.assert_array_equal(ttnn.to_numpy(d), np.concatenate([x, x], 0))


def test_doc_reduce_scatter_shape(n300):
    x = np.ones((1, 1, 32, 256), np.float32)
    out = ttnn.reduce_scatter(ttnn.from_torch(x, device=n300), dim=3)
    assert out.shape == (1, 1, 32, 128)
    full = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(n300, dim=3))
    np.testing.assert_array_equal(full, 2 * x)


def test_doc_ring_and_line_all_gather_2x4(t3000):
    x = np.random.default_rng(1).random((1, 1, 32, 256)).astype(np.float32)
    t = ttnn.from_torch(
        x, layout=ttnn.TILE_LAYOUT, device=t3000, mesh_mapper=ttnn.ShardTensorToMesh(t3000, dim=3)
    )
    ring = ttnn.all_gather(t, dim=3, num_links=1)
    assert ring.shape == (1, 1, 32, 256)
    line = ttnn.all_gather(
        t, dim=3, cluster_axis=0, mesh_device=t3000, topology=ttnn.Topology.Linear
    )
    assert line.shape == (1, 1, 32, 64)
    for (_, c), d in zip(coords((2, 4)), ttnn.get_device_tensors(line)):
        want = np.concatenate(
            [x[..., 32 * c : 32 * c + 32], x[..., 32 * (4 + c) : 32 * (5 + c)]], 3
        )
        np.testing.assert_array_equal(ttnn.to_numpy(d), want)


@pytest.mark.parametrize("dtype", [ttnn.bfloat8_b, ttnn.bfloat4_b], ids=["bfp8", "bfp4"])
@pytest.mark.parametrize(("dim", "width"), [(3, 64), (2, 64), (3, 48)])
@pytest.mark.parametrize(
    ("axis", "topology", "lowering"),
    [
        (None, ttnn.Topology.Ring, "native"),
        (1, ttnn.Topology.Ring, "topology"),
        (0, ttnn.Topology.Linear, "topology"),
    ],
    ids=["all-native", "row-ring", "column-line"],
)
def test_all_gather_of_block_floats_moves_the_stored_blocks(
    t3000, dtype, dim, width, axis, topology, lowering
):
    # TT-NN's all-gather copies tiles: the blocks arrive as stored, with no decode and
    # re-encode, whenever each device's piece is whole groups of 16 (width 48 is padded
    # inside a tile, so those values are re-encoded: the same values, other bits).
    rng = np.random.default_rng(dim + width)
    x = np.zeros((1, 1, 32, 8 * width), np.float32)
    t = ttnn.from_torch(
        x,
        dtype=dtype,
        layout=ttnn.TILE_LAYOUT,
        device=t3000,
        mesh_mapper=ttnn.ShardTensorToMesh(t3000, dim=3),
    )
    t = unnormalized_blocks(t, rng)
    values = dict(zip(coords((2, 4)), (ttnn.to_numpy(d) for d in ttnn.get_device_tensors(t))))
    blocks = dict(zip(coords((2, 4)), stored_blocks(t)))
    out = ttnn.all_gather(t, dim=dim, cluster_axis=axis, topology=topology, lowering=lowering)
    assert out.dtype == dtype
    want = ref_all_gather(values, (2, 4), dim, axis)
    for c, d in zip(coords((2, 4)), ttnn.get_device_tensors(out)):
        np.testing.assert_array_equal(ttnn.to_numpy(d), want[c])
    if width % 32 == 0:
        for c, got in zip(coords((2, 4)), stored_blocks(out)):
            for field in range(2):  # mantissas, exponents
                pieces = [blocks[g][field] for g in group_of(c, (2, 4), axis)]
                np.testing.assert_array_equal(got[field], np.concatenate(pieces, dim))


def test_all_gather_of_block_floats_is_one_collective_with_no_float_math(t3000):
    t = ttnn.from_torch(
        np.random.default_rng(0).standard_normal((1, 1, 32, 512)).astype(np.float32),
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=t3000,
        mesh_mapper=ttnn.ShardTensorToMesh(t3000, dim=3),
    )
    gather = jax.jit(lambda x: ttnn.all_gather(x, dim=3))
    text = gather.lower(t).compile().as_text()
    assert count_collectives(text)["all-gather"] == 1  # mantissas and exponents together
    assert not re.search(r"\b(f32|bf16)\[", text)  # no decode, no re-encode


def test_reduce_scatter_2x4_non_flat_mesh(t3000):
    """tt-metal test_reduce_scatter_async_2x4_non_flat_mesh: sum of 8 inputs, concat on dim 3."""
    x = np.random.default_rng(3).standard_normal((16, 2, 32, 256)).astype(np.float32)
    t = ttnn.from_torch(x, device=t3000, mesh_mapper=ttnn.ShardTensorToMesh(t3000, dim=0))
    out = ttnn.reduce_scatter(t, dim=3)
    full = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(t3000, dim=3))
    np.testing.assert_allclose(full, x.reshape(8, 2, 2, 32, 256).sum(0), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Point-to-point, shift, broadcast, mesh_partition
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 2), (2, 4), (8, 4)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_point_to_point(shape):
    mesh = mesh_of(shape)
    t, data = per_device_input(mesh, (1, 4, 8), np.float32, ttnn.float32, seed=4)
    base, base_data = per_device_input(mesh, (1, 4, 8), np.float32, ttnn.float32, seed=5)
    all_c = coords(shape)
    sender, receiver = all_c[0], all_c[-1]
    out = ttnn.point_to_point(
        t, receiver_coord=ttnn.MeshCoordinate(receiver), sender_coord=ttnn.MeshCoordinate(sender)
    )
    got = per_device_output(out)
    np.testing.assert_array_equal(got[receiver], data[sender])
    for c in all_c[:-1]:
        np.testing.assert_array_equal(got[c], np.zeros_like(data[c]))
    inplace = ttnn.point_to_point(
        t,
        receiver_coord=ttnn.MeshCoordinate(receiver),
        sender_coord=ttnn.MeshCoordinate(sender),
        optional_output_tensor=base,
    )
    assert inplace is base
    got = per_device_output(base)
    np.testing.assert_array_equal(got[receiver], data[sender])
    for c in all_c[:-1]:
        np.testing.assert_array_equal(got[c], base_data[c])
    # TT-NN's binding at 821525122af5: (input, sender, receiver), in place into output_tensor=
    # (deepseek_v3's broadcast writes a tensor into itself this way)
    ttnn.point_to_point(
        t, ttnn.MeshCoordinate(receiver), ttnn.MeshCoordinate(sender), output_tensor=t
    )
    got = per_device_output(t)
    np.testing.assert_array_equal(got[sender], data[receiver])
    for c in all_c[1:]:
        np.testing.assert_array_equal(got[c], data[c])


@pytest.mark.parametrize("wrap", [True, False])
def test_shift_along_axis(t3000, wrap):
    t, data = per_device_input(t3000, (1, 2, 8), np.float32, ttnn.float32, seed=6)
    for axis in (0, 1):
        out = per_device_output(ttnn.shift(t, 1, cluster_axis=axis, wrap=wrap))
        n = t3000.shape[axis]
        for c in data:
            src = list(c)
            src[axis] = c[axis] - 1
            if src[axis] < 0 and not wrap:
                np.testing.assert_array_equal(out[c], np.zeros_like(data[c]))
            else:
                src[axis] %= n
                np.testing.assert_array_equal(out[c], data[tuple(src)])


def test_broadcast_and_mesh_partition(t3000):
    t, data = per_device_input(t3000, (1, 2, 8), np.float32, ttnn.float32, seed=7)
    out = per_device_output(ttnn.broadcast(t, ttnn.MeshCoordinate(1, 2), cluster_axis=1))
    for c in data:  # every row's line broadcasts from that row's column 2
        np.testing.assert_array_equal(out[c], data[(c[0], 2)])
    whole = per_device_output(ttnn.broadcast(t, ttnn.MeshCoordinate(0, 3)))
    for c in data:
        np.testing.assert_array_equal(whole[c], data[(0, 3)])
    part = per_device_output(ttnn.mesh_partition(t, dim=2, cluster_axis=1))
    for c in data:
        np.testing.assert_array_equal(part[c], np.split(data[c], 4, axis=2)[c[1]])


# ---------------------------------------------------------------------------------------------
# HLO: exactly one collective of the expected kind, with TT-NN's device groups
# ---------------------------------------------------------------------------------------------


def _groups(mesh_shape, axis):
    ids = np.arange(int(np.prod(mesh_shape))).reshape(mesh_shape)
    if axis is None:
        return {tuple(ids.ravel())}
    moved = np.moveaxis(ids, axis, -1).reshape(-1, mesh_shape[axis])
    return {tuple(row) for row in moved}


HLO_CASES = [
    ("all-gather", lambda x, a: ttnn.all_gather(x, 2, cluster_axis=a)),
    ("reduce-scatter", lambda x, a: ttnn.reduce_scatter(x, 2, cluster_axis=a)),
    ("all-reduce", lambda x, a: ttnn.all_reduce(x, cluster_axis=a)),
    ("all-to-all", lambda x, a: ttnn.all_to_all(x, in_dim=1, out_dim=2, cluster_axis=a)),
]


@pytest.mark.parametrize("shape", [(2, 4), (8, 4)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("kind,fn", HLO_CASES, ids=[k for k, _ in HLO_CASES])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_hlo_one_collective_with_ttnn_groups(shape, kind, fn, axis):
    mesh = mesh_of(shape)
    t, _ = per_device_input(mesh, (1, 4, 32 * 8), np.float32, ttnn.float32, seed=8)
    text = jax.jit(lambda x: fn(x, axis)).lower(t).compile().as_text()
    found = parse_collectives(text)
    assert [c.kind for c in found] == [kind], [c.kind for c in found]
    assert set(found[0].replica_groups) == _groups(shape, axis)


def test_hlo_point_to_point_is_one_permute(t3000):
    t, _ = per_device_input(t3000, (1, 4, 8), np.float32, ttnn.float32, seed=9)
    f = jax.jit(
        lambda x: ttnn.point_to_point(
            x, receiver_coord=ttnn.MeshCoordinate(1, 3), sender_coord=ttnn.MeshCoordinate(0, 1)
        )
    )
    found = parse_collectives(f.lower(t).compile().as_text())
    assert [c.kind for c in found] == ["collective-permute"]
    assert found[0].source_target_pairs == ((1, 7),)


def test_submesh_collectives_group_only_submesh_devices(galaxy):
    subs = galaxy.create_submeshes(ttnn.MeshShape(2, 4))
    sub = subs[2]
    t, data = per_device_input(sub, (1, 2, 8), np.float32, ttnn.float32, seed=10)
    out = ttnn.all_reduce(t, cluster_axis=1)
    assert_close(per_device_output(out), ref_all_reduce(data, (2, 4), 1), np.float32)
    text = jax.jit(lambda x: ttnn.all_reduce(x, cluster_axis=1)).lower(t).compile().as_text()
    (c,) = parse_collectives(text)
    assert set(c.replica_groups) == _groups((2, 4), 1)
    assert sub.get_device_ids() == [16, 17, 18, 19, 20, 21, 22, 23]


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_errors_name_the_value_and_the_fix(t3000):
    t, _ = per_device_input(t3000, (1, 2, 6), np.float32, ttnn.float32, seed=11)
    bad = [
        (lambda: ttnn.all_gather(t, dim=5), r"dim=5 is out of range"),
        (lambda: ttnn.all_gather(t, dim=-4), r"dim=-4 is out of range"),
        (lambda: ttnn.all_gather(t, 2, cluster_axis=2), r"cluster axis 2 is out of range"),
        (lambda: ttnn.all_reduce(t, cluster_axis=-1), r"cluster axis -1 is out of range"),
        (lambda: ttnn.reduce_scatter(t, dim=2, cluster_axis=1), r"6 along dim 2.*4 pieces"),
        (lambda: ttnn.reduce_scatter(t, dim=2, math_op="mean"), r"math_op='mean'"),
        (lambda: ttnn.all_reduce(t, math_op=ttnn.Topology.Ring), r"math_op="),
        (
            lambda: ttnn.point_to_point(
                t, receiver_coord=ttnn.MeshCoordinate(2, 0), sender_coord=ttnn.MeshCoordinate(0, 0)
            ),
            r"receiver_coord=MeshCoordinate\(\[2, 0\]\) is outside",
        ),
        (lambda: ttnn.all_gather(t, 2, topology="ring"), r"topology='ring'"),
        (lambda: ttnn.all_to_all(t, 1, 2, cluster_axis=1), r"does not split into 4"),
        (lambda: ttnn.all_gather(t, 2, lowering="fancy"), r"lowering='fancy'"),
    ]
    for call, pattern in bad:
        with pytest.raises(ttnn.CCLError, match=pattern) as info:
            call()
        assert "fix:" in str(info.value)


def test_collective_on_other_mesh_argument_raises(t3000, n300):
    t, _ = per_device_input(t3000, (1, 2, 8), np.float32, ttnn.float32, seed=12)
    with pytest.raises(ttnn.MeshMismatchError, match="mesh_device"):
        ttnn.all_gather(t, 2, cluster_axis=0, mesh_device=n300)


def test_size_one_group_is_identity():
    mesh = mesh_of((1, 8))
    t, data = per_device_input(mesh, (1, 2, 8), np.float32, ttnn.float32, seed=13)
    for out in (ttnn.all_gather(t, 2, cluster_axis=0), ttnn.all_reduce(t, cluster_axis=0)):
        assert_close(per_device_output(out), data, np.float32, exact=True)


def test_all_collectives_under_one_jit_match_eager(t3000):
    t, _ = per_device_input(t3000, (1, 4, 32), np.float32, ttnn.float32, seed=14)

    def step(x):
        g = ttnn.all_gather(x, 2, cluster_axis=1)
        r = ttnn.reduce_scatter(g, 2, cluster_axis=1)
        return ttnn.all_reduce(ttnn.multiply(r, 0.5), cluster_axis=0)

    eager = per_device_output(step(t))
    jitted = per_device_output(jax.jit(step)(t))
    for c in eager:
        np.testing.assert_array_equal(eager[c], jitted[c])
