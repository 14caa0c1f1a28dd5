"""Uneven shards as XLA stores them: a dim of ``n`` split ``k`` ways is stored padded to
``ceil(n / k) * k`` (zeros past the end) and split evenly, one padded block per device
(torch-xla's rule; XLA's partitioner pads uneven shards the same way).

:class:`PaddedStorage` keeps the padded global array (``storage``) and the logical ``shape``; a
pytree that reads as the logical array inside a program, where XLA partitions it unevenly.
``ttjax.dist.PaddedArray`` and ``ttjax.spmd.XLAShardedTensor`` are its two frontends' names.

>>> padded_dim(100, 6), blocks(10, 4)
(102, [slice(0, 3, 1), slice(3, 6, 1), slice(6, 9, 1), slice(9, 10, 1)])

Public names only; the implementation is :mod:`ttjax._src.core.padded`.
"""

from ttjax._src.core.padded import (
    PaddedStorage as PaddedStorage,
    blocks as blocks,
    padded_dim as padded_dim,
    unpad as unpad,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.padded")
