"""``ttnn.experimental``: TT-NN's experimental ops that model code relies on.

The ``*_async`` collectives take TT-NN's persistent buffers and global semaphores (needed on
hardware to overlap communication); here they are accepted and the result is the same as the
synchronous collective's, written into ``persistent_output_buffer`` when one is given.
"""

from __future__ import annotations

from typing import Any

from ttjax import ccl
from ttjax.enums import ReduceType
from ttjax.ops._common import write_output
from ttjax.ops.fused import (
    fast_reduce_nc,
    nlp_concat_heads,
    nlp_concat_heads_decode,
    nlp_create_qkv_heads,
    nlp_create_qkv_heads_decode,
    rotary_embedding_llama,
)
from ttjax.ops.transformer import paged_fill_cache, paged_update_cache, rotary_embedding
from ttjax.tensor import Tensor


def all_gather_async(
    input_tensor: Tensor,
    persistent_output_buffer: Tensor | None = None,
    dim: int | None = None,
    multi_device_global_semaphore: Any = None,
    num_links: int = 1,
    memory_config: Any = None,
    topology: Any = None,
    subdevice_id: Any = None,
    cluster_axis: int | None = None,
    barrier_semaphore: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Same values as :func:`ttjax.all_gather`."""
    if dim is None:
        raise TypeError("all_gather_async needs dim=")
    return ccl.all_gather(
        input_tensor,
        dim,
        cluster_axis,
        topology=topology,
        output_tensor=persistent_output_buffer,
        **kwargs,
    )


def reduce_scatter_minimal_async(
    input_tensor: Tensor,
    persistent_output_buffers: Any = None,
    dim: int | None = None,
    multi_device_global_semaphore: Any = None,
    num_links: int = 1,
    memory_config: Any = None,
    topology: Any = None,
    subdevice_id: Any = None,
    cluster_axis: int | None = None,
    barrier_semaphore: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Same values as :func:`ttjax.reduce_scatter` (sum)."""
    if dim is None:
        raise TypeError("reduce_scatter_minimal_async needs dim=")
    return ccl.reduce_scatter(
        input_tensor, dim, ReduceType.Sum, cluster_axis=cluster_axis, topology=topology, **kwargs
    )


def all_reduce_async(
    input_tensor: Tensor,
    cluster_axis: int | None = None,
    mesh_device: Any = None,
    *,
    math_op: Any = ReduceType.Sum,
    topology: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Same values as :func:`ttjax.all_reduce`."""
    for k in (
        "from_remote_multi_device_global_semaphore",
        "to_remote_multi_device_global_semaphore",
        "gather_multi_device_global_semaphore",
        "multi_device_global_semaphore",
        "buffer_tensor",
        "num_links",
        "memory_config",
        "subdevice_id",
        "dtype",
    ):
        kwargs.pop(k, None)
    return ccl.all_reduce(
        input_tensor, cluster_axis, mesh_device, math_op=math_op, topology=topology, **kwargs
    )


def all_to_all_async(
    input_tensor: Tensor,
    persistent_intermediate_buffer: Any = None,
    persistent_output_buffer: Tensor | None = None,
    in_dim: int | None = None,
    out_dim: int | None = None,
    multi_device_global_semaphore: Any = None,
    *,
    num_links: int = 1,
    memory_config: Any = None,
    topology: Any = None,
    subdevice_id: Any = None,
    cluster_axis: int | None = None,
) -> Tensor:
    """Same values as :func:`ttjax.all_to_all`."""
    if in_dim is None or out_dim is None:
        raise TypeError("all_to_all_async needs in_dim= and out_dim=")
    out = ccl.all_to_all(
        input_tensor, in_dim, out_dim, cluster_axis=cluster_axis, topology=topology
    )
    if persistent_output_buffer is not None:
        return write_output(out, persistent_output_buffer)
    return out


__all__ = [
    "all_gather_async",
    "all_reduce_async",
    "all_to_all_async",
    "fast_reduce_nc",
    "nlp_concat_heads",
    "nlp_concat_heads_decode",
    "nlp_create_qkv_heads",
    "nlp_create_qkv_heads_decode",
    "paged_fill_cache",
    "paged_update_cache",
    "reduce_scatter_minimal_async",
    "rotary_embedding",
    "rotary_embedding_llama",
]
