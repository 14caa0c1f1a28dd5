"""Megatron sequence parallelism (``ttjax.ttml.sp``): its collectives and regions against the
unsplit computation (numpy-free: the same function on one device, by ``jax.grad``)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from _tiny import YAML_MODEL
from jax.sharding import PartitionSpec as P

import ttjax
from benchmarks import bench_sp
from models.llama.config import get_config
from models.llama.train_model import LlamaTrain, params_from_weights
from models.llama.train_model import param_axes as llama_axes
from models.llama.weights import random_weights
from models.nanogpt import train as nanogpt_train
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params
from models.nanogpt.weights import param_axes as gpt_axes
from ttjax.errors import ConfigError, ParallelPlanError
from ttjax.plan import SEQUENCE_PARALLEL_RULE, LogicalAxes, ParallelDims
from ttjax.ttml import sp
from ttjax.ttml.cli import model_vocab, pipeline_step
from ttjax.ttml.config import load_config
from ttjax.ttml.context import DistributedConfig, ParallelismContext
from ttjax.ttml.errors import ParallelismConfigError
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

ROOT = Path(__file__).resolve().parents[2]
B, T, C, F, D = 4, 8, 16, 32, 4  # D: head size (4 heads, one per tp device)
DIMS = ParallelDims.from_sizes(dp=2, tp=4)
SP_DIMS = DIMS.with_sequence_parallel()


@functools.cache
def _ttnn_mesh() -> ttjax.MeshDevice:
    return ttjax.open_mesh_device(ttjax.MeshShape(2, 4))


def _mesh() -> jax.sharding.Mesh:
    return SP_DIMS.jax_mesh(_ttnn_mesh().jax_mesh.devices)


def _norm(x, g):
    mu = jnp.mean(x, -1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(jnp.mean(jnp.square(x - mu), -1, keepdims=True) + 1e-5) * g


def _block(p, x, tp=None):
    """A transformer block written as the models write theirs (token count read from the
    block's input, heads reshaped with ``-1``): attention and a gated MLP, each a Megatron pair,
    with norms, biases and residual adds between the pairs. ``tp=None``: the unsplit block."""
    B, T, _ = x.shape

    def col(h, w):
        return sp.column_output(sp.column_input(h, tp) @ w)

    def row(a, w, b):
        return sp.row_output(sp.row_input(a, tp) @ w, tp) + sp.shared(b)

    qkv = col(_norm(x, sp.shared(p["g1"])), p["wqkv"])
    q, k, v = sp.heads(*jnp.moveaxis(qkv.reshape(B, T, -1, 3, D), 3, 0))
    y = jax.nn.dot_product_attention(q, k, v, is_causal=True)
    x = x + row(sp.merged(y.reshape(*y.shape[:2], -1)), p["wo"], p["bo"])
    h = _norm(x, sp.shared(p["g2"]))
    a = jax.nn.gelu(col(h, p["w1"])) * col(h, p["w3"])  # two readers of one norm output
    return x + row(a, p["w2"], p["b2"])


def _params(seed: int = 0) -> dict:
    shapes = {
        "g1": (C,),
        "wqkv": (C, 3 * C),
        "wo": (C, C),
        "bo": (C,),
        "g2": (C,),
        "w1": (C, F),
        "w3": (C, F),
        "w2": (F, C),
        "b2": (C,),
    }
    keys = jax.random.split(jax.random.key(seed), len(shapes))
    out = {k: 0.2 * jax.random.normal(key, s) for key, (k, s) in zip(keys, shapes.items())}
    return out | {"g1": 1 + out["g1"], "g2": 1 + out["g2"]}


# Column linears split their output columns (whole heads: q, k, v per head), row linears
# their input rows; norms and the row linears' biases are replicated.
SPECS = {
    "g1": P(),
    "wqkv": P(None, "tp"),
    "wo": P("tp"),
    "bo": P(),
    "g2": P(),
    "w1": P(None, "tp"),
    "w3": P(None, "tp"),
    "w2": P("tp"),
    "b2": P(),
}


def _dense(p, x, c):
    """The unsplit loss and its gradients."""

    def loss(p, x):
        return jnp.sum(c * _block(p, x))

    return jax.value_and_grad(loss, argnums=(0, 1))(p, x)


def _split(p, x, c, dims):
    """The same loss under ``dims`` (batch over dp, TP pairs over tp, SP when the plan says):
    loss and per-device gradients, summed over dp as the step's DDP sum would."""

    def body(p, x, c):
        def loss(p, x):
            y = sp.over_blocks(lambda h: _block(p, h, "tp"), x, dims)
            return jnp.sum(c * y)

        val, (gp, gx) = jax.value_and_grad(loss, argnums=(0, 1))(p, x)
        return jax.lax.psum(val, "dp"), jax.tree.map(lambda g: jax.lax.psum(g, "dp"), gp), gx

    fn = jax.shard_map(
        body,
        mesh=_mesh(),
        in_specs=(SPECS, P("dp"), P("dp")),
        out_specs=(P(), SPECS, P("dp")),
        check_vma=False,
    )
    return jax.jit(fn)(p, x, c)


def _close(got, want, what: str = "") -> None:
    """Equal to 1e-5 of the largest magnitude (float32 sums in another order)."""
    want = np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max(), err_msg=what)


