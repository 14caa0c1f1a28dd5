"""How ops run: one cached program per (op, static args, input layouts), the same results under
jax.jit, and ttjax errors (never raw JAX/XLA ones) for bad input."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax
import numpy as np
import pytest
from _bounded import run_bounded
from _op_testing import F32, REPLICATED, Layout, check, device_arrays, mesh_of, put, reference

import ttjax as ttnn
from ttjax._src.core.dispatch import run_op


@contextlib.contextmanager
def jax_events() -> Iterator[dict[str, int]]:
    """Count JAX's tracing and XLA compilation events while the block runs."""
    counts = {"trace": 0, "compile": 0}

    def listener(event: str, duration: float, **_: object) -> None:
        if event == "/jax/core/compile/jaxpr_trace_duration":
            counts["trace"] += 1
        elif event == "/jax/core/compile/backend_compile_duration":
            counts["compile"] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield counts
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


COLS = Layout("2d", (None, 3))


def _x(mesh_shape=(2, 4), shape=(1, 1, 32, 64), layout=COLS, seed=0):
    host = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return put(host, mesh_shape, layout)


# ---------------------------------------------------------------------------------------------
# The program cache
# ---------------------------------------------------------------------------------------------


def test_repeated_call_never_retraces():
    mesh = mesh_of((2, 4))
    x, xs = _x()
    traces = []

    def local(v):
        traces.append(v.shape)  # runs only while JAX traces the function
        return v * 2.0 + 1.0

    y = run_op("test_dispatch.counter", local, [x])
    first = len(traces)
    assert first >= 1
    entries = mesh.num_program_cache_entries()
    with jax_events() as events:
        for _ in range(3):
            y = run_op("test_dispatch.counter", local, [x])
    assert len(traces) == first
    assert mesh.num_program_cache_entries() == entries
    assert events == {"trace": 0, "compile": 0}
    check(y, reference(lambda v: v * 2.0 + 1.0, xs))
    # Another per-device shape is another program.
    z, _ = _x(shape=(1, 1, 32, 128))
    run_op("test_dispatch.counter", local, [z])
    assert len(traces) > first
    assert mesh.num_program_cache_entries() == entries + 1


def test_builtin_ops_hit_the_cache():
    mesh = mesh_of((2, 4))
    x, _ = _x(layout=REPLICATED, seed=1)  # [1, 1, 32, 64] on every device
    w, _ = _x(shape=(64, 32), layout=Layout("2d", (None, 1)), seed=2)  # [64, 8] per device

    def chain():
        y = ttnn.linear(ttnn.gelu(x), w, activation="relu")
        return ttnn.softmax(ttnn.sum(ttnn.reshape(y, (1, 32, 4, 2)), dim=-1, keepdim=True), dim=1)

    chain()
    entries = mesh.num_program_cache_entries()
    with jax_events() as events:
        chain()
        chain()
    assert events == {"trace": 0, "compile": 0}
    assert mesh.num_program_cache_entries() == entries


def test_changing_a_python_scalar_does_not_recompile():
    mesh = mesh_of((1, 8))
    x, xs = _x((1, 8), layout=Layout("1d", (2, 2)))
    ttnn.add(x, 1.0)
    entries = mesh.num_program_cache_entries()
    with jax_events() as events:
        y2 = ttnn.add(x, 2.0)
        y3 = ttnn.add(x, -0.5)
        ttnn.clamp(x, -1.0, 1.0)
        c2 = ttnn.clamp(x, -0.25, 0.5)
        p1 = ttnn.pad(x, [(0, 1)], 1.0)
        p2 = ttnn.pad(x, [(0, 1)], 7.0)
    assert mesh.num_program_cache_entries() == entries + 2  # clamp and pad, once each
    assert events["compile"] == 2
    check(y2, reference(lambda v: v + 2.0, xs))
    check(y3, reference(lambda v: v - 0.5, xs))
    check(c2, reference(lambda v: np.clip(v, -0.25, 0.5), xs))
    check(p1, reference(lambda v: np.pad(v, [(0, 0)] * 3 + [(0, 1)], constant_values=1.0), xs))
    check(p2, reference(lambda v: np.pad(v, [(0, 0)] * 3 + [(0, 1)], constant_values=7.0), xs))


def test_cache_is_keyed_on_placements_and_can_be_disabled():
    mesh = mesh_of((2, 4))
    x, _ = _x(shape=(1, 1, 32, 64), layout=Layout("2d", (None, 3)))  # local [1, 1, 32, 16]
    y, _ = _x(shape=(1, 1, 64, 16), layout=Layout("2d", (2, None)))  # local [1, 1, 32, 16]
    assert x.shape == y.shape and x.placements != y.placements
    ttnn.neg(x)
    entries = mesh.num_program_cache_entries()
    ttnn.neg(y)
    assert mesh.num_program_cache_entries() == entries + 1
    mesh.disable_and_clear_program_cache()
    try:
        assert mesh.num_program_cache_entries() == 0
        out = ttnn.neg(x)
        assert mesh.num_program_cache_entries() == 0
        check(out, {c: -v for c, v in device_arrays(x).items()})
    finally:
        mesh.enable_program_cache()
    ttnn.neg(x)
    assert mesh.num_program_cache_entries() == 1


