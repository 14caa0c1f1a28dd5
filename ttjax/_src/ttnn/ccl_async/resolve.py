"""The pybind-style overload resolution of TT-NN's ``experimental.*_async`` bindings.

Each op accepts the argument lists TT-NN binds, picking the first overload whose names,
arity and argument types fit, and raising TT-NN's ``incompatible function arguments``
error otherwise, so model code that calls TT-NN wrongly fails here too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ttjax._src.core.enums import DataType, ReduceType, Topology
from ttjax._src.core.errors import CCLSignatureError
from ttjax._src.core.hardware import CoreCoord, MemoryConfig
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.subdevice import GlobalSemaphore, SubDeviceId
from ttjax._src.core.tensor import Tensor


def _uint(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and int(x) >= 0


def _opt(pred: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: x is None or pred(x)


class GlobalSemaphoreArg:
    """TT-NN's argument type for all_gather_async's semaphores: one semaphore or a list of them."""

    def __init__(self, semaphores: GlobalSemaphore | Sequence[GlobalSemaphore]) -> None:
        if not (isinstance(semaphores, GlobalSemaphore) or _sems(semaphores)):
            raise CCLSignatureError(
                f"GlobalSemaphoreArg({_short(semaphores)}): expected a GlobalSemaphore or a list "
                "of them.\nfix: create them with ttnn.create_global_semaphore(mesh, cores, 0)."
            )
        self.semaphores: list[GlobalSemaphore] = (
            [semaphores] if isinstance(semaphores, GlobalSemaphore) else list(semaphores)
        )

    def get(self) -> list[GlobalSemaphore]:
        return list(self.semaphores)

    def __repr__(self) -> str:
        return f"GlobalSemaphoreArg({self.semaphores!r})"


def _sem(x: Any) -> bool:
    return isinstance(x, GlobalSemaphore)


def _sems(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and all(_sem(s) for s in x)


def _tensors(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and all(isinstance(t, Tensor) for t in x)


# What pybind's casters accept for each argument name (a name not listed accepts anything).
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "Tensor": (lambda x: isinstance(x, Tensor), "a ttnn.Tensor"),
    "Tensor?": (_opt(lambda x: isinstance(x, Tensor)), "a ttnn.Tensor or None"),
    "Tensors?": (_opt(_tensors), "a list of ttnn.Tensor or None"),
    "int": (lambda x: isinstance(x, (int, np.integer)) and not isinstance(x, bool), "an int"),
    "uint": (_uint, "a non-negative int"),
    "uint?": (_opt(_uint), "a non-negative int or None"),
    "bool": (lambda x: isinstance(x, (bool, np.bool_)), "a bool"),
    "sem": (_sem, "a GlobalSemaphore"),
    "sem?": (_opt(_sem), "a GlobalSemaphore or None"),
    "sems": (_sems, "a list of GlobalSemaphore"),
    "sems?": (_opt(_sems), "a list of GlobalSemaphore or None"),
    "sem|sems": (
        lambda x: _sem(x) or _sems(x) or isinstance(x, GlobalSemaphoreArg),
        "a GlobalSemaphore, a list of them or a GlobalSemaphoreArg",
    ),
    "mesh": (lambda x: isinstance(x, MeshDevice), "a ttnn.MeshDevice"),
    "mem?": (_opt(lambda x: isinstance(x, MemoryConfig)), "a ttnn.MemoryConfig or None"),
    "topo": (lambda x: isinstance(x, Topology), "a ttnn.Topology"),
    "subdev?": (_opt(lambda x: isinstance(x, SubDeviceId)), "a ttnn.SubDeviceId or None"),
    "subdev": (lambda x: isinstance(x, SubDeviceId), "a ttnn.SubDeviceId"),
    "reduce": (lambda x: isinstance(x, ReduceType), "a ttnn.ReduceType"),
    "dtype?": (_opt(lambda x: isinstance(x, DataType)), "a ttnn.DataType or None"),
    "str": (lambda x: isinstance(x, str), "a str"),
    "shape2?": (
        _opt(lambda x: isinstance(x, (tuple, list)) and len(x) == 2 and all(_uint(v) for v in x)),
        "a (rows, cols) pair or None",
    ),
    "core": (
        lambda x: (
            isinstance(x, CoreCoord)
            or (isinstance(x, (tuple, list)) and len(x) == 2 and all(_uint(v) for v in x))
        ),
        "a ttnn.CoreCoord or an (x, y) pair",
    ),
}


@dataclass(frozen=True)
class _Overload:
    """One of a binding's overloads: its Python signature and each argument's pybind kind."""

    signature: inspect.Signature
    kinds: dict[str, str]

    def text(self) -> str:
        return str(self.signature).replace("'", "")

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | str:
        """The arguments by name, or why this overload does not fit."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            return str(e)
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            kind = self.kinds.get(name)
            if kind is not None and not _KINDS[kind][0](value):
                return f"{name}={_short(value)} is not {_KINDS[kind][1]}"
        return dict(bound.arguments)


def _overload(template: Callable[..., Any], **kinds: str) -> _Overload:
    """An overload from a template function's signature; ``kinds`` may hold names it lacks."""
    sig = inspect.signature(template)
    unknown = set(kinds.values()) - set(_KINDS)
    assert not unknown, f"{template.__name__}: unknown kinds {unknown}"
    return _Overload(sig, {k: v for k, v in kinds.items() if k in sig.parameters})


def _short(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"Tensor(shape={list(value._shape)}, dtype={value._dtype!r})"
    if isinstance(value, GlobalSemaphore):
        return f"GlobalSemaphore(address={value.address:#x}, mesh id {value.mesh_device.id()})"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _resolve(
    op: str, overloads: Sequence[_Overload], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    """The first overload that fits, as pybind picks it; raises TT-NN's TypeError otherwise."""
    reasons = []
    for i, ov in enumerate(overloads):
        got = ov.bind(args, kwargs)
        if isinstance(got, dict):
            return i, got
        reasons.append(f"    {i + 1}. {op}{ov.text()}\n       -> {got}")
    invoked = ", ".join([_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()])
    raise CCLSignatureError(
        f"ttnn.experimental.{op}(): incompatible function arguments. The following argument "
        "types are supported:\n" + "\n".join(reasons) + f"\nInvoked with: {invoked}\n"
        f"fix: call ttnn.experimental.{op} with one of the signatures above."
    )
