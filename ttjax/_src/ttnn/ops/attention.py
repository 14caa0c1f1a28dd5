"""TT-NN's other attention ops, per device: ``attention_softmax(_)`` (BERT / ViT), joint
attention over two sequences (the diffusion transformers' ``joint_scaled_dot_product_attention``,
whose ring form gathers K/V in :mod:`ttjax.transformer`), BERT-large's fused-QKV head split and
the KV-cache slice load.

The implementation of :mod:`ttjax.ops.attention`, whose docstring says more.
"""

from __future__ import annotations

import math
from typing import Any, cast

import jax
import jax.numpy as jnp

from ttjax._src.core.dispatch import common_mesh, run_op
from ttjax._src.core.enums import TILE_SIZE, DataType, Layout
from ttjax._src.core.errors import LayoutError, ShapeMismatchError, UnsupportedDTypeError
from ttjax._src.core.hardware import (
    BufferType,
    CoreRange,
    CoreRangeSet,
    MemoryConfig,
    ShardOrientation,
    ShardSpec,
    TensorMemoryLayout,
    num_cores_to_corerangeset,
)
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.common import check_sdpa_program_config, write_output
from ttjax._src.ttnn.ops.pointwise import multiply
from ttjax._src.ttnn.ops.reduction import scale_mask_softmax_op, softmax

# ---------------------------------------------------------------------------------------------
# attention_softmax (ttnn/cpp/ttnn/operations/transformer/attention_softmax/attention_softmax.cpp)
# ---------------------------------------------------------------------------------------------


def _head_scale(head_size: int | None) -> float:
    return 1.0 / math.sqrt(int(head_size)) if head_size is not None else 1.0


def attention_softmax(
    tensor: Tensor,
    *,
    head_size: int | None = None,
    attention_mask: Tensor | None = None,
    program_config: Any = None,
    causal_mask: bool = False,
    memory_config: Any = None,
) -> Tensor:
    """``softmax(tensor / sqrt(head_size) + attention_mask)`` over the last dim, per device
    (TT-NN's ``ttnn.transformer.attention_softmax``: without a mask, a multiply then softmax;
    with one, ``scale_mask_softmax``, whose mask is [batch, 1, 1, W] or the scores' shape)."""
    scale = _head_scale(head_size)
    if attention_mask is None:
        return softmax(multiply(tensor, scale), -1, memory_config=memory_config)
    return scale_mask_softmax_op(
        "transformer.attention_softmax", tensor, scale, attention_mask, memory_config
    )


def attention_softmax_(
    tensor: Tensor,
    *,
    head_size: int | None = None,
    attention_mask: Tensor | None = None,
    program_config: Any = None,
    causal_mask: bool = False,
    memory_config: Any = None,
) -> Tensor:
    """``attention_softmax`` written back into ``tensor`` (TT-NN's in-place form, which
    needs ``attention_mask``)."""
    if attention_mask is None:
        raise ShapeMismatchError(
            "ttnn.transformer.attention_softmax_: Cannot apply divide by sqrt(head_size) using "
            "in-place version when attention_mask is not set.\nfix: pass attention_mask=, or "
            "call ttnn.transformer.attention_softmax (not in place)."
        )
    out = scale_mask_softmax_op(
        "transformer.attention_softmax_", tensor, _head_scale(head_size), attention_mask
    )
    return write_output(out, tensor)


# ---------------------------------------------------------------------------------------------
# Joint attention (ttnn/cpp/ttnn/operations/transformer/sdpa/device/joint_sdpa_op.cpp)
# ---------------------------------------------------------------------------------------------


def _joint_error(op: str, msg: str, fix: str) -> ShapeMismatchError:
    return ShapeMismatchError(f"ttnn.transformer.{op}: {msg}\nfix: {fix}")


