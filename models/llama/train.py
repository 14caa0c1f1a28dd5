"""Train the Llama of ``models/llama`` from a TTML YAML file (DDP, TP or TP+DDP from device_config).

    python -m models.llama.train --config configs/training_llama_tp_ddp.yaml

The architecture and the weights are the existing model's: ``LlamaConfig``, RoPE tables in Hugging
Face's rotate-half layout (``rope_tables``) and the canonical weight dict's values
(``random_weights``: the same seed gives the same values on every mesh), built as shapes first
(the memory preflight can refuse a run before any weight exists), then drawn in place into the
stacked layout (``random_params``). The training forward (``train_model.py``) runs per
device inside ``shard_map`` with TTML's modules; ``pipeline.py`` cuts it into pipeline stages.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax

from models.llama import pipeline
from models.llama.config import LlamaConfig, RopeScaling
from models.llama.train_model import (
    LlamaTrain,
    abstract_params,
    check_heads,
    param_axes,
    random_params,
)
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


def llama_config(run: RunConfig, vocab_size: int) -> LlamaConfig:
    """``LlamaConfig`` from the model file's ``transformer_config``."""
    m = run.model
    check_model_type(run, "llama", "python -m models.nanogpt.train")
    note_dropout(run)
    rs = m.rope_scaling
    scaling = None
    if rs.scaling_factor != 0.0 and rs.original_context_length != 0:
        scaling = RopeScaling(
            rs.scaling_factor, rs.low_freq_factor, rs.high_freq_factor, rs.original_context_length
        )
    return LlamaConfig(
        name=run.training.project_name,
        vocab_size=vocab_size,
        dim=m.embedding_dim,
        n_layers=m.num_blocks,
        n_heads=m.num_heads,
        n_kv_heads=m.num_groups,
        ffn_dim=m.intermediate_dim or 4 * m.embedding_dim,
        rope_theta=m.theta,
        rope_scaling=scaling,
        max_seq_len=m.max_sequence_length,
    )


def build(run: RunConfig, par: ParallelismContext, vocab_size: int) -> ModelParts:
    config = llama_config(run, vocab_size)
    tied = run.model.weight_tying == "enabled"
    # Abstract first: the memory preflight compiles the step on these shapes and can refuse the
    # run before any weight exists; the weights are drawn when the state is placed.
    params = abstract_params(config, tied)
    axes = param_axes(config)
    if tied:  # TTML's weight_tying: the LM head is the embedding
        del axes["fc"]
    n = sum(int(p.size) for p in jax.tree_util.tree_leaves(params))
    desc = (
        f"Llama {n / 1e6:.2f}M params ({config.n_layers} blocks, {config.n_heads} heads / "
        f"{config.n_kv_heads} kv, dim {config.dim}, vocab {config.vocab_size})"
    )
    model = LlamaTrain(config, remat_policy=RUNNER_REMAT[run.model.runner_type], tie_weights=tied)

    def stages(p: ParallelismContext) -> StageParts:
        if tied:
            raise ConfigError(
                f"{run.path}: Llama's pipeline stages keep an untied LM head "
                "(transformer_config.weight_tying: enabled).\nfix: weight_tying: disabled, or "
                "enable_pp: false."
            )
        return StageParts.from_adapter(pipeline, model, config, p)

    check_heads(config, par)
    seed = run.training.seed
    return ModelParts(
        model.loss, params, axes, desc, stages, init=lambda: random_params(config, seed, tied)
    )


PROG = "python -m models.llama.train"


def cli(argv: Sequence[str] | None = None) -> int:
    """The command line; errors raise (``run_cli`` turns them into one clean message)."""
    return main(argv, build=build, prog=PROG)


if __name__ == "__main__":
    raise SystemExit(run_cli(cli, None, PROG))
