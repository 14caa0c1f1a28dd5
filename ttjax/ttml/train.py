"""One jitted SPMD train step, TTML's algorithm: forward, cross-entropy, backward per device,
``synchronize_gradients`` over DDP, then optax AdamW (warmup + cosine) with global-norm clipping.

There is one step, :class:`BaseTrainStep`: the optimizer update, the metrics (loss, grad_norm,
lr), the :class:`TrainState`, its shardings, ``init_state``, ``grads`` and ``eval_loss`` are
written there once. Its two gradient strategies differ only in how the parameters are placed and
how the batch, the gradients and the evaluation loss are computed: :class:`TrainStep` (plain:
every role but PP) and ``ttjax.ttml.pipeline_train.PipelineTrainStep`` (pipelined, staged blocks).

The plain per-device part (forward, loss, ``jax.grad`` over ``accum`` micro-batches, the DDP
average) runs under one ``jax.shard_map`` with explicit collectives, TTML's way; optax then
updates the parameter pytree as global arrays. The global gradient norm (the ``grad_norm`` metric,
and the clipping when the step clips: ``clip_norm=``) is summed in a small ``shard_map`` of its
own through ``ttjax.numerics``, so under the deterministic policy no sum is left to XLA.
Parameters arrive whole (from one seed) and are sharded by their specs: every mesh starts equal.

>>> opt = OptimizerSettings(3e-4)
>>> step = TrainStep(model.loss, param_axes(config), par, make_optimizer(opt, clip=False),
...                  clip_norm=opt.clip_grad_norm_max_norm)
>>> state = step.init_state(params)
>>> state, metrics = step(state, tokens)       # tokens [accum, batch, seq + 1]

The step donates the state it is given (``donate_argnums``): the new parameters and optimizer
state are written over the old ones, so the step holds one copy of them, not two (XLA's
``memory_analysis`` reports the reuse as ``alias_size_in_bytes``; the gradients then take
temporaries of their own), and the state passed in is deleted.
Keep using the state the step returns; a caller that must keep the old one (a benchmark timing
the same state again) builds the step with ``donate=False``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

import ttjax
from ttjax.errors import ConfigError, TTJaxError
from ttjax.plan import LogicalAxes, average_gradients, is_logical, spec_axes
from ttjax.ttml import cp, sp
from ttjax.ttml.config import RunConfig
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.errors import TrainingConfigError
from ttjax.ttml.fsdp import outside_blocks

#: ``loss_fn(params, inputs, targets) -> mean loss`` on one device's shard, inside the step's
#: ``shard_map``; it names no mesh axis (modules read the plan: ``ParallelDims.current()``).
LossFn = Callable[[Any, Any, Any], Any]
SCHEDULERS = ("identity", "warmup_linear", "warmup_cosine")


class TrainingDivergedError(TTJaxError, FloatingPointError):
    """The loss became NaN or infinite."""


@dataclass(frozen=True)
class OptimizerSettings:
    """AdamW or SGD and the schedule (TTML's ``optimizer:`` block and ``scheduler_type``).

    ``amsgrad`` divides by the running maximum of the raw second moment, bias-corrected after
    the maximum, as PyTorch's ``AdamW(amsgrad=True)`` and TT-NN's ``moreh_adamw`` compute it
    (:func:`scale_by_amsgrad`); the weight decay stays decoupled, as in AdamW.
    """

    learning_rate: float = 3e-4
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8
    scheduler_type: str = "warmup_cosine"
    warmup_steps: int = 0
    total_steps: int = 1000
    min_lr: float = 0.0
    clip_grad_norm_max_norm: float | None = 1.0
    amsgrad: bool = False  # last: positional callers keep their meaning
    no_op: bool = False  # TTML's NoOp optimizer (use_no_op): the parameters are never updated
    sgd: bool = False  # TTML's SGD / SGDComposite instead of AdamW (:func:`sgd_momentum`)
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.amsgrad, bool):
            raise ConfigError(
                f"OptimizerSettings: amsgrad={self.amsgrad!r} is not a bool.\n"
                "fix: pass amsgrad=True or amsgrad=False."
            )
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ConfigError(
                f"OptimizerSettings: nesterov=True with momentum={self.momentum} and "
                f"dampening={self.dampening}: Nesterov momentum requires a momentum and zero "
                "dampening (torch.optim.SGD's rule).\n"
                "fix: set momentum > 0 and dampening 0, or nesterov=False."
            )
        if self.scheduler_type not in SCHEDULERS:
            raise ConfigError(
                f"OptimizerSettings: scheduler_type={self.scheduler_type!r} is unknown.\n"
                f"fix: one of {list(SCHEDULERS)}."
            )

    @classmethod
    def from_config(cls, run: RunConfig) -> OptimizerSettings:
        """Read a TTML ``RunConfig``: the optimizer block, scheduler_config and clipping keys.

        Every optimizer key is honoured or refused: the AdamW types, ``lr``, betas, ``epsilon``,
        ``weight_decay`` and ``amsgrad`` are honoured; SGD and SGDComposite run TTML's SGD
        (``momentum``, ``dampening``, ``nesterov``, coupled ``weight_decay``); NoOp leaves the
        parameters as they are; ``stochastic_rounding`` and ``kahan_summation`` (bfloat16
        rounding fixes; ttjax keeps float32 state) are refused.
        """
        t, opt, sched = run.training, run.training.optimizer, run.scheduler
        lr = t.learning_rate if opt is None or opt.lr is None else opt.lr
        refused = {
            "stochastic_rounding": "training_config.optimizer.stochastic_rounding",
            "kahan_summation": "training_config.optimizer.kahan_summation (or "
            "training_config.use_kahan_summation)",
        }
        for key, where in refused.items():
            if opt is not None and getattr(opt, key):
                raise TrainingConfigError(
                    f"{run.path}: {where} = true is not supported: it corrects bfloat16 rounding "
                    "of the parameter update, and ttjax keeps parameters and optimizer state in "
                    f"float32, so it would change nothing.\nfix: set {key}: false (or remove it)."
                )
        return cls(
            learning_rate=sched.max_lr or lr,
            weight_decay=t.weight_decay
            if opt is None or opt.weight_decay is None
            else opt.weight_decay,
            beta1=0.9 if opt is None else opt.beta1,
            beta2=0.999 if opt is None else opt.beta2,
            epsilon=1e-8 if opt is None else opt.epsilon,
            amsgrad=opt is not None and opt.amsgrad,
            scheduler_type=t.scheduler_type,
            warmup_steps=sched.warmup_steps,
            total_steps=t.max_steps,
            min_lr=sched.min_lr,
            clip_grad_norm_max_norm=t.clip_grad_norm_max_norm if t.use_clip_grad_norm else None,
            no_op=opt is not None and opt.type == "NoOp",
            sgd=opt is not None and opt.is_sgd,
            momentum=0.0 if opt is None else opt.momentum,
            dampening=0.0 if opt is None else opt.dampening,
            nesterov=opt is not None and opt.nesterov,
        )

    def schedule(self) -> optax.Schedule:
        lr, warm = self.learning_rate, self.warmup_steps
        total = max(self.total_steps, warm + 1)
        if self.scheduler_type == "identity":
            return optax.constant_schedule(lr)
        if self.scheduler_type == "warmup_linear":
            return optax.join_schedules(
                [
                    optax.linear_schedule(0.0, lr, max(warm, 1)),
                    optax.linear_schedule(lr, self.min_lr, total - warm),
                ],
                [max(warm, 1)],
            )
        return optax.warmup_cosine_decay_schedule(0.0 if warm else lr, lr, warm, total, self.min_lr)


def decay_matrices(params: Any) -> Any:
    """nanoGPT's weight-decay rule: decay parameters with 2 or more dims (not biases, norms).

    Leaves under a ``blocks`` key are blocks stacked on a leading layer axis
    (``ttjax.ttml.stacked``): they are judged on one block's dims.
    """

    def decay(path: Any, p: Any) -> bool:
        stacked = any(getattr(k, "key", None) == "blocks" for k in path)
        return p.ndim - stacked >= 2

    return jax.tree_util.tree_map_with_path(decay, params)


class ScaleByAmsgradState(NamedTuple):
    """AMSGrad's state: the step count, both moments and the running maximum of the raw second
    moment (``max_exp_avg_sq`` in PyTorch and ``moreh_adamw``)."""

    count: Any
    mu: Any
    nu: Any
    nu_max: Any


def scale_by_amsgrad(
    b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
) -> optax.GradientTransformation:
    """AMSGrad's scaling as PyTorch and TT-NN's ``moreh_adamw`` compute it: with
    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g**2`` and ``v_max = max(v_max, v)`` (the
    raw moment), the update is ``(m / (1 - b1**t)) / (sqrt(v_max / (1 - b2**t)) + eps)``.

    optax's ``scale_by_amsgrad`` takes the maximum of the bias-corrected moment instead, which
    differs while ``1 - b2**t`` grows, so a run ported from TTML or PyTorch would not match.

    >>> opt = optax.chain(scale_by_amsgrad(0.9, 0.999), optax.scale(-1e-3))
    """

    def init(params: Any) -> ScaleByAmsgradState:
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return ScaleByAmsgradState(jnp.zeros([], jnp.int32), zeros, zeros, zeros)

    def update(
        updates: Any, state: ScaleByAmsgradState, params: Any = None
    ) -> tuple[Any, ScaleByAmsgradState]:
        del params
        tm = jax.tree_util.tree_map
        mu = tm(lambda g, m: b1 * m + (1 - b1) * g, updates, state.mu)
        nu = tm(lambda g, v: b2 * v + (1 - b2) * jnp.square(g), updates, state.nu)
        nu_max = tm(jnp.maximum, state.nu_max, nu)
        count = state.count + 1
        c1 = 1 - b1 ** count.astype(jnp.float32)
        c2 = 1 - b2 ** count.astype(jnp.float32)
        out = tm(lambda m, v: (m / c1) / (jnp.sqrt(v / c2) + eps), mu, nu_max)
        return out, ScaleByAmsgradState(count, mu, nu, nu_max)

    return optax.GradientTransformation(init, update)


class SgdMomentumState(NamedTuple):
    """SGD's momentum buffer (``theta`` in TTML, ``momentum_buffer`` in PyTorch) and step count."""

    count: Any
    trace: Any


def sgd_momentum(
    momentum: float, dampening: float = 0.0, nesterov: bool = False
) -> optax.GradientTransformation:
    """SGD's momentum as TTML's ``SGD::step`` and ``torch.optim.SGD`` compute it: the buffer is
    the gradient on the first step, then ``b = momentum b + (1 - dampening) g``; the update is
    ``g + momentum b`` with ``nesterov``, else ``b``.

    optax's ``trace`` has no dampening and starts from a zero buffer, so with dampening its
    first steps differ from TTML's and PyTorch's.

    >>> opt = optax.chain(sgd_momentum(0.9, 0.1), optax.scale(-1e-2))
    """

    def init(params: Any) -> SgdMomentumState:
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return SgdMomentumState(jnp.zeros([], jnp.int32), zeros)

    def update(
        updates: Any, state: SgdMomentumState, params: Any = None
    ) -> tuple[Any, SgdMomentumState]:
        del params
        tm = jax.tree_util.tree_map
        first = state.count == 0
        trace = tm(
            lambda g, b: jnp.where(first, g, momentum * b + (1 - dampening) * g),
            updates,
            state.trace,
        )
        out = tm(lambda g, b: g + momentum * b, updates, trace) if nesterov else trace
        return out, SgdMomentumState(state.count + 1, trace)

    return optax.GradientTransformation(init, update)


def make_optimizer(
    config: OptimizerSettings,
    decay_mask: Callable[[Any], Any] = decay_matrices,
    *,
    clip: bool = True,
) -> optax.GradientTransformation:
    """Global-norm clipping (optional), then AdamW (AMSGrad's when ``config.amsgrad``) decaying
    only ``decay_mask`` (matrices); the decay is decoupled (added to the update, times the lr).
    With ``config.sgd``, TTML's SGD instead: the decay is coupled (``weight_decay * p`` added to
    the gradient before the momentum, as ``torch.optim.SGD`` does), on the same ``decay_mask``.

    ``clip=False`` leaves the clipping to the train step (``clip_norm=`` of :class:`TrainStep`),
    which sums the global norm through ``ttjax.numerics``; an identity stage keeps its place, so
    the optimizer state (and a checkpoint of it) is the same either way.
    """
    adamw: optax.GradientTransformation
    if config.no_op:  # TTML's NoOp: forward and backward run, the parameters stay
        adamw = optax.set_to_zero()
    elif config.sgd:
        momentum = (
            [sgd_momentum(config.momentum, config.dampening, config.nesterov)]
            if config.momentum
            else []
        )
        adamw = optax.chain(
            optax.add_decayed_weights(config.weight_decay, decay_mask),
            *momentum,
            optax.scale_by_learning_rate(config.schedule()),
        )
    elif config.amsgrad:
        adamw = optax.chain(
            scale_by_amsgrad(b1=config.beta1, b2=config.beta2, eps=config.epsilon),
            optax.add_decayed_weights(config.weight_decay, decay_mask),
            optax.scale_by_learning_rate(config.schedule()),
        )
    else:
        adamw = optax.adamw(
            config.schedule(),
            b1=config.beta1,
            b2=config.beta2,
            eps=config.epsilon,
            weight_decay=config.weight_decay,
            mask=decay_mask,
        )
    if config.clip_grad_norm_max_norm is None:
        return adamw
    if not clip:  # clip_by_global_norm's state is EmptyState, as identity's
        return optax.chain(optax.identity(), adamw)
    return optax.chain(optax.clip_by_global_norm(config.clip_grad_norm_max_norm), adamw)


def mixed_precision(loss_fn: LossFn, dtype: Any) -> LossFn:
    """``loss_fn`` computing in ``dtype`` (``"bfloat16"``: TTML's training dtype) on float32 master
    parameters: the floating parameters are cast inside the differentiated function, so the
    gradients (and optax's AdamW moments and update) stay float32, like ``torch.autocast``;
    ``cross_entropy_loss`` takes the logits in float32. ``float32`` returns ``loss_fn`` itself.

    >>> step = TrainStep(mixed_precision(model.loss, "bfloat16"), specs, par, optimizer)
    """
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float32:
        return loss_fn

    def cast(a: Any) -> Any:
        return a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a

    def loss(params: Any, inputs: Any, targets: Any) -> Any:
        return loss_fn(jax.tree_util.tree_map(cast, params), inputs, targets)

    return loss


def clip_by_norm(grads: Any, norm: Any, max_norm: float) -> Any:
    """``grads`` whose global norm is ``norm``, scaled to at most ``max_norm``: exactly optax's
    ``clip_by_global_norm`` (unchanged below ``max_norm``, else ``g / norm * max_norm``), with the
    norm given (the step sums it through ``ttjax.numerics``)."""
    keep = norm < max_norm
    return jax.tree_util.tree_map(
        lambda g: lax.select(keep, g, (g / norm.astype(g.dtype)) * max_norm), grads
    )


class TrainState(NamedTuple):
    """What a checkpoint holds: the step count, the parameters and the optimizer state."""

    step: Any
    params: Any
    opt_state: Any


class BaseTrainStep(ABC):
    """The one train step: ``__call__`` (one optimizer update), ``grads``, ``eval_loss``,
    ``init_state`` and ``state_shardings``, whatever the gradient strategy.

    A strategy (a subclass) sets ``_grads(params, tokens) -> (loss, grads)`` (traced in the jitted
    step) and ``_eval(params, tokens) -> loss`` (jitted) in its ``__init__``, and says how whole
    parameters are placed (:meth:`place_params`), where placed parameters lie
    (:meth:`param_shardings_of`) and how a batch is checked and placed (``_put_batch``).

    The gradients' global norm (the ``grad_norm`` metric) is summed through ``ttjax.numerics``
    (:meth:`grad_norm`); with ``clip_norm`` the step clips by it as optax's
    ``clip_by_global_norm`` does, so under ``ttjax.numerics("deterministic")`` no sum of the
    step is left to XLA. Give it an optimizer that does not clip again
    (``make_optimizer(settings, clip=False)``).

    ``donate`` (default True): the jitted step takes ownership of the ``TrainState`` it is given
    and writes the new one over it (its arrays are deleted once the step runs); False keeps
    the old state alive beside the new one.
    """

    _grads: Callable[[Any, Any], tuple[Any, Any]]
    _eval: Callable[[Any, Any], Any]
    batch_spec: P

    def __init__(
        self,
        mesh: jax.sharding.Mesh,
        optimizer: optax.GradientTransformation,
        *,
        accum: int,
        schedule: optax.Schedule | None,
        clip_norm: float | None = None,
        donate: bool = True,
    ) -> None:
        if clip_norm is not None and not clip_norm > 0:
            raise ConfigError(
                f"{type(self).__name__}: clip_norm={clip_norm} must be > 0 (or None: no "
                "clipping).\nfix: pass the clipping norm, e.g. 1.0, or leave it out."
            )
        if accum < 1:
            raise ConfigError(
                f"{type(self).__name__}: gradient_accumulation_steps={accum} must be >= 1.\n"
                "fix: use 1 or more."
            )
        self.mesh, self.optimizer, self.accum, self.schedule = mesh, optimizer, accum, schedule
        self.clip_norm, self.donate = clip_norm, donate
        self._replicated = NamedSharding(mesh, P())
        self._step = jax.jit(self._global_step, donate_argnums=(0,) if donate else ())

    # -- what a strategy provides ------------------------------------------------------------

    @abstractmethod
    def place_params(self, params: Any) -> Any:
        """Whole model parameters (from one seed) -> the parameters as the state holds them."""

    @abstractmethod
    def param_shardings_of(self, params: Any) -> Any:
        """The shardings of placed parameters ``params`` (arrays or tracers)."""

    @abstractmethod
    def _put_batch(self, tokens: Any, check_accum: bool = True) -> Any:
        """Check ``tokens`` [accum (or n), batch, seq + 1] and place them on the mesh."""

    # -- the step, written once --------------------------------------------------------------

    def _global_step(self, state: TrainState, tokens: Any) -> tuple[TrainState, dict[str, Any]]:
        loss, grads = self._grads(state.params, tokens)
        norm = self.grad_norm(grads)
        if self.clip_norm is not None:
            grads = clip_by_norm(grads, norm, self.clip_norm)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        params = lax.with_sharding_constraint(params, self.param_shardings_of(params))
        metrics = {"loss": loss, "grad_norm": norm}
        if self.schedule is not None:
            metrics["lr"] = self.schedule(state.step)
        return TrainState(state.step + 1, params, opt_state), metrics

    def grad_norm(self, grads: Any) -> Any:
        """The global L2 norm of placed gradients ``grads``, summed through ``ttjax.numerics``.

        Per device (one ``shard_map``), each leaf's local sum of squares; the leaves sharded over
        the same mesh axes are added, then summed with ``numerics.psum`` over those axes only
        (a leaf is whole, hence counted once, along the axes it is replicated over).
        """
        specs = jax.tree_util.tree_map(lambda s: s.spec, self.param_shardings_of(grads))
        names = tuple(self.mesh.axis_names)

        def local(g: Any) -> Any:
            groups: dict[tuple[str, ...], Any] = {}
            for leaf, spec in zip(
                jax.tree_util.tree_leaves(g),
                jax.tree_util.tree_leaves(specs, is_leaf=_is_spec),
                strict=True,
            ):
                axes = tuple(a for a in names if a in spec_axes(spec))
                sq = jnp.sum(jnp.square(leaf))
                groups[axes] = groups[axes] + sq if axes in groups else sq
            total = jnp.zeros((), jnp.float32)
            for axes in sorted(groups):
                part = groups[axes]
                total = total + (ttjax.numerics.psum(part, axes) if axes else part)
            return total

        sq = jax.shard_map(
            local, mesh=self.mesh, in_specs=(specs,), out_specs=P(), check_vma=False
        )(grads)
        return jnp.sqrt(sq)

    def __call__(self, state: TrainState, tokens: Any) -> tuple[TrainState, dict[str, Any]]:
        """One step on ``tokens`` [accum, global batch, seq + 1] (host or device). With ``donate``
        the arrays of ``state`` are deleted: continue from the state returned.

        The program :meth:`compiled` made for this token shape runs when it takes ``state`` as
        it is placed (no second compile, and none of its memory); else jit compiles its own.
        """
        placed = self._put_batch(tokens)
        cache = self.__dict__.get("_compiled_steps", {})
        exe = cache.get((tuple(placed.shape), str(placed.dtype)))
        if exe is not None:
            try:
                return exe(state, placed)
            except (TypeError, ValueError):  # placed otherwise than the abstract inputs said
                cache.clear()
        return self._step(state, placed)

    def compiled(
        self, state: TrainState, tokens: Any, compiler_options: dict[str, Any] | None = None
    ) -> Any:
        """The compiled step for ``state`` and ``tokens`` (jit's own lowering of them, so its
        cost analysis is the program that runs): what the trainer counts FLOPs in and the
        memory preflight (``ttjax.ttml.memory``) sizes. ``state`` and ``tokens`` may be sharded
        ``jax.ShapeDtypeStruct``\\ s (``abstract_inputs``); one compile per token shape is kept,
        and the step runs it. ``compiler_options`` go to XLA as in ``jax.stages.Lowered.compile``
        (e.g. ``{"xla_cpu_use_fusion_emitters": True}``), for the first compile of a shape."""
        placed = tokens if isinstance(tokens, jax.ShapeDtypeStruct) else self._put_batch(tokens)
        key = (tuple(placed.shape), str(placed.dtype))
        cache: dict[Any, Any] = self.__dict__.setdefault("_compiled_steps", {})
        if key not in cache:
            cache[key] = self._step.lower(state, placed).compile(compiler_options)
        return cache[key]

    def grads(self, params: Any, tokens: Any) -> tuple[Any, Any]:
        """(loss, gradients) of one step, without the update: what the tests compare."""
        return jax.jit(self._grads)(params, self._put_batch(tokens))

    def eval_loss(self, params: Any, tokens: Any) -> Any:
        """Mean loss of ``params`` on ``tokens`` [n, batch, seq + 1] (validation)."""
        return self._eval(params, self._put_batch(tokens, check_accum=False))

    def state_shardings(self, params: Any) -> TrainState:
        """Shardings of a whole ``TrainState`` (optimizer moments lie like their parameters)."""
        shardings = self.param_shardings_of(params)
        abstract = jax.eval_shape(self.optimizer.init, params)
        opt = optax.tree_map_params(
            self.optimizer,
            lambda _, s: s,
            abstract,
            shardings,
            transform_non_params=lambda _: self._replicated,
        )
        return TrainState(self._replicated, shardings, opt)

    def _abstract_state(self, placed: Any) -> TrainState:
        """The ``TrainState`` of parameters ``placed`` as the state holds them (arrays or shapes),
        as sharded ``jax.ShapeDtypeStruct``\\ s: nothing is allocated."""
        shardings = self.state_shardings(placed)
        state = jax.eval_shape(
            lambda p: TrainState(jnp.zeros((), jnp.int32), p, self.optimizer.init(p)), placed
        )
        return jax.tree_util.tree_map(
            lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), state, shardings
        )

    def _abstract_tokens(self, batch: int, seq: int) -> jax.ShapeDtypeStruct:
        """One step's tokens ``[accum, batch, seq + 1]`` as a sharded ``jax.ShapeDtypeStruct``."""
        sharding = NamedSharding(self.mesh, self.batch_spec)
        return jax.ShapeDtypeStruct((self.accum, batch, seq + 1), jnp.int32, sharding=sharding)

    def init_state(self, params: Any) -> TrainState:
        """Place whole parameters onto the mesh and create the optimizer state beside them.

        The state owns its buffers: where placing left a parameter on the caller's own buffer
        (already placed so, or a replica on its device), it is copied, so the donating step never
        deletes the caller's ``params``."""
        placed = self.place_params(params)
        if self.donate:
            placed = _unshared(placed, params)
        shardings = self.state_shardings(placed)
        opt_state = jax.jit(self.optimizer.init, out_shardings=shardings.opt_state)(placed)
        step = jax.device_put(jnp.zeros((), jnp.int32), self._replicated)
        return TrainState(step, placed, opt_state)


