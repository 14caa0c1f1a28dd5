"""NanoGPT (``models/nanogpt``) cut into pipeline stages for ``ttjax.ttml.pipeline.Pipeline``.

``io`` holds the token and position embeddings and the final norm (the tied LM head reuses
``wte``); the blocks are NanoGPT's own ``params["blocks"]``, already stacked on axis 0 as the
pipeline stages them.
Under TP the embedding and the LM head stay vocabulary-parallel, so logits are never gathered.

>>> embed, block, head = stage_functions(GPT(config))
>>> io, blocks = split_params(init_params(config, seed))
>>> pipe = Pipeline(mesh, embed, block, head, num_blocks=config.n_layer, dims=par.dims, ...,
...                 io_specs=io_specs(config, par), block_specs=block_specs(config, par))
"""

from __future__ import annotations

from typing import Any

from models.nanogpt import weights
from models.nanogpt.model import GPT, GPTConfig
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.modules import Positions
from ttjax.ttml.ops.loss import cross_entropy_loss

Params = dict[str, Any]
IO_KEYS = ("wte", "wpe", "ln_f", "lm_head")  # lm_head: only when the weights are untied


def stage_functions(model: GPT) -> tuple[Any, Any, Any]:
    """``(embed, block, head)`` on one device's local parameters (the modules read the plan)."""

    def embed(io: Params, idx: Any) -> Any:
        return model.wte(io["wte"], idx) + Positions().rows(io["wpe"], idx.shape[-1])

    def head(io: Params, x: Any, targets: Any) -> Any:
        logits = model.wte.attend(io[model.head_key], model.ln_f(io["ln_f"], x))
        return cross_entropy_loss(logits, targets)

    return embed, model.block, head


def split_params(params: Params) -> tuple[Params, Params]:
    """NanoGPT's ``{wte, wpe, blocks, ln_f[, lm_head]}`` -> ``(io, blocks)``, blocks ``[n_layer, ...]``."""
    return {k: params[k] for k in IO_KEYS if k in params}, params["blocks"]


def join_params(io: Params, blocks: Params) -> Params:
    """The inverse of :func:`split_params`."""
    return {**io, "blocks": blocks}


def io_specs(config: GPTConfig, par: ParallelismContext) -> Params:
    specs = weights.param_specs(config, par)
    return {k: specs[k] for k in IO_KEYS if k in specs}


def block_specs(config: GPTConfig, par: ParallelismContext) -> Params:
    """PartitionSpecs of one block (the pipeline adds the stage and slot dims)."""
    return weights.block_specs(config, par)
