"""Abstract mesh tensors: shape, dtype and placement without data, for compiling full-size models.

The implementation of :mod:`ttjax.abstract`, whose docstring says more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import NamedSharding

from ttjax._src.core import blockfloat as _blockfloat, specs as _specs
from ttjax._src.core.enums import DataType, Layout, StorageType
from ttjax._src.core.errors import LayoutError, TTJaxError
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.placements import Placement, PlacementReplicate
from ttjax._src.core.tensor import Tensor, TensorSpec
from ttjax._src.ttnn.distribute import TensorToMesh


def abstract_tensor(
    shape: Sequence[int],
    dtype: DataType = DataType.BFLOAT16,
    *,
    device: MeshDevice,
    mesh_mapper: TensorToMesh | None = None,
    layout: Layout | None = None,
    placements: Sequence[Placement] | None = None,
) -> Tensor:
    """A data-free tensor: what ``from_torch`` of a host tensor of ``shape`` would give.

    ``shape`` is the host (global) shape the mapper splits, exactly as for ``from_torch``;
    alternatively give ``placements`` directly, with ``shape`` the *per-device* shape.
    """
    if not isinstance(dtype, DataType):
        raise TTJaxError(f"abstract_tensor: dtype={dtype!r} is not a ttnn DataType.")
    if dtype.is_block_float and layout is Layout.ROW_MAJOR:
        raise LayoutError(
            f"Tile layout is required for tensor of type {dtype.value}; got {layout!r}.\n"
            "fix: pass layout=ttnn.TILE_LAYOUT (or leave layout unset)."
        )
    lay = Layout.TILE if dtype.is_block_float else (layout or Layout.ROW_MAJOR)
    mesh_shape = tuple(device.shape)
    if placements is not None:
        pl = tuple(placements)
        local = tuple(int(s) for s in shape)
    else:
        host_shape = tuple(int(s) for s in shape)
        if mesh_mapper is None:
            pl = (PlacementReplicate(),) * len(mesh_shape)
        else:
            placed, pl = mesh_mapper.placed_on(host_shape)
            if placed is not mesh_mapper.mesh_device:  # fewer chunks than devices: a block
                device = device._block_view((0,) * device.shape.dims(), tuple(placed.shape))
                mesh_shape = tuple(device.shape)
        local = tuple(s // _specs.shard_count(pl, mesh_shape, d) for d, s in enumerate(host_shape))
    spec = _specs.partition_spec(pl, device.axis_names, len(local))
    sharding = NamedSharding(device.jax_mesh, spec)
    if dtype.is_block_float:
        shapes = _blockfloat.storage_shapes(dtype, local)
        dtypes = _blockfloat.storage_dtypes(dtype)
        data: Any = _blockfloat.BlockFloatData(
            *(
                jax.ShapeDtypeStruct(_specs.global_shape(s, pl, mesh_shape), d, sharding=sharding)
                for s, d in zip(shapes, dtypes)
            )
        )
    else:
        data = jax.ShapeDtypeStruct(
            _specs.global_shape(local, pl, mesh_shape), dtype.numpy_dtype, sharding=sharding
        )
    return Tensor(data, TensorSpec(device, pl, dtype, lay, local, StorageType.DEVICE))


__all__ = ["abstract_tensor"]
