"""Elementwise ops (unary, binary, ternary) with TT-NN's per-device semantics.

The implementation of :mod:`ttjax.ops.pointwise`, whose docstring says more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.dispatch import OpMeta, run_op
from ttjax._src.core.enums import BcastOpDim, BcastOpMath, DataType, UnaryOpType, UnaryWithParam
from ttjax._src.core.errors import ShapeMismatchError, TTJaxError
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.activations import chain_fn, parse_activations
from ttjax._src.ttnn.ops.common import check_dtype, check_hw_kwargs, is_scalar, write_output


def _gelu_exact(x: Any) -> Any:
    return jax.nn.gelu(x, approximate=False)


def _gelu_tanh(x: Any) -> Any:
    return jax.nn.gelu(x, approximate=True)


# ---------------------------------------------------------------------------------------------
# Unary
# ---------------------------------------------------------------------------------------------


def _unary(name: str, fn: Callable[[Any], Any], doc: str) -> Callable[..., Tensor]:
    def op(
        input_tensor: Tensor,
        *,
        memory_config: Any = None,
        output_tensor: Tensor | None = None,
        **kwargs: Any,
    ) -> Tensor:
        check_hw_kwargs(name, kwargs)
        out = run_op(name, fn, [input_tensor], memory_config=memory_config)
        return write_output(out, output_tensor)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


def _float(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Compute transcendental ops in float32 (as TT-NN's SFPU does), then cast back."""

    def wrapped(x: Any) -> Any:
        return fn(x.astype(jnp.float32)).astype(x.dtype) if x.dtype == jnp.bfloat16 else fn(x)

    return wrapped


neg = _unary("neg", jnp.negative, "Elementwise negation, per device.")
exp = _unary("exp", _float(jnp.exp), "Elementwise e**x, per device.")
log = _unary("log", _float(jnp.log), "Elementwise natural logarithm, per device.")
sqrt = _unary("sqrt", _float(jnp.sqrt), "Elementwise square root, per device.")
rsqrt = _unary("rsqrt", _float(jax.lax.rsqrt), "Elementwise 1/sqrt(x), per device.")
reciprocal = _unary("reciprocal", _float(jnp.reciprocal), "Elementwise 1/x, per device.")
silu = _unary("silu", _float(jax.nn.silu), "SiLU (x * sigmoid(x)), per device.")
relu = _unary("relu", jax.nn.relu, "ReLU, per device.")
tanh = _unary("tanh", _float(jnp.tanh), "Hyperbolic tangent, per device.")
sigmoid = _unary("sigmoid", _float(jax.nn.sigmoid), "Logistic sigmoid, per device.")
abs = _unary("abs", jnp.abs, "Absolute value, per device.")
square = _unary("square", jnp.square, "x * x, per device.")
sin = _unary("sin", _float(jnp.sin), "Elementwise sine, per device.")
cos = _unary("cos", _float(jnp.cos), "Elementwise cosine, per device.")
erf = _unary("erf", _float(jax.scipy.special.erf), "Error function, per device.")
floor = _unary("floor", jnp.floor, "Elementwise floor, per device.")
logical_not = _unary(
    "logical_not", lambda x: (x == 0).astype(x.dtype), "1 where x == 0 else 0, per device."
)


