"""Megatron sequence parallelism (SP; Korthikanti et al. 2022), ``device_config.enable_sp``.

Tensor parallelism leaves every block's norms, residual adds and dropout replicated: each TP
device holds the whole ``[batch, seq, embed]`` activation there, and keeps it for the backward
pass. SP splits those regions on the sequence over the same tp axis, so that memory falls by the
TP size. The plan says so with one rule, ``("activation_seq", "tp")``
(``ParallelDims.with_sequence_parallel``); this module says where the regions start and end,
and TTML's modules call it (the linears, the norms, ``Attention``, ``Stack``):

=========================  ===================================  ==============================
where                      forward                              backward
=========================  ===================================  ==============================
the blocks' input          keep this device's sequence slice    all-gather
column-parallel input      all-gather the sequence (TP: the     reduce-scatter (TP: all-reduce)
                           identity)
row-parallel output        reduce-scatter the sequence (TP:     all-gather (TP: identity)
                           all-reduce)
a norm's or bias's weight  identity                             sum over tp (each device saw
                                                                its own tokens)
the blocks' output         all-gather the sequence              keep this device's slice
=========================  ===================================  ==============================

Between a column and a row linear the whole sequence travels folded into the slice's shape
(:func:`column_output`), so model code that reads its token count from the block's input runs
unchanged. Outside the blocks (embedding, final norm, LM head, loss) everything is TP's. Every
sum goes through :mod:`ttjax.numerics`.

>>> dims = ParallelDims.from_sizes(dp=2, tp=4).with_sequence_parallel()
>>> sequence_axis(dims)
'tp'
>>> y = over_blocks(lambda h: scan_of_blocks(h), x)   # inside the step: blocks on T / 4 tokens
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import jax

from ttjax import numerics
from ttjax.errors import ConfigError, ParallelPlanError
from ttjax.plan import ParallelDims
from ttjax.ttml.ops.distributed import all_gather, all_reduce, broadcast, scatter

#: The sequence dimension of an activation ``[..., seq, features]``.
SEQ_DIM = -2


def sequence_axis(dims: ParallelDims | None = None) -> str | None:
    """The mesh axis the plan splits the blocks' activations over (its ``"activation_seq"``
    rule: ``'tp'`` under SP), None when SP is off; ``dims`` defaults to the step's plan."""
    dims = ParallelDims.current() if dims is None else dims
    axes = dims.mesh_axes("activation_seq")
    return axes[0] if axes else None


