"""Context parallelism (TTML's ``enable_cp``): where each token of a sequence goes.

The plan's rule ``("seq", "cp")`` splits the sequence over the cp axis; this module says in what
order. Causal attention makes late tokens costlier, so the sequence is cut into ``2 * cp`` chunks
and device ``i`` holds chunks ``i`` and ``2*cp-1-i`` (``ring_attention``'s load balancing): the
step permutes inputs and targets alike before splitting them, so the mean loss needs no
un-permute, and the models read each token's global position from ``local_positions``.

>>> import numpy as np
>>> dims = ParallelDims.from_sizes(cp=2)
>>> inputs, targets = split_tokens(np.arange(9)[None], dims)   # seq + 1 = 9 tokens
>>> np.asarray(inputs).tolist(), np.asarray(targets).tolist()
([[0, 1, 6, 7, 2, 3, 4, 5]], [[1, 2, 7, 8, 3, 4, 5, 6]])
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ttjax.errors import ParallelPlanError
from ttjax.plan import ParallelDims
from ttjax.ttml.ops.ring_attention import inverse_load_balance_order, load_balance_order


def check_seq_len(seq_len: int, dims: ParallelDims, where: str = "") -> None:
    """Raise unless ``seq_len`` splits into ``2 * cp`` equal chunks (two per cp device)."""
    cp = dims.size("cp")
    if cp > 1 and seq_len % (2 * cp):
        up = -(-seq_len // (2 * cp)) * 2 * cp
        raise ParallelPlanError(
            f"{where}seq_len={seq_len} does not split into 2*cp = {2 * cp} equal chunks under "
            f"{dims!r}: context parallelism gives each cp device two chunks (load balancing).\n"
            f"fix: use a sequence length (max_sequence_length) that is a multiple of {2 * cp}, "
            f"e.g. {up}, or a smaller cp axis."
        )


def place_sequence(x: Any, dims: ParallelDims, axis: int = -1) -> Any:
    """``x`` with its sequence ``axis`` in load-balanced order (unchanged when cp is off)."""
    cp = dims.size("cp")
    if cp == 1:
        return x
    check_seq_len(x.shape[axis], dims)
    return jnp.take(x, jnp.asarray(load_balance_order(x.shape[axis], cp)), axis=axis)


def restore_sequence(x: Any, dims: ParallelDims, axis: int = 1) -> Any:
    """Undo :func:`place_sequence` (e.g. on logits ``[B, T, V]`` gathered from the cp devices)."""
    cp = dims.size("cp")
    if cp == 1:
        return x
    check_seq_len(x.shape[axis], dims)
    return jnp.take(x, jnp.asarray(inverse_load_balance_order(x.shape[axis], cp)), axis=axis)


def split_tokens(tokens: Any, dims: ParallelDims) -> tuple[Any, Any]:
    """``(inputs, targets)`` of ``tokens`` ``[..., seq + 1]``, each ``[..., seq]`` and placed for
    cp; cut on the whole rows first (a target may sit on another cp device than its input)."""
    inputs, targets = tokens[..., :-1], tokens[..., 1:]
    return place_sequence(inputs, dims), place_sequence(targets, dims)


__all__ = ["check_seq_len", "place_sequence", "restore_sequence", "split_tokens"]
