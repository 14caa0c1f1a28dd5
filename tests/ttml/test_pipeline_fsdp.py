"""FSDP x PP (``ttjax.ttml.pipeline`` with ``fsdp_axis``) against the single-device run.

NanoGPT on 2x4, FSDP 2 on mesh axis 0 and 4 stages on axis 1: parameters sharded over fsdp on
their embed dims (the plan's specs), gathered block by block inside the stages; the loss and
gradients of one step and a few AdamW steps equal one device's, the compiled step holds half the
parameter bytes of DDP 2 x PP 4, and the CLI builds it from ``enable_fsdp`` + ``enable_pp``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import yaml
from _tiny import YAML_MODEL
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from models.nanogpt import pipeline as gpt_pipeline
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.train import cli
from models.nanogpt.weights import init_params
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.pipeline import Pipeline
from ttjax.ttml.pipeline_train import PipelineTrainStep

CFG = GPTConfig(vocab_size=64, block_size=8, n_layer=4, n_head=4, n_embd=32)
BATCH = 8
OPT = optax.adamw(1e-2, weight_decay=0.01)


class _MeshDevice:
    """The attributes ``ParallelismContext`` reads from a mesh device, over a plain jax Mesh."""

    def __init__(self, mesh: Mesh) -> None:
        self.jax_mesh, self.axis_names, self.shape = mesh, mesh.axis_names, mesh.devices.shape


def _pipeline(data_role: str, schedule: str = "1f1b") -> Pipeline:
    """NanoGPT on 2x4: ``data_role`` ("fsdp" or "dp") 2 on axis 0, PP 4 on axis 1."""
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), (data_role, "pp"))
    data = {f"{'ddp' if data_role == 'dp' else 'fsdp'}_axis": 0}
    par = ParallelismContext.from_axes(_MeshDevice(mesh), pp_axis=1, **data)
    return Pipeline(
        mesh,
        *gpt_pipeline.stage_functions(GPT(CFG)),
        num_blocks=CFG.n_layer,
        dims=par.dims,
        num_microbatches=2,
        schedule=schedule,
        io_specs=gpt_pipeline.io_specs(CFG, par),
        block_specs=gpt_pipeline.block_specs(CFG, par),
    )


def _batch(key: Any) -> tuple[Any, Any]:
    seq = jax.random.randint(key, (BATCH, CFG.block_size + 1), 0, CFG.vocab_size)
    return seq[:, :-1], seq[:, 1:]


def _loss(params: tuple[Any, Any], tokens: Any, targets: Any) -> Any:
    """The whole model on one device (``GPT.loss``): the parity reference."""
    return GPT(CFG).loss(gpt_pipeline.join_params(*params), tokens, targets)


def _params() -> tuple[Any, Any]:
    return gpt_pipeline.split_params(init_params(CFG, 0))


def _close(got: Any, want: Any, rtol: float) -> None:
    for (path, a), b in zip(
        jax.tree_util.tree_leaves_with_path(got), jax.tree_util.tree_leaves(want), strict=True
    ):
        scale = float(np.max(np.abs(b)))
        np.testing.assert_allclose(
            a, b, rtol=rtol, atol=rtol * scale, err_msg=jax.tree_util.keystr(path)
        )


@pytest.fixture(scope="module")
def fsdp_pp() -> Pipeline:
    return _pipeline("fsdp")


def test_fsdp_pp_shards_every_embed_dim(fsdp_pp) -> None:
    io, blocks = _params()
    staged = fsdp_pp.stage_blocks(blocks)
    # [stage, slot, embed, 3 x embed]: the plan's ("embed", "fsdp") on the block's own dims
    assert staged["c_attn"]["weight"].sharding.spec == P("pp", None, "fsdp")
    assert staged["mlp_proj"]["weight"].sharding.spec == P("pp", None, None, "fsdp")
    assert fsdp_pp.place_io(io)["wte"]["weight"].sharding.spec == P(None, "fsdp")
    for path, leaf in jax.tree_util.tree_leaves_with_path(staged):  # every weight matrix
        if leaf.ndim == 4:
            assert "fsdp" in leaf.sharding.spec, jax.tree_util.keystr(path)
            assert leaf.addressable_shards[0].data.size * 8 == leaf.size


@pytest.mark.slow
def test_fsdp2_pp4_loss_and_gradients_equal_single_device(fsdp_pp) -> None:
    io, blocks = _params()
    tokens, targets = _batch(jax.random.key(1))
    ref_loss, ref_grads = jax.jit(jax.value_and_grad(_loss))((io, blocks), tokens, targets)
    loss, (d_io, d_blocks) = jax.jit(fsdp_pp.value_and_grad)(
        fsdp_pp.place_io(io), fsdp_pp.stage_blocks(blocks), tokens, targets
    )
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)
    assert d_blocks["c_attn"]["weight"].sharding.spec == P("pp", None, "fsdp")
    _close((d_io, fsdp_pp.unstage_blocks(d_blocks)), ref_grads, 1e-5)


@pytest.mark.slow
def test_fsdp2_pp4_adamw_steps_equal_single_device(fsdp_pp) -> None:
    params = _params()
    opt_state = OPT.init(params)

    @jax.jit
    def ref_step(params, opt_state, tokens, targets):
        loss, grads = jax.value_and_grad(_loss)(params, tokens, targets)
        updates, opt_state = OPT.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    step = PipelineTrainStep(fsdp_pp, OPT)
    state = step.init_state(_params())
    for i in range(3):
        tokens, targets = _batch(jax.random.key(100 + i))
        params, opt_state, ref_loss, ref_grads = ref_step(params, opt_state, tokens, targets)
        block = jnp.concatenate([tokens, targets[:, -1:]], axis=1)[None]  # [1, batch, seq + 1]
        _, (d_io, d_blocks) = step.grads(state.params, block)
        state, metrics = step(state, block)
        np.testing.assert_allclose(float(metrics["loss"]), float(ref_loss), rtol=1e-5)
        # As in test_pipeline: AdamW turns float32 rounding (e.g. the key bias's ~1e-6 gradient,
        # zero in exact arithmetic) into lr-sized steps, so later gradients agree to 1e-3.
        _close((d_io, fsdp_pp.unstage_blocks(d_blocks)), ref_grads, 1e-5 if i == 0 else 1e-3)


def _param_bytes_per_device(pipe: Pipeline) -> int:
    """Per-device bytes of the compiled step's parameter arguments (from its input shardings)."""
    io, blocks = _params()
    args = (pipe.place_io(io), pipe.stage_blocks(blocks), *_batch(jax.random.key(1)))
    compiled = jax.jit(pipe.value_and_grad).lower(*args).compile()
    shardings = jax.tree.leaves(compiled.input_shardings[0][:2])
    leaves = jax.tree.leaves(args[:2])
    return sum(
        int(np.prod(s.shard_shape(a.shape))) * a.dtype.itemsize
        for s, a in zip(shardings, leaves, strict=True)
    )


