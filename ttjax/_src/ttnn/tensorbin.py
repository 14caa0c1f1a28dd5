"""Host data onto a mesh one device block at a time, and the tensor cache's files.

``place`` puts a tensor's distinct device blocks on their devices (a replicated block once,
then copied device to device), so converting a weight never holds more than one block beside
the result. The cache files (``as_tensor(cache_file_name=...)``, ``dump_tensor``) are numpy
.npz archives of one of two kinds: a host tensor's global data (``data``), or a device tensor's
distinct blocks as its devices store them (``b{i}_{j}``: block ``i``'s storage array ``j``,
a block float's mantissas then exponents), which load straight onto the devices, block by block.
"""

from __future__ import annotations

import json
import os
import pathlib
import zipfile
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_dtypes
import numpy as np
from jax.sharding import NamedSharding

from ttjax._src.core import blockfloat as _blockfloat, specs as _specs
from ttjax._src.core.enums import DataType, Layout, StorageType
from ttjax._src.core.hardware import DRAM_MEMORY_CONFIG, validate_memory_config
from ttjax._src.core.mesh import MeshDevice, MeshShape, open_mesh_of_shape
from ttjax._src.core.placements import Placement, PlacementLocal, PlacementReplicate, PlacementShard
from ttjax._src.core.tensor import Tensor, TensorSpec, tile_padded
from ttjax._src.ttnn.distribute import device_block

BlockKey = tuple[Any, ...]
_BF16 = np.dtype(ml_dtypes.bfloat16)

# ---------------------------------------------------------------------------------------------
# Device blocks
# ---------------------------------------------------------------------------------------------


def blocks_of(
    placements: tuple[Placement, ...], mesh_shape: tuple[int, ...], local: tuple[int, ...]
) -> dict[BlockKey, list[tuple[int, ...]]]:
    """Each distinct device block of a global array (a hashable key, see :func:`index_of`) and
    the mesh coordinates that hold it (several where it is replicated), in row-major order of
    their first holder."""
    out: dict[BlockKey, list[tuple[int, ...]]] = {}
    for c in np.ndindex(*mesh_shape):
        idx = device_block(placements, mesh_shape, local, c)
        key = tuple((i.start, i.stop) if isinstance(i, slice) else i for i in idx)
        out.setdefault(key, []).append(c)
    return out


def index_of(key: BlockKey) -> tuple[Any, ...]:
    """The numpy index of the block ``key`` stands for."""
    return tuple(slice(*k) if isinstance(k, tuple) else k for k in key)


def storage_shapes(
    dtype: DataType, local: tuple[int, ...], placements: tuple[Placement, ...]
) -> list[tuple[int, ...]]:
    """The shapes of one device's storage arrays (a block float's mantissas and exponents),
    with a leading 1 per hidden ``PlacementLocal`` axis."""
    lead = (1,) * len(_specs.local_axes(placements))
    shapes = _blockfloat.storage_shapes(dtype, local) if dtype.is_block_float else (local,)
    return [lead + tuple(s) for s in shapes]


def _storage_dtypes(dtype: DataType) -> tuple[np.dtype, ...]:
    if dtype.is_block_float:
        return _blockfloat.storage_dtypes(dtype)
    return (np.dtype(dtype.numpy_dtype),)


def place(
    mesh: MeshDevice,
    placements: tuple[Placement, ...],
    dtype: DataType,
    layout: Layout,
    local_shape: tuple[int, ...],
    memory_config: Any,
    leaves_of: Callable[[int, BlockKey], Sequence[np.ndarray]],
) -> Tensor:
    """A device tensor whose block ``i`` (key ``key``) has the storage arrays
    ``leaves_of(i, key)``: each is copied to the block's first device of this process, then
    device to device to the others (each device owns its buffer, as on hardware), and dropped
    before the next block is made."""
    mesh._check_open()
    memcfg = DRAM_MEMORY_CONFIG if memory_config is None else memory_config
    tile = layout is Layout.TILE or dtype.is_block_float
    validate_memory_config(
        "from_torch: memory_config",
        memcfg,
        tile_padded(local_shape) if tile else local_shape,
        tile,
    )
    mesh_shape = tuple(mesh.shape)
    shapes = storage_shapes(dtype, local_shape, placements)
    here = jax.process_index()
    per_leaf: list[dict[tuple[int, ...], jax.Array]] = [{} for _ in shapes]
    for i, (key, coords) in enumerate(blocks_of(placements, mesh_shape, local_shape).items()):
        devices = [(c, mesh.devices[c]) for c in coords if mesh.devices[c].process_index == here]
        if not devices:
            continue
        leaves = leaves_of(i, key)
        for leaf, shape, put in zip(leaves, shapes, per_leaf):
            (c0, dev0), *rest = devices
            put[c0] = jax.device_put(np.reshape(leaf, shape), dev0)
            for c, dev in rest:
                put[c] = jax.device_put(put[c0], dev)
            jax.block_until_ready([put[c] for c, _ in devices])
        del leaves
    n_lead = len(_specs.local_axes(placements))
    arrays = []
    for shape, put in zip(shapes, per_leaf):
        stored = shape[n_lead:]
        spec = _specs.partition_spec(placements, mesh.axis_names, len(stored))
        arrays.append(
            jax.make_array_from_single_device_arrays(
                _specs.global_shape(stored, placements, mesh_shape),
                NamedSharding(mesh.jax_mesh, spec),
                [put[c] for c in np.ndindex(*mesh_shape) if c in put],
            )
        )
    data: Any = _blockfloat.BlockFloatData(*arrays) if dtype.is_block_float else arrays[0]
    out_layout = Layout.TILE if dtype.is_block_float else layout
    return Tensor(
        data,
        TensorSpec(mesh, placements, dtype, out_layout, local_shape, StorageType.DEVICE, memcfg),
    )


