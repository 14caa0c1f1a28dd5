"""``all_reduce_async``: its four TT-NN overloads (semaphore lists, a cluster axis, the
Galaxy Llama's buffer form, the older from/to-remote form) on :func:`ttjax.all_reduce`."""

from __future__ import annotations

from typing import Any

from ttjax._src.core.enums import ReduceType, Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ccl_async.checks import _check_common, _check_group, _check_semaphores
from ttjax._src.ttnn.ccl_async.resolve import _overload, _resolve
from ttjax._src.ttnn.ops.pointwise import typecast


def _ar_devices(
    input_tensor,
    num_devices,
    barrier_semaphores,
    rs_global_semaphores,
    ag_global_semaphores,
    math_op,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


def _ar_axis(
    input_tensor,
    cluster_axis,
    mesh_device,
    barrier_semaphores,
    rs_global_semaphores,
    ag_global_semaphores,
    math_op,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


def _ar_buffer(
    input_tensor,
    buffer_tensor,
    cluster_axis,
    mesh_device,
    multi_device_global_semaphore,
    *,
    dtype=None,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
    use_noc1_only=False,
    use_optimal_ccl_for_llama=False,
): ...


def _ar_remote(
    input_tensor,
    cluster_axis,
    mesh_device,
    from_remote_multi_device_global_semaphore,
    to_remote_multi_device_global_semaphore,
    gather_multi_device_global_semaphore,
    math_op,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


_AR_COMMON = dict(
    input_tensor="Tensor",
    math_op="reduce",
    memory_config="mem?",
    topology="topo",
    num_links="uint?",
    subdevice_id="subdev?",
)
_AR = (
    _overload(
        _ar_devices,
        num_devices="uint",
        barrier_semaphores="sems",
        rs_global_semaphores="sems",
        ag_global_semaphores="sems",
        **_AR_COMMON,
    ),
    _overload(
        _ar_axis,
        cluster_axis="uint?",
        mesh_device="mesh",
        barrier_semaphores="sems?",
        rs_global_semaphores="sems?",
        ag_global_semaphores="sems?",
        **_AR_COMMON,
    ),
    _overload(
        _ar_buffer,
        buffer_tensor="Tensor",
        cluster_axis="uint",
        mesh_device="mesh",
        multi_device_global_semaphore="sem",
        dtype="dtype?",
        use_noc1_only="bool",
        use_optimal_ccl_for_llama="bool",
        **_AR_COMMON,
    ),
    _overload(
        _ar_remote,
        cluster_axis="uint?",
        mesh_device="mesh",
        from_remote_multi_device_global_semaphore="sem",
        to_remote_multi_device_global_semaphore="sem",
        gather_multi_device_global_semaphore="sem",
        **_AR_COMMON,
    ),
)

# Semaphores per list in the composite (reduce_scatter_minimal_async + all_gather_async) path.
_AR_SEM_COUNTS = {"barrier_semaphores": 2, "rs_global_semaphores": 3, "ag_global_semaphores": 2}


def all_reduce_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.all_reduce_async``: the values of :func:`ttjax.all_reduce`.

    1. ``(input_tensor, num_devices, barrier_semaphores, rs_global_semaphores,
       ag_global_semaphores, math_op, *, memory_config=None, topology=Linear, num_links=None,
       subdevice_id=None)`` over the whole mesh (``num_devices`` must be its size)
    2. ``(input_tensor, cluster_axis, mesh_device, barrier_semaphores, rs_global_semaphores,
       ag_global_semaphores, math_op, *, ...)``
    3. ``(input_tensor, buffer_tensor, cluster_axis, mesh_device, multi_device_global_semaphore, *,
       dtype=None, memory_config=None, topology=Linear, num_links=None, subdevice_id=None,
       use_noc1_only=False, use_optimal_ccl_for_llama=False)`` (the Galaxy Llama's sum)
    4. the older ``(input_tensor, cluster_axis, mesh_device, from_remote_..., to_remote_...,
       gather_multi_device_global_semaphore, math_op, *, ...)`` that SD3.5's VAE still passes
    """
    op = "all_reduce_async"
    which, a = _resolve(op, _AR, args, kwargs)
    t = _check_common(op, a)
    if which in (0, 1):
        for name, count in _AR_SEM_COUNTS.items():
            _check_semaphores(op, t, name, a[name], count)
    elif which == 2:
        _check_semaphores(
            op, t, "multi_device_global_semaphore", a["multi_device_global_semaphore"]
        )
    else:
        for name in (
            "from_remote_multi_device_global_semaphore",
            "to_remote_multi_device_global_semaphore",
            "gather_multi_device_global_semaphore",
        ):
            _check_semaphores(op, t, name, a[name])
    axis = a.get("cluster_axis")
    n = _check_group(op, t, axis)
    if which == 0 and a["num_devices"] != n:
        raise CCLError(
            f"ttnn.experimental.{op}: num_devices={a['num_devices']} but the tensor's mesh "
            f"{t._mesh!r} has {n} devices.\nfix: num_devices={n}, or use the cluster_axis form."
        )
    math_op = a.get("math_op", ReduceType.Sum)
    out = ccl.all_reduce(
        t, axis, math_op=math_op, topology=a["topology"], memory_config=a["memory_config"]
    )
    if which == 2:
        buf = a["buffer_tensor"]
        if buf._mesh is None or not buf._mesh.same_mesh(t._mesh):
            raise CCLError(
                f"ttnn.experimental.{op}: buffer_tensor lives on {buf._mesh!r}, not on the "
                f"input's mesh {t._mesh!r}.\nfix: allocate it on the input's mesh device."
            )
        if a["dtype"] is not None and a["dtype"] is not out._dtype:
            out = typecast(out, a["dtype"])
    return out
