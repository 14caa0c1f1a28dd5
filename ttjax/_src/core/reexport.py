"""The public modules of ``ttjax`` re-export names from ``ttjax._src``; :func:`publish` gives the
objects their public home (``__module__``), so reprs, pickles and docs name ``ttjax.mesh``, not
``ttjax._src.core.mesh``, as JAX's ``set_module`` does, and the module the ``__all__`` of its
implementation, so ``from ttjax.mesh import *`` takes what it always took.

>>> from ttjax.mesh import MeshShape
>>> MeshShape.__module__
'ttjax.mesh'
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

__all__ = ["public_names", "publish"]


def publish(namespace: dict[str, Any], *sources: str) -> None:
    """Set ``__module__`` of every function and class in ``namespace`` defined in one of
    ``sources`` to the public module's name (not when that module runs as ``__main__``), and its
    ``__all__`` to the names of ``sources``' ``__all__`` it binds (none where the first, the
    module it stands for, has no ``__all__``): name the module it stands for first."""
    home = namespace["__name__"]
    if hasattr(sys.modules[sources[0]], "__all__"):
        listed = {n for src in sources for n in getattr(sys.modules[src], "__all__", ())}
        namespace["__all__"] = sorted(n for n in namespace if n in listed)
    if home == "__main__":
        return
    for value in list(namespace.values()):
        if callable(value) and getattr(value, "__module__", None) in sources:
            try:
                value.__module__ = home
            except (AttributeError, TypeError):  # a builtin or C-level object: keep it
                pass


def public_names(namespace: dict[str, Any], submodules: tuple[str, ...] = ()) -> list[str]:
    """A package's ``__all__``: its names without a leading underscore, modules left out but for
    ``submodules``."""
    names = [
        n for n, v in namespace.items() if not n.startswith("_") and not isinstance(v, ModuleType)
    ]
    return [*names, *submodules]
