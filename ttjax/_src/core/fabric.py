"""TT-Metal's fabric settings: ``ttnn.FabricConfig``, ``ttnn.FabricReliabilityMode``,
``ttnn.FabricTensixConfig`` and ``ttnn.set_fabric_config``.

The implementation of :mod:`ttjax.fabric`, whose docstring says more.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ttjax._src.core.errors import ConfigError


class FabricConfig(enum.Enum):
    """The fabric's routing mode; the names TT-NN binds, with TT-Metal's values
    (tt_metal/api/tt-metalium/fabric_types.hpp)."""

    DISABLED = 0
    FABRIC_1D = 1
    FABRIC_1D_RING = 2
    FABRIC_2D = 3
    FABRIC_2D_DYNAMIC = 7
    CUSTOM = 11

    def __repr__(self) -> str:
        return f"FabricConfig.{self.name}"


class FabricReliabilityMode(enum.Enum):
    """How fabric setup treats downed links/devices (TT-NN's names, TT-Metal's values)."""

    STRICT_INIT = 0
    RELAXED_INIT = 1
    DYNAMIC_RECONFIG = 2

    def __repr__(self) -> str:
        return f"FabricReliabilityMode.{self.name}"


class FabricTensixConfig(enum.Enum):
    """Whether fabric routers use a tensix-core mux extension (TT-Metal's values)."""

    DISABLED = 0
    MUX = 1

    def __repr__(self) -> str:
        return f"FabricTensixConfig.{self.name}"


@dataclass(frozen=True)
class FabricSetting:
    """One ``set_fabric_config`` call: what the next opened mesh gets."""

    config: FabricConfig = FabricConfig.DISABLED
    reliability_mode: FabricReliabilityMode = FabricReliabilityMode.STRICT_INIT
    num_planes: int | None = None
    fabric_tensix_config: FabricTensixConfig = FabricTensixConfig.DISABLED
    explicit: bool = False  # False: never set (ttjax's own programs), collectives allowed


_current = FabricSetting()


def _member(enum_type: type[enum.Enum], name: str, value: Any) -> Any:
    """``value`` as a member of ``enum_type``; an int (or bool, as tt-metal's tests'
    ``{"fabric_config": True}``) selects the member with that value."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, int):
        for member in enum_type:
            if member.value == int(value):
                return member
    valid = ", ".join(f"{enum_type.__name__}.{m.name}" for m in enum_type)
    raise ConfigError(
        f"set_fabric_config: {name}={value!r} is not a {enum_type.__name__}.\nfix: pass one of {valid}."
    )


def set_fabric_config(
    config: Any,
    reliability_mode: Any = FabricReliabilityMode.STRICT_INIT,
    num_planes: int | None = None,
    fabric_tensix_config: Any = FabricTensixConfig.DISABLED,
) -> None:
    """Set the fabric for meshes opened from now on (TT-NN's ``ttnn.set_fabric_config``)."""
    global _current
    if num_planes is not None and (not isinstance(num_planes, int) or num_planes < 1):
        raise ConfigError(
            f"set_fabric_config: num_planes={num_planes!r} must be a positive int or None.\n"
            "fix: leave num_planes=None (every routing plane the system has)."
        )
    _current = FabricSetting(
        _member(FabricConfig, "config", config),
        _member(FabricReliabilityMode, "reliability_mode", reliability_mode),
        num_planes,
        _member(FabricTensixConfig, "fabric_tensix_config", fabric_tensix_config),
        explicit=True,
    )


def get_fabric_config() -> FabricConfig:
    """The fabric mode meshes opened now get (DISABLED until ``set_fabric_config``)."""
    return _current.config


def current_setting() -> FabricSetting:
    """The whole setting (mode, reliability, planes, tensix extension); meshes record it."""
    return _current


__all__ = [
    "FabricConfig",
    "FabricReliabilityMode",
    "FabricSetting",
    "FabricTensixConfig",
    "current_setting",
    "get_fabric_config",
    "set_fabric_config",
]
