"""Thread-local modes that are part of JAX's jit cache key: what ``ttjax.numerics`` and
``ttjax.kernels`` are made of.

A :class:`Setting` owns one ``jax.make_user_context``: setting a mode is thread-local, a ``with``
block restores the previous one, and a jitted function traced under one mode is traced again
under another. :func:`make_callable` lets the module itself be called, as in
``ttjax.numerics("deterministic")``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import jax

from ttjax._src.core.errors import ConfigError


class Setting:
    """One policy: its public name, its modes and default, and the JAX context holding it."""

    def __init__(self, name: str, modes: tuple[str, ...], default: str, note: str = "") -> None:
        self.name, self.modes, self.default, self.note = name, modes, default, note
        self.context = jax.make_user_context(self.check(default))

    def check(self, mode: Any) -> str:
        if mode not in self.modes:
            raise ConfigError(
                f"{self.name}({mode!r}): unknown {self.name.split('.')[-1]} policy.\n"
                f"fix: one of {self.modes} (default {self.default!r}{self.note})."
            )
        return str(mode)

    def mode(self) -> str:
        return str(self.context.value)


class Policy:
    """The handle ``ttjax.<policy>(mode)`` returns: the mode is already set for this thread;
    leaving a ``with`` block restores the previous mode."""

    __slots__ = ("_ctx", "_name", "mode")

    def __init__(self, setting: Setting, mode: str) -> None:
        self.mode = setting.check(mode)
        self._name = setting.name
        self._ctx = setting.context(self.mode)
        self._ctx.__enter__()

    def __enter__(self) -> Policy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._ctx.__exit__(*exc)

    def __repr__(self) -> str:
        return f"{self._name}({self.mode!r})"


def make_callable(module_name: str, setting: Setting) -> None:
    """Make the module ``module_name`` callable: ``module(mode)`` sets ``setting`` to ``mode``."""

    class _PolicyModule(types.ModuleType):
        def __call__(self, mode: str) -> Policy:
            return Policy(setting, mode)

    sys.modules[module_name].__class__ = _PolicyModule


__all__ = ["Policy", "Setting", "make_callable"]
