"""Transformer ops, per device: scaled-dot-product attention (prefill and decode), rotary
embeddings, and KV-cache updates.

With heads split across devices (tensor parallel), each device attends over its own heads;
nothing here communicates.

>>> out = ttnn.transformer.scaled_dot_product_attention(q, k, v, is_causal=True)
"""

from __future__ import annotations

from typing import Any, cast

import jax
import jax.numpy as jnp

from ttjax._dispatch import run_op
from ttjax.errors import ShapeMismatchError
from ttjax.ops._common import check_hw_kwargs, norm_dim, write_output
from ttjax.placements import LOCAL, PlacementReplicate
from ttjax.tensor import Tensor


def _check_heads(op: str, q: Tensor, k: Tensor, v: Tensor, head_axis: int) -> None:
    nq, nk, nv = q._shape[head_axis], k._shape[1], v._shape[1]
    if nk != nv or nk == 0 or nq % nk:
        raise ShapeMismatchError(
            f"ttnn.transformer.{op}: q has {nq} heads and k/v have {nk}/{nv} per device; "
            "q heads must be a multiple of the (equal) k/v heads.\nfix: split q and k/v heads "
            "over the same devices (e.g. both on the head dim), so every device keeps whole groups."
        )


def _check_index(op: str, name: str, value: int, size: int, what: str) -> int:
    """A position/batch index in ``[0, size)``; XLA would clamp an out-of-range one silently."""
    v = int(value)
    if not 0 <= v < size:
        raise ShapeMismatchError(
            f"ttnn.{op}: {name}={v} is out of range for {what} of size {size} (per device).\n"
            f"fix: use {name} in [0, {size - 1}]."
        )
    return v


def _attend(q: Any, k: Any, v: Any, mask: Any, scale: float) -> Any:
    """q [b, h, s, d], k/v [b, kv, t, d]: grouped-query attention, float32 scores and softmax.

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
    return jnp.reshape(out, (b, h, s, d)).astype(q.dtype)


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
    added to the scores. Grouped-query attention when nh is a multiple of nkv.
    """
    check_hw_kwargs("scaled_dot_product_attention", kwargs)
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
            if window is not None:
                allowed = allowed & (j > i - window)
            mask = jnp.where(allowed, 0.0, -jnp.inf)
        if rest:
            extra = rest[0].astype(jnp.float32)
            mask = extra if mask is None else mask + extra
        return _attend(qa, ka, va, mask, sc)

    return run_op("sdpa", fn, tensors, static=(sc, causal, window, attn_mask is not None))


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
    program_config: Any = None,
    compute_kernel_config: Any = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Attention for one decode step: q [1, b, nh, d] over caches k/v [b, nkv, S, d].

    User ``i`` attends to cache positions ``<= cur_pos[i]``; pass ``cur_pos_tensor`` (an int32
    tensor [b]) to keep the position on device, which is what a replayed trace needs.
    """
    check_hw_kwargs("scaled_dot_product_attention_decode", kwargs)
    q, k, v = input_tensor_q, input_tensor_k, input_tensor_v
    _check_heads("scaled_dot_product_attention_decode", q, k, v, 2)
    d = q._shape[-1]
    sc = float(scale) if scale is not None else 1.0 / float(d) ** 0.5
    tensors = [q, k, v]
    mode = "none"
    if cur_pos_tensor is not None:
        tensors.append(cur_pos_tensor)
        mode = "tensor"
    elif cur_pos is not None:
        mode = "list"
    elif attn_mask is not None:
        tensors.append(attn_mask)
        mode = "mask"
    # The positions of a cur_pos list are traced scalars, not part of the program: every decode
    # step reuses the one compiled program (TT-NN passes them as runtime args too).
    positions = tuple(int(p) for p in cur_pos or ()) if mode == "list" else ()

    def fn(qa: Any, ka: Any, va: Any, *rest: Any) -> Any:
        if mode == "mask":
            qb = jnp.transpose(qa, (1, 2, 0, 3))  # [b, nh, 1, d]
            out = _attend(qb, ka, va, rest[0].astype(jnp.float32), sc)  # [b, nh, 1, d]
            return jnp.transpose(out, (2, 0, 1, 3))
        # One query per user: no query-length dim in the einsums, so XLA reads the caches in
        # their own layout (a size-1 dim there made it transpose the V cache every step).
        b, nh, d = qa.shape[1:]
        kv, total = ka.shape[1], ka.shape[2]
        qg = jnp.reshape(qa[0], (b, kv, nh // kv, d))
        scores = jnp.einsum("bkgd,bktd->bkgt", qg, ka, preferred_element_type=jnp.float32) * sc
        if mode in ("tensor", "list"):
            pos = (
                rest[0].reshape(-1).astype(jnp.int32)
                if mode == "tensor"
                else jnp.stack([jnp.asarray(p, jnp.int32) for p in rest])
            )
            allowed = jnp.arange(total)[None, :] <= pos[:, None]  # [b, S]
            scores = scores + jnp.where(allowed, 0.0, -jnp.inf)[:, None, None, :]
        probs = jax.nn.softmax(scores, axis=-1).astype(va.dtype)
        out = jnp.einsum("bkgt,bktd->bkgd", probs, va, preferred_element_type=jnp.float32)
        return jnp.reshape(out, (1, b, nh, d)).astype(qa.dtype)

    return run_op("sdpa_decode", fn, tensors, static=(sc, mode), scalars=positions)


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


# ---------------------------------------------------------------------------------------------
# KV cache (in place, like TT-NN)
# ---------------------------------------------------------------------------------------------


def _cache_rule(tensors: Any, shapes: Any) -> list[Any]:
    """A cache update keeps the cache's own layout; replicated axes become per-device only when
    the written values differ across them."""
    cache = tensors[0]
    out = []
    for i, p in enumerate(cache._placements):
        if not isinstance(p, PlacementReplicate):
            out.append(p)
        elif all(isinstance(t._placements[i], PlacementReplicate) for t in tensors):
            out.append(p)
        else:
            out.append(LOCAL)
    return [tuple(out)]


def fill_cache(cache_tensor: Tensor, input_tensor: Tensor, batch_idx: int, **kwargs: Any) -> Tensor:
    """Write a prefill's k or v [1, nkv, s, d] into ``cache_tensor[batch_idx, :, :s]`` in place."""
    check_hw_kwargs("fill_cache", kwargs)

    def fn(cache: Any, x: Any, b: Any) -> Any:
        return jax.lax.dynamic_update_slice(cache, x.astype(cache.dtype), (b, 0, 0, 0))

    out = run_op(
        "fill_cache",
        fn,
        [cache_tensor, input_tensor],
        scalars=(
            _check_index(
                "fill_cache", "batch_idx", batch_idx, cache_tensor._shape[0], "the cache batch"
            ),
        ),
        out_dtype=cache_tensor._dtype,
        placement_rule=_cache_rule,
    )
    return write_output(out, cache_tensor)


