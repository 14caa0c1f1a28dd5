"""TT-NN's global ``ttnn.CONFIG`` (``ttnn.Config``: cache and report paths, logging and
comparison-mode switches) and ``ttnn.get_fallback_function``.

Public names only; the implementation is :mod:`ttjax._src.core.core_config`.
"""

from ttjax._src.core.core_config import (
    CONFIG as CONFIG,
    Config as Config,
    get_fallback_function as get_fallback_function,
    manage_config as manage_config,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.core_config")