def check_joint_inputs(
    op: str, tensors: list[Tensor], joint_strategy: str, program_config: Any
) -> None:
    """JointScaledDotProductAttention::validate's rules on (q, k, v, joint_q, joint_k, joint_v):
    rank 4, one dtype (bf16/bf8), equal batch, heads and head dims, TILE layout, strategy rear."""
    check_sdpa_program_config(op, program_config)
    if joint_strategy != "rear":
        raise _joint_error(
            op,
            f"Joint strategy must be 'rear'. Got: {joint_strategy!r}",
            'pass joint_strategy="rear".',
        )
    names = ("q", "k", "v", "joint_q", "joint_k", "joint_v")
    for name, t in zip(names, tensors):
        if len(t._shape) != 4:
            raise _joint_error(
                op,
                f"{name} has per-device shape {list(t._shape)}; Joint SDPA takes [b, nh, seq, dh].",
                "reshape the heads to rank 4.",
            )
        if t._layout is not Layout.TILE:
            raise LayoutError(
                f"ttnn.transformer.{op}: Inputs to Joint SDPA must be tilized ({name} is "
                f"{t._layout!r}).\nfix: ttnn.to_layout({name}, ttnn.TILE_LAYOUT)."
            )
    dtypes = {t._dtype for t in tensors}
    if len(dtypes) != 1 or not dtypes <= {DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32}:
        raise UnsupportedDTypeError(
            f"ttnn.transformer.{op}: All tensors must have the same dtype (BF16 or BF8); got "
            f"{[t._dtype for t in tensors]}.\nfix: typecast the six inputs to one dtype."
        )
    shapes = [tuple(t._shape) for t in tensors]
    b, nh, dh = shapes[0][0], shapes[0][1], shapes[0][3]
    bad = [n for n, s in zip(names, shapes) if s[0] != b or s[1] != nh or s[3] != dh]
    if bad:
        raise _joint_error(
            op,
            f"batch, num_heads and head_dim must match q's ({b}, {nh}, {dh}); "
            f"{', '.join(f'{n} {list(s)}' for n, s in zip(names, shapes) if n in bad)}.",
            "give the joint (text) and spatial q/k/v the same batch, heads and head dim.",
        )
    if shapes[1][2] != shapes[2][2] or shapes[4][2] != shapes[5][2]:
        raise _joint_error(
            op,
            f"K and V sequence lengths must match (k {shapes[1][2]}, v {shapes[2][2]}, joint_k "
            f"{shapes[4][2]}, joint_v {shapes[5][2]}).",
            "pass keys and values of the same tokens.",
        )


def joint_attention(
    op: str,
    tensors: list[Tensor],
    scale: float | None,
    logical_n: int | None = None,
    with_lse: bool = False,
) -> tuple[Tensor, ...]:
    """Non-causal attention of ``[q; joint_q]`` over ``[k; joint_k]`` (the rear strategy: the
    joint tokens after the spatial ones), split back into the two outputs. Keys of the first
    part at positions >= ``logical_n`` are padding and masked; ``with_lse`` adds the log-sum-exp
    of the scaled scores, [b, nh, N + L, 1] (ring joint attention's third output)."""
    sc = float(scale) if scale is not None else 1.0 / math.sqrt(tensors[0]._shape[-1])
    n_q = tensors[0]._shape[2]
    n_k = tensors[1]._shape[2]
    keep = n_k if logical_n is None else int(logical_n)

    def fn(q: Any, k: Any, v: Any, jq: Any, jk: Any, jv: Any) -> Any:
        qq = jnp.concatenate([q, jq], axis=2).astype(jnp.float32)
        kk = jnp.concatenate([k, jk], axis=2).astype(jnp.float32)
        vv = jnp.concatenate([v, jv], axis=2).astype(jnp.float32)
        hi = jax.lax.Precision.HIGHEST
        scores = jnp.einsum("bhsd,bhtd->bhst", qq, kk, precision=hi) * sc
        if keep < n_k:
            pos = jnp.arange(kk.shape[2])
            scores = jnp.where((pos >= keep) & (pos < n_k), -jnp.inf, scores)
        lse = jax.nn.logsumexp(scores, axis=-1, keepdims=True)
        out = jnp.einsum("bhst,bhtd->bhsd", jnp.exp(scores - lse), vv, precision=hi)
        out = out.astype(q.dtype)
        parts = (out[:, :, :n_q], out[:, :, n_q:])
        return (*parts, lse.astype(q.dtype)) if with_lse else parts

    return cast(tuple[Tensor, ...], run_op(op, fn, tensors, static=(sc, n_q, n_k, keep, with_lse)))


