"""FSDP (TTML's ``enable_fsdp``), ZeRO-3: where each sharded parameter is gathered.

The plan's rules ``("batch", "fsdp")`` and ``("embed", "fsdp")`` split the batch as DDP does and
shard every parameter (its gradient and its optimizer moments with it) on its embed dimension;
this module says when a parameter is whole. The step all-gathers what lies outside the stacked
blocks before the loss (:func:`outside_blocks`); the layer scan (``ttjax.ttml.modules.Stack``)
gathers one block at a time inside its remat'd body, so the backward pass gathers it again and
reduce-scatters its gradient there (``ttjax.numerics.all_gather``'s transpose, in device order
under ``"deterministic"``). At most one block's parameters are whole at a time.

>>> outside_blocks({"wte": LogicalAxes("vocab", "embed"),
...                 "blocks": {"w": LogicalAxes("layers", "embed", "mlp")}})
{'blocks': {'w': LogicalAxes(None, None, None)}, 'wte': LogicalAxes('vocab', 'embed')}
"""

from __future__ import annotations

from typing import Any

import jax

from ttjax.plan import LogicalAxes, is_logical


def outside_blocks(logical: Any) -> Any:
    """``logical`` with the stacked blocks' leaves (leading ``"layers"``) marked never gathered:
    what a step all-gathers before the loss, since the layer scan gathers each block itself."""
    return jax.tree.map(
        lambda a: LogicalAxes(*[None] * len(a)) if a.names[:1] == ("layers",) else a,
        logical,
        is_leaf=is_logical,
    )


__all__ = ["outside_blocks"]
