"""Shared pieces of the op tests: how a host array is laid over a mesh (drawn by hypothesis),
per-device readback, and a dtype-keyed tolerance table.

Expectations are always built with numpy on each device's shard (``tests/_reference.py``); the
only ttjax calls here are the public ones a user makes (mappers, ``from_torch``,
``get_device_tensors``, ``to_numpy``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
from _reference import concat, coords, shard, shard_1d
from conftest import MESH_SHAPES, SWEEP_SHAPES, mesh_of
from hypothesis import strategies as st

import ttjax as ttnn

F32 = ttnn.float32
BF16 = ttnn.bfloat16

# dtype-keyed tolerances (as in jax's public_test_util): (rtol, atol).
TOL: dict[Any, tuple[float, float]] = {
    ttnn.float32: (1e-5, 1e-6),
    ttnn.bfloat16: (1.6e-2, 1e-2),
}
# Sums of K products: a looser float32 budget.
MATMUL_TOL: dict[Any, tuple[float, float]] = {
    ttnn.float32: (1e-4, 1e-4),
    ttnn.bfloat16: (2e-2, 3e-2),
}


class Layout(NamedTuple):
    """How a host array is distributed over a mesh.

    ``kind``: ``"device"`` (``from_torch(device=mesh)`` with no mapper: replicated),
    ``"replicate"`` (``ReplicateTensorToMesh``), ``"2d"`` (``ShardTensor2dMesh``), ``"config"``
    (``create_mesh_mapper`` with one placement per mesh dim) or ``"1d"`` (``ShardTensorToMesh``:
    one dim split over every device, row-major). ``dims``: the tensor dim each mesh dim shards
    (None replicates); for ``"1d"`` both entries are the one dim.
    """

    kind: str
    dims: tuple[int | None, int | None] = (None, None)

    def pieces(self, mesh_shape: Sequence[int], rank: int) -> list[int]:
        """How many pieces every tensor dim is split into."""
        out = [1] * rank
        if self.kind == "1d":
            out[self.dims[0]] = math.prod(mesh_shape)
        elif self.kind in ("2d", "config"):
            for axis, d in enumerate(self.dims):
                if d is not None:
                    out[d] *= mesh_shape[axis]
        return out

    def global_shape(self, local: Sequence[int], mesh_shape: Sequence[int]) -> tuple[int, ...]:
        return tuple(s * n for s, n in zip(local, self.pieces(mesh_shape, len(local))))

    def mapper(self, mesh: ttnn.MeshDevice) -> Any:
        if self.kind == "device":
            return None
        if self.kind == "replicate":
            return ttnn.ReplicateTensorToMesh(mesh)
        if self.kind == "1d":
            return ttnn.ShardTensorToMesh(mesh, dim=self.dims[0])
        if self.kind == "2d":
            return ttnn.ShardTensor2dMesh(mesh, mesh_shape=tuple(mesh.shape), dims=self.dims)
        placements = [
            ttnn.PlacementReplicate() if d is None else ttnn.PlacementShard(d) for d in self.dims
        ]
        return ttnn.create_mesh_mapper(mesh, ttnn.MeshMapperConfig(placements=placements))

    def split(self, x: np.ndarray, mesh_shape: Sequence[int]) -> dict[tuple[int, ...], np.ndarray]:
        """The numpy reference of every device's shard."""
        if self.kind == "1d":
            return shard_1d(x, mesh_shape, self.dims[0])
        if self.kind in ("2d", "config"):
            return shard(x, mesh_shape, self.dims)
        return shard(x, mesh_shape, (None,) * len(mesh_shape))


REPLICATED = Layout("device")


@st.composite
def layouts(draw: Any, rank: int, dims: Sequence[int] | None = None) -> Layout:
    """Any layout of a rank-``rank`` tensor sharding only tensor dims in ``dims``."""
    allowed = list(range(rank)) if dims is None else [d % rank for d in dims]
    kind = draw(st.sampled_from(["device", "2d", "1d", "config", "replicate"]))
    if kind in ("device", "replicate") or not allowed:
        return Layout(kind)
    if kind == "1d":
        d = draw(st.sampled_from(allowed))
        return Layout("1d", (d, d))
    row = draw(st.sampled_from([None, *allowed]))
    col = draw(st.sampled_from([None, *[d for d in allowed if d != row]]))
    return Layout(kind, (row, col))


mesh_shapes = st.sampled_from(SWEEP_SHAPES)
seeds = st.integers(0, 2**16)


def rounded(x: np.ndarray, dtype: Any) -> np.ndarray:
    """``x`` as the device stores it in ``dtype`` (as float64 for the reference)."""
    if dtype == ttnn.bfloat16:
        return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
    return np.asarray(x).astype(np.float64) if np.asarray(x).dtype.kind == "f" else np.asarray(x)


def put(
    x: np.ndarray,
    mesh_shape: Sequence[int],
    layout: Layout = REPLICATED,
    dtype: Any = None,
    layout_kind: Any = ttnn.TILE_LAYOUT,
) -> tuple[ttnn.Tensor, dict[tuple[int, ...], np.ndarray]]:
    """Place global host array ``x`` on the shared mesh; return the tensor and the numpy shards
    (values rounded to ``dtype``, float64) every device should hold."""
    mesh = mesh_of(tuple(mesh_shape))
    t = ttnn.from_torch(
        x, dtype=dtype, layout=layout_kind, device=mesh, mesh_mapper=layout.mapper(mesh)
    )
    dt = dtype if dtype is not None else t.dtype
    return t, layout.split(rounded(x, dt), mesh_shape)


