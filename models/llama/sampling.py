"""Host-side next-token selection over numpy logits ``[B, vocab]``: greedy and top-k/top-p sampling.

Order of operations (as in Hugging Face's ``generate``): temperature, then top-k, then top-p.
Returns int32 token ids ``[B]``.
"""

from __future__ import annotations

import numpy as np


def _as_2d(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 2:
        raise ValueError(f"logits must be [B, vocab]; got shape {logits.shape}")
    return logits


def greedy(logits: np.ndarray) -> np.ndarray:
    """The highest-scoring id of each row (first one on ties): [B, vocab] -> [B] int32."""
    return np.argmax(_as_2d(logits), axis=-1).astype(np.int32)


def top_k_mask(logits: np.ndarray, k: int) -> np.ndarray:
    """Boolean [B, vocab]: the ``k`` largest logits of each row (ties broken by lower index)."""
    logits = _as_2d(logits)
    k = min(int(k), logits.shape[-1])
    if k < 1:
        raise ValueError(f"top_k must be >= 1; got {k}")
    order = np.argsort(-logits, axis=-1, kind="stable")[:, :k]
    mask = np.zeros(logits.shape, dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask


def top_p_mask(probs: np.ndarray, p: float) -> np.ndarray:
    """Boolean [B, vocab]: the smallest set of most likely ids whose total probability is >= p.

    The most likely id is always kept. ``probs`` rows must sum to 1.
    """
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1]; got {p}")
    order = np.argsort(-probs, axis=-1, kind="stable")
    sorted_probs = np.take_along_axis(probs, order, axis=-1)
    before = np.cumsum(sorted_probs, axis=-1) - sorted_probs  # mass strictly above each id
    # Keep while the mass before this id has not yet reached p (1e-9 absorbs float round-off).
    keep_sorted = before < p - 1e-9
    keep_sorted[:, 0] = True
    mask = np.zeros(probs.shape, dtype=bool)
    np.put_along_axis(mask, order, keep_sorted, axis=-1)
    return mask


def probabilities(
    logits: np.ndarray,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """The distribution ``sample`` draws from: [B, vocab] float64 rows summing to 1."""
    logits = _as_2d(logits) / temperature
    if top_k is not None:
        logits = np.where(top_k_mask(logits, top_k), logits, -np.inf)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        probs = np.where(top_p_mask(probs, top_p), probs, 0.0)
        probs /= probs.sum(-1, keepdims=True)
    return probs


def sample(
    logits: np.ndarray,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    rng: np.random.Generator,
) -> np.ndarray:
    """Draw one id per row from softmax(logits / temperature) cut to top-k then top-p.

    ``temperature <= 0`` means greedy. Deterministic for a given ``rng`` state (one uniform per row).
    """
    if temperature <= 0:
        return greedy(logits)
    probs = probabilities(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    cdf = np.cumsum(probs, axis=-1)
    u = rng.random((probs.shape[0], 1)) * cdf[:, -1:]
    ids = (cdf <= u).sum(-1)  # first id whose cdf exceeds u
    # Guard against float round-off landing past the last id with non-zero probability.
    last = probs.shape[-1] - 1 - np.argmax(probs[:, ::-1] > 0, axis=-1)
    return np.minimum(ids, last).astype(np.int32)
