"""Train NanoGPT from a TTML YAML file on the ttjax mesh (DDP, TP, PP and their pairs from device_config).

python -m models.nanogpt.train --config configs/training_nanogpt_tp_ddp.yaml
python -m models.nanogpt.train --config configs/training_nanogpt_tp_ddp.yaml --resume
python -m models.nanogpt.train --config configs/training_nanogpt_pp.yaml
"""

from __future__ import annotations

from collections.abc import Sequence

import jax

from models.nanogpt import pipeline
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import check_heads, init_params, param_axes
from ttjax.errors import ConfigError
from ttjax.ttml.cli import (
    ModelParts,
    StageParts,
    check_model_type,
    main,
    note_dropout,
    run_cli,
)
from ttjax.ttml.config import RunConfig
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.modules import RUNNER_REMAT


def gpt_config(run: RunConfig, vocab_size: int) -> GPTConfig:
    """NanoGPT's config from the model file's ``transformer_config`` (``runner_type`` picks the
    remat policy)."""
    m = run.model
    check_model_type(run, "gpt2", "python -m models.llama.train")
    if m.positional_embedding_type != "trainable":
        raise ConfigError(
            f"{run.path}: transformer_config.positional_embedding_type="
            f"{m.positional_embedding_type!r} is not supported by ttjax's NanoGPT.\n"
            "fix: positional_embedding_type: trainable."
        )
    note_dropout(run)
    return GPTConfig(
        vocab_size=vocab_size,
        block_size=m.max_sequence_length,
        n_layer=m.num_blocks,
        n_head=m.num_heads,
        n_embd=m.embedding_dim,
        remat_policy=RUNNER_REMAT[m.runner_type],
        tie_weights=m.weight_tying == "enabled",
    )


def build(run: RunConfig, par: ParallelismContext, vocab_size: int) -> ModelParts:
    config = gpt_config(run, vocab_size)
    model = GPT(config)
    seed = run.training.seed
    # Shapes first: the memory preflight can refuse the run before any weight exists.
    params = jax.eval_shape(lambda: init_params(config, seed))
    n = sum(int(p.size) for p in jax.tree_util.tree_leaves(params))
    desc = (
        f"NanoGPT {n / 1e6:.2f}M params ({config.n_layer} blocks, {config.n_head} heads, "
        f"dim {config.n_embd}, vocab {config.vocab_size}, context {config.block_size})"
    )

    def stages(p: ParallelismContext) -> StageParts:
        return StageParts.from_adapter(pipeline, model, config, p)

    check_heads(config, par)
    return ModelParts(
        model.loss, params, param_axes(config), desc, stages, init=lambda: init_params(config, seed)
    )


PROG = "python -m models.nanogpt.train"


def cli(argv: Sequence[str] | None = None) -> int:
    """The command line; errors raise (``run_cli`` turns them into one clean message)."""
    return main(argv, build=build, prog=PROG)


if __name__ == "__main__":
    raise SystemExit(run_cli(cli, None, PROG))
