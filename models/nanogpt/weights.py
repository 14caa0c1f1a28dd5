"""NanoGPT's parameters: created whole from a seed (the same on every mesh) and their TP specs.

>>> params = init_params(config, seed=5489)      # whole arrays; params["blocks"] is [n_layer, ...]
>>> specs = param_specs(config, par)             # PartitionSpecs: TP splits, DDP replicates
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from models.nanogpt.model import GPT, GPTConfig
from ttjax.errors import ConfigError
from ttjax.ttml.parallel import Parallelism
from ttjax.ttml.stacked import stacked_specs


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
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float32), params)


def block_specs(config: GPTConfig, par: Parallelism) -> dict[str, Any]:
    """PartitionSpecs of one block's parameters: Megatron splits over TP."""
    if par.tp_size > 1 and config.n_head % par.tp_size:
        raise ConfigError(
            f"NanoGPT: n_head={config.n_head} must be divisible by the TP size {par.tp_size}.\n"
            "fix: pick n_head (num_heads) as a multiple of the TP size."
        )
    return {name: layer.specs(par) for name, layer in GPT(config).block.layers.items()}


def param_specs(config: GPTConfig, par: Parallelism) -> dict[str, Any]:
    """How each parameter lies on the mesh: Megatron splits over TP, replicated elsewhere (the
    blocks' layer axis too)."""
    model = GPT(config)
    return {
        "wte": model.wte.specs(par),
        "wpe": P(),
        "blocks": stacked_specs(block_specs(config, par)),
        "ln_f": model.ln_f.specs(par),
    }


__all__ = ["block_specs", "init_params", "param_specs"]
