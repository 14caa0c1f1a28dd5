"""NanoGPT's parameters: created whole from a seed (the same on every mesh) and their TP specs.

>>> params = init_params(config, seed=5489)      # whole arrays on the host
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


def param_specs(config: GPTConfig, par: Parallelism) -> dict[str, Any]:
    """How each parameter lies on the mesh: Megatron splits over TP, replicated elsewhere."""
    if par.tp_size > 1 and config.n_head % par.tp_size:
        raise ConfigError(
            f"NanoGPT: n_head={config.n_head} must be divisible by the TP size {par.tp_size}.\n"
            "fix: pick n_head (num_heads) as a multiple of the TP size."
        )
    model = GPT(config)
    block = {name: layer.specs(par) for name, layer in model.block.layers.items()}
    return {
        "wte": model.wte.specs(par),
        "wpe": P(),
        "blocks": [block for _ in range(config.n_layer)],
        "ln_f": model.ln_f.specs(par),
    }


__all__ = ["init_params", "param_specs"]
