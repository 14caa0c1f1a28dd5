"""Hand-written kernels for the matmuls XLA runs below the memory roofline: a Pallas GEMV for decode.

A decode step multiplies a few rows of activations (M = batch, 1 to 16) by every weight matrix, so
its speed is the rate at which the weights stream from memory. :func:`gemv` is a Pallas kernel for
that shape: a grid of (column block, K split) programs, each streaming its ``[K / split, block_n]``
slab of the weight once, accumulating in float32; the K splits (for tall matrices and too few
column blocks) are added afterwards. It runs compiled through Triton on a GPU and in Pallas's
interpret mode anywhere else, so its numerics are tested on the CPU.

Which kernel ``ttnn.matmul`` / ``ttnn.linear`` use is a thread-local policy, like
:mod:`ttjax.numerics`, and part of the jit cache key:

- ``"auto"`` (default): the Pallas GEMV on a GPU backend when M <= 16, the shape has a config
  (:func:`gemv_config`) and the weight holds at most :data:`AUTO_MAX_WEIGHT` elements; XLA's dot
  everywhere else. Measured on an H100 (``benchmarks/gpu_decode.py``'s sweep, Llama-3.1-8B's
  decode shapes, batch 1): the GEMV reads 4096 x 4096 and 4096 x 6144 weights 1.19x and 1.26x
  faster than XLA's dot, and the 4096 x 14336 and larger ones 3-15% slower;
- ``"xla"``: always XLA's dot;
- ``"pallas"``: the Pallas GEMV wherever the shape has a config, in interpret mode off a GPU
  (slow: for tests and for reading the kernel).

``TTJAX_KERNELS=xla`` sets the default before ``import ttjax``.

>>> import jax.numpy as jnp
>>> x, w = jnp.ones((1, 256), jnp.float32), jnp.ones((256, 128), jnp.float32)
>>> float(ttjax.kernels.gemv(x, w, interpret=True)[0, 0])
256.0
>>> with ttjax.kernels("xla"):
...     ttjax.kernels.mode()
'xla'

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
