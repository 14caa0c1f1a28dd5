"""Shape and data-movement ops, per device: reshape, permute, transpose, concat, slice, split,
repeat, pad, to_layout, embedding.

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.data_movement` and
:mod:`ttjax._src.ttnn.ops.layout` (``to_layout``, the tilize family).
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.data_movement import (
    broadcast_to as broadcast_to,
    chunk as chunk,
    concat as concat,
    copy as copy,
    embedding as embedding,
    expand as expand,
    fill_ones_rm as fill_ones_rm,
    fill_rm as fill_rm,
    gather as gather,
    getitem as getitem,
    pad as pad,
    permute as permute,
    repeat as repeat,
    repeat_interleave as repeat_interleave,
    reshape as reshape,
    reshape_on_device as reshape_on_device,
    scatter as scatter,
    slice as slice,
    split as split,
    squeeze as squeeze,
    stack as stack,
    transpose as transpose,
    tril as tril,
    unsqueeze as unsqueeze,
    unsqueeze_to_4D as unsqueeze_to_4D,
    view as view,
)
from ttjax._src.ttnn.ops.layout import (
    pad_to_tile_shape as pad_to_tile_shape,
    tilize as tilize,
    tilize_with_val_padding as tilize_with_val_padding,
    tilize_with_zero_padding as tilize_with_zero_padding,
    to_layout as to_layout,
    untilize as untilize,
    untilize_with_unpadding as untilize_with_unpadding,
)

_publish(globals(), "ttjax._src.ttnn.ops.data_movement", "ttjax._src.ttnn.ops.layout")
