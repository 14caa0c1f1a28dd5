"""Tessera's ``ShardSpec`` and ``dist.tensor``: which tensor dim goes over which mesh axis.

>>> W = dist.tensor((1024, 1024), mesh=mesh, dtype="bf16",
...                 layout=dist.ShardSpec(partition=("row", "col"), mesh_axes=("tp", "dp")))

``"row"`` and ``"col"`` are a matrix's last two dims (dims -2 and -1); an int names any dim. A
mesh-axis entry is an axis name, a tuple of names (major first) or None (replicated). A dim that
does not divide by its axes is split unevenly, as XLA and torch-xla split it (blocks of
``ceil(n / k)``, the last ones padded): ``dist.tensor`` returns a ``PaddedArray`` then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from ttjax.dist.mesh import Mesh
from ttjax.dist.padded import PaddedArray, padded_dim
from ttjax.errors import ShardingError, UnsupportedDTypeError

DTYPES: dict[str, Any] = {
    "bf16": jnp.bfloat16,
    "bfloat16": jnp.bfloat16,
    "fp16": jnp.float16,
    "f16": jnp.float16,
    "float16": jnp.float16,
    "fp32": jnp.float32,
    "f32": jnp.float32,
    "float32": jnp.float32,
    "int32": jnp.int32,
    "i32": jnp.int32,
}


def as_dtype(dtype: Any) -> Any:
    """``"bf16"``, ``"fp32"``, ... or a numpy/JAX dtype, as a JAX dtype."""
    if isinstance(dtype, str):
        if dtype.lower() not in DTYPES:
            raise UnsupportedDTypeError(
                f"dist: dtype={dtype!r} is unknown.\nfix: one of {sorted(DTYPES)}."
            )
        return DTYPES[dtype.lower()]
    return jnp.dtype(dtype)


@dataclass(frozen=True)
class ShardSpec:
    """Pairs tensor dims (``partition``) with mesh axes (``mesh_axes``), entry by entry.

    >>> ShardSpec(partition=("row", "col"), mesh_axes=("tp", "dp"))   # rows over tp, cols over dp
    >>> ShardSpec(partition=(0,), mesh_axes=("dp",))                   # a batch split over dp
    """

    partition: tuple[Any, ...] = ()
    mesh_axes: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        part = tuple(self.partition)
        axes = tuple(self.mesh_axes)
        object.__setattr__(self, "partition", part)
        object.__setattr__(self, "mesh_axes", axes)
        if len(part) != len(axes):
            raise ShardingError(
                f"ShardSpec: partition={part!r} and mesh_axes={axes!r} differ in length.\n"
                "fix: one mesh axis (or None) per partitioned dim."
            )
        for p in part:
            if p not in ("row", "col") and not (isinstance(p, int) and not isinstance(p, bool)):
                raise ShardingError(
                    f"ShardSpec: partition entry {p!r} is not 'row', 'col' or a dim index.\n"
                    "fix: e.g. partition=('row', 'col') or partition=(0,)."
                )

    def _dim(self, p: Any, rank: int) -> int:
        d = {"row": -2, "col": -1}.get(p, p)
        return d + rank if d < 0 else d

    def partition_spec(
        self, mesh: Mesh, shape: Sequence[int], divisible: bool = True
    ) -> PartitionSpec:
        """The ``PartitionSpec`` for a tensor of ``shape`` on ``mesh``; checks every entry.

        Raises ``ShardingError`` for a spec longer than the rank, an axis not in the mesh, a dim
        named twice or a mesh axis used twice, and a dim that does not divide by its axes' size.
        """
        rank = len(shape)
        if len(self.partition) > rank:
            raise ShardingError(
                f"ShardSpec: partition {self.partition!r} names {len(self.partition)} dims but "
                f"the tensor has rank {rank} (shape {tuple(shape)}).\nfix: partition at most "
                f"{rank} dim(s) of this tensor."
            )
        per_dim: list[tuple[str, ...]] = [()] * rank
        used: set[str] = set()
        for p, entry in zip(self.partition, self.mesh_axes):
            d = self._dim(p, rank)
            if not 0 <= d < rank:
                raise ShardingError(
                    f"ShardSpec: partition entry {p!r} is out of range for rank {rank} (shape "
                    f"{tuple(shape)}).\nfix: use a dim in {-rank}..{rank - 1}."
                )
            names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
            for a in names:
                if a not in mesh.axes:
                    raise ShardingError(
                        f"ShardSpec: mesh axis {a!r} is not in the mesh's axes {list(mesh.axes)}."
                        f"\nfix: use one of {list(mesh.axes)} (or None to replicate)."
                    )
                if a in used:
                    raise ShardingError(
                        f"ShardSpec: mesh axis {a!r} is used twice in {self!r}.\n"
                        "fix: shard over each mesh axis at most once."
                    )
                used.add(a)
            if per_dim[d]:
                raise ShardingError(
                    f"ShardSpec: dim {d} is partitioned twice in {self!r}.\n"
                    "fix: give a tuple of mesh axes for one dim instead, e.g. ('tp', 'dp')."
                )
            n = int(np.prod([mesh.axis_size(a) for a in names], dtype=np.int64))
            if divisible and shape[d] % n:
                raise ShardingError(
                    f"ShardSpec: dim {d} of shape {tuple(shape)} has size {shape[d]}, which does "
                    f"not divide by the size {n} of mesh axes {names}, and a per-device region "
                    f"(dist.local) would see the padding of the last blocks.\nfix: make dim {d} "
                    f"a multiple of {n} (pad it to {padded_dim(shape[d], n)}), replicate it (mesh "
                    "axis None), or use the tensor in the global view (jax.jit, "
                    "graph.training_step), where XLA splits it unevenly."
                )
            per_dim[d] = names
        return PartitionSpec(*(None if not a else a[0] if len(a) == 1 else a for a in per_dim))

    def padded_shape(self, mesh: Mesh, shape: Sequence[int]) -> tuple[int, ...]:
        """``shape`` with every split dim rounded up to a multiple of its mesh axes' size: the
        global shape XLA stores (each device's block ``ceil(n / k)``, padded on the last ones)."""
        spec = self.partition_spec(mesh, shape, divisible=False)
        return tuple(
            padded_dim(int(n), _ways(mesh, entry)) for n, entry in zip(shape, _entries(spec, shape))
        )

    def __repr__(self) -> str:
        return f"ShardSpec(partition={self.partition!r}, mesh_axes={self.mesh_axes!r})"


REPLICATED = ShardSpec()


def _entries(spec: PartitionSpec, shape: Sequence[int]) -> list[Any]:
    return [*spec, *[None] * (len(shape) - len(spec))]


def _ways(mesh: Mesh, entry: Any) -> int:
    names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
    return int(np.prod([mesh.axis_size(a) for a in names], dtype=np.int64))


def to_partition_spec(
    layout: Any, mesh: Mesh, shape: Sequence[int], divisible: bool = True
) -> PartitionSpec:
    """A ShardSpec, PartitionSpec or None (replicated) as a checked ``PartitionSpec``
    (``divisible=False`` for per-device shapes, which always split)."""
    if layout is None:
        return PartitionSpec()
    if isinstance(layout, ShardSpec):
        return layout.partition_spec(mesh, shape, divisible)
    if isinstance(layout, PartitionSpec):
        return layout
    raise ShardingError(
        f"dist: layout={layout!r} is not a ShardSpec, PartitionSpec or None.\n"
        'fix: dist.ShardSpec(partition=("row", "col"), mesh_axes=("tp", "dp")).'
    )


def tensor(
    shape: Sequence[int],
    layout: ShardSpec | PartitionSpec | None = None,
    mesh: Mesh | None = None,
    dtype: Any = "bf16",
    init: Any = None,
    abstract: bool = False,
) -> jax.Array | PaddedArray | jax.ShapeDtypeStruct:
    """A global array of ``shape`` laid out on ``mesh`` by ``layout`` (Tessera's ``dist.tensor``).

    ``init``: None for zeros (made on the devices, no host copy), a host array of ``shape``, or a
    callable ``init(shape, dtype)`` returning one. A dim that does not divide by its mesh axes is
    split unevenly as XLA and torch-xla do (blocks of ``ceil(n / k)``, the last ones padded with
    zeros): the result is then a :class:`~ttjax.dist.padded.PaddedArray` of logical ``shape``.
    ``abstract=True`` allocates nothing: a ``jax.ShapeDtypeStruct`` with the sharding (in a
    ``PaddedArray`` when uneven), for ``ttjax.inspect`` at full size (the seed's 100 000 x
    100 000 ``W``).
    """
    if not isinstance(mesh, Mesh):
        raise ShardingError(
            f"dist.tensor: mesh={mesh!r} is not a dist.Mesh.\n"
            'fix: mesh=dist.Mesh(axes=["tp", "dp"], devices=range(8)).'
        )
    shape = tuple(int(s) for s in shape)
    dt = as_dtype(dtype)
    spec = to_partition_spec(layout, mesh, shape, divisible=False)
    padded = tuple(padded_dim(n, _ways(mesh, e)) for n, e in zip(shape, _entries(spec, shape)))
    sharding = NamedSharding(mesh.jax_mesh, spec)
    if abstract:
        storage: Any = jax.ShapeDtypeStruct(padded, dt, sharding=sharding)
    elif init is None:
        storage = jax.jit(lambda: jnp.zeros(padded, dt), out_shardings=sharding)()
    else:
        host = init(shape, dt) if isinstance(init, Callable) else init  # type: ignore[arg-type]
        host = np.asarray(host)
        if host.shape != shape:
            raise ShardingError(
                f"dist.tensor: init has shape {host.shape}, but shape={shape}.\n"
                "fix: pass an array (or an init that returns one) of exactly that shape."
            )
        host = host.astype(dt)
        if padded != shape:
            host = np.pad(host, [(0, p - n) for n, p in zip(shape, padded)])
        storage = jax.device_put(host, sharding)
    if padded == shape:
        return storage
    return PaddedArray(storage, shape, mesh.jax_mesh, spec)


__all__ = [
    "DTYPES",
    "REPLICATED",
    "ShardSpec",
    "as_dtype",
    "tensor",
    "to_partition_spec",
]
