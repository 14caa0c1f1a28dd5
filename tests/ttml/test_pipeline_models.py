"""NanoGPT and Llama through the pipeline (PP, PP+TP, PP+DDP, PP+FSDP, PP+FSDP+TP) equal their
single-device step.

Skipped where the training models (``models/nanogpt``, ``models/llama/train_model.py``) are absent.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh

nanogpt_model = pytest.importorskip("models.nanogpt.model")
llama_train = pytest.importorskip("models.llama.train_model")

from models.llama import pipeline as llama_pipeline  # noqa: E402
from models.llama.config import get_config  # noqa: E402
from models.llama.weights import random_weights  # noqa: E402
from models.nanogpt import pipeline as nanogpt_pipeline  # noqa: E402
from models.nanogpt.weights import init_params  # noqa: E402
from ttjax.ttml.context import ParallelismContext  # noqa: E402
from ttjax.ttml.pipeline import Pipeline  # noqa: E402

GPT_CONFIG = nanogpt_model.GPTConfig(vocab_size=64, block_size=8, n_layer=4, n_head=4, n_embd=32)
LLAMA_CONFIG = get_config("tiny").with_(n_layers=4, max_seq_len=16)
BATCH, SEQ = 8, 8


def _model(name: str) -> tuple[object, object, dict, int, int]:
    """(adapter module, model, params, num_blocks, vocab) of NanoGPT or Llama."""
    if name == "nanogpt":
        model = nanogpt_model.GPT(GPT_CONFIG)
        return nanogpt_pipeline, model, init_params(GPT_CONFIG, 5489), 4, GPT_CONFIG.vocab_size
    model = llama_train.LlamaTrain(LLAMA_CONFIG)
    params = llama_train.params_from_weights(LLAMA_CONFIG, random_weights(LLAMA_CONFIG, seed=5489))
    return llama_pipeline, model, params, 4, LLAMA_CONFIG.vocab_size


class _MeshDevice:
    """The two attributes ``ParallelismContext`` reads from a mesh device, over a plain jax Mesh."""

    def __init__(self, mesh: Mesh) -> None:
        self.jax_mesh, self.axis_names, self.shape = (
            mesh,
            mesh.axis_names,
            tuple(mesh.devices.shape),
        )


LAYOUTS = {  # name -> (mesh shape, DDP axis, FSDP axis, TP axis, schedule, microbatches)
    "pp4-1f1b": ((1, 4), None, None, None, "1f1b", 4),
    "tp2-pp4-gpipe": ((2, 4), None, None, 0, "gpipe", 2),
    "ddp2-pp4-1f1b": ((2, 4), 0, None, None, "1f1b", 2),
    "fsdp2-pp4-1f1b": ((2, 4), None, 0, None, "1f1b", 2),
    "fsdp2-tp2-pp2-gpipe": ((2, 2, 2), None, 0, 1, "gpipe", 2),
}


@pytest.mark.slow  # make test: tests/ttml/test_pipeline_cli.py (NanoGPT PP+DDP 2x4 via the CLI)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", ["nanogpt", "llama"])
def test_pipeline_step_matches_single_device(name: str, layout: str) -> None:
    shape, ddp, fsdp, tp, schedule, m = LAYOUTS[layout]
    n = int(np.prod(shape))
    mesh = Mesh(
        np.array(jax.devices()[:n]).reshape(shape), tuple(f"m{i}" for i in range(len(shape)))
    )
    par = ParallelismContext.from_axes(
        _MeshDevice(mesh), ddp_axis=ddp, fsdp_axis=fsdp, tp_axis=tp, pp_axis=len(shape) - 1
    )
    adapter, model, params, num_blocks, vocab = _model(name)
    config = model.config
    seq = jax.random.randint(jax.random.key(0), (BATCH, SEQ + 1), 0, vocab)
    tokens, targets = seq[:, :-1], seq[:, 1:]
    loss, grads = jax.jit(jax.value_and_grad(lambda p: model.loss(p, tokens, targets)))(params)

    embed, block, head = adapter.stage_functions(model)
    pipe = Pipeline(
        par.jax_mesh,
        embed,
        block,
        head,
        num_blocks=num_blocks,
        dims=par.dims,
        num_microbatches=m,
        schedule=schedule,
        io_specs=adapter.io_specs(config, par),
        block_specs=adapter.block_specs(config, par),
    )
    io, blocks = adapter.split_params(params)
    got_loss, (d_io, d_blocks) = jax.jit(pipe.value_and_grad)(
        pipe.place_io(io), pipe.stage_blocks(blocks), tokens, targets
    )
    np.testing.assert_allclose(got_loss, loss, rtol=1e-6)
    want_io, want_blocks = adapter.split_params(grads)
    got = (d_io, pipe.unstage_blocks(d_blocks))
    for (path, a), b in zip(
        jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves((want_io, want_blocks))
    ):
        np.testing.assert_allclose(
            a,
            b,
            rtol=1e-5,
            atol=1e-5 * float(np.max(np.abs(b))),
            err_msg=jax.tree_util.keystr(path),
        )
