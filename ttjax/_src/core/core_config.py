"""TT-NN's global ``ttnn.CONFIG`` (``ttnn.Config``: cache and report paths, logging and
comparison-mode switches) and ``ttnn.get_fallback_function``.

The implementation of :mod:`ttjax.core_config`, whose docstring says more.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

from ttjax._src.core.errors import ConfigError

_HOME = pathlib.Path(os.environ.get("HOME", "~"))


@dataclasses.dataclass
class Config:
    """``ttnn.Config``: the fields and defaults of TT-NN's ``Config::attributes_t``."""

    cache_path: pathlib.Path = _HOME / ".cache/ttnn"
    model_cache_path: pathlib.Path = _HOME / ".cache/ttnn/models"
    tmp_dir: pathlib.Path = pathlib.Path("/tmp/ttnn")
    enable_model_cache: bool = False
    enable_fast_runtime_mode: bool = True
    throw_exception_on_fallback: bool = False
    enable_logging: bool = False
    enable_graph_report: bool = False
    enable_detailed_buffer_report: bool = False
    enable_detailed_tensor_report: bool = False
    enable_comparison_mode: bool = False
    comparison_mode_should_raise_exception: bool = False
    comparison_mode_pcc: float = 0.9999
    root_report_path: pathlib.Path = pathlib.Path("generated/ttnn/reports")
    report_name: pathlib.Path | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in type(self).__dataclass_fields__:
            raise ConfigError(
                f"ttnn.CONFIG has no setting {name!r}.\nfix: use one of "
                f"{sorted(type(self).__dataclass_fields__)}."
            )
        super().__setattr__(name, value)

    @property
    def report_path(self) -> pathlib.Path | None:
        """``root_report_path / report_name`` while a report name is set (read-only)."""
        if self.report_name is None:
            return None
        return pathlib.Path(self.root_report_path) / str(self.report_name)[:64]


CONFIG = Config()


@contextlib.contextmanager
def manage_config(name: str, value: Any) -> Iterator[None]:
    """Set ``ttnn.CONFIG.<name>`` for the ``with`` block, then restore it."""
    old = getattr(CONFIG, name)
    setattr(CONFIG, name, value)
    try:
        yield
    finally:
        setattr(CONFIG, name, old)


def get_fallback_function(operation: Callable[..., Any]) -> Callable[..., Any]:
    """TT-NN's fallback of an op: its golden (torch) function run on the host, with the inputs
    read back and the result put where the inputs were. A ttjax op already computes that
    reference math on the mesh, so its fallback is the op itself, called with the same
    arguments.

    >>> fallback_reshape = ttnn.get_fallback_function(ttnn.reshape)
    """
    if not callable(operation):
        raise ConfigError(
            f"ttnn.get_fallback_function: {operation!r} is not an operation.\n"
            "fix: pass the ttnn op itself, e.g. ttnn.get_fallback_function(ttnn.reshape)."
        )

    @functools.wraps(operation)
    def fallback(*args: Any, **kwargs: Any) -> Any:
        return operation(*args, **kwargs)

    return fallback


__all__ = ["CONFIG", "Config", "get_fallback_function", "manage_config"]