@pytest.mark.slow
def test_sp_pairs_equal_the_unsplit_block_values_and_gradients():
    """Norm and residual on sequence slices, all-gather before the column linears and
    reduce-scatter after the row linear: loss, weight, norm-scale, bias and input gradients
    equal the unsplit computation's, with every sum in device order (the models' tests below
    run XLA's order)."""
    p = _params()
    x = jax.random.normal(jax.random.key(1), (B, T, C))
    c = jax.random.normal(jax.random.key(2), (B, T, C))
    want_loss, (want_p, want_x) = _dense(p, x, c)
    with ttjax.numerics("deterministic"):
        loss, gp, gx = _split(p, x, c, SP_DIMS)
    np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-5)
    _close(gx, want_x)
    for k in p:
        _close(gp[k], want_p[k], k)


def test_under_sp_one_norm_output_is_gathered_once_and_the_row_output_reduce_scattered():
    """Forward: one all-gather per norm output (the MLP's two readers share one) and one
    reduce-scatter per row linear, no all-reduce; TP alone: one all-reduce per row linear."""
    p = _params()
    x = jnp.zeros((B // 2, T, C))

    def fwd(dims):
        def body(p, x):
            return sp.over_blocks(lambda h: _block(p, h, "tp"), x, dims)

        return jax.shard_map(
            body, mesh=_mesh(), in_specs=(SPECS, P()), out_specs=P(), check_vma=False
        )

    def count(dims):
        text = str(jax.make_jaxpr(fwd(dims))(p, x))
        return {k: text.count(k + "[") for k in ("all_gather", "reduce_scatter", "psum")}

    # two gathers and two reduce-scatters in the block; its output is gathered once more.
    assert count(SP_DIMS) == {"all_gather": 3, "reduce_scatter": 2, "psum": 0}
    assert count(DIMS) == {"all_gather": 0, "reduce_scatter": 0, "psum": 2}


def test_row_input_not_parallel_under_sp_equals_the_unsplit_linear():
    """A row-parallel linear fed a replicated input (TTML's default ``input_is_parallel=False``)
    inside the SP blocks: the gathered sequence, this device's features."""
    w = jax.random.normal(jax.random.key(3), (C, C))
    x = jax.random.normal(jax.random.key(4), (B, T, C))
    c = jax.random.normal(jax.random.key(5), (B, T, C))
    want, (want_w, want_x) = jax.value_and_grad(
        lambda w, x: jnp.sum(c * (x + x @ w)), argnums=(0, 1)
    )(w, x)

    def body(w, x, c):
        def loss(w, x):
            y = sp.over_blocks(
                lambda h: h + sp.row_output(sp.row_input(h, "tp", False) @ w, "tp"), x, SP_DIMS
            )
            return jnp.sum(c * y)

        val, (gw, gx) = jax.value_and_grad(loss, argnums=(0, 1))(w, x)
        return jax.lax.psum(val, "dp"), jax.lax.psum(gw, "dp"), gx

    loss, gw, gx = jax.jit(
        jax.shard_map(
            body,
            mesh=_mesh(),
            in_specs=(P("tp"), P("dp"), P("dp")),
            out_specs=(P(), P("tp"), P("dp")),
            check_vma=False,
        )
    )(w, x, c)
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-5)
    _close(gw, want_w)
    _close(gx, want_x)


# ---------------------------------------------------------------------------------------------
# The rule and its errors
# ---------------------------------------------------------------------------------------------


def test_sp_is_one_rule_of_the_plan():
    assert SEQUENCE_PARALLEL_RULE in SP_DIMS.rules and SEQUENCE_PARALLEL_RULE not in DIMS.rules
    assert SP_DIMS.sequence_parallel and not DIMS.sequence_parallel
    assert sp.sequence_axis(SP_DIMS) == "tp" and sp.sequence_axis(DIMS) is None
    # parameters lie as under TP alone: the rule names activations only
    w = LogicalAxes("embed", "mlp")
    assert SP_DIMS.spec(w) == DIMS.spec(w) == P(None, "tp")
    assert repr(SP_DIMS) == "ParallelDims(dp=2, tp=4, sequence parallel)"
    # a tp axis of size 1 (one device) splits nothing
    assert sp.sequence_axis(ParallelDims.from_sizes(tp=1).with_sequence_parallel()) is None


def test_sp_without_tp_is_a_plan_error():
    with pytest.raises(ParallelPlanError, match=r"has none.\nfix: enable tensor parallelism"):
        ParallelDims.from_sizes(dp=8).with_sequence_parallel()


def test_seq_len_that_does_not_split_over_tp_is_a_plan_error():
    sp.check_seq_len(16, SP_DIMS)
    sp.check_seq_len(10, DIMS)  # SP off: TP takes any length
    with pytest.raises(ParallelPlanError, match=r"seq_len=10 does not split over the TP size 4"):
        sp.check_seq_len(10, SP_DIMS)
    cp_dims = ParallelDims.from_sizes(cp=2, tp=4).with_sequence_parallel()
    with pytest.raises(ParallelPlanError, match=r"multiple of 8, e.g. 16") as e:
        sp.check_seq_len(12, cp_dims)  # 6 tokens per cp device do not split over 4
    assert "enable_sp: false" in str(e.value)


def test_gathered_output_inside_the_sp_blocks_is_refused():
    def body(x):
        def run(h):
            sp.refuse_gathered_output("ColumnParallelLinear")
            return h

        return sp.over_blocks(run, x, SP_DIMS)

    fn = jax.shard_map(body, mesh=_mesh(), in_specs=P(), out_specs=P(), check_vma=False)
    with pytest.raises(ConfigError, match=r"gather_output=True\) inside the blocks"):
        jax.jit(fn)(jnp.zeros((B, T, C)))
    sp.refuse_gathered_output("ColumnParallelLinear")  # outside the blocks: TP's own


# ---------------------------------------------------------------------------------------------
# The TTML-style key: device_config.enable_sp
# ---------------------------------------------------------------------------------------------


def _config(tmp_path, seq: int = 8, **device) -> Path:
    doc = {
        "training_config": {"batch_size": 4, "tokenizer_type": "char"},
        "transformer_config": {**YAML_MODEL, "max_sequence_length": seq},
        "device_config": {"mesh_shape": [2, 4], **device},
    }
    path = tmp_path / "sp.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_enable_sp_reaches_the_plan_of_the_run(tmp_path):
    run = load_config(_config(tmp_path, enable_ddp=True, enable_tp=True, enable_sp=True))
    assert run.device.enable_sp and run.device.distributed_config().enable_sp
    ctx = ParallelismContext.create(_ttnn_mesh(), run.device.distributed_config())
    assert ctx.is_sp_enabled() and ctx.dims.sequence_parallel
    assert ctx.dims == SP_DIMS and "SP over mesh axis 'tp'" in ctx.describe()
    assert not load_config(_config(tmp_path, enable_ddp=True, enable_tp=True)).device.enable_sp


def test_enable_sp_without_tp_names_the_key_and_the_fix(tmp_path):
    path = _config(tmp_path, mesh_shape=[1, 8], enable_ddp=True, enable_sp=True)
    with pytest.raises(ParallelismConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: device_config.enable_sp = true but enable_tp is false"), msg
    assert "\nfix: set enable_tp: true" in msg
    with pytest.raises(ParallelismConfigError, match=r"enable_sp=True\): sequence parallelism"):
        config = DistributedConfig(enable_ddp=True, enable_fsdp=True, enable_sp=True)
        ParallelismContext.create(_ttnn_mesh(), config)


def test_a_sequence_length_sp_cannot_split_names_max_sequence_length(tmp_path):
    path = _config(tmp_path, seq=10, enable_ddp=True, enable_tp=True, enable_sp=True)
    with pytest.raises(ParallelPlanError) as e:
        load_config(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: transformer_config.max_sequence_length: seq_len=10"), msg
    assert "multiple of 4, e.g. 12" in msg and "enable_sp: false" in msg
    load_config(_config(tmp_path, seq=10, enable_ddp=True, enable_tp=True))  # TP alone: fine


# ---------------------------------------------------------------------------------------------
# NanoGPT and Llama, unchanged, under SP on 2x4 (TP 4 x DDP 2): equal to one device
# ---------------------------------------------------------------------------------------------

SEQ, BATCH = 16, 2
GPT_CONFIG = GPTConfig(vocab_size=64, block_size=SEQ, n_layer=2, n_head=4, n_embd=32)
LLAMA_CONFIG = get_config("tiny").with_(
    vocab_size=64, dim=64, n_layers=2, n_heads=8, n_kv_heads=4, ffn_dim=128, max_seq_len=SEQ
)
OPT = OptimizerSettings(learning_rate=3e-3, warmup_steps=1, total_steps=10)


# name -> (mesh shape, ParallelismContext.from_axes's keywords); SP composes with FSDP and CP as with DDP.
LAYOUTS: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {
    "single": ((1, 1), {}),
    "tp_ddp_sp": ((2, 4), {"ddp_axis": 0, "tp_axis": 1, "sequence_parallel": True}),
    "tp_fsdp_sp": ((2, 4), {"fsdp_axis": 0, "tp_axis": 1, "sequence_parallel": True}),
    "tp_cp_sp": ((2, 4), {"cp_axis": 0, "tp_axis": 1, "sequence_parallel": True}),
}


@functools.cache
def _model_step(name: str, layout: str) -> tuple[TrainStep, Any]:
    """The model's TrainStep on ``layout`` and its whole parameters."""
    shape, axes = LAYOUTS[layout]
    par = ParallelismContext.from_axes(ttjax.open_mesh_device(ttjax.MeshShape(*shape)), **axes)
    if name == "nanogpt":
        loss, params = GPT(GPT_CONFIG).loss, init_params(GPT_CONFIG, 5489)
        layout_axes = gpt_axes(GPT_CONFIG)
    else:
        params = params_from_weights(LLAMA_CONFIG, random_weights(LLAMA_CONFIG, seed=3))
        loss, layout_axes = LlamaTrain(LLAMA_CONFIG).loss, llama_axes(LLAMA_CONFIG)
    return TrainStep(loss, layout_axes, par, make_optimizer(OPT)), params


def _tokens(n: int = 1, seq: int = SEQ, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 64, (n, 1, BATCH, seq + 1)).astype(np.int32)


@pytest.mark.parametrize(
    ("name", "layout"),
    [
        ("nanogpt", "tp_ddp_sp"),
        pytest.param("llama", "tp_ddp_sp", marks=pytest.mark.slow),
        pytest.param("nanogpt", "tp_fsdp_sp", marks=pytest.mark.slow),
        pytest.param("llama", "tp_cp_sp", marks=pytest.mark.slow),
    ],
)
def test_models_under_sp_equal_one_device(name, layout):
    """Loss and every gradient (norm scales, biases, embeddings, each block's weights) of one
    micro-batch, SP on 2x4 against the single-device run; and SP really splits (the step's
    program reduce-scatters over tp, where TP alone all-reduces)."""
    single, params = _model_step(name, "single")
    step, _ = _model_step(name, layout)
    tokens = _tokens()[0]
    want_loss, want = single.grads(params, tokens)
    loss, got = step.grads(params, tokens)
    np.testing.assert_allclose(float(loss), float(want_loss), rtol=1e-5)
    flat = jax.tree_util.tree_flatten_with_path(want)[0]
    for (path, w), g in zip(flat, jax.tree_util.tree_leaves(got), strict=True):
        _close(g, w, jax.tree_util.keystr(path))
    text = str(jax.make_jaxpr(step._grads)(params, step._put_batch(tokens)))
    assert re.search(r"reduce_scatter\[[^\]]*axis_name=\('tp',\)", text)
    if name == "nanogpt":  # validation runs the same split
        val = _tokens(2, seed=4)[:, 0]
        np.testing.assert_allclose(
            float(step.eval_loss(params, val)), float(single.eval_loss(params, val)), rtol=1e-5
        )


def _adamw(name: str, layout: str, steps: int = 3) -> np.ndarray:
    step, params = _model_step(name, layout)
    state, out = step.init_state(params), []
    for _ in range(steps):
        state, m = step(state, _tokens(seed=1)[0])
        out.append((float(m["loss"]), float(m["grad_norm"])))
    return np.asarray(out)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["nanogpt", "llama"])
def test_adamw_steps_under_sp_equal_one_device(name):
    """Three AdamW steps on one batch: losses and gradient norms equal the single-device run's
    (parameters are not compared: Adam scales a gradient that is zero up to rounding to a full
    step of either sign)."""
    want = _adamw(name, "single")
    np.testing.assert_allclose(_adamw(name, "tp_ddp_sp"), want, rtol=1e-5)
    assert want[-1, 0] < want[0, 0]  # it trains


def test_train_step_names_a_sequence_sp_cannot_split():
    step, params = _model_step("nanogpt", "tp_ddp_sp")
    with pytest.raises(ParallelPlanError, match=r"TrainStep: seq_len=10 does not split over"):
        step.grads(params, _tokens(seq=10)[0])


def test_sp_with_pp_is_refused_by_the_cli(tmp_path):
    """The pipeline runs its blocks outside the layer scan SP splits: one clean error."""
    run = load_config(_config(tmp_path, enable_tp=True, enable_pp=True, enable_sp=True))
    par = ParallelismContext.create(_ttnn_mesh(), run.device.distributed_config())
    parts = nanogpt_train.build(run, par, model_vocab(run, par))
    with pytest.raises(ConfigError, match=r"sequence parallelism\), but pipeline stages") as e:
        pipeline_step(run, par, parts, OptimizerSettings.from_config(run))
    assert "\nfix: set device_config.enable_sp: false" in str(e.value)


@pytest.mark.slow  # ~1 min: the shipped model size, twice (SP and TP alone), train and eval
def test_shipped_sp_config_trains_through_the_cli_as_tp_alone(tmp_path, capsys):
    """``configs/training_nanogpt_tp_ddp_sp.yaml`` trains through ``models.nanogpt.train``
    (banner: SP), with the losses of the same run under TP alone."""
    summaries = {}
    for name in ("training_nanogpt_tp_ddp_sp.yaml", "training_nanogpt_tp_ddp.yaml"):
        src = ROOT / "configs" / name
        doc = yaml.safe_load(src.read_text())
        run_dir = tmp_path / src.stem
        doc["training_config"]["checkpoint_dir"] = str(run_dir / "ckpt")
        model = doc["training_config"]["model_config"]
        doc["training_config"]["model_config"] = str(src.parent / model)
        path = tmp_path / name
        path.write_text(yaml.safe_dump(doc))
        argv = ["--config", str(path), "--max-steps", "2", "--no-progress"]
        assert nanogpt_train.cli([*argv, "--out", str(run_dir)]) == 0
        out = capsys.readouterr().out.splitlines()
        summaries[name] = (next(x for x in out if " on mesh " in x), json.loads(out[-1]))
    banner, sp_run = summaries["training_nanogpt_tp_ddp_sp.yaml"]
    assert "SP over mesh axis 'tp'" in banner, banner
    tp_run = summaries["training_nanogpt_tp_ddp.yaml"][1]
    np.testing.assert_allclose(sp_run["final_loss"], tp_run["final_loss"], rtol=1e-5)


@pytest.mark.slow  # four compiles of a whole AdamW step
def test_sp_lowers_activation_memory_per_device_not_the_weights():
    """``ttjax.inspect`` on the compiled step (``benchmarks/bench_sp.py``, abstract inputs from
    ``TrainStep.abstract_inputs``): XLA's temporaries per device fall under SP, the resident
    weights and AdamW state do not move; SP reduce-scatters where TP alone all-reduces."""
    configs = {
        "nanogpt": (
            "nanogpt",
            GPTConfig(vocab_size=256, block_size=128, n_layer=2, n_embd=64),
            8,
            128,
        ),
        "llama": ("llama", LLAMA_CONFIG.with_(max_seq_len=128), 8, 128),
    }
    for row in bench_sp.memory_rows(_ttnn_mesh(), configs):
        assert row["ratio"] < 0.9, row
        assert row["sp_resident_bytes"] == row["resident_bytes"], row
        assert row["sp_collectives"]["reduce-scatter"] > row["tp_collectives"]["reduce-scatter"]
        assert row["sp_collectives"]["all-reduce"] < row["tp_collectives"]["all-reduce"]
