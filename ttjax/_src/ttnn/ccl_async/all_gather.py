"""``all_gather_async`` and ``all_gather_async_reversed``: TT-NN's persistent-buffer
all-gathers, with its three overloads, on :func:`ttjax.all_gather`'s values."""

from __future__ import annotations

from typing import Any

from ttjax._src.core.enums import Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ccl_async.checks import (
    _check_common,
    _check_group,
    _check_link_rows,
    _padded_or_row_major,
    _write,
)
from ttjax._src.ttnn.ccl_async.resolve import GlobalSemaphoreArg, _overload, _resolve
from ttjax._src.ttnn.ops.data_movement import concat, slice as slice_op


def _rank3(op: str, t: Tensor) -> None:
    if len(t._shape) <= 2:
        raise CCLError(
            f"ttnn.experimental.{op}: AllGatherAsync requires tensor of rank 3 or greater, got "
            f"per-device shape {list(t._shape)}.\nfix: reshape to 4-D, e.g. [1, 1, H, W]."
        )


def _ag_plain(
    input_tensor,
    dim,
    multi_device_global_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Ring,
    subdevice_id=None,
    use_optimal_ccl_for_llama=False,
    barrier_semaphore=None,
): ...


def _ag_persistent(
    input_tensor,
    persistent_output_buffer,
    dim,
    multi_device_global_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Ring,
    subdevice_id=None,
    cluster_axis=None,
    use_optimal_ccl_for_llama=False,
    barrier_semaphore=None,
    chunks_per_sync=None,
    num_workers_per_link=None,
    num_buffers_per_channel=None,
): ...


def _ag_axis(
    input_tensor,
    dim,
    cluster_axis,
    mesh_device,
    topology,
    multi_device_global_semaphore,
    *,
    persistent_output_tensor=None,
    num_links=None,
    memory_config=None,
    subdevice_id=None,
    use_optimal_ccl_for_llama=False,
    barrier_semaphore=None,
): ...


_AG_COMMON = dict(
    input_tensor="Tensor",
    dim="int",
    multi_device_global_semaphore="sem|sems",
    num_links="uint?",
    memory_config="mem?",
    topology="topo",
    subdevice_id="subdev?",
    use_optimal_ccl_for_llama="bool",
    barrier_semaphore="sem?",
    chunks_per_sync="uint?",
    num_workers_per_link="uint?",
    num_buffers_per_channel="uint?",
)
_AG_OVERLOADS = (
    _overload(_ag_plain, **_AG_COMMON),
    _overload(
        _ag_persistent, persistent_output_buffer="Tensor?", cluster_axis="uint?", **_AG_COMMON
    ),
    _overload(
        _ag_axis,
        cluster_axis="uint",
        mesh_device="mesh",
        persistent_output_tensor="Tensor?",
        **_AG_COMMON,
    ),
)


def _all_gather(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], reverse: bool) -> Tensor:
    which, a = _resolve(op, _AG_OVERLOADS, args, kwargs)
    if isinstance(a["multi_device_global_semaphore"], GlobalSemaphoreArg):
        a["multi_device_global_semaphore"] = a["multi_device_global_semaphore"].get()
    t = ccl._check_tensor(op, a["input_tensor"])
    d = ccl._dim(op, t, a["dim"])
    # TT-NN runs a composite (all-broadcast + concat, no semaphores) for row-major tensors and
    # tiles padded on the gather dim; its native kernel needs two semaphores ("Default
    # implementation requires 2 semaphores"), or one for its llama-sharded variant (sharded
    # output, memory_config.value_or(input's)).
    mc = a["memory_config"]
    llama = (mc if mc is not None else t.memory_config()).is_sharded()
    native = llama or not _padded_or_row_major(t, d)
    count = 2 if native and not llama and not a["use_optimal_ccl_for_llama"] else None
    t = _check_common(op, a, "multi_device_global_semaphore", count)
    if native:
        _check_link_rows(op, t, a["num_links"])
        _rank3(op, t)
    axis = a.get("cluster_axis")
    n = _check_group(op, t, axis)
    out = ccl.all_gather(t, d, axis, topology=a["topology"], memory_config=mc)
    if reverse:
        out = _reverse_chunks(out, d, n, mc)
    buf = a.get("persistent_output_buffer", a.get("persistent_output_tensor"))
    name = "persistent_output_buffer" if which == 1 else "persistent_output_tensor"
    return _write(op, name, out, buf, t)


def _reverse_chunks(t: Tensor, dim: int, n: int, memory_config: Any) -> Tensor:
    """The gathered pieces in reverse device order (all_gather_async_reversed)."""
    size = t._shape[dim] // n
    pieces = []
    for i in reversed(range(n)):
        start = [0] * len(t._shape)
        end = list(t._shape)
        start[dim], end[dim] = i * size, (i + 1) * size
        pieces.append(slice_op(t, start, end))
    return concat(pieces, dim, memory_config=memory_config)


def all_gather_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.all_gather_async``: the values of :func:`ttjax.all_gather`.

    Overloads, as bound by TT-NN (the first that fits wins):

    1. ``(input_tensor, dim, multi_device_global_semaphore, *, num_links=1, memory_config=None,
       topology=Ring, subdevice_id=None, use_optimal_ccl_for_llama=False, barrier_semaphore=None)``
    2. ``(input_tensor, persistent_output_buffer, dim, multi_device_global_semaphore, *, ...,
       cluster_axis=None, ..., chunks_per_sync=None, num_workers_per_link=None,
       num_buffers_per_channel=None)`` (tt_transformers' form)
    3. ``(input_tensor, dim, cluster_axis, mesh_device, topology, multi_device_global_semaphore, *,
       persistent_output_tensor=None, num_links=None, memory_config=None, subdevice_id=None,
       use_optimal_ccl_for_llama=False, barrier_semaphore=None)`` (the Galaxy Llama's form)

    ``multi_device_global_semaphore`` is a list of 2; TT-NN's llama-sharded kernel (a sharded output
    memory config, or ``use_optimal_ccl_for_llama=True``) takes one.
    """
    return _all_gather("all_gather_async", args, kwargs, reverse=False)


def all_gather_async_reversed(*args: Any, **kwargs: Any) -> Tensor:
    """``all_gather_async`` with the gathered pieces in reverse device order (same overloads)."""
    return _all_gather("all_gather_async_reversed", args, kwargs, reverse=True)