@pytest.mark.slow
def test_fsdp_pp_holds_half_the_parameter_bytes_of_ddp_pp(fsdp_pp) -> None:
    fsdp, ddp = _param_bytes_per_device(fsdp_pp), _param_bytes_per_device(_pipeline("dp"))
    # Every weight halves; only the norms and the biases of heads/mlp dims (no embed dim, 3% of
    # the bytes here) stay whole on both fsdp devices.
    assert 0.5 * ddp < fsdp < 0.52 * ddp, (fsdp, ddp)


def _yaml(tmp: Path, name: str, mesh: list[int], **flags: bool) -> Path:
    doc: dict[str, Any] = {
        "training_config": {
            "project_name": name,
            "seed": 5489,
            "batch_size": 4,
            "max_steps": 2,
            "eval_every": 0,
            "model_save_interval": 0,
            "checkpoint_dir": str(tmp / name / "ckpt"),
            "tokenizer_type": "char",
            "optimizer": {"type": "AdamW", "lr": 0.003, "weight_decay": 0.01},
        },
        "transformer_config": YAML_MODEL,
        "device_config": {"mesh_shape": mesh, **flags},
    }
    if flags.get("enable_pp"):
        doc["multihost_config"] = {
            "pipeline_parallel_config": {"num_blocks": 4, "num_microbatches": 2}
        }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.slow  # ~20 s; the fast tests above check the same step without the CLI
def test_cli_builds_fsdp_pp_and_its_losses_equal_single_device(tmp_path, monkeypatch) -> None:
    losses = {}
    for name, mesh, desc, flags in (
        ("single", [1, 1], "n150", {}),
        ("fsdppp", [2, 4], "t3k", {"enable_fsdp": True, "enable_pp": True}),
    ):
        monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", f"{desc}_mesh_graph_descriptor.textproto")
        out = tmp_path / f"{name}_out"
        config = _yaml(tmp_path, name, mesh, **flags)
        assert cli(["--config", str(config), "--no-progress", "--out", str(out)]) == 0
        losses[name] = [r["loss"] for r in json.loads((out / "log.json").read_text())["steps"]]
    assert len(losses["fsdppp"]) == 2
    np.testing.assert_allclose(losses["fsdppp"], losses["single"], rtol=1e-5, atol=1e-5)