def update_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    update_idx: int,
    batch_offset: int = 0,
    **kwargs: Any,
) -> Tensor:
    """Write one decode step's k or v [1, nkv, b, d] at position ``update_idx`` of every user, in place."""
    check_hw_kwargs("update_cache", kwargs)

    def fn(cache: Any, x: Any, pos: Any, off: Any) -> Any:
        upd = jnp.transpose(x, (2, 1, 0, 3)).astype(cache.dtype)  # [b, nkv, 1, d]
        return jax.lax.dynamic_update_slice(cache, upd, (off, 0, pos, 0))

    out = run_op(
        "update_cache",
        fn,
        [cache_tensor, input_tensor],
        scalars=(
            _check_index(
                "update_cache", "update_idx", update_idx, cache_tensor._shape[2], "the cache length"
            ),
            int(batch_offset),
        ),
        out_dtype=cache_tensor._dtype,
        placement_rule=_cache_rule,
    )
    return write_output(out, cache_tensor)


def paged_update_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    *,
    update_idxs: list[int] | None = None,
    update_idxs_tensor: Tensor | None = None,
    share_cache: Any = None,
    page_table: Any = None,
    batch_offset: int = 0,
    **kwargs: Any,
) -> Tensor:
    """Write one decode step's k or v [1, b, nkv, d] at each user's own position, in place.

    ``update_idxs_tensor`` (int32 [b], on device) keeps positions on device for trace replay.
    """
    check_hw_kwargs("paged_update_cache", kwargs)
    tensors = [cache_tensor, input_tensor]
    positions: tuple[int, ...] = ()
    if update_idxs_tensor is not None:
        tensors.append(update_idxs_tensor)
    elif update_idxs is not None:
        positions = tuple(int(p) for p in update_idxs)
    else:
        raise ShapeMismatchError(
            "ttnn.experimental.paged_update_cache needs update_idxs or update_idxs_tensor.\n"
            "fix: pass the position of every user."
        )

    from_tensor = update_idxs_tensor is not None

    def fn(cache: Any, x: Any, *rest: Any) -> Any:
        if from_tensor:
            pos = rest[0].reshape(-1).astype(jnp.int32)
        else:  # one traced scalar per user: every step reuses the compiled program
            pos = jnp.stack([jnp.asarray(p, jnp.int32) for p in rest])
        upd = x[0].astype(cache.dtype)  # [b, nkv, d]
        # A scatter writes one position per user in place (no pass over the whole cache);
        # position -1 (TT-NN: skip this user) maps past the end, where mode="drop" ignores it.
        pos = jnp.where(pos < 0, cache.shape[2], pos)
        return cache.at[jnp.arange(cache.shape[0]), :, pos, :].set(upd, mode="drop")

    out = run_op(
        "paged_update_cache",
        fn,
        tensors,
        static=(from_tensor,),
        scalars=positions,
        out_dtype=cache_tensor._dtype,
        placement_rule=_cache_rule,
    )
    return write_output(out, cache_tensor)


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
