"""TT-NN's fused transformer ops, per device, in TT-NN's layouts: QKV head splitting and head
concatenation (prefill and decode), Llama rotary embeddings through the transformation matrix,
distributed RMSNorm's two halves, ``fast_reduce_nc`` and the Mixtral ``moe`` gate.

The implementation of :mod:`ttjax.ops.fused`, whose docstring says more.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from ttjax._src.core.dispatch import common_mesh, run_op
from ttjax._src.core.enums import TILE_SIZE, DataType
from ttjax._src.core.errors import ShapeMismatchError
from ttjax._src.core.hardware import (
    BufferType,
    CoreRange,
    CoreRangeSet,
    MemoryConfig,
    ShardOrientation,
    ShardSpec,
    TensorMemoryLayout,
    num_cores_to_corerangeset,
    num_cores_to_corerangeset_in_subcoregrids,
)
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.common import (
    check_dtype,
    check_norm_program_config,
    core_set,
    write_output,
)
from ttjax._src.ttnn.ops.data_movement import slice as _slice

_HIGHEST = jax.lax.Precision.HIGHEST


def _head_dim(op: str, t: Tensor, num_heads: int, num_kv_heads: int, width: int) -> int:
    """head_dim = width / (num_heads + 2 * num_kv_heads), which must divide evenly; 0 kv heads
    (tt_dit's q-only split: ``nlp_create_qkv_heads.cpp`` allows it) gives empty k and v."""
    total = num_heads + 2 * num_kv_heads
    if num_heads <= 0 or num_kv_heads < 0 or width % total:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: the fused QKV width {width} (per-device shape "
            f"{list(t._shape)}) is not divisible by num_heads + 2*num_kv_heads = "
            f"{num_heads} + 2*{num_kv_heads} = {total}.\n"
            "fix: pass the heads per device (the QKV weight's columns split over devices hold "
            "whole q/k/v groups)."
        )
    return width // total


def _rank4(op: str, t: Tensor, what: str) -> tuple[int, int, int, int]:
    if len(t._shape) != 4:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: the input has per-device shape {list(t._shape)}; TT-NN "
            f"expects a 4-D {what}.\nfix: reshape it to 4 dims (e.g. ttnn.unsqueeze_to_4D)."
        )
    a, b, c, d = t._shape
    return a, b, c, d


# ---------------------------------------------------------------------------------------------
# Heads
# ---------------------------------------------------------------------------------------------


def nlp_create_qkv_heads(
    input: Tensor,
    input_kv: Tensor | None = None,
    *,
    num_heads: int,
    num_kv_heads: int | None = None,
    transpose_k_heads: bool = True,
    memory_config: Any = None,
    output_tensors: Any = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Fused QKV [B, 1, S, (nh + 2*nkv) * d] -> q [B, nh, S, d], k [B, nkv, S, d] (or
    [B, nkv, d, S] with ``transpose_k_heads``), v [B, nkv, S, d]. The width holds all q heads,
    then all k heads, then all v heads; with ``input_kv`` ([B, 1, S, 2*nkv*d]) k and v come
    from there and ``input`` holds only q."""
    op = "nlp_create_qkv_heads"
    nh = int(num_heads)
    nkv = int(num_kv_heads) if num_kv_heads is not None else nh
    b, one, s, w = _rank4(op, input, "fused QKV [B, 1, S, width]")
    if one != 1:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: Unsupported input sequence length {one} is not equal to 1 "
            f"(input per-device shape {list(input._shape)}).\nfix: the input is [B, 1, S, width]."
        )
    tensors = [input]
    if input_kv is not None:
        kb, kone, ks, kw = _rank4(op, input_kv, "fused KV [B, 1, S, 2*nkv*head_dim]")
        if w % nh or kw % (2 * nkv) or kw // (2 * nkv) != w // nh or (kb, kone, ks) != (b, 1, s):
            raise ShapeMismatchError(
                f"ttnn.experimental.{op}: q input {list(input._shape)} and input_kv "
                f"{list(input_kv._shape)} do not split into {nh} q heads and {nkv} k/v heads of "
                "one head_dim.\nfix: input is [B, 1, S, nh*d] and input_kv [B, 1, S, 2*nkv*d]."
            )
        tensors.append(input_kv)
        d = w // nh
    else:
        d = _head_dim(op, input, nh, nkv, w)
    if d % TILE_SIZE:
        # TT-NN's kernel copies whole 32-wide tiles per head; a head_dim that is not a multiple
        # of 32 would split tiles between heads (its output spec pads head_dim, the values are
        # not the heads), so it is refused here.
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: head_dim {d} (per-device shape {list(input._shape)}) is not "
            f"a multiple of {TILE_SIZE}.\nfix: pad each head of the QKV weight to a multiple of "
            f"{TILE_SIZE} columns."
        )
    transpose_k = bool(transpose_k_heads)

    def heads(x: Any, n: int) -> Any:
        return jnp.transpose(x.reshape(b, s, n, d), (0, 2, 1, 3))

    def fn(x: Any, *kv: Any) -> Any:
        x = x[:, 0]
        if kv:
            q, kvx = x, kv[0][:, 0]
            k, v = kvx[..., : nkv * d], kvx[..., nkv * d :]
        else:
            q, k, v = x[..., : nh * d], x[..., nh * d : (nh + nkv) * d], x[..., (nh + nkv) * d :]
        kh = heads(k, nkv)
        return heads(q, nh), (jnp.swapaxes(kh, -1, -2) if transpose_k else kh), heads(v, nkv)

    q, k, v = run_op(op, fn, tensors, static=(nh, nkv, d, transpose_k))
    if output_tensors is not None:
        return tuple(write_output(r, o) for r, o in zip((q, k, v), output_tensors))  # type: ignore[return-value]
    return q, k, v


def nlp_create_qkv_heads_falcon7b(
    input: Tensor, *, memory_config: Any = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Falcon-7B's fused QKV [B, 1, S, 4672] -> q [B, 71, S, 64], k [B, 1, S, 64], v [B, 1, S, 64]
    (multi-query: 71 q heads, then one k and one v head), TT-NN's
    ``ttnn.experimental.nlp_create_qkv_heads_falcon7b`` (ttnn/cpp/ttnn/operations/experimental/
    transformer/nlp_create_qkv_heads_falcon7b)."""
    op = "nlp_create_qkv_heads_falcon7b"
    shape = tuple(input._shape)
    if len(shape) != 4 or shape[1] != 1 or shape[3] != 4672:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: Unsupported input shape {list(shape)} (per device).\nfix: "
            "the input is Falcon-7B's fused QKV [B, 1, S, 4672] (71 q heads + k + v, 64 each)."
        )
    return nlp_create_qkv_heads(
        input, num_heads=71, num_kv_heads=1, transpose_k_heads=False, memory_config=memory_config
    )


