"""TT-NN's activation forms (UnaryOpType, UnaryWithParam, [op, param] pairs, strings, lists) read
by one parser for every op that takes activations, each compared per device with torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _op_testing import REPLICATED, Layout, check, put

import ttjax as ttnn
from ttjax.ops.activations import parse_activation, parse_activations

U = ttnn.UnaryOpType
MESH = (1, 2)
COLS = Layout("1d", (3, 3))
TOL = (2e-5, 2e-5)


def _x(seed: int, shape=(1, 1, 32, 64), scale: float = 3.0, layout: Layout = COLS):
    rng = np.random.default_rng(seed)
    x = (scale * rng.standard_normal(shape)).astype(np.float32)
    return put(x, MESH, layout, ttnn.float32)


def _t(shards: dict) -> dict:
    return {c: torch.from_numpy(np.asarray(v, np.float64)) for c, v in shards.items()}


def test_every_form_parses_to_one_unary_with_param():
    gelu_tanh = ttnn.UnaryWithParam(U.GELU, 1.0)
    assert parse_activation("matmul", [U.GELU, True]) == gelu_tanh
    assert parse_activation("matmul", (U.GELU, 1)) == gelu_tanh
    assert parse_activation("matmul", gelu_tanh) == gelu_tanh
    assert parse_activation("matmul", "gelu_approx") == gelu_tanh
    assert parse_activation("matmul", "gelu") == ttnn.UnaryWithParam(U.GELU, 0.0)
    assert parse_activation("matmul", U.SILU) == ttnn.UnaryWithParam(U.SILU)
    # string_to_unary_with_param: sigmoid carries (VecMode::RC, approx); exp carries approx.
    assert parse_activation("matmul", "sigmoid").params == (4.0, 0.0)
    assert parse_activation("matmul", "exp") == ttnn.UnaryWithParam(U.EXP, 1.0)
    assert parse_activations("mul", None) == ()
    assert parse_activations("mul", [U.SILU]) == (ttnn.UnaryWithParam(U.SILU),)
    assert parse_activations("mul", [[U.RELU_MAX, 6], U.NEG]) == (
        ttnn.UnaryWithParam(U.RELU_MAX, 6.0),
        ttnn.UnaryWithParam(U.NEG),
    )


def test_bad_activations_name_the_value_and_the_fix():
    with pytest.raises(ttnn.TTJaxError, match=r"(?s)'GELU'.*fix:"):
        parse_activation("linear", "GELU")  # TT-NN's names are lower case
    with pytest.raises(ttnn.TTJaxError, match=r"(?s)list of activations.*fix: put the pair"):
        parse_activations("mul", [U.GELU, True])
    with pytest.raises(ttnn.TTJaxError, match="not an activation"):
        parse_activation("matmul", [U.GELU, U.SILU, 1.0])


def _pc(fused):
    return ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(8, 1),
        in0_block_w=2,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=1,
        fuse_batch=True,
        fused_activation=fused,
        mcast_in0=True,
    )


@pytest.mark.parametrize(
    "fused,ref",
    [
        ([U.GELU, True], lambda y: F.gelu(y, approximate="tanh")),
        ([U.GELU, False], F.gelu),
        # No parameter: gelu_tile's default template, fast_and_approx=true.
        (U.GELU, lambda y: F.gelu(y, approximate="tanh")),
        ((U.LEAKY_RELU, 0.2), lambda y: F.leaky_relu(y, 0.2)),
    ],
)
def test_program_config_fused_activation_forms(fused, ref):
    a, wa = _x(1, (1, 1, 32, 64), 1.0, REPLICATED)
    w, ww = _x(2, (1, 1, 64, 64), 1.0)
    y = ttnn.matmul(a, w, program_config=_pc(fused))
    ta, tw = _t(wa), _t(ww)
    check(y, {c: ref(ta[c] @ tw[c]).numpy() for c in wa}, tol=(1e-4, 1e-4))


def test_linear_activation_rules_follow_bound_matmul():
    a, wa = _x(3, (1, 1, 32, 64), 1.0, REPLICATED)
    w, ww = _x(4, (1, 1, 64, 64), 1.0)
    ta, tw = _t(wa), _t(ww)
    prod = {c: ta[c] @ tw[c] for c in wa}
    # No core_grid: activation= runs after the product with GELU's approximation off.
    y = ttnn.linear(a, w, activation="gelu_approx")
    check(y, {c: F.gelu(p).numpy() for c, p in prod.items()}, tol=(1e-4, 1e-4))
    # core_grid: fused into the generated program config, parameter kept.
    y = ttnn.linear(a, w, activation="gelu_approx", core_grid=ttnn.CoreGrid(y=1, x=8))
    check(y, {c: F.gelu(p, approximate="tanh").numpy() for c, p in prod.items()}, tol=(1e-4, 1e-4))
    # The program config's fused activation first, then activation= after it.
    y = ttnn.linear(a, w, program_config=_pc([U.RELU_MAX, 0.5]), activation="silu")
    want = {c: F.silu(torch.clamp(p, 0.0, 0.5)).numpy() for c, p in prod.items()}
    check(y, want, tol=(1e-4, 1e-4))


def test_binary_activation_lists():
    a, wa = _x(5)
    b, wb = _x(6)
    ta, tb = _t(wa), _t(wb)
    y = ttnn.mul(
        a,
        b,
        input_tensor_a_activations=[[U.RELU_MAX, 0.5]],
        input_tensor_b_activations=[U.SILU, (U.MUL_UNARY_SFPU, 2.0)],
        activations=[ttnn.UnaryWithParam(U.LEAKY_RELU, 0.1)],
    )
    want = {
        c: F.leaky_relu(torch.clamp(ta[c], 0.0, 0.5) * (2.0 * F.silu(tb[c])), 0.1).numpy()
        for c in wa
    }
    check(y, want, tol=TOL)


@pytest.mark.parametrize(
    "act,ref",
    [
        (ttnn.UnaryWithParam(U.ELU, 0.7), lambda x: F.elu(x, 0.7)),
        (ttnn.UnaryWithParam(U.HARDTANH, [-0.5, 1.5]), lambda x: F.hardtanh(x, -0.5, 1.5)),
        (ttnn.UnaryWithParam(U.SOFTPLUS, [2.0, 3.0]), lambda x: F.softplus(x, 2.0, 3.0)),
        (ttnn.UnaryWithParam(U.THRESHOLD, [0.5, -1.0]), lambda x: F.threshold(x, 0.5, -1.0)),
        (ttnn.UnaryWithParam(U.CELU, 1.5), lambda x: F.celu(x, 1.5)),
        (ttnn.UnaryWithParam(U.SOFTSHRINK, 0.5), lambda x: F.softshrink(x, 0.5)),
        (
            ttnn.UnaryWithParam(U.HEAVISIDE, 0.5),
            lambda x: torch.heaviside(x, torch.tensor(0.5, dtype=x.dtype)),
        ),
        (ttnn.UnaryWithParam(U.POWER, 3.0), lambda x: x**3),
        (ttnn.UnaryWithParam(U.RSUB, 2.0), lambda x: 2.0 - x),
        (ttnn.UnaryWithParam(U.UNARY_GT, 0.25), lambda x: (x > 0.25).double()),
        (U.HARDSWISH, F.hardswish),
        (U.MISH, F.mish),
    ],
)
def test_parameterised_unary_ops_match_torch(act, ref):
    a, wa = _x(7)
    ones = ttnn.ones_like(a)
    y = ttnn.mul(a, ones, input_tensor_a_activations=[act])
    check(y, {c: ref(v).numpy() for c, v in _t(wa).items()}, tol=(1e-4, 1e-4))
