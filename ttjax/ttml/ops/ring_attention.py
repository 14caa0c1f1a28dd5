"""Context parallelism (TTML's ``enable_cp``): causal ring attention over the sequence-split axis.

The sequence is split over the CP mesh axis. Each device keeps its queries; the K/V blocks travel
once around the ring (``lax.ppermute``, ``cp - 1`` hops inside a ``lax.scan``) and the softmax is
combined online in float32 (running max and sum of exponentials), so a device holds one remote K/V
block and one ``[T_local, T_local]`` block of scores at a time. Each step is a ``jax.checkpoint``:
autodiff keeps only its inputs (K/V block, running output; O(T_local) each) and recomputes the
scores in the backward, where the ppermutes transpose into the reverse ring.

Load balancing: the sequence is cut into ``2 * cp`` chunks and device ``i`` holds chunks ``i`` and
``2*cp-1-i`` (permute the tokens with :func:`load_balance_order` before sharding, undo with
:func:`inverse_load_balance_order`). Under the causal mask every device then does the same work:
a remote block is either the first half of its keys seen by all local queries, or all its keys
seen by the second half of the local queries.

Inside ``shard_map`` (``axis`` is the CP mesh axis name, ``None`` = no CP):

>>> pos = local_positions(q.shape[1], "cp")     # global positions, for RoPE / position embeddings
>>> out = ring_attention(q, k, v, "cp")         # [B, T_local, H, D], causal
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ttjax.errors import ShapeMismatchError, ShardingError

_Acc = tuple[Any, Any, Any]  # (out [B, T, Hk, G, D], max, sum of exp [B, T, Hk, G]), float32


def _check_split(seq_len: int, cp: int, what: str) -> None:
    if isinstance(cp, bool) or not isinstance(cp, (int, np.integer)) or cp < 1:
        raise ShardingError(
            f"cp={cp!r} must be a positive int (the size of the CP mesh axis).\n"
            "fix: pass the mesh axis size, e.g. cp=mesh.shape[cp_axis]."
        )
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 1:
        raise ShardingError(
            f"{what}={seq_len!r} must be a positive int.\nfix: pass the sequence length."
        )
    if seq_len % (2 * cp):
        raise ShardingError(
            f"{what}={seq_len} does not split into 2*cp = {2 * cp} equal chunks (cp={cp}): load "
            "balancing gives each device two chunks.\n"
            f"fix: pad or crop the sequence to a multiple of {2 * cp}, e.g. "
            f"{-(-seq_len // (2 * cp)) * 2 * cp}."
        )


def load_balance_order(seq_len: int, cp: int) -> np.ndarray:
    """Positions in load-balanced order: split evenly over ``cp`` devices, device ``i`` gets
    sequence chunks ``i`` and ``2*cp-1-i`` (of ``2*cp``); ``x[:, order]`` permutes a [B, T, ...].

    >>> order = load_balance_order(8, 2)  # device 0: chunks 0 and 3; device 1: chunks 1 and 2
    >>> order.tolist()
    [0, 1, 6, 7, 2, 3, 4, 5]
    >>> inverse_load_balance_order(8, 2)[order].tolist()
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    _check_split(seq_len, cp, "seq_len")
    chunks = np.arange(seq_len, dtype=np.int32).reshape(2 * cp, seq_len // (2 * cp))
    return np.concatenate([np.concatenate([chunks[i], chunks[2 * cp - 1 - i]]) for i in range(cp)])


def inverse_load_balance_order(seq_len: int, cp: int) -> np.ndarray:
    """The inverse permutation of :func:`load_balance_order`: ``y[:, inverse]`` restores order."""
    return np.argsort(load_balance_order(seq_len, cp)).astype(np.int32)


def _axis(axis: str | None) -> tuple[int, Any]:
    """(size, this device's index) of mesh axis ``axis``; (1, 0) for ``None``."""
    if axis is None:
        return 1, 0
    try:
        return lax.axis_size(axis), lax.axis_index(axis)
    except NameError:
        raise ShardingError(
            f"axis={axis!r} is not a mesh axis bound here: ring attention runs inside "
            "jax.shard_map over a mesh that has this axis.\n"
            "fix: call it inside jax.shard_map(..., mesh=...) with the CP axis name, or pass "
            "axis=None for no context parallelism."
        ) from None


def _positions(src: Any, n: int, t_local: int, load_balanced: bool) -> Any:
    """Global positions of the ``t_local`` tokens held by device ``src`` of ``n``."""
    if load_balanced:
        c = t_local // 2
        r = jnp.arange(c, dtype=jnp.int32)
        return jnp.concatenate([src * c + r, (2 * n - 1 - src) * c + r])
    return src * t_local + jnp.arange(t_local, dtype=jnp.int32)


def local_positions(t_local: int, axis: str | None, load_balanced: bool = True) -> Any:
    """Global positions [t_local] (int32) of this device's tokens, inside ``shard_map``.

    Use them for RoPE and learned position embeddings under CP; ``axis=None`` gives
    ``arange(t_local)``.
    """
    n, idx = _axis(axis)
    if axis is not None and load_balanced and t_local % 2:
        raise ShardingError(
            f"t_local={t_local} is odd: with load balancing each device holds two equal chunks.\n"
            "fix: make the sequence a multiple of 2*cp, or pass load_balanced=False."
        )
    return _positions(idx, n, t_local, load_balanced and axis is not None)


def _attend(acc: _Acc, q: Any, k: Any, v: Any, mask: Any, scale: float) -> _Acc:
    """Fold one K/V block into the running (output, max, sum) of the queries ``q``."""
    o, m, total = acc
    s = jnp.einsum("bqhgd,bkhd->bqhgk", q, k, preferred_element_type=jnp.float32) * scale
    if mask is not None:  # [Tq, Tk], True = visible
        s = jnp.where(mask[None, :, None, None, :], s, -jnp.inf)
    # The max only keeps exp() in range: the result does not depend on it, so no gradient.
    m_new = jnp.maximum(m, lax.stop_gradient(jnp.max(s, axis=-1)))
    m_safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)
    p = jnp.exp(s - m_safe[..., None])
    alpha = jnp.exp(m - m_safe)
    pv = jnp.einsum("bqhgk,bkhd->bqhgd", p, v, preferred_element_type=jnp.float32)
    return alpha[..., None] * o + pv, m_new, alpha * total + jnp.sum(p, axis=-1)


