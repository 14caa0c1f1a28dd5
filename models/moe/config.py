"""The MoE layer's shape and routing rule, shared by the ttjax layer and the dense reference.

>>> cfg = MoEConfig(dim=64, ffn_dim=128, n_experts=8, top_k=2, capacity_factor=1.25)
>>> cfg.capacity(tokens=32)      # slots per expert for one group of 32 tokens
10
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ttjax.errors import ConfigError


@dataclass(frozen=True)
class MoEConfig:
    """A top-k softmax-routed mixture of SwiGLU experts (Mixtral's block, Switch/GShard capacity).

    ``capacity_factor`` sets the slots per expert in each group of tokens (each device's tokens
    form one group, as in GShard): ``ceil(capacity_factor * top_k * tokens / n_experts)``, at most
    ``tokens``. Choices over capacity are dropped: first choices claim slots in token order, then
    second choices. ``None`` means no limit (Mixtral's router). ``normalize_gates`` rescales the
    top-k probabilities to sum to 1 (Mixtral, GShard top-2); Switch's top-1 keeps the raw one.
    """

    dim: int
    ffn_dim: int
    n_experts: int
    top_k: int = 2
    capacity_factor: float | None = 1.25
    normalize_gates: bool = True
    aux_loss_coef: float = 0.01

    def __post_init__(self) -> None:
        for name in ("dim", "ffn_dim", "n_experts", "top_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"MoEConfig: {name}={value!r} must be a positive int.\nfix: e.g. {name}=8."
                )
        if self.top_k > self.n_experts:
            raise ConfigError(
                f"MoEConfig: top_k={self.top_k} is larger than n_experts={self.n_experts}; a token "
                f"cannot pick {self.top_k} different experts out of {self.n_experts}.\n"
                f"fix: top_k <= {self.n_experts} (Switch uses 1, Mixtral and GShard 2)."
            )
        cf = self.capacity_factor
        if cf is not None and (
            isinstance(cf, bool) or not isinstance(cf, (int, float)) or not cf > 0
        ):
            raise ConfigError(
                f"MoEConfig: capacity_factor={cf!r} must be a number > 0 (or None for no limit).\n"
                "fix: e.g. capacity_factor=1.25 (Switch), 2.0 (GShard), or None (Mixtral)."
            )

    def capacity(self, tokens: int) -> int:
        """Slots per expert for a group of ``tokens`` tokens (``tokens`` itself drops nothing)."""
        if self.capacity_factor is None:
            return max(1, tokens)
        slots = math.ceil(self.capacity_factor * self.top_k * tokens / self.n_experts - 1e-9)
        return max(1, min(tokens, slots))

    def with_(self, **changes: Any) -> MoEConfig:
        return replace(self, **changes)