def joint_scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    joint_tensor_q: Tensor,
    joint_tensor_k: Tensor,
    joint_tensor_v: Tensor,
    *,
    joint_strategy: str,
    program_config: Any,
    scale: float | None = None,
    compute_kernel_config: Any = None,
) -> tuple[Tensor, Tensor]:
    """Non-causal attention over two token sets at once: q/k/v [b, nh, N, dh] and the joint
    q/k/v [b, nh, L, dh] are concatenated on the sequence (``joint_strategy="rear"``), attended
    together, and split back: ``(out [b, nh, N, dh], joint_out [b, nh, L, dh])``. ``scale``
    defaults to 1/sqrt(dh)."""
    op = "joint_scaled_dot_product_attention"
    tensors = [
        input_tensor_q,
        input_tensor_k,
        input_tensor_v,
        joint_tensor_q,
        joint_tensor_k,
        joint_tensor_v,
    ]
    check_joint_inputs(op, tensors, joint_strategy, program_config)
    out, joint = joint_attention(op, tensors, scale)
    return out, joint


# ---------------------------------------------------------------------------------------------
# BERT-large's fused QKV split and the KV-cache slice load
# ---------------------------------------------------------------------------------------------


def split_fused_qkv_and_split_heads(
    input_tensor: Tensor,
    compute_with_storage_grid_size: Any,
    *,
    memory_config: Any = None,
    num_heads: int = 16,
    output_tensors: Any = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """``ttnn.experimental.split_query_key_value_and_split_heads``: fused QKV [B, 1, S, 3*H] ->
    q [B, nh, S, dh], k transposed [B, nh, dh, S], v [B, nh, S, dh]
    (split_query_key_value_and_split_heads_device_operation.cpp). Interleaved inputs hold
    [q | k | v]; a block-sharded input holds one [q | k | v] block of nh / G heads per column of
    G core columns (rows for COL_MAJOR shards), as BERT-large's sharded kernel reads it."""
    op = "split_query_key_value_and_split_heads"
    shape = tuple(input_tensor._shape)
    if len(shape) != 4 or shape[1] != 1:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: the input has per-device shape {list(shape)}; TT-NN takes "
            "the fused QKV as [B, 1, S, 3 * hidden].\nfix: reshape it to [B, 1, S, 3 * hidden]."
        )
    if input_tensor._dtype not in (DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32):
        raise UnsupportedDTypeError(
            f"ttnn.experimental.{op}: Unsupported data format {input_tensor._dtype!r}.\n"
            "fix: typecast the input to ttnn.bfloat16."
        )
    nh = int(num_heads)
    batch, _, m, width = shape
    groups = 1
    if input_tensor.is_sharded():
        mc = input_tensor._spec.memory_config
        spec = mc.shard_spec
        cores = spec.grid if spec is not None else None
        if isinstance(cores, CoreRange):
            cores = CoreRangeSet(cores)
        one_range = isinstance(cores, CoreRangeSet) and len(cores.ranges()) == 1
        box = cores.bounding_box() if isinstance(cores, CoreRangeSet) else None
        grid = compute_with_storage_grid_size
        if (
            spec is None
            or box is None
            or mc.memory_layout is not TensorMemoryLayout.BLOCK_SHARDED
            or not one_range
            or box.end.x >= grid.x
            or box.end.y >= grid.y
        ):
            raise ShapeMismatchError(
                f"ttnn.experimental.{op}: a sharded input must be BLOCK_SHARDED on one core "
                f"range inside compute_with_storage_grid_size {grid!r} (got {mc!r}).\nfix: "
                "ttnn.interleaved_to_sharded(x, grid, shard_shape, BLOCK_SHARDED, orientation)."
            )
        row_major = spec.orientation is ShardOrientation.ROW_MAJOR
        groups = (box.end.x if row_major else box.end.y) + 1
    elif not 7 <= batch <= 9:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: Input batch size must be between 2 to 9 for bert large TM "
            f"ops! (TT-NN's interleaved kernel takes batch 7..9; got {batch}).\nfix: "
            "block-shard the input, or use ttnn.transformer.split_query_key_value_and_split_heads."
        )
    if nh <= 0 or nh % groups or width % (3 * nh):
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: {nh} heads do not split the fused width {width} into q/k/v "
            f"heads over {groups} core group(s).\nfix: pass the num_heads the QKV weights hold."
        )
    d = width // (3 * nh)
    per = nh // groups

    def fn(x: Any) -> Any:
        blocks = x.reshape(batch, m, groups, 3, per, d)  # [B, S, G, qkv, heads/G, dh]
        q, k, v = (
            jnp.transpose(blocks[:, :, :, i], (0, 2, 3, 1, 4)).reshape(batch, nh, m, d)
            for i in range(3)
        )
        return q, jnp.swapaxes(k, -1, -2), v

    out = run_op(op, fn, [input_tensor], static=(nh, groups, d), memory_config=memory_config)
    results = cast(tuple[Tensor, Tensor, Tensor], tuple(out))
    if output_tensors:
        return cast(
            tuple[Tensor, Tensor, Tensor],
            tuple(write_output(r, o) for r, o in zip(results, output_tensors)),
        )
    return results