# ---------------------------------------------------------------------------------------------
# jax.jit
# ---------------------------------------------------------------------------------------------


def _model(x, w, b, g):
    h = ttnn.linear(x, w, bias=b)
    h = ttnn.add(ttnn.multiply(h, 0.5), ttnn.exp(ttnn.neg(h)))
    h = ttnn.softmax(ttnn.permute(h, (0, 1, 3, 2)), dim=-1)
    h = ttnn.concat([h, ttnn.reshape(ttnn.relu(h), (1, 1, -1, 32))[:, :, :2]], dim=2)
    return h, ttnn.sum(h, dim=2, keepdim=True), ttnn.argmax(h, dim=-1), ttnn.rms_norm(h, weight=g)


def _inputs(mesh_shape):
    mesh = mesh_of(mesh_shape)
    rng = np.random.default_rng(3)
    cols = mesh_shape[1]
    x = ttnn.from_torch(rng.standard_normal((1, 1, 32, 64)).astype(np.float32), device=mesh)
    lay = Layout("2d", (None, 1))
    w, _ = put(rng.standard_normal((64, 16 * cols)).astype(np.float32), mesh_shape, lay)
    b, _ = put(rng.standard_normal((1, 16 * cols)).astype(np.float32), mesh_shape, lay)
    g, _ = put(rng.standard_normal((1, 32)).astype(np.float32), mesh_shape)
    return x, w, b, g


@pytest.mark.parametrize("mesh_shape", [(1, 1), (2, 4), (8, 4)], ids=["1x1", "2x4", "8x4"])
def test_jit_matches_eager_bit_exactly(mesh_shape):
    args = _inputs(mesh_shape)
    eager = _model(*args)
    jitted = jax.jit(_model)(*args)
    for e, j in zip(eager, jitted):
        assert (e.shape, e.dtype, e.placements) == (j.shape, j.dtype, j.placements)
        ge, gj = device_arrays(e), device_arrays(j)
        for c in ge:
            np.testing.assert_array_equal(gj[c], ge[c], err_msg=str(c))


def test_jit_of_fused_transcendental_chains_matches_eager_to_rounding():
    """XLA:CPU recomputes an erf-based gelu inside the consumer's reduction fusion, where it is
    compiled differently (and strips optimization barriers), so gelu -> rms_norm under jit may
    differ from eager in the last bit; it stays within float32 rounding."""
    x, w, b, _ = _inputs((2, 4))
    g16 = ttnn.from_torch(np.linspace(0.5, 1.5, 16, dtype=np.float32), device=x.mesh_device)

    def f(x, w, b, g):
        return ttnn.rms_norm(ttnn.linear(x, w, bias=b, activation="gelu"), weight=g)

    eager, jitted = device_arrays(f(x, w, b, g16)), device_arrays(jax.jit(f)(x, w, b, g16))
    for c in eager:
        np.testing.assert_allclose(jitted[c], eager[c], rtol=2e-6, atol=1e-7)


def test_jit_with_block_float_weights_matches_eager():
    mesh = mesh_of((2, 4))
    rng = np.random.default_rng(4)
    x = ttnn.from_torch(rng.standard_normal((1, 1, 32, 64)).astype(np.float32), device=mesh)
    w = ttnn.from_torch(
        rng.standard_normal((64, 128)).astype(np.float32),
        dtype=ttnn.bfloat8_b,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, (2, 4), (None, 1)),
    )

    def f(a, b):
        return ttnn.typecast(ttnn.gelu(ttnn.matmul(a, b)), ttnn.bfloat8_b)

    eager, jitted = f(x, w), jax.jit(f)(x, w)
    assert jitted.dtype == ttnn.bfloat8_b
    ge, gj = device_arrays(eager), device_arrays(jitted)
    for c in ge:
        np.testing.assert_array_equal(gj[c], ge[c])


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def _assert_clean(excinfo: pytest.ExceptionInfo) -> None:
    """A ttjax error with a fix, raised without a chained JAX/XLA exception."""
    err = excinfo.value
    assert isinstance(err, ttnn.TTJaxError)
    assert "fix:" in str(err)
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__


