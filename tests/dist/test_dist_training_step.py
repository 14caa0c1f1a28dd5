"""Tessera's global-view training step (``graph.training_step``, ``graph.backward``,
``schedule``) and hierarchical collectives: the seed's section 7.6-7.7 example on 72 and 8
devices against one device, the gradient all-reduce's place in the compiled HLO with and without
overlap, the hierarchical all-reduce's lowering, bytes and values; errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import optax
import pytest

import ttjax
from ttjax import dist
from ttjax.dist import graph, nn, op, schedule
from ttjax.errors import CCLError, ConfigError, ShardingError
from ttjax.inspect import inspect, report_compiled

ROOT = Path(__file__).resolve().parents[2]


def test_seed_example_runs_on_72_and_8_devices_equal_to_one_device() -> None:
    """examples/tessera_training.py is sections 7.6-7.7 as written (tp x pp x dp, overlap on,
    8 pipeline microbatches); it trains on 6x4x3, 2x2x2 and one device and exits 0 only when the
    losses agree to 1e-5 and every weight to 1e-5 (float32) / one bfloat16 ulp (W, bf16). Like
    the seed's, W (100 x 18) does not divide over 6 x 4: rows in blocks of 17, columns of 5."""
    env = {**os.environ, "TTJAX_NUM_DEVICES": "72", "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "tessera_training.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "6 × 4 × 3 (W (100, 18) in blocks of (17, 5)): losses" in run.stdout
    assert "2 × 2 × 2 (W (100, 18) in blocks of (50, 9)): losses" in run.stdout
    assert "(<= 1: equal)" in run.stdout


def test_the_docs_show_the_example_that_runs() -> None:
    """docs/api/dist.md's section 7.6-7.7 block is the script's code, line for line (the script
    takes the device count as an argument where the docs say 72)."""
    docs = (ROOT / "docs" / "api" / "dist.md").read_text()
    block = docs.split("## Hybrid-parallel training")[1].split("```py\n")[1].split("```")[0]
    script = (ROOT / "examples" / "tessera_training.py").read_text()
    script = script.replace("range(devices)", "range(72)").replace("VOCAB", "100")
    script = script.replace("WIDTH", "18")
    lines = {ln.strip() for ln in script.splitlines()}
    seed = [ln.strip() for ln in block.splitlines() if ln.strip()]
    seed = [ln for ln in seed if not ln.startswith(("import ", "from ", "state"))]
    assert len(seed) >= 16 and [ln for ln in seed if ln not in lines] == []


# --- all_reduce_overlap: where the gradient reduction sits in the compiled program -----------

LAYERS = 3
DP_GROUPS = "{{0,1,2,3},{4,5,6,7}}"  # tp x dp = 2 x 4: the devices of each dp group


def _computations(hlo: str) -> dict[str, list[str]]:
    comps: dict[str, list[str]] = {}
    name = None
    for line in hlo.splitlines():
        m = re.match(r"^(ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if m:
            name = m.group(2)
            comps[name] = []
        elif line.strip() == "}":
            name = None
        elif name:
            comps[name].append(line)
    return comps


def _order(lines: list[str]) -> list[str]:
    """The body's dots, dp all-reduces and other all-reduces, in (scheduled) program order."""
    out = []
    for line in lines:
        if re.search(r" all-reduce(-start)?\(", line):
            out.append("AR(dp)" if f"replica_groups={DP_GROUPS}" in line else "AR")
        elif re.search(r" dot\(", line) or "while(" in line:
            out.append("dot" if " dot(" in line else "while")
    return out


@pytest.fixture(scope="module")
def tiny_step():
    mesh = dist.Mesh(axes=["tp", "dp"], devices=range(8), shape=(2, 4))
    rng = np.random.default_rng(0)
    W = dist.tensor((16, 8), layout=dist.ShardSpec(("row",), ("tp",)), mesh=mesh, dtype="fp32",
                    init=rng.standard_normal((16, 8)) * 0.3)  # fmt: skip
    transformer = nn.Transformer(
        mesh, vocab=16, layers=LAYERS, width=8, heads=2, mlp=16, name="overlap-test"
    )

    @graph.training_step(module="overlap-test")
    def step(batch):
        loss = op.cross_entropy(transformer(batch["input"], W), batch["labels"])
        return graph.backward(loss), {"loss": loss}

    seq = rng.integers(0, 16, (8, 5)).astype(np.int32)
    batch = {"input": seq[:, :-1], "labels": seq[:, 1:]}
    return mesh, step, step.init(optax.sgd(0.1), batch), batch


def test_all_reduce_overlap_reduces_each_layer_inside_the_backward_loop(tiny_step) -> None:
    mesh, step, state, batch = tiny_step
    runs = {}
    for overlap in (False, True):
        with schedule.all_reduce_overlap(overlap):
            compiled = step.lower(state, batch).compile()
        report = report_compiled(compiled, mesh=mesh.jax_mesh)
        dp = [c for c in report.collectives if c.kind == "all-reduce" and c.mesh_axes == ("dp",)]
        comps = _computations(report.hlo)
        entry = next(n for n in comps if n.startswith("main"))
        if overlap:
            # one bucket (a layer's 8 parameters, one all-reduce) per backward iteration ...
            (in_loop,) = [c for c in dp if c.loops]
            assert in_loop.executions == LAYERS
            (loop,) = [lp for lp in report.loops if lp.name == in_loop.loops[0]]
            assert loop.trip_count == LAYERS
            body = next(n for n, lines in comps.items() if f"replica_groups={DP_GROUPS}" in
                        "".join(lines) and n != entry)  # fmt: skip
            order = _order(comps[body])
            assert order.count("AR(dp)") == 1 and order.count("dot") >= 4
            bucket = next(x for x in comps[body] if f"replica_groups={DP_GROUPS}" in x)
            assert len(re.findall(r"%[\w.\-]+", bucket.split("all-reduce(")[1].split(")")[0])) == 8
            # ... interleaved with the layers' backward: dots, this layer's bucket, next layer
            assert order.index("AR(dp)") > order.index("dot")
            rest = [c for c in dp if not c.loops]
            assert len(rest) == 1  # embedding, final norm, head: after the backward
        else:
            assert dp and all(not c.loops for c in dp)  # no reduction inside any loop ...
            order = _order(comps[entry])
            last_loop = max(i for i, k in enumerate(order) if k == "while")
            assert all(i > last_loop for i, k in enumerate(order) if k == "AR(dp)")  # ... after
        runs[overlap] = compiled(state, step.put_batch(batch))
    (plain, m0), (over, m1) = runs[False], runs[True]
    np.testing.assert_allclose(float(m0["loss"]), float(m1["loss"]), rtol=1e-6)
    for k in plain.params:
        np.testing.assert_allclose(np.asarray(plain.params[k]), np.asarray(over.params[k]),
                                   rtol=1e-5, atol=1e-6, err_msg=k)  # fmt: skip


def test_gradients_are_the_functions_outputs_averaged_over_dp(tiny_step) -> None:
    """step.gradients returns (grads, metrics) as the step function does; on a 1-device mesh
    the same program gives the same gradients."""
    _mesh, step, state, batch = tiny_step
    grads, metrics = step.gradients(state, batch)
    assert set(grads) == set(state.params) and set(metrics) == {"loss"}
    one = dist.Mesh(axes=["tp", "dp"], devices=range(1))
    W1 = dist.tensor((16, 8), mesh=one, dtype="fp32", init=np.asarray(state.params["head"]))
    t1 = nn.Transformer(one, vocab=16, layers=LAYERS, width=8, heads=2, mlp=16, name="ref-1")

    @graph.training_step(module="ref-1")
    def ref(batch):
        loss = op.cross_entropy(t1(batch["input"], W1), batch["labels"])
        return graph.backward(loss), {"loss": loss}

    s1 = ref.init(optax.sgd(0.1), batch)
    g1, m1 = ref.gradients(s1, batch)
    np.testing.assert_allclose(float(metrics["loss"]), float(m1["loss"]), rtol=1e-6)
    for k in g1:
        np.testing.assert_allclose(np.asarray(grads[k]), np.asarray(g1[k]), rtol=1e-4,
                                   atol=1e-6, err_msg=k)  # fmt: skip


def test_training_step_errors_name_the_value_and_fix(tiny_step) -> None:
    _mesh, step, state, batch = tiny_step
    with pytest.raises(ConfigError, match=r"outside a graph.training_step[\s\S]*fix:"):
        graph.backward(np.float32(1.0))
    with pytest.raises(ConfigError, match=r"no module is named 'nope'[\s\S]*fix:"):
        graph.training_step(module="nope")(lambda b: None).init(optax.sgd(0.1), batch)
    with pytest.raises(ConfigError, match=r"pipeline_microbatches\(0\)[\s\S]*fix:"):
        schedule.pipeline_microbatches(0)
    with pytest.raises(ConfigError, match=r"all_reduce_overlap\('yes'\)[\s\S]*fix:"):
        schedule.all_reduce_overlap("yes")  # type: ignore[arg-type]
    with pytest.raises(ShardingError, match=r"shape \(6, 4\)[\s\S]*4 data-parallel[\s\S]*fix:"):
        step(state, {k: v[:6] for k, v in batch.items()})
    with (
        schedule.pipeline_microbatches(3),
        pytest.raises(ConfigError, match=r"batch of 2 .*pipeline_microbatches\(3\)[\s\S]*fix:"),
    ):
        step(state, batch)
    assert schedule.current() == schedule.Schedule()


# --- hierarchical all-reduce -------------------------------------------------------------------


def test_hierarchical_all_reduce_lowers_to_rs_ar_ag_and_sends_less_over_nodes() -> None:
    mesh = dist.Mesh(axes=["node", "local"], devices=range(8), shape=(2, 4))
    rng = np.random.default_rng(4)
    scale = np.float32(10.0) ** rng.integers(-3, 4, (8, 1))  # magnitudes make the order show
    host = (rng.standard_normal((8, 1000)) * scale).astype(np.float32)  # device d: row d
    spec = dist.ShardSpec(partition=(0,), mesh_axes=(("node", "local"),))
    x = dist.tensor(host.shape, layout=spec, mesh=mesh, dtype="fp32", init=host)

    def region(**kw):
        body = lambda a: dist.all_reduce(a, axis=("node", "local"), **kw)  # noqa: E731
        return dist.local(body, mesh=mesh, in_layouts=(spec,))

    flat, hier = region(), region(local="local")
    reports = {n: inspect(f, x, mesh=mesh.jax_mesh) for n, f in (("flat", flat), ("hier", hier))}
    kinds = [(c.kind, c.mesh_axes) for c in reports["hier"].collectives]
    assert kinds == [
        ("reduce-scatter", ("local",)),
        ("all-reduce", ("node",)),
        ("all-gather", ("local",)),
    ]
    assert [(c.kind, c.mesh_axes) for c in reports["flat"].collectives] == [
        ("all-reduce", ("node", "local"))
    ]

    def over_nodes(r, field):
        return sum(getattr(c, field) for c in r.collectives if "node" in c.mesh_axes)

    assert over_nodes(reports["flat"], "bytes") == 4 * over_nodes(reports["hier"], "bytes")
    assert over_nodes(reports["flat"], "bytes_per_device") == 7000  # ring: 2 (8-1)/8 x 4000
    assert over_nodes(reports["hier"], "bytes_per_device") == 1000  # ring: 2 (2-1)/2 x 1000
    np.testing.assert_allclose(np.asarray(hier(x)), np.asarray(flat(x)), rtol=1e-5, atol=1e-3)
    with ttjax.numerics("deterministic"):
        got = np.asarray(hier(x))
        mean = np.asarray(region(local="local", op="mean")(x))
    nodes = []
    for rows in (host[:4], host[4:]):  # each node: its 4 devices in order, then node 0 + node 1
        acc = rows[0].copy()
        for r in rows[1:]:
            acc = acc + r
        nodes.append(acc)
    np.testing.assert_array_equal(got[0], nodes[0] + nodes[1])
    np.testing.assert_array_equal(mean[0], (nodes[0] + nodes[1]) / np.float32(8))
    with pytest.raises(CCLError, match=r"local='tp'[\s\S]*fix:"):
        dist.local(lambda a: dist.all_reduce(a, axis="node", local="tp"), mesh=mesh)(x)
