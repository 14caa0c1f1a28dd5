"""Tessera's ``dist.Mesh``: named axes over a list of devices, with a balanced default shape."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType

from ttjax.errors import MeshShapeError
from ttjax.mesh import available_devices


def balanced_shape(n: int, rank: int) -> tuple[int, ...]:
    """``n`` devices split over ``rank`` axes as evenly as possible, larger axes first.

    >>> balanced_shape(16, 2), balanced_shape(8, 3), balanced_shape(8, 2)
    ((4, 4), (2, 2, 2), (4, 2))
    """
    primes, k, m = [], 2, n
    while m > 1:
        while m % k == 0:
            primes.append(k)
            m //= k
        k += 1
    sizes = [1] * rank
    for p in sorted(primes, reverse=True):
        sizes[sizes.index(min(sizes))] *= p
    return tuple(sorted(sizes, reverse=True))


class Mesh:
    """A logical device mesh with named axes (1-D, 2-D or 3-D), Tessera's ``dist.Mesh``.

    >>> mesh = Mesh(axes=["tp", "dp"], devices=range(16))
    >>> print(mesh.topology)
    tp × dp mesh, 4 × 4
    """

    def __init__(
        self,
        axes: Sequence[str],
        devices: Iterable[int] | None = None,
        shape: Sequence[int] | None = None,
    ) -> None:
        names = (axes,) if isinstance(axes, str) else tuple(axes)
        if not names or not all(isinstance(a, str) for a in names) or len(set(names)) != len(names):
            raise MeshShapeError(
                f"dist.Mesh: axes={list(names)!r} must be distinct axis names.\n"
                'fix: e.g. axes=["tp", "dp"].'
            )
        by_id = {d.id: d for d in available_devices()}
        ids = list(by_id) if devices is None else [int(d) for d in devices]
        missing = [i for i in ids if i not in by_id]
        if missing or len(set(ids)) != len(ids) or not ids:
            raise MeshShapeError(
                f"dist.Mesh: devices={ids[:16]}{'...' if len(ids) > 16 else ''} must be distinct "
                f"existing device ids; {missing[:8] or 'duplicates'} are not. This process has "
                f"{len(by_id)} devices.\nfix: devices=range(n) with n <= {len(by_id)}, or raise "
                "TTJAX_NUM_DEVICES."
            )
        if shape is None:
            dims = balanced_shape(len(ids), len(names))
        else:
            dims = tuple(int(s) for s in shape)
            if len(dims) != len(names) or int(np.prod(dims)) != len(ids) or min(dims) < 1:
                raise MeshShapeError(
                    f"dist.Mesh: shape={dims} does not fit {len(ids)} devices over axes "
                    f"{list(names)}.\nfix: one size per axis with product {len(ids)}, e.g. "
                    f"shape={balanced_shape(len(ids), len(names))} (or shape=None)."
                )
        self.axes = names
        self.shape = dims
        self.device_ids = np.asarray(ids).reshape(dims)
        devs = np.array([by_id[i] for i in ids], dtype=object).reshape(dims)
        self.jax_mesh = jax.sharding.Mesh(devs, names, axis_types=(AxisType.Auto,) * len(names))

    @property
    def topology(self) -> str:
        """``"tp × dp mesh, 4 × 4"``."""
        return f"{' × '.join(self.axes)} mesh, {' × '.join(map(str, self.shape))}"

    @property
    def size(self) -> int:
        return int(self.device_ids.size)

    def axis_size(self, axis: str) -> int:
        """Devices along mesh axis ``axis``."""
        return self.shape[self.axis_index(axis)]

    def axis_index(self, axis: Any) -> int:
        if axis not in self.axes:
            raise MeshShapeError(
                f"dist.Mesh: axis {axis!r} is not an axis of this mesh {list(self.axes)}.\n"
                f"fix: use one of {list(self.axes)}."
            )
        return self.axes.index(axis)

    def __repr__(self) -> str:
        return (
            f"dist.Mesh(axes={list(self.axes)}, shape={self.shape}, "
            f"devices={self.device_ids.ravel().tolist()})"
        )


__all__ = ["Mesh", "balanced_shape"]
