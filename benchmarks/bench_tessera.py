"""Tessera's training step on the CPU mesh: ``schedule.all_reduce_overlap(True)`` (each layer's
gradient bucket all-reduced over ``dp`` inside the backward scan) against ``False`` (one reduction
after the backward), the same ``graph.training_step`` of ``dist.nn.Transformer`` timed side by
side; the two are checked to give the same loss and weights first. ``--bytes`` prints the
hierarchical all-reduce table (bytes crossing the node axis, from ``ttjax.inspect``).

python -m benchmarks.run --only tessera
python -m benchmarks.bench_tessera --bytes
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import optax

from benchmarks._harness import Row, compare
from ttjax import dist
from ttjax.dist import graph, nn, op, schedule
from ttjax.inspect import inspect

VOCAB, LAYERS, WIDTH, HEADS, MLP, BATCH, SEQ = 512, 4, 256, 8, 1024, 32, 64


def _step(mesh: dist.Mesh, name: str) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(0)
    W = dist.tensor(
        (VOCAB, WIDTH),
        layout=dist.ShardSpec(partition=("row",), mesh_axes=("tp",)),
        mesh=mesh,
        dtype="fp32",
        init=rng.standard_normal((VOCAB, WIDTH)) * 0.02,
    )
    transformer = nn.Transformer(
        mesh, vocab=VOCAB, layers=LAYERS, width=WIDTH, heads=HEADS, mlp=MLP, name=name
    )

    @graph.training_step(module=name)
    def step(batch: Any) -> Any:
        loss = op.cross_entropy(transformer(batch["input"], W), batch["labels"])
        return graph.backward(loss), {"loss": loss}

    seq = rng.integers(0, VOCAB, (BATCH, SEQ + 1)).astype(np.int32)
    batch = step.put_batch({"input": seq[:, :-1], "labels": seq[:, 1:]})
    return step, step.init(optax.adamw(1e-3), batch), batch


def _overlap_row(axes: list[str], shape: tuple[int, ...], microbatches: int) -> Row:
    mesh = dist.Mesh(axes=axes, devices=range(int(np.prod(shape))), shape=shape)
    step, state, batch = _step(mesh, f"bench-{'x'.join(map(str, shape))}")
    programs = {}
    with schedule.pipeline_microbatches(microbatches):
        for overlap in (False, True):
            with schedule.all_reduce_overlap(overlap):
                programs[overlap] = step.lower(state, batch).compile()
    (s0, m0), (s1, m1) = (programs[o](state, batch) for o in (False, True))
    np.testing.assert_allclose(float(m0["loss"]), float(m1["loss"]), rtol=1e-6)
    for k in s0.params:
        np.testing.assert_allclose(np.asarray(s0.params[k]), np.asarray(s1.params[k]), atol=1e-5)
    times = compare(
        {
            "overlap": lambda: programs[True](state, batch),
            "plain": lambda: programs[False](state, batch),
        },
        repeats=5,
        number=3,
    )
    topology = mesh.topology.replace(" mesh", "")
    return Row(
        name=f"Tessera train step, {topology}, {microbatches} microbatch(es) "
        f"({LAYERS} layers, width {WIDTH}, batch {BATCH}x{SEQ})",
        subject="all_reduce_overlap(True)",
        baseline="all_reduce_overlap(False)",
        subject_s=times["overlap"],
        baseline_s=times["plain"],
        target="-",
    )


def run() -> list[Row]:
    return [
        _overlap_row(["tp", "dp"], (2, 4), 1),
        _overlap_row(["tp", "pp", "dp"], (2, 2, 2), 4),
    ]


def hierarchical_bytes(shapes: tuple[tuple[int, int], ...] = ((2, 4), (4, 8))) -> list[str]:
    """Markdown rows: a 4 MiB float32 all-reduce over ``node x local``, flat and hierarchical,
    and the bytes that cross the node axis (``ttjax.inspect``: the payload of the collectives
    whose group spans nodes, and what each device sends in them by the ring formulas)."""
    rows = [
        "| mesh (node x local) | all-reduce | collectives | payload over node | "
        "sent/device over node |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for node, local in shapes:
        mesh = dist.Mesh(axes=["node", "local"], devices=range(node * local), shape=(node, local))
        spec = dist.ShardSpec(partition=(0,), mesh_axes=(("node", "local"),))
        x = dist.tensor((node * local, 1 << 20), layout=spec, mesh=mesh, dtype="fp32")
        for label, kw in (("flat", {}), ("hierarchical", {"local": "local"})):
            fn = dist.local(
                lambda a, kw=kw: dist.all_reduce(a, axis=("node", "local"), **kw),
                mesh=mesh,
                in_layouts=(spec,),
            )
            report = inspect(fn, x, mesh=mesh.jax_mesh)
            kinds = " + ".join(f"{c.kind} ({', '.join(c.mesh_axes)})" for c in report.collectives)
            over = [c for c in report.collectives if "node" in c.mesh_axes]
            payload = sum(c.bytes for c in over) / 2**20
            sent = sum(c.bytes_per_device for c in over) / 2**20
            rows.append(
                f"| {node} x {local} | {label} | {kinds} | {payload:.2f} MiB | {sent:.2f} MiB |"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", action="store_true", help="print the hierarchical table only")
    ns = parser.parse_args(argv)
    if ns.bytes:
        print("\n".join(hierarchical_bytes()))
        return 0
    from benchmarks._harness import RESULTS, report

    report("ttjax benchmarks: tessera", run(), RESULTS / "tessera.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