def put_local(
    rng: np.random.Generator,
    local: Sequence[int],
    mesh_shape: Sequence[int],
    layout: Layout = REPLICATED,
    dtype: Any = None,
    low: float = -2.0,
    high: float = 2.0,
) -> tuple[ttnn.Tensor, dict[tuple[int, ...], np.ndarray]]:
    """Random values whose *per-device* shape is ``local`` under ``layout``."""
    x = rng.uniform(low, high, layout.global_shape(local, mesh_shape)).astype(np.float32)
    return put(x, mesh_shape, layout, dtype)


def device_arrays(t: ttnn.Tensor) -> dict[tuple[int, ...], np.ndarray]:
    """Every device's local tensor, read one device at a time (row-major coordinates)."""
    mesh_shape = tuple(t.mesh_device.shape)
    shards = ttnn.get_device_tensors(t)
    assert len(shards) == math.prod(mesh_shape)
    return {c: ttnn.to_numpy(s) for c, s in zip(coords(mesh_shape), shards)}


def assert_composes(t: ttnn.Tensor, got: dict[tuple[int, ...], np.ndarray]) -> None:
    """Reading ``t`` back through a mesh composer (the global array) gives the same per-device
    tensors as reading every device: a placement that claims Replicate for per-device data that
    differ would fail here."""
    mesh = t.mesh_device
    mesh_shape = tuple(mesh.shape)
    rank = len(t.shape)
    if rank == 0:
        return
    shards = [got[c] for c in coords(mesh_shape)]
    if rank >= 2:
        composer = ttnn.ConcatMesh2dToTensor(mesh, mesh_shape, dims=(0, 1))
        want = concat(shards, mesh_shape, (0, 1))
    else:
        composer = ttnn.ConcatMeshToTensor(mesh, dim=0)
        want = concat(shards, (len(shards),), (0,))
    np.testing.assert_array_equal(ttnn.to_numpy(t, mesh_composer=composer), want)


def check(
    t: ttnn.Tensor,
    want: dict[tuple[int, ...], np.ndarray],
    dtype: Any = None,
    tol: dict[Any, tuple[float, float]] | tuple[float, float] = TOL,
    exact: bool = False,
) -> None:
    """Per-device results of ``t`` equal ``want`` (exactly, or within the dtype's tolerance)."""
    got = device_arrays(t)
    assert got.keys() == want.keys()
    assert_composes(t, got)
    for c in got:
        g, w = got[c], want[c]
        assert tuple(t.shape) == tuple(w.shape), (c, t.shape, w.shape)
        assert g.shape == w.shape, (c, g.shape, w.shape)
        if exact:
            np.testing.assert_array_equal(g.astype(np.float64), w, err_msg=f"device {c}")
            continue
        rtol, atol = tol if isinstance(tol, tuple) else tol[dtype or t.dtype]
        np.testing.assert_allclose(
            g.astype(np.float64), w, rtol=rtol, atol=atol, err_msg=f"device {c}"
        )


def reference(fn: Callable[..., np.ndarray], *shards: dict) -> dict[tuple[int, ...], np.ndarray]:
    """``fn`` on every device's shards (like ``_reference.per_device``), in float64."""
    return {c: np.asarray(fn(*[s[c] for s in shards])) for c in shards[0]}


__all__ = [
    "BF16",
    "F32",
    "MATMUL_TOL",
    "MESH_SHAPES",
    "REPLICATED",
    "TOL",
    "Layout",
    "assert_composes",
    "check",
    "device_arrays",
    "layouts",
    "mesh_of",
    "mesh_shapes",
    "put",
    "put_local",
    "reference",
    "rounded",
    "seeds",
]


def unnormalized_blocks(t: ttnn.Tensor, rng: np.random.Generator) -> ttnn.Tensor:
    """``t`` (a block-float device tensor) now holding random blocks that are not normalized
    (bfloat8_b mantissas below 64, bfloat4_b nibbles below 4, exponents 120-135): values that a
    re-encode would store with other bits, so a test sees whether an op moved blocks as stored."""
    import jax

    m, e = t._data
    if t.dtype is ttnn.bfloat8_b:
        mant = rng.integers(-63, 64, m.shape).astype(np.int8)
    else:
        mant = rng.integers(0, 256, m.shape).astype(np.uint8) & 0x33
    exp = rng.integers(120, 136, e.shape).astype(np.uint8)
    t._data = type(t._data)(jax.device_put(mant, m.sharding), jax.device_put(exp, e.sharding))
    return t


def stored_blocks(t: ttnn.Tensor) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each device's stored (mantissas, exponents) of a block-float tensor, in mesh order."""
    devices = list(t.mesh_device.jax_mesh.devices.flat)

    def pieces(a: Any) -> list[np.ndarray]:
        by_device = {s.device: np.asarray(s.data) for s in a.addressable_shards}
        return [by_device[d] for d in devices]

    m, e = t._data
    return list(zip(pieces(m), pieces(e)))
