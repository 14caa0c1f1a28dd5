"""FSDP (``enable_fsdp``): parameters, gradients and AdamW state sharded over the fsdp axis.

Same data, same seed: 20 AdamW steps of FSDP 8 (1x8), TP 4 x FSDP 2 (2x4), DDP 2 x FSDP 4 (2x4)
and TTML's FSDP 8 x TP 4 (8x4) equal the single-device run. The compiled step holds 1/8 of DDP's
per-device parameter + optimizer bytes (XLA's ``memory_analysis``), and its collectives, as
``ttjax.inspect`` lists them, gather and reduce-scatter over the fsdp axis only, each block inside
the forward and the backward layer scans (ZeRO-3). Under
``ttjax.numerics("deterministic")`` the losses are bitwise reproducible. A checkpoint written by
FSDP 8 resumes onto DDP 8 through the CLI and continues the same trajectory.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from _tiny import ACCUM, BATCH, CONFIG, OPT, SEQ, YAML_MODEL, batches, losses, mesh, params
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import ttjax
from models.nanogpt import train as nanogpt_train
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_axes
from ttjax.errors import ConfigError, ParallelPlanError
from ttjax.ttml.config import PipelineParallelConfig, load_config
from ttjax.ttml.context import DistributedConfig, ParallelismContext, assign_axes
from ttjax.ttml.pipeline import Pipeline
from ttjax.ttml.train import OptimizerSettings, TrainState, TrainStep, make_optimizer

# name -> (mesh shape, {ParallelismContext keyword: mesh axis}), TTML's axis order (DDP -> FSDP -> TP).
LAYOUTS = {
    "single": ((1, 1), {}),
    "ddp8": ((1, 8), {"ddp_axis": 1}),
    "fsdp8": ((1, 8), {"fsdp_axis": 1}),
    "fsdp2_tp4": ((2, 4), {"fsdp_axis": 0, "tp_axis": 1}),
    "ddp2_fsdp4": ((2, 4), {"ddp_axis": 0, "fsdp_axis": 1}),
    "fsdp8_tp4": ((8, 4), {"fsdp_axis": 0, "tp_axis": 1}),
}
ROOT = Path(__file__).resolve().parents[2]
# Wide enough that the few parameters without an embed dim (norms, column biases) weigh < 5%.
WIDE = GPTConfig(vocab_size=256, block_size=SEQ, n_layer=3, n_head=8, n_embd=256)


def fsdp_step(layout: str, config: GPTConfig = CONFIG) -> TrainStep:
    shape, axes = LAYOUTS[layout]
    par = ParallelismContext.from_axes(mesh(shape), **axes)
    return TrainStep(
        GPT(config).loss,
        param_axes(config),
        par,
        make_optimizer(OPT),
        accum=ACCUM,
        schedule=OPT.schedule(),
    )


def run(step: TrainStep, steps: int) -> np.ndarray:
    """The losses of the first ``steps`` of the 20-step run."""
    state = step.init_state(params())
    out = []
    for tokens in batches(20)[:steps]:
        state, metrics = step(state, tokens)
        out.append(float(metrics["loss"]))
    return np.asarray(out)


@pytest.fixture(scope="module")
def single() -> np.ndarray:
    return losses("single")


# ---------------------------------------------------------------------------------------------
# Losses equal the single-device run
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    [
        "fsdp8",
        pytest.param("fsdp2_tp4", marks=pytest.mark.slow),
        pytest.param("ddp2_fsdp4", marks=pytest.mark.slow),
    ],
)
def test_losses_equal_single_device(single, layout):
    step = fsdp_step(layout)
    assert "fsdp" in step.param_specs["wte"]["weight"]  # the embedding really is sharded
    got = run(step, 20)
    assert single[-1] < single[0] - 0.3  # it learns
    np.testing.assert_allclose(got, single, rtol=1e-5)


@pytest.mark.slow
def test_ttml_layout_fsdp8_tp4_on_8x4(single):
    """TTML's Llama-8B layout (``enable_fsdp`` + ``enable_tp`` on [8, 4]), 4 steps."""
    step = fsdp_step("fsdp8_tp4")
    assert step.param_specs["blocks"]["c_attn"]["weight"] == jax.sharding.PartitionSpec(
        None, "fsdp", "tp"
    )
    np.testing.assert_allclose(run(step, 4), single[:4], rtol=1e-5)


