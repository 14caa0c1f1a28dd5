"""NanoGPT's parameters: created whole from a seed (the same on every mesh) and their TP specs.

>>> params = init_params(config, seed=5489)      # whole arrays; params["blocks"] is [n_layer, ...]
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
from ttjax.ttml.context import ParallelismContext


def init_params(config: GPTConfig, seed: int) -> dict[str, Any]:
    """GPT-2 initialisation (normal 0.02; residual projections 0.02 / sqrt(2 n_layer)).

    One jitted program (one compile, not one per random op), the same on every mesh. The blocks
    come stacked on a leading ``[n_layer]`` axis (block ``i`` from the seed's keys ``2 + 6 i ..``).
    """
    return _init_params(config, seed)


@partial(jax.jit, static_argnums=0)
def _init_params(config: GPTConfig, seed: Any) -> dict[str, Any]:
    model = GPT(config)
    layers = model.block.layers
    keys = jax.random.split(jax.random.key(seed), 2 + len(layers) * config.n_layer)

    def block(block_keys: Any) -> dict[str, Any]:
        return {name: layer.init(k) for (name, layer), k in zip(layers.items(), block_keys)}

    params: dict[str, Any] = {
        "wte": model.wte.init(keys[0]),
        "wpe": 0.02 * jax.random.normal(keys[1], (config.block_size, config.n_embd)),
        "blocks": jax.vmap(block)(keys[2:].reshape(config.n_layer, len(layers))),
        "ln_f": model.ln_f.init(),
    }
    if not config.tie_weights:  # its own key, so the tied model's values stay as they were
        params["lm_head"] = model.wte.init(jax.random.fold_in(jax.random.key(seed), 1 << 20))
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), params)


def block_axes(config: GPTConfig) -> dict[str, Any]:
    """The logical axes of one block's parameters."""
    return GPT(config).blocks.block_axes()


def param_axes(config: GPTConfig) -> dict[str, Any]:
    """The logical axes of every parameter, stated once (the plan's rules place them); the
    stacked blocks lead with ``"layers"``."""
    model = GPT(config)
    axes = {
        "wte": model.wte.axes(),
        "wpe": LogicalAxes("positions", "embed"),
        "blocks": model.blocks.axes(),
        "ln_f": model.ln_f.axes(),
    }
    if not config.tie_weights:
        axes["lm_head"] = model.wte.axes()
    return axes


def check_heads(config: GPTConfig, par: ParallelismContext) -> None:
    """Whole heads per TP device: ``n_head`` must divide by the TP size."""
    if par.tp_size > 1 and config.n_head % par.tp_size:
        raise ConfigError(
            f"NanoGPT: n_head={config.n_head} must be divisible by the TP size {par.tp_size}.\n"
            "fix: pick n_head (num_heads) as a multiple of the TP size."
        )


def block_specs(config: GPTConfig, par: ParallelismContext) -> dict[str, Any]:
    """PartitionSpecs of one block's parameters (the pipeline stages blocks one by one)."""
    check_heads(config, par)
    return par.specs(block_axes(config))


def param_specs(config: GPTConfig, par: ParallelismContext) -> dict[str, Any]:
    """How each parameter lies on ``par``'s mesh: :func:`param_axes` through the plan's rules."""
    check_heads(config, par)
    shapes = jax.eval_shape(lambda: init_params(config, 0))
    return par.specs(param_axes(config), shapes)


__all__ = ["block_axes", "block_specs", "check_heads", "init_params", "param_axes", "param_specs"]
