"""Uneven shards as XLA stores them: a dim that does not divide by its mesh axes is split into
blocks of ``ceil(n / k)``, the last block(s) shorter, and each device holds its block padded to
``ceil(n / k)`` (torch-xla's rule; XLA's partitioner pads uneven shards the same way).

A ``jax.Array`` cannot hold uneven shards, so :class:`PaddedArray` keeps the padded global array
(``storage``: every uneven dim rounded up to ``ceil(n / k) * k``, zeros past the end, split
evenly, one padded block per device) and the logical ``shape``. It is a pytree (``storage`` is its
one leaf), so ``jax.jit``, ``jax.grad`` and optax carry it sharded; inside a program
``jnp.asarray(x)`` (or any arithmetic) sees the logical array, which XLA partitions unevenly,
so the padding never reaches a result.

>>> W = dist.tensor((100, 18), layout=dist.ShardSpec(("row", "col"), ("tp", "pp")), mesh=mesh)
>>> W.shape, W.storage.shape               # on tp x pp = 6 x 4: blocks of 17 x 5
((100, 18), (102, 20))
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


class PaddedArray:
    """A global array of logical ``shape`` whose uneven dims are stored padded (see the module).

    ``storage`` is the padded ``jax.Array`` (or a tracer / ``jax.ShapeDtypeStruct``), laid out
    by ``NamedSharding(mesh, spec)``; ``np.asarray(x)`` and ``x.value`` are the logical array.
    """

    __array_priority__ = 100

    def __init__(self, storage: Any, shape: Sequence[int], mesh: Any, spec: PartitionSpec) -> None:
        self.storage = storage
        self.shape = tuple(int(s) for s in shape)
        self.mesh = mesh
        self.spec = spec

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
    def shard_shape(self) -> tuple[int, ...]:
        """Each device's block, padded: ``ceil(n / k)`` along every split dim."""
        return tuple(self.sharding.shard_shape(self.padded_shape))

    @property
    def addressable_shards(self) -> Any:
        """The devices' padded blocks (``jax.Shard``\\ s of the storage; padding is zeros)."""
        return self.storage.addressable_shards

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
            f"PaddedArray(shape={self.shape}, dtype={self.dtype}, spec={self.spec}, "
            f"stored {self.padded_shape} as blocks of {self.shard_shape})"
        )


def _binary(op: Any, reflected: bool = False) -> Any:
    def method(self: PaddedArray, other: Any) -> Any:
        other = other.value if isinstance(other, PaddedArray) else other
        return op(other, self.value) if reflected else op(self.value, other)

    return method


for _name, _op in {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": operator.pow,
    "matmul": operator.matmul,
}.items():
    setattr(PaddedArray, f"__{_name}__", _binary(_op))
    setattr(PaddedArray, f"__r{_name}__", _binary(_op, reflected=True))
for _name, _op in {
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}.items():
    setattr(PaddedArray, f"__{_name}__", _binary(_op))

jax.tree_util.register_pytree_node(
    PaddedArray,
    lambda x: ((x.storage,), (x.shape, x.mesh, x.spec)),
    lambda aux, children: PaddedArray(children[0], *aux),
)


__all__ = ["PaddedArray", "padded_dim", "unpad"]
