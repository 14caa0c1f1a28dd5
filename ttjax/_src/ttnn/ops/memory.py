"""Memory-config ops: to_memory_config, interleaved <-> sharded (and their ``_partial`` slices),
deallocate.

The implementation of :mod:`ttjax.ops.memory`, whose docstring says more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core import blockfloat as _blockfloat, capture as _capture
from ttjax._src.core.dispatch import common_mesh, output_memory_config, run_op
from ttjax._src.core.enums import DataType, Layout, StorageType
from ttjax._src.core.errors import MemoryConfigError, ShapeMismatchError, TTJaxError
from ttjax._src.core.hardware import (
    DRAM_MEMORY_CONFIG,
    BufferType,
    CoreCoord,
    CoreGrid,
    CoreRangeSet,
    MemoryConfig,
    ShardOrientation,
    ShardSpec,
    TensorMemoryLayout,
    num_cores_to_corerangeset,
)
from ttjax._src.core.tensor import Tensor, tile_padded
from ttjax._src.ttnn.ops.common import check_dtype, write_output


def _identity(x: Any) -> Any:
    return x


def _need_shard_spec(op: str, memory_config: Any) -> None:
    if not isinstance(memory_config, MemoryConfig):
        raise MemoryConfigError(
            f"ttnn.{op}: memory_config={memory_config!r} is not a ttnn.MemoryConfig.\n"
            "fix: pass e.g. ttnn.L1_MEMORY_CONFIG or ttnn.create_sharded_memory_config(...)."
        )
    if memory_config.is_sharded() and memory_config.shard_spec is None:
        raise MemoryConfigError(
            f"ttnn.{op}: MemoryConfig must have Shard Spec specified for sharded memory layout "
            f"(got {memory_config!r}).\nfix: build it with ttnn.create_sharded_memory_config(...) "
            "or ttnn.MemoryConfig(layout, ttnn.BufferType.L1, ttnn.ShardSpec(grid, shape, orientation))."
        )


def _forwarded(op: str, t: Tensor, memory_config: MemoryConfig) -> Tensor | None:
    """``t``'s own buffers under ``memory_config``, when a compiled program is being built (under
    ``jax.jit``, or in a trace capture where an earlier captured op made ``t``); else None.

    A memory-config move changes neither the values nor the per-device layout (XLA places
    buffers), so inside a program it is nothing: no copy, no resharding, and for a block-float
    tensor no decode and re-encode. Eagerly the op still runs (TT-NN gives a new buffer, which a
    later trace may donate without touching this one).
    """
    common_mesh(op, [t])
    traced = isinstance(_blockfloat.primary(t._data), jax.core.Tracer)
    recorder = _capture.current()
    if not traced and recorder is None:
        return None
    spec = t._spec
    mc = output_memory_config(
        op,
        memory_config,
        spec.memory_config,
        spec.shape,
        spec.layout,
        [(spec.memory_config, spec.shape)],
    )
    out = Tensor(t._data, spec.replace(memory_config=mc))
    if recorder is not None and not traced and not recorder.forward(out, t):
        return None
    return out


def _convert(op: str, t: Tensor, memory_config: MemoryConfig, dtype: DataType | None) -> Tensor:
    dt = check_dtype(op, dtype)
    if isinstance(t, Tensor) and (dt is None or dt is t._spec.dtype):
        out = _forwarded(op, t, memory_config)
        if out is not None:
            return out
    return run_op(
        op,
        _identity,
        [t],
        static=(dt,),
        out_dtype=dt,
        memory_config=memory_config,
    )


def to_memory_config(
    input_tensor: Tensor, memory_config: MemoryConfig, dtype: DataType | None = None
) -> Tensor:
    """The tensor with ``memory_config`` (interleaved or sharded), optionally cast to ``dtype``.

    >>> y = ttnn.to_memory_config(x, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    """
    _need_shard_spec("to_memory_config", memory_config)
    return _convert("to_memory_config", input_tensor, memory_config, dtype)


def _grid_set(
    op: str,
    grid: Any,
    scheme: TensorMemoryLayout,
    shard_shape: tuple[int, int],
    orientation: ShardOrientation,
    height: int,
    width: int,
) -> CoreRangeSet:
    """TT-NN's grid argument: a CoreRangeSet as is, or a CoreCoord grid size filled with just
    enough cores for the shards (``num_cores_to_corerangeset``, row-wise for ROW_MAJOR)."""
    if isinstance(grid, CoreRangeSet):
        return grid
    if isinstance(grid, CoreGrid):
        size = CoreCoord(grid.x, grid.y)
    elif isinstance(grid, CoreCoord) or (isinstance(grid, (tuple, list)) and len(grid) == 2):
        size = grid if isinstance(grid, CoreCoord) else CoreCoord(int(grid[0]), int(grid[1]))
    else:
        raise MemoryConfigError(
            f"ttnn.{op}: grid={grid!r} is neither a CoreCoord grid size nor a CoreRangeSet.\n"
            "fix: pass e.g. ttnn.CoreCoord(8, 4)."
        )
    sh, sw = shard_shape
    if scheme is TensorMemoryLayout.HEIGHT_SHARDED:
        n = -(-height // sh)
    elif scheme is TensorMemoryLayout.WIDTH_SHARDED:
        n = -(-width // sw)
    elif scheme is TensorMemoryLayout.BLOCK_SHARDED:
        n = -(-height // sh) * -(-width // sw)
    else:
        raise MemoryConfigError(
            f"ttnn.{op}: shard_scheme={scheme!r} is not a sharded layout.\n"
            "fix: ttnn.TensorMemoryLayout.HEIGHT_SHARDED, WIDTH_SHARDED or BLOCK_SHARDED."
        )
    return num_cores_to_corerangeset(n, size, orientation is ShardOrientation.ROW_MAJOR)


def _height_width(t: Tensor) -> tuple[int, int]:
    shape = tile_padded(t._shape) if t._layout is Layout.TILE else t._shape
    dims = list(shape) or [1]
    return int(np.prod(dims[:-1])), dims[-1]


def interleaved_to_sharded(
    input_tensor: Tensor,
    grid: Any,
    shard_shape: Any = None,
    shard_scheme: TensorMemoryLayout | None = None,
    shard_orientation: ShardOrientation | None = None,
    output_dtype: DataType | None = None,
    *,
    keep_l1_aligned: bool = False,
) -> Tensor:
    """Shard the tensor over L1 cores: ``(t, sharded_memory_config, output_dtype=None)`` or
    ``(t, grid, shard_shape, shard_scheme, shard_orientation, output_dtype=None)``.

    >>> cfg = ttnn.create_sharded_memory_config((1, 1, 32, 32), ttnn.CoreGrid(y=1, x=1),
    ...                                         ttnn.ShardStrategy.WIDTH)
    >>> ttnn.interleaved_to_sharded(x, cfg).is_sharded()
    True
    """
    op = "interleaved_to_sharded"
    if isinstance(grid, MemoryConfig):
        if output_dtype is None and isinstance(shard_shape, DataType):
            output_dtype, shard_shape = shard_shape, None
        memory_config = grid
        if not memory_config.is_sharded():
            raise MemoryConfigError(
                f"ttnn.{op}: sharded_memory_config {memory_config!r} is interleaved.\n"
                "fix: pass a sharded config, or use ttnn.to_memory_config for interleaved ones."
            )
    else:
        if shard_shape is None or shard_scheme is None or shard_orientation is None:
            raise TTJaxError(
                f"ttnn.{op}: with a grid, shard_shape, shard_scheme and shard_orientation are "
                "required.\nfix: ttnn.interleaved_to_sharded(t, grid, [h, w], "
                "ttnn.TensorMemoryLayout.HEIGHT_SHARDED, ttnn.ShardOrientation.ROW_MAJOR)."
            )
        shape2 = (int(shard_shape[0]), int(shard_shape[1]))
        height, width = _height_width(input_tensor)
        cores = _grid_set(op, grid, shard_scheme, shape2, shard_orientation, height, width)
        memory_config = MemoryConfig(
            shard_scheme, BufferType.L1, ShardSpec(cores, shape2, shard_orientation)
        )
    _need_shard_spec(op, memory_config)
    return _convert(op, input_tensor, memory_config, output_dtype)


def sharded_to_interleaved(
    input_tensor: Tensor,
    memory_config: MemoryConfig | None = None,
    output_dtype: DataType | None = None,
    *,
    is_l1_aligned: bool = False,
) -> Tensor:
    """The tensor interleaved in ``memory_config`` (DRAM by default), optionally cast.

    >>> y = ttnn.sharded_to_interleaved(x, ttnn.L1_MEMORY_CONFIG)
    """
    op = "sharded_to_interleaved"
    mc = DRAM_MEMORY_CONFIG if memory_config is None else memory_config
    _need_shard_spec(op, mc)
    if mc.is_sharded():
        raise MemoryConfigError(
            f"ttnn.{op}: memory_config {mc!r} is sharded; the output must be interleaved.\n"
            "fix: pass ttnn.DRAM_MEMORY_CONFIG or ttnn.L1_MEMORY_CONFIG."
        )
    return _convert(op, input_tensor, mc, output_dtype)


def _check_slices(op: str, t: Tensor, num_slices: int, slice_index: int) -> tuple[int, int]:
    n, k = int(num_slices), int(slice_index)
    if not 0 <= k < n:
        raise ShapeMismatchError(
            f"ttnn.{op}: Slice index and num_slices don't match! Index = {k} num_slices = {n}.\n"
            f"fix: use 0 <= slice_index < num_slices."
        )
    if t._layout is not Layout.TILE:
        raise MemoryConfigError(
            f"ttnn.{op}: Currently, only tile layout is supported for partial I->S (got "
            f"{t._layout!r}).\nfix: ttnn.to_layout(t, ttnn.TILE_LAYOUT) first."
        )
    height, _ = _height_width(t)
    logical = int(np.prod(t._shape[:-1])) if t._shape else 1
    if height % n:
        raise ShapeMismatchError(
            f"ttnn.{op}: Total height of a tensor must be divisible by num_slices! (height "
            f"{height} of per-device padded shape {list(tile_padded(t._shape))}, num_slices {n}).\n"
            "fix: pick num_slices dividing the flattened height."
        )
    if logical != height:
        raise ShapeMismatchError(
            f"ttnn.{op}: per-device shape {list(t._shape)} has tile padding in its height "
            f"({logical} logical rows, {height} padded); ttjax slices tile-aligned heights only.\n"
            "fix: pad the height to a multiple of 32 first."
        )
    return n, k


def interleaved_to_sharded_partial(
    input_tensor: Tensor,
    grid: Any,
    shard_shape: Any,
    num_slices: int,
    slice_index: int,
    shard_scheme: TensorMemoryLayout,
    shard_orientation: ShardOrientation,
    *,
    output_dtype: DataType | None = None,
) -> Tensor:
    """Row slice ``slice_index`` of ``num_slices`` of the tensor (seen as [height, width]),
    sharded over L1 cores, shaped ``[1, 1, height // num_slices, width]`` (TT-NN's semantics).
    """
    op = "interleaved_to_sharded_partial"
    n, k = _check_slices(op, input_tensor, num_slices, slice_index)
    if isinstance(grid, CoreRangeSet):
        raise MemoryConfigError(
            f"ttnn.{op}: Unsupported type for grid. CoreRangeSet not supported. Switch to a "
            "different type.\nfix: pass the grid size as a ttnn.CoreCoord."
        )
    height, width = _height_width(input_tensor)
    rows = height // n
    shape2 = (int(shard_shape[0]), int(shard_shape[1]))
    cores = _grid_set(op, grid, shard_scheme, shape2, shard_orientation, rows, width)
    mc = MemoryConfig(shard_scheme, BufferType.L1, ShardSpec(cores, shape2, shard_orientation))
    dt = check_dtype(op, output_dtype)

    def fn(x: Any) -> Any:
        flat = jnp.reshape(x, (height, width))
        return jnp.reshape(
            jax.lax.slice_in_dim(flat, k * rows, (k + 1) * rows, axis=0), (1, 1, rows, width)
        )

    return run_op(op, fn, [input_tensor], static=(n, k, dt), out_dtype=dt, memory_config=mc)


def sharded_to_interleaved_partial(
    input_tensor: Tensor,
    cache_tensor: Tensor,
    num_slices: int,
    slice_index: int,
    *,
    memory_config: MemoryConfig | None = None,
    output_dtype: DataType | None = None,
) -> Tensor:
    """Write ``input_tensor``'s rows into row slice ``slice_index`` of ``num_slices`` of
    ``cache_tensor`` (both seen as [height, width]), in place; returns ``cache_tensor``.
    """
    op = "sharded_to_interleaved_partial"
    if not isinstance(cache_tensor, Tensor):
        raise TTJaxError(
            f"ttnn.{op}: cache_tensor is a {type(cache_tensor).__name__}, not a ttnn Tensor.\n"
            "fix: pass the interleaved tensor to write into."
        )
    n, k = _check_slices(op, cache_tensor, num_slices, slice_index)
    height, width = _height_width(cache_tensor)
    rows = height // n
    in_h, in_w = _height_width(input_tensor)
    if (in_h, in_w) != (rows, width):
        raise ShapeMismatchError(
            f"ttnn.{op}: the input's per-device shape {list(input_tensor._shape)} ([{in_h}, "
            f"{in_w}] as rows x width) is not one of {n} slices of the cache's "
            f"{list(cache_tensor._shape)} ([{rows}, {width}] each).\nfix: slice the cache "
            "with the same num_slices the input was made with."
        )

    def fn(cache: Any, x: Any) -> Any:
        flat = jnp.reshape(cache, (height, width))
        upd = jnp.reshape(x, (rows, width)).astype(flat.dtype)
        flat = jax.lax.dynamic_update_slice_in_dim(flat, upd, k * rows, axis=0)
        return jnp.reshape(flat, cache.shape)

    # TT-NN writes into cache_tensor's own buffer, so the cache keeps its memory config;
    # memory_config= only names the op's (unused) output config there.
    mc = cache_tensor.memory_config()
    out = run_op(
        op,
        fn,
        [cache_tensor, input_tensor],
        static=(n, k),
        out_dtype=cache_tensor._dtype,
        memory_config=mc,
    )
    return cache_tensor.assign(out)


def reshard(
    input_tensor: Tensor, output_memory_config: MemoryConfig, output_tensor: Tensor | None = None
) -> Tensor:
    """The tensor under another sharded memory config (TT-NN's ``ttnn.reshard``); with
    ``output_tensor`` the result is written there and that tensor is returned."""
    op = "reshard"
    _need_shard_spec(op, output_memory_config)
    if not output_memory_config.is_sharded():
        raise MemoryConfigError(
            f"ttnn.{op}: output_memory_config {output_memory_config!r} is interleaved.\n"
            "fix: use ttnn.sharded_to_interleaved for an interleaved result."
        )
    return write_output(_convert(op, input_tensor, output_memory_config, None), output_tensor)


def reallocate(tensor: Tensor, memory_config: MemoryConfig | None = None) -> Tensor:
    """A fresh copy of ``tensor`` (in ``memory_config``, default its own), the input being
    deallocated, as TT-NN's ``ttnn.reallocate`` (a ``move``) does to defragment memory."""
    op = "reallocate"
    mc = tensor.memory_config() if memory_config is None else memory_config
    _need_shard_spec(op, mc)
    out = _convert(op, tensor, mc, None)
    tensor.deallocate(True)
    return out


def get_memory_config(tensor: Tensor) -> MemoryConfig | None:
    """The memory config of a device tensor, None for a host tensor (TT-NN's
    ``ttnn.get_memory_config``)."""
    return tensor.memory_config() if tensor.storage_type() is StorageType.DEVICE else None


def deallocate(tensor: Tensor, force: bool = True) -> None:
    """Free ``tensor``'s buffers (TT-NN's ``ttnn.deallocate``); later use raises
    ``DeallocatedTensorError``."""
    if not isinstance(tensor, Tensor):
        raise TTJaxError(
            f"ttnn.deallocate: {type(tensor).__name__} is not a ttnn Tensor.\n"
            "fix: pass the tensor to free."
        )
    tensor.deallocate(force)


def dram_prefetcher(
    tensors: Sequence[Tensor],
    num_layers: int,
    global_cb: Any,
    *,
    enable_performance_mode: bool = False,
) -> Tensor:
    """TT-NN's ``ttnn.dram_prefetcher`` (ttnn/cpp/ttnn/operations/prefetcher): on a chip it streams
    ``num_layers`` layers of the weights in ``tensors[:-1]`` from DRAM into ``global_cb`` on the
    receiver cores, where the matmuls given ``global_cb=`` read them; ``tensors[-1]`` is the table
    of their buffer addresses. ttjax's matmuls read their weights directly, so no values move;
    every TT-NN rule is checked (DramPrefetcher::validate) and, as in TT-NN, a [32, 32] tensor of
    the first weight's dtype comes back (a placeholder to deallocate after the layers ran)."""
    op = "dram_prefetcher"
    tensors = list(tensors)

    def fail(rule: str, fix: str) -> MemoryConfigError:
        return MemoryConfigError(f"ttnn.{op}: {rule}.\nfix: {fix}")

    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise fail("Must have at least one input tensor (the weights, then their address table)",
                   "pass prefetcher_setup.get_input_tensors().")  # fmt: skip
    if int(num_layers) <= 0:
        raise fail(f"Prefetcher must run for at least 1 layer (num_layers={num_layers})",
                   "pass num_layers >= 1.")  # fmt: skip
    if global_cb is None:
        raise fail("Global circular buffer must be provided",
                   "ttnn.create_global_circular_buffer(mesh, sender_receiver_mapping, size).")  # fmt: skip
    # TT-NN compares the receiver sets' range counts (CoreRangeSet::size) of the first
    # num_readers senders only, num_readers being the cores of tensors[0]'s shard grid, and takes
    # the receivers per sender from sender 0.
    mapping = list(global_cb.sender_receiver_core_mapping)
    # (an unsharded tensors[0] has no readers here; the width-sharding rule below refuses it)
    spec = tensors[0].memory_config().shard_spec
    num_readers = spec.num_cores() if spec is not None else 0
    if num_readers > len(mapping) or not mapping:
        raise fail(f"the global circular buffer maps {len(mapping)} sender cores, fewer than "
                   f"the {num_readers} readers (cores of tensors[0]'s shard grid)",
                   "give the global circular buffer a sender core for every DRAM reader.")  # fmt: skip

    def size(receivers: Any) -> int:
        return len(receivers.ranges()) if hasattr(receivers, "ranges") else 1

    for _, receivers in mapping[:num_readers]:
        if size(receivers) != size(mapping[0][1]):
            raise fail("Global circular buffer must have same number of receivers for each "
                       "sender core", "give every reader's sender core as many receiver "
                       "core ranges.")  # fmt: skip
    per_sender = mapping[0][1].num_cores()
    weights, addrs = tensors[:-1], tensors[-1]
    for i, t in enumerate(weights):
        mc = t.memory_config()
        if t.layout != Layout.TILE:
            raise fail(f"All tensors must be tilized (tensor {i} is {t.layout!r})",
                       "create the weights with layout=ttnn.TILE_LAYOUT.")  # fmt: skip
        if (
            mc.memory_layout is not TensorMemoryLayout.WIDTH_SHARDED
            or mc.buffer_type is not BufferType.DRAM
        ):
            raise fail(f"Input tensors must be width sharded in DRAM (tensor {i}: {mc!r})",
                       "create the weights with a DRAM WIDTH_SHARDED memory_config.")  # fmt: skip
        if mc.shard_spec is not None and mc.shard_spec.shape[1] % per_sender:
            raise fail(f"All tensors' padded shard size (in last dim) {mc.shard_spec.shape[1]} must be "
                       f"divisible by the number of receiver cores per sender {per_sender}",
                       "pad the weights' shard width to a multiple of the receivers per sender.")  # fmt: skip
        if t.dtype not in (DataType.BFLOAT4_B, DataType.BFLOAT8_B, DataType.BFLOAT16):
            raise fail(f"Input tensors must be of type Bfp4_b, Bfp8_b, or Float16_b (tensor {i} is "
                       f"{t.dtype!r})", "store the weights as bfloat4_b, bfloat8_b or bfloat16.")  # fmt: skip
    amc = addrs.memory_config()
    if (
        addrs.layout != Layout.ROW_MAJOR
        or amc.memory_layout is not TensorMemoryLayout.HEIGHT_SHARDED
        or amc.buffer_type is not BufferType.L1
        or addrs.dtype is not DataType.UINT32
    ):
        raise fail(f"Tensor containing addresses must be row major, height sharded in L1 and of "
                   f"type UInt32 (got {addrs.layout!r}, {amc!r}, {addrs.dtype!r})",
                   "build it as prefetcher_setup.get_tensor_addrs() does.")  # fmt: skip
    first = weights[0] if weights else addrs
    mesh = common_mesh(op, tensors)
    out_dtype = first.dtype
    store = (DataType.BFLOAT16 if out_dtype.is_block_float else out_dtype).numpy_dtype

    def fn(_: Any) -> Any:
        return jnp.zeros((32, 32), store)

    return run_op(op, fn, [first], mesh=mesh, out_dtype=out_dtype,
                  memory_config=DRAM_MEMORY_CONFIG)  # fmt: skip


__all__ = [
    "deallocate",
    "dram_prefetcher",
    "get_memory_config",
    "interleaved_to_sharded",
    "interleaved_to_sharded_partial",
    "reallocate",
    "reshard",
    "sharded_to_interleaved",
    "sharded_to_interleaved_partial",
    "to_memory_config",
]


def move(input_tensor: Tensor, memory_config: MemoryConfig | None = None) -> Tensor:
    """The tensor in a fresh buffer (``memory_config``, default its own), the input freed, as
    TT-NN's ``ttnn.move`` (the op :func:`reallocate` runs)."""
    return reallocate(input_tensor, memory_config)


def is_sharded(tensor: Tensor) -> bool:
    """Whether ``tensor``'s memory config is sharded (``ttnn.is_sharded(t)``)."""
    return tensor.is_sharded()


def is_tensor_storage_on_device(tensor: Tensor) -> bool:
    """Whether ``tensor`` lives on a device, not on the host."""
    return tensor.storage_type() is StorageType.DEVICE