def test_ops_on_two_meshes_raise_mesh_mismatch():
    a, _ = _x((1, 2))
    b, _ = _x((2, 4), shape=(1, 1, 32, 256), layout=Layout("1d", (3, 3)))
    assert a.shape == b.shape
    with pytest.raises(ttnn.MeshMismatchError) as e:
        ttnn.add(a, b)
    _assert_clean(e)
    left, right = mesh_of((2, 4)).create_submeshes(ttnn.MeshShape(2, 2))
    try:
        ta = ttnn.from_torch(np.ones((1, 1, 32, 32), np.float32), device=left)
        tb = ttnn.from_torch(np.ones((1, 1, 32, 32), np.float32), device=right)
        with pytest.raises(ttnn.MeshMismatchError):
            ttnn.matmul(ta, tb)
        check(
            ttnn.add(ta, ta),
            {c: np.full((1, 1, 32, 32), 2.0) for c in [(0, 0), (0, 1), (1, 0), (1, 1)]},
        )
    finally:
        ttnn.close_mesh_device(left)
        ttnn.close_mesh_device(right)


def test_op_on_a_block_and_the_whole_mesh_runs_on_the_block():
    """TT-NN runs an op on its smallest input's devices (mesh_device_operation_utils.hpp): a
    tensor on the first 2 devices of 1x8 times a weight sharded over all 8 uses devices 0 and
    1's own shards (a block-float one too); under jax.jit ttjax refuses with a fix."""
    mesh = mesh_of((1, 8))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 1, 32, 32)).astype(np.float32)
    w = rng.standard_normal((1, 1, 32, 8 * 32)).astype(np.float32)
    tx = ttnn.from_torch(
        x, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 0)
    )
    for dtype, tol in ((ttnn.float32, 1e-5), (ttnn.bfloat8_b, 0.05)):
        tw = ttnn.from_torch(
            w, dtype=dtype, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, 3)
        )
        wq = [ttnn.to_numpy(s).astype(np.float32) for s in ttnn.get_device_tensors(tw)]
        y = ttnn.matmul(tx, tw, dtype=ttnn.float32)
        assert tuple(y.mesh_device.shape) == (1, 2)
        got = ttnn.get_device_tensors(y)
        for d in range(2):
            ref = x[d : d + 1].astype(np.float32) @ wq[d]
            np.testing.assert_allclose(ttnn.to_numpy(got[d]), ref, rtol=tol, atol=tol)
    with pytest.raises(ttnn.MeshMismatchError, match="fix:"):
        jax.jit(lambda a, b: ttnn.matmul(a, b))(tx, tw)


@pytest.mark.parametrize(
    ("op", "shapes"),
    [
        (ttnn.add, [(1, 1, 32, 32), (1, 1, 32, 64)]),
        (ttnn.multiply, [(1, 1, 32, 32), (1, 1, 16, 32)]),
        (ttnn.matmul, [(1, 1, 32, 32), (1, 1, 64, 32)]),
        (lambda a, b: ttnn.concat([a, b], dim=3), [(1, 1, 32, 32), (1, 1, 16, 32)]),
        (lambda a, b: ttnn.layer_norm(a, weight=b), [(1, 1, 32, 32), (1, 1, 1, 64)]),
    ],
    ids=["add", "multiply", "matmul", "concat", "layer_norm"],
)
def test_incompatible_local_shapes_raise_shape_mismatch(op, shapes):
    mesh = mesh_of((1, 2))
    a, b = (ttnn.from_torch(np.zeros(s, np.float32), device=mesh) for s in shapes)
    with pytest.raises(ttnn.ShapeMismatchError) as e:
        op(a, b)
    _assert_clean(e)
    msg = str(e.value)
    for s in shapes:
        assert str(list(s)) in msg, msg


def test_shapes_that_only_match_globally_are_rejected():
    """Global [1,1,32,64] sharded on dim 3 over 1x2 is [1,1,32,32] per device: adding a replicated
    [1,1,32,64] fails (TT-NN semantics), naming the per-device shapes."""
    a, _ = _x((1, 2), layout=Layout("1d", (3, 3)))
    b, _ = _x((1, 2), layout=REPLICATED)
    with pytest.raises(ttnn.ShapeMismatchError) as e:
        ttnn.add(a, b)
    _assert_clean(e)
    assert "[1, 1, 32, 32]" in str(e.value) and "[1, 1, 32, 64]" in str(e.value)


def test_host_tensor_or_foreign_value_into_an_op_raises():
    host = ttnn.from_torch(np.ones((1, 1, 32, 32), np.float32))
    assert host.storage_type() == ttnn.StorageType.HOST
    with pytest.raises(ttnn.TTJaxError, match="host tensor") as e:
        ttnn.exp(host)
    _assert_clean(e)
    dev, _ = _x((1, 2), shape=(1, 1, 32, 32))
    with pytest.raises(ttnn.TTJaxError, match="host tensor"):
        ttnn.add(dev, host)
    with pytest.raises(ttnn.TTJaxError, match="not a ttnn Tensor"):
        ttnn.add(dev, np.ones((1, 1, 32, 32), np.float32))


