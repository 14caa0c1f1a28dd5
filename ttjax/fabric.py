"""TT-Metal's fabric settings: ``ttnn.FabricConfig``, ``ttnn.FabricReliabilityMode``,
``ttnn.FabricTensixConfig`` and ``ttnn.set_fabric_config``.

Public names only; the implementation is :mod:`ttjax._src.core.fabric`.
"""

from ttjax._src.core.fabric import (
    FabricConfig as FabricConfig,
    FabricReliabilityMode as FabricReliabilityMode,
    FabricSetting as FabricSetting,
    FabricTensixConfig as FabricTensixConfig,
    current_setting as current_setting,
    get_fabric_config as get_fabric_config,
    set_fabric_config as set_fabric_config,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.fabric")
