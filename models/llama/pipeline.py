"""Llama's training forward (``models/llama/train_model.py``) cut into pipeline stages.

As TTML's ``PipelineParallelLlama``: the first stage embeds (``tok_emb``), every stage runs its
``llama_block_{i}`` range, the last applies ``ln_fc`` and ``fc``; ``io`` holds those three and the
blocks are the training tree's own, stacked on axis 0. Under TP the embedding and ``fc`` stay
vocabulary-parallel.

>>> embed, block, head = stage_functions(LlamaTrain(config))
>>> io, blocks = split_params(params_from_weights(config, random_weights(config, seed)))
"""

from __future__ import annotations

from typing import Any

from models.llama import train_model
from models.llama.config import LlamaConfig
from models.llama.train_model import LlamaTrain
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.ops.loss import cross_entropy_loss

Params = dict[str, Any]
IO_KEYS = ("tok_emb", "ln_fc", "fc")


def stage_functions(model: LlamaTrain) -> tuple[Any, Any, Any]:
    """``(embed, block, head)`` on one device's local parameters (the modules read the plan)."""

    def embed(io: Params, idx: Any) -> Any:
        return model.tok_emb(io["tok_emb"], idx)

    def head(io: Params, x: Any, targets: Any) -> Any:
        return cross_entropy_loss(model.fc(io["fc"], model.ln_fc(io["ln_fc"], x)), targets)

    return embed, model.block, head


def split_params(params: Params) -> tuple[Params, Params]:
    """``{tok_emb, blocks, ln_fc, fc}`` -> ``(io, blocks)`` (blocks stay ``[n_layers, ...]``)."""
    return {k: params[k] for k in IO_KEYS}, params["blocks"]


def io_specs(config: LlamaConfig, par: ParallelismContext) -> Params:
    specs = train_model.param_specs(config, par)
    return {k: specs[k] for k in IO_KEYS}


def block_specs(config: LlamaConfig, par: ParallelismContext) -> Params:
    """PartitionSpecs of one block (the pipeline adds the stage and slot dims)."""
    return train_model.block_specs(config, par)