@pytest.mark.slow
def test_ttml_layout_fsdp8_tp4_on_8x4_20_steps(single):
    np.testing.assert_allclose(run(fsdp_step("fsdp8_tp4"), 20), single, rtol=1e-5)


def test_embed_dim_must_divide_by_fsdp():
    par = ParallelismContext.from_axes(mesh((1, 8)), fsdp_axis=1)
    bad = dataclasses.replace(CONFIG, n_embd=36, n_head=6)
    shapes = jax.eval_shape(lambda: init_params(bad, 0))
    with pytest.raises(
        ParallelPlanError,
        match=r"parameter blocks.attn_proj.bias of shape \[1, 36\]: dim 1 \('embed', size 36\) "
        r"does not divide by fsdp=8",
    ):
        par.specs(param_axes(bad), shapes)


def test_fsdp_needs_logical_axes():
    par = ParallelismContext.from_axes(mesh((1, 8)), fsdp_axis=1)
    specs = par.specs(param_axes(CONFIG))
    with pytest.raises(ConfigError, match="FSDP needs the parameters' logical axes"):
        TrainStep(GPT(CONFIG).loss, specs, par, make_optimizer(OPT))


# ---------------------------------------------------------------------------------------------
# Memory and collectives of the compiled step (abstract inputs: nothing runs)
# ---------------------------------------------------------------------------------------------


@functools.cache
def report(layout: str) -> tuple[TrainStep, ttjax.inspect.ProgramReport]:
    """``ttjax.inspect`` of the WIDE model's step, compiled on abstract, sharded inputs."""
    step = fsdp_step(layout, WIDE)
    shapes = jax.eval_shape(lambda: init_params(WIDE, 0))
    state = jax.eval_shape(
        lambda p: TrainState(jnp.zeros((), jnp.int32), p, step.optimizer.init(p)), shapes
    )
    shardings = step.state_shardings(shapes)
    state = jax.tree.map(
        lambda s, d: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=d), state, shardings
    )
    tokens = jax.ShapeDtypeStruct(
        (ACCUM, BATCH, SEQ + 1), jnp.int32, sharding=NamedSharding(step.mesh, step.batch_spec)
    )
    return step, ttjax.inspect.inspect(step._step, state, tokens, mesh=step.mesh)


def _state_bytes(layout: str) -> int:
    """Compiled per-device argument bytes less this device's tokens: parameters + AdamW state."""
    step, rep = report(layout)
    assert rep.memory is not None
    tokens = ACCUM * BATCH * (SEQ + 1) * 4 // math.prod(step.mesh.devices.shape)
    return rep.memory.argument_bytes - tokens


def _local_bytes(step: TrainStep, unsharded_on: str | None = None) -> int:
    """Per-device bytes of the parameters (or, with a role, of those not sharded over it)."""
    shapes = jax.eval_shape(lambda: init_params(WIDE, 0))
    total = 0
    for spec, s in zip(
        jax.tree.leaves(
            step.param_specs, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec)
        ),
        jax.tree.leaves(shapes),
        strict=True,
    ):
        if unsharded_on is not None and unsharded_on in jax.tree.leaves(tuple(spec)):
            continue
        shard = NamedSharding(step.mesh, spec).shard_shape(s.shape)
        total += math.prod(shard) * s.dtype.itemsize
    return total


@pytest.mark.slow
def test_parameter_and_optimizer_bytes_are_one_eighth_of_ddp():
    fsdp, ddp = _state_bytes("fsdp8"), _state_bytes("ddp8")
    step, _ = report("fsdp8")
    # Parameters + AdamW's two moments (+ a few scalars): three copies of the local shards.
    assert abs(fsdp - 3 * _local_bytes(step)) < 64
    ratio = fsdp / (ddp / 8)
    assert 1.0 <= ratio <= 1.05, (fsdp, ddp, ratio)


