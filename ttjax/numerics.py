"""The numerics policy: how every sum across devices (all-reduce, reduce-scatter) is ordered.

``"fast"`` (the default) lets XLA pick the reduction order (``lax.psum``). ``"deterministic"``
fixes it by device index, as Tessera's policy does: each device receives the pieces it owns from
every device of the group (one all-to-all), adds them in device order 0, 1, ..., n-1 (float16 and
bfloat16 accumulate in float32), and the reduced pieces are shared again. Results are then
bitwise identical run to run, on every mesh shape that reduces the same devices (1x8, 2x4 over
both axes, 8x1), and equal to a single-device left-to-right sum of the per-device arrays.

>>> with ttjax.numerics("deterministic"):       # a context manager ...
...     y = ttjax.all_reduce(x)
>>> ttjax.numerics.mode()
'fast'
>>> ttjax.numerics("deterministic")             # ... or a setter for this thread
ttjax.numerics('deterministic')
>>> ttjax.numerics("fast")
ttjax.numerics('fast')

Inside ``jax.shard_map``, :func:`psum`, :func:`pmean`, :func:`psum_scatter` and :func:`all_gather`
honour the policy, and so do their gradients: under ``"deterministic"`` the backward of a psum is an
ordered psum and the backward of an all-gather an ordered reduce-scatter, where ``lax``'s transposes
would sum in XLA's order. This is the one floor every sum of ttjax goes through: ``ttjax.ccl``,
``ttjax.dist``, TTML's differentiable pairs, DDP, the pipeline and the train step. (In a
``shard_map(check_vma=True)``, JAX itself sums the cotangents of values it implicitly made
per-device, in XLA's order; ttjax's own shard_maps run with ``check_vma=False``.)

The policy is part of JAX's jit cache key (``jax.make_user_context``): a jitted function traced
under one policy is traced again under the other. Bottom layer: imports only jax, ttjax._src.core.policy
and ttjax.errors.

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
