"""TT-NN's global ``ttnn.CONFIG`` (``ttnn.Config``: cache and report paths, logging and
comparison-mode switches) and ``ttnn.get_fallback_function``.

The switches are plain settings, read and written as in TT-NN (ttnn/api/ttnn/config.hpp); ttjax
keeps no report database, so the report switches only hold their values.

>>> with ttnn.manage_config("enable_comparison_mode", True):
...     ttnn.CONFIG.enable_comparison_mode
True

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
