"""TT-NN's activation forms, read by one parser for every op that takes activations.

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
