"""Reductions (sum, mean, max, min, argmax, var, std) and normalizations (softmax, layer_norm,
rms_norm), all over each device's local tensor.

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.reduction` (and
:mod:`ttjax._src.ttnn.ops.pool` for ``avg_pool2d``).
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.pool import (
    avg_pool2d as avg_pool2d,
    pool_output_size as pool_output_size,
)
from ttjax._src.ttnn.ops.reduction import (
    argmax as argmax,
    cumsum as cumsum,
    layer_norm as layer_norm,
    max as max,
    mean as mean,
    min as min,
    rms_norm as rms_norm,
    sampling as sampling,
    scale_causal_mask_hw_dims_softmax_in_place as scale_causal_mask_hw_dims_softmax_in_place,
    scale_mask_softmax_in_place as scale_mask_softmax_in_place,
    scale_mask_softmax_op as scale_mask_softmax_op,
    softmax as softmax,
    softmax_in_place as softmax_in_place,
    std as std,
    sum as sum,
    topk as topk,
    var as var,
)

_publish(globals(), "ttjax._src.ttnn.ops.reduction", "ttjax._src.ttnn.ops.pool")
