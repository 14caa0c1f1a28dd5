"""The collectives fused with a matmul: ``all_gather_matmul_async`` (gather, then
``linear``) and ``llama_rs_matmul`` (``linear``, then a llama reduce-scatter; the Galaxy
Llama's decode MLP), built from the all-gather and reduce-scatter families."""

from __future__ import annotations

from typing import Any

from ttjax._src.core.enums import Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ccl_async.all_gather import _all_gather
from ttjax._src.ttnn.ccl_async.checks import _check_common, _write
from ttjax._src.ttnn.ccl_async.reduce_scatter import llama_reduce_scatter
from ttjax._src.ttnn.ccl_async.resolve import _overload, _resolve, _short
from ttjax._src.ttnn.ops.matmul import linear

# ---------------------------------------------------------------------------------------------
# all-gather + matmul
# ---------------------------------------------------------------------------------------------


def _agmm(
    input_tensor,
    weight_tensor,
    persistent_output_buffer,
    dim,
    multi_device_global_semaphore,
    all_gather_core_grid_offset,
    *,
    bias=None,
    num_links=1,
    memory_config_ag=None,
    topology=Topology.Ring,
    barrier_semaphore=None,
    subdevice_id=None,
    memory_config_mm=None,
    transpose_a=False,
    transpose_b=False,
    dtype=None,
    program_config=None,
    activation=None,
    compute_kernel_config=None,
    core_grid=None,
    chunks_per_sync=None,
    num_workers_per_link=None,
    num_buffers_per_channel=None,
): ...


_AGMM = (
    _overload(
        _agmm,
        input_tensor="Tensor",
        weight_tensor="Tensor",
        persistent_output_buffer="Tensor?",
        dim="uint",
        multi_device_global_semaphore="sems",
        all_gather_core_grid_offset="core",
        bias="Tensor?",
        num_links="uint",
        memory_config_ag="mem?",
        topology="topo",
        barrier_semaphore="sem?",
        subdevice_id="subdev?",
        memory_config_mm="mem?",
        transpose_a="bool",
        transpose_b="bool",
        dtype="dtype?",
        chunks_per_sync="uint?",
        num_workers_per_link="uint?",
        num_buffers_per_channel="uint?",
    ),
)


def all_gather_matmul_async(*args: Any, **kwargs: Any) -> list[Tensor]:
    """TT-NN's ``ttnn.experimental.all_gather_matmul_async``: all-gather ``input_tensor`` over the
    whole mesh along ``dim``, then ``linear`` with ``weight_tensor`` on each device.

    Returns ``[all_gather_output, matmul_output]`` as TT-NN does (``_, out = ...`` in model code).
    ``(input_tensor, weight_tensor, persistent_output_buffer, dim, multi_device_global_semaphore,
    all_gather_core_grid_offset, *, bias=None, num_links=1, memory_config_ag=None, topology=Ring,
    barrier_semaphore=None, subdevice_id=None, memory_config_mm=None, transpose_a=False,
    transpose_b=False, dtype=None, program_config=None, activation=None,
    compute_kernel_config=None, core_grid=None, chunks_per_sync=None, num_workers_per_link=None,
    num_buffers_per_channel=None)``
    """
    op = "all_gather_matmul_async"
    _, a = _resolve(op, _AGMM, args, kwargs)
    ag_args = dict(
        input_tensor=a["input_tensor"],
        persistent_output_buffer=a["persistent_output_buffer"],
        dim=a["dim"],
        multi_device_global_semaphore=a["multi_device_global_semaphore"],
        num_links=a["num_links"],
        memory_config=a["memory_config_ag"],
        topology=a["topology"],
        subdevice_id=a["subdevice_id"],
        barrier_semaphore=a["barrier_semaphore"],
    )
    gathered = _all_gather(op, (), ag_args, reverse=False)
    w = a["weight_tensor"]
    if w._mesh is None or not w._mesh.same_mesh(gathered._mesh):
        raise CCLError(
            f"ttnn.experimental.{op}: weight_tensor lives on {w._mesh!r}, not on the input's mesh "
            f"{gathered._mesh!r}.\nfix: put the weight on the input's mesh device."
        )
    out = linear(
        gathered,
        w,
        bias=a["bias"],
        transpose_a=a["transpose_a"],
        transpose_b=a["transpose_b"],
        memory_config=a["memory_config_mm"],
        dtype=a["dtype"],
        program_config=a["program_config"],
        activation=a["activation"],
        compute_kernel_config=a["compute_kernel_config"],
        core_grid=a["core_grid"],
    )
    return [gathered, out]