# ---------------------------------------------------------------------------------------------
# Cache files
# ---------------------------------------------------------------------------------------------


def _placement_code(p: Placement) -> list[Any]:
    if isinstance(p, PlacementShard):
        return ["shard", p.dim]
    return ["local"] if isinstance(p, PlacementLocal) else ["replicate"]


def _placement_from(code: Sequence[Any]) -> Placement:
    if code[0] == "shard":
        return PlacementShard(int(code[1]))
    return PlacementLocal() if code[0] == "local" else PlacementReplicate()


def _meta(spec: TensorSpec) -> dict[str, Any]:
    mesh = spec.mesh
    block = None
    if mesh is not None and mesh._offset is not None and mesh._parent is not None:
        # on some devices of a mesh only (fewer chunks than devices): stored with that mesh's
        # shape and where the block lies in it
        block = {"offset": list(mesh._offset), "shape": list(mesh.shape)}
        mesh = mesh._parent
    return {
        "mesh_shape": list(mesh.shape) if mesh is not None else None,
        "block": block,
        "placements": [_placement_code(p) for p in spec.placements],
        "dtype": spec.dtype.name,
        "layout": spec.layout.name,
        "shape": list(spec.shape),
    }


def _storable(arr: np.ndarray) -> np.ndarray:
    return arr.view(np.uint16) if arr.dtype == _BF16 else arr


def dump_host(path: pathlib.Path, host: Tensor) -> None:
    """Store a host tensor (its global data and spec) at ``path``."""
    meta = _meta(host.spec)
    data = _storable(np.asarray(host._data))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, data=data, meta=np.array(json.dumps(meta)))
    os.replace(tmp, path)


