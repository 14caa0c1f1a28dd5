"""One Llama decode step written three ways, compiled on the same 8 devices, in one table:

    python -m models.llama.side_by_side            # tiny config, batch 8, 64-position cache

1. TT-NN explicit (``models/llama/model.py``): ``ttnn.linear`` + ``ttnn.all_reduce`` calls.
2. torch-xla annotations (``models/llama/spmd.py``): ``mark_sharding`` on the Flax model's
   weights; XLA's SPMD partitioner inserts the collectives.
3. Tessera named axes (``models/llama/dist_decode.py``): ``dist.local`` with
   ``dist.all_reduce(axis="tp")``.

All three place the weights by the same logical axes (``models/llama/axes.py``) and rule table:
Megatron layers, the embedding and LM head split by vocabulary (the TT-NN model with
``embedding="vocab_parallel"`` and ``gather_logits=False``, the table's layout).

Every row comes from ``ttjax.inspect`` on the compiled program: collectives by kind (per layer,
plus the vocab-parallel embedding's one all-reduce), the bytes each device sends, and XLA's
per-device memory (arguments = weights + KV cache).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

import ttjax as ttnn
import ttjax.spmd as xs
from models.llama import dist_decode
from models.llama.config import get_config
from models.llama.inspect_targets import decode_step as ttnn_decode_step
from models.llama.reference import LlamaReference
from models.llama.spmd import decode_step as spmd_decode_step
from models.llama.spmd import shard_llama_model
from models.llama.weights import random_weights
from ttjax import dist


def reports(config_name: str = "tiny", batch: int = 8) -> dict[str, Any]:
    """``{style: ProgramReport}`` for one decode step of each style on 8 devices (TP = 8)."""
    config = get_config(config_name)
    context = config.max_seq_len
    out: dict[str, Any] = {}

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    fn, args, opts = ttnn_decode_step(
        mesh,
        config=config_name,
        batch=batch,
        context=context,
        dtype="float32",
        weight_dtype="float32",
        cache_dtype="float32",
        scan_layers=False,
        embedding="vocab_parallel",
        gather_logits=False,
    )
    out["TT-NN explicit (ttnn.all_reduce)"] = ttnn.inspect.inspect(
        fn, *args, **opts, name="TT-NN decode step"
    )

    weights = random_weights(config, seed=0)
    model = LlamaReference(config, weights)
    smesh = xs.Mesh(np.arange(8), (1, 8), ("batch", "model"))
    shard_llama_model(model, smesh)
    step, sargs = spmd_decode_step(model, smesh, batch)
    out["torch-xla mark_sharding"] = ttnn.inspect.inspect(
        step, *sargs, mesh=smesh.jax_mesh, donate_argnums=(3,), name="mark_sharding decode step"
    )

    dmesh = dist.Mesh(axes=["tp"], devices=range(8))
    params = dist_decode.place_weights(config, weights, dmesh)
    cache = model.init_cache(batch)
    k, v = dist_decode.place_cache(list(cache.k), list(cache.v), dmesh)
    tokens, pos = np.zeros((batch, 1), np.int32), np.zeros((batch,), np.int32)
    out["Tessera dist (all_reduce axis='tp')"] = ttnn.inspect.inspect(
        dist_decode.decode_step(config, dmesh),
        params,
        tokens,
        pos,
        k,
        v,
        mesh=dmesh.jax_mesh,
        donate_argnums=(3, 4),
        name="dist decode step",
    )
    return out


def table(reps: dict[str, Any], n_layers: int) -> Table:
    t = Table(title="one Llama decode step, three programming models, 8 devices (TP=8)")
    for col in (
        "style",
        "all-reduce",
        "all-gather",
        "other",
        "per layer",
        "bytes sent/device",
        "args/device",
        "temp/device",
    ):
        t.add_column(col, justify="left" if col == "style" else "right")
    for name, r in reps.items():
        c = r.collective_counts()
        m = r.memory
        other = sum(v for k, v in c.items() if k not in ("all-reduce", "all-gather"))
        t.add_row(
            name,
            str(c["all-reduce"]),
            str(c["all-gather"]),
            str(other),
            f"{(c['all-reduce'] - 1) / n_layers:.1f} AR + 1",
            f"{r.bytes_per_device / 1024:.2f} KiB",
            f"{m.argument_bytes / 1024:.0f} KiB" if m else "?",
            f"{m.temp_bytes / 1024:.0f} KiB" if m else "?",
        )
    return t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="tiny")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--details", action="store_true", help="print each program's collectives")
    ns = p.parse_args(argv)
    console = Console(width=120)
    reps = reports(ns.config, ns.batch)
    if ns.details:
        for name, r in reps.items():
            console.rule(name)
            r.print(console)
    console.print(table(reps, get_config(ns.config).n_layers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
