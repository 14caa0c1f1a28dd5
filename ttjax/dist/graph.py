"""Tessera's ``graph``: a training step written in the global view, over tensors whose layouts
(``dist.ShardSpec``) say how they lie on a ``tp x pp x dp`` mesh.

>>> @graph.training_step(module="Transformer")
... def step(batch):
...     out = transformer(batch["input"], W)
...     loss = op.cross_entropy(out, batch["labels"])
...     grads = graph.backward(loss)
...     return grads, {"loss": loss}
>>> state = step.init(optax.adamw(1e-3), batch)   # the module's parameters, W, AdamW's state
>>> state, metrics = step(state, batch)           # one jitted step: forward, backward, update

How it runs: the step is one ``jax.jit`` program. Each data-parallel (``dp``) replica runs the
function on its slice of the batch (a ``jax.shard_map`` manual over ``dp`` only); inside it the
program is global-view over the other axes, which XLA's partitioner splits from the parameters'
layouts (Megatron-style over ``tp``, a GPipe schedule over ``pp`` in the module). ``graph.backward``
marks the loss; ``jax.value_and_grad`` takes the gradient of every parameter of the named module
and of every array passed to it (``W`` above); the gradients are averaged over ``dp`` through
``ttjax.numerics`` (after the backward, or layer by layer inside it with
``schedule.all_reduce_overlap(True)``) and an optax optimizer applies them. The batch and the
metrics are global: metrics are averaged over the replicas.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from ttjax import numerics
from ttjax.dist import schedule as _schedule
from ttjax.dist.layout import ShardSpec, tensor
from ttjax.dist.mesh import Mesh
from ttjax.dist.padded import PaddedArray
from ttjax.errors import ConfigError, ShardingError

#: The mesh axis a training step splits its batch over (DDP) when the mesh has it.
DATA_AXIS = "dp"

_modules: dict[str, Module] = {}
_active = threading.local()


class Gradients:
    """What ``graph.backward(loss)`` returns inside a step: the training step puts the gradients
    (a dict, parameter name -> gradient, laid out like the parameter) in its place."""

    def __repr__(self) -> str:
        return "graph.Gradients()"


jax.tree_util.register_pytree_node(Gradients, lambda g: ((), None), lambda aux, ch: Gradients())


def _is_grads(x: Any) -> bool:
    return isinstance(x, Gradients)


@dataclass
class _Trace:
    """One tracing of a training step: the parameter values bound for it (None while the step
    is only being looked at) and the arrays passed to the module, found by that first look."""

    module: Module
    values: dict[str, Any] | None
    inputs: dict[str, Any]
    data_axis: str | None = None
    overlap: bool = False
    loss: Any = None


def _stack() -> list[_Trace]:
    if not hasattr(_active, "stack"):
        _active.stack = []
    return _active.stack


@contextmanager
def _tracing(t: _Trace) -> Iterator[_Trace]:
    _stack().append(t)
    try:
        yield t
    finally:
        _stack().pop()


def _top() -> _Trace | None:
    stack = _stack()
    return stack[-1] if stack else None


class Module:
    """A named global-view module: parameters are dist tensors on one mesh, each laid out by a
    ``ShardSpec``; ``graph.training_step(module=name)`` trains the module registered last under
    ``name``.

    Subclasses create parameters with :meth:`parameter`, read them with :meth:`values` and the
    arrays callers pass in (the seed's ``W``) with :meth:`input`, so that a training step can put
    its traced values in their place. ``overlapped`` names the parameters whose gradient the
    module averages itself, inside its backward, through :func:`sync_gradients`.
    """

    overlapped: tuple[str, ...] = ()

    def __init__(self, mesh: Mesh, name: str) -> None:
        if not isinstance(mesh, Mesh):
            raise ShardingError(
                f"graph.Module({name!r}): mesh={mesh!r} is not a dist.Mesh.\n"
                'fix: mesh=dist.Mesh(axes=["tp", "pp", "dp"], devices=range(8)).'
            )
        self.mesh = mesh
        self.name = name
        self._params: dict[str, Any] = {}
        _modules[name] = self

    def parameter(
        self, name: str, shape: tuple[int, ...], layout: ShardSpec, init: Any, dtype: Any = "fp32"
    ) -> Any:
        """Create parameter ``name`` (a ``dist.tensor`` laid out by ``layout``) from ``init``."""
        self._params[name] = tensor(shape, layout=layout, mesh=self.mesh, dtype=dtype, init=init)
        return self._params[name]

    @property
    def parameters(self) -> dict[str, Any]:
        """The parameters as created (a training step's updated ones live in its state)."""
        return dict(self._params)

    def _trace(self) -> _Trace | None:
        t = _top()
        return t if t is not None and t.module is self else None

    def values(self) -> dict[str, Any]:
        """The parameters as this call should see them: a training step's traced values inside
        one, the created arrays outside."""
        t = self._trace()
        if t is None or t.values is None:
            return dict(self._params)
        return {k: t.values[k] for k in self._params}

    def input(self, name: str, value: Any) -> Any:
        """An array passed to the module (e.g. ``W``): trained by a step that calls the module
        with it, so read through here."""
        t = self._trace()
        stored = value.storage if isinstance(value, PaddedArray) else value
        if t is None or not isinstance(stored, jax.Array) or isinstance(stored, jax.core.Tracer):
            return value
        if t.values is None:
            known = t.inputs.setdefault(name, value)
            if known is not value:
                raise ConfigError(
                    f"graph.training_step(module={self.name!r}): the module is called with two "
                    f"different arrays for {name!r}.\nfix: pass the same array each time."
                )
            return value
        return t.values[name] if t.inputs.get(name) is value else value


def get_module(name: str) -> Module:
    """The module registered last under ``name``."""
    if name not in _modules:
        raise ConfigError(
            f"graph: no module is named {name!r} (known: {sorted(_modules)}).\n"
            f"fix: create it first, e.g. dist.nn.Transformer(mesh, ..., name={name!r})."
        )
    return _modules[name]


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _synced(tree: Any, axis: str) -> Any:
    return tree


def _synced_fwd(tree: Any, axis: str) -> tuple[Any, None]:
    return tree, None


def average(tree: Any, axis: str) -> Any:
    """The mean of ``tree`` over mesh axis ``axis`` through ``ttjax.numerics`` (one all-reduce of
    every leaf), float16/bfloat16 summed in float32 as the numerics floor does."""
    wide = _wide(tree)
    return jax.tree.map(lambda m, g: m.astype(g.dtype), numerics.pmean(wide, axis), tree)


def _wide(tree: Any) -> Any:
    """float16/bfloat16 leaves as float32 (``numerics.accumulation_dtype``)."""
    return jax.tree.map(lambda x: x.astype(numerics.accumulation_dtype(x.dtype)), tree)


def _synced_bwd(axis: str, _: None, g: Any) -> tuple[Any]:
    return (average(g, axis),)  # one bucket: every leaf in one all-reduce


_synced.defvjp(_synced_fwd, _synced_bwd)


def sync_gradients(tree: Any) -> Any:
    """Identity forward; backward, under ``schedule.all_reduce_overlap(True)`` in a training step,
    the gradient of ``tree`` (one layer's parameters) averaged over the data-parallel axis right
    there, as one bucket: DDP's per-bucket hook. Elsewhere it does nothing."""
    t = _top()
    if t is None or t.values is None or not t.overlap or t.data_axis is None:
        return tree
    return _synced(tree, t.data_axis)


def backward(loss: Any) -> Gradients:
    """Mark ``loss`` (a scalar) as what the training step differentiates; returns the gradients'
    placeholder, which the step fills in."""
    t = _top()
    if t is None:
        raise ConfigError(
            "graph.backward(loss) was called outside a graph.training_step.\n"
            "fix: call it inside a function decorated with @graph.training_step(module=...)."
        )
    if t.loss is not None:
        raise ConfigError(
            "graph.backward was called twice in one training step.\n"
            "fix: add the losses and call graph.backward(total) once."
        )
    if jnp.ndim(loss) != 0:
        raise ConfigError(
            f"graph.backward: the loss has shape {jnp.shape(loss)}, not a scalar.\n"
            "fix: reduce it first, e.g. op.cross_entropy(...) (a mean)."
        )
    t.loss = loss
    return Gradients()


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["params", "opt_state", "step"],
    meta_fields=["tx"],
)
@dataclass(frozen=True)
class TrainState:
    """A training step's state (a pytree): parameters by name (the module's, and the arrays passed
    to it under the module's argument names), the optimizer's state and the step count."""

    params: dict[str, jax.Array]
    opt_state: Any
    step: jax.Array
    tx: optax.GradientTransformation = field(repr=False)


class TrainingStep:
    """``@graph.training_step(module=...)`` applied to a step function: call :meth:`init` once,
    then ``state, metrics = step(state, batch)``; :meth:`gradients` returns what the function
    returns (gradients in place of ``graph.backward``'s result, metrics averaged over ``dp``)."""

    def __init__(self, fn: Callable[..., Any], module: str) -> None:
        self.fn = fn
        self.module_name = module
        self._inputs: dict[str, Any] | None = None
        self._programs: dict[Any, Any] = {}
        self._shardings: dict[str, Any] = {}
        self._opt_shardings: Any = None
        self._module: Module | None = None
        self.__wrapped__ = fn

    @property
    def module(self) -> Module:
        """The module this step trains: bound by :meth:`init` (before it, the one registered
        last under the name)."""
        return self._module if self._module is not None else get_module(self.module_name)

    def _data_axis(self) -> str | None:
        return DATA_AXIS if DATA_AXIS in self.module.mesh.axes else None

    def put_batch(self, batch: Any) -> Any:
        """``batch`` (host or device arrays) split over ``dp`` on its first dim."""
        mesh = self.module.mesh
        axis = self._data_axis()
        n = mesh.axis_size(axis) if axis else 1
        sharding = NamedSharding(mesh.jax_mesh, PartitionSpec(axis))

        def put(path: Any, x: Any) -> jax.Array:
            if np.ndim(x) == 0 or np.shape(x)[0] % n:
                raise ShardingError(
                    f"training_step: batch{jax.tree_util.keystr(path)} has shape "
                    f"{np.shape(x)}, whose first dim does not split over the {n} data-parallel "
                    f"replicas ({axis!r}).\nfix: a batch size that is a multiple of {n}."
                )
            return jax.device_put(x, sharding)

        return jax.tree_util.tree_map_with_path(put, batch)

    def init(self, optimizer: optax.GradientTransformation, batch: Any) -> TrainState:
        """Find the trained arrays (the module's parameters and the arrays the step passes to it,
        by tracing the step once on ``batch``'s shapes) and the optimizer's initial state."""
        module = self._module = get_module(self.module_name)
        batch = self.put_batch(batch)
        look = _Trace(module, values=None, inputs={})
        with jax.set_mesh(module.mesh.jax_mesh), _tracing(look):
            jax.eval_shape(self.fn, batch)
        if look.loss is None:
            raise ConfigError(
                f"training_step({getattr(self.fn, '__name__', 'step')}): the step never called "
                "graph.backward(loss).\nfix: grads = graph.backward(loss) inside the step."
            )
        clash = sorted(set(look.inputs) & set(module.parameters))
        if clash:
            raise ConfigError(
                f"training_step: {clash} name both a parameter of {module.name!r} and an array "
                "passed to it.\nfix: rename the module's argument or parameter."
            )
        self._inputs = look.inputs
        self._programs.clear()
        params = {**look.inputs, **module.parameters}
        self._shardings = {k: v.sharding for k, v in params.items()}

        def start(params: dict[str, Any]) -> tuple[Any, Any, Any]:
            # through jit, so the state has the shardings (canonical specs) every step returns
            params = jax.lax.with_sharding_constraint(params, self._shardings)
            return params, optimizer.init(_wide(params)), jnp.zeros((), jnp.int32)

        with jax.set_mesh(module.mesh.jax_mesh):
            params, opt_state, count = jax.jit(start)(params)
        self._opt_shardings = jax.tree.map(lambda x: x.sharding, opt_state)
        return TrainState(params, opt_state, count, optimizer)

    def _replica(self, sched: _schedule.Schedule) -> Callable[[Any, Any], Any]:
        """One data-parallel replica: the step's outputs, gradients averaged over ``dp``."""
        module, axis = self.module, self._data_axis()
        inputs = self._inputs or {}

        def replica(params: dict[str, Any], batch: Any) -> Any:
            t = _Trace(module, values=None, inputs=inputs, data_axis=axis)
            t.overlap = sched.all_reduce_overlap

            def loss_of(p: dict[str, Any]) -> Any:
                t.values, t.loss = p, None
                with _tracing(t), _schedule.using(sched):
                    out = self.fn(batch)
                if t.loss is None:
                    raise ConfigError(
                        "training_step: the step did not call graph.backward(loss).\n"
                        "fix: grads = graph.backward(loss) inside the step."
                    )
                return t.loss, out

            # gradients of float16/bfloat16 parameters are taken and averaged in float32
            (_, out), grads = jax.value_and_grad(loss_of, has_aux=True)(_wide(params))
            if axis is not None:
                done = set(module.overlapped) if sched.all_reduce_overlap else set()
                rest = average({k: g for k, g in grads.items() if k not in done}, axis)
                grads = {k: rest.get(k, g) for k, g in grads.items()}
                out = jax.tree.map(
                    lambda x: average(x, axis) if jnp.issubdtype(x.dtype, jnp.inexact) else x,
                    out,
                )
            return jax.tree.map(lambda x: grads if _is_grads(x) else x, out, is_leaf=_is_grads)

        if axis is None:
            return replica
        return jax.shard_map(
            replica,
            mesh=module.mesh.jax_mesh,
            in_specs=(PartitionSpec(), PartitionSpec(axis)),
            out_specs=PartitionSpec(),
            axis_names={axis},
            check_vma=False,
        )

    def _program(self, kind: str) -> Any:
        if self._inputs is None:
            raise ConfigError(
                "training_step: the step is not initialised.\n"
                "fix: state = step.init(optax.adamw(1e-3), batch) first."
            )
        sched = _schedule.current()
        key = (kind, sched)
        if key not in self._programs:
            replica = self._replica(sched)
            if kind == "gradients":
                program = jax.jit(lambda state, batch: replica(state.params, batch))
            else:

                def update(state: TrainState, batch: Any) -> tuple[TrainState, Any]:
                    grads, metrics = _split(replica(state.params, batch))
                    wide = _wide(state.params)  # optimizer math in float32, stored as before
                    updates, opt_state = state.tx.update(grads, state.opt_state, wide)
                    params = jax.tree.map(
                        lambda p, w: w.astype(p.dtype),
                        state.params,
                        optax.apply_updates(wide, updates),
                    )
                    params = jax.lax.with_sharding_constraint(params, self._shardings)
                    opt_state = jax.lax.with_sharding_constraint(opt_state, self._opt_shardings)
                    return TrainState(params, opt_state, state.step + 1, state.tx), metrics

                program = jax.jit(update)
            self._programs[key] = program
        return self._programs[key]

    def gradients(self, state: TrainState, batch: Any) -> Any:
        """What the step function returns for ``batch``: its gradients (averaged over ``dp``) in
        place of ``graph.backward``'s result, its metrics averaged over ``dp``."""
        with jax.set_mesh(self.module.mesh.jax_mesh):
            return self._program("gradients")(state, self.put_batch(batch))

    def lower(self, state: TrainState, batch: Any) -> Any:
        """The jitted update step lowered for ``state`` and ``batch`` (``.compile().as_text()``
        is its HLO, e.g. for ``ttjax.inspect.report_compiled``)."""
        with jax.set_mesh(self.module.mesh.jax_mesh):
            return self._program("update").lower(state, self.put_batch(batch))

    def __call__(self, state: TrainState, batch: Any) -> tuple[TrainState, Any]:
        """One step: forward, backward, gradient average over ``dp``, optimizer update."""
        with jax.set_mesh(self.module.mesh.jax_mesh):
            return self._program("update")(state, self.put_batch(batch))


def _split(out: Any) -> tuple[Any, Any]:
    """The step's ``(grads, metrics)``."""
    if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict)):
        raise ConfigError(
            "training_step: the step must return (graph.backward(loss), metrics).\n"
            'fix: return grads, {"loss": loss}.'
        )
    return out


def training_step(module: str) -> Callable[[Callable[..., Any]], TrainingStep]:
    """Decorate a global-view step function ``step(batch)`` that calls the module named
    ``module``, marks its loss with :func:`backward` and returns ``(grads, metrics)``."""
    if not isinstance(module, str):
        raise ConfigError(
            f"graph.training_step(module={module!r}): expected the module's name.\n"
            'fix: graph.training_step(module="Transformer").'
        )

    def wrap(fn: Callable[..., Any]) -> TrainingStep:
        return TrainingStep(fn, module)

    return wrap


__all__ = [
    "DATA_AXIS",
    "Gradients",
    "Module",
    "TrainState",
    "TrainingStep",
    "backward",
    "get_module",
    "sync_gradients",
    "training_step",
]