def _remote(
    acc: _Acc,
    q: Any,
    k: Any,
    v: Any,
    src: Any,
    idx: Any,
    *,
    causal: bool,
    load_balanced: bool,
    scale: float,
) -> _Acc:
    """Fold in the K/V block of device ``src`` != ``idx``; under the causal mask a remote block
    is all visible or all hidden per chunk, so no mask is built and hidden work is skipped."""
    if not causal:
        return _attend(acc, q, k, v, None, scale)
    if not load_balanced:
        return lax.cond(src < idx, lambda a: _attend(a, q, k, v, None, scale), lambda a: a, acc)
    c = q.shape[1] // 2

    def earlier(a: _Acc) -> _Acc:  # src < idx: every local query sees the block's first chunk
        return _attend(a, q, k[:, :c], v[:, :c], None, scale)

    def later(a: _Acc) -> _Acc:  # src > idx: only the local second chunk sees it, all of it
        o, m, total = _attend((a[0][:, c:], a[1][:, c:], a[2][:, c:]), q[:, c:], k, v, None, scale)
        return (
            jnp.concatenate([a[0][:, :c], o], axis=1),
            jnp.concatenate([a[1][:, :c], m], axis=1),
            jnp.concatenate([a[2][:, :c], total], axis=1),
        )

    return lax.cond(src < idx, earlier, later, acc)


