"""A model's blocks stacked on a leading ``[n_layer]`` axis, run under ``lax.scan`` (as MaxText).

One block is traced and compiled once, whatever the depth, so compile time stays flat from 4 to
96 layers. ``jax.checkpoint`` (remat) wraps the block with a named policy: ``"full"`` saves
nothing and recomputes the block in the backward pass, ``"dots"`` keeps the matmul outputs that
have no batch dims, ``"none"`` keeps every activation (no recompute).

>>> blocks = stack_blocks([init_block(k) for k in keys])     # one dict of [n_layer, ...] arrays
>>> specs = stacked_specs(block_specs)                     # each spec gets a leading None
>>> x = scan_blocks(block, blocks, x, remat_policy="full")   # models: ttjax.ttml.modules.Stack
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from ttjax.errors import ConfigError

Params = dict[str, Any]

REMAT_POLICIES: dict[str, Any] = {
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "none": None,
}
# TTML's transformer_config.runner_type -> the remat policy: its memory_efficient runner
# recomputes each block in the backward pass, its default runner keeps the activations.
RUNNER_REMAT = {"default": "none", "memory_efficient": "full"}


def check_remat_policy(owner: str, policy: str) -> None:
    """Raise ``ConfigError`` naming ``owner`` unless ``policy`` is one of :data:`REMAT_POLICIES`."""
    if policy not in REMAT_POLICIES:
        raise ConfigError(
            f"{owner}: remat_policy={policy!r} is not a rematerialisation policy.\n"
            f"fix: one of {list(REMAT_POLICIES)} ('full' recomputes each block in the backward "
            "pass, 'dots' keeps its matmul outputs, 'none' keeps every activation)."
        )


def stack_blocks(blocks: Sequence[Params]) -> Params:
    """Per-block parameter dicts (all of one structure) -> one dict of ``[n_layer, ...]`` arrays."""
    if not blocks:
        raise ConfigError(
            "stack_blocks: no blocks to stack.\nfix: pass one dict per block (n >= 1)."
        )
    return jax.tree.map(lambda *xs: jnp.stack(xs), *blocks)


def unstack_blocks(stacked: Params) -> list[Params]:
    """The inverse of :func:`stack_blocks`: row ``i`` of every leaf is block ``i``'s parameter."""
    n = jax.tree.leaves(stacked)[0].shape[0]
    return [jax.tree.map(lambda a, i=i: a[i], stacked) for i in range(n)]


def stacked_specs(block_specs: Params) -> Params:
    """One block's PartitionSpecs -> the stacked blocks' (the layer axis is never split)."""
    return jax.tree.map(lambda s: P(None, *s), block_specs, is_leaf=lambda x: isinstance(x, P))


def scan_blocks(
    block: Callable[[Params, Any], Any],
    stacked: Params,
    x: Any,
    remat_policy: str = "full",
    gather: Callable[[Params], Params] | None = None,
) -> Any:
    """``x`` through ``block(p_i, x)`` for every row ``p_i`` of ``stacked``, one traced block.

    ``block`` closes over everything but its parameters and the activations; under
    ``remat_policy`` other than ``"none"`` it runs inside ``jax.checkpoint``. ``gather`` (FSDP:
    ``ParallelDims.gather``, as ``ttjax.ttml.modules.Stack`` passes it) runs on each block's
    parameters inside it: a block is all-gathered when it runs and, under remat, again in the backward pass,
    so one block is whole at a time (ZeRO-3); its transpose reduce-scatters the block's gradient.
    """
    check_remat_policy("scan_blocks", remat_policy)
    policy = REMAT_POLICIES[remat_policy]
    inner = block if gather is None else (lambda p, h: block(gather(p), h))
    # scan already keeps XLA from merging the recomputation with the forward: no CSE barrier needed.
    fn = (
        inner if remat_policy == "none" else jax.checkpoint(inner, policy=policy, prevent_cse=False)
    )

    def body(h: Any, p: Params) -> tuple[Any, None]:
        return fn(p, h), None

    return lax.scan(body, x, stacked)[0]


__all__ = [
    "REMAT_POLICIES",
    "RUNNER_REMAT",
    "check_remat_policy",
    "scan_blocks",
    "stack_blocks",
    "stacked_specs",
    "unstack_blocks",
]
