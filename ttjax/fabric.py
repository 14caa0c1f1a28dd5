"""TT-Metal's fabric settings: ``ttnn.FabricConfig``, ``ttnn.FabricReliabilityMode``,
``ttnn.FabricTensixConfig`` and ``ttnn.set_fabric_config``.

On Tenstorrent hardware the fabric (the routers on the Ethernet cores) carries every CCL's data
between chips; it is configured before a mesh opens and stays so until the next
``set_fabric_config``. ttjax's collectives are XLA's, so the routing modes change no numbers;
the setting is recorded, a mesh remembers the one in effect when it opened
(``MeshDevice.fabric_config``), and a collective across devices of a mesh opened after an explicit
``set_fabric_config(FabricConfig.DISABLED)`` is refused as TT-Metal refuses it (its ops ask for
the fabric context, which a disabled fabric never builds: "Trying to get un-initialized fabric
context").

>>> import ttjax as ttnn
>>> ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D)
>>> ttnn.get_fabric_config()
FabricConfig.FABRIC_1D

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
