"""The reduce-scatters: ``reduce_scatter_minimal_async``, the older
``reduce_scatter_async`` and the Galaxy Llama's ``llama_reduce_scatter``, on
:func:`ttjax.reduce_scatter`'s values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ttjax._src.core.enums import Layout, ReduceType, Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ccl_async.checks import (
    _check_common,
    _check_group,
    _check_semaphores,
    _check_topology,
    _write,
)
from ttjax._src.ttnn.ccl_async.resolve import _overload, _resolve


def _rs_minimal(
    input_tensor,
    persistent_output_buffers=None,
    dim=None,
    multi_device_global_semaphore=None,
    *,
    barrier_semaphore=None,
    num_links=1,
    memory_config=None,
    intermediate_memory_config=None,
    topology=Topology.Ring,
    subdevice_id=None,
    cluster_axis=None,
    chunks_per_sync=None,
    num_workers_per_link=None,
    num_buffers_per_channel=None,
): ...


_RS_MINIMAL = (
    _overload(
        _rs_minimal,
        input_tensor="Tensor",
        persistent_output_buffers="Tensors?",
        dim="int",
        multi_device_global_semaphore="sems",
        barrier_semaphore="sem?",
        num_links="uint",
        memory_config="mem?",
        intermediate_memory_config="mem?",
        topology="topo",
        subdevice_id="subdev?",
        cluster_axis="uint?",
        chunks_per_sync="uint?",
        num_workers_per_link="uint?",
        num_buffers_per_channel="uint?",
    ),
)


def _scatter_dim(op: str, t: Tensor, dim: Any, n: int, allowed: Sequence[int]) -> int:
    d = ccl._dim(op, t, dim)
    if d not in allowed:
        raise CCLError(
            f"ttnn.experimental.{op}: dim={dim}: {op} only supports scattering on dim "
            f"{', '.join(map(str, allowed))} (per-device shape {list(t._shape)}).\n"
            f"fix: scatter along one of dims {list(allowed)}, reshaping first if needed."
        )
    if t._shape[d] % n:
        raise CCLError(
            f"ttnn.experimental.{op}: dim {d} of per-device shape {list(t._shape)} has size "
            f"{t._shape[d]}, which does not split into {n} pieces (one per device of the group).\n"
            f"fix: make dim {d} a multiple of {n}."
        )
    return d


def _composite_scatter(t: Tensor, d: int, n: int) -> bool:
    if t._layout is not Layout.TILE or d not in (1, 2, 3):
        return True
    return d in (2, 3) and (t._shape[d] // n) % 32 != 0


def reduce_scatter_minimal_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.reduce_scatter_minimal_async``: a sum reduce-scatter.

    ``(input_tensor, persistent_output_buffers=None, dim, multi_device_global_semaphore, *,
    barrier_semaphore=None, num_links=1, memory_config=None, intermediate_memory_config=None,
    topology=Ring, subdevice_id=None, cluster_axis=None, chunks_per_sync=None,
    num_workers_per_link=None, num_buffers_per_channel=None)``. The semaphore list holds 3;
    ``persistent_output_buffers`` is ``[intermediate, output]``: the result is written into
    ``output`` and returned.
    """
    op = "reduce_scatter_minimal_async"
    _, a = _resolve(op, _RS_MINIMAL, args, kwargs)
    t = ccl._check_tensor(op, a["input_tensor"])
    n = _check_group(op, t, a["cluster_axis"])
    d = ccl._dim(op, t, a["dim"])
    # TT-NN's composite (all-broadcast, add, mesh_partition; no semaphores) serves an even split
    # of a row-major tensor, of a dim other than 1-3, or with an output not tile-aligned; its
    # native kernel checks dims 1-3, 3 semaphores and Ring/Linear.
    native = not (t._shape[d] % n == 0 and _composite_scatter(t, d, n))
    t = _check_common(op, a, "multi_device_global_semaphore", 3 if native else None)
    if native:
        _check_topology(op, a["topology"])
        _scatter_dim(op, t, d, n, (1, 2, 3))
    bufs = a["persistent_output_buffers"]
    if bufs is not None and len(bufs) != 2:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, Number of output tensors should be 2 but has "
            f"{len(bufs)} (persistent_output_buffers).\nfix: pass [intermediate, output]."
        )
    if bufs is not None:
        inter = bufs[0]
        if inter._mesh is None or not inter._mesh.same_mesh(t._mesh):
            raise CCLError(
                f"ttnn.experimental.{op}: persistent_output_buffers[0] lives on {inter._mesh!r}, "
                f"not on the input's mesh {t._mesh!r}.\nfix: allocate it on the input's mesh."
            )
        if inter._dtype is not t._dtype or inter._layout is not t._layout:
            raise CCLError(
                f"ttnn.experimental.{op}: Error, intermediate tensor dtype/layout should be same as "
                f"input tensor's ({t._dtype!r}, {t._layout!r}) but has ({inter._dtype!r}, "
                f"{inter._layout!r}).\nfix: allocate the intermediate buffer like the input."
            )
    out = ccl.reduce_scatter(
        t,
        d,
        ReduceType.Sum,
        cluster_axis=a["cluster_axis"],
        topology=a["topology"],
        memory_config=a["memory_config"],
    )
    return _write(op, "persistent_output_buffers[1]", out, bufs[1] if bufs else None, t)