@pytest.mark.parametrize("layout", [pytest.param("fsdp8", marks=pytest.mark.slow), "fsdp2_tp4"])
def test_collectives_gather_and_reduce_scatter_over_fsdp_only(layout):
    step, rep = report(layout)
    counts = rep.collective_counts()
    assert counts["all-gather"] > 0 and counts["reduce-scatter"] > 0, counts
    assert counts["all-to-all"] == counts["collective-permute"] == 0, counts
    # Parameters of neither kind: a gradient all-reduce over fsdp carries only the parameters
    # that have no embed dim (norms, biases), plus scalars (the loss, each leaf's share of the
    # gradient norm).
    scalars = 4 * (len(jax.tree.leaves(step.param_specs)) + 4)
    small = _local_bytes(step, unsharded_on="fsdp") + scalars
    for c in rep.collectives:
        if c.kind in ("all-gather", "reduce-scatter"):
            assert c.mesh_axes == ("fsdp",), c
        else:
            assert c.kind == "all-reduce", c
            # Over both axes: only the gradient norm's share of the leaves sharded over both.
            assert c.mesh_axes in (("fsdp",), ("tp",)) or c.shape == (), c
            if "fsdp" in c.mesh_axes:
                small -= c.bytes * c.executions
    assert small >= 0, "an all-reduce over fsdp moves more than the unsharded parameters"


@pytest.mark.slow
def test_blocks_are_gathered_one_at_a_time_in_forward_and_backward():
    """ZeRO-3: each block's parameters are all-gathered inside the layer scan, in the forward
    pass and again in the rematerialized backward pass, whose scan reduce-scatters them."""
    step, rep = report("fsdp8")
    sharded = [
        s
        for s in jax.tree.leaves(
            step.param_specs["blocks"], is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec)
        )
        if "fsdp" in s
    ]
    layer_loops = [lp for lp in rep.loops if lp.trip_count == WIDE.n_layer]
    gathers = sorted(lp.collectives_per_iteration["all-gather"] for lp in layer_loops)
    scatters = sorted(lp.collectives_per_iteration["reduce-scatter"] for lp in layer_loops)
    assert len(layer_loops) == 2, rep.loops  # the forward scan and the backward scan
    # The backward re-gathers what its recomputation needs (not the last bias: x + b's
    # gradient needs no b) and reduce-scatters every sharded parameter of the block.
    assert 0 < gathers[0] <= gathers[1] == len(sharded), rep.loops
    assert scatters == [0, len(sharded)], rep.loops


# ---------------------------------------------------------------------------------------------
# Deterministic numerics
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow  # `make test-all`: keeps `make test` under 10 minutes
def test_deterministic_losses_are_bitwise_reproducible(single):
    with ttjax.numerics("deterministic"):
        first, step = run(fsdp_step("fsdp8"), 3), fsdp_step("fsdp8")
        second = run(step, 3)  # a second TrainStep: traced and compiled afresh
        tokens = step._put_batch(batches(1)[0])
        compiled = step._step.lower(step.init_state(params()), tokens).compile()  # jit's cache
    assert first.tobytes() == second.tobytes()
    np.testing.assert_allclose(first, single[:3], rtol=1e-5)
    # Every gradient sum is ordered by ttjax.numerics: no reduce-scatter is left to XLA.
    counts = ttjax.inspect.report_compiled(compiled, mesh=step.mesh).collective_counts()
    assert counts["reduce-scatter"] == 0 and counts["all-to-all"] > 0, counts


# ---------------------------------------------------------------------------------------------
# The CLI: FSDP's YAML, its banner, and a checkpoint resumed onto DDP 8
# ---------------------------------------------------------------------------------------------


