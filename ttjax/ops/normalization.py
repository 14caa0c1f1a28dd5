"""TT-NN's group norm and its input helpers (``ttnn.operations.normalization``): the op reads
its mask and weight/bias rows in TT-NN's chunked "virtual columns" layout, as the helpers build
them.

>>> mask = ttnn.create_group_norm_input_mask(64, 4, 1)
>>> gamma = ttnn.create_group_norm_weight_bias_rm(torch.ones(64), 64, 1)

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.normalization` (and
:mod:`ttjax._src.ttnn.group_norm_params` for ``dram_group_norm_params_from_torch``).
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.group_norm_params import (
    dram_group_norm_params_from_torch as dram_group_norm_params_from_torch,
)
from ttjax._src.ttnn.ops.normalization import (
    create_group_norm_input_mask as create_group_norm_input_mask,
    create_group_norm_input_negative_mask as create_group_norm_input_negative_mask,
    create_group_norm_reciprocals as create_group_norm_reciprocals,
    create_group_norm_weight_bias_rm as create_group_norm_weight_bias_rm,
    determine_expected_group_norm_sharded_config_and_grid_size as determine_expected_group_norm_sharded_config_and_grid_size,
    dram_group_norm_virtual_columns as dram_group_norm_virtual_columns,
    find_closest_largest_divisor as find_closest_largest_divisor,
    find_max_tile_span as find_max_tile_span,
    get_group_norm_cores_across_channel as get_group_norm_cores_across_channel,
    group_norm as group_norm,
)

_publish(globals(), "ttjax._src.ttnn.ops.normalization", "ttjax._src.ttnn.group_norm_params")
