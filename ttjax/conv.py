"""TT-NN's convolution and pooling family (``ttnn.conv2d``, ``ttnn.conv1d``, ``ttnn.max_pool2d``,
``ttnn.global_avg_pool2d``, ``ttnn.adaptive_avg_pool2d``, ``ttnn.experimental.conv3d``, ...), per
device, with TT-NN's names.

Public names only; the implementation is :mod:`ttjax._src.ttnn.conv` (convolution),
:mod:`ttjax._src.ttnn.conv3d` (conv3d) and :mod:`ttjax._src.ttnn.ops.pool` (pooling, upsample).
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.conv import (
    Conv1dConfig as Conv1dConfig,
    Conv2dConfig as Conv2dConfig,
    Conv2dDRAMSliceHeight as Conv2dDRAMSliceHeight,
    Conv2dDRAMSliceWidth as Conv2dDRAMSliceWidth,
    Conv2dL1Full as Conv2dL1Full,
    Conv2dL1FullSliceConfig as Conv2dL1FullSliceConfig,
    Conv2dSliceConfig as Conv2dSliceConfig,
    conv1d as conv1d,
    conv2d as conv2d,
    conv_transpose2d as conv_transpose2d,
    get_conv_output_dim as get_conv_output_dim,
    prepare_conv_bias as prepare_conv_bias,
    prepare_conv_weights as prepare_conv_weights,
)
from ttjax._src.ttnn.conv3d import (
    Conv3dConfig as Conv3dConfig,
    conv3d as conv3d,
)
from ttjax._src.ttnn.ops.pool import (
    adaptive_avg_pool2d as adaptive_avg_pool2d,
    adaptive_max_pool2d as adaptive_max_pool2d,
    global_avg_pool2d as global_avg_pool2d,
    max_pool2d as max_pool2d,
    upsample as upsample,
)

_publish(globals(), "ttjax._src.ttnn.conv", "ttjax._src.ttnn.conv3d", "ttjax._src.ttnn.ops.pool")