def nlp_create_qkv_heads_decode(
    input_tensor: Tensor,
    *,
    num_heads: int,
    num_kv_heads: int | None = None,
    overlap_qk_coregrid: bool = True,
    batch_offset: Tensor | None = None,
    slice_size: int | None = None,
    memory_config: Any = None,
    output_tensors: Any = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Decode QKV [1, 1, B, (nh + 2*nkv) * d] (one token per user, B <= 32) -> q [1, B, nh, d],
    k and v [1, B, nkv, d]. ``batch_offset`` (a one-element int tensor) with ``slice_size``
    keeps only users ``batch_offset .. batch_offset + slice_size - 1``."""
    op = "nlp_create_qkv_heads_decode"
    nh = int(num_heads)
    nkv = int(num_kv_heads) if num_kv_heads is not None else nh
    s0, s1, users, w = _rank4(op, input_tensor, "decode QKV [1, 1, batch, width]")
    if (s0, s1) != (1, 1) or users > 32:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: Unsupported input shape = {list(input_tensor._shape)}; "
            "TT-NN expects [1, 1, batch<=32, width].\nfix: one token per user, at most 32 users "
            "per device (shard the users over devices)."
        )
    if nh > 32 or nh < nkv:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: num_heads={nh}, num_kv_heads={nkv}; TT-NN supports at most "
            "32 q heads per device and num_heads >= num_kv_heads.\nfix: split the heads over more "
            "devices."
        )
    d = _head_dim(op, input_tensor, nh, nkv, w)
    if d % TILE_SIZE:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: head_dim {d} (width {w} / {nh + 2 * nkv} heads) is not a "
            f"multiple of {TILE_SIZE}.\nfix: TT-NN's decode head split needs tile-wide heads."
        )
    if (batch_offset is None) != (slice_size is None):
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: Both batch_offset and slice_size must be provided or "
            "neither.\nfix: pass both (batch_offset as a one-element int tensor)."
        )
    tensors = [input_tensor]
    out_users = users
    if batch_offset is not None:
        out_users = int(slice_size)  # type: ignore[arg-type]
        if not 0 < out_users <= users or batch_offset._shape[0] != 1:
            raise ShapeMismatchError(
                f"ttnn.experimental.{op}: slice_size={out_users} of {users} users with "
                f"batch_offset of shape {list(batch_offset._shape)}.\nfix: batch_offset must be a "
                "unary tensor and slice_size <= the batch."
            )
        tensors.append(batch_offset)

    def fn(x: Any, *off: Any) -> Any:
        x = x[0, 0]  # [B, width]
        if off:
            start = off[0].reshape(-1)[0].astype(jnp.int32)
            x = jax.lax.dynamic_slice_in_dim(x, start, out_users, axis=0)
        q = x[:, : nh * d].reshape(1, out_users, nh, d)
        k = x[:, nh * d : (nh + nkv) * d].reshape(1, out_users, nkv, d)
        v = x[:, (nh + nkv) * d :].reshape(1, out_users, nkv, d)
        return q, k, v

    q, k, v = run_op(op, fn, tensors, static=(nh, nkv, d, out_users))
    if output_tensors is not None:
        return tuple(write_output(r, o) for r, o in zip((q, k, v), output_tensors))  # type: ignore[return-value]
    return q, k, v


def nlp_concat_heads(
    input_tensor: Tensor, *, memory_config: Any = None, output_tensor: Tensor | None = None
) -> Tensor:
    """Heads [B, nh, S, d] -> [B, 1, S, nh*d] (head h in columns h*d .. h*d + d - 1)."""
    b, h, s, d = _rank4("nlp_concat_heads", input_tensor, "[B, num_heads, S, head_dim]")

    def fn(x: Any) -> Any:
        return jnp.transpose(x, (0, 2, 1, 3)).reshape(b, 1, s, h * d)

    return write_output(run_op("nlp_concat_heads", fn, [input_tensor]), output_tensor)


def nlp_concat_heads_decode(
    input_tensor: Tensor,
    *,
    num_heads: int,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
) -> Tensor:
    """Decode attention output [1, B, H, d] (B <= 32 users) -> [1, 1, 32, num_heads*d]: the first
    ``num_heads`` heads of user b in row b. As in TT-NN, num_heads may reach into the heads'
    tile padding (H rounded up to 32; zeros here) and the users are padded to 32 rows."""
    op = "nlp_concat_heads_decode"
    s, users, h, d = _rank4(op, input_tensor, "[1, batch, heads, head_dim]")
    n = int(num_heads)
    padded_heads = -(-h // TILE_SIZE) * TILE_SIZE  # TT-NN checks num_heads against the tile
    if s != 1 or users > 32 or not 0 < n <= padded_heads:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: input per-device shape {list(input_tensor._shape)} with "
            f"num_heads={n}; TT-NN expects [1, batch<=32, heads, head_dim] with num_heads <= "
            f"the heads padded to a tile ({padded_heads}).\n"
            "fix: pass the q heads per device as num_heads and at most 32 users per device."
        )
    rows = max(users, 32)

    def fn(x: Any) -> Any:
        if n > h:  # heads of the tile's padding (zeros here)
            x = jnp.pad(x, ((0, 0), (0, 0), (0, n - h), (0, 0)))
        y = x[0, :, :n, :].reshape(users, n * d)
        return jnp.pad(y, ((0, rows - users), (0, 0)))[None, None]

    out_config = _concat_heads_decode_output(input_tensor, n, rows, d)
    result = run_op(op, fn, [input_tensor], static=(n,), memory_config=out_config)
    return write_output(result, output_tensor)


def _concat_heads_decode_output(x: Tensor, num_heads: int, rows: int, head_dim: int) -> Any:
    """TT-NN's output spec for nlp_concat_heads_decode, whatever ``memory_config=`` says: L1
    width-sharded, one head per core ([rows, head_dim] shards) on the first ``num_heads`` cores
    of the device grid, row by row, or from the input's first core on through its shard grid
    when that grid does not start at (0, 0) or has several ranges (``on_subcoregrids``;
    nlp_concat_heads_decode.cpp and its device operation's compute_output_specs)."""
    spec = x._spec.memory_config.shard_spec
    cores = spec.grid if spec is not None else None
    if isinstance(cores, CoreRange):
        cores = CoreRangeSet([cores])
    if isinstance(cores, CoreRangeSet) and (
        len(cores.ranges()) > 1 or (cores.ranges()[0].start.x, cores.ranges()[0].start.y) != (0, 0)
    ):
        grid = num_cores_to_corerangeset_in_subcoregrids(
            cores.ranges()[0].start, num_heads, cores, row_wise=True
        )
    else:
        size = common_mesh("nlp_concat_heads_decode", [x]).compute_with_storage_grid_size()
        grid = num_cores_to_corerangeset(num_heads, size, row_wise=True)
    shard = ShardSpec(grid, (rows, head_dim), ShardOrientation.ROW_MAJOR)
    return MemoryConfig(TensorMemoryLayout.WIDTH_SHARDED, BufferType.L1, shard)


# ---------------------------------------------------------------------------------------------
# Rotary embedding (Llama): x * cos + (x @ trans_mat) * sin, one 32x32 tile at a time
# ---------------------------------------------------------------------------------------------


def rotary_embedding_llama(
    input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    trans_mat: Tensor,
    *,
    is_decode_mode: bool = False,
    memory_config: Any = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """TT-NN's Llama rotary embedding: ``x * cos + (x @ T) * sin``, where ``T`` is a 32x32
    transformation matrix applied to every 32-wide tile of the head (get_rot_transformation_mat
    makes T swap each pair (x0, x1) -> (-x1, x0), the Meta-style interleaved rotation).

    Prefill: x [B, nh, S, d], cos/sin [1, 1 or nh, >=S, d], trans_mat [1, 1, 32, 32].
    Decode (``is_decode_mode=True``): x [1, B, nh, d], cos/sin [1, B, 1 or nh, d], trans_mat
    [1, 1, 32*k, 32] with one tile per user (k = B) or one for all (k = 1).
    """
    op = "rotary_embedding_llama"
    x_shape = _rank4(op, input_tensor, "[B, heads, S, head_dim] (prefill) or [1, B, heads, d]")
    c_shape, s_shape, t_shape = (tuple(t._shape) for t in (cos_cache, sin_cache, trans_mat))
    d = x_shape[-1]
    decode = bool(is_decode_mode)
    if d % TILE_SIZE:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: Head dim must be a multiple of TILE_WIDTH; got head_dim {d} "
            f"(input per-device shape {list(x_shape)}).\nfix: use a head_dim that is a multiple of 32."
        )
    if c_shape != s_shape or len(c_shape) != 4 or c_shape[-1] != d:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: cos {list(c_shape)} and sin {list(s_shape)} must match each "
            f"other and the input's head_dim {d}.\nfix: build cos/sin as [1, 1, seq, head_dim] "
            "(prefill) or [1, batch, 1, head_dim] (decode)."
        )
    if decode:
        tiles = t_shape[2] // TILE_SIZE if len(t_shape) == 4 else 0
        users = x_shape[1]
        trans_ok = (
            len(t_shape) == 4
            and t_shape[:2] == (1, 1)
            and t_shape[2] % TILE_SIZE == 0
            and t_shape[3] == TILE_SIZE
            and (tiles == 1 or tiles >= users)
        )
        if (
            x_shape[0] != 1
            or c_shape[0] != 1
            or c_shape[1] != users
            or c_shape[2] not in (1, x_shape[2])
        ):
            raise ShapeMismatchError(
                f"ttnn.experimental.{op}: decode input {list(x_shape)} with cos/sin "
                f"{list(c_shape)}; TT-NN expects x [1, batch, heads, d] and cos/sin "
                "[1, batch, 1, d].\nfix: pass is_decode_mode=False for prefill tensors, or gather "
                "cos/sin per user (RotarySetup.get_rot_mats)."
            )
        want_t = f"[1, 1, 32*k, 32] with k = 1 or k >= batch ({users})"
    else:
        tiles = 1
        trans_ok = t_shape == (1, 1, TILE_SIZE, TILE_SIZE)
        if c_shape[0] != 1 or c_shape[1] not in (1, x_shape[1]) or c_shape[2] < x_shape[2]:
            raise ShapeMismatchError(
                f"ttnn.experimental.{op}: prefill input {list(x_shape)} with cos/sin "
                f"{list(c_shape)}; TT-NN expects cos/sin [1, 1 or heads, >=seq, d].\n"
                "fix: pass is_decode_mode=True for decode tensors, or build cos/sin for the "
                "prompt's positions."
            )
        want_t = "[1, 1, 32, 32]"
    if not trans_ok:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: trans_mat has per-device shape {list(t_shape)}; "
            f"{'decode' if decode else 'prefill'} mode needs {want_t}.\n"
            "fix: use get_rot_transformation_mat (a 32x32 tile), repeated once per user for decode "
            "(RotarySetup's transformation_mats['decode'] / ['prefill'])."
        )

    def fn(x: Any, cos: Any, sin: Any, trans: Any) -> Any:
        xf = x.astype(jnp.float32)
        lead = x.shape[:-1]
        xt = xf.reshape(*lead, d // TILE_SIZE, TILE_SIZE)
        mats = trans.astype(jnp.float32).reshape(-1, TILE_SIZE, TILE_SIZE)
        if decode and tiles > 1:  # user b's tile: [1, B, H, t, 32] x [B, 32, 32]
            rot = jnp.einsum("abhti,bij->abhtj", xt, mats[: lead[1]], precision=_HIGHEST)
        else:
            rot = jnp.einsum("...i,ij->...j", xt, mats[0], precision=_HIGHEST)
        rot = rot.reshape(x.shape)
        c, s = cos.astype(jnp.float32), sin.astype(jnp.float32)
        if not decode:
            c, s = c[:, :, : x.shape[2]], s[:, :, : x.shape[2]]
        return (xf * c + rot * s).astype(x.dtype)

    return run_op(op, fn, [input_tensor, cos_cache, sin_cache, trans_mat], static=(decode, tiles))


def rotary_embedding_llama_fused_qk(
    q_input_tensor: Tensor,
    k_input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    trans_mat: Tensor,
    *,
    compute_kernel_config: Any = None,
) -> tuple[Tensor, Tensor]:
    """Decode RoPE of Q [1, B, nh, d] and K [1, B, nkv, d] in one op (the Galaxy Llama's
    attention): cos/sin are [1, 2B, 1, d], Q's users first, then K's; ``trans_mat`` holds the
    32x32 rotation tile once per core. Each is :func:`rotary_embedding_llama` in decode mode,
    with RotaryEmbeddingLlamaFusedQK::validate's rules: one batch size (<= 32), Q and K
    height-sharded on disjoint cores (64 at most together), equal head dims."""
    op = "rotary_embedding_llama_fused_qk"
    q_shape = _rank4(op, q_input_tensor, "Q [1, batch, heads, head_dim]")
    k_shape = _rank4(op, k_input_tensor, "K [1, batch, kv_heads, head_dim]")
    c_shape = tuple(cos_cache._shape)

    def fail(rule: str, fix: str) -> ShapeMismatchError:
        return ShapeMismatchError(f"ttnn.experimental.{op}: {rule}.\nfix: {fix}")

    if q_shape[0] != 1 or k_shape[0] != 1:
        raise fail("rotary_embedding_llama_fused_qk currently only supports decode mode with "
                   f"seq_len=1 (Q {list(q_shape)}, K {list(k_shape)})",
                   "pass decode heads [1, batch, heads, head_dim].")  # fmt: skip
    if q_shape[-1] != k_shape[-1] or q_shape[1] != k_shape[1] or q_shape[1] > 32:
        raise fail(f"Q {list(q_shape)} and K {list(k_shape)} must have the same head dim and "
                   "batch size, at most 32", "split the users into groups of up to 32.")  # fmt: skip
    if c_shape != tuple(sin_cache._shape) or len(c_shape) != 4 or c_shape[1] != 2 * q_shape[1]:
        raise fail(f"Cos and Sin are repeated for Q and K, so they must have the same batch size "
                   f"as the sum of Q and K batch sizes (cos {list(c_shape)}, sin "
                   f"{list(sin_cache._shape)}, batch {q_shape[1]})",
                   "gather cos/sin for Q's users, then again for K's (RotarySetup.get_rot_mats).")  # fmt: skip
    cores = []
    for name, t in (("Q", q_input_tensor), ("K", k_input_tensor)):
        mc = t._spec.memory_config
        if mc.memory_layout is not TensorMemoryLayout.HEIGHT_SHARDED or mc.shard_spec is None:
            raise fail(f"inputs for RoPE must be HEIGHT_SHARDED ({name}: {mc!r})",
                       "height-shard Q and K, one user per core.")  # fmt: skip
        cores.append(core_set(mc.shard_spec.grid))
    if cores[0] & cores[1] or len(cores[0]) + len(cores[1]) > 64:
        raise fail("Q and K must not overlap and must not exceed max core grid size of 64",
                   "shard Q and K on two disjoint core sets.")  # fmt: skip
    users, d = q_shape[1], q_shape[-1]

    def rows(t: Tensor, lo: int) -> Tensor:
        return _slice(t, [0, lo, 0, 0], [1, lo + users, c_shape[2], d])

    q = rotary_embedding_llama(q_input_tensor, rows(cos_cache, 0), rows(sin_cache, 0), trans_mat,
                               is_decode_mode=True)  # fmt: skip
    k = rotary_embedding_llama(k_input_tensor, rows(cos_cache, users), rows(sin_cache, users),
                               trans_mat, is_decode_mode=True)  # fmt: skip
    return q, k


# ---------------------------------------------------------------------------------------------
# Distributed LayerNorm / RMSNorm: stats per device -> all_gather (the model's) -> normalize
# (ttnn/cpp/ttnn/operations/normalization/layernorm_distributed/ and rmsnorm_distributed/)
# ---------------------------------------------------------------------------------------------


def _pre_all_gather(
    op: str,
    center: bool,
    input_tensor: Tensor,
    dtype: DataType,
    residual_input_tensor: Tensor | None,
    program_config: Any,
) -> Tensor:
    """Each device's statistics, packed as TT-NN's pre-all-gather kernels write them: one tile
    column per statistic, the value in column 0 (zeros elsewhere): ``[sum(x**2)]`` for RMSNorm,
    ``[sum(x**2), sum(x)]`` for LayerNorm (LayerNormPreAllGather::compute_output_specs: the last
    dim is 1 or 2 tiles wide)."""
    out_dtype = check_dtype(op, dtype) or DataType.BFLOAT16
    check_norm_program_config(op, program_config, input_tensor, residual_input_tensor)
    tensors = [input_tensor]
    if residual_input_tensor is not None:
        if residual_input_tensor._shape != input_tensor._shape:
            raise ShapeMismatchError(
                f"ttnn.{op}: residual_input_tensor has per-device shape "
                f"{list(residual_input_tensor._shape)} but the input has "
                f"{list(input_tensor._shape)}.\nfix: the residual must match the input's shape."
            )
        tensors.append(residual_input_tensor)

    def fn(x: Any, *res: Any) -> Any:
        y = x.astype(jnp.float32)
        if res:
            y = y + res[0].astype(jnp.float32)
        sums = [jnp.sum(y * y, axis=-1, keepdims=True)]
        if center:
            sums.append(jnp.sum(y, axis=-1, keepdims=True))
        pad = jnp.zeros((*sums[0].shape[:-1], TILE_SIZE - 1), jnp.float32)
        return jnp.concatenate([part for s in sums for part in (s, pad)], -1)

    return run_op(op, fn, tensors, static=(center,), out_dtype=out_dtype)


def _post_all_gather(
    op: str,
    center: bool,
    input_tensor: Tensor,
    stats: Tensor,
    epsilon: float,
    weight: Tensor | None,
    bias: Tensor | None,
    dtype: DataType | None,
    program_config: Any,
) -> Tensor:
    """Normalize each device's slice x [..., W] with the statistics of the full hidden dim: the
    gathered ``stats`` hold each device's tile columns side by side; TT-NN reduces every tile
    (all 32 columns) and strides over the statistics (LayerNorm: even tiles are sum(x**2), odd
    tiles sum(x)), dividing by ``W * n_devices`` (layernorm_post_allgather.cpp)."""
    check_norm_program_config(op, program_config, input_tensor)
    per_device = 2 if center else 1
    x_shape, st_shape = tuple(input_tensor._shape), tuple(stats._shape)
    tiles = st_shape[-1] // TILE_SIZE if st_shape else 0
    if (
        len(st_shape) != len(x_shape)
        or st_shape[:-1] != x_shape[:-1]
        or st_shape[-1] % TILE_SIZE
        or tiles == 0
        or tiles % per_device
    ):
        raise ShapeMismatchError(
            f"ttnn.{op}: stats has per-device shape {list(st_shape)} for an input of "
            f"{list(x_shape)}; TT-NN needs the input's leading dims and a last dim of "
            f"{32 * per_device} per device.\nfix: all_gather {op.replace('post', 'pre')}'s "
            "output on dim 3 (over the devices that split the hidden dim) and pass that."
        )
    if weight is not None and center != (bias is not None):
        raise ShapeMismatchError(
            f"ttnn.{op}: Beta tensor must be present if and only if using layernorm (vs "
            f"rmsnorm).\nfix: {'pass bias= with weight=' if center else 'drop bias= (RMSNorm has no bias)'}."
        )
    if bias is not None and not center:
        raise ShapeMismatchError(
            f"ttnn.{op}: Beta tensor must be present if and only if using layernorm (vs "
            "rmsnorm).\nfix: drop bias= (RMSNorm has no bias)."
        )
    width = x_shape[-1]
    n_dev = tiles // per_device
    tensors = [input_tensor, stats]
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        if math.prod(t._shape) != width:
            raise ShapeMismatchError(
                f"ttnn.{op}: {name} has per-device shape {list(t._shape)} "
                f"({math.prod(t._shape)} values) for a hidden slice of {width}.\nfix: shard "
                f"the norm's {name} like the hidden dim (each device holds its W values)."
            )
        tensors.append(t)
    has = (weight is not None, bias is not None)
    eps = float(epsilon)
    out_dtype = check_dtype(op, dtype)

    def fn(x: Any, st: Any, *wb: Any) -> Any:
        per_tile = jnp.sum(
            st.astype(jnp.float32).reshape(*st.shape[:-1], tiles, TILE_SIZE), axis=-1
        )
        inv_n = 1.0 / (width * n_dev)
        ex2 = jnp.sum(per_tile[..., 0::per_device], axis=-1, keepdims=True) * inv_n
        y = x.astype(jnp.float32)
        if center:
            ex = jnp.sum(per_tile[..., 1::per_device], axis=-1, keepdims=True) * inv_n
            y = (y - ex) * jax.lax.rsqrt(ex2 - ex * ex + eps)
        else:
            y = y * jax.lax.rsqrt(ex2 + eps)
        it = iter(wb)
        if has[0]:
            y = y * next(it).astype(jnp.float32).reshape(width)
        if has[1]:
            y = y + next(it).astype(jnp.float32).reshape(width)
        return y.astype(x.dtype)

    return run_op(op, fn, tensors, static=(center, eps, width, n_dev, has), out_dtype=out_dtype)


def rms_norm_pre_all_gather(
    input_tensor: Tensor,
    *,
    dtype: DataType = DataType.BFLOAT16,
    residual_input_tensor: Tensor | None = None,
    compute_kernel_config: Any = None,
    program_config: Any = None,
    memory_config: Any = None,
    use_2d_core_grid: bool | None = None,
) -> Tensor:
    """Each device's sum(x**2) over its slice of the hidden dim, as TT-NN packs it: one tile
    column wide, [..., 32], the sum in column 0 (zeros elsewhere). All-gather it on the last dim,
    then :func:`rms_norm_post_all_gather`. With ``residual_input_tensor`` the stats are of
    ``input + residual``."""
    return _pre_all_gather(
        "rms_norm_pre_all_gather", False, input_tensor, dtype, residual_input_tensor, program_config
    )


def rms_norm_post_all_gather(
    input_tensor: Tensor,
    stats: Tensor,
    *,
    epsilon: float = 1e-12,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    memory_config: Any = None,
    compute_kernel_config: Any = None,
    program_config: Any = None,
    dtype: DataType | None = None,
    use_2d_core_grid: bool | None = None,
) -> Tensor:
    """``x * rsqrt(mean(x**2) + epsilon) * weight`` on each device's slice x [..., W], where the
    mean over the full hidden dim comes from the gathered ``stats`` [..., 32 * n_devices]: TT-NN
    sums every stats column and divides by ``W * n_devices``. ``weight`` holds this device's W
    values (any shape of W elements, e.g. [1, 1, W/32, 32] row-major)."""
    return _post_all_gather(
        "rms_norm_post_all_gather",
        False,
        input_tensor,
        stats,
        epsilon,
        weight,
        bias,
        dtype,
        program_config,
    )


def layer_norm_pre_all_gather(
    input_tensor: Tensor,
    *,
    dtype: DataType = DataType.BFLOAT16,
    residual_input_tensor: Tensor | None = None,
    compute_kernel_config: Any = None,
    program_config: Any = None,
    memory_config: Any = None,
) -> Tensor:
    """Each device's ``sum(x**2)`` and ``sum(x)`` over its slice of the hidden dim, two tile
    columns wide ([..., 64]: column 0 and column 32), as TT-NN's LayerNorm pre-all-gather packs
    them. All-gather on the last dim, then :func:`layer_norm_post_all_gather`.

    >>> stats = ttnn.layer_norm_pre_all_gather(x)        # [1, 1, 32, 64] per device
    >>> full = ttnn.all_gather(stats, dim=3, cluster_axis=1)
    >>> y = ttnn.layer_norm_post_all_gather(x, full, epsilon=1e-5)
    >>> tuple(full.shape), tuple(y.shape)
    ((1, 1, 32, 256), (1, 1, 32, 32))
    """
    return _pre_all_gather(
        "layer_norm_pre_all_gather",
        True,
        input_tensor,
        dtype,
        residual_input_tensor,
        program_config,
    )


def layer_norm_post_all_gather(
    input_tensor: Tensor,
    stats: Tensor,
    *,
    epsilon: float = 1e-12,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    memory_config: Any = None,
    compute_kernel_config: Any = None,
    program_config: Any = None,
    dtype: DataType | None = None,
) -> Tensor:
    """``(x - E[x]) * rsqrt(Var[x] + epsilon) * weight + bias`` on each device's slice, with
    ``E[x]`` and ``E[x**2]`` of the full hidden dim read from the gathered ``stats`` [..., 64 *
    n_devices]. TT-NN takes ``weight`` and ``bias`` together (or neither), each this device's W
    values (row-major [1, 1, W/32, 32])."""
    return _post_all_gather(
        "layer_norm_post_all_gather",
        True,
        input_tensor,
        stats,
        epsilon,
        weight,
        bias,
        dtype,
        program_config,
    )


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------


def fast_reduce_nc(
    input: Tensor,
    *,
    dims: list[int] | tuple[int, ...] = (),
    output: Tensor | None = None,
    memory_config: Any = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """Sum over dim 0, dim 1 or both (TT-NN's N and C dims), keeping them as size 1."""
    op = "fast_reduce_nc"
    rank = len(input._shape)
    ds = sorted({int(d) % rank if rank else int(d) for d in dims})
    if not ds or any(d not in (0, 1) or d >= rank - 2 for d in ds):
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: dims={list(dims)} for a per-device shape "
            f"{list(input._shape)}; TT-NN reduces dim 0, 1, or [0, 1] (never the last two).\n"
            "fix: pass dims=[0], [1] or [0, 1]; use ttnn.sum for the other dims."
        )
    axes = tuple(ds)

    def fn(x: Any) -> Any:
        return jnp.sum(x.astype(jnp.float32), axis=axes, keepdims=True).astype(x.dtype)

    return write_output(run_op(op, fn, [input], static=axes), output)


def moe(
    input_tensor: Tensor,
    expert_mask_tensor: Tensor,
    topk_mask_tensor: Tensor,
    k: int = 32,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
) -> Tensor:
    """The gate weight of expert 0 (the device's own expert, after the model's reordering):
    ``val, ind = topk(x + expert_mask, k)``; ``sum(softmax(val + topk_mask) * (ind == 0), -1)``
    -> [N, C, H, 1]."""
    shape = _rank4("moe", input_tensor, "[N, C, H, W]")
    w = shape[-1]
    kk = int(k)
    if kk != 32 or w < 64 or w & (w - 1):
        raise ShapeMismatchError(
            f"ttnn.moe: k={kk} with gate width {w} (input per-device shape {list(shape)}); TT-NN "
            "needs k == 32 and a width that is a power of two >= 64.\nfix: pad the gate logits "
            "with -inf to 64 columns (and the masks to match) and pass k=32."
        )
    if expert_mask_tensor._shape[-1] != w or topk_mask_tensor._shape[-1] != kk:
        raise ShapeMismatchError(
            f"ttnn.moe: expert_mask {list(expert_mask_tensor._shape)} must end in the input width "
            f"{w} and topk_mask {list(topk_mask_tensor._shape)} in k={kk}.\nfix: build the masks "
            "as [1, 1, 1, W] and [1, 1, 1, k]."
        )

    def fn(x: Any, em: Any, tm: Any) -> Any:
        vals, idx = jax.lax.top_k((x.astype(jnp.float32) + em.astype(jnp.float32)), kk)
        probs = jax.nn.softmax(vals + tm.astype(jnp.float32), axis=-1)
        return jnp.sum(probs * (idx == 0), axis=-1, keepdims=True).astype(x.dtype)

    out = run_op("moe", fn, [input_tensor, expert_mask_tensor, topk_mask_tensor], static=(kk,))
    return write_output(out, output_tensor)


def nlp_create_qkv_heads_segformer(
    input: Tensor, *, memory_config: Any = None, output_tensors: Any = None
) -> tuple[Tensor, Tensor, Tensor]:
    """SegFormer's head split: [B, 1, S, W] -> [B, W / 32, S, 32] (heads of 32, in order), as
    TT-NN's ``nlp_create_qkv_heads_segformer`` (head_dim hard-coded to one tile). TT-NN returns
    three tensors of that shape but its kernel writes only the first; the other two come back
    zero here (TT-NN leaves them unwritten)."""
    op = "nlp_create_qkv_heads_segformer"
    b, one, s, w = _rank4(op, input, "[B, 1, S, W]")
    if one != 1 or s % TILE_SIZE or w % TILE_SIZE:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: the input has per-device shape {[b, one, s, w]}; TT-NN takes "
            "[B, 1, S, W] with S and W multiples of 32.\nfix: pad the sequence and width to tiles."
        )
    heads = w // TILE_SIZE

    def fn(x: Any) -> Any:
        q = jnp.transpose(x.reshape(b, s, heads, TILE_SIZE), (0, 2, 1, 3))
        return q, jnp.zeros_like(q), jnp.zeros_like(q)

    out = run_op(op, fn, [input], static=(heads,), memory_config=memory_config)
    results = tuple(out)
    if output_tensors:
        results = tuple(write_output(r, o) for r, o in zip(results, output_tensors))
    return results


