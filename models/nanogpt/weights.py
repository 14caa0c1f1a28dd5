"""NanoGPT's parameters: created whole from a seed (the same on every mesh) and their TP specs.

>>> params = init_params(config, seed=5489)      # whole arrays on the host
>>> specs = param_specs(config, par)             # PartitionSpecs from param_axes(config)
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from models.nanogpt.model import GPT, GPTConfig
from ttjax.errors import ConfigError
from ttjax.plan import LogicalAxes
from ttjax.ttml.parallel import Parallelism


def init_params(config: GPTConfig, seed: int) -> dict[str, Any]:
    """GPT-2 initialisation (normal 0.02; residual projections 0.02 / sqrt(2 n_layer)).

    One jitted program (one compile, not one per random op), the same on every mesh.
    """
    return _init_params(config, seed)


@partial(jax.jit, static_argnums=0)
def _init_params(config: GPTConfig, seed: Any) -> dict[str, Any]:
    model = GPT(config)
    keys = iter(jax.random.split(jax.random.key(seed), 2 + 6 * config.n_layer))
    params: dict[str, Any] = {
        "wte": model.wte.init(next(keys)),
        "wpe": 0.02 * jax.random.normal(next(keys), (config.block_size, config.n_embd)),
        "blocks": [
            {name: layer.init(next(keys)) for name, layer in model.block.layers.items()}
            for _ in range(config.n_layer)
        ],
        "ln_f": model.ln_f.init(),
    }
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), params)


def param_axes(config: GPTConfig) -> dict[str, Any]:
    """The logical axes of every parameter, stated once (the plan's rules place them)."""
    model = GPT(config)
    block = {name: layer.axes() for name, layer in model.block.layers.items()}
    return {
        "wte": model.wte.axes(),
        "wpe": LogicalAxes("positions", "embed"),
        "blocks": [block for _ in range(config.n_layer)],
        "ln_f": model.ln_f.axes(),
    }


def check_heads(config: GPTConfig, par: Parallelism) -> None:
    """Whole heads per TP device: ``n_head`` must divide by the TP size."""
    if par.tp_size > 1 and config.n_head % par.tp_size:
        raise ConfigError(
            f"NanoGPT: n_head={config.n_head} must be divisible by the TP size {par.tp_size}.\n"
            "fix: pick n_head (num_heads) as a multiple of the TP size."
        )


def param_specs(config: GPTConfig, par: Parallelism) -> dict[str, Any]:
    """How each parameter lies on ``par``'s mesh: :func:`param_axes` through the plan's rules."""
    check_heads(config, par)
    shapes = jax.eval_shape(lambda: init_params(config, 0))
    return par.specs(param_axes(config), shapes)


__all__ = ["check_heads", "init_params", "param_axes", "param_specs"]