def _yaml(tmp: Path, name: str, ckpt: Path, *, fsdp: bool) -> Path:
    doc = {
        "training_config": {
            "project_name": name,
            "batch_size": 8,
            "max_steps": 6,
            "eval_every": 0,
            "model_save_interval": 3,
            "checkpoint_dir": str(ckpt),
            "tokenizer_type": "char",
            "optimizer": {"type": "AdamW", "lr": 0.003},
        },
        "transformer_config": {**YAML_MODEL, "num_blocks": 1},
        "device_config": {"mesh_shape": [1, 8], "enable_ddp": not fsdp, "enable_fsdp": fsdp},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _cli(path: Path, out: Path, *extra: str) -> list[float]:
    argv = ["--config", str(path), "--no-progress", "--out", str(out), *extra]
    assert nanogpt_train.cli(argv) == 0
    recs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [r["loss"] for r in recs]


@pytest.mark.slow
def test_fsdp8_checkpoint_resumes_onto_ddp8(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_1x8_mesh_graph_descriptor.textproto")
    whole = _cli(_yaml(tmp_path, "whole", tmp_path / "c0", fsdp=True), tmp_path / "o0")
    banner = next(line for line in capsys.readouterr().out.splitlines() if " on mesh " in line)
    assert "on mesh [1, 8]: DDP off, FSDP 8 over mesh axis 'fsdp', TP off, PP off" in banner
    ckpt = tmp_path / "c1"
    first = _cli(_yaml(tmp_path, "fsdp", ckpt, fsdp=True), tmp_path / "o1", "--max-steps", "3")
    resumed = _cli(_yaml(tmp_path, "ddp", ckpt, fsdp=False), tmp_path / "o1", "--resume")
    assert "DDP 8 over mesh axis 'dp', TP off" in capsys.readouterr().out
    assert len(whole) == len(resumed) == 6 and first == whole[:3]
    np.testing.assert_allclose(resumed, whole, rtol=1e-5)


@pytest.mark.parametrize(
    "name, axes",
    [
        ("training_nanogpt_fsdp.yaml", {"fsdp": 1}),  # a 1x8 line: FSDP takes the long axis
        ("training_nanogpt_tp_fsdp.yaml", {"fsdp": 0, "tp": 1}),  # TTML's [8, 4]: FSDP -> TP
    ],
)
def test_yaml_configs_place_fsdp(name, axes):
    run_config = load_config(ROOT / "configs" / name)
    dev = run_config.device
    assert assign_axes(dev.mesh_shape, dev.distributed_config()) == axes


def test_fsdp_with_pp_builds_a_pipeline_sharded_over_fsdp():
    """FSDP x PP (tests/ttml/test_pipeline_fsdp.py checks its numbers): the context's fsdp axis
    reaches the pipeline, which splits the batch over it."""
    ctx = ParallelismContext.create(
        mesh((2, 4)), DistributedConfig(enable_fsdp=True, enable_pp=True)
    )
    assert ctx.get_fsdp_axis() == 0 and ctx.get_pp_axis() == 1
    stages = (None, None, None)
    pipe = Pipeline.from_context(ctx, PipelineParallelConfig(num_blocks=4), *stages)
    assert (pipe.fsdp_axis, pipe.pp_axis, pipe.dp_axis) == ("fsdp", "pp", None)
    assert pipe.data_spec == P("fsdp") and pipe.data_size == 2
    with pytest.raises(ParallelPlanError, match=r"batch_size=3 must be divisible by the data"):
        pipe.check_batch(3)


@pytest.mark.slow
def test_llama_fsdp2_tp4_equals_single_device():
    """The TTML Llama's scan gathers its blocks too: FSDP 2 x TP 4 (2x4) follows one device."""
    from models.llama.config import get_config
    from models.llama.train_model import LlamaTrain, param_axes, params_from_weights
    from models.llama.weights import random_weights

    config = get_config("tiny").with_(max_seq_len=16)
    opt = OptimizerSettings(learning_rate=3e-3, warmup_steps=2, total_steps=6)
    weights = params_from_weights(config, random_weights(config, seed=5489))
    data = np.random.default_rng(0).integers(0, config.vocab_size, (6, 1, 4, 13)).astype(np.int32)

    def llama_losses(shape, **axes):
        par = ParallelismContext.from_axes(mesh(shape), **axes)
        step = TrainStep(LlamaTrain(config).loss, param_axes(config), par, make_optimizer(opt))
        state, out = step.init_state(weights), []
        for tokens in data:
            state, m = step(state, tokens)
            out.append(float(m["loss"]))
        return np.asarray(out), step

    want, _ = llama_losses((1, 1))
    got, step = llama_losses((2, 4), fsdp_axis=0, tp_axis=1)
    assert "fsdp" in step.param_specs["blocks"]["w1"]["weight"]
    np.testing.assert_allclose(got, want, rtol=1e-5)
