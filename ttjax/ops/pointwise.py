"""Elementwise ops (unary, binary, ternary) with TT-NN's per-device semantics.

Each runs on every device over that device's local tensor; shapes broadcast per device, like
numpy. A Python scalar operand is traced, not baked in, so changing it never recompiles.

>>> y = ttnn.gelu(x)            # every device applies gelu to its own shard
>>> z = ttnn.add(y, 1.0)

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.pointwise`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.pointwise import (
    abs as abs,
    add as add,
    add_ as add_,
    atan2 as atan2,
    bcast as bcast,
    bitwise_and as bitwise_and,
    bitwise_or as bitwise_or,
    clamp as clamp,
    clip as clip,
    clone as clone,
    cos as cos,
    div as div,
    div_ as div_,
    divide as divide,
    eq as eq,
    eqz as eqz,
    erf as erf,
    exp as exp,
    experimental_typecast as experimental_typecast,
    floor as floor,
    ge as ge,
    gelu as gelu,
    gt as gt,
    hardsigmoid as hardsigmoid,
    hardswish as hardswish,
    identity as identity,
    isnan as isnan,
    le as le,
    log as log,
    logical_and as logical_and,
    logical_not as logical_not,
    logical_or as logical_or,
    logical_xor as logical_xor,
    lt as lt,
    maximum as maximum,
    minimum as minimum,
    mul as mul,
    mul_ as mul_,
    multiply as multiply,
    ne as ne,
    neg as neg,
    plus_one as plus_one,
    pow as pow,
    reciprocal as reciprocal,
    relu as relu,
    relu6 as relu6,
    remainder as remainder,
    rsqrt as rsqrt,
    rsub as rsub,
    sigmoid as sigmoid,
    sigmoid_accurate as sigmoid_accurate,
    silu as silu,
    sin as sin,
    softplus as softplus,
    sqrt as sqrt,
    square as square,
    squared_difference as squared_difference,
    sub as sub,
    sub_ as sub_,
    subtract as subtract,
    swish as swish,
    tanh as tanh,
    typecast as typecast,
    where as where,
)

_publish(globals(), "ttjax._src.ttnn.ops.pointwise")
