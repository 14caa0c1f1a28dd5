"""Memory-config ops: to_memory_config, interleaved <-> sharded (and their ``_partial`` slices),
deallocate.

A tensor carries its TT-NN memory config (``t.memory_config()``); these ops change it (the values
never change: XLA decides where buffers live) after validating sharded configs against the
tensor's per-device padded shape, as TT-NN does. The ``_partial`` forms move one of
``num_slices`` row slices, as TT-NN's ``sharded_partial`` ops do.

>>> y = ttnn.to_memory_config(x, ttnn.L1_MEMORY_CONFIG, dtype=ttnn.bfloat16)
>>> y.memory_config() == ttnn.L1_MEMORY_CONFIG
True
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax import _blockfloat, _capture
from ttjax._dispatch import common_mesh, output_memory_config, run_op
from ttjax.enums import DataType, Layout, StorageType
from ttjax.errors import MemoryConfigError, ShapeMismatchError, TTJaxError
from ttjax.hardware import (
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
from ttjax.ops._common import check_dtype, write_output
from ttjax.tensor import Tensor, tile_padded


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


__all__ = [
    "deallocate",
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
