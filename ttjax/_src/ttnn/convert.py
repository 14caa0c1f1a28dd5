"""Host <-> mesh conversion: from_torch, to_torch, to_device, from_device, per-device views.

The implementation of :mod:`ttjax.convert`, whose docstring says more.
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import ml_dtypes
import numpy as np
from jax.sharding import NamedSharding

from ttjax._src.core import blockfloat as _blockfloat, capture as _capture, specs as _specs
from ttjax._src.core.enums import DataType, Layout, StorageType, from_numpy_dtype
from ttjax._src.core.errors import (
    ComposerRequiredError,
    LayoutError,
    MeshMismatchError,
    MeshShapeError,
    ShapeMismatchError,
    TTJaxError,
    UnsupportedDTypeError,
)
from ttjax._src.core.host import to_host_array
from ttjax._src.core.mesh import MeshDevice, MeshShape, open_mesh_of_shape
from ttjax._src.core.placements import Placement, PlacementLocal, PlacementReplicate
from ttjax._src.core.tensor import (
    Shape,
    Tensor,
    TensorSpec,
    check_live,
    deallocated_error,
    fetch,
    host_blocks,
    is_traced,
)
from ttjax._src.ttnn import tensorbin as _tensorbin
from ttjax._src.ttnn.distribute import (
    MeshToTensor,
    TensorToMesh,
    default_composer,
    default_mapper,
)
from ttjax._src.ttnn.ops.layout import layout_on_host

_log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Host arrays and dtypes
# ---------------------------------------------------------------------------------------------


def _resolve_dtype(src: np.dtype, dtype: DataType | None) -> DataType:
    if dtype is not None:
        if not isinstance(dtype, DataType):
            raise UnsupportedDTypeError(
                f"dtype={dtype!r} is not a ttnn DataType.\n"
                "fix: use ttnn.bfloat16, ttnn.float32, ttnn.bfloat8_b, ttnn.bfloat4_b, ttnn.int32, "
                "ttnn.uint32, ttnn.uint16 or ttnn.uint8."
            )
        if np.dtype(src).kind == "c":
            raise UnsupportedDTypeError(
                f"complex input ({np.dtype(src)}) cannot be stored as {dtype!r}.\n"
                "fix: pass the real and imaginary parts as two tensors."
            )
        return dtype
    found = from_numpy_dtype(src)
    if found is not None:
        return found
    if np.dtype(src) == np.int64:
        return DataType.INT32
    raise UnsupportedDTypeError(
        f"input dtype {np.dtype(src)} has no TT-NN DataType (TT-NN stores bfloat16, float32, "
        "bfloat8_b, bfloat4_b, int32, uint32, uint16, uint8).\n"
        "fix: pass dtype= explicitly, e.g. dtype=ttnn.float32 (float64 is not cast silently)."
    )


def _resolve_layout(dtype: DataType, layout: Layout | None) -> Layout:
    if layout is not None and not isinstance(layout, Layout):
        raise LayoutError(
            f"layout={layout!r} is not a ttnn Layout.\nfix: ttnn.ROW_MAJOR_LAYOUT or ttnn.TILE_LAYOUT."
        )
    if dtype.is_block_float:
        if layout is Layout.ROW_MAJOR:
            raise LayoutError(
                f"Tile layout is required for tensor of type {dtype.value}; got {layout!r}.\n"
                "fix: pass layout=ttnn.TILE_LAYOUT (or leave layout unset)."
            )
        return Layout.TILE
    return layout or Layout.ROW_MAJOR


def _check_int_range(arr: np.ndarray, dtype: DataType) -> None:
    """Refuse integers (or finite floats) that ``dtype`` cannot hold, as numpy's safe casting
    would, instead of letting them wrap around (2**40 + 5 -> 5, -1 -> 4294967295)."""
    target = np.dtype(dtype.numpy_dtype)
    if target.kind not in "iu" or arr.dtype.kind not in "iuf" or not arr.size:
        return
    info = np.iinfo(target)
    lo, hi = arr.min(), arr.max()
    if lo >= info.min and hi <= info.max:
        return
    bad = lo if lo < info.min else hi
    raise UnsupportedDTypeError(
        f"from_torch: value {bad} of the {arr.dtype} input is outside {dtype!r}'s range "
        f"[{info.min}, {info.max}]; it would wrap around.\n"
        f"fix: use a wider dtype (ttnn.int32 or ttnn.float32), fix the values, or pass "
        "wrap_integers=True to keep the low bits on purpose."
    )


def _host_data(
    arr: np.ndarray,
    dtype: DataType,
    placements: tuple[Placement, ...] = (),
    mesh_shape: tuple[int, ...] = (),
    local: tuple[int, ...] | None = None,
) -> np.ndarray:
    """A host tensor's data: ``arr`` cast to ``dtype``'s host dtype (C order, no copy when it
    already is one). A block-float tensor holds the values its devices would hold: every
    device's shard is quantized on its own (shared exponents never span two devices' shards),
    a slab of rows at a time into one output array."""
    if not dtype.is_block_float:
        return arr.astype(dtype.numpy_dtype, order="C", copy=False)
    out = np.empty(arr.shape, dtype.numpy_dtype)
    if local is None:
        _blockfloat.quantize_into(arr, dtype, out)
        return out
    for key in _tensorbin.blocks_of(placements, mesh_shape, local):
        idx = _tensorbin.index_of(key)
        _blockfloat.quantize_into(arr[idx], dtype, out[idx])
    return out


def _local_shape(
    shape: tuple[int, ...], placements: tuple[Placement, ...], mesh: MeshDevice
) -> tuple[int, ...]:
    ms = tuple(mesh.shape)
    return tuple(s // _specs.shard_count(placements, ms, d) for d, s in enumerate(shape))


# ---------------------------------------------------------------------------------------------
# Placing data on the mesh
# ---------------------------------------------------------------------------------------------


def _put(
    arr: Any,
    mesh: MeshDevice,
    placements: tuple[Placement, ...],
    dtype: DataType,
    layout: Layout,
    local_shape: tuple[int, ...],
    memory_config: Any = None,
) -> Tensor:
    """Place a global logical host array on the mesh, one device block at a time: each block
    is cast (block floats: encoded) on the host and copied to its device(s), so the host never
    holds more than one block beside the result."""
    host = arr if isinstance(arr, np.ndarray) else np.asarray(arr)

    def leaves_of(_i: int, key: Any) -> list[np.ndarray]:
        block = host[_tensorbin.index_of(key)]
        if dtype.is_block_float:
            return list(_blockfloat.encode(np, block, dtype))
        leaf = block.astype(dtype.numpy_dtype, copy=False)
        # JAX's CPU client may keep (alias) an aligned numpy buffer: never the caller's
        return [leaf.copy() if np.may_share_memory(leaf, host) else leaf]

    return _tensorbin.place(mesh, placements, dtype, layout, local_shape, memory_config, leaves_of)


def from_torch(
    tensor: Any,
    dtype: DataType | None = None,
    *,
    spec: Any = None,
    tile: Any = None,
    pad_value: float | None = None,
    layout: Layout | None = None,
    device: MeshDevice | None = None,
    memory_config: Any = None,
    mesh_mapper: TensorToMesh | None = None,
    cq_id: int | None = None,
    preserve_nan_values: bool = False,
    col_tilize: bool = False,
    enable_bfloat_opt: bool = False,
    wrap_integers: bool = False,
) -> Tensor | None:
    """Convert a torch tensor (or numpy / JAX array) into a ttnn Tensor.

    With ``device=mesh`` the shards go to the mesh at once; otherwise the result is a host tensor
    (multi-shard when a mapper is given). Without a mapper a device tensor is replicated.
    Integers outside the target dtype's range are refused; ``wrap_integers=True`` (a ttjax
    option) keeps their low bits instead, as a C cast would.

    >>> x = ttnn.from_torch(torch.rand(1, 1, 32, 64), layout=ttnn.TILE_LAYOUT, device=mesh,
    ...                     mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
    """
    if tensor is None:
        return None
    if device is not None:
        _capture.forbid_host_io("Writes")
        if not isinstance(device, MeshDevice):
            raise TTJaxError(
                f"device={device!r} is not a MeshDevice.\nfix: pass the mesh returned by "
                "ttnn.open_mesh_device(...) (or ttnn.open_device(0))."
            )
    # The caller's array is never copied whole: a host tensor's data is cast from it directly,
    # and each device's block is cast (or encoded) on its own (_put).
    arr = to_host_array(tensor)
    dt = _resolve_dtype(arr.dtype, dtype)
    lay = _resolve_layout(dt, layout)
    mapper = mesh_mapper if mesh_mapper is not None else default_mapper()
    if not wrap_integers:
        _check_int_range(arr, dt)
    if mapper is None:
        if device is None:
            return Tensor(
                _host_data(arr, dt),
                TensorSpec(None, (), dt, lay, tuple(arr.shape), StorageType.HOST),
            )
        mesh = device
        placements: tuple[Placement, ...] = (PlacementReplicate(),) * mesh.shape.dims()
    else:
        if not isinstance(mapper, TensorToMesh):
            raise TTJaxError(
                f"mesh_mapper={mapper!r} is not a mesh mapper.\nfix: use ttnn.ShardTensorToMesh, "
                "ttnn.ReplicateTensorToMesh, ttnn.ShardTensor2dMesh or ttnn.create_mesh_mapper."
            )
        mesh = mapper.mesh_device
        if device is not None and not mesh.same_mesh(device):
            raise MeshMismatchError(
                f"mesh_mapper was built for {mesh!r} (device ids {mesh.get_device_ids()}) but "
                f"device={device!r} (device ids {device.get_device_ids()}).\n"
                "fix: build the mapper with the same mesh device you pass as device=."
            )
        if device is not None:
            mesh = device
        # A 1-D split with fewer chunks than devices (or a distribution over part of the mesh)
        # lands on the block of the mesh's first devices, as TT-NN places it.
        placed, placements = mapper.placed_on(tuple(arr.shape))
        if placed is not mapper.mesh_device:
            mesh = mesh._block_view((0,) * mesh.shape.dims(), tuple(placed.shape))
    local = _local_shape(tuple(arr.shape), placements, mesh)
    if device is None:
        return Tensor(
            _host_data(arr, dt, placements, tuple(mesh.shape), local),
            TensorSpec(mesh, placements, dt, lay, local, StorageType.HOST),
        )
    return _put(arr, mesh, placements, dt, lay, local, memory_config)


def as_tensor(
    tensor: Any,
    dtype: DataType | None = None,
    *,
    layout: Layout | None = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: Any = None,
    cache_file_name: str | os.PathLike[str] | None = None,
    preprocess: Callable[[Any], Any] | None = None,
    mesh_mapper: TensorToMesh | None = None,
) -> Tensor | None:
    """``from_torch`` with TT-NN's ``preprocess`` and file cache (``ttnn.as_tensor``).

    ``preprocess(tensor)`` runs on the host tensor before conversion. With ``cache_file_name``
    the converted host tensor (preprocessed, distributed by ``mesh_mapper``) is stored at
    ``{cache_file_name}_dtype_{DTYPE}_layout_{LAYOUT}.tensorbin`` and later calls load it instead
    of converting (and preprocessing) again, as TT-NN does. A cache file written for another
    mesh shape or that cannot be read is rewritten.

    >>> w1 = ttnn.as_tensor(torch.rand(32, 64), dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT,
    ...                     device=mesh, memory_config=ttnn.DRAM_MEMORY_CONFIG, cache_file_name="w1")
    >>> import os; os.path.exists("w1_dtype_BFLOAT8_B_layout_TILE.tensorbin")
    True
    """
    if device is not None and memory_config is None:
        raise TTJaxError(
            "as_tensor: memory_config must be specified when device is specified.\n"
            "fix: pass memory_config=ttnn.DRAM_MEMORY_CONFIG (TT-NN requires it too)."
        )

    def convert(dev: MeshDevice | None) -> Tensor | None:
        src = preprocess(tensor) if preprocess is not None else tensor
        return from_torch(
            src,
            dtype,
            layout=layout,
            device=dev,
            memory_config=memory_config,
            mesh_mapper=mesh_mapper,
        )

    if cache_file_name is None:
        return convert(device)
    dtype_name = dtype.name if dtype is not None else "None"
    layout_name = layout.name if layout is not None else "None"
    path = pathlib.Path(f"{cache_file_name}_dtype_{dtype_name}_layout_{layout_name}.tensorbin")
    mesh = device if device is not None else getattr(mesh_mapper, "mesh_device", None)
    if path.is_file():
        loaded = _read(path, mesh, device, memory_config)
        if loaded is not None:
            return loaded
    out = convert(device)
    if out is not None:
        _dump(path, out)
    return out


def _read(
    path: pathlib.Path, mesh: MeshDevice | None, device: MeshDevice | None, memory_config: Any
) -> Tensor | None:
    """The tensor stored at ``path``: onto ``device`` when given (a device tensor's file block
    by block), else a host tensor; None when it cannot be read for this mesh."""
    if device is not None:
        placed = _tensorbin.read_onto(path, device, memory_config)
        if placed is not None:
            return placed
    loaded = _tensorbin.read_host(path, mesh)
    if loaded is None or device is None:
        return loaded
    return to_device(loaded, device, memory_config)


def _dump(path: pathlib.Path, tensor: Tensor) -> None:
    """Store ``tensor`` at ``path``: a device tensor as its devices' blocks (no full host copy),
    a host tensor (or one spread over several processes) as its global data."""
    if tensor._storage is StorageType.DEVICE and _tensorbin.dump_blocks(path, tensor):
        return
    host = from_device(tensor) if tensor._storage is StorageType.DEVICE else tensor
    _tensorbin.dump_host(path, host)


def _tensorbin_path(what: str, file_name: str | os.PathLike[str]) -> pathlib.Path:
    path = pathlib.Path(file_name)
    if not str(path).endswith(".tensorbin"):
        raise TTJaxError(
            f"{what}: File {path} must have .tensorbin extension.\nfix: name it e.g. w1.tensorbin."
        )
    return path


def dump_tensor(file_name: str | os.PathLike[str], tensor: Tensor) -> None:
    """Write ``tensor`` (read back to the host, shards and placements kept) to ``file_name``
    (TT-NN's ``ttnn.dump_tensor``; ttjax's files are numpy .npz, not TT-NN's flatbuffers)."""
    path = _tensorbin_path("dump_tensor", file_name)
    if tensor._data is None:
        raise deallocated_error("dump_tensor", tensor)
    if tensor._storage is StorageType.DEVICE:
        check_live(tensor, "dump_tensor")
    _dump(path, tensor)


def load_tensor(file_name: str | os.PathLike[str], *, device: MeshDevice | None = None) -> Tensor:
    """Read a tensor written by :func:`dump_tensor` (or ``as_tensor``'s cache), onto ``device``
    when given (TT-NN's ``ttnn.load_tensor``)."""
    path = _tensorbin_path("load_tensor", file_name)
    if not path.is_file():
        raise TTJaxError(
            f"Unable to load the tensor from {path}.  The file does not exist.\n"
            "fix: check the path (ttnn.dump_tensor writes it)."
        )
    loaded = _read(path, device, device, None)
    if loaded is None:
        raise TTJaxError(
            f"Unable to load the tensor from {path}: it is not a ttjax tensor file, or it holds "
            f"shards of another mesh shape than {device!r} (without device=: than any open "
            "mesh).\nfix: pass device= (or open) a mesh of the shape it was written for, or "
            "write it again with ttnn.dump_tensor."
        )
    return loaded


def to_device(tensor: Tensor, device: MeshDevice, memory_config: Any = None, **_: Any) -> Tensor:
    """Move a host tensor onto ``device`` (a tensor already there is returned as is)."""
    if not isinstance(device, MeshDevice):
        raise TTJaxError(
            f"to_device: device={device!r} is not a MeshDevice.\nfix: pass the mesh returned by "
            "ttnn.open_mesh_device(...) (or ttnn.open_device(0))."
        )
    if tensor._data is None:
        raise deallocated_error("to_device", tensor)
    if tensor._storage is StorageType.DEVICE:
        check_live(tensor, "to_device")
        if tensor._mesh is not None and (
            tensor._mesh.same_mesh(device) or _block_within(tensor._mesh, device) is not None
        ):
            return tensor
        raise MeshMismatchError(
            f"to_device: the tensor already lives on {tensor._mesh!r}, not {device!r}.\n"
            "fix: read it back with ttnn.to_torch and convert it for the other mesh."
        )
    _capture.forbid_host_io("Writes")
    if tensor._mesh is None:
        pl: tuple[Placement, ...] = (PlacementReplicate(),) * device.shape.dims()
        return _put(
            tensor._data, device, pl, tensor._dtype, tensor._layout, tensor._shape, memory_config
        )
    target = device if tensor._mesh.same_mesh(device) else _block_within(tensor._mesh, device)
    if target is None:
        raise MeshMismatchError(
            f"to_device: this host tensor was distributed for {tensor._mesh!r}, not {device!r}.\n"
            "fix: distribute it again with a mapper built for the target mesh."
        )
    return _put(
        tensor._data,
        target,
        tensor._placements,
        tensor._dtype,
        tensor._layout,
        tensor._shape,
        memory_config,
    )


def _block_within(mesh: MeshDevice, device: MeshDevice) -> MeshDevice | None:
    """``device``'s view of the block ``mesh`` is of it (a tensor TT-NN placed on some of a
    mesh's devices), or None when ``mesh`` is no block of ``device``."""
    if mesh._offset is None or mesh._parent is None or not mesh._parent.same_mesh(device):
        return None
    return device._block_view(tuple(mesh._offset), tuple(mesh.shape))


def from_device(tensor: Tensor, blocking: bool = True, **_: Any) -> Tensor:
    """Copy a device tensor back to host memory (still one shard per device)."""
    if tensor._data is None:
        raise deallocated_error("from_device", tensor)
    if tensor._storage is StorageType.HOST:
        return tensor
    _capture.forbid_host_io("Reads")
    check_live(tensor, "from_device")
    mesh = tensor._mesh
    if mesh is None:
        raise TTJaxError(
            f"from_device: this device tensor ({tensor.spec.describe()}) has no mesh.\n"
            "fix: create device tensors with ttnn.from_torch(x, device=mesh_device)."
        )
    blocks = host_blocks(tensor)
    if tensor._dtype.is_block_float:
        blocks = blocks.astype(tensor._dtype.numpy_dtype)
    data = _specs.from_local_blocks(np, blocks, tensor._placements, tuple(mesh.shape))
    return Tensor(
        np.ascontiguousarray(data),
        TensorSpec(
            mesh, tensor._placements, tensor._dtype, tensor._layout, tensor._shape, StorageType.HOST
        ),
    )


def to_dtype(tensor: Tensor, dtype: DataType) -> Tensor:
    """A host tensor converted to ``dtype`` on the host, as TT-NN's ``ttnn.to_dtype`` (host
    tensors only; bfloat8_b/bfloat4_b come out quantized per device shard, in TILE layout:
    ``to_dtype_op.cpp``).

    >>> w = ttnn.to_dtype(ttnn.from_torch(torch.randn(64, 64)), ttnn.bfloat8_b)
    """
    if not isinstance(dtype, DataType):
        raise TTJaxError(
            f"ttnn.to_dtype: dtype={dtype!r} is not a ttnn DataType.\nfix: e.g. ttnn.bfloat16."
        )
    if tensor._data is None:
        raise deallocated_error("to_dtype", tensor)
    if tensor._storage is not StorageType.HOST:
        raise TTJaxError(
            f"ttnn.to_dtype: the tensor ({tensor.spec.describe()}) is on device; to_dtype(...) "
            "function only supports host tensors!\n"
            "fix: ttnn.typecast(t, dtype) converts a device tensor."
        )
    mesh = tensor._mesh
    arr = np.asarray(tensor._data)
    _check_int_range(arr, dtype)
    if mesh is None:
        arr = _host_data(arr, dtype)
    else:
        arr = _host_data(arr, dtype, tensor._placements, tuple(mesh.shape), tensor._shape)
    layout = Layout.TILE if dtype.is_block_float else tensor._layout
    spec = TensorSpec(mesh, tensor._placements, dtype, layout, tensor._shape, StorageType.HOST)
    return Tensor(arr, spec)


def host_to_layout(tensor: Tensor, layout: Layout) -> Tensor:
    """A host tensor in ``layout`` (TT-NN's ``Tensor.to(layout)``: values unchanged); a block
    float tensor stays in TILE, as TT-NN's ``to_layout_bfloat`` leaves it (with a warning)."""
    return layout_on_host(tensor, layout)


# ---------------------------------------------------------------------------------------------
# Reading data back
# ---------------------------------------------------------------------------------------------


def _composer_required(t: Tensor, mesh: MeshDevice) -> ComposerRequiredError:
    return ComposerRequiredError(
        f"Can't convert a tensor distributed on {mesh.shape!r} mesh to row-major logical tensor. "
        "Supply a mesh composer to concatenate multi-device shards.\n"
        f"fix: ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh_device, dim=0)) "
        f"(this tensor's placements: {list(t._placements)!r}), or wrap the call in "
        "`with ttnn.distribute(composer):`."
    )


def to_numpy(
    tensor: Tensor, dtype: Any = None, *, mesh_composer: MeshToTensor | None = None, **_: Any
) -> np.ndarray:
    """Read a tensor back as a numpy array (block floats come back as their bfloat16 values)."""
    if not isinstance(tensor, Tensor):
        raise TTJaxError(f"to_numpy expects a ttnn Tensor, got {type(tensor).__name__}.")
    if tensor._data is None:
        raise deallocated_error("to_torch", tensor)
    if tensor._mesh is None:
        out = fetch(tensor._data)
    else:
        composer = mesh_composer if mesh_composer is not None else default_composer()
        if composer is None:
            if tensor._mesh.get_num_devices() != 1:
                raise _composer_required(tensor, tensor._mesh)
            if tensor._storage is StorageType.DEVICE:
                _capture.forbid_host_io("Reads")
                check_live(tensor, "to_torch")
            out = host_blocks(tensor).reshape(tensor._shape)
        else:
            out = composer.compose(tensor)
    if tensor._dtype.is_block_float:
        out = np.asarray(out).astype(tensor._dtype.numpy_dtype)
    if dtype is not None:
        out = np.asarray(out).astype(dtype)
    return np.asarray(out)


def to_torch(
    tensor: Tensor,
    dtype: Any = None,
    *,
    torch_rank: int | None = None,
    mesh_composer: MeshToTensor | None = None,
    device: Any = None,
    cq_id: int | None = None,
) -> Any:
    """Read a tensor back as a torch tensor; a multi-device tensor needs ``mesh_composer``.

    >>> out = ttnn.to_torch(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    """
    import torch

    arr = to_numpy(tensor, mesh_composer=mesh_composer)
    if not arr.flags.writeable or not arr.flags.c_contiguous:
        arr = np.array(arr, copy=True, order="C")
    if arr.dtype == np.dtype(ml_dtypes.bfloat16):
        out = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    elif arr.dtype in (np.uint16, np.uint32):
        # TT-NN hands these to torch as int16 / int32 (pytensor.cpp,
        # convert_tt_tensor_to_torch_tensor): same bits, a dtype torch's ops all take
        out = torch.from_numpy(arr.view(np.int16 if arr.dtype == np.uint16 else np.int32))
    else:
        out = torch.from_numpy(arr)
    if torch_rank is not None:
        while out.dim() > torch_rank:
            if out.shape[0] != 1:
                raise ShapeMismatchError(
                    f"ttnn: Unable to squeeze to desired rank! to_torch(torch_rank={torch_rank}) "
                    f"got shape {list(out.shape)}, whose leading dim {out.shape[0]} is not 1.\n"
                    f"fix: pass torch_rank >= {out.dim()}, or reshape the result instead."
                )
            out = out.squeeze(0)
    if dtype is not None:
        out = out.to(dtype)
    return out


# ---------------------------------------------------------------------------------------------
# Per-device views
# ---------------------------------------------------------------------------------------------


def get_device_tensors(tensor: Tensor) -> list[Tensor]:
    """One single-device tensor per device, in row-major order of mesh coordinates."""
    mesh = tensor._mesh
    if mesh is None:
        return [tensor]
    coords = list(np.ndindex(*mesh.shape))
    if tensor._storage is StorageType.HOST:
        blocks = host_blocks(tensor)
        return [
            Tensor(
                np.ascontiguousarray(blocks[c]),
                TensorSpec(
                    None, (), tensor._dtype, tensor._layout, tensor._shape, StorageType.HOST
                ),
            )
            for c in coords
        ]
    if is_traced(tensor):
        raise TTJaxError(
            "get_device_tensors cannot split a traced tensor (inside jax.jit).\n"
            "fix: call it outside the jitted function."
        )
    check_live(tensor, "get_device_tensors")
    bf = tensor._dtype.is_block_float
    leaves = list(tensor._data) if bf else [tensor._data]
    if bf:
        shapes = list(_blockfloat.storage_shapes(tensor._dtype, tensor._shape))
    else:
        shapes = [tensor._shape]
    per_dev = [{s.device: s.data for s in leaf.addressable_shards} for leaf in leaves]
    # On a multi-process mesh other processes' shards are read back once (a collective) and
    # returned as host tensors.
    remote = None if all(leaf.is_fully_addressable for leaf in leaves) else host_blocks(tensor)
    host_spec = TensorSpec(None, (), tensor._dtype, tensor._layout, tensor._shape, StorageType.HOST)
    out = []
    for c in coords:
        dev = mesh.devices[c]
        if remote is not None and dev not in per_dev[0]:
            out.append(Tensor(np.ascontiguousarray(remote[c]), host_spec))
            continue
        parts = [
            pd[dev] if pd[dev].shape == s else jax.numpy.reshape(pd[dev], s)
            for pd, s in zip(per_dev, shapes)
        ]
        data = _blockfloat.BlockFloatData(*parts) if bf else parts[0]
        view = mesh._device_view(c)
        out.append(
            Tensor(
                data,
                TensorSpec(
                    view,
                    (PlacementReplicate(),) * view.shape.dims(),
                    tensor._dtype,
                    tensor._layout,
                    tensor._shape,
                    StorageType.DEVICE,
                ),
            )
        )
    return out


def combine_device_tensors(tensors: Sequence[Tensor] | None = None, **kwargs: Any) -> Tensor:
    """Inverse of :func:`get_device_tensors`: one mesh tensor from per-device tensors (row-major)."""
    tensors = list(tensors if tensors is not None else kwargs["tensors"])
    if not tensors:
        raise TTJaxError("combine_device_tensors needs at least one tensor.")
    first = tensors[0]
    parent = first._mesh._parent if first._mesh is not None else None
    if parent is None or any(t._mesh is None or t._mesh._parent is not parent for t in tensors):
        raise MeshMismatchError(
            "combine_device_tensors needs the per-device tensors of one mesh "
            "(as returned by ttnn.get_device_tensors).\nfix: pass exactly those tensors, in order."
        )
    ids = [t._mesh.get_device_ids()[0] for t in tensors]  # type: ignore[union-attr]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise MeshMismatchError(
            f"combine_device_tensors got several tensors on device id(s) {repeated} (device ids "
            f"of the inputs: {ids}); each device holds one shard.\nfix: pass the tensors of "
            "ttnn.get_device_tensors(t), one per device."
        )
    if len(tensors) != parent.get_num_devices():
        # TT-NN keeps such a tensor on those devices' coordinates only (an op on it runs there,
        # mesh_device_operation_utils.hpp); ttjax holds it on the block of the mesh they make up.
        parent = _block_of(parent, tensors)
    for t in tensors:
        if t._shape != first._shape or t._dtype is not first._dtype:
            raise ShapeMismatchError(
                f"All expressions must have the same shape: got {Shape(t._shape)!r} {t._dtype!r} and "
                f"{Shape(first._shape)!r} {first._dtype!r}.\nfix: give every device the same shape and dtype."
            )
    placements = (PlacementLocal(),) * parent.shape.dims()
    spec = _specs.partition_spec(placements, parent.axis_names, len(first._shape))
    sharding = NamedSharding(parent.jax_mesh, spec)
    lead = (1,) * parent.shape.dims()

    def build(leaf_of: Any, shape: tuple[int, ...]) -> jax.Array:
        arrays = [jax.numpy.reshape(leaf_of(t), lead + shape) for t in tensors]
        gshape = tuple(parent.shape) + shape
        return jax.make_array_from_single_device_arrays(gshape, sharding, arrays)

    if first._dtype.is_block_float:
        ms, es = _blockfloat.storage_shapes(first._dtype, first._shape)
        data: Any = _blockfloat.BlockFloatData(
            build(lambda t: t._data.mantissa, ms), build(lambda t: t._data.exponent, es)
        )
    else:
        data = build(lambda t: t._data, first._shape)
    return Tensor(
        data,
        TensorSpec(
            parent, placements, first._dtype, first._layout, first._shape, StorageType.DEVICE
        ),
    )


aggregate_as_tensor = combine_device_tensors


def from_host_shards(tensors: Sequence[Tensor], mesh_shape: Any) -> Tensor:
    """One multi-device host tensor from per-device host tensors, in row-major device order
    (TT-NN's ``ttnn.from_host_shards``). ttjax's multi-device tensors belong to a mesh: the
    result belongs to the most recently opened mesh of ``mesh_shape`` still open."""
    shape = MeshShape(mesh_shape)
    shards = list(tensors)
    if len(shards) != shape.mesh_size():
        raise ShapeMismatchError(
            f"from_host_shards: Number of tensor shards must match mesh size: got {len(shards)} "
            f"tensors for mesh shape {shape!r} ({shape.mesh_size()} devices).\n"
            "fix: pass one host tensor per device, in row-major order."
        )
    first = shards[0]
    for t in shards:
        if not isinstance(t, Tensor) or t._storage is not StorageType.HOST or t._mesh is not None:
            raise TTJaxError(
                f"from_host_shards: All tensor shards must be on host: got {t!r}.\n"
                "fix: pass single host tensors (ttnn.from_torch without device= or mesh_mapper=)."
            )
        if (t._shape, t._dtype, t._layout) != (first._shape, first._dtype, first._layout):
            raise ShapeMismatchError(
                "from_host_shards: All tensor shards must have the same tensor spec: got "
                f"{Shape(t._shape)!r} {t._dtype!r} {t._layout!r} and {Shape(first._shape)!r} "
                f"{first._dtype!r} {first._layout!r}.\nfix: give every shard one shape, dtype "
                "and layout."
            )
    mesh = open_mesh_of_shape(shape)
    if mesh is None:
        raise MeshShapeError(
            f"from_host_shards: no open mesh has shape {shape!r}; a ttjax multi-device host "
            "tensor belongs to a mesh.\nfix: ttnn.open_mesh_device(mesh_shape) before "
            "ttnn.from_host_shards."
        )
    data = np.stack([np.asarray(t._data) for t in shards]).reshape(
        tuple(shape) + tuple(first._shape)
    )
    placements = (PlacementLocal(),) * shape.dims()
    spec = TensorSpec(mesh, placements, first._dtype, first._layout, first._shape, StorageType.HOST)
    return Tensor(data, spec)


def _block_of(parent: MeshDevice, tensors: Sequence[Tensor]) -> MeshDevice:
    """The block view of ``parent`` whose devices, row-major, are those of ``tensors``."""
    where = {id(view): c for c, view in parent._device_views.items()}
    found = [where.get(id(t._mesh)) for t in tensors]
    coords = [tuple(int(x) for x in c) for c in found if c is not None]
    if len(coords) != len(found):
        raise MeshMismatchError(
            "combine_device_tensors needs the per-device tensors of one mesh "
            "(as returned by ttnn.get_device_tensors).\nfix: pass exactly those tensors, in order."
        )
    arr = np.array(coords)
    lo, hi = arr.min(axis=0), arr.max(axis=0)
    shape = tuple(int(h - low + 1) for low, h in zip(lo, hi))
    block = [tuple(int(o + i) for o, i in zip(lo, idx)) for idx in np.ndindex(*shape)]
    if block != coords:
        raise ShapeMismatchError(
            f"ND composition requires the number of tensors {len(tensors)} to match the mesh shape "
            f"{parent.shape!r}, or (ttjax) the tensors of one block of it in row-major order; got "
            f"the devices at {coords}.\nfix: pass one tensor "
            "per device, or e.g. one column's: ttnn.get_device_tensors(t)[col::cols]."
        )
    return parent._block_view(tuple(int(x) for x in lo), shape)


# ---------------------------------------------------------------------------------------------
# Persistent buffers (trace inputs)
# ---------------------------------------------------------------------------------------------


def allocate_tensor_on_device(
    shape: Any,
    dtype: DataType,
    layout: Layout,
    mesh_device: MeshDevice,
    memory_config: Any = None,
) -> Tensor:
    """A tensor of per-device ``shape`` on every device (zero-filled; TT-NN leaves it uninitialized)."""
    _capture.forbid_host_io("Writes")
    host = allocate_tensor_on_host(shape, dtype, layout, mesh_device)
    return _put(host._data, mesh_device, host._placements, dtype, host._layout, host._shape,
                memory_config)  # fmt: skip


def allocate_tensor_on_host(
    shape: Any,
    dtype: DataType,
    layout: Layout,
    mesh_device: MeshDevice,
    memory_config: Any = None,
) -> Tensor:
    """A host tensor of per-device ``shape`` with one (zero-filled) shard per device of
    ``mesh_device``: the destination ``copy_device_to_host_tensor`` reads a device tensor into
    (TT-NN's ``ttnn.allocate_tensor_on_host``, tensor.cpp: one host buffer per mesh coordinate).

    >>> host = ttnn.allocate_tensor_on_host((1, 1, 32, 32), ttnn.bfloat16, ttnn.TILE_LAYOUT, mesh)
    >>> host.storage_type(), tuple(host.shape)
    (StorageType::HOST, (1, 1, 32, 32))
    """
    shape_t = tuple(int(s) for s in shape)
    lay = _resolve_layout(dtype, layout)
    pl: tuple[Placement, ...] = (PlacementReplicate(),) * mesh_device.shape.dims()
    zeros = np.zeros(shape_t, (DataType.BFLOAT16 if dtype.is_block_float else dtype).numpy_dtype)
    return Tensor(zeros, TensorSpec(mesh_device, pl, dtype, lay, shape_t, StorageType.HOST))


def copy_host_to_device_tensor(
    host_tensor: Tensor, device_tensor: Tensor, cq_id: int | None = None, **_: Any
) -> None:
    """Overwrite ``device_tensor``'s buffers with ``host_tensor`` (same per-device shape and dtype).

    This is how trace inputs are refreshed between ``execute_trace`` calls.
    """
    _capture.forbid_host_io("Writes")
    if host_tensor._storage is not StorageType.HOST:
        raise TTJaxError(
            "copy_host_to_device_tensor: the source is already a device tensor.\n"
            "fix: pass a host tensor (ttnn.from_torch without device=)."
        )
    if device_tensor._storage is not StorageType.DEVICE or device_tensor._mesh is None:
        raise TTJaxError(
            "copy_host_to_device_tensor: the destination is not a device tensor.\n"
            "fix: allocate it with ttnn.allocate_tensor_on_device or ttnn.from_torch(device=mesh)."
        )
    mesh = device_tensor._mesh
    diffs = []
    if host_tensor._shape != device_tensor._shape:
        diffs.append(f"shape {Shape(host_tensor._shape)!r} vs {Shape(device_tensor._shape)!r}")
    if host_tensor._dtype is not device_tensor._dtype:
        diffs.append(f"dtype {host_tensor._dtype!r} vs {device_tensor._dtype!r}")
    if host_tensor._layout is not device_tensor._layout:
        diffs.append(f"layout {host_tensor._layout!r} vs {device_tensor._layout!r}")
    if diffs:
        raise ShapeMismatchError(
            "copy_host_to_device_tensor: host and device tensors differ per device: "
            + "; ".join(diffs)
            + ".\nfix: build the host tensor with the same per-device shape, dtype, layout and mapper."
        )
    if host_tensor._mesh is None:
        placements: tuple[Placement, ...] = (PlacementReplicate(),) * mesh.shape.dims()
    elif host_tensor._mesh.same_mesh(mesh):
        placements = host_tensor._placements
    else:
        raise MeshMismatchError(
            f"copy_host_to_device_tensor: the host tensor was distributed for {host_tensor._mesh!r} "
            f"but the device tensor lives on {mesh!r}.\nfix: distribute with a mapper for {mesh!r}."
        )
    fresh = _put(
        host_tensor._data,
        mesh,
        placements,
        host_tensor._dtype,
        host_tensor._layout,
        host_tensor._shape,
        device_tensor.memory_config(),
    )
    device_tensor.assign(fresh)


def copy_device_to_host_tensor(
    device_tensor: Tensor, host_tensor: Tensor, cq_id: int | None = None, blocking: bool = True
) -> None:
    """Overwrite ``host_tensor`` with the contents of ``device_tensor``."""
    host_tensor.assign(from_device(device_tensor))


__all__ = [
    "aggregate_as_tensor",
    "allocate_tensor_on_device",
    "allocate_tensor_on_host",
    "as_tensor",
    "combine_device_tensors",
    "copy_device_to_host_tensor",
    "copy_host_to_device_tensor",
    "dump_tensor",
    "from_device",
    "from_torch",
    "get_device_tensors",
    "load_tensor",
    "to_device",
    "to_numpy",
    "to_torch",
]