def check_seq_len(seq_len: int, dims: ParallelDims, where: str = "") -> None:
    """Raise unless each device's ``seq_len`` tokens (after CP) split over the SP axis."""
    axis = sequence_axis(dims)
    if axis is None:
        return
    n, cp = dims.size(axis), dims.size("cp")
    local = seq_len // cp
    if local % n:
        step = math.lcm(cp * n, 2 * cp if cp > 1 else 1)  # CP's two chunks per device, too
        up = -(-seq_len // step) * step
        raise ParallelPlanError(
            f"{where}seq_len={seq_len} does not split over the TP size {n}: sequence "
            f"parallelism gives each {axis} device {local}/{n} tokens of every sequence under "
            f"{dims!r}.\nfix: use a sequence length (max_sequence_length) that is a multiple of "
            f"{step}, e.g. {up}, or set device_config.enable_sp: false."
        )


@dataclass
class _Region:
    """The blocks being traced under SP: their axis, and each input already gathered (Llama's
    q, k and v read one norm output: it is gathered once, and its gradient reduce-scattered once)."""

    axis: str
    gathered: list[tuple[Any, Any]] = field(default_factory=list)

    def gather(self, x: Any) -> Any:
        for local, whole in self.gathered:
            if local is x:
                return whole
        whole = numerics.all_gather(x, self.axis, axis=x.ndim + SEQ_DIM, tiled=True)
        self.gathered.append((x, whole))
        return whole


_REGION: contextvars.ContextVar[_Region | None] = contextvars.ContextVar(
    "ttjax.ttml.sp region", default=None
)


@contextmanager
def _region(axis: str) -> Iterator[_Region]:
    region = _Region(axis)
    token = _REGION.set(region)
    try:
        yield region
    finally:
        _REGION.reset(token)


def over_blocks(run: Callable[[Any], Any], x: Any, dims: ParallelDims | None = None) -> Any:
    """``run(x)`` (the layer scan) on this device's slice of the sequence of ``x``
    ``[..., seq, embed]`` when the plan splits it (SP), gathered again after; else ``run(x)``.

    The slice's backward all-gathers, the gather's backward keeps this device's slice, so the
    code around the blocks (embedding, final norm, head, loss) is TP's, unchanged.
    """
    axis = sequence_axis(dims)
    if axis is None:
        return run(x)
    n, seq = jax.lax.axis_size(axis), x.shape[SEQ_DIM]
    if seq % n:
        raise ParallelPlanError(
            f"sequence parallelism: the blocks' input of shape {list(x.shape)} has {seq} tokens "
            f"per device, which do not split over the {n} devices of {axis!r}.\nfix: use a "
            f"sequence length that divides by {n}, or set device_config.enable_sp: false."
        )
    with _region(axis):
        y = run(scatter(x, x.ndim + SEQ_DIM, axis))
    return all_gather(y, y.ndim + SEQ_DIM, axis)


def column_input(x: Any, tp: str | None) -> Any:
    """The input of a column-parallel linear: the whole sequence, all-gathered, in the blocks
    under SP (backward: reduce-scatter); elsewhere TP's ``broadcast`` (backward: all-reduce)."""
    region = _REGION.get()
    return broadcast(x, tp) if region is None else region.gather(x)


def _fold(y: Any, n: int) -> Any:
    """``[..., n*t, f]`` -> ``[..., t, n*f]``: a reshape (token ``i*n + r`` goes to row ``i``)."""
    *lead, t, f = y.shape
    return y.reshape(*lead, t // n, n * f)


def _unfold(y: Any, n: int) -> Any:
    """The inverse of :func:`_fold`."""
    *lead, t, f = y.shape
    return y.reshape(*lead, t * n, f // n)


def column_output(y: Any) -> Any:
    """The output of a column-parallel linear ``[..., seq, f]``: in the blocks under SP, the
    whole sequence folded into the slice's shape ``[..., seq / n, n * f]`` (a reshape).

    Why: model code reads the token count from its block's input (``B, T, _ = x.shape``, the
    slice's), then reshapes the linear's output into heads with ``-1``; per-token code (an
    activation, a gate, that reshape) cannot tell the folded sequence from the slice, and the
    two places that mix tokens, :func:`heads` (attention) and :func:`row_input`, unfold it.
    """
    region = _REGION.get()
    return y if region is None else _fold(y, jax.lax.axis_size(region.axis))


def heads(*xs: Any) -> tuple[Any, ...]:
    """Attention's ``q``, ``k``, ``v`` ``[B, T, H, D]``: in the blocks under SP they arrive
    folded (``[B, seq / n, n * H, D]``) and leave whole (``[B, seq, H, D]``); else unchanged."""
    region = _REGION.get()
    if region is None:
        return xs
    n = jax.lax.axis_size(region.axis)
    return tuple(x.reshape(x.shape[0], x.shape[1] * n, x.shape[2] // n, *x.shape[3:]) for x in xs)


def merged(y: Any) -> Any:
    """Attention's output ``[B, seq, H * D]``, folded again in the blocks under SP."""
    return column_output(y)


def row_input(x: Any, tp: str | None, input_is_parallel: bool = True) -> Any:
    """The input of a row-parallel linear, this device's feature slice.

    ``input_is_parallel`` (after a column linear): TP's as it is, unfolded in the blocks under
    SP. A replicated input (TTML's default): TP's ``scatter``; in the blocks under SP the
    slice of the all-gathered sequence (its backward pads the slice with zeros and
    reduce-scatters).
    """
    region = _REGION.get()
    if region is None:
        return x if input_is_parallel else scatter(x, -1, tp)
    n = jax.lax.axis_size(region.axis)
    if input_is_parallel:
        return _unfold(x, n)
    whole = region.gather(x)
    size = whole.shape[-1] // n
    start = jax.lax.axis_index(region.axis) * size
    return jax.lax.dynamic_slice_in_dim(whole, start, size, axis=-1)


def row_output(y: Any, tp: str | None) -> Any:
    """The partial sums of a row-parallel linear: reduce-scattered on the sequence in the blocks
    under SP (backward: all-gather); elsewhere TP's ``all_reduce`` (backward: identity)."""
    region = _REGION.get()
    if region is None:
        return all_reduce(y, tp)
    return numerics.psum_scatter(y, region.axis, scatter_dimension=y.ndim + SEQ_DIM, tiled=True)


def shared(params: Any) -> Any:
    """Weights replicated over tp but used on sequence slices (norms, a row-parallel bias): in
    the blocks under SP each device's gradient covers its own tokens only, so it is summed over
    tp in the backward pass (TP's ``broadcast``); elsewhere ``params`` unchanged."""
    region = _REGION.get()
    if region is None:
        return params
    return jax.tree_util.tree_map(lambda p: broadcast(p, region.axis), params)


def refuse_gathered_output(module: str) -> None:
    """A column-parallel linear that gathers its output makes a whole, replicated activation:
    it has no place between the SP slices. Raise when asked inside the blocks under SP."""
    if _REGION.get() is not None:
        raise ConfigError(
            f"{module}(gather_output=True) inside the blocks under sequence parallelism: its "
            "output would be whole on every device, where the blocks keep sequence slices.\n"
            "fix: keep the output split (gather_output=False) and follow it with a "
            "RowParallelLinear(input_is_parallel=True), or set device_config.enable_sp: false."
        )


__all__ = [
    "SEQ_DIM",
    "check_seq_len",
    "column_input",
    "column_output",
    "heads",
    "merged",
    "over_blocks",
    "refuse_gathered_output",
    "row_input",
    "row_output",
    "sequence_axis",
    "shared",
]
