"""Train the tiny MoE language model on the pydoc corpus with and without the load-balancing
loss, and show where the tokens went and what the two all_to_alls of its MoE layer carry:

    python -m models.moe.demo --mesh 2x4 --steps 150 --png routing.png
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import ttjax as ttnn
from models.moe.config import MoEConfig
from models.moe.inspect_targets import all_to_all_table
from models.moe.picture import RoutingCounts, routing_figure, routing_table
from models.moe.train import MoELMConfig, TtMoELM, train_on_corpus
from ttjax.inspect import inspect


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mesh", type=ttnn.parse_mesh_shape, default=ttnn.MeshShape(1, 8))
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--aux", type=float, default=0.1, help="aux loss coefficient of the 2nd run")
    p.add_argument("--capacity-factor", type=float, default=None)
    p.add_argument("--png", type=Path, default=None, help="write <stem>_aux{coef}.png per run")
    args = p.parse_args(argv)
    from rich.console import Console

    console = Console()
    mesh = ttnn.open_mesh_device(args.mesh)
    moe = MoEConfig(32, 64, 8, top_k=2, capacity_factor=args.capacity_factor)
    for coef in (0.0, args.aux):
        model = TtMoELM(MoELMConfig(moe, aux_loss_coef=coef), mesh)  # experts: the last axis
        run = train_on_corpus(model, args.steps)
        last = RoutingCounts.from_arrays(model.moe, run.routed[-20:].sum(0), run.kept[-20:].sum(0))
        title = f"aux coef {coef}: last 20 of {args.steps} steps"
        console.print(routing_table(last, title))
        console.print(
            f"cross-entropy {run.cross_entropy[0]:.3f} -> {np.mean(run.cross_entropy[-20:]):.3f}, "
            f"aux loss {run.aux_loss[0]:.3f} -> {np.mean(run.aux_loss[-20:]):.3f}, "
            f"spread of tokens per expert {run.spread():.3f}"
        )
        if args.png is not None:
            path = args.png.with_name(f"{args.png.stem}_aux{coef:g}{args.png.suffix or '.png'}")
            routing_figure(last, title).savefig(path, dpi=120)
            console.print(f"wrote {path}")
    tokens = ttnn.from_torch(
        np.zeros((model.moe.groups * 4, 32, 32), np.float32),
        device=mesh,
        mesh_mapper=model.moe.token_mapper(0),
        layout=ttnn.TILE_LAYOUT,
    )
    params = model.moe.abstract_params()
    report = inspect(lambda p, x: model.moe(p, x).out, params, tokens, name="moe layer")
    console.print(all_to_all_table(report, f"the MoE layer on {args.mesh!r}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