def _rs_async_plain(
    input_tensor,
    dim,
    from_remote_multi_device_global_semaphore,
    to_remote_multi_device_global_semaphore,
    math_op,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


def _rs_async_axis(
    input_tensor,
    dim,
    cluster_axis,
    mesh_device,
    from_remote_multi_device_global_semaphore,
    to_remote_multi_device_global_semaphore,
    *,
    persistent_output_tensors=None,
    math_op=ReduceType.Sum,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


_RS_ASYNC_COMMON = dict(
    input_tensor="Tensor",
    dim="int",
    from_remote_multi_device_global_semaphore="sem",
    to_remote_multi_device_global_semaphore="sem",
    math_op="reduce",
    memory_config="mem?",
    topology="topo",
    num_links="uint?",
    subdevice_id="subdev?",
)
_RS_ASYNC = (
    _overload(_rs_async_plain, **_RS_ASYNC_COMMON),
    _overload(
        _rs_async_axis,
        cluster_axis="uint",
        mesh_device="mesh",
        persistent_output_tensors="Tensors?",
        **_RS_ASYNC_COMMON,
    ),
)


def reduce_scatter_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's older ``ttnn.experimental.reduce_scatter_async`` (from/to-remote semaphores).

    1. ``(input_tensor, dim, from_remote_multi_device_global_semaphore,
       to_remote_multi_device_global_semaphore, math_op, *, memory_config=None, topology=Linear,
       num_links=None, subdevice_id=None)``
    2. ``(input_tensor, dim, cluster_axis, mesh_device, from_remote_..., to_remote_..., *,
       persistent_output_tensors=None, math_op=Sum, memory_config=None, topology=Linear,
       num_links=None, subdevice_id=None)``
    """
    op = "reduce_scatter_async"
    _, a = _resolve(op, _RS_ASYNC, args, kwargs)
    t = _check_common(op, a)
    for name in (
        "from_remote_multi_device_global_semaphore",
        "to_remote_multi_device_global_semaphore",
    ):
        _check_semaphores(op, t, name, a[name])
    n = _check_group(op, t, a.get("cluster_axis"))
    d = _scatter_dim(op, t, a["dim"], n, range(len(t._shape)))
    out = ccl.reduce_scatter(
        t,
        d,
        a["math_op"],
        cluster_axis=a.get("cluster_axis"),
        topology=a["topology"],
        memory_config=a["memory_config"],
    )
    bufs = a.get("persistent_output_tensors")
    return _write(op, "persistent_output_tensors[-1]", out, bufs[-1] if bufs else None, t)


def _llama_rs(
    input_tensor,
    intermediate_packet_buffer,
    dim,
    cross_device_semaphore,
    subdevice_id,
    cluster_axis,
    mesh_device,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Linear,
    use_noc1_only=False,
): ...


_LLAMA_RS = (
    _overload(
        _llama_rs,
        input_tensor="Tensor",
        intermediate_packet_buffer="Tensor",
        dim="uint",
        cross_device_semaphore="sem",
        subdevice_id="subdev",
        cluster_axis="uint",
        mesh_device="mesh",
        num_links="uint",
        memory_config="mem?",
        topology="topo",
        use_noc1_only="bool",
    ),
)


def llama_reduce_scatter(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.llama_reduce_scatter``: a sum reduce-scatter along the last dim
    over the 2 or 4 devices of mesh axis 1 (the Galaxy Llama's decode MLP).

    ``(input_tensor, intermediate_packet_buffer, dim, cross_device_semaphore, subdevice_id,
    cluster_axis, mesh_device, *, num_links=1, memory_config=None, topology=Linear,
    use_noc1_only=False)``
    """
    op = "llama_reduce_scatter"
    _, a = _resolve(op, _LLAMA_RS, args, kwargs)
    t = _check_common(op, a, "cross_device_semaphore")
    if a["dim"] != 3:
        raise CCLError(
            f"ttnn.experimental.{op}: dim must be 3, got {a['dim']}.\n"
            "fix: scatter the last dim of a 4-D tensor (dim=3)."
        )
    if a["cluster_axis"] != 1:
        raise CCLError(
            f"ttnn.experimental.{op}: cluster_axis must be 1, got {a['cluster_axis']}.\n"
            "fix: cluster_axis=1."
        )
    n = _check_group(op, t, 1)
    if n not in (2, 4):
        raise CCLError(
            f"ttnn.experimental.{op}: ring_devices must be 4 or 2, got {n} (mesh {t._mesh!r}).\n"
            "fix: run it on a mesh whose axis 1 has 2 or 4 devices."
        )
    d = _scatter_dim(op, t, 3, n, (3,))
    buf = a["intermediate_packet_buffer"]
    if buf._mesh is None or not buf._mesh.same_mesh(t._mesh):
        raise CCLError(
            f"ttnn.experimental.{op}: intermediate_packet_buffer lives on {buf._mesh!r}, not on "
            f"the input's mesh {t._mesh!r}.\nfix: allocate it on the input's mesh device."
        )
    return ccl.reduce_scatter(
        t,
        d,
        ReduceType.Sum,
        cluster_axis=1,
        topology=a["topology"],
        memory_config=a["memory_config"],
    )
