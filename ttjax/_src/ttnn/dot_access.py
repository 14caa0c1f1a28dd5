"""``ttnn.dot_access``: a dict whose keys read as attributes (model configs such as BERT's and
ViT's ``DotAccessDict(dict(**config.to_dict(), core_grid=...))``).

The implementation of :mod:`ttjax.dot_access`, whose docstring says more.
"""

from __future__ import annotations

from typing import Any

from ttjax._src.ttnn.model_preprocessing import ParameterDict


class DotAccessDict(ParameterDict):
    """TT-NN's ``DotAccessDict``: ``d.key`` reads ``d["key"]``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"DotAccessDict({dict.__repr__(self)})"


def make_dot_access_dict(dictionary: dict[str, Any], *, ignore_types: Any = None) -> Any:
    """``dictionary`` as a :class:`DotAccessDict`, nested dicts too; values of ``ignore_types``
    (and DotAccessDicts) are kept as they are."""
    if isinstance(dictionary, DotAccessDict):
        return dictionary
    if ignore_types is not None and isinstance(dictionary, ignore_types):
        return dictionary
    return DotAccessDict(
        {
            k: make_dot_access_dict(v, ignore_types=ignore_types) if isinstance(v, dict) else v
            for k, v in dictionary.items()
        }
    )


__all__ = ["DotAccessDict", "make_dot_access_dict"]
