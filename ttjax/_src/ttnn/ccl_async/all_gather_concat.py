"""``all_gather_concat``: the Galaxy attention's all-gather of each device's users fused
with the head concat (TT-NN's ``AllGatherConcat``), with that kernel's shape rules."""

from __future__ import annotations

from typing import Any

from ttjax._src.core.enums import Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.hardware import MemoryConfig, TensorMemoryLayout
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.subdevice import SubDeviceId
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ops.common import core_set
from ttjax._src.ttnn.ops.fused import nlp_concat_heads_decode

_ALL_GATHER_CONCAT_CORES = {(x, y) for x in (1, 2, 3) for y in (0, 1)} | {(1, 2), (2, 2)}


def all_gather_concat(
    input_tensor: Tensor,
    buffer_tensor: Tensor,
    dim: int,
    *,
    cluster_axis: int,
    mesh_device: MeshDevice,
    multi_device_global_semaphore: Any,
    num_heads: int,
    memory_config: MemoryConfig,
    use_noc1_only: bool = False,
    num_links: int | None = 1,
    topology: Topology = Topology.Linear,
    subdevice_id: SubDeviceId | None = None,
) -> Tensor:
    """The Galaxy attention's all-gather of each device's users then head concat (TT-NN's
    ``AllGatherConcat``): [1, 8, heads, 128] per device is gathered on ``dim`` over
    ``cluster_axis`` and becomes [1, 1, 32, num_heads * 128] (users padded to 32), as
    ``nlp_concat_heads_decode`` lays heads out. TT-NN's kernel takes only that Llama-70B shape,
    height-sharded on its cores (all_gather_concat_op.cpp); the same rules are checked here."""
    op = "all_gather_concat"
    shape = tuple(input_tensor._shape)
    mc = input_tensor.memory_config()
    if mc.memory_layout is not TensorMemoryLayout.HEIGHT_SHARDED:
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported memory layout {mc.memory_layout!r}.\nfix: "
            "height-shard the attention output (the model's SDPA decode output config)."
        )
    if len(shape) != 4 or shape[0] != 1 or shape[1] != 8 or shape[3] != 128:
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported input shape {list(shape)}, should be "
            "[1, 8, 32, 128] or [1, 8, 8, 128]!\nfix: this fused op serves Llama-70B's decode "
            "heads only; use all_gather then nlp_concat_heads_decode for other shapes."
        )
    grid = mc.shard_spec.grid if mc.shard_spec is not None else None
    if grid is None or core_set(grid) != _ALL_GATHER_CONCAT_CORES:
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported input core ranges {grid!r}; TT-NN's kernel reads "
            "the heads from cores (1, 0)-(3, 1) and (1, 2)-(2, 2).\nfix: shard the input on those "
            "8 cores (the Galaxy model's SDPA decode output config)."
        )
    if not num_links or num_links <= 0:
        raise CCLError(
            f"ttnn.experimental.{op}: num_links should be more than 0 but has {num_links}.\n"
            "fix: pass num_links=1."
        )
    gathered = ccl.all_gather(input_tensor, dim, cluster_axis, mesh_device, topology=topology,
                              subdevice_id=subdevice_id)  # fmt: skip
    return nlp_concat_heads_decode(gathered, num_heads=num_heads, memory_config=memory_config)
