"""Host arrays: whatever a user hands to ``from_torch`` or a mapper, as numpy.

Torch tensors (when torch is installed), JAX arrays, numpy arrays and nested lists are accepted;
torch's bfloat16 is viewed bit for bit as ``ml_dtypes.bfloat16``.

>>> to_host_array([[1, 2], [3, 4]]).shape
(2, 2)
"""

from __future__ import annotations

from typing import Any

import jax
import ml_dtypes
import numpy as np

from ttjax._src.core.errors import TTJaxError
from ttjax._src.core.tensor import Tensor


def is_torch(x: Any) -> bool:
    """Whether ``x`` is a torch tensor (checked without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def to_host_array(x: Any) -> np.ndarray:
    """A numpy view/copy of a torch tensor, JAX array, numpy array or nested list."""
    if is_torch(x):
        import torch

        # a strided view stays a view (numpy takes its strides): conversion copies one
        # device's block at a time, never the whole tensor
        t = x.detach().cpu().resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    if isinstance(x, Tensor):
        raise TTJaxError(
            "from_torch got a ttnn Tensor.\nfix: it is already converted; use ttnn.to_device "
            "to move a host tensor, or ttnn.to_torch to read it back first."
        )
    if isinstance(x, jax.core.Tracer):
        raise TTJaxError(
            "from_torch got a traced JAX value (inside jax.jit).\nfix: convert inputs outside "
            "the jitted function and pass the ttnn Tensors in as arguments."
        )
    return np.asarray(x)


__all__ = ["is_torch", "to_host_array"]
