"""Elementwise ops (unary, binary, ternary) with TT-NN's per-device semantics.

Each runs on every device over that device's local tensor; shapes broadcast per device, like
numpy. A Python scalar operand is traced, not baked in, so changing it never recompiles.

>>> y = ttnn.gelu(x)            # every device applies gelu to its own shard
>>> z = ttnn.add(y, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ttjax._dispatch import run_op
from ttjax.enums import DataType
from ttjax.errors import TTJaxError
from ttjax.ops._common import check_dtype, check_hw_kwargs, is_scalar, write_output
from ttjax.tensor import Tensor

# ---------------------------------------------------------------------------------------------
# Activations (also used by linear/matmul ``activation=``)
# ---------------------------------------------------------------------------------------------


def _gelu_exact(x: Any) -> Any:
    return jax.nn.gelu(x, approximate=False)


def _gelu_tanh(x: Any) -> Any:
    return jax.nn.gelu(x, approximate=True)


ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    "gelu": _gelu_exact,
    "gelu_approx": _gelu_tanh,
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "sigmoid": jax.nn.sigmoid,
    "tanh": jnp.tanh,
}


def activation_fn(op: str, activation: Any) -> Callable[[Any], Any] | None:
    """The activation named by a TT-NN ``activation=``/``activations=`` argument (str or list)."""
    if activation is None:
        return None
    if isinstance(activation, (list, tuple)):
        fns = [activation_fn(op, a) for a in activation]
        chain = [f for f in fns if f is not None]
        if not chain:
            return None

        def apply(x: Any) -> Any:
            for f in chain:
                x = f(x)
            return x

        return apply
    name = getattr(activation, "op_type", activation)
    name = getattr(name, "name", name)
    key = str(name).lower()
    if key not in ACTIVATIONS:
        raise TTJaxError(
            f"ttnn.{op}: activation {activation!r} is not supported.\n"
            f"fix: use one of {sorted(ACTIVATIONS)}."
        )
    return ACTIVATIONS[key]


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
        return write_output(run_op(name, fn, [input_tensor]), output_tensor)

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
    out = run_op("gelu", _float(fn), [input_tensor], static=(bool(fast_and_approximate_mode),))
    return write_output(out, output_tensor)


# ---------------------------------------------------------------------------------------------
# Binary
# ---------------------------------------------------------------------------------------------


def _binary(name: str, fn: Callable[[Any, Any], Any], doc: str) -> Callable[..., Tensor]:
    def swapped(x: Any, s: Any) -> Any:
        return fn(s, x)

    def op(
        input_tensor_a: Tensor | float,
        input_tensor_b: Tensor | float,
        *,
        dtype: DataType | None = None,
        memory_config: Any = None,
        output_tensor: Tensor | None = None,
        activations: Any = None,
        **kwargs: Any,
    ) -> Tensor:
        check_hw_kwargs(name, kwargs)
        out_dtype = check_dtype(name, dtype)
        act = activation_fn(name, activations)
        a, b = input_tensor_a, input_tensor_b
        if act is None:
            f, f_swapped = fn, swapped
            key: Any = ()
        else:

            def f(x: Any, y: Any) -> Any:
                return act(fn(x, y))

            def f_swapped(x: Any, s: Any) -> Any:
                return act(fn(s, x))

            key = (repr(activations),)
        if is_scalar(b) and isinstance(a, Tensor):
            out = run_op(name + "_scalar", f, [a], scalars=(b,), out_dtype=out_dtype, static=key)
        elif is_scalar(a) and isinstance(b, Tensor):
            out = run_op(
                name + "_rscalar", f_swapped, [b], scalars=(a,), out_dtype=out_dtype, static=key
            )
        else:
            out = run_op(name, f, [a, b], out_dtype=out_dtype, static=key)  # type: ignore[list-item]
        return write_output(out, output_tensor)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


add = _binary("add", jnp.add, "a + b per device (tensor or scalar operands).")
subtract = _binary("subtract", jnp.subtract, "a - b per device.")
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

        out = run_op("pow_scalar", fn, [input_tensor], scalars=(exponent,))
        return write_output(out, output_tensor)
    return _pow_tensor(input_tensor, exponent, output_tensor=output_tensor)


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
    out = run_op("where", fn, tensors, scalars=tuple(scalars), static=spec, out_dtype=out_dtype)
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

    out = run_op("clamp", fn, [input_tensor], scalars=bounds, static=has)
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

    out = run_op("typecast", fn, [input_tensor], static=(dt,), out_dtype=dt)
    return write_output(out, output_tensor)


def identity(input_tensor: Tensor, **kwargs: Any) -> Tensor:
    """A copy of the tensor (per device)."""
    check_hw_kwargs("identity", kwargs)
    return run_op("identity", lambda x: x, [input_tensor])


clone = identity
