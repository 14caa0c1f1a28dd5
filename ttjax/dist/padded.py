"""Uneven shards as XLA stores them: a dim that does not divide by its mesh axes is split into
blocks of ``ceil(n / k)``, the last block(s) shorter, and each device holds its block padded to
``ceil(n / k)`` (torch-xla's rule; XLA's partitioner pads uneven shards the same way).

A ``jax.Array`` cannot hold uneven shards, so :class:`PaddedArray` keeps the padded global array
(``storage``: every uneven dim rounded up to ``ceil(n / k) * k``, zeros past the end, split
evenly, one padded block per device) and the logical ``shape``. It is a pytree (``storage`` is its
one leaf), so ``jax.jit``, ``jax.grad`` and optax carry it sharded; inside a program
``jnp.asarray(x)`` (or any arithmetic) sees the logical array, which XLA partitions unevenly,
so the padding never reaches a result. The wrapper is :class:`ttjax.padded.PaddedStorage`,
shared with ``ttjax.spmd.XLAShardedTensor``.

>>> W = dist.tensor((100, 18), layout=dist.ShardSpec(("row", "col"), ("tp", "pp")), mesh=mesh)
>>> W.shape, W.storage.shape               # on tp x pp = 6 x 4: blocks of 17 x 5
((100, 18), (102, 20))
"""

from __future__ import annotations

from typing import Any

from ttjax.padded import PaddedStorage, padded_dim, unpad


class PaddedArray(PaddedStorage):
    """A global array of logical ``shape`` whose uneven dims are stored padded (see the module).

    ``storage`` is the padded ``jax.Array`` (or a tracer / ``jax.ShapeDtypeStruct``), laid out
    by ``NamedSharding(mesh, spec)``; ``np.asarray(x)`` and ``x.value`` are the logical array.
    """

    @property
    def shard_shape(self) -> tuple[int, ...]:
        """Each device's block, padded: ``ceil(n / k)`` along every split dim."""
        return tuple(self.sharding.shard_shape(self.padded_shape))

    @property
    def addressable_shards(self) -> Any:
        """The devices' padded blocks (``jax.Shard``\\ s of the storage; padding is zeros)."""
        return self.storage.addressable_shards

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]} as blocks of {self.shard_shape})"


__all__ = ["PaddedArray", "padded_dim", "unpad"]
