"""TT-NN's activation forms, read by one parser for every op that takes activations.

TT-NN names a fused activation five ways, and its bindings turn each into one ``UnaryWithParam``
(ttnn/cpp/ttnn-pybind/activation.cpp: ``UnaryOpType``, ``(op, float|int|bool)`` pairs and
``UnaryWithParam`` convert implicitly) or a list of them (binary ops' ``activations=``):

- ``ttnn.UnaryOpType.SILU``                        -> ``UnaryWithParam(SILU)`` (no parameter)
- ``ttnn.UnaryWithParam(ttnn.UnaryOpType.GELU, 1.0)``
- ``[ttnn.UnaryOpType.GELU, True]`` (a pair)        -> ``UnaryWithParam(GELU, 1.0)``: ONE activation
- ``"gelu"``, ``"silu"``, ... (matmul/linear ``activation=``): TT-NN's
  ``string_to_unary_with_param`` (ttnn/.../eltwise/unary/common/unary_op_utils.cpp)
- a list of the above, applied in order (``input_tensor_a_activations=[ttnn.UnaryOpType.SILU]``)

Each parameter means what ``get_op_init_and_func_parameterized`` in unary_op_utils.cpp makes of
it: GELU's is "approximate" (and GELU with no parameter runs ``gelu_tile<fast_and_approx=true>``,
the approximate form); EXP/LOG/ERF/RSQRT's only pick a faster kernel (same values here);
RELU_MAX/RELU_MIN/LEAKY_RELU/ELU/... carry the number the formula uses.

>>> from ttjax.enums import UnaryOpType
>>> parse_activation("matmul", [UnaryOpType.GELU, True])
UnaryWithParam(UnaryOpType.GELU, 1.0)
>>> parse_activations("mul", [UnaryOpType.SILU])
(UnaryWithParam(UnaryOpType.SILU),)

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.activations`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.activations import (
    STRING_ACTIVATIONS as STRING_ACTIVATIONS,
    UNARY_FNS as UNARY_FNS,
    U as U,
    chain_fn as chain_fn,
    parse_activation as parse_activation,
    parse_activations as parse_activations,
    unary_fn as unary_fn,
)

_publish(globals(), "ttjax._src.ttnn.ops.activations")
