"""``ttnn.transformer``: attention (prefill, decode, paged decode, chunked prefill, joint and
ring-joint), ``attention_softmax`` and head-reshaping ops, per device.

The implementation of :mod:`ttjax.transformer`, whose docstring says more.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import DataType, Layout
from ttjax._src.core.errors import LayoutError, ShapeMismatchError, UnsupportedDTypeError
from ttjax._src.core.hardware import BufferType
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ccl import _rule, all_gather
from ttjax._src.ttnn.ops.attention import (
    attention_softmax,
    attention_softmax_,
    check_joint_inputs,
    joint_attention,
    joint_scaled_dot_product_attention,
)
from ttjax._src.ttnn.ops.common import write_output
from ttjax._src.ttnn.ops.transformer import (
    _attend,
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


def _ring_fail(msg: str, fix: str, cls: type[Exception] = ShapeMismatchError) -> Exception:
    return cls(
        f"ttnn.transformer.ring_distributed_scaled_dot_product_attention: {msg}.\nfix: {fix}"
    )


def _ring_checks(q: Tensor, k: Tensor, v: Tensor, ring: int, ring_id: int | None, cfg: Any) -> None:
    """``RingDistributedScaledDotProductAttention::validate`` (ring_distributed_sdpa_op.cpp)."""
    if not 0 < ring <= 32:
        raise _ring_fail(f"ring_size must be in 1..32, got {ring}", "ring_size=4 on a Galaxy row.")
    if ring_id is not None and not 0 <= ring_id < ring:
        raise _ring_fail(f"ring_id must be less than ring_size, got ring_id={ring_id}, "
                         f"ring_size={ring}", "pass 0 <= ring_id < ring_size, or None.")  # fmt: skip
    if ring % 2:
        raise _ring_fail(f"ring_size must be even for balanced distribution, got {ring}",
                         "use an even ring_size.")  # fmt: skip
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t._dtype is not q._dtype:
            raise _ring_fail(f"All tensors must have the same dtype. Expected {q._dtype!r}, got "
                             f"{t._dtype!r} ({name})", "typecast q, k and v to one dtype.",
                             UnsupportedDTypeError)  # fmt: skip
        if t._layout is not Layout.TILE:
            raise _ring_fail(f"Inputs to ring-distributed SDPA must be tilized ({name} is "
                             f"{t._layout!r})", "ttnn.to_layout(x, ttnn.TILE_LAYOUT).",
                             LayoutError)  # fmt: skip
        if t._dtype not in (DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.BFLOAT4_B):
            raise _ring_fail(f"Inputs to ring-distributed SDPA must be BF16, BF8, or BF4 ({name} is "
                             f"{t._dtype!r})", "typecast to bfloat16 or bfloat8_b.",
                             UnsupportedDTypeError)  # fmt: skip
        if t.memory_config().buffer_type is not BufferType.DRAM:
            raise _ring_fail(f"Operands to ring-distributed SDPA need to be in DRAM ({name}: "
                             f"{t.memory_config()!r})", "ttnn.to_memory_config(x, "
                             "ttnn.DRAM_MEMORY_CONFIG).")  # fmt: skip
        if len(t._shape) != 4:
            raise _ring_fail(f"{name} must be 4-D [b, heads, s, dh], got {list(t._shape)}",
                             "pass [batch, heads, seq, head_dim] tensors.")  # fmt: skip
    (b, nqh, sq, dh), (_, nkv, sk, _) = q._shape, k._shape
    if sq != sk:
        raise _ring_fail(f"Ring-distributed SDPA is causal and requires Q and K to have the same "
                         f"sequence length. Got Q: {sq}, K: {sk}", "pass the whole prompt's q, k "
                         "and v.")  # fmt: skip
    if k._shape[0] != b or v._shape[0] != b:
        raise _ring_fail(f"Batch sizes must match. Got Q: {b}, K: {k._shape[0]}, V: {v._shape[0]}",
                         "give q, k and v one batch.")  # fmt: skip
    if v._shape[1] != nkv or v._shape[2] != sk:
        raise _ring_fail(f"K and V must have the same heads and sequence length. Got K: "
                         f"{list(k._shape)}, V: {list(v._shape)}", "shape k and v alike.")  # fmt: skip
    if k._shape[3] != dh or v._shape[3] != dh:
        raise _ring_fail(f"Head dimensions must match. Got Q: {dh}, K: {k._shape[3]}, V: "
                         f"{v._shape[3]}", "use one head_dim.")  # fmt: skip
    if nkv == 0 or nqh < nkv or nqh % nkv:
        raise _ring_fail(f"Q num_heads must be >= K num_heads and divisible by K num_heads. Got "
                         f"Q: {nqh}, K: {nkv}", "split q and kv heads alike.")  # fmt: skip
    if sq // 32 < 2 * ring or sq % (2 * ring):
        raise _ring_fail(f"Sequence length tiles must be at least 2*ring_size and the sequence a "
                         f"multiple of 2*ring_size. Got seq_len: {sq}, ring_size: {ring}",
                         f"pad the sequence to a multiple of {64 * ring}.")  # fmt: skip
    q_chunk = int(getattr(cfg, "q_chunk_size", 32) if cfg is not None else 32)
    k_chunk = int(getattr(cfg, "k_chunk_size", 32) if cfg is not None else 32)
    if q_chunk % 32 or k_chunk % 32:
        raise _ring_fail(f"q_chunk_size {q_chunk} and k_chunk_size {k_chunk} must be divisible "
                         "by TILE_WIDTH 32", "use multiples of 32.")  # fmt: skip
    if not q_chunk < sq // ring:
        raise _ring_fail(f"q_chunk_size must be less than sequence length divided by ring size. "
                         f"Got q_chunk_size: {q_chunk}, sequence length: {sq}, ring size: {ring}",
                         "use a smaller q_chunk_size.")  # fmt: skip


def ring_distributed_scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    ring_size: int,
    ring_id: int | None = None,
    *,
    scale: float | None = None,
    memory_config: Any = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """Causal prefill split over a ring: the sequence S of q/k/v [b, nh, S, dh] is cut into
    2 * ring_size chunks and the device at ring position r attends the queries of chunks r and
    2 * ring_size - 1 - r (over all keys, causally), returning them one after the other:
    [b, nh, S / ring_size, dh]. r is ``ring_id``, else the device's index on the mesh axis of
    ``ring_size`` devices (axis 0 first). TT-NN: transformer/sdpa/device/ring_distributed_sdpa_op.cpp
    and ring_distributed_sdpa_program_factory.cpp (chunk_1 = ring_id, chunk_2 = 2R - ring_id - 1).
    """
    q, k, v = input_tensor_q, input_tensor_k, input_tensor_v
    ring = int(ring_size)
    rid = None if ring_id is None else int(ring_id)
    _ring_checks(q, k, v, ring, rid, program_config)
    mesh: Any = q._mesh
    axes: tuple[int, ...] = ()
    if rid is None:
        shape = tuple(mesh.shape)
        if len(shape) == 2 and shape[0] == ring:
            axes = (0,)
        elif len(shape) == 2 and shape[1] == ring:
            axes = (1,)
        else:
            raise _ring_fail(f"Ring size {ring} doesn't match mesh dimensions {list(shape)}",
                             "pass ring_size equal to a mesh dimension, or ring_id.")  # fmt: skip
    names = tuple(mesh.axis_names[a] for a in axes)
    sc = float(scale) if scale is not None else 1.0 / float(q._shape[-1]) ** 0.5
    chunk = q._shape[2] // (2 * ring)

    def fn(qa: Any, ka: Any, va: Any) -> Any:
        r: Any = lax.axis_index(names) if names else rid
        starts = (r * chunk, (2 * ring - 1 - r) * chunk)
        outs = []
        j = jnp.arange(ka.shape[2])[None, :]
        for start in starts:
            qc = lax.dynamic_slice_in_dim(qa, start, chunk, axis=2)
            i = start + jnp.arange(chunk)[:, None]
            outs.append(_attend(qc, ka, va, jnp.where(j <= i, 0.0, -jnp.inf), sc))
        return jnp.concatenate(outs, axis=2)

    return run_op(
        "ring_distributed_sdpa",
        fn,
        [q, k, v],
        static=(ring, rid, names, sc),
        placement_rule=_rule(axes, None),
        memory_config=memory_config,
    )


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
    "ring_distributed_scaled_dot_product_attention",
    "ring_joint_scaled_dot_product_attention",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_decode",
    "split_heads",
    "split_query_key_value_and_split_heads",
    "windowed_scaled_dot_product_attention",
]
