"""Halo exchange and slice-reshard for tt_dit's spatially parallel VAE:
``neighbor_pad_async`` pads each device's slice with its neighbours' edge rows, and
``slice_reshard_async`` trims the padding and reshards the slice evenly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import Layout, Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ccl_async.checks import _check_common, _check_group
from ttjax._src.ttnn.ccl_async.resolve import _overload, _resolve
from ttjax._src.ttnn.ops.data_movement import slice as slice_op


def _neighbor_pad(
    input_tensor,
    dim,
    padding_left,
    padding_right,
    padding_mode,
    cluster_axis,
    final_semaphore,
    barrier_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Linear,
    secondary_cluster_axis=None,
    secondary_mesh_shape=None,
): ...


_NEIGHBOR_PAD = (
    _overload(
        _neighbor_pad,
        input_tensor="Tensor",
        dim="uint",
        padding_left="uint",
        padding_right="uint",
        padding_mode="str",
        cluster_axis="uint",
        final_semaphore="sem",
        barrier_semaphore="sem?",
        num_links="uint",
        memory_config="mem?",
        topology="topo",
        secondary_cluster_axis="uint?",
        secondary_mesh_shape="shape2?",
    ),
)


def _row_major(op: str, t: Tensor) -> None:
    if t._layout is not Layout.ROW_MAJOR:
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported input tensor layout {t._layout!r}.\n"
            "fix: ttnn.to_layout(x, ttnn.ROW_MAJOR_LAYOUT) first."
        )


def _cluster_axis_01(op: str, name: str, axis: Any) -> None:
    if axis not in (0, 1):
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported {name.replace('_', ' ')} {axis}.\n"
            f"fix: {name}=0 or {name}=1."
        )


def _line_neighbors(
    n: int, secondary_axis: int | None, secondary_shape: Sequence[int] | None
) -> tuple[list[int | None], list[int | None]]:
    """For each position on the line, the positions of its backward and forward neighbours.

    With a secondary axis the line of ``n`` devices is a row-major ``secondary_shape`` grid and
    neighbours are one step along ``secondary_axis`` of that grid (TT-NN's 2-D halo)."""
    back: list[int | None] = []
    fwd: list[int | None] = []
    for k in range(n):
        if secondary_axis is None or secondary_shape is None:
            b, f, step = k > 0, k < n - 1, 1
        else:
            rows, cols = secondary_shape
            r, c = divmod(k, cols)
            if secondary_axis == 1:
                b, f, step = c > 0, c < cols - 1, 1
            else:
                b, f, step = r > 0, r < rows - 1, cols
        back.append(k - step if b else None)
        fwd.append(k + step if f else None)
    return back, fwd


def neighbor_pad_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.neighbor_pad_async``: pad each device's tensor along ``dim``
    with its neighbours' edge rows along ``cluster_axis`` (a halo); the ends of the line get zeros
    or their own edge row repeated (``padding_mode`` ``"zeros"`` / ``"replicate"``).

    ``(input_tensor, dim, padding_left, padding_right, padding_mode, cluster_axis,
    final_semaphore, barrier_semaphore, *, num_links=1, memory_config=None, topology=Linear,
    secondary_cluster_axis=None, secondary_mesh_shape=None)``
    """
    op = "neighbor_pad_async"
    _, a = _resolve(op, _NEIGHBOR_PAD, args, kwargs)
    t = _check_common(op, a, "final_semaphore")
    _row_major(op, t)
    d, left, right, mode = (
        int(a["dim"]),
        int(a["padding_left"]),
        int(a["padding_right"]),
        a["padding_mode"],
    )
    if d >= 3 or d >= len(t._shape) - 1:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, neighbor pad currently only supports padding non last "
            f"dim, provided {d} (per-device shape {list(t._shape)}).\nfix: a dim < 3 that is not the last."
        )
    if mode not in ("zeros", "replicate"):
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported padding mode {mode!r}.\n"
            "fix: padding_mode='zeros' or 'replicate'."
        )
    if left > t._shape[d] or right > t._shape[d]:
        raise CCLError(
            f"ttnn.experimental.{op}: One of the padding values {left} or {right} exceeds the shape "
            f"of the input tensor in that dim {t._shape[d]}.\nfix: pad by at most {t._shape[d]}."
        )
    _cluster_axis_01(op, "cluster_axis", a["cluster_axis"])
    axis = int(a["cluster_axis"])
    n = _check_group(op, t, axis)
    sec_axis, sec_shape = a["secondary_cluster_axis"], a["secondary_mesh_shape"]
    if sec_axis is not None:
        _cluster_axis_01(op, "secondary_cluster_axis", sec_axis)
        if sec_shape is None:
            raise CCLError(
                f"ttnn.experimental.{op}: If secondary cluster axis is specified, need to have a "
                "secondary mesh shape.\nfix: pass secondary_mesh_shape=(rows, cols)."
            )
        if n % sec_shape[0] or n % sec_shape[1] or sec_shape[0] * sec_shape[1] != n:
            raise CCLError(
                f"ttnn.experimental.{op}: Secondary mesh shape ({sec_shape[0]},{sec_shape[1]}) is "
                f"not valid given main cluster axis device count {n}.\n"
                f"fix: rows * cols == {n}."
            )
    c = ccl._prepare(op, t, {}, axis, topology=a["topology"])
    back, fwd = _line_neighbors(n, sec_axis, tuple(sec_shape) if sec_shape else None)
    to_fwd = [(k, f) for k, f in enumerate(fwd) if f is not None]  # my last rows -> next's left
    to_back = [(k, b) for k, b in enumerate(back) if b is not None]
    first = np.array([b is None for b in back])
    last = np.array([f is None for f in fwd])
    names, size = c.names, t._shape[d]

    def fn(x: Any) -> Any:
        idx = lax.axis_index(names)
        pieces = []
        if left:
            recv = lax.ppermute(lax.slice_in_dim(x, size - left, size, axis=d), names, to_fwd)
            if mode == "replicate":
                edge = jnp.repeat(lax.slice_in_dim(x, 0, 1, axis=d), left, axis=d)
                recv = jnp.where(jnp.asarray(first)[idx], edge, recv)
            pieces.append(recv)
        pieces.append(x)
        if right:
            recv = lax.ppermute(lax.slice_in_dim(x, 0, right, axis=d), names, to_back)
            if mode == "replicate":
                edge = jnp.repeat(lax.slice_in_dim(x, size - 1, size, axis=d), right, axis=d)
                recv = jnp.where(jnp.asarray(last)[idx], edge, recv)
            pieces.append(recv)
        return jnp.concatenate(pieces, axis=d)

    static = (d, left, right, mode, c.axes, tuple(to_fwd), tuple(to_back))
    return run_op(
        op,
        fn,
        [t],
        static=static,
        placement_rule=ccl._rule(c.axes, None),
        memory_config=a["memory_config"],
    )


def _slice_reshard(
    input_tensor,
    dim,
    output_dim_offset,
    output_dim_shape,
    cluster_axis,
    final_semaphore,
    barrier_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Linear,
): ...


_SLICE_RESHARD = (
    _overload(
        _slice_reshard,
        input_tensor="Tensor",
        dim="uint",
        output_dim_offset="uint",
        output_dim_shape="uint",
        cluster_axis="uint",
        final_semaphore="sem",
        barrier_semaphore="sem?",
        num_links="uint",
        memory_config="mem?",
        topology="topo",
    ),
)


def slice_reshard_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.slice_reshard_async``: slice ``[output_dim_offset,
    output_dim_offset + output_dim_shape)`` of the tensor the devices of ``cluster_axis`` hold
    together along ``dim``, and reshard that slice evenly over them (trims a VAE's padding).

    ``(input_tensor, dim, output_dim_offset, output_dim_shape, cluster_axis, final_semaphore,
    barrier_semaphore, *, num_links=1, memory_config=None, topology=Linear)``
    """
    op = "slice_reshard_async"
    _, a = _resolve(op, _SLICE_RESHARD, args, kwargs)
    t = _check_common(op, a, "final_semaphore")
    if a["dim"] != 0:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, neighbor pad currently only supports sharding dim 0, "
            f"provided {a['dim']}.\nfix: move the sharded dim to 0 first."
        )
    _row_major(op, t)
    _cluster_axis_01(op, "cluster_axis", a["cluster_axis"])
    axis = int(a["cluster_axis"])
    n = _check_group(op, t, axis)
    offset, length = int(a["output_dim_offset"]), int(a["output_dim_shape"])
    if length % n:
        raise CCLError(
            f"ttnn.experimental.{op}: Output dim shape must be divisible by num devices on cluster "
            f"axis: output_dim_shape={length}, {n} devices.\nfix: a multiple of {n}."
        )
    total = t._shape[0] * n
    if offset + length > total:
        raise CCLError(
            f"ttnn.experimental.{op}: output_dim_offset + output_dim_shape = {offset + length} "
            f"exceeds the {total} rows the {n} devices hold together.\n"
            f"fix: keep the slice within [0, {total})."
        )
    whole = ccl.all_gather(t, 0, axis, topology=a["topology"])
    end = list(whole._shape)
    start = [0] * len(end)
    start[0], end[0] = offset, offset + length
    return ccl.mesh_partition(
        slice_op(whole, start, end), 0, axis, memory_config=a["memory_config"]
    )