def _is_spec(x: Any) -> bool:
    return isinstance(x, P)


def _buffers(a: Any) -> set[int]:
    """The addresses of a live array's shard buffers (empty for anything else)."""
    if not isinstance(a, jax.Array) or a.is_deleted():
        return set()
    return {s.data.unsafe_buffer_pointer() for s in a.addressable_shards}


def _unshared(placed: Any, given: Any) -> Any:
    """``placed`` with every array that shares a buffer with ``given``'s arrays copied (placing
    returns an array already so placed as it is, and a replica on the source's own device reuses
    the source's buffer): donating ``placed`` must not delete the caller's arrays."""
    theirs = set().union(*map(_buffers, jax.tree_util.tree_leaves(given)))
    if not theirs:
        return placed

    def own(a: Any) -> Any:
        if _buffers(a) & theirs:
            return jax.device_put(a, a.sharding, may_alias=False)
        return a

    return jax.tree_util.tree_map(own, placed)


class TrainStep(BaseTrainStep):
    """The plain strategy: ``loss_fn(params, inputs, targets) -> mean loss`` per device.

    ``layout`` gives the parameters' place on the mesh: a pytree of
    :class:`ttjax.plan.LogicalAxes` (the plan's rule table turns them into specs; needed for
    FSDP, whose parameters are gathered where they are used) or of ``PartitionSpec``. Under
    FSDP the step all-gathers the parameters up front, except the stacked blocks (leading
    ``"layers"``), which the model's ``Stack`` gathers one block at a time (:mod:`ttjax.ttml.fsdp`).
    The per-device part runs on the role-named mesh, so the model's modules read the plan there
    (``ParallelDims.current()``) and ``loss_fn`` names no mesh axis.
    ``accum`` micro-batches are averaged per step (gradient accumulation). ``clip_norm`` clips
    the gradients' global norm in the step (see :class:`BaseTrainStep`).

    ``micro_batch`` caps the sequences each device runs at once: its share of a batch runs in
    equal chunks of ``micro_batch`` under ``lax.scan`` and their gradients are averaged, the
    same mean loss and gradients (to rounding) with activations for one chunk alive, not the
    whole batch (``ttjax.ttml.memory`` picks it for the CLI). None: the whole share at once.
    ``donate`` as in :class:`BaseTrainStep`.
    """

    def __init__(
        self,
        loss_fn: LossFn,
        layout: Any,
        par: ParallelismContext,
        optimizer: optax.GradientTransformation,
        *,
        accum: int = 1,
        schedule: optax.Schedule | None = None,
        clip_norm: float | None = None,
        micro_batch: int | None = None,
        donate: bool = True,
    ) -> None:
        super().__init__(
            par.jax_mesh,
            optimizer,
            accum=accum,
            schedule=schedule,
            clip_norm=clip_norm,
            donate=donate,
        )
        if micro_batch is not None and (not isinstance(micro_batch, int) or micro_batch < 1):
            raise ConfigError(
                f"TrainStep: micro_batch={micro_batch!r} is not a positive int.\nfix: pass the "
                "sequences per device to run at once (e.g. 8), or None for the whole share."
            )
        self.micro_batch = micro_batch
        logical = None
        if any(is_logical(x) for x in jax.tree_util.tree_leaves(layout, is_leaf=is_logical)):
            logical, param_specs = layout, par.specs(layout)
        else:
            param_specs = layout
        dims = par.dims
        if logical is None and dims.active("fsdp"):
            raise ConfigError(
                "TrainStep: FSDP needs the parameters' logical axes (to know where to gather "
                "them), but the layout is given as PartitionSpecs.\nfix: pass a pytree of "
                "ttjax.plan.LogicalAxes (the model's param_axes), or turn FSDP off."
            )
        self.loss_fn, self.logical, self.param_specs, self.par = loss_fn, logical, param_specs, par
        # Gradients and the loss are averaged over every role that splits the data.
        self.data_axes = tuple(dict.fromkeys(dims.split_roles("batch") + dims.split_roles("seq")))
        # Whole rows of tokens [accum, batch, seq + 1]; the step cuts inputs and targets from
        # them and splits those [accum, batch, seq] over the batch and sequence roles.
        self.batch_spec = dims.spec(LogicalAxes(None, "batch", None))
        self.data_spec = dims.spec(LogicalAxes(None, "batch", "seq"))
        self.param_shardings = jax.tree_util.tree_map(
            lambda s: NamedSharding(self.mesh, s), param_specs, is_leaf=_is_spec
        )
        self._grads_map = jax.shard_map(
            self._local_grads,
            mesh=self.mesh,
            in_specs=(param_specs, self.data_spec, self.data_spec),
            out_specs=(P(), param_specs),
            check_vma=False,
        )
        self._local_eval_map = jax.shard_map(
            self._local_eval,
            mesh=self.mesh,
            in_specs=(param_specs, self.data_spec, self.data_spec),
            out_specs=P(),
            check_vma=False,
        )
        self._eval = jax.jit(
            lambda params, tokens: self._local_eval_map(params, *self._cut(tokens))
        )
        self._grads = lambda params, tokens: self._grads_map(params, *self._cut(tokens))

    def _chunks(self, x: Any) -> Any:
        """This device's ``x`` [n, b, ..] as [n * b / micro_batch, micro_batch, ..] (chunks of
        ``micro_batch`` sequences, scanned one at a time); unchanged without a smaller cap."""
        c = self.micro_batch
        n, b = x.shape[:2]
        if c is None or b <= c:
            return x
        return x.reshape(n * (b // c), c, *x.shape[2:])

    def _cut(self, tokens: Any) -> tuple[Any, Any]:
        """Inputs and targets of whole rows ``tokens`` [.., seq + 1], placed for the sequence
        split (``ttjax.ttml.cp``), each [.., seq]; done on the global array, inside jit."""
        return cp.split_tokens(tokens, self.par.dims)

    # -- the per-device part -------------------------------------------------------------------

    def _loss(self, params: Any, inputs: Any, targets: Any) -> Any:
        """This device's loss on one micro-batch; FSDP-sharded parameters are gathered first."""
        if self.logical is not None:  # stacked blocks are gathered one by one in the model's scan
            params = self.par.dims.gather(params, outside_blocks(self.logical))
        with self.par.dims.bind():  # the plan's rules (SP's) for the modules, as they trace
            return self.loss_fn(params, inputs, targets)

    def _mean(self, x: Any) -> Any:
        """The mean of ``x`` over every data-splitting role (the loss of the whole batch)."""
        return ttjax.numerics.pmean(x, self.data_axes) if self.data_axes else x

    def _sync(self, grads: Any) -> Any:
        """Average gradients over the data-splitting roles (TTML's ``synchronize_gradients``).

        A parameter sharded over a role (FSDP) already had its gradient reduce-scattered over it
        by the gather's transpose, so that role is only scaled; the others are all-reduced.
        """
        return average_gradients(grads, self.param_specs, self.data_axes)

    def _local_grads(self, params: Any, inputs: Any, targets: Any) -> tuple[Any, Any]:
        """Loss and data-averaged gradients of this device's micro-batches (inside shard_map)."""
        grad_fn = jax.value_and_grad(self._loss)

        def micro(acc: Any, xy: Any) -> tuple[Any, None]:
            return jax.tree_util.tree_map(jnp.add, acc, grad_fn(params, *xy)), None

        zeros = (jnp.zeros((), jnp.float32), jax.tree_util.tree_map(jnp.zeros_like, params))
        inputs, targets = self._chunks(inputs), self._chunks(targets)
        n = inputs.shape[0]  # accum micro-batches, each in equal chunks of micro_batch
        if n == 1:
            total, _ = micro(zeros, (inputs[0], targets[0]))
        else:
            total, _ = lax.scan(micro, zeros, (inputs, targets))
        loss, grads = jax.tree_util.tree_map(lambda a: a / n, total)
        return self._mean(loss), self._sync(grads)

    def _local_eval(self, params: Any, inputs: Any, targets: Any) -> Any:
        """Mean loss over the blocks of ``inputs``/``targets`` [n, batch, seq], no gradients."""

        def one(total: Any, xy: Any) -> tuple[Any, None]:
            return total + self._loss(params, *xy), None

        inputs, targets = self._chunks(inputs), self._chunks(targets)
        total, _ = lax.scan(one, jnp.zeros((), jnp.float32), (inputs, targets))
        return self._mean(total / inputs.shape[0])

    # -- placing things on the mesh ------------------------------------------------------------

    def _put_batch(self, tokens: Any, check_accum: bool = True) -> Any:
        shape = tuple(tokens.shape)
        if len(shape) != 3 or (check_accum and shape[0] != self.accum):
            raise ConfigError(
                f"TrainStep: tokens of shape {list(shape)} are not [accum={self.accum}, batch, "
                "seq + 1].\nfix: one row of seq + 1 tokens per sequence, one block per micro-batch."
            )
        self.par.dims.check_batch(shape[1], "TrainStep: ")
        self._check_micro_batch(shape[1])
        cp.check_seq_len(shape[2] - 1, self.par.dims, "TrainStep: ")
        sp.check_seq_len(shape[2] - 1, self.par.dims, "TrainStep: ")
        return jax.device_put(tokens, NamedSharding(self.mesh, self.batch_spec))

    def local_batch(self, batch: int) -> int:
        """The sequences of a global ``batch`` that each device runs (split over DDP/FSDP)."""
        return batch // self.par.dims.data_parallel_size

    def _check_micro_batch(self, batch: int) -> None:
        c, local = self.micro_batch, self.local_batch(batch)
        if c is not None and local > c and local % c:
            fits = [d for d in range(1, c + 1) if local % d == 0][-1]
            raise ConfigError(
                f"TrainStep: micro_batch={c} does not divide the {local} sequences each device "
                f"runs (batch {batch}).\nfix: micro_batch={fits} (a divisor of {local}), or None."
            )

    def param_shardings_of(self, params: Any) -> Any:
        """The parameters' shardings (by their specs; the same for every value)."""
        return self.param_shardings

    def place_params(self, params: Any) -> Any:
        """Shard whole parameters onto the mesh by their specs."""
        if self.logical is not None:
            self.par.specs(self.logical, params)  # every split dimension divides, or raise
        return jax.device_put(params, self.param_shardings)

    def abstract_inputs(self, params: Any, batch: int, seq: int) -> tuple[TrainState, Any]:
        """``(state, tokens)`` of one step as sharded ``jax.ShapeDtypeStruct``\\ s (nothing is
        allocated), for whole parameters ``params`` (arrays or shapes): what ``ttjax.inspect``
        compiles the step on, at any size.

        >>> state, tokens = step.abstract_inputs(jax.eval_shape(init), batch=8, seq=2048)
        >>> report = ttjax.inspect.inspect(step._step, state, tokens, mesh=step.mesh)
        """
        if self.logical is not None:
            self.par.specs(self.logical, params)  # every split dimension divides, or raise
        self.par.dims.check_batch(batch, "TrainStep.abstract_inputs: ")
        self._check_micro_batch(batch)
        return self._abstract_state(params), self._abstract_tokens(batch, seq)


__all__ = [
    "BaseTrainStep",
    "OptimizerSettings",
    "ScaleByAmsgradState",
    "SgdMomentumState",
    "TrainState",
    "TrainStep",
    "TrainingDivergedError",
    "clip_by_norm",
    "decay_matrices",
    "make_optimizer",
    "mixed_precision",
    "scale_by_amsgrad",
    "sgd_momentum",
]
