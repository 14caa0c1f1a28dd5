"""A Flax NNX reference of Falcon-7B's MLP: dense_h_to_4h -> gelu -> dense_4h_to_h (no biases).

Sizes default to Falcon-7B's (hidden 4544, ffn 4 x 4544 = 18176), as in Hugging Face's
``FalconMLP`` with ``tiiuae/falcon-7b-instruct``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


@dataclass(frozen=True)
class FalconMLPConfig:
    hidden_size: int = 4544  # Falcon-7B
    ffn_hidden_size: int = 4 * 4544


FALCON_7B = FalconMLPConfig()


class FalconMLP(nnx.Module):
    """``y = dense_4h_to_h(gelu(dense_h_to_4h(x)))`` with Flax's [in, out] kernels."""

    def __init__(self, config: FalconMLPConfig = FALCON_7B, *, rngs: nnx.Rngs) -> None:
        h, f = config.hidden_size, config.ffn_hidden_size
        init = nnx.initializers.normal(stddev=0.02)
        self.dense_h_to_4h = nnx.Linear(h, f, use_bias=False, kernel_init=init, rngs=rngs)
        self.dense_4h_to_h = nnx.Linear(f, h, use_bias=False, kernel_init=init, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        hp = jax.lax.Precision.HIGHEST
        h = jnp.matmul(x, self.dense_h_to_4h.kernel[...], precision=hp)
        h = jax.nn.gelu(h, approximate=False)
        return jnp.matmul(h, self.dense_4h_to_h.kernel[...], precision=hp)

    @staticmethod
    def from_torch_weights(h_to_4h: np.ndarray, four_h_to_h: np.ndarray) -> FalconMLP:
        """Build from Hugging Face ``FalconMLP`` weights ([out, in] torch layout)."""
        cfg = FalconMLPConfig(hidden_size=h_to_4h.shape[1], ffn_hidden_size=h_to_4h.shape[0])
        model = FalconMLP(cfg, rngs=nnx.Rngs(0))
        model.dense_h_to_4h.kernel[...] = jnp.asarray(h_to_4h.T)
        model.dense_4h_to_h.kernel[...] = jnp.asarray(four_h_to_h.T)
        return model
