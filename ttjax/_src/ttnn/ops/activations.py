"""TT-NN's activation forms, read by one parser for every op that takes activations.

The implementation of :mod:`ttjax.ops.activations`, whose docstring says more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.enums import UnaryOpType, UnaryWithParam
from ttjax._src.core.errors import TTJaxError

U = UnaryOpType

# VecMode::RC (ttnn/.../unary/common/unary_op_types.hpp): sigmoid's first parameter.
_VEC_MODE_RC = 4.0

# string_to_unary_with_param (unary_op_utils.cpp): the exact, case-sensitive names TT-NN accepts.
STRING_ACTIVATIONS: dict[str, UnaryWithParam] = {
    "relu": UnaryWithParam(U.RELU),
    "relu6": UnaryWithParam(U.RELU6),
    "gelu": UnaryWithParam(U.GELU, 0.0),
    "gelu_approx": UnaryWithParam(U.GELU, 1.0),
    "silu": UnaryWithParam(U.SILU),
    "sigmoid": UnaryWithParam(U.SIGMOID, [_VEC_MODE_RC, 0.0]),
    "sigmoid_approx": UnaryWithParam(U.SIGMOID, [_VEC_MODE_RC, 1.0]),
    "sqrt": UnaryWithParam(U.SQRT),
    "rsqrt": UnaryWithParam(U.RSQRT),
    "exp": UnaryWithParam(U.EXP, 1.0),
    "recip": UnaryWithParam(U.RECIP),
    "log": UnaryWithParam(U.LOG, 1.0),
    "log1p": UnaryWithParam(U.LOG1P, 1.0),
    "tanh": UnaryWithParam(U.TANH),
    "log2": UnaryWithParam(U.LOG2, 1.0),
    "log10": UnaryWithParam(U.LOG10, 1.0),
    "sin": UnaryWithParam(U.SIN),
    "cos": UnaryWithParam(U.COS),
    "cosh": UnaryWithParam(U.COSH),
    "sinh": UnaryWithParam(U.SINH),
    "abs": UnaryWithParam(U.ABS),
    "abs_int32": UnaryWithParam(U.ABS_INT32),
    "sign": UnaryWithParam(U.SIGN),
    "square": UnaryWithParam(U.SQUARE),
    "softplus": UnaryWithParam(U.SOFTPLUS),
    "selu": UnaryWithParam(U.SELU),
}


def _is_number(v: Any) -> bool:
    return isinstance(v, (bool, int, float, np.integer, np.floating)) and not isinstance(
        v, UnaryOpType
    )


def _fail(op: str, value: Any, why: str) -> TTJaxError:
    return TTJaxError(
        f"ttnn.{op}: activation {value!r} {why}.\n"
        "fix: pass a ttnn.UnaryOpType, a ttnn.UnaryWithParam, an [op, param] pair such as "
        f"[ttnn.UnaryOpType.GELU, True], or one of the names {sorted(STRING_ACTIVATIONS)}."
    )


def parse_activation(op: str, value: Any) -> UnaryWithParam:
    """One activation (``fused_activation=``, ``activation=``, one list element) as TT-NN's
    ``UnaryWithParam``; a two-element ``[op, param]`` list or tuple is ONE activation."""
    if isinstance(value, UnaryWithParam):
        return value
    if isinstance(value, UnaryOpType):
        return UnaryWithParam(value)
    if isinstance(value, str):
        if value not in STRING_ACTIVATIONS:
            raise _fail(op, value, "is not a name TT-NN's string_to_unary_with_param knows")
        return STRING_ACTIVATIONS[value]
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and isinstance(value[0], UnaryOpType)
        and _is_number(value[1])
    ):
        return UnaryWithParam(value[0], float(value[1]))
    raise _fail(op, value, "is not an activation")


def parse_activations(op: str, value: Any) -> tuple[UnaryWithParam, ...]:
    """A list of activations (binary ops' ``activations=``, ``input_tensor_{a,b}_activations=``),
    applied in order; None is none. Each element is read by :func:`parse_activation`. A bare
    ``[op, number]`` is refused, as TT-NN's binding refuses it (the number is no activation)."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        return (parse_activation(op, value),)
    for v in value:
        if _is_number(v):
            raise TTJaxError(
                f"ttnn.{op}: activations {value!r} is read as a list of activations, and {v!r} "
                "is not one (TT-NN's binding refuses it too).\n"
                f"fix: put the pair in its own list: [[{value[0]!r}, {v!r}]], or use "
                "ttnn.UnaryWithParam(op, param)."
            )
    return tuple(parse_activation(op, v) for v in value)


def _p(params: Sequence[float], i: int, default: float) -> float:
    return float(params[i]) if len(params) > i else default


def _softplus(x: Any, ps: Sequence[float]) -> Any:
    beta, threshold = _p(ps, 0, 1.0), _p(ps, 1, 20.0)
    return jnp.where(beta * x > threshold, x, jnp.log1p(jnp.exp(beta * x)) / beta)


def _heaviside(x: Any, ps: Sequence[float]) -> Any:
    return jnp.where(x > 0, 1.0, jnp.where(x < 0, 0.0, _p(ps, 0, 0.0)))


def _celu(x: Any, ps: Sequence[float]) -> Any:
    a = _p(ps, 0, 1.0)
    return jnp.maximum(x, 0.0) + jnp.minimum(0.0, a * jnp.expm1(x / a))


def _selu(x: Any, ps: Sequence[float]) -> Any:
    scale, alpha = _p(ps, 0, 1.0507009873554805), _p(ps, 1, 1.6732632423543772)
    return scale * jnp.where(x > 0, x, alpha * jnp.expm1(x))


def _shrink(soft: bool) -> Callable[[Any, Sequence[float]], Any]:
    def f(x: Any, ps: Sequence[float]) -> Any:
        lam = _p(ps, 0, 0.5)
        keep = jnp.abs(x) > lam
        return jnp.where(keep, x - jnp.sign(x) * lam if soft else x, 0.0)

    return f


def _bool(f: Callable[[Any], Any]) -> Callable[[Any, Sequence[float]], Any]:
    return lambda x, ps: f(x).astype(x.dtype)


def _cmp(f: Callable[[Any, float], Any]) -> Callable[[Any, Sequence[float]], Any]:
    return lambda x, ps: f(x, _p(ps, 0, 0.0)).astype(x.dtype)


# What each UnaryOpType computes, with its parameters (unary_op_utils.cpp), in float32.
UNARY_FNS: dict[UnaryOpType, Callable[[Any, Sequence[float]], Any]] = {
    # GELU: param 1 (or none: gelu_tile's default fast_and_approx=true) is the tanh form.
    U.GELU: lambda x, ps: jax.nn.gelu(x, approximate=bool(int(_p(ps, 0, 1.0)))),
    U.RELU: lambda x, ps: jax.nn.relu(x),
    U.RELU6: lambda x, ps: jnp.clip(x, 0.0, 6.0),
    U.RELU_MAX: lambda x, ps: jnp.clip(x, 0.0, _p(ps, 0, 0.0)),
    U.RELU_MIN: lambda x, ps: jnp.maximum(x, _p(ps, 0, 0.0)),
    U.LEAKY_RELU: lambda x, ps: jnp.where(x >= 0, x, _p(ps, 0, 0.01) * x),
    U.ELU: lambda x, ps: jnp.where(x > 0, x, _p(ps, 0, 1.0) * jnp.expm1(x)),
    U.CELU: _celu,
    U.SELU: _selu,
    U.PRELU_SFPU: lambda x, ps: jnp.where(x >= 0, x, _p(ps, 0, 0.25) * x),
    U.SILU: lambda x, ps: jax.nn.silu(x),
    U.SIGMOID: lambda x, ps: jax.nn.sigmoid(x),
    U.HARDSIGMOID: lambda x, ps: jnp.clip(x / 6.0 + 0.5, 0.0, 1.0),
    U.HARDSWISH: lambda x, ps: x * jnp.clip(x / 6.0 + 0.5, 0.0, 1.0),
    U.HARDTANH: lambda x, ps: jnp.clip(x, _p(ps, 0, -1.0), _p(ps, 1, 1.0)),
    U.CLAMP_TSS: lambda x, ps: jnp.clip(x, _p(ps, 0, -jnp.inf), _p(ps, 1, jnp.inf)),
    U.THRESHOLD: lambda x, ps: jnp.where(x > _p(ps, 0, 0.0), x, _p(ps, 1, 0.0)),
    U.SOFTPLUS: _softplus,
    U.SOFTSIGN: lambda x, ps: x / (1.0 + jnp.abs(x)),
    U.SOFTSHRINK: _shrink(True),
    U.HARDSHRINK: _shrink(False),
    U.MISH: lambda x, ps: x * jnp.tanh(jax.nn.softplus(x)),
    U.TANHSHRINK: lambda x, ps: x - jnp.tanh(x),
    U.TANH: lambda x, ps: jnp.tanh(x),
    U.EXP: lambda x, ps: jnp.exp(x),  # the parameter picks the fast kernel only
    U.EXP2: lambda x, ps: jnp.exp2(x),
    U.EXPM1: lambda x, ps: jnp.expm1(x),
    U.LOG: lambda x, ps: jnp.log(x),
    U.LOG1P: lambda x, ps: jnp.log1p(x),
    U.LOG2: lambda x, ps: jnp.log2(x),
    U.LOG10: lambda x, ps: jnp.log10(x),
    U.RECIP: lambda x, ps: jnp.reciprocal(x),
    U.SQRT: lambda x, ps: jnp.sqrt(x),
    U.RSQRT: lambda x, ps: jax.lax.rsqrt(x),
    U.CBRT: lambda x, ps: jnp.cbrt(x),
    U.SQUARE: lambda x, ps: x * x,
    U.POWER: lambda x, ps: jnp.power(x, int(_p(ps, 0, 1.0))),  # (uint32_t)param0: integer
    U.RPOW: lambda x, ps: jnp.power(_p(ps, 0, 1.0), x),
    U.ABS: lambda x, ps: jnp.abs(x),
    U.ABS_INT32: lambda x, ps: jnp.abs(x),
    U.NEG: lambda x, ps: -x,
    U.SIGN: lambda x, ps: jnp.sign(x),
    U.IDENTITY: lambda x, ps: x,
    U.SIN: lambda x, ps: jnp.sin(x),
    U.COS: lambda x, ps: jnp.cos(x),
    U.TAN: lambda x, ps: jnp.tan(x),
    U.SINH: lambda x, ps: jnp.sinh(x),
    U.COSH: lambda x, ps: jnp.cosh(x),
    U.ASIN: lambda x, ps: jnp.arcsin(x),
    U.ACOS: lambda x, ps: jnp.arccos(x),
    U.ATAN: lambda x, ps: jnp.arctan(x),
    U.ASINH: lambda x, ps: jnp.arcsinh(x),
    U.ACOSH: lambda x, ps: jnp.arccosh(x),
    U.ATANH: lambda x, ps: jnp.arctanh(x),
    U.ERF: lambda x, ps: jax.scipy.special.erf(x),
    U.ERFC: lambda x, ps: jax.scipy.special.erfc(x),
    U.ERFINV: lambda x, ps: jax.scipy.special.erfinv(x),
    U.FLOOR: lambda x, ps: jnp.floor(x),
    U.CEIL: lambda x, ps: jnp.ceil(x),
    U.TRUNC: lambda x, ps: jnp.trunc(x),
    U.FRAC: lambda x, ps: x - jnp.trunc(x),
    U.ROUND: lambda x, ps: jnp.round(x, int(_p(ps, 0, 0.0))),
    U.HEAVISIDE: _heaviside,
    U.ADD_UNARY_SFPU: lambda x, ps: x + _p(ps, 0, 0.0),
    U.SUB_UNARY_SFPU: lambda x, ps: x - _p(ps, 0, 0.0),
    U.MUL_UNARY_SFPU: lambda x, ps: x * _p(ps, 0, 1.0),
    U.DIV_UNARY_SFPU: lambda x, ps: x * (1.0 / _p(ps, 0, 1.0)),  # TT-NN multiplies by 1/param
    U.RSUB: lambda x, ps: _p(ps, 0, 0.0) - x,
    U.RDIV: lambda x, ps: _p(ps, 0, 1.0) / x,
    U.MAXIMUM: lambda x, ps: jnp.maximum(x, _p(ps, 0, 0.0)),
    U.MINIMUM: lambda x, ps: jnp.minimum(x, _p(ps, 0, 0.0)),
    U.FILL: lambda x, ps: jnp.full_like(x, _p(ps, 0, 0.0)),
    U.REMAINDER: lambda x, ps: jnp.remainder(x, _p(ps, 0, 1.0)),
    U.FMOD: lambda x, ps: jnp.fmod(x, _p(ps, 0, 1.0)),
    U.EQZ: _bool(lambda x: x == 0),
    U.NEZ: _bool(lambda x: x != 0),
    U.GTZ: _bool(lambda x: x > 0),
    U.LTZ: _bool(lambda x: x < 0),
    U.GEZ: _bool(lambda x: x >= 0),
    U.LEZ: _bool(lambda x: x <= 0),
    U.LOGICAL_NOT_UNARY: _bool(lambda x: x == 0),
    U.ISINF: _bool(jnp.isinf),
    U.ISNAN: _bool(jnp.isnan),
    U.ISFINITE: _bool(jnp.isfinite),
    U.ISPOSINF: _bool(jnp.isposinf),
    U.ISNEGINF: _bool(jnp.isneginf),
    U.SIGNBIT: _bool(jnp.signbit),
    U.UNARY_EQ: _cmp(lambda x, p: x == p),
    U.UNARY_NE: _cmp(lambda x, p: x != p),
    U.UNARY_GT: _cmp(lambda x, p: x > p),
    U.UNARY_LT: _cmp(lambda x, p: x < p),
    U.UNARY_GE: _cmp(lambda x, p: x >= p),
    U.UNARY_LE: _cmp(lambda x, p: x <= p),
}


def unary_fn(op: str, act: UnaryWithParam) -> Callable[[Any], Any]:
    """The function one ``UnaryWithParam`` computes, in float32 like the SFPU, cast back."""
    if act.op_type not in UNARY_FNS:
        raise TTJaxError(
            f"ttnn.{op}: fused activation {act!r} is not implemented in ttjax.\n"
            "fix: apply it as its own op after this one, or use one of "
            f"{sorted(k.name for k in UNARY_FNS)}."
        )
    fn, params = UNARY_FNS[act.op_type], act.params

    def apply(x: Any) -> Any:
        if jnp.issubdtype(x.dtype, jnp.floating):
            return fn(x.astype(jnp.float32), params).astype(x.dtype)
        return fn(x, params).astype(x.dtype)

    return apply


def chain_fn(op: str, acts: Sequence[UnaryWithParam]) -> Callable[[Any], Any] | None:
    """The composition of ``acts`` in order (TT-NN's SFPU op chain), or None when empty."""
    fns = [unary_fn(op, a) for a in acts]
    if not fns:
        return None

    def apply(x: Any) -> Any:
        for f in fns:
            x = f(x)
        return x

    return apply


__all__ = [
    "STRING_ACTIVATIONS",
    "UNARY_FNS",
    "chain_fn",
    "parse_activation",
    "parse_activations",
    "unary_fn",
]
