"""Layout ops, per device: ``to_layout`` and TT-NN's tilize/untilize family (with padding and
unpadding), and ``pad_to_tile_shape``. Values never change; only the layout (and dtype) the
tensor carries, so these live apart from the shape ops of :mod:`ttjax._src.ttnn.ops.data_movement`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import DataType, Layout, StorageType
from ttjax._src.core.errors import LayoutError, ShapeMismatchError
from ttjax._src.core.tensor import Tensor, TensorSpec, deallocated_error
from ttjax._src.ttnn.ops.common import check_dtype, check_hw_kwargs
from ttjax._src.ttnn.ops.data_movement import slice

_log = logging.getLogger(__name__)


def layout_on_host(tensor: Tensor, layout: Layout) -> Tensor:
    """A host tensor in ``layout`` (TT-NN's ``Tensor.to(layout)``: values unchanged). A block
    float tensor stays in TILE: TT-NN's ``to_layout_bfloat`` logs "Conversion ... was not
    executed!" and returns the tensor as it is (``tensor_impl.cpp``); so does ttjax."""
    if not isinstance(layout, Layout):
        raise LayoutError(
            f"Tensor.to: {layout!r} is neither a MeshDevice nor a ttnn Layout.\n"
            "fix: t.to(mesh_device) or t.to(ttnn.TILE_LAYOUT)."
        )
    if tensor._data is None:
        raise deallocated_error("to", tensor)
    if tensor._dtype.is_block_float and layout is not Layout.TILE:
        _log.warning(
            "Tensor layout must be Layout::TILE for bfloat8_b or bfloat4_b! Conversion from %r "
            "to %r was not executed!",
            tensor._layout,
            layout,
        )
        return tensor
    s = tensor._spec
    spec = TensorSpec(s.mesh, s.placements, s.dtype, layout, s.shape, StorageType.HOST)
    return Tensor(tensor._data, spec)


def to_layout(
    input_tensor: Tensor,
    layout: Layout,
    dtype: DataType | None = None,
    *,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Convert to ``layout`` (ROW_MAJOR or TILE; optionally ``dtype``). Values are unchanged.

    A host tensor (one device's or a mesh's, from ``from_torch`` without ``device=``) changes
    layout on the host, as TT-NN's ``to_layout_op.cpp`` does it there: no dtype change."""
    check_hw_kwargs("to_layout", kwargs)
    if not isinstance(layout, Layout):
        raise LayoutError(
            f"ttnn.to_layout: {layout!r} is not a ttnn Layout.\nfix: ttnn.TILE_LAYOUT or ttnn.ROW_MAJOR_LAYOUT."
        )
    if isinstance(input_tensor, Tensor) and input_tensor._spec.storage is StorageType.HOST:
        if dtype is not None and dtype is not input_tensor._dtype:
            raise LayoutError(
                f"ttnn.to_layout: dtype cannot be specified when converting layout on host! "
                f"(dtype={dtype!r} for a {input_tensor._dtype!r} host tensor)\n"
                "fix: ttnn.to_dtype(t, dtype) on the host, or to_layout after ttnn.to_device."
            )
        return layout_on_host(input_tensor, layout)
    dt = check_dtype("to_layout", dtype)
    if dt is None:
        # TT-NN's untilize writes BFLOAT16 when the input is BFLOAT8_B/BFLOAT4_B
        # (ttnn/cpp/ttnn/operations/data_movement/untilize/device/untilize_op.cpp).
        block = input_tensor._dtype.is_block_float and layout is Layout.ROW_MAJOR
        dt = DataType.BFLOAT16 if block else input_tensor._dtype
    if dt.is_block_float and layout is not Layout.TILE:
        raise LayoutError(
            f"Tile layout is required for tensor of type {dt.value}; got {layout!r}.\n"
            "fix: typecast to bfloat16 first (ttnn.typecast(t, ttnn.bfloat16))."
        )
    if layout is input_tensor._layout and dt is input_tensor._dtype and memory_config is None:
        return input_tensor
    return run_op(
        "to_layout",
        lambda x: x,
        [input_tensor],
        static=(layout, dt),
        out_dtype=dt,
        out_layout=layout,
        memory_config=memory_config,
    )


def tilize(input_tensor: Tensor, **kwargs: Any) -> Tensor:
    """``to_layout(input_tensor, TILE_LAYOUT)`` per device (values unchanged)."""
    return to_layout(input_tensor, Layout.TILE, **kwargs)


def untilize(input_tensor: Tensor, **kwargs: Any) -> Tensor:
    """``to_layout(input_tensor, ROW_MAJOR_LAYOUT)`` per device (values unchanged)."""
    return to_layout(input_tensor, Layout.ROW_MAJOR, **kwargs)


def untilize_with_unpadding(
    input_tensor: Tensor,
    output_tensor_end: Sequence[int],
    *,
    memory_config: Any = None,
    use_multicore: bool = True,
    use_pack_untilize: bool = True,
    **kwargs: Any,
) -> Tensor:
    """ROW_MAJOR and cut to ``[0, output_tensor_end[i]]`` (inclusive ends) on each dim of each
    device's tensor (TT-NN's ``ttnn.untilize_with_unpadding``).

    >>> tuple(ttnn.untilize_with_unpadding(x, output_tensor_end=(0, 0, 9, 31)).shape)
    (1, 1, 10, 32)
    """
    op = "untilize_with_unpadding"
    check_hw_kwargs(op, kwargs)
    shape = tuple(input_tensor._shape)
    ends = tuple(int(e) for e in output_tensor_end)
    if len(ends) != len(shape) or any(not 0 <= e < n for e, n in zip(ends, shape)):
        raise ShapeMismatchError(
            f"ttnn.{op}: output_tensor_end {list(ends)} must give one inclusive end per dim "
            f"within the per-device shape {list(shape)}.\nfix: e.g. {[n - 1 for n in shape]}."
        )
    out = untilize(input_tensor, memory_config=memory_config)
    if ends == tuple(n - 1 for n in shape):
        return out
    return slice(out, [0] * len(shape), [e + 1 for e in ends])


def tilize_with_val_padding(
    input_tensor: Tensor,
    output_tensor_shape: Sequence[int],
    pad_value: float = 0.0,
    *,
    memory_config: Any = None,
    dtype: DataType | None = None,
    use_multicore: bool = True,
    **kwargs: Any,
) -> Tensor:
    """TILE layout with the tile padding filled with ``pad_value`` (TT-NN's
    ``ttnn.tilize_with_val_padding``): the logical shape stays the input's, as TT-NN's output
    spec keeps it; padding is never read back, so values are those of :func:`tilize`."""
    op = "tilize_with_val_padding"
    check_hw_kwargs(op, kwargs)
    shape = tuple(input_tensor._shape)
    target = tuple(int(d) for d in output_tensor_shape)
    if len(target) != len(shape) or any(t < n for t, n in zip(target, shape)):
        raise ShapeMismatchError(
            f"ttnn.{op}: output_tensor_shape {list(target)} must be at least the per-device "
            f"shape {list(shape)} on every dim.\nfix: pad up, e.g. to the tile-padded shape."
        )
    return to_layout(input_tensor, Layout.TILE, dtype, memory_config=memory_config)


def tilize_with_zero_padding(input_tensor: Tensor, **kwargs: Any) -> Tensor:
    """``ttnn.tilize_with_val_padding`` to the tile-padded shape with zeros."""
    memory_config, dtype = kwargs.pop("memory_config", None), kwargs.pop("dtype", None)
    check_hw_kwargs("tilize_with_zero_padding", kwargs)
    return to_layout(input_tensor, Layout.TILE, dtype, memory_config=memory_config)


def pad_to_tile_shape(unpadded_shape: Sequence[int]) -> list[int]:
    """``unpadded_shape`` with its last two dims rounded up to multiples of 32 (TT-NN's helper).

    >>> ttnn.pad_to_tile_shape([1, 1, 7, 33])
    [1, 1, 32, 64]
    """
    dims = [int(d) for d in unpadded_shape]
    for i in range(max(0, len(dims) - 2), len(dims)):
        dims[i] = -(-dims[i] // 32) * 32
    return dims