# ---------------------------------------------------------------------------------------------
# matmul + llama reduce-scatter (the Galaxy Llama's decode MLP)
# ---------------------------------------------------------------------------------------------


def _rs_mm(
    input_tensor,
    weight_tensor,
    intermediate_packet_buffer,
    dim,
    cross_device_semaphore,
    cluster_axis,
    mesh_device,
    num_links,
    subdevice_id,
    *,
    second_weight_tensor=None,
    rs_tensor=None,
    topology=Topology.Linear,
    memory_config_rs=None,
    memory_config_mm=None,
    compute_kernel_config=None,
    global_cb=None,
    core_grid=None,
    transpose_a=False,
    transpose_b=False,
    dtype=None,
    program_config=None,
    activation=None,
    output_tile=None,
    optional_output_tensor=None,
    use_noc1_only=False,
): ...


_RS_MM = (
    _overload(
        _rs_mm,
        input_tensor="Tensor",
        weight_tensor="Tensor",
        intermediate_packet_buffer="Tensor",
        dim="int",
        cross_device_semaphore="sem",
        cluster_axis="uint",
        mesh_device="mesh",
        num_links="uint",
        subdevice_id="subdev",
        second_weight_tensor="Tensor?",
        rs_tensor="Tensor?",
        topology="topo",
        memory_config_rs="mem?",
        memory_config_mm="mem?",
        transpose_a="bool",
        transpose_b="bool",
        dtype="dtype?",
        optional_output_tensor="Tensor?",
        use_noc1_only="bool",
    ),
)


def llama_rs_matmul(*args: Any, **kwargs: Any) -> list[Tensor]:
    """TT-NN's ``ttnn.experimental.llama_rs_matmul``: a matmul fused with a llama reduce-scatter.

    With ``second_weight_tensor`` it returns ``[x @ w, x @ w2, llama_reduce_scatter(x @ w)]``;
    with ``rs_tensor`` ``[x @ w, llama_reduce_scatter(rs_tensor)]`` (exactly one of the two).
    ``(input_tensor, weight_tensor, intermediate_packet_buffer, dim, cross_device_semaphore,
    cluster_axis, mesh_device, num_links, subdevice_id, *, second_weight_tensor=None,
    rs_tensor=None, topology=Linear, memory_config_rs=None, memory_config_mm=None,
    compute_kernel_config=None, global_cb=None, core_grid=None, transpose_a=False,
    transpose_b=False, dtype=None, program_config=None, activation=None, output_tile=None,
    optional_output_tensor=None, use_noc1_only=False)``
    """
    op = "llama_rs_matmul"
    _, a = _resolve(op, _RS_MM, args, kwargs)
    if (a["rs_tensor"] is None) == (a["second_weight_tensor"] is None):
        raise CCLError(
            f"ttnn.experimental.{op}: Exactly one of rs_tensor or second_weight_tensor must have a "
            f"value (rs_tensor={_short(a['rs_tensor'])}, second_weight_tensor="
            f"{_short(a['second_weight_tensor'])}).\nfix: pass second_weight_tensor= for the "
            "w1/w3 form, or rs_tensor= to reduce-scatter another tensor."
        )
    t = _check_common(op, a, "cross_device_semaphore")
    mm = dict(
        transpose_a=a["transpose_a"],
        transpose_b=a["transpose_b"],
        memory_config=a["memory_config_mm"],
        dtype=a["dtype"],
        program_config=a["program_config"],
        activation=a["activation"],
        compute_kernel_config=a["compute_kernel_config"],
        core_grid=a["core_grid"],
    )
    weights = [a["weight_tensor"]]
    if a["second_weight_tensor"] is not None:
        weights.append(a["second_weight_tensor"])
    outs = [linear(t, w, **mm) for w in weights]
    if a["optional_output_tensor"] is not None:
        outs[0] = _write(op, "optional_output_tensor", outs[0], a["optional_output_tensor"], t)
    rs_in = outs[0] if a["rs_tensor"] is None else a["rs_tensor"]
    reduced = llama_reduce_scatter(
        rs_in,
        a["intermediate_packet_buffer"],
        a["dim"] % len(rs_in._shape) if a["dim"] < 0 else a["dim"],
        a["cross_device_semaphore"],
        a["subdevice_id"],
        a["cluster_axis"],
        a["mesh_device"],
        num_links=a["num_links"],
        memory_config=a["memory_config_rs"],
        topology=a["topology"],
        use_noc1_only=a["use_noc1_only"],
    )
    return [*outs, reduced]
