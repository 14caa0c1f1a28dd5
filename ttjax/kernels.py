"""Hand-written kernels for the matmuls XLA runs below the memory roofline: a Pallas GEMV for decode.

Public names only; the implementation is :mod:`ttjax._src.core.kernels`.
"""

from ttjax._src.core.kernels import (
    AUTO_MAX_WEIGHT as AUTO_MAX_WEIGHT,
    MAX_M as MAX_M,
    MEASURED as MEASURED,
    MODES as MODES,
    GemvConfig as GemvConfig,
    Policy as Policy,
    _setting,
    choose_gemv as choose_gemv,
    gemv as gemv,
    gemv_config as gemv_config,
    mode as mode,
    small_m_matmul as small_m_matmul,
)
from ttjax._src.core.policy import make_callable as _make_callable
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.kernels")

# ``ttjax.kernels("...")``: the module itself is called (a Policy context manager), as before.
_make_callable(__name__, _setting)