# ---------------------------------------------------------------------------------------------
# Mamba's SSM multiply (ttnn/cpp/ttnn/operations/experimental/ssm/repeat_and_interleave_eltwise_mul)
# ---------------------------------------------------------------------------------------------

# TT-NN's kernel is written for Mamba-2.8B: hidden size 5120 (RepeatAndInterleaveEltwiseMul).
SSM_HIDDEN_SIZE = 5120


def repeat_and_interleave_eltwise_mul(
    a: Tensor,
    b: Tensor,
    *,
    memory_config: Any = None,
    dtype: DataType | None = None,
    math_fidelity: Any = None,
) -> Tensor:
    """Mamba's ``a.repeat(1, 1, 1, 5120) * b.repeat_interleave(32, dim=-1)``: a [1, 1, U, 32]
    (or already [1, 1, U, 32 * 5120]) times b [1, 1, U, 5120] (or already repeated), giving
    [1, 1, U, 32 * 5120] with ``out[..., 32 * j + i] = a[..., i] * b[..., j]``."""
    op = "repeat_and_interleave_eltwise_mul"
    a_shape, b_shape = tuple(a._shape), tuple(b._shape)
    full = TILE_SIZE * SSM_HIDDEN_SIZE
    problems = []
    if len(a_shape) != 4 or len(b_shape) != 4 or a_shape[:2] != (1, 1) or b_shape[:2] != (1, 1):
        problems.append("Batch not supported: both inputs must be [1, 1, users, width]")
    elif a_shape[2] % TILE_SIZE or a_shape[2] != b_shape[2]:
        problems.append("Num of users must be a multiple of 32 and match in both inputs")
    elif a_shape[3] == b_shape[3]:
        problems.append("Use eltwise mul for same size inputs")
    elif a_shape[3] not in (TILE_SIZE, full) or b_shape[3] not in (SSM_HIDDEN_SIZE, full):
        problems.append("Input a width must be 32 or 32*5120, input b width 5120 or 32*5120")
    if problems:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: {problems[0]} (a {list(a_shape)}, b {list(b_shape)}).\n"
            "fix: pass a [1, 1, U, 32] and b [1, 1, U, 5120] (U a multiple of 32)."
        )
    out_dtype = check_dtype(op, dtype)
    a_full, b_full = a_shape[3] == full, b_shape[3] == full

    def fn(x: Any, y: Any) -> Any:
        users = x.shape[2]
        xa = x.astype(jnp.float32).reshape(1, 1, users, -1, TILE_SIZE)
        yb = y.astype(jnp.float32).reshape(1, 1, users, SSM_HIDDEN_SIZE, -1)
        xa = xa if a_full else jnp.broadcast_to(xa, (1, 1, users, SSM_HIDDEN_SIZE, TILE_SIZE))
        yb = yb if b_full else jnp.broadcast_to(yb, (1, 1, users, SSM_HIDDEN_SIZE, TILE_SIZE))
        return (xa * yb).reshape(1, 1, users, full).astype(x.dtype)

    return run_op(
        op, fn, [a, b], static=(a_full, b_full), out_dtype=out_dtype, memory_config=memory_config
    )


__all__ = [
    "fast_reduce_nc",
    "layer_norm_post_all_gather",
    "layer_norm_pre_all_gather",
    "moe",
    "nlp_concat_heads",
    "nlp_concat_heads_decode",
    "nlp_create_qkv_heads",
    "nlp_create_qkv_heads_decode",
    "nlp_create_qkv_heads_segformer",
    "repeat_and_interleave_eltwise_mul",
    "rms_norm_post_all_gather",
    "rms_norm_pre_all_gather",
    "rotary_embedding_llama",
    "rotary_embedding_llama_fused_qk",
]
