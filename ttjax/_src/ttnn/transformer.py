"""``ttnn.transformer``: attention (prefill, decode, paged decode, chunked prefill, joint and
ring-joint), ``attention_softmax`` and head-reshaping ops, per device.

The implementation of :mod:`ttjax.transformer`, whose docstring says more.
"""

from __future__ import annotations

from typing import Any

from ttjax._src.core.errors import ShapeMismatchError
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ccl import all_gather
from ttjax._src.ttnn.ops.attention import (
    attention_softmax,
    attention_softmax_,
    check_joint_inputs,
    joint_attention,
    joint_scaled_dot_product_attention,
)
from ttjax._src.ttnn.ops.common import write_output
from ttjax._src.ttnn.ops.transformer import (
    chunked_scaled_dot_product_attention,
    concat_heads,
    concatenate_heads,
    flash_mla_prefill,
    flash_multi_latent_attention_decode,
    paged_flash_multi_latent_attention_decode,
    paged_scaled_dot_product_attention_decode,
    scaled_dot_product_attention,
    scaled_dot_product_attention_decode,
    split_heads,
    split_query_key_value_and_split_heads,
    windowed_scaled_dot_product_attention,
)


def ring_joint_scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    joint_tensor_q: Tensor,
    joint_tensor_k: Tensor,
    joint_tensor_v: Tensor,
    *,
    persistent_output_buffer_k: Tensor,
    persistent_output_buffer_v: Tensor,
    joint_strategy: str,
    logical_n: int,
    program_config: Any,
    scale: float | None = None,
    compute_kernel_config: Any = None,
    dim: int,
    multi_device_global_semaphore: Any,
    num_links: int,
    cluster_axis: int,
    mesh_device: Any,
    topology: Any,
    subdevice_id: Any = None,
    ccl_core_grid_offset: Any,
) -> tuple[Tensor, Tensor, Tensor]:
    """Joint attention whose spatial q/k/v [b, nh, N/ring, dh] are sequence-sharded over the
    ring (``cluster_axis``): K and V are all-gathered on ``dim`` into the persistent buffers
    ([b, nh, N, dh]), keys past ``logical_n`` (padding) are masked, and each device attends its
    queries and the joint ones [b, nh, L, dh] over all keys. Returns ``(out [b, nh, N/ring, dh],
    joint_out [b, nh, L, dh], lse [b, nh, N/ring + L, 1])`` (ring_joint_sdpa_op.cpp)."""
    op = "ring_joint_scaled_dot_product_attention"
    grid = getattr(program_config, "compute_with_storage_grid_size", None)
    offset_y = getattr(ccl_core_grid_offset, "y", None)
    if program_config is None:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: Program config must be provided.\nfix: pass "
            "program_config=ttnn.SDPAProgramConfig(compute_with_storage_grid_size=..., ...)."
        )
    if grid is not None and offset_y is not None and offset_y < grid.y:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: SDPA coregrid overlaps with AllGather coregrid "
            f"(ccl_core_grid_offset.y={offset_y} < the SDPA grid's {grid.y} rows).\nfix: place "
            "the all-gather cores below the SDPA grid (ccl_core_grid_offset.y >= grid y)."
        )
    k_all = all_gather(
        input_tensor_k, dim, cluster_axis, mesh_device, num_links=num_links, topology=topology,
        subdevice_id=subdevice_id,
    )  # fmt: skip
    v_all = all_gather(
        input_tensor_v, dim, cluster_axis, mesh_device, num_links=num_links, topology=topology,
        subdevice_id=subdevice_id,
    )  # fmt: skip
    k_all = write_output(k_all, persistent_output_buffer_k)
    v_all = write_output(v_all, persistent_output_buffer_v)
    tensors = [input_tensor_q, k_all, v_all, joint_tensor_q, joint_tensor_k, joint_tensor_v]
    check_joint_inputs(op, tensors, joint_strategy, None)
    n_local, n_global = input_tensor_q._shape[2], k_all._shape[2]
    ring = n_global // max(input_tensor_k._shape[2], 1)
    if n_local * ring != n_global or not 0 < int(logical_n) <= n_global:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: Q's local sequence {n_local} times the ring size {ring} must "
            f"be the gathered sequence {n_global}, and logical_n={logical_n} at most that.\nfix: "
            "shard q, k and v alike on the sequence dim and pass the unpadded N as logical_n."
        )
    out, joint, lse = joint_attention(op, tensors, scale, int(logical_n), with_lse=True)
    return out, joint, lse


__all__ = [
    "attention_softmax",
    "attention_softmax_",
    "chunked_scaled_dot_product_attention",
    "concat_heads",
    "concatenate_heads",
    "flash_mla_prefill",
    "flash_multi_latent_attention_decode",
    "joint_scaled_dot_product_attention",
    "paged_flash_multi_latent_attention_decode",
    "paged_scaled_dot_product_attention_decode",
    "ring_joint_scaled_dot_product_attention",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_decode",
    "split_heads",
    "split_query_key_value_and_split_heads",
    "windowed_scaled_dot_product_attention",
]
