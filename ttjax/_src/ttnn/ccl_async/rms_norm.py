"""``fused_rms_1_1_32_8192``: the Galaxy Llama's fused distributed RMSNorm (TT-NN's
``RMSAllGather``), from the pre/post all-gather norm halves and one all-gather."""

from __future__ import annotations

from typing import Any

from ttjax._src.core.enums import DataType, Layout, Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.hardware import MemoryConfig
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.subdevice import SubDeviceId
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ops.fused import rms_norm_post_all_gather, rms_norm_pre_all_gather
from ttjax._src.ttnn.ops.memory import to_memory_config
from ttjax._src.ttnn.ops.pointwise import add


def fused_rms_1_1_32_8192(
    input_tensor: Tensor,
    program_config: Any,
    cluster_axis: int,
    mesh_device: MeshDevice,
    global_semaphore: Any,
    *,
    persistent_output_tensor: Tensor | None = None,
    num_links: int | None = None,
    topology: Topology = Topology.Linear,
    subdevice_id: SubDeviceId | None = None,
    dtype: DataType | None = None,
    compute_kernel_config: Any = None,
    memory_config: MemoryConfig | None = None,
    residual_input_tensor: Tensor | None = None,
    epsilon: float = 1e-12,
    weight: Tensor | None = None,
    stats: Tensor | None = None,
    use_noc1_only: bool = False,
) -> Tensor:
    """The Galaxy Llama's fused distributed RMSNorm (TT-NN's ``RMSAllGather``,
    ttnn/cpp/ttnn/operations/experimental/ccl/rms_allgather): with ``residual_input_tensor``
    the residual becomes ``input + residual`` in place (its buffer takes the sum, as the kernel
    packs it there); each device's sum of squares of that is all-gathered over ``cluster_axis``
    (into ``stats`` when given), and each device's slice is normalized with the full hidden dim's
    mean and scaled by its ``weight`` slice (required, row-major). Activations are 32 rows."""
    op = "fused_rms_1_1_32_8192"
    shape = tuple(input_tensor._shape)
    if len(shape) != 4 or input_tensor.layout != Layout.TILE:
        raise CCLError(
            f"ttnn.{op}: Input shape must be rank 4 and TILE (got {list(shape)}, "
            f"{input_tensor.layout!r}).\nfix: pass the [1, 1, 32, hidden/devices] activations tilized."
        )
    if shape[-2] != 32:
        raise CCLError(
            f"ttnn.{op}: Only activations with batch size = 32 are supported (per-device shape "
            f"{list(shape)}).\nfix: pad the users to 32 rows."
        )
    if weight is None or weight.layout != Layout.ROW_MAJOR:
        raise CCLError(
            f"ttnn.{op}: RMS all gather requires a weight which is row major.\nfix: pass "
            "weight= (the norm's gamma as [1, 1, W/32, 32] ROW_MAJOR, sharded like the input)."
        )
    x = input_tensor
    if residual_input_tensor is not None:
        res = residual_input_tensor
        if res._shape != input_tensor._shape:
            raise CCLError(
                f"ttnn.{op}: shape is not same! (residual {list(res._shape)} vs input "
                f"{list(shape)}).\nfix: pass a residual shaped like the input."
            )
        if input_tensor.is_sharded() and res.memory_config() != input_tensor.memory_config():
            raise CCLError(
                f"ttnn.{op}: Both a and b should have the same memory config ({res.memory_config()!r}"
                f" vs {input_tensor.memory_config()!r}).\nfix: shard the residual like the input."
            )
        x = res.assign(add(input_tensor, res, dtype=res.dtype))
    partial = rms_norm_pre_all_gather(x, dtype=DataType.BFLOAT16)
    gathered = ccl.all_gather(partial, 3, cluster_axis, mesh_device, topology=topology,
                              subdevice_id=subdevice_id)  # fmt: skip
    if stats is not None:
        gathered = stats.assign(gathered) if stats._shape == gathered._shape else gathered
    out = rms_norm_post_all_gather(x, gathered, epsilon=epsilon, weight=weight, dtype=dtype)
    if memory_config is not None:
        out = to_memory_config(out, memory_config)
    return out