def nlp_kv_cache_load_slice(
    input_tensor: Tensor,
    *,
    seq_len_start: int,
    seq_len_end: int,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
) -> Tensor:
    """Rows ``[seq_len_start, seq_len_end)`` of a KV cache [B, nh, max_seq, dh] (or [nh, B, ...]),
    height-sharded on B * nh cores, one [S, dh] shard each
    (nlp_kv_cache_load_slice_device_operation.cpp). Start and length must be whole tiles."""
    op = "nlp_kv_cache_load_slice"
    shape = tuple(input_tensor._shape)
    start, end = int(seq_len_start), int(seq_len_end)
    if len(shape) != 4:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: Input tensor must be 4D (got per-device shape "
            f"{list(shape)}).\nfix: pass the cache as [batch, heads, max_seq_len, head_dim]."
        )
    if input_tensor._layout is not Layout.TILE:
        raise LayoutError(
            f"ttnn.experimental.{op}: the cache must be TILE layout (got "
            f"{input_tensor._layout!r}).\nfix: ttnn.to_layout(cache, ttnn.TILE_LAYOUT)."
        )
    if not 0 <= start < end <= shape[2] or start % TILE_SIZE or (end - start) % TILE_SIZE:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: seq_len_start={start}, seq_len_end={end} for a cache of "
            f"{shape[2]} positions; Can only unpad tilized tensor with full tiles (0 <= start < "
            "end <= max_seq_len, both multiples of 32).\nfix: round the slice to whole tiles."
        )
    fused = shape[0] * shape[1]
    grid = common_mesh(op, [input_tensor]).compute_with_storage_grid_size()
    if fused > grid.x * grid.y:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: {fused} (batch * heads) shards need as many cores; the "
            f"worker grid {grid.x}x{grid.y} has {grid.x * grid.y}.\nfix: load fewer users or "
            "heads per call."
        )
    cores = num_cores_to_corerangeset(fused, grid, True)
    out_mc = MemoryConfig(
        TensorMemoryLayout.HEIGHT_SHARDED,
        BufferType.L1,
        ShardSpec(cores, (end - start, shape[3]), ShardOrientation.ROW_MAJOR),
    )

    def fn(x: Any) -> Any:
        return x[:, :, start:end, :]

    out = run_op(op, fn, [input_tensor], static=(start, end), memory_config=out_mc)
    return write_output(out, output_tensor)


__all__ = [
    "attention_softmax",
    "attention_softmax_",
    "joint_scaled_dot_product_attention",
    "nlp_kv_cache_load_slice",
    "split_fused_qkv_and_split_heads",
]
