"""Tensor factories: zeros, ones, full, empty, rand, arange (and the ``*_like`` forms).

With ``device=mesh`` every device gets the per-device ``shape`` (replicated values); without a
device the result is a host tensor. ``rand`` is seeded and gives the same values on every device
and for every mesh shape.

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.creation`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.creation import (
    arange as arange,
    empty as empty,
    empty_like as empty_like,
    full as full,
    full_like as full_like,
    ones as ones,
    ones_like as ones_like,
    rand as rand,
    zeros as zeros,
    zeros_like as zeros_like,
)

_publish(globals(), "ttjax._src.ttnn.ops.creation")
