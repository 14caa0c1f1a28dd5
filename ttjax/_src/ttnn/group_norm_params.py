"""``ttnn.dram_group_norm_params_from_torch``: torch gamma/beta to device tensors in the layout
TT-NN's DRAM group norm reads (each device's channels in virtual-column chunks padded to whole
tiles), and the input mask, in one call. Above :mod:`ttjax._src.ttnn.ops.normalization`, whose
helpers it combines, because it puts tensors on the mesh.
"""

from __future__ import annotations

from typing import Any

from ttjax._src.core.enums import DataType, Layout
from ttjax._src.core.errors import ConfigError, ShapeMismatchError
from ttjax._src.ttnn.convert import from_torch
from ttjax._src.ttnn.distribute import ShardTensor2dMesh
from ttjax._src.ttnn.ops.normalization import (
    create_group_norm_input_mask,
    create_group_norm_weight_bias_rm,
    dram_group_norm_virtual_columns,
)

__all__ = ["dram_group_norm_params_from_torch"]


def dram_group_norm_params_from_torch(
    torch_params: Any,
    channels_per_device: int,
    groups_per_device: int,
    device: Any,
    mesh_axis: int | None = None,
    core_grid: Any = None,
    return_mask: bool = True,
    dtype: DataType = DataType.BFLOAT16,
) -> Any:
    """Gamma and/or beta (a torch tensor or a list of them, ``[C]``) as ROW_MAJOR device tensors
    of rows of 32 in TT-NN's chunked layout, split over ``mesh_axis`` by channel (replicated when
    None); with ``return_mask``, also the TILE input mask: ``(params, mask)``.

    >>> (gamma, beta), mask = ttnn.dram_group_norm_params_from_torch(
    ...     [torch.ones(64), torch.zeros(64)], 64, 4, mesh)
    """
    import torch

    if core_grid is None and device is None:
        raise ConfigError(
            "dram_group_norm_params_from_torch: Either core_grid or device must be provided to "
            "determine the virtual columns.\nfix: pass device=mesh or core_grid=ttnn.CoreGrid(...)."
        )
    if channels_per_device % 32 or channels_per_device % groups_per_device:
        raise ShapeMismatchError(
            f"dram_group_norm_params_from_torch: channels_per_device {channels_per_device} must "
            f"be divisible by 32 and groups_per_device {groups_per_device}.\n"
            "fix: pad the channels, or pick a group count that divides them."
        )
    num_devices = 1
    dims: list[int | None] = [None, None]
    if mesh_axis is not None:
        num_devices = tuple(device.shape)[mesh_axis]
        dims[mesh_axis] = 0
    cols = dram_group_norm_virtual_columns(
        core_grid or device.core_grid, channels_per_device, groups_per_device
    )
    single = isinstance(torch_params, torch.Tensor)
    out = []
    for param in [torch_params] if single else list(torch_params):
        if param.numel() // num_devices != channels_per_device:
            raise ShapeMismatchError(
                f"dram_group_norm_params_from_torch: Computed number of channels per device: "
                f"{param.numel() // num_devices} not equal to provided number of channels per "
                f"device: {channels_per_device}.\nfix: pass a [{channels_per_device * num_devices}]"
                " parameter."
            )
        rows = [
            create_group_norm_weight_bias_rm(part, channels_per_device, cols)
            for part in param.chunk(num_devices)
        ]
        out.append(
            from_torch(
                torch.cat(rows, dim=0),
                dtype=dtype,
                device=device,
                mesh_mapper=ShardTensor2dMesh(device, mesh_shape=tuple(device.shape), dims=dims),
            )
        )
    params = out[0] if single else out
    if not return_mask:
        return params
    mask = create_group_norm_input_mask(channels_per_device, groups_per_device, cols)
    return params, from_torch(mask, dtype=dtype, device=device, layout=Layout.TILE)