@pytest.mark.parametrize(
    "call",
    [
        lambda x: ttnn.exp(x, bogus=1),
        lambda x: ttnn.gelu(x, approximate=True),
        lambda x: ttnn.add(x, x, alpha=2),
        lambda x: ttnn.add(x, 1.0, bogus=1),
        lambda x: ttnn.matmul(x, x, trans_b=True),
        lambda x: ttnn.linear(x, x, biass=x),
        lambda x: ttnn.softmax(x, axis=-1),
        lambda x: ttnn.sum(x, axis=1),
        lambda x: ttnn.reshape(x, (32, 32), bogus=1),
        lambda x: ttnn.concat([x, x], dim=0, axis=0),
        lambda x: ttnn.typecast(x, ttnn.bfloat16, bogus=1),
        lambda x: ttnn.transformer.scaled_dot_product_attention(x, x, x, causal=True),
        lambda x: ttnn.rms_norm(x, eps=1e-6),
    ],
)
def test_unknown_keyword_arguments_raise_type_error(call):
    x, _ = _x((1, 2), shape=(1, 1, 32, 32))
    with pytest.raises(TypeError):
        call(x)


def test_hardware_kwargs_are_accepted_and_change_nothing():
    rng = np.random.default_rng(5)
    mesh_shape = (2, 4)
    a, _ = put(rng.standard_normal((1, 1, 32, 64)).astype(np.float32), mesh_shape)
    w, _ = put(
        rng.standard_normal((64, 128)).astype(np.float32), mesh_shape, Layout("2d", (None, 1))
    )
    hw = {
        "memory_config": ttnn.DRAM_MEMORY_CONFIG,
        "compute_kernel_config": ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi4
        ),
    }
    mm_hw = {
        **hw,
        "program_config": ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
            compute_with_storage_grid_size=(8, 8), in0_block_w=2, out_subblock_h=1
        ),
        "core_grid": ttnn.CoreGrid(y=8, x=8),
    }
    pairs = [
        (lambda **k: ttnn.matmul(a, w, **k), mm_hw),
        (lambda **k: ttnn.linear(a, w, **k), mm_hw),
        (lambda **k: ttnn.softmax(a, dim=-1, **k), hw),
        (lambda **k: ttnn.rms_norm(a, **k), hw),
        (lambda **k: ttnn.sum(a, dim=3, **k), hw),
        (lambda **k: ttnn.add(a, a, memory_config=ttnn.L1_MEMORY_CONFIG), {}),
        (lambda **k: ttnn.gelu(a, memory_config=ttnn.DRAM_MEMORY_CONFIG, **k), {}),
        (lambda **k: ttnn.reshape(a, (32, 64), memory_config=ttnn.DRAM_MEMORY_CONFIG), {}),
    ]
    for fn, kwargs in pairs:
        plain, tuned = fn(), fn(**kwargs)
        assert (plain.shape, plain.dtype, plain.placements) == (
            tuned.shape,
            tuned.dtype,
            tuned.placements,
        )
        gp, gt = device_arrays(plain), device_arrays(tuned)
        for c in gp:
            np.testing.assert_array_equal(gt[c], gp[c])
    assert F32 == a.dtype


# Eager TT-NN ops (a matmul, then an all-gather: 48 programs of 8 devices) dispatched without
# reading any result, in a process whose JAX started before ttjax could size XLA's launch pool:
# past 32 programs in flight on a device XLA's CPU client blocks a launch thread and the running
# all-gather waits forever for its last device (gemma3's vision MLP, gpt_oss's prefill froze so).
# The dispatch window waits for old work instead, and every result is the numpy one.
EAGER_ALL_GATHERS = """
import jax
jax.devices()  # the backend starts first, with XLA's default launch pool
import numpy as np
import ttjax as ttnn

mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
rng = np.random.default_rng(0)
x = rng.standard_normal((1, 1, 512, 4096)).astype(np.float32) / 32
w = rng.standard_normal((4096, 64)).astype(np.float32) / 32
tx = ttnn.from_torch(x, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=2),
                     layout=ttnn.TILE_LAYOUT)
tw = ttnn.from_torch(w, device=mesh, layout=ttnn.TILE_LAYOUT)
outs = [ttnn.all_gather(ttnn.matmul(tx, tw), dim=2) for _ in range(24)]
got = [ttnn.to_torch(o, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)) for o in outs[-2:]]
print(max(float(np.abs(np.asarray(g) - np.tile(x @ w, (8, 1, 1, 1))).max()) for g in got))
"""


def test_eager_collectives_past_xla_in_flight_limit_do_not_hang():
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    out = run_bounded(EAGER_ALL_GATHERS, env)
    assert float(out.split()[-1]) < 1e-4