def gelu(
    input_tensor: Tensor,
    *,
    fast_and_approximate_mode: bool = False,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """GELU per device; ``fast_and_approximate_mode=True`` uses the tanh approximation.

    >>> y = ttnn.gelu(x)
    """
    check_hw_kwargs("gelu", kwargs)
    fn = _gelu_tanh if fast_and_approximate_mode else _gelu_exact
    out = run_op(
        "gelu",
        _float(fn),
        [input_tensor],
        static=(bool(fast_and_approximate_mode),),
        memory_config=memory_config,
    )
    return write_output(out, output_tensor)


# ---------------------------------------------------------------------------------------------
# Binary
# ---------------------------------------------------------------------------------------------


def _binary(name: str, fn: Callable[[Any, Any], Any], doc: str) -> Callable[..., Tensor]:
    def op(
        input_tensor_a: Tensor | float,
        input_tensor_b: Tensor | float,
        *,
        dtype: DataType | None = None,
        memory_config: Any = None,
        output_tensor: Tensor | None = None,
        activations: Any = None,
        input_tensor_a_activations: Any = None,
        input_tensor_b_activations: Any = None,
        use_legacy: bool | None = None,
        **kwargs: Any,
    ) -> Tensor:
        check_hw_kwargs(name, kwargs)
        out_dtype = check_dtype(name, dtype)
        # TT-NN applies input_tensor_{a,b}_activations to each operand before the op and
        # activations to its result (binary_ng's pre/post activations), each a list of
        # activations in any of TT-NN's forms (ttjax.ops.activations).
        parsed = tuple(
            parse_activations(name, x)
            for x in (input_tensor_a_activations, input_tensor_b_activations, activations)
        )
        pre_a, pre_b, post = (chain_fn(name, p) for p in parsed)
        a, b = input_tensor_a, input_tensor_b

        def f(x: Any, y: Any) -> Any:
            if pre_a is not None:
                x = pre_a(jnp.asarray(x))
            if pre_b is not None:
                y = pre_b(jnp.asarray(y))
            z = fn(x, y)
            return post(z) if post is not None else z

        def f_swapped(x: Any, s: Any) -> Any:
            return f(s, x)

        key: Any = parsed if any(parsed) else ()
        if is_scalar(b) and isinstance(a, Tensor):
            out = run_op(
                name + "_scalar",
                f,
                [a],
                scalars=(b,),
                out_dtype=out_dtype,
                static=key,
                memory_config=memory_config,
            )
        elif is_scalar(a) and isinstance(b, Tensor):
            out = run_op(
                name + "_rscalar",
                f_swapped,
                [b],
                scalars=(a,),
                out_dtype=out_dtype,
                static=key,
                memory_config=memory_config,
            )
        else:
            out = run_op(
                name,
                f,
                [a, b],  # type: ignore[list-item]
                out_dtype=out_dtype,
                static=key,
                memory_config=memory_config,
                meta=OpMeta("elementwise", fn=f),
            )
        return write_output(out, output_tensor)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


add = _binary("add", jnp.add, "a + b per device (tensor or scalar operands).")
subtract = _binary("subtract", jnp.subtract, "a - b per device.")
sub = subtract
multiply = _binary("multiply", jnp.multiply, "a * b per device.")
divide = _binary("divide", jnp.true_divide, "a / b per device.")
rsub = _binary("rsub", lambda x, y: jnp.subtract(y, x), "b - a per device.")
maximum = _binary("maximum", jnp.maximum, "Elementwise max of a and b per device.")
minimum = _binary("minimum", jnp.minimum, "Elementwise min of a and b per device.")
squared_difference = _binary(
    "squared_difference", lambda x, y: jnp.square(x - y), "(a - b)**2 per device."
)


def _cmp(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def wrapped(x: Any, y: Any) -> Any:
        dt = jnp.result_type(x, y)
        return fn(x, y).astype(dt)

    return wrapped


eq = _binary("eq", _cmp(jnp.equal), "1 where a == b else 0, per device (in a's dtype).")
ne = _binary("ne", _cmp(jnp.not_equal), "1 where a != b else 0, per device.")
gt = _binary("gt", _cmp(jnp.greater), "1 where a > b else 0, per device.")
ge = _binary("ge", _cmp(jnp.greater_equal), "1 where a >= b else 0, per device.")
lt = _binary("lt", _cmp(jnp.less), "1 where a < b else 0, per device.")
le = _binary("le", _cmp(jnp.less_equal), "1 where a <= b else 0, per device.")

_pow_tensor = _binary("pow", jnp.power, "a ** b per device.")


def pow(
    input_tensor: Tensor,
    exponent: Tensor | float,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """``input_tensor ** exponent`` per device (scalar or tensor exponent)."""
    check_hw_kwargs("pow", kwargs)
    if is_scalar(exponent):

        def fn(x: Any, e: Any) -> Any:
            return jnp.power(x.astype(jnp.float32), e).astype(x.dtype)

        out = run_op(
            "pow_scalar", fn, [input_tensor], scalars=(exponent,), memory_config=memory_config
        )
        return write_output(out, output_tensor)
    return _pow_tensor(
        input_tensor, exponent, output_tensor=output_tensor, memory_config=memory_config
    )


# ---------------------------------------------------------------------------------------------
# Ternary and friends
# ---------------------------------------------------------------------------------------------


def where(
    condition: Tensor,
    true_value: Tensor | float,
    false_value: Tensor | float,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """``true_value`` where ``condition`` is nonzero, else ``false_value``, per device."""
    check_hw_kwargs("where", kwargs)
    tensors: list[Tensor] = [condition]
    scalars: list[Any] = []
    layout = []
    for v in (true_value, false_value):
        if isinstance(v, Tensor):
            layout.append(("t", len(tensors)))
            tensors.append(v)
        elif is_scalar(v):
            layout.append(("s", len(scalars)))
            scalars.append(v)
        else:
            raise TTJaxError(
                f"ttnn.where: branch value {v!r} is neither a Tensor nor a number.\n"
                "fix: pass ttnn Tensors or Python scalars."
            )
    n = len(tensors)
    spec = tuple(layout)

    def fn(*args: Any) -> Any:
        ts, ss = args[:n], args[n:]
        vals = [ts[i] if kind == "t" else ss[i] for kind, i in spec]
        cond = ts[0] != 0
        if any(kind == "t" for kind, _ in spec):
            dt = jnp.result_type(*[ts[i] for kind, i in spec if kind == "t"])
        else:
            dt = ts[0].dtype
        return jnp.asarray(jnp.where(cond, *vals)).astype(dt)

    # The result takes the branches' dtype, not the predicate's (a bfloat16 mask must not round
    # float32 values); with two scalar branches it keeps the predicate's dtype.
    branch = [t._dtype for t in tensors[1:]]
    out_dtype = DataType.FLOAT32 if DataType.FLOAT32 in branch else (branch[0] if branch else None)
    out = run_op(
        "where",
        fn,
        tensors,
        scalars=tuple(scalars),
        static=spec,
        out_dtype=out_dtype,
        memory_config=memory_config,
    )
    return write_output(out, output_tensor)


def clamp(
    input_tensor: Tensor,
    min: float | None = None,
    max: float | None = None,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Clip values to ``[min, max]`` per device (either bound may be None)."""
    check_hw_kwargs("clamp", kwargs)
    bounds = tuple(b for b in (min, max) if b is not None)
    has = (min is not None, max is not None)

    def fn(x: Any, *b: Any) -> Any:
        it = iter(b)
        lo = next(it) if has[0] else None
        hi = next(it) if has[1] else None
        return jnp.clip(x, lo, hi).astype(x.dtype)

    out = run_op(
        "clamp", fn, [input_tensor], scalars=bounds, static=has, memory_config=memory_config
    )
    return write_output(out, output_tensor)


clip = clamp


def typecast(
    input_tensor: Tensor,
    dtype: DataType,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Convert to ``dtype`` per device (block floats are re-quantized on device).

    >>> w8 = ttnn.typecast(w, ttnn.bfloat8_b)
    """
    check_hw_kwargs("typecast", kwargs)
    dt = check_dtype("typecast", dtype)
    if dt is None:
        raise TTJaxError("ttnn.typecast needs a dtype.\nfix: e.g. ttnn.typecast(t, ttnn.float32).")

    def fn(x: Any) -> Any:
        return x

    out = run_op(
        "typecast", fn, [input_tensor], static=(dt,), out_dtype=dt, memory_config=memory_config
    )
    return write_output(out, output_tensor)


mul = multiply


def div(
    input_tensor_a: Tensor | float,
    input_tensor_b: Tensor | float,
    *,
    accurate_mode: bool = False,
    round_mode: str | None = None,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """``a / b`` per device; ``round_mode="trunc"`` or ``"floor"`` rounds the quotient (TT-NN's
    ``ttnn.div``).

    >>> y = ttnn.div(x, 8)
    """
    if round_mode not in (None, "trunc", "floor"):
        raise TTJaxError(
            f"ttnn.div: round_mode={round_mode!r} is not one of None, 'trunc', 'floor'.\n"
            "fix: pass round_mode=None for true division."
        )
    if round_mode is None:
        return divide(
            input_tensor_a,
            input_tensor_b,
            memory_config=memory_config,
            output_tensor=output_tensor,
            **kwargs,
        )
    return (_div_trunc if round_mode == "trunc" else _div_floor)(
        input_tensor_a,
        input_tensor_b,
        memory_config=memory_config,
        output_tensor=output_tensor,
        **kwargs,
    )


def _rounded_div(rnd: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    def fn(x: Any, y: Any) -> Any:
        dt = jnp.result_type(x, y)
        q = rnd(jnp.true_divide(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)))
        return q.astype(dt)

    return fn


_div_trunc = _binary("div_trunc", _rounded_div(jnp.trunc), "trunc(a / b) per device.")
_div_floor = _binary("div_floor", _rounded_div(jnp.floor), "floor(a / b) per device.")


def eqz(
    input_tensor: Tensor,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """1 where x == 0 else 0, per device, in the input's dtype (TT-NN's ``ttnn.eqz``)."""
    check_hw_kwargs("eqz", kwargs)
    out = run_op(
        "eqz", lambda x: (x == 0).astype(x.dtype), [input_tensor], memory_config=memory_config
    )
    return write_output(out, output_tensor)


def plus_one(
    input_tensor: Tensor, sub_core_grids: Any = None, skip_negative_entries: bool = False
) -> Tensor:
    """Add 1 to an int32/uint32 tensor in place (TT-NN's ``ttnn.plus_one``); returns it.

    With ``skip_negative_entries=True`` entries that are negative as int32 are left unchanged.

    >>> pos = ttnn.from_torch(torch.tensor([0, -1, 5], dtype=torch.int32), device=mesh)
    >>> ttnn.plus_one(pos, skip_negative_entries=True) is pos
    True
    """
    if input_tensor._dtype not in (DataType.INT32, DataType.UINT32):
        raise TTJaxError(
            f"ttnn.plus_one: the input is {input_tensor._dtype!r}; plus_one needs INT32 or "
            "UINT32.\nfix: create the tensor with dtype=ttnn.int32 (or typecast it)."
        )
    skip = bool(skip_negative_entries)

    def fn(x: Any) -> Any:
        as_int = jax.lax.bitcast_convert_type(x, jnp.int32) if x.dtype == jnp.uint32 else x
        inc = as_int + 1
        out = jnp.where(as_int < 0, as_int, inc) if skip else inc
        return jax.lax.bitcast_convert_type(out, x.dtype) if x.dtype == jnp.uint32 else out

    out = run_op("plus_one", fn, [input_tensor], static=(skip,))
    return input_tensor.assign(out)


def identity(
    input_tensor: Tensor,
    *,
    dtype: DataType | None = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """A copy of the tensor (per device); ``ttnn.clone`` with optional ``dtype`` and
    ``memory_config`` for the copy."""
    check_hw_kwargs("identity", kwargs)
    dt = check_dtype("clone", dtype)
    return run_op(
        "identity",
        lambda x: x,
        [input_tensor],
        static=(dt,),
        out_dtype=dt,
        memory_config=memory_config,
    )


clone = identity


# ---------------------------------------------------------------------------------------------
# More of TT-NN's elementwise names that model code uses
# ---------------------------------------------------------------------------------------------

logical_and = _binary(
    "logical_and",
    _cmp(lambda x, y: (x != 0) & (y != 0)),
    "1 where a and b are nonzero, per device.",
)
logical_or = _binary(
    "logical_or", _cmp(lambda x, y: (x != 0) | (y != 0)), "1 where a or b is nonzero, per device."
)
logical_xor = _binary(
    "logical_xor",
    _cmp(lambda x, y: (x != 0) ^ (y != 0)),
    "1 where exactly one of a and b is nonzero, per device.",
)
atan2 = _binary(
    "atan2",
    lambda x, y: jnp.arctan2(x.astype(jnp.float32), y.astype(jnp.float32)).astype(x.dtype),
    "atan2(a, b) per device (TT-NN's argument order: y first).",
)
isnan = _unary("isnan", lambda x: jnp.isnan(x).astype(x.dtype), "1 where x is NaN, per device.")
hardsigmoid = _unary(
    "hardsigmoid",
    _float(lambda x: jnp.clip(x / 6.0 + 0.5, 0.0, 1.0)),
    "clip(x / 6 + 1/2, 0, 1) per device.",
)
relu6 = _unary(
    "relu6", lambda x: jnp.clip(x, 0, 6).astype(x.dtype), "min(max(x, 0), 6) per device."
)
hardswish = _unary(
    "hardswish",
    _float(lambda x: x * jnp.clip(x / 6.0 + 0.5, 0.0, 1.0)),
    "x * hardsigmoid(x) per device (TT-NN's hardswish).",
)
swish = _unary("swish", _float(jax.nn.silu), "x * sigmoid(x) per device (TT-NN's name for SiLU).")
remainder = _binary(
    "remainder",
    lambda x, y: jnp.remainder(x, y).astype(x.dtype),
    "a - floor(a / b) * b per device: the remainder takes b's sign (torch.remainder's rule).",
)
bitwise_and = _binary("bitwise_and", jnp.bitwise_and, "a & b per device (integer tensors).")
bitwise_or = _binary("bitwise_or", jnp.bitwise_or, "a | b per device (integer tensors).")
sigmoid_accurate = _unary(
    "sigmoid_accurate",
    _float(jax.nn.sigmoid),
    "1 / (1 + exp(-x)) per device (TT-NN's non-approximated sigmoid).",
)


def softplus(
    input_tensor: Tensor,
    *,
    beta: float = 1.0,
    threshold: float = 20.0,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """``log(1 + exp(beta * x)) / beta`` per device, ``x`` where ``beta * x > threshold``
    (torch's softplus, TT-NN's ``ttnn.softplus``)."""
    check_hw_kwargs("softplus", kwargs)
    act = chain_fn(
        "softplus", (UnaryWithParam(UnaryOpType.SOFTPLUS, [float(beta), float(threshold)]),)
    )
    assert act is not None
    out = run_op(
        "softplus",
        act,
        [input_tensor],
        static=(float(beta), float(threshold)),
        memory_config=memory_config,
    )
    return write_output(out, output_tensor)


def _inplace(name: str, op: Callable[..., Tensor]) -> Callable[..., Tensor]:
    def inplace(input_tensor_a: Tensor, input_tensor_b: Tensor | float, **kwargs: Any) -> Tensor:
        return write_output(op(input_tensor_a, input_tensor_b, **kwargs), input_tensor_a)

    inplace.__name__ = inplace.__qualname__ = name
    inplace.__doc__ = f"``{op.__name__}`` written into ``input_tensor_a`` (TT-NN's in-place form)."
    return inplace


add_ = _inplace("add_", add)
sub_ = _inplace("sub_", subtract)
mul_ = _inplace("mul_", multiply)
div_ = _inplace("div_", divide)


_BCAST_MATH = {
    BcastOpMath.ADD: jnp.add,
    BcastOpMath.SUB: jnp.subtract,
    BcastOpMath.MUL: jnp.multiply,
}


def bcast(
    input_a: Tensor,
    input_b: Tensor,
    math_op: BcastOpMath,
    dim: BcastOpDim,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
) -> Tensor:
    """``a (math_op) b`` with ``b``'s first row (H), column (W) or value (HW) repeated over
    ``a``, TT-NN's ``ttnn.bcast`` (ttnn/cpp/ttnn/operations/data_movement/bcast/): b's other
    dims match a's (H: widths equal; W: heights equal) and its batch is 1 or a's.

    >>> row = ttnn.from_torch(torch.ones(1, 1, 1, 32), layout=ttnn.TILE_LAYOUT, device=mesh)
    >>> y = ttnn.bcast(x, row, ttnn.BcastOpMath.ADD, ttnn.BcastOpDim.H)
    """
    op = "bcast"
    if not isinstance(math_op, BcastOpMath) or not isinstance(dim, BcastOpDim):
        raise TTJaxError(
            f"ttnn.bcast: math_op={math_op!r}, dim={dim!r}.\nfix: pass a ttnn.BcastOpMath "
            "(ADD, SUB, MUL) and a ttnn.BcastOpDim (H, W, HW)."
        )
    sa, sb = tuple(input_a._shape), tuple(input_b._shape)
    if len(sa) < 2 or len(sb) < 2:
        raise ShapeMismatchError(
            f"ttnn.bcast: inputs need at least 2 dims (got {list(sa)} and {list(sb)}).\n"
            "fix: unsqueeze to [N, C, H, W]."
        )
    if dim is BcastOpDim.H and sa[-1] != sb[-1]:
        raise ShapeMismatchError(
            f"ttnn.bcast: dim H needs b as wide as a (a {list(sa)}, b {list(sb)}).\n"
            "fix: b is one row [.., 1, W] of a's width W."
        )
    if dim is BcastOpDim.W and sa[-2] != sb[-2]:
        raise ShapeMismatchError(
            f"ttnn.bcast: dim W needs b as high as a (a {list(sa)}, b {list(sb)}).\n"
            "fix: b is one column [.., H, 1] of a's height H."
        )
    batch_b = int(np.prod(sb[:-2], dtype=np.int64))
    if batch_b != 1 and (len(sa) != len(sb) or sa[:-2] != sb[:-2]):
        raise ShapeMismatchError(
            f"ttnn.bcast: Broadcast with batch is currently only supported when bN*bC=1 or N & C "
            f"match (a {list(sa)}, b {list(sb)}).\nfix: give b batch 1 or a's batch dims."
        )
    rows = slice(0, 1) if dim in (BcastOpDim.H, BcastOpDim.HW) else slice(None)
    cols = slice(0, 1) if dim in (BcastOpDim.W, BcastOpDim.HW) else slice(None)
    math = _BCAST_MATH[math_op]

    def fn(a: Any, b: Any) -> Any:
        b = b[..., rows, cols]
        if b.ndim < a.ndim:
            b = jnp.reshape(b, (1,) * (a.ndim - b.ndim) + b.shape)
        if b.shape[:-2] != a.shape[:-2]:
            b = jnp.reshape(b, (1,) * (a.ndim - 2) + b.shape[-2:])
        return math(a.astype(jnp.float32), b.astype(jnp.float32)).astype(a.dtype)

    out = run_op(op, fn, [input_a, input_b], static=(math_op, dim), memory_config=memory_config)
    return write_output(out, output_tensor)


def experimental_typecast(
    input_tensor: Tensor,
    dtype: DataType,
    *,
    memory_config: Any = None,
    optional_output_tensor: Tensor | None = None,
) -> Tensor:
    """``ttnn.experimental.typecast``: :func:`typecast` with TT-NN's experimental keywords
    (ttnn/cpp/ttnn/operations/experimental/copy/typecast)."""
    return typecast(
        input_tensor, dtype, memory_config=memory_config, output_tensor=optional_output_tensor
    )
