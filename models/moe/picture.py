"""Where the tokens went: tokens per expert per device after routing, as a rich table or a PNG.

Rows are the devices that own tokens (one GShard group each), columns the experts, grouped by
the device along the ``ep`` axis that holds them; a cell counts the token choices routed there
(the ones over capacity, dropped, in brackets). The last row is what each expert received.

>>> out = layer(params, x)
>>> counts = RoutingCounts.of(layer, out)
>>> rich.print(routing_table(counts))
>>> routing_figure(counts).savefig("routing.png")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from models.moe.layer import MoELayer, MoEOutput


@dataclass(frozen=True)
class RoutingCounts:
    """Host counts of one MoE layer call: ``routed``/``kept`` [groups, E] per token group."""

    routed: np.ndarray
    kept: np.ndarray
    group_coords: tuple[tuple[int, ...], ...]
    expert_owner: tuple[int, ...]
    ep_axis: int

    @staticmethod
    def of(layer: MoELayer, out: MoEOutput) -> RoutingCounts:
        return RoutingCounts.from_arrays(
            layer, layer.per_group(out.routed)[:, 0], layer.per_group(out.kept)[:, 0]
        )

    @staticmethod
    def from_arrays(layer: MoELayer, routed: Any, kept: Any) -> RoutingCounts:
        e = layer.config.n_experts
        return RoutingCounts(
            np.asarray(routed).reshape(layer.groups, e).astype(np.int64),
            np.asarray(kept).reshape(layer.groups, e).astype(np.int64),
            tuple(layer.group_coords()),
            tuple(layer.expert_owner(i) for i in range(e)),
            layer.layout.ep_axis,
        )

    @property
    def dropped(self) -> np.ndarray:
        return self.routed - self.kept

    @property
    def per_expert(self) -> np.ndarray:
        """Kept choices each expert computes, summed over every sender [E]."""
        return self.kept.sum(0)

    @property
    def spread(self) -> float:
        """Coefficient of variation (std / mean) of routed choices per expert: 0 is balanced."""
        load = self.routed.sum(0).astype(np.float64)
        return float(load.std() / load.mean()) if load.mean() else 0.0


def _device(coord: tuple[int, ...]) -> str:
    return "(" + ",".join(map(str, coord)) + ")"


def routing_table(counts: RoutingCounts, title: str = "tokens per expert per device") -> Any:
    """A ``rich.table.Table``: a row per token-owning device, a column per expert."""
    from rich.table import Table

    table = Table(title=f"{title} (spread {counts.spread:.2f}, dropped in brackets)")
    table.add_column("device", justify="left")
    for e, owner in enumerate(counts.expert_owner):
        table.add_column(f"e{e}@ep{owner}", justify="right")
    table.add_column("dropped", justify="right")
    for coord, routed, dropped in zip(counts.group_coords, counts.routed, counts.dropped):
        cells = [f"{r}" + (f" [{d}]" if d else "") for r, d in zip(routed, dropped)]
        table.add_row(_device(coord), *cells, str(int(dropped.sum())))
    table.add_row("computed", *map(str, counts.per_expert), str(int(counts.dropped.sum())))
    return table


def routing_figure(counts: RoutingCounts, title: str = "tokens per expert per device") -> Any:
    """A matplotlib figure: the routed-choices heatmap and, below, each expert's kept load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups, experts = counts.routed.shape
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(1.0 + 0.6 * experts, 2.0 + 0.35 * groups), height_ratios=[groups, 3]
    )
    im = top.imshow(counts.routed, cmap="viridis", aspect="auto")
    for g in range(groups):
        for e in range(experts):
            d = counts.dropped[g, e]
            top.text(
                e,
                g,
                f"{counts.routed[g, e]}" + (f"\n-{d}" if d else ""),
                ha="center",
                va="center",
                fontsize=7,
                color="w",
            )
    top.set_yticks(range(groups), [_device(c) for c in counts.group_coords])
    top.set_xticks(range(experts), [f"e{e}\nep{o}" for e, o in enumerate(counts.expert_owner)])
    top.set_ylabel("token owner (device)")
    top.set_title(f"{title}: spread {counts.spread:.2f}, dropped {int(counts.dropped.sum())}")
    fig.colorbar(im, ax=top, label="token choices")
    bottom.bar(range(experts), counts.per_expert, label="computed")
    bottom.bar(range(experts), counts.dropped.sum(0), bottom=counts.per_expert, label="dropped")
    bottom.set_xticks(range(experts), [f"e{e}" for e in range(experts)])
    bottom.set_ylabel("tokens")
    bottom.legend(fontsize=7)
    fig.tight_layout()
    return fig