def _check_qkv(q: Any, k: Any, v: Any) -> None:
    shapes = {"q": tuple(q.shape), "k": tuple(k.shape), "v": tuple(v.shape)}
    if any(len(s) != 4 for s in shapes.values()):
        raise ShapeMismatchError(
            f"ring_attention takes [B, T_local, H, D] q, k, v; got shapes {shapes}.\n"
            "fix: reshape to [batch, tokens, heads, head_dim] (jax.nn.dot_product_attention's "
            "layout)."
        )
    if k.shape != v.shape or k.shape[:2] != q.shape[:2] or k.shape[3] != q.shape[3]:
        raise ShapeMismatchError(
            f"q, k, v must share batch, tokens and head_dim, and k must equal v; got {shapes}.\n"
            "fix: give k and v the shape [B, T_local, KV heads, D] of this device's tokens."
        )
    if q.shape[2] % k.shape[2]:
        raise ShapeMismatchError(
            f"q's {q.shape[2]} heads are not a multiple of k/v's {k.shape[2]} heads (GQA).\n"
            "fix: use a KV head count that divides the query head count."
        )


def ring_attention(
    q: Any,
    k: Any,
    v: Any,
    axis: str | None,
    *,
    causal: bool = True,
    load_balanced: bool = True,
    scale: float | None = None,
) -> Any:
    """Attention of this device's queries over the whole (CP-split) sequence, inside ``shard_map``.

    ``q`` [B, T_local, H, D], ``k``/``v`` [B, T_local, KV heads, D] (GQA: H a multiple of KV
    heads), in the order :func:`load_balance_order` gives when ``load_balanced``. Returns
    [B, T_local, H, D] in ``q``'s dtype; ``axis=None`` is plain attention on the local sequence.
    """
    _check_qkv(q, k, v)
    n, idx = _axis(axis)
    b, t, h, d = q.shape
    hk = k.shape[2]
    balanced = load_balanced and axis is not None
    if balanced and t % 2:
        raise ShardingError(
            f"T_local={t} is odd: with load balancing each device holds two equal chunks.\n"
            "fix: make the sequence a multiple of 2*cp, or pass load_balanced=False."
        )
    scale = float(d) ** -0.5 if scale is None else float(scale)
    qg = q.reshape(b, t, hk, h // hk, d)

    # Step 0: the local (diagonal) block, the only one that needs a per-token causal mask.
    qpos = _positions(idx, n, t, balanced)
    mask = (qpos[:, None] >= qpos[None, :]) if causal else None
    stats = jnp.zeros((b, t, hk, h // hk), jnp.float32)
    init = (jnp.zeros((b, t, hk, h // hk, d), jnp.float32), stats - jnp.inf, stats)
    acc = jax.checkpoint(partial(_attend, scale=scale))(init, qg, k, v, mask)

    if n > 1:
        remote = jax.checkpoint(
            partial(_remote, causal=causal, load_balanced=balanced, scale=scale),
            prevent_cse=False,
        )
        perm = [(j, (j + 1) % n) for j in range(n)]

        def step(carry: tuple[_Acc, Any, Any], s: Any) -> tuple[tuple[_Acc, Any, Any], None]:
            acc, kb, vb = carry  # device (idx - s)'s block
            nxt = lax.ppermute((kb, vb), axis, perm)  # sent on while this block is used
            return (remote(acc, qg, kb, vb, (idx - s) % n, idx), *nxt), None

        # cp - 1 hops: steps 1 .. cp-2 pass their block on, the last step only uses it.
        kb, vb = lax.ppermute((k, v), axis, perm)
        (acc, kb, vb), _ = lax.scan(step, (acc, kb, vb), jnp.arange(1, n - 1, dtype=jnp.int32))
        acc = remote(acc, qg, kb, vb, (idx + 1) % n, idx)

    o, _, total = acc
    return (o / total[..., None]).reshape(b, t, h, d).astype(q.dtype)


__all__ = ["inverse_load_balance_order", "load_balance_order", "local_positions", "ring_attention"]
