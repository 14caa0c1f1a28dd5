"""Tessera's distributed names on JAX: named-axis meshes, shard specs, per-device regions and
collectives by axis name.

>>> from ttjax import dist
>>> from ttjax.dist import graph, nn, op, schedule
>>> mesh = dist.Mesh(axes=["tp", "dp"], devices=range(16))
>>> print(mesh.topology)
tp × dp mesh, 4 × 4
>>> W = dist.tensor((1024, 1024), mesh=mesh, dtype="bf16",
...                 layout=dist.ShardSpec(partition=("row", "col"), mesh_axes=("tp", "dp")))
>>> @dist.local(mesh=mesh)
... def f(W_local, X_local):
...     return dist.all_reduce(op.matmul(W_local, X_local), axis="dp")

Training in the global view (seed 003, sections 7.6-7.7): ``graph.training_step`` /
``graph.backward`` over a module whose weights carry ``ShardSpec`` layouts (``nn.Transformer`` on a
``tp x pp x dp`` mesh), driven by ``schedule.all_reduce_overlap`` and
``schedule.pipeline_microbatches``; ``all_reduce(..., local=...)`` is hierarchical.

A dim that does not divide by its mesh axes is split unevenly, as XLA and torch-xla do: blocks of
``ceil(n / k)``, the last ones padded (``dist.PaddedArray``; ``ttjax.dist.padded``).

Everything lowers to ``jax.sharding`` (``NamedSharding``, ``shard_map``, ``jax.lax``
collectives); sums follow ``ttjax.numerics``.
"""

from ttjax.dist import graph, nn, op, schedule
from ttjax.dist.layout import REPLICATED, ShardSpec, as_dtype, tensor
from ttjax.dist.logical import plan_of, shard_spec
from ttjax.dist.mesh import Mesh, balanced_shape
from ttjax.dist.padded import PaddedArray as PaddedArray
from ttjax.dist.region import (
    all_gather,
    all_reduce,
    axis_index,
    local,
    per_replica,
    recv,
    reduce_scatter,
    send,
)

__all__ = [
    "REPLICATED",
    "Mesh",
    "PaddedArray",
    "ShardSpec",
    "all_gather",
    "all_reduce",
    "as_dtype",
    "axis_index",
    "balanced_shape",
    "graph",
    "local",
    "nn",
    "op",
    "per_replica",
    "plan_of",
    "recv",
    "reduce_scatter",
    "schedule",
    "send",
    "shard_spec",
    "tensor",
]
