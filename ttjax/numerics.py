"""The numerics policy: how every sum across devices (all-reduce, reduce-scatter) is ordered.

Public names only; the implementation is :mod:`ttjax._src.core.numerics`.
"""

from ttjax._src.core.numerics import (
    MODES as MODES,
    Policy as Policy,
    _setting,
    accumulation_dtype as accumulation_dtype,
    all_gather as all_gather,
    deterministic as deterministic,
    group_size as group_size,
    mode as mode,
    ordered_sum as ordered_sum,
    pmean as pmean,
    psum as psum,
    psum_hierarchical as psum_hierarchical,
    psum_scatter as psum_scatter,
    reduce_sum as reduce_sum,
    set_numerics as set_numerics,
)
from ttjax._src.core.policy import make_callable as _make_callable
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.numerics")

# ``ttjax.numerics("...")``: the module itself is called (a Policy context manager), as before.
_make_callable(__name__, _setting)