def dump_blocks(path: pathlib.Path, t: Tensor) -> bool:
    """Store a device tensor's distinct device blocks as stored, one at a time; False (nothing
    written) when some of its devices belong to other processes."""
    spec = t.spec
    mesh = spec.mesh
    leaves = list(t._data) if spec.dtype.is_block_float else [t._data]
    if mesh is None or not all(
        isinstance(leaf, jax.Array) and leaf.is_fully_addressable for leaf in leaves
    ):
        return False
    per_dev = [{s.device: s.data for s in leaf.addressable_shards} for leaf in leaves]
    blocks = blocks_of(spec.placements, tuple(mesh.shape), spec.shape)
    meta = dict(_meta(spec), format="blocks", count=len(blocks))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for i, coords in enumerate(blocks.values()):
            dev = mesh.devices[coords[0]]
            for j, here in enumerate(per_dev):
                with zf.open(f"b{i}_{j}.npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array(f, _storable(np.asarray(here[dev])))
        with zf.open("meta.npy", "w") as f:
            np.lib.format.write_array(f, np.array(json.dumps(meta)))
    os.replace(tmp, path)
    return True


class _Unreadable(Exception):
    """A cache file that does not hold what its meta says (the caller converts again)."""


def _mesh_for(meta: dict[str, Any], mesh: MeshDevice | None) -> MeshDevice | None:
    """The mesh (or block of it) a stored tensor belongs to on ``mesh``; raises
    :class:`_Unreadable` when it was written for another mesh shape."""
    stored = meta["mesh_shape"]
    if stored is not None and mesh is None:
        # TT-NN's load_tensor without a device gives a host tensor that keeps its shards and
        # their distribution; here that distribution is over the open mesh of the stored shape
        mesh = open_mesh_of_shape(MeshShape(*stored))
    if stored is None:
        return None
    if mesh is None or stored != list(mesh.shape):
        raise _Unreadable
    block = meta.get("block")
    if block is None:
        return mesh
    full = tuple(mesh.shape)
    try:
        offset = tuple(int(o) for o in block["offset"])
        size = tuple(int(n) for n in block["shape"])
    except (KeyError, TypeError, ValueError) as e:
        raise _Unreadable from e
    if len(offset) != len(full) or len(size) != len(full):
        raise _Unreadable
    if any(o < 0 or n < 1 or o + n > m for o, n, m in zip(offset, size, full)):
        raise _Unreadable
    return mesh._block_view(offset, size)


def _stored_leaves(
    z: Any, i: int, dtype: DataType, shapes: list[tuple[int, ...]]
) -> list[np.ndarray]:
    out = []
    for j, (shape, want) in enumerate(zip(shapes, _storage_dtypes(dtype))):
        arr = z[f"b{i}_{j}"]
        if want == _BF16 and arr.dtype == np.uint16:
            arr = arr.view(_BF16)
        if arr.dtype != want or arr.shape != shape:
            raise _Unreadable
        out.append(arr)
    return out


def read_onto(path: pathlib.Path, device: MeshDevice, memory_config: Any) -> Tensor | None:
    """The device tensor a blocks file holds, placed block by block on ``device``; None when
    ``path`` is no blocks file for a mesh of ``device``'s shape."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("format") != "blocks":
                return None
            mesh = _mesh_for(meta, device)
            dt, lay = DataType[meta["dtype"]], Layout[meta["layout"]]
            placements = tuple(_placement_from(c) for c in meta["placements"])
            shape = tuple(int(d) for d in meta["shape"])
            if mesh is None:
                return None
            if len(blocks_of(placements, tuple(mesh.shape), shape)) != meta["count"]:
                return None
            shapes = storage_shapes(dt, shape, placements)
            return place(
                mesh, placements, dt, lay, shape, memory_config,
                lambda i, _key: _stored_leaves(z, i, dt, shapes),
            )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, _Unreadable):
        return None


def read_host(path: pathlib.Path, mesh: MeshDevice | None) -> Tensor | None:
    """The host tensor stored at ``path`` (either kind of file), or None when it cannot be read
    or was written for another mesh shape (the caller then converts and rewrites it)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            dt, lay = DataType[meta["dtype"]], Layout[meta["layout"]]
            shape = tuple(int(d) for d in meta["shape"])
            mesh = _mesh_for(meta, mesh)
            placements = tuple(_placement_from(c) for c in meta["placements"])
            if meta.get("format") == "blocks":
                if mesh is None:
                    return None
                data = _host_from_blocks(z, meta["count"], dt, shape, placements, mesh)
            else:
                data = z["data"]
                if np.dtype(dt.numpy_dtype) == _BF16:
                    data = data.view(_BF16)
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, _Unreadable):
        return None
    if mesh is None:
        return Tensor(data, TensorSpec(None, (), dt, lay, shape, StorageType.HOST))
    return Tensor(data, TensorSpec(mesh, placements, dt, lay, shape, StorageType.HOST))


def _host_from_blocks(
    z: Any,
    count: int,
    dtype: DataType,
    shape: tuple[int, ...],
    placements: tuple[Placement, ...],
    mesh: MeshDevice,
) -> np.ndarray:
    """A blocks file's global host data, each block decoded into place (a block float's values
    as bfloat16, as ``from_device`` gives them)."""
    mesh_shape = tuple(mesh.shape)
    blocks = blocks_of(placements, mesh_shape, shape)
    if len(blocks) != count:
        raise _Unreadable
    shapes = storage_shapes(dtype, shape, placements)
    out = np.empty(_specs.global_shape(shape, placements, mesh_shape), dtype.numpy_dtype)
    for i, key in enumerate(blocks):
        leaves = _stored_leaves(z, i, dtype, shapes)
        target = out[index_of(key)]
        if not dtype.is_block_float:
            target[...] = leaves[0].reshape(shape)
            continue
        m_shape, e_shape = _blockfloat.storage_shapes(dtype, shape)
        m, e = leaves[0].reshape(m_shape), leaves[1].reshape(e_shape)
        rows = target.reshape(1) if not shape else target
        for idx in _blockfloat.row_chunks(tuple(rows.shape)):
            part = _blockfloat.BlockFloatData(m[idx], e[idx])
            with np.errstate(over="ignore"):  # a group holding inf decodes to inf, on purpose
                rows[idx] = _blockfloat.decode(np, part, dtype, rows[idx].shape)
    return out
