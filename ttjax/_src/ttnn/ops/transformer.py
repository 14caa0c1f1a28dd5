"""Transformer ops, per device: scaled-dot-product attention (prefill and decode), rotary
embeddings and head splitting; the KV-cache writes are :mod:`ttjax._src.ttnn.ops.kv_cache`.

With heads split across devices (tensor parallel), each device attends over its own heads;
nothing here communicates.

>>> out = ttnn.transformer.scaled_dot_product_attention(q, k, v, is_causal=True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import DataType, Layout
from ttjax._src.core.errors import (
    LayoutError,
    ShapeMismatchError,
    TTJaxError,
    UnsupportedDTypeError,
)
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.common import (
    _check_index,
    _check_int_tensor,
    _check_page_table,
    check_hw_kwargs,
    check_sdpa_program_config,
    norm_dim,
    page_table_rows,
)
from ttjax._src.ttnn.ops.data_movement import slice as _slice


def _check_heads(op: str, q: Tensor, k: Tensor, v: Tensor, head_axis: int) -> None:
    nq, nk, nv = q._shape[head_axis], k._shape[1], v._shape[1]
    if nk != nv or nk == 0 or nq % nk:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: q has {nq} heads and k/v have {nk}/{nv} per device; "
            "q heads must be a multiple of the (equal) k/v heads.\nfix: split q and k/v heads "
            "over the same devices (e.g. both on the head dim), so every device keeps whole groups."
        )


# Query rows windowed attention scores at a time on long sequences (see its fn).
_ROWS = 512


def _attend(q: Any, k: Any, v: Any, mask: Any, scale: float) -> Any:
    """q [b, h, s, d], k [b, kv, t, d], v [b, kv, t, dv]: grouped-query attention, float32 scores
    and softmax; out [b, h, s, dv].

    Query heads are grouped per KV head ([b, kv, h/kv, s, d]) instead of repeating K and V, so a
    decode step reads the cache once: attention is bandwidth-bound there.
    """
    b, h, s, d = q.shape
    kv = k.shape[1]
    qg = jnp.reshape(q, (b, kv, h // kv, s, d))
    scores = jnp.einsum("bkgsd,bktd->bkgst", qg, k, preferred_element_type=jnp.float32) * scale
    if mask is not None:
        mask = jnp.asarray(mask, jnp.float32)
        if mask.ndim == 4:  # [b or 1, h or 1, s, t] -> [b, kv, h/kv, s, t] broadcastable
            mask = (
                jnp.reshape(mask, (mask.shape[0], -1, 1, *mask.shape[2:]))
                if mask.shape[1] == 1
                else jnp.reshape(mask, (mask.shape[0], kv, h // kv, *mask.shape[2:]))
            )
        scores = scores + mask
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    out = jnp.einsum("bkgst,bktd->bkgsd", probs, v, preferred_element_type=jnp.float32)
    return jnp.reshape(out, (b, h, s, v.shape[-1])).astype(q.dtype)  # MLA: V narrower than K


def scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    *,
    attn_mask: Tensor | None = None,
    is_causal: bool = True,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Attention for prefill: q [b, nh, s, d], k/v [b, nkv, t, d] -> [b, nh, s, d] per device.

    ``is_causal`` masks future keys (aligned so the last query sees every key); ``attn_mask`` is
    added to the scores. ``sliding_window_size`` w keeps the last w keys (causal) or the keys
    within w//2 of the query (non-causal). Grouped-query attention when nh is a multiple of nkv.
    """
    check_hw_kwargs("scaled_dot_product_attention", kwargs)
    check_sdpa_program_config("scaled_dot_product_attention", program_config)
    q, k, v = input_tensor_q, input_tensor_k, input_tensor_v
    _check_heads("scaled_dot_product_attention", q, k, v, 1)
    d = q._shape[-1]
    sc = float(scale) if scale is not None else 1.0 / float(d) ** 0.5
    causal = bool(is_causal)
    window = sliding_window_size
    tensors = [q, k, v] + ([attn_mask] if attn_mask is not None else [])

    def fn(qa: Any, ka: Any, va: Any, *rest: Any) -> Any:
        s, t = qa.shape[2], ka.shape[2]
        mask = None
        if causal or window is not None:
            i = jnp.arange(s)[:, None] + (t - s)
            j = jnp.arange(t)[None, :]
            allowed = j <= i if causal else jnp.ones((s, t), bool)
            if window is not None and causal:  # TT-NN: the last `window` keys up to the query
                allowed = allowed & (j > i - window)
            elif window is not None:  # TT-NN: a window centred on the query, +-window//2
                allowed = allowed & (j >= i - window // 2) & (j <= i + window // 2)
            mask = jnp.where(allowed, 0.0, -jnp.inf)
        if rest:
            extra = rest[0].astype(jnp.float32)
            mask = extra if mask is None else mask + extra
        return _attend(qa, ka, va, mask, sc)

    return run_op("sdpa", fn, tensors, static=(sc, causal, window, attn_mask is not None))


def windowed_scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    cu_window_seqlens: Tensor,
    *,
    scale: float | None = None,
    memory_config: Any = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Block-diagonal attention (Qwen2.5-VL's vision windows): token i attends to token j iff
    both lie in the same window ``[cu[w], cu[w+1])`` of ``cu_window_seqlens`` (a 1-D int32/uint32
    device tensor of window boundaries), TT-NN's ``ttnn.transformer.windowed_scaled_dot_product_
    attention`` (ttnn/cpp/ttnn/operations/transformer/sdpa_windowed). q [b, nh, s, d], k/v
    [b, nkv, s, d]. A query outside every window has no key: its output is 0 here.

    >>> cu = ttnn.from_torch(torch.tensor([0, 8, 32], dtype=torch.int32), dtype=ttnn.int32,
    ...     device=mesh)
    >>> out = ttnn.transformer.windowed_scaled_dot_product_attention(q, k, v, cu)
    """
    op = "windowed_scaled_dot_product_attention"
    check_hw_kwargs(op, kwargs)
    check_sdpa_program_config(op, program_config)
    q, k, v, cu = input_tensor_q, input_tensor_k, input_tensor_v, cu_window_seqlens
    _check_heads(op, q, k, v, 1)
    if not isinstance(cu, Tensor) or len(cu._shape) != 1 or cu._shape[0] < 2:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: cu_window_seqlens must be a 1D tensor with at least 2 "
            f"elements (got {getattr(cu, 'shape', cu)!r}).\nfix: ttnn.from_torch(torch.tensor("
            "[0, w1, w1 + w2, ...], dtype=torch.int32), dtype=ttnn.int32, device=mesh)."
        )
    if cu._dtype not in (DataType.UINT32, DataType.INT32):
        raise UnsupportedDTypeError(
            f"ttnn.transformer.{op}: cu_window_seqlens must be uint32 or int32, not "
            f"{cu._dtype!r}.\nfix: pass dtype=ttnn.uint32 (or ttnn.int32) to from_torch."
        )
    if k._shape[2] != q._shape[2] or v._shape[2] != k._shape[2]:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: q, k and v must share the sequence length (got "
            f"{q._shape[2]}, {k._shape[2]}, {v._shape[2]}).\nfix: windows index one sequence."
        )
    sc = float(scale) if scale is not None else 1.0 / float(q._shape[-1]) ** 0.5

    def fn(qa: Any, ka: Any, va: Any, bounds: Any) -> Any:
        s = qa.shape[2]
        bounds = bounds.astype(jnp.int32)
        pos = jnp.arange(s)
        # window of each position: -1 before the first boundary or at/after the last one
        win = jnp.searchsorted(bounds, pos, side="right") - 1
        win = jnp.where((pos >= bounds[0]) & (pos < bounds[-1]), win, -1)

        def rows(qr: Any, wr: Any) -> Any:  # queries [b, h, r, d] in windows wr [r]
            same = (wr[:, None] == win[None, :]) & (wr[:, None] >= 0)
            out = _attend(qr, ka, va, jnp.where(same, 0.0, -jnp.inf), sc)
            return jnp.where((wr >= 0)[None, None, :, None], out, jnp.zeros_like(out))

        if s <= _ROWS:
            return rows(qa, win)
        # A vision tower's 14k tokens: the [heads, s, s] scores would take tens of GB; a few
        # hundred query rows at a time need [heads, rows, s] only.
        n = -(-s // _ROWS)
        pad = n * _ROWS - s
        qp = jnp.pad(qa, ((0, 0), (0, 0), (0, pad), (0, 0)))
        wp = jnp.pad(win, (0, pad), constant_values=-1)
        qb = jnp.moveaxis(jnp.reshape(qp, (*qa.shape[:2], n, _ROWS, qa.shape[3])), 2, 0)
        out = jax.lax.map(lambda a: rows(*a), (qb, jnp.reshape(wp, (n, _ROWS))))
        out = jnp.reshape(jnp.moveaxis(out, 0, 2), (*qa.shape[:2], n * _ROWS, out.shape[-1]))
        return out[:, :, :s]

    return run_op(op, fn, [q, k, v, cu], static=(sc, _ROWS), memory_config=memory_config)


def _gather_pages(cache: Any, table: Any) -> Any:
    """Paged cache [max_blocks, nkv, block, d] read through ``table`` [b, nblk] -> [b, nkv, nblk*block, d]."""
    g = cache[table.astype(jnp.int32)]  # [b, nblk, nkv, block, d]
    b, nblk, kv, blk, d = g.shape
    return jnp.transpose(g, (0, 2, 1, 3, 4)).reshape(b, kv, nblk * blk, d)


def _sink_inputs(op: str, attention_sink: Any, q: Tensor) -> list[Tensor]:
    """The op's extra input for ``attention_sink`` (checked): ``[]`` or ``[sink]``."""
    if attention_sink is None:
        return []
    _check_sink(op, attention_sink, q)
    return [attention_sink]


def _split_sink(rest: tuple[Any, ...], n_extra: int, has_sink: bool) -> tuple[Any, tuple[Any, ...]]:
    """A decode op's trailing local args (its extra tensors, the sink, then any cur_pos
    scalars) -> (the sink or None, the args without it)."""
    if not has_sink:
        return None, rest
    return rest[n_extra], rest[:n_extra] + rest[n_extra + 1 :]


def _check_sink(op: str, sink: Any, q: Tensor) -> None:
    """TT-NN's attention sink (sdpa_decode_op.cpp): a bfloat16 TILE tensor in DRAM, [padded
    heads, 32], each head's sink logit in column 0."""
    if not isinstance(sink, Tensor):
        raise TTJaxError(
            f"ttnn.transformer.{op}: attention_sink is a {type(sink).__name__}, not a ttnn "
            "Tensor.\nfix: pass the per-head sink logits as a [heads, 32] bfloat16 tensor."
        )
    heads = -(-q._shape[2] // 32) * 32
    shape = tuple(sink.padded_shape)
    rules = [
        (len(shape) == 2, "Attention sink must have 2 dimensions"),
        (len(shape) != 2 or shape[0] == heads,
         f"Attention sink must have the same padded num heads as Q but got {shape[0]}"),
        (len(shape) != 2 or shape[1] == 32,
         f"Attention sink must be a single tile wide, but got {shape[-1]}"),
        (sink._dtype is DataType.BFLOAT16,
         f"Attention sink must by a BF16 tensor, but got {sink._dtype!r}"),
        (sink._layout is Layout.TILE, f"Attention sink must be in TILE layout, but got {sink._layout!r}"),
    ]  # fmt: skip
    for ok, why in rules:
        if not ok:
            raise ShapeMismatchError(
                f"ttnn.transformer.{op}: {why} (attention_sink per-device shape "
                f"{list(sink._shape)}, q {list(q._shape)}).\nfix: [heads padded to 32, 32] "
                "bfloat16, TILE, each head's sink in column 0."
            )


def _decode_attend(
    qa: Any,
    ka: Any,
    va: Any,
    pos: Any,
    mask: Any,
    sc: float,
    window: int | None,
    sink: Any = None,
) -> Any:
    """q [1, b, nh, d] over caches k/v [b, nkv, S, d]. ``pos`` [b]: user i sees positions
    <= pos[i] (and > pos[i] - window); a user at -1 is skipped (zeros). ``mask``: TT-NN's decode
    mask [b, 1, nh, S'] (S' >= S), added to the scores. ``sink`` [>= nh, 32]: head h's sink
    logit (column 0, scaled like a score, as the flash-decode kernel's sub_exp_block) joins the
    softmax's denominator only."""
    # One query per user: no query-length dim in the einsums, so XLA reads the caches in
    # their own layout (a size-1 dim there made it transpose the V cache every step).
    b, nh, d = qa.shape[1:]
    kv, total = ka.shape[1], ka.shape[2]
    qg = jnp.reshape(qa[0], (b, kv, nh // kv, d))
    scores = jnp.einsum("bkgd,bktd->bkgt", qg, ka, preferred_element_type=jnp.float32) * sc
    if pos is not None:
        j = jnp.arange(total)[None, :]
        allowed = j <= pos[:, None]  # [b, S]
        if window is not None:
            allowed = allowed & (j > pos[:, None] - window)
        scores = scores + jnp.where(allowed, 0.0, -jnp.inf)[:, None, None, :]
    if mask is not None:
        m = mask[:, 0, :, :total].astype(jnp.float32)  # [b, nh, S]
        scores = scores + jnp.reshape(m, (b, kv, nh // kv, total))
    if sink is None:
        probs = jax.nn.softmax(scores, axis=-1).astype(va.dtype)
    else:
        logit = jnp.reshape(sink[:nh, 0].astype(jnp.float32) * sc, (1, kv, nh // kv, 1))
        full = jnp.concatenate([scores, jnp.broadcast_to(logit, (b, kv, nh // kv, 1))], -1)
        probs = jax.nn.softmax(full, axis=-1)[..., :total].astype(va.dtype)
    out = jnp.einsum("bkgt,bktd->bkgd", probs, va, preferred_element_type=jnp.float32)
    out = jnp.reshape(out, (1, b, nh, va.shape[-1]))  # V's head dim (MLA: narrower than K's)
    if pos is not None:
        out = jnp.where((pos >= 0)[None, :, None, None], out, 0.0)
    return out.astype(qa.dtype)


def _decode_setup(
    op: str,
    q: Tensor,
    k: Tensor,
    is_causal: bool,
    attn_mask: Tensor | None,
    cur_pos: list[int] | None,
    cur_pos_tensor: Tensor | None,
    length: int,
) -> tuple[str, list[Tensor], tuple[int, ...]]:
    """Which of TT-NN's decode modes applies: ``tensor``/``list`` (causal, positions), ``mask``
    (non-causal, attn_mask) or ``none``; validated against the cache ``length``."""
    users, nh = q._shape[1], q._shape[2]
    if not is_causal:
        if attn_mask is None:
            return "none", [], ()
        mshape = tuple(attn_mask._shape)
        if len(mshape) != 4 or mshape[0] != users or mshape[2] != nh or mshape[3] < length:
            raise ShapeMismatchError(
                f"ttnn.transformer.{op}: attn_mask has per-device shape {list(mshape)}; TT-NN's "
                f"decode mask is [batch={users}, 1, heads={nh}, seq>={length}].\n"
                "fix: build the mask as [b, nh, 1, S] and transpose dims 1 and 2."
            )
        return "mask", [attn_mask], ()
    if attn_mask is not None:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: attn_mask given with is_causal=True; TT-NN: Must not have "
            "attn_mask tensor for non-causal attention.\nfix: pass is_causal=False with attn_mask."
        )
    if cur_pos_tensor is not None:
        if cur_pos_tensor.is_sharded():  # every core's shard holds the users' positions
            rows = (None,) * (len(cur_pos_tensor._shape) - 1) + (users,)
            _check_int_tensor(op, "cur_pos_tensor", cur_pos_tensor, rows, "[cores, batch] shards")
        else:
            _check_int_tensor(
                op, "cur_pos_tensor", cur_pos_tensor, (users,), "one position per user"
            )
        return "tensor", [cur_pos_tensor], ()
    if cur_pos is not None and len(cur_pos) > 0:
        positions = tuple(int(p) for p in cur_pos)
        if len(positions) != users:
            raise ShapeMismatchError(
                f"ttnn.transformer.{op}: cur_pos has {len(positions)} entries for {users} users.\n"
                "fix: pass one position per user (-1 skips a user)."
            )
        for p in positions:
            if not -1 <= p < length:
                raise ShapeMismatchError(
                    f"ttnn.transformer.{op}: cur_pos {p} is beyond the cache of {length} "
                    "positions per user.\nfix: cur_pos must be < the K sequence length "
                    "(or -1 to skip a user)."
                )
        return "list", [], positions
    raise ShapeMismatchError(
        f"ttnn.transformer.{op}: causal decode needs cur_pos or cur_pos_tensor.\n"
        "fix: pass each user's current position (cur_pos_tensor=int32 [batch] keeps it on device)."
    )


def _decode_positions(mode: str, rest: Sequence[Any], users: int) -> Any:
    """The users' positions; a sharded cur_pos tensor's first shard (each core holds all)."""
    if mode == "tensor":
        return rest[0].reshape(-1)[:users].astype(jnp.int32)
    return jnp.stack([jnp.asarray(p, jnp.int32) for p in rest])


def scaled_dot_product_attention_decode(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    *,
    is_causal: bool = True,
    attn_mask: Tensor | None = None,
    cur_pos: list[int] | None = None,
    cur_pos_tensor: Tensor | None = None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    attention_sink: Tensor | None = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Attention for one decode step: q [1, b, nh, d] over caches k/v [b, nkv, S, d].

    Causal (default): user ``i`` attends to cache positions ``<= cur_pos[i]`` (-1 skips the
    user); ``cur_pos_tensor`` (an int32 tensor [b]) keeps positions on device, which is what a
    replayed trace needs. ``is_causal=False`` adds ``attn_mask`` [b, 1, nh, S] instead.
    ``attention_sink`` ([heads, 32], logit in column 0) adds one sink per head to the softmax
    (gpt-oss).
    """
    check_hw_kwargs("scaled_dot_product_attention_decode", kwargs)
    q, k, v = input_tensor_q, input_tensor_k, input_tensor_v
    _check_heads("scaled_dot_product_attention_decode", q, k, v, 2)
    d = q._shape[-1]
    sc = float(scale) if scale is not None else 1.0 / float(d) ** 0.5
    window = None if sliding_window_size is None else int(sliding_window_size)
    mode, extra, positions = _decode_setup(
        "scaled_dot_product_attention_decode",
        q,
        k,
        bool(is_causal),
        attn_mask,
        cur_pos,
        cur_pos_tensor,
        k._shape[2],
    )
    sinks = _sink_inputs("scaled_dot_product_attention_decode", attention_sink, q)

    def fn(qa: Any, ka: Any, va: Any, *rest: Any) -> Any:
        sink, rest = _split_sink(rest, len(extra), bool(sinks))
        pos = _decode_positions(mode, rest, qa.shape[1]) if mode in ("tensor", "list") else None
        mask = rest[0] if mode == "mask" else None
        return _decode_attend(qa, ka, va, pos, mask, sc, window, sink)

    # The positions of a cur_pos list are traced scalars, not part of the program: every decode
    # step reuses the one compiled program (TT-NN passes them as runtime args too).
    return run_op(
        "sdpa_decode",
        fn,
        [q, k, v, *extra, *sinks],
        static=(sc, mode, window, bool(sinks), _chunks(program_config)),
        scalars=positions,
    )


def paged_scaled_dot_product_attention_decode(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    page_table_tensor: Tensor,
    *,
    is_causal: bool = True,
    attn_mask: Tensor | None = None,
    cur_pos_tensor: Tensor | None = None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    attention_sink: Tensor | None = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Decode attention over paged caches: q [1, b, nh, d]; k/v [max_blocks, nkv, block, d]
    read through ``page_table_tensor`` (int32 [b, blocks_per_user]); user ``i`` sees its
    positions ``<= cur_pos_tensor[i]`` (-1 skips it)."""
    op = "paged_scaled_dot_product_attention_decode"
    check_hw_kwargs(op, kwargs)
    q, k, v = input_tensor_q, input_tensor_k, input_tensor_v
    _check_heads(op, q, k, v, 2)
    users = q._shape[1]
    length = _check_page_table(
        op, page_table_tensor, page_table_rows(op, page_table_tensor, users), k
    )
    d = q._shape[-1]
    sc = float(scale) if scale is not None else 1.0 / float(d) ** 0.5
    window = None if sliding_window_size is None else int(sliding_window_size)
    if is_causal and cur_pos_tensor is None:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: Must have cur_pos tensor for paged attention in causal "
            "mode.\nfix: pass cur_pos_tensor=int32 [batch] (the position of every user)."
        )
    mode, extra, _ = _decode_setup(
        op, q, k, bool(is_causal), attn_mask, None, cur_pos_tensor, length
    )

    sinks = _sink_inputs(op, attention_sink, q)

    def fn(qa: Any, ka: Any, va: Any, table: Any, *rest: Any) -> Any:
        sink, rest = _split_sink(rest, len(extra), bool(sinks))
        table = table[:users]  # a sharded table: every core's shard holds all the users
        kf, vf = _gather_pages(ka, table), _gather_pages(va, table)
        pos = _decode_positions(mode, rest, users) if mode == "tensor" else None
        mask = rest[0] if mode == "mask" else None
        return _decode_attend(qa, kf, vf, pos, mask, sc, window, sink)

    return run_op(
        "paged_sdpa_decode",
        fn,
        [q, k, v, page_table_tensor, *extra, *sinks],
        static=(sc, mode, window, bool(sinks), users, _chunks(program_config)),
    )


def _chunks(program_config: Any) -> tuple[Any, Any]:
    """The chunk sizes TT-NN's SDPA decode hashes its program on (``sdpa_decode_op.cpp``:
    ``compute_program_hash``): one program cache entry per chunk size, as there."""
    return (getattr(program_config, "q_chunk_size", None),
            getattr(program_config, "k_chunk_size", None))  # fmt: skip


def _latent_values(op: str, k: Tensor, head_dim_v: int) -> Tensor:
    """The values of multi-latent attention: the first ``head_dim_v`` columns of the KV cache
    (the latent part of its [latent ++ rope] rows), as FlashMLA reads them."""
    dv = int(head_dim_v)
    if not 0 < dv <= k._shape[-1]:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: head_dim_v={dv} must be in [1, {k._shape[-1]}] (the cache's "
            "head dim, latent plus rope).\nfix: pass the latent width (kv_lora_rank)."
        )
    return _slice(k, [0] * len(k._shape), [*k._shape[:-1], dv])


def flash_multi_latent_attention_decode(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    head_dim_v: int,
    *,
    is_causal: bool = True,
    attn_mask: Tensor | None = None,
    cur_pos: list[int] | None = None,
    cur_pos_tensor: Tensor | None = None,
    attention_sink: Tensor | None = None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    memory_config: Any = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """Multi-latent attention for one decode step (TT-NN's FlashMLA decode): q [1, b, nh, dk]
    over one cache [b, 1, S, dk] that is both K and, in its first ``head_dim_v`` columns, V;
    out [1, b, nh, head_dim_v]. Otherwise as :func:`scaled_dot_product_attention_decode`."""
    v = _latent_values("flash_multi_latent_attention_decode", input_tensor_k, head_dim_v)
    return scaled_dot_product_attention_decode(
        input_tensor_q,
        input_tensor_k,
        v,
        is_causal=is_causal,
        attn_mask=attn_mask,
        cur_pos=cur_pos,
        cur_pos_tensor=cur_pos_tensor,
        attention_sink=attention_sink,
        scale=scale,
        sliding_window_size=sliding_window_size,
    )


def flash_mla_prefill(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    head_dim_v: int,
    *,
    attn_mask: Tensor | None = None,
    is_causal: bool = True,
    scale: float | None = None,
    memory_config: Any = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """Multi-latent attention for prefill (TT-NN's ``flash_mla_prefill``, sdpa with ``use_mla``:
    ttnn/cpp/ttnn/operations/transformer/sdpa/sdpa.cpp): q [b, nh, s, dk] over k [b, nkv, s, dk]
    that is also V in its first ``head_dim_v`` columns; out [b, nh, s, head_dim_v]. Otherwise as
    :func:`scaled_dot_product_attention` (causal by default, ``attn_mask`` added to the scores).

    >>> q = ttnn.from_torch(torch.rand(1, 4, 32, 64), device=mesh, layout=ttnn.TILE_LAYOUT)
    >>> kv = ttnn.from_torch(torch.rand(1, 1, 32, 64), device=mesh, layout=ttnn.TILE_LAYOUT)
    >>> ttnn.transformer.flash_mla_prefill(q, kv, head_dim_v=32).shape
    Shape([1, 4, 32, 32])
    """
    v = _latent_values("flash_mla_prefill", input_tensor_k, head_dim_v)
    return scaled_dot_product_attention(
        input_tensor_q,
        input_tensor_k,
        v,
        attn_mask=attn_mask,
        is_causal=is_causal,
        scale=scale,
        program_config=program_config,
        memory_config=memory_config,
    )


def paged_flash_multi_latent_attention_decode(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    head_dim_v: int,
    page_table_tensor: Tensor,
    *,
    is_causal: bool = True,
    attn_mask: Tensor | None = None,
    cur_pos_tensor: Tensor | None = None,
    attention_sink: Tensor | None = None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    memory_config: Any = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """:func:`flash_multi_latent_attention_decode` over a paged cache [max_blocks, 1, block,
    dk] read through ``page_table_tensor`` (deepseek_v3's MLA decode)."""
    op = "paged_flash_multi_latent_attention_decode"
    v = _latent_values(op, input_tensor_k, head_dim_v)
    return paged_scaled_dot_product_attention_decode(
        input_tensor_q,
        input_tensor_k,
        v,
        page_table_tensor,
        is_causal=is_causal,
        attn_mask=attn_mask,
        cur_pos_tensor=cur_pos_tensor,
        attention_sink=attention_sink,
        scale=scale,
        sliding_window_size=sliding_window_size,
    )


def chunked_scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    page_table_tensor: Tensor,
    chunk_start_idx: int,
    *,
    scale: float | None = None,
    memory_config: Any = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Causal prefill of one chunk: q [b, nh, s, d] holds positions ``chunk_start_idx ..
    chunk_start_idx + s - 1``; keys/values come from paged caches [max_blocks, nkv, block, d]
    through ``page_table_tensor`` [b, blocks_per_user] (earlier chunks already filled in)."""
    op = "chunked_scaled_dot_product_attention"
    check_hw_kwargs(op, kwargs)
    check_sdpa_program_config(op, program_config)
    q, k, v = input_tensor_q, input_tensor_k, input_tensor_v
    _check_heads(op, q, k, v, 1)
    length = _check_page_table(op, page_table_tensor, q._shape[0], k)
    start = int(chunk_start_idx)
    s = q._shape[2]
    if start < 0 or start + s > length:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: chunk_start_idx={start} with a chunk of {s} queries ends at "
            f"{start + s}, beyond the {length} positions the page table maps per user.\n"
            "fix: give the page table enough blocks for chunk_start_idx + chunk length."
        )
    d = q._shape[-1]
    sc = float(scale) if scale is not None else 1.0 / float(d) ** 0.5

    def fn(qa: Any, ka: Any, va: Any, table: Any, start_pos: Any) -> Any:
        kf, vf = _gather_pages(ka, table), _gather_pages(va, table)
        i = start_pos + jnp.arange(qa.shape[2])[:, None]
        j = jnp.arange(kf.shape[2])[None, :]
        mask = jnp.where(j <= i, 0.0, -jnp.inf)
        return _attend(qa, kf, vf, mask, sc)

    return run_op("chunked_sdpa", fn, [q, k, v, page_table_tensor], static=(sc,), scalars=(start,))


def rotary_embedding(
    input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    token_index: int | None = None,
    *,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Rotate-half rotary embedding: ``x * cos + rotate_half(x) * sin`` per device.

    ``cos_cache``/``sin_cache`` are [1, 1, S, d]; for prefill positions ``0..s-1`` are used, for
    decode (``token_index`` given) that single position.
    """
    check_hw_kwargs("rotary_embedding", kwargs)
    decode = token_index is not None
    # The token index is a traced scalar: each decode step reuses the compiled program.
    scalars = (
        (
            _check_index(
                "rotary_embedding",
                "token_index",
                cast(int, token_index),
                cos_cache._shape[-2],
                "the cos/sin cache",
            ),
        )
        if decode
        else ()
    )

    def fn(x: Any, cos: Any, sin: Any, *idx: Any) -> Any:
        s = x.shape[-2]
        if decode:
            c = jax.lax.dynamic_slice_in_dim(cos, idx[0], 1, axis=-2)
            si = jax.lax.dynamic_slice_in_dim(sin, idx[0], 1, axis=-2)
        else:
            c, si = cos[..., :s, :], sin[..., :s, :]
        half = x.shape[-1] // 2
        rot = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        out = x.astype(jnp.float32) * c.astype(jnp.float32) + rot.astype(jnp.float32) * si.astype(
            jnp.float32
        )
        return out.astype(x.dtype)

    return run_op(
        "rotary_embedding",
        fn,
        [input_tensor, cos_cache, sin_cache],
        static=(decode,),
        scalars=scalars,
    )


def concat_heads(input_tensor: Tensor, **kwargs: Any) -> Tensor:
    """[b, nh, s, d] -> [b, s, nh*d], per device."""
    check_hw_kwargs("concat_heads", kwargs)

    def fn(x: Any) -> Any:
        b, h, s, d = x.shape
        return jnp.transpose(x, (0, 2, 1, 3)).reshape(b, s, h * d)

    return run_op("concat_heads", fn, [input_tensor])


def split_heads(input_tensor: Tensor, num_heads: int, **kwargs: Any) -> Tensor:
    """[b, s, nh*d] -> [b, nh, s, d] per device (``num_heads`` per device)."""
    check_hw_kwargs("split_heads", kwargs)
    n = int(num_heads)
    d = norm_dim("split_heads", input_tensor, -1)
    if input_tensor._shape[d] % n:
        raise ShapeMismatchError(
            f"split_heads: width {input_tensor._shape[d]} per device is not divisible by "
            f"num_heads={n}.\nfix: pass the number of heads per device."
        )

    def fn(x: Any) -> Any:
        b, s, w = x.shape
        return jnp.transpose(x.reshape(b, s, n, w // n), (0, 2, 1, 3))

    return run_op("split_heads", fn, [input_tensor], static=(n,))


_TILE = 32


def _heads_error(op: str, msg: str, fix: str) -> ShapeMismatchError:
    return ShapeMismatchError(f"ttnn.transformer.{op}: {msg}\nfix: {fix}")


def concatenate_heads(input_tensor: Tensor, *, memory_config: Any = None) -> Tensor:
    """[batch, num_heads, seq, head_size] -> [batch, seq, num_heads * head_size], per device
    (TT-NN's ``ttnn.transformer.concatenate_heads``; head_size a multiple of 32)."""
    op = "concatenate_heads"
    shape = input_tensor._shape
    if len(shape) != 4:
        raise _heads_error(
            op,
            f"Input tensor must have rank 4. Shape: {list(shape)}",
            "pass [batch_size, num_heads, sequence_size, head_size].",
        )
    b, h, s, d = shape
    if d % _TILE:
        raise _heads_error(
            op,
            f"Head size must be a multiple of {_TILE} but was found to be {d}.",
            "pad the heads of the matmul weights that produce this tensor to a multiple of 32.",
        )

    def fn(x: Any) -> Any:
        return jnp.transpose(x, (0, 2, 1, 3)).reshape(b, s, h * d)

    return cast(Tensor, run_op(op, fn, [input_tensor], memory_config=memory_config))


def split_query_key_value_and_split_heads(
    input_tensor: Tensor,
    kv_input_tensor: Tensor | None = None,
    *,
    num_heads: int,
    num_kv_heads: int | None = None,
    transpose_key: bool = True,
    memory_config: Any = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """[batch, seq, (num_heads + 2 * num_kv_heads) * head_size] -> query [batch, num_heads, seq,
    head_size], key [batch, num_kv_heads, head_size, seq] (``transpose_key``; else seq before
    head_size), value [batch, num_kv_heads, seq, head_size], per device.

    The width holds all query heads, then all key heads, then all value heads; with
    ``kv_input_tensor`` ([batch, seq, 2 * width]) the keys and values come from there. A sharded
    input (and no ``num_kv_heads``) holds the heads interleaved, q1 k1 v1 ... qn kn vn, as
    TT-NN's sharded kernel reads them. With ``num_kv_heads`` TT-NN runs its Falcon-7B kernel;
    the split here is its docstring's reference for any head counts. Outputs are interleaved
    (``memory_config`` when given); TT-NN's sharded kernels would re-shard them per head.
    """
    op = "split_query_key_value_and_split_heads"
    shape = input_tensor._shape
    if len(shape) != 3:
        raise _heads_error(
            op,
            f"Invalid input tensor: expected 3 dimensions, but found {len(shape)} "
            f"(shape {list(shape)}).",
            "pass [batch_size, sequence_size, hidden] (ttnn.reshape a 4-D [b, 1, s, w] first).",
        )
    if input_tensor._layout is not Layout.TILE:
        raise LayoutError(
            f"ttnn.transformer.{op}: Invalid layout: input tensor must use TILE_LAYOUT, but found "
            f"{input_tensor._layout!r}.\nfix: ttnn.to_layout(input_tensor, ttnn.TILE_LAYOUT)."
        )
    nh = int(num_heads)
    b, s, w = shape
    tensors = [input_tensor]
    interleaved = False
    if num_kv_heads is not None:
        nkv = int(num_kv_heads)
        if transpose_key:
            raise TTJaxError(
                f"ttnn.transformer.{op}: Invalid configuration: Transpose is set to true, but this "
                f"is not supported when separate num_kv_heads ({nkv}) is used.\n"
                "fix: pass transpose_key=False with num_kv_heads (transpose the key afterwards)."
            )
        if kv_input_tensor is not None:
            raise _heads_error(
                op,
                "kv_input_tensor is not supported together with num_kv_heads.",
                "fuse q, k and v in input_tensor, or drop num_kv_heads.",
            )
        groups = nh + 2 * nkv
    else:
        nkv = nh
        if kv_input_tensor is not None:
            kv_shape = kv_input_tensor._shape
            if len(kv_shape) != 3 or kv_shape[0] != b or kv_shape[1] != s or kv_shape[2] != 2 * w:
                raise _heads_error(
                    op,
                    f"Dimension mismatch: the KV tensor {list(kv_shape)} must be [{b}, {s}, "
                    f"{2 * w}] for the Q tensor {list(shape)} (same batch and sequence, twice "
                    "the hidden size).",
                    "pass kv_input_tensor [batch, seq, 2 * hidden] holding all k heads then all v.",
                )
            if input_tensor.is_sharded():
                raise _heads_error(
                    op,
                    "Invalid operation: KV tensor should not be provided when the input tensor is "
                    "sharded.",
                    "pass the fused, head-interleaved QKV tensor alone, or an interleaved input.",
                )
            tensors.append(kv_input_tensor)
            groups = nh
        else:
            groups = 3 * nh
            interleaved = input_tensor.is_sharded()
    if nh <= 0 or nkv <= 0 or w % groups:
        raise _heads_error(
            op,
            f"the hidden size {w} (shape {list(shape)}) does not split into {groups} heads "
            f"({nh} query heads, {nkv} key/value heads).",
            "pass the heads this tensor holds (per device, when the weights are sharded).",
        )
    d = w // groups
    if d % _TILE:
        raise _heads_error(
            op,
            f"Invalid head size: {d} is not a multiple of tile size {_TILE}.",
            "update the preceding matmul to include padding in the weights.",
        )
    transpose = bool(transpose_key)

    def heads(x: Any, n: int) -> Any:
        return jnp.transpose(x.reshape(b, s, n, d), (0, 2, 1, 3))

    def fn(x: Any, *kv: Any) -> Any:
        if kv:
            q, k, v = x, kv[0][..., : nkv * d], kv[0][..., nkv * d :]
        elif interleaved:
            qkv = x.reshape(b, s, nh, 3, d)
            q, k, v = (qkv[..., i, :].reshape(b, s, nh * d) for i in range(3))
        else:
            q, k, v = x[..., : nh * d], x[..., nh * d : (nh + nkv) * d], x[..., (nh + nkv) * d :]
        kh = heads(k, nkv)
        return heads(q, nh), (jnp.swapaxes(kh, -1, -2) if transpose else kh), heads(v, nkv)

    out = run_op(
        op,
        fn,
        tensors,
        static=(nh, nkv, d, transpose, interleaved),
        memory_config=memory_config,
    )
    return cast(tuple[Tensor, Tensor, Tensor], tuple(out))
