"""torch-xla's device, runtime and step names for PyTorch models on ttjax's JAX devices (torchax).

``ttjax.compat.install_as_torch_xla()`` (or ``python -m ttjax.torch_xla_run script.py``) binds
``torch_xla``, ``torch_xla.core.xla_model``, ``torch_xla.runtime``,
``torch_xla.distributed.spmd`` and ``torch_xla.experimental.plugins`` to this module and
:mod:`ttjax.spmd`, so torch-xla SPMD code runs as written:

>>> model = model.to(torch_xla.device())                 # parameters become jax.Arrays
>>> xs.mark_sharding(model.layers[0].mlp.up_proj.weight, mesh, ("model", None))
>>> out = model(input_ids=input_ids.to(torch_xla.device()))
>>> xm.mark_step()

torchax (Google's PyTorch frontend for JAX) keeps each tensor on the ``jax`` device as a
``jax.Array``, which carries the ``NamedSharding`` that ``mark_sharding`` puts on it. How it runs
differs from torch-xla's lazy tensors: each op runs when called (eagerly, through torch's
autograd, so ``loss.backward()`` and ``torch.optim`` work), as its own small XLA program that
XLA's SPMD partitioner shards from its inputs' shardings and JAX caches and dispatches
asynchronously. ``mark_step()`` therefore has no graph left to compile: it waits until that
queued work is done (what timing code needs). One compiled program for a whole forward is
:func:`compile` (torch-xla's ``torch_xla.compile``): ``jax.jit`` of the module's functional
call, which ``ttjax.inspect`` can read.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from ttjax.errors import ConfigError
from ttjax.spmd import follow_sharding

try:
    import torch
    import torchax
    import torchax.interop
    import torchax.tensor
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )
    from torchax.ops.ops_registry import Operator
except ModuleNotFoundError as e:  # pragma: no cover - the torch extra is installed in CI
    raise ConfigError(
        f"ttjax.torchxla needs {e.name!r}, which is not installed.\n"
        "fix: pip install -e '.[torch]' (torch, transformers and torchax, pinned to work together)"
    ) from None

_lock = threading.Lock()
_state: dict[str, Any] = {
    "modes": None,
    "hooks": (),
    "spmd": False,
    "overwrite": False,
    "ops": {},
}


class PluginNotLoadedWarning(UserWarning):
    """A torch-xla PJRT plugin was registered: accepted, never loaded (ttjax runs on JAX)."""


class _DeviceMode(torch.overrides.TorchFunctionMode):
    """Moves host tensors to the ``jax`` device and makes tensors there; every other torch call
    goes on to torch (autograd, then torchax's aten-level dispatch), so gradients are recorded."""

    def __init__(self, env: Any) -> None:
        super().__init__()
        self.env = env

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in torchax.tensor.TENSOR_CONSTRUCTORS:
            return self.env._handle_tensor_constructor(func, args, kwargs)
        if func is torch.Tensor.to and args and not isinstance(args[0], torchax.tensor.Tensor):
            target = torch._C._nn._parse_to(*args[1:], **kwargs)[0]
            if target is not None and target.type == "jax":
                return self.env._torch_Tensor_to(args, kwargs)
        return func(*args, **kwargs)


class _DispatchMode(torchax.tensor.XLADispatchMode):
    """torchax's aten-level mode, for ops that touch the ``jax`` device only: host-only work
    (a CPU reference model, ``copy.deepcopy``) runs as plain torch. torchax tensors report device
    ``meta`` to C++, so ops making tensors there (SDPA's causal mask) are torchax's too."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        device = (kwargs or {}).get("device")
        if not types and getattr(device, "type", device) not in ("jax", "meta"):
            return func(*args, **(kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)


def _attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    attn_mask: jax.Array | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> jax.Array:
    """``F.scaled_dot_product_attention`` on ``[..., heads, positions, head_dim]`` arrays, kept
    4-D. torchax's own lowering multiplies through ``aten.matmul``, which folds batch and heads
    into one dim: a head-sharded query then cannot stay sharded, and XLA all-gathers q, k and v
    in every layer."""
    if dropout_p:
        raise ConfigError(
            f"scaled_dot_product_attention(dropout_p={dropout_p}) inside a compiled program: "
            "ttjax's attention has no dropout.\nfix: attention_dropout=0 (or model.eval())."
        )
    heads, kv_heads = query.shape[-3], key.shape[-3]
    if heads != kv_heads:  # grouped-query attention: each KV head serves heads // kv_heads
        key = jnp.repeat(key, heads // kv_heads, axis=-3)
        value = jnp.repeat(value, heads // kv_heads, axis=-3)
    scale = 1.0 / float(np.sqrt(query.shape[-1])) if scale is None else scale
    weights = jnp.einsum("...qd,...kd->...qk", query, key) * jnp.asarray(scale, query.dtype)
    length, context = query.shape[-2], key.shape[-2]
    if is_causal:
        weights = jnp.where(jnp.tril(jnp.ones((length, context), bool)), weights, -jnp.inf)
    if attn_mask is not None:
        if attn_mask.dtype == jnp.bool_:
            weights = jnp.where(attn_mask, weights, -jnp.inf)
        else:
            weights = weights + attn_mask.astype(weights.dtype)
    weights = jax.nn.softmax(weights, axis=-1)
    return jnp.einsum("...qk,...kd->...qd", weights, value)


_ATTENTION_OPS = (torch.nn.functional.scaled_dot_product_attention,)


def enable() -> Any:
    """Turn on the ``jax`` device for torch in this process (idempotent); returns torchax's
    environment. :func:`ttjax.compat.install_as_torch_xla` calls it."""
    with _lock:
        env = torchax.default_env()
        if _state["modes"] is None:
            modes = (_DispatchMode(env), _DeviceMode(env))
            for mode in modes:
                mode.__enter__()
            env.enabled = True
            _state["modes"] = modes
            _state["ops"] = {op: env._ops.get(op) for op in _ATTENTION_OPS}
            for op in _ATTENTION_OPS:
                env._ops[op] = Operator(op, _attention, True, True, False, False)
            # module.to(dtype) makes new parameters: a torchax tensor's dtype lives in its
            # jax.Array, and C++ would skip a conversion its stale wrapper dtype already names
            _state["overwrite"] = torch.__future__.get_overwrite_module_params_on_conversion()
            torch.__future__.set_overwrite_module_params_on_conversion(True)
            _state["hooks"] = (
                register_optimizer_step_pre_hook(_before_step),
                register_optimizer_step_post_hook(_after_step),
            )
        return env


def disable() -> None:
    """Undo :func:`enable`: torch runs on its own devices again."""
    with _lock:
        modes = _state["modes"]
        if modes is None:
            return
        for mode in reversed(modes):
            mode.__exit__(None, None, None)
        env = torchax.default_env()
        env.enabled = False
        for op, original in _state["ops"].items():
            if original is None:
                env._ops.pop(op, None)
            else:
                env._ops[op] = original
        for hook in _state["hooks"]:
            hook.remove()
        torch.__future__.set_overwrite_module_params_on_conversion(_state["overwrite"])
        _state.update(modes=None, hooks=(), spmd=False)


def _params(optimizer: Any) -> list[Any]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """Gradients follow their parameters' shardings; remember the shardings for the update."""
    shardings = []
    for p in _params(optimizer):
        follow_sharding(p)
        sharding = getattr(getattr(p, "_elem", None), "sharding", None)
        shardings.append(sharding if isinstance(sharding, NamedSharding) else None)
    optimizer._ttjax_shardings = shardings


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    """An in-place update keeps a parameter's annotation (as torch-xla's sharded tensors do)."""
    shardings = getattr(optimizer, "_ttjax_shardings", None) or []
    for p, sharding in zip(_params(optimizer), shardings):
        elem = getattr(p, "_elem", None)
        if sharding is not None and elem is not None and elem.sharding != sharding:
            p._elem = jax.device_put(elem, sharding)


# --- torch_xla ------------------------------------------------------------------------------


def device(index: int | None = None) -> torch.device:
    """torch-xla's ``torch_xla.device()``: the device whose tensors are ``jax.Array``s.

    >>> torch.zeros(2, device=torch_xla.device())   # a torchax tensor on JAX's devices
    """
    enable()
    return torch.device("jax", index or 0)


def devices() -> list[torch.device]:
    """One logical device under SPMD, as torch-xla has it (``mark_sharding`` spreads tensors)."""
    return [device()]


def sync(wait: bool = False) -> None:
    """torch-xla's ``torch_xla.sync()`` / ``xm.mark_step()``: every op queued so far is done on
    return. Ops already ran as their own compiled programs (eager torchax), so nothing is left
    to compile; ``wait`` is accepted (the wait always happens)."""
    jax.block_until_ready(jax.live_arrays())


def compile(fn: Any, full_graph: bool = False, name: str | None = None) -> Any:
    """torch-xla's ``torch_xla.compile``: ``fn`` as one compiled program.

    A ``torch.nn.Module`` comes back as torchax's ``JittableModule``: its forward is ``jax.jit``
    of the module's functional call over the current parameters (sharded as marked); a function
    of torch tensors is jitted by ``torchax.interop.jax_jit``.

    >>> forward = torch_xla.compile(model)
    >>> out = forward(input_ids=input_ids)                 # one XLA program
    """
    enable()
    if isinstance(fn, torch.nn.Module):
        return torchax.compile(fn)
    return torchax.interop.jax_jit(fn)


def jax_forward(module: torch.nn.Module) -> tuple[Callable[..., Any], dict[str, jax.Array]]:
    """``(fn, params)``: ``module``'s forward as a JAX function ``fn(params, *args, **kwargs)``
    of its parameters and buffers (``jax.Array``s, sharded as marked), for ``jax.jit`` and
    ``ttjax.inspect``. Outputs are ``jax.Array`` pytrees (pass ``return_dict=False`` to
    transformers' models).

    >>> fn, params = jax_forward(model)
    >>> ttjax.inspect.inspect(fn, params, ids, return_dict=False, mesh=mesh.jax_mesh)
    """
    env = enable()
    jittable = torchax.interop.JittableModule(module)
    names = (list(jittable.params), list(jittable.buffers))

    def array(t: Any) -> jax.Array:  # the tensor's own jax.Array, sharding and all
        return t._elem if isinstance(t, torchax.tensor.Tensor) else env.t2j_copy(t)

    state = {k: array(v) for k, v in {**jittable.buffers, **jittable.params}.items()}

    def forward(state: dict[str, jax.Array], *args: Any, **kwargs: Any) -> Any:
        params, buffers = ({k: state[k] for k in group} for group in names)
        params, buffers, args, kwargs = env.j2t_iso((params, buffers, args, kwargs))
        try:
            with env:  # torchax's full modes while tracing; leaving them clears env.enabled
                out = jittable.functional_call("forward", params, buffers, *args, **kwargs)
        finally:
            env.enabled = _state["modes"] is not None
        return env.t2j_iso(out)

    return forward, state


# --- torch_xla.core.xla_model ---------------------------------------------------------------


def xla_device(n: int | None = None, devkind: str | None = None) -> torch.device:
    """torch-xla's ``xm.xla_device()``: :func:`device`."""
    return device(n)


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """torch-xla's ``xm.mark_step()``: :func:`sync` (waits for the queued ops)."""
    sync(wait)


def wait_device_ops(devices: Any = ()) -> None:
    """torch-xla's ``xm.wait_device_ops()``: :func:`sync`."""
    sync(True)


def optimizer_step(optimizer: Any, barrier: bool = False, optimizer_args: Any = None) -> Any:
    """torch-xla's ``xm.optimizer_step``: under SPMD there is nothing to all-reduce by hand (XLA
    partitions the gradients), so this is ``optimizer.step()``."""
    loss = optimizer.step(**(optimizer_args or {}))
    if barrier:
        sync(True)
    return loss


# --- torch_xla.runtime ----------------------------------------------------------------------


def use_spmd(auto: bool = False) -> None:
    """torch-xla's ``xr.use_spmd()``: SPMD is how ttjax always runs; this records the call."""
    if auto:
        raise ConfigError(
            "xr.use_spmd(auto=True): ttjax has no automatic sharding pass.\n"
            "fix: call xr.use_spmd() and annotate tensors with xs.mark_sharding."
        )
    enable()
    _state["spmd"] = True


def is_spmd() -> bool:
    """Whether :func:`use_spmd` was called."""
    return bool(_state["spmd"])


def global_runtime_device_count() -> int:
    """Devices of the whole job (every process's), as ``jax.device_count()``."""
    return jax.device_count()


def addressable_runtime_device_count() -> int:
    """Devices this process drives."""
    return jax.local_device_count()


def world_size() -> int:
    """Processes of the job (one per host under SPMD)."""
    return jax.process_count()


def global_ordinal() -> int:
    """This process's index in the job."""
    return jax.process_index()


# --- torch_xla.experimental.plugins ---------------------------------------------------------


class DevicePlugin:
    """torch-xla's PJRT plugin base class. A subclass may be registered; it is never loaded:
    ttjax runs torch on JAX's devices (``library_path`` is not called)."""

    def library_path(self) -> str:
        raise NotImplementedError

    def physical_chip_count(self) -> int:
        return 1

    def client_create_options(self) -> dict[str, Any]:
        return {}

    def requires_xla_coordinator(self) -> bool:
        return False

    def configure_single_process(self) -> None:
        return None

    def configure_multiprocess(self, local_rank: int, local_world_size: int) -> None:
        return None


def register_plugin(name: str, device_plugin: DevicePlugin) -> None:
    """Accept torch-xla's plugin registration with one warning line: ttjax runs on JAX's devices,
    the plugin's PJRT library is not loaded (``PJRT_DEVICE`` and the other XLA variables are
    not read either)."""
    devices = jax.devices()
    warnings.warn(
        f"torch_xla.experimental.plugins.register_plugin({name!r}, "
        f"{type(device_plugin).__name__}()): accepted, not loaded; ttjax runs torch on JAX's "
        f"{len(devices)} {devices[0].platform} devices through torchax "
        f"(PJRT_DEVICE={os.environ.get('PJRT_DEVICE')!r} is not read)",
        PluginNotLoadedWarning,
        stacklevel=2,
    )


def use_dynamic_plugins() -> None:
    """torch-xla's switch for registered plugins: nothing to switch on."""
    return None


__all__ = [
    "DevicePlugin",
    "PluginNotLoadedWarning",
    "addressable_runtime_device_count",
    "compile",
    "device",
    "devices",
    "disable",
    "enable",
    "global_ordinal",
    "global_runtime_device_count",
    "is_spmd",
    "jax_forward",
    "mark_step",
    "optimizer_step",
    "register_plugin",
    "sync",
    "use_dynamic_plugins",
    "use_spmd",
    "wait_device_ops",
    "world_size",
    "xla_device",
]
