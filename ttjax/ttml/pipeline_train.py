"""The pipelined gradient strategy of the one train step (:class:`ttjax.ttml.train.BaseTrainStep`).

``PipelineTrainStep`` is what the CLI and :class:`ttjax.ttml.trainer.Trainer` drive when
``device_config.enable_pp`` is set: the step's own ``TrainState`` (step, params, opt_state),
optimizer update, metrics and gradient accumulation, but the gradients come from
:meth:`ttjax.ttml.pipeline.Pipeline.value_and_grad` and the parameters are ``(io, staged
blocks)``: block parameters lie ``[stage, slot, ...]`` on the PP axis and are updated where they
live. They are ordinary sharded arrays, so the orbax checkpoint saves and restores them.

>>> step = PipelineTrainStep(pipe, make_pp_optimizer(settings), split=nanogpt_pipeline.split_params)
>>> state = step.init_state(params)                 # whole params -> (io, staged blocks)
>>> state, metrics = step(state, tokens)            # tokens [accum, batch, seq + 1]
>>> loss, (d_io, d_staged_blocks) = step.grads(state.params, tokens)   # no update
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

from ttjax.errors import ConfigError
from ttjax.ttml.pipeline import Pipeline
from ttjax.ttml.train import BaseTrainStep, OptimizerSettings, make_optimizer

Split = Callable[[Any], tuple[Any, Any]]


def staged_decay_mask(params: tuple[Any, Any]) -> tuple[Any, Any]:
    """Decay matrices only, judged on each block's own dims (staged leaves carry 2 more)."""
    io, blocks = params
    return (
        jax.tree_util.tree_map(lambda p: p.ndim >= 2, io),
        jax.tree_util.tree_map(lambda p: p.ndim >= 4, blocks),
    )


def make_pp_optimizer(
    config: OptimizerSettings, *, clip: bool = True
) -> optax.GradientTransformation:
    """:func:`ttjax.ttml.train.make_optimizer` for ``(io, staged blocks)`` parameters."""
    return make_optimizer(config, decay_mask=staged_decay_mask, clip=clip)


class PipelineTrainStep(BaseTrainStep):
    """The pipelined strategy: ``pipe``'s schedule computes the loss and the gradients of staged
    parameters.

    ``split(params) -> (io, blocks stacked on axis 0)`` cuts the model's whole parameters as the
    pipeline adapter does (``models/nanogpt/pipeline.split_params``); without it, the parameters
    given to :meth:`init_state` are already ``(io, stacked blocks)``. The step donates the state
    it is given (``donate=False`` keeps it; see :class:`ttjax.ttml.train.BaseTrainStep`).
    """

    def __init__(
        self,
        pipe: Pipeline,
        optimizer: optax.GradientTransformation,
        *,
        split: Split | None = None,
        accum: int = 1,
        schedule: optax.Schedule | None = None,
        clip_norm: float | None = None,
        donate: bool = True,
    ) -> None:
        super().__init__(
            pipe.jax_mesh,
            optimizer,
            accum=accum,
            schedule=schedule,
            clip_norm=clip_norm,
            donate=donate,
        )
        self.pipe, self.split = pipe, split
        self.batch_spec = P(None, *pipe.data_spec, None)
        self.branch_weights = pipe.branch_weights  # MFU counts the branches the schedule runs
        self._grads = self._pipeline_grads
        self._eval = jax.jit(self._eval_loss)

    def _pipeline_grads(self, params: tuple[Any, Any], tokens: Any) -> tuple[Any, Any]:
        """Mean loss and gradients over the ``accum`` micro-batches of ``tokens``."""
        io, blocks = params

        def micro(acc: Any, tok: Any) -> tuple[Any, None]:
            out = self.pipe.value_and_grad(io, blocks, tok[:, :-1], tok[:, 1:])
            return jax.tree_util.tree_map(jnp.add, acc, out), None

        zeros = (jnp.zeros((), jnp.float32), jax.tree_util.tree_map(jnp.zeros_like, params))
        if self.accum == 1:
            total, _ = micro(zeros, tokens[0])
        else:
            total, _ = lax.scan(micro, zeros, tokens)
        return jax.tree_util.tree_map(lambda a: a / self.accum, total)

    def _eval_loss(self, params: tuple[Any, Any], tokens: Any) -> Any:
        """Mean loss on ``tokens`` [n, batch, seq + 1] (the pipeline's schedule; grads unused)."""
        io, blocks = params

        def one(total: Any, tok: Any) -> tuple[Any, None]:
            loss, _ = self.pipe.value_and_grad(io, blocks, tok[:, :-1], tok[:, 1:])
            return total + loss, None

        total, _ = lax.scan(one, jnp.zeros((), jnp.float32), tokens)
        return total / tokens.shape[0]

    # -- placing things on the mesh ------------------------------------------------------------

    def _put_batch(self, tokens: Any, check_accum: bool = True) -> Any:
        shape = tuple(tokens.shape)
        if len(shape) != 3 or (check_accum and shape[0] != self.accum):
            raise ConfigError(
                f"PipelineTrainStep: tokens of shape {list(shape)} are not [accum={self.accum}, "
                "batch, seq + 1].\nfix: one row of seq + 1 tokens per sequence, one block per "
                "micro-batch."
            )
        self.pipe.check_batch(shape[1])
        return jax.device_put(tokens, NamedSharding(self.mesh, self.batch_spec))

    def param_shardings_of(self, params: tuple[Any, Any]) -> tuple[Any, Any]:
        """Shardings of ``(io, staged blocks)``: io by ``io_specs``, blocks on the PP axis."""
        io, blocks = params
        specs = (
            self.pipe.io_partition_specs(io),
            self.pipe.staged_specs(jax.tree_util.tree_map(_one_block, blocks)),
        )
        return jax.tree_util.tree_map(
            lambda s: NamedSharding(self.mesh, s), specs, is_leaf=lambda x: isinstance(x, P)
        )

    def place_params(self, params: Any) -> tuple[Any, Any]:
        """Whole model parameters -> ``(io, staged blocks)`` placed on the mesh."""
        io, stacked = params if self.split is None else self.split(params)
        return self.pipe.place_io(io), self.pipe.stage_blocks(stacked)

    def local_batch(self, batch: int) -> int:
        """The sequences of a global ``batch`` that each pipeline (DDP/FSDP group) runs."""
        return batch // self.pipe.data_size

    def abstract_inputs(self, params: Any, batch: int, seq: int) -> tuple[Any, Any]:
        """``(state, tokens)`` of one step as sharded ``jax.ShapeDtypeStruct``\\ s for whole
        parameters ``params`` (arrays or shapes): the staged state :meth:`init_state` would
        place, for the memory preflight (``ttjax.ttml.memory``) and ``ttjax.inspect``."""
        self.pipe.check_batch(batch)
        io, stacked = jax.eval_shape(lambda p: p if self.split is None else self.split(p), params)
        p, slots = self.pipe.num_stages, self.pipe.slots
        staged = jax.tree_util.tree_map(
            lambda a: jax.ShapeDtypeStruct((p, slots, *a.shape[1:]), a.dtype), stacked
        )
        return self._abstract_state((io, staged)), self._abstract_tokens(batch, seq)


def _one_block(a: Any) -> Any:
    """One block's parameter of a staged leaf ``[stage, slot, ...]`` (array or shape)."""
    if isinstance(a, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(a.shape[2:], a.dtype)
    return a[0, 0]


__all__ = ["PipelineTrainStep", "make_pp_optimizer", "staged_decay_mask"]
