"""Uneven shards as XLA stores them: a dim of ``n`` split ``k`` ways is stored padded to
``ceil(n / k) * k`` (zeros past the end) and split evenly, one padded block per device
(torch-xla's rule; XLA's partitioner pads uneven shards the same way).

A ``jax.Array`` cannot hold uneven shards, so :class:`PaddedStorage` keeps the padded global
array (``storage``) and the logical ``shape``. It is a pytree (``storage`` is its one leaf), so
``jax.jit``, ``jax.grad`` and optax carry it sharded; inside a program it reads as the logical
array (``x @ w``, ``jnp.asarray(x)``), which XLA partitions unevenly, so the padding never
reaches a result. ``ttjax.dist.PaddedArray`` and ``ttjax.spmd.XLAShardedTensor`` are its two
frontends' names.

>>> padded_dim(100, 6), blocks(10, 4)
(102, [slice(0, 3, 1), slice(3, 6, 1), slice(6, 9, 1), slice(9, 10, 1)])
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec


def padded_dim(n: int, k: int) -> int:
    """``n`` rounded up to a multiple of ``k``: the dim XLA stores for ``n`` split ``k`` ways."""
    return -(-n // k) * k


def blocks(n: int, k: int) -> list[slice]:
    """torch-xla's (and XLA's) split of a dim of ``n`` over ``k`` devices: ``ceil(n / k)`` each,
    the last blocks shorter or empty."""
    per = -(-n // k)
    return [slice(min(i * per, n), min((i + 1) * per, n), 1) for i in range(k)]


def _manual_or_missing(spec: PartitionSpec) -> bool:
    """Whether the current (abstract) mesh cannot take a constraint by ``spec``."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return False
    names = {a for e in spec if e is not None for a in ((e,) if isinstance(e, str) else e)}
    manual = set(getattr(mesh, "manual_axes", ()))
    return any(a not in mesh.axis_names or a in manual for a in names)


def unpad(storage: Any, shape: Sequence[int], mesh: Any, spec: PartitionSpec) -> Any:
    """The logical array of padded ``storage``; inside a program constrained to the uneven
    ``NamedSharding(mesh, spec)``, so XLA keeps it split (its padded blocks are the storage's)."""
    shape = tuple(shape)
    if tuple(np.shape(storage)) == shape:
        return storage
    view = storage[tuple(slice(0, n) for n in shape)]
    if isinstance(view, jax.core.Tracer) and not _manual_or_missing(spec):
        ctx = jax.sharding.get_abstract_mesh()
        try:  # staged (jit): XLA splits it unevenly; eager autodiff: it stays as is
            view = jax.lax.with_sharding_constraint(
                view, NamedSharding(mesh if ctx.empty else ctx, spec)
            )
        except ValueError:
            pass
    return view


class PaddedStorage:
    """A global array of logical ``shape`` whose uneven dims are stored padded (see the module).

    ``storage`` is the padded ``jax.Array`` (or a tracer / ``jax.ShapeDtypeStruct``), laid out
    by ``NamedSharding(mesh, spec)``; ``np.asarray(x)`` and ``x.value`` are the logical array,
    and every other attribute (``.T``, ``.sum``, ``.astype``, operators) is the logical array's.
    Each subclass is a pytree of its own.
    """

    __array_priority__ = 100

    def __init__(self, storage: Any, shape: Sequence[int], mesh: Any, spec: PartitionSpec) -> None:
        self.storage = storage
        self.shape = tuple(int(s) for s in shape)
        self.mesh = mesh
        self.spec = spec

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register(cls)

    @property
    def dtype(self) -> Any:
        return self.storage.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def sharding(self) -> NamedSharding:
        """The layout: ``spec`` over ``mesh`` (the storage's even sharding, the logical array's
        uneven one)."""
        return NamedSharding(self.mesh, self.spec)

    @property
    def padded_shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.storage))

    @property
    def value(self) -> Any:
        """The logical array (outside a program a replicated copy: a jax.Array cannot be
        uneven)."""
        return unpad(self.storage, self.shape, self.mesh, self.spec)

    def __jax_array__(self) -> Any:
        return self.value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = np.asarray(self.storage)[tuple(slice(0, n) for n in self.shape)]
        return host if dtype is None else host.astype(dtype)

    def __len__(self) -> int:
        return self.shape[0]

    def __neg__(self) -> Any:
        return -self.value

    def __getitem__(self, key: Any) -> Any:
        return self.value[key]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("storage", "shape", "mesh", "spec"):
            raise AttributeError(name)
        return getattr(self.value, name)  # .T, .sum, .reshape, .astype ... of the logical array

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype}, spec={self.spec}, "
            f"stored {self.padded_shape})"
        )


def _binary(op: Any, reflected: bool = False) -> Any:
    def method(self: PaddedStorage, other: Any) -> Any:
        other = other.value if isinstance(other, PaddedStorage) else other
        return op(other, self.value) if reflected else op(self.value, other)

    return method


_ARITHMETIC = (
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
    operator.pow, operator.matmul,
)  # fmt: skip
for _op in _ARITHMETIC:
    setattr(PaddedStorage, f"__{_op.__name__}__", _binary(_op))
    setattr(PaddedStorage, f"__r{_op.__name__}__", _binary(_op, reflected=True))
for _op in (operator.lt, operator.le, operator.gt, operator.ge):
    setattr(PaddedStorage, f"__{_op.__name__}__", _binary(_op))


def _register(cls: type[PaddedStorage]) -> None:
    """``cls`` as a pytree whose one leaf is the storage (layout kept as static aux data)."""
    jax.tree_util.register_pytree_node(
        cls,
        lambda x: ((x.storage,), (x.shape, x.mesh, x.spec)),
        lambda aux, children: cls(children[0], *aux),
    )


_register(PaddedStorage)

__all__ = ["PaddedStorage", "blocks", "padded_dim", "unpad"]
