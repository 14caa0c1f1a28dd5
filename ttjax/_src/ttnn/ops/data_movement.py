"""Shape and data-movement ops, per device: reshape, permute, transpose, concat, slice, split,
repeat, pad, embedding (``to_layout`` and the tilize family are :mod:`ttjax._src.ttnn.ops.layout`).

Every shape argument is a *per-device* shape, as in TT-NN: reshaping a tensor sharded over 4
devices reshapes each device's quarter.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from ttjax._src.core import specs as _specs
from ttjax._src.core.dispatch import default_placements, moves_whole_blocks, per_field, run_op
from ttjax._src.core.enums import DataType, EmbeddingsType, Layout, StorageType
from ttjax._src.core.errors import LayoutError, ShapeMismatchError, TensorIndexError, TTJaxError
from ttjax._src.core.hardware import DRAM_MEMORY_CONFIG
from ttjax._src.core.placements import Placement, PlacementLocal, PlacementReplicate, PlacementShard
from ttjax._src.core.tensor import Tensor, deallocated_error, host_blocks
from ttjax._src.ttnn.ops.common import check_dtype, check_hw_kwargs, norm_dim, write_output
from ttjax._src.ttnn.ops.memory import to_memory_config


def _resolve_shape(op: str, t: Tensor, shape: Sequence[int]) -> tuple[int, ...]:
    dims = [int(s) for s in shape]
    size = int(np.prod(t._shape))
    if dims.count(-1) > 1:
        raise ShapeMismatchError(
            f"ttnn.{op}: shape {dims} has more than one -1.\nfix: infer one dim at most."
        )
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        if known == 0 or size % known:
            raise ShapeMismatchError(
                f"ttnn.{op}: cannot reshape per-device shape {list(t._shape)} ({size} elements) "
                f"into {dims}.\nfix: the new shape must hold the same number of elements per device."
            )
        dims[dims.index(-1)] = size // known
    if int(np.prod(dims)) != size:
        raise ShapeMismatchError(
            f"ttnn.{op}: cannot reshape per-device shape {list(t._shape)} ({size} elements) into "
            f"{dims} ({int(np.prod(dims))} elements).\nfix: shapes are per device; keep the "
            "element count of one device's shard."
        )
    return tuple(dims)


def reshape(
    input_tensor: Tensor,
    shape: Sequence[int],
    padded_shape: Sequence[int] | None = None,
    *,
    memory_config: Any = None,
    pad_value: Any = None,
    recreate_mapping_tensor: bool = False,
    **kwargs: Any,
) -> Tensor:
    """Reshape each device's tensor to ``shape`` (a per-device shape; one -1 allowed).

    TT-NN's 3-argument form ``reshape(t, shape, padded_shape)`` sets the padded shape too: with
    the same element count it is an ordinary reshape; with a different logical size it views the
    tensor's padded data as ``padded_shape`` and keeps the ``shape`` corner (e.g. ``[1, 1, 32, n]``
    to logical ``[1, 1, 8, n]``, padded ``[1, 1, 32, n]``: the first 8 rows).
    """
    check_hw_kwargs("reshape", kwargs)
    if padded_shape is not None:
        return _reshape_padded(input_tensor, shape, padded_shape, memory_config)
    new = _resolve_shape("reshape", input_tensor, shape)
    if new == input_tensor._shape and memory_config is None:
        return input_tensor
    if isinstance(input_tensor, Tensor) and input_tensor._storage is StorageType.HOST:
        return _reshape_host(input_tensor, new)
    return run_op(
        "reshape",
        lambda x: jnp.reshape(x, new),
        [input_tensor],
        static=new,
        memory_config=memory_config,
    )


def _reshape_host(t: Tensor, new: tuple[int, ...]) -> Tensor:
    """TT-NN reshapes host tensors too (a view of host storage): every shard is reshaped; an
    axis that sharded a dim now holds per-device data (PlacementLocal)."""
    if t._data is None:
        raise deallocated_error("ttnn.reshape", t)
    spec = t._spec
    if spec.mesh is None:
        return Tensor(np.reshape(t._data, new), spec.replace(shape=new))
    mesh_shape = tuple(spec.mesh.shape)
    blocks = host_blocks(t).reshape(mesh_shape + new)
    placements = tuple(
        p if isinstance(p, PlacementReplicate) else PlacementLocal() for p in spec.placements
    )
    data = _specs.from_local_blocks(np, blocks, placements, mesh_shape)
    return Tensor(np.ascontiguousarray(data), spec.replace(shape=new, placements=placements))


def _reshape_padded(
    t: Tensor, shape: Sequence[int], padded_shape: Sequence[int], memory_config: Any
) -> Tensor:
    logical = tuple(int(d) for d in shape)
    padded = tuple(int(d) for d in padded_shape)
    if len(logical) != len(padded) or any(p < s for s, p in zip(logical, padded)) or -1 in logical:
        raise ShapeMismatchError(
            f"ttnn.reshape: padded_shape {list(padded)} must have the rank of shape "
            f"{list(logical)} and be at least as large in every dim (no -1).\n"
            "fix: pass the logical shape and its padded shape, e.g. (1, 1, 8, 64), (1, 1, 32, 64)."
        )
    if int(np.prod(logical)) == int(np.prod(t._shape)):
        return reshape(t, logical, memory_config=memory_config)
    src_padded = tuple(t.padded_shape)
    if int(np.prod(padded)) != int(np.prod(src_padded)):
        raise ShapeMismatchError(
            f"ttnn.reshape: cannot view per-device shape {list(t._shape)} (padded "
            f"{list(src_padded)}, {int(np.prod(src_padded))} elements) as shape {list(logical)} "
            f"padded {list(padded)} ({int(np.prod(padded))} elements).\nfix: the padded shapes "
            "must hold the same number of elements, or the logical shapes must."
        )
    pads = tuple((0, p - s) for s, p in zip(t._shape, src_padded))
    corner = tuple(builtins.slice(0, s) for s in logical)

    def fn(x: Any) -> Any:
        full = jnp.pad(x, pads) if any(b for _, b in pads) else x
        return jnp.reshape(full, padded)[corner]

    return run_op(
        "reshape_padded",
        fn,
        [t],
        static=(logical, padded),
        memory_config=memory_config,
    )


view = reshape


def squeeze(input_tensor: Tensor, dim: int = 0, **kwargs: Any) -> Tensor:
    """Drop size-1 dim ``dim`` from each device's tensor."""
    d = norm_dim("squeeze", input_tensor, dim)
    if input_tensor._shape[d] != 1:
        return input_tensor
    new = input_tensor._shape[:d] + input_tensor._shape[d + 1 :]
    return reshape(input_tensor, new, **kwargs)


def unsqueeze(input_tensor: Tensor, dim: int, **kwargs: Any) -> Tensor:
    """Insert a size-1 dim at ``dim`` in each device's tensor."""
    rank = len(input_tensor._shape)
    d = dim + rank + 1 if dim < 0 else dim
    if not 0 <= d <= rank:
        raise ShapeMismatchError(
            f"ttnn.unsqueeze: dim={dim} is out of range for rank {rank}.\nfix: use dim in [{-rank - 1}, {rank}]."
        )
    new = input_tensor._shape[:d] + (1,) + input_tensor._shape[d:]
    return reshape(input_tensor, new, **kwargs)


def unsqueeze_to_4D(input_tensor: Tensor, **kwargs: Any) -> Tensor:
    """Prepend size-1 dims until each device's tensor has rank 4."""
    shape = input_tensor._shape
    if len(shape) >= 4:
        return input_tensor
    return reshape(input_tensor, (1,) * (4 - len(shape)) + tuple(shape), **kwargs)


def _permuted_rule(perm: tuple[int, ...]) -> Any:
    inverse = {d: i for i, d in enumerate(perm)}

    def rule(
        tensors: Sequence[Tensor], shapes: Sequence[tuple[int, ...]]
    ) -> list[tuple[Placement, ...]]:
        (t,) = tensors
        out = default_placements(tensors, shapes, len(t._placements))[0]
        mapped = tuple(
            PlacementShard(inverse[p.dim])
            if isinstance(p, PlacementShard) and isinstance(q, PlacementShard)
            else q
            for p, q in zip(t._placements, out)
        )
        return [mapped]

    return rule


def permute(
    input_tensor: Tensor, dims: Sequence[int], *, memory_config: Any = None, **kwargs: Any
) -> Tensor:
    """Permute the dims of each device's tensor (sharded dims follow their data)."""
    check_hw_kwargs("permute", kwargs)
    rank = len(input_tensor._shape)
    perm = tuple(norm_dim("permute", input_tensor, d, "dims") for d in dims)
    if sorted(perm) != list(range(rank)):
        raise ShapeMismatchError(
            f"ttnn.permute: dims={list(dims)} is not a permutation of {list(range(rank))}.\n"
            "fix: name every dim exactly once."
        )
    return run_op(
        "permute",
        lambda x: jnp.transpose(x, perm),
        [input_tensor],
        static=perm,
        placement_rule=_permuted_rule(perm),
        memory_config=memory_config,
    )


def transpose(
    input_tensor: Tensor, dim0: int, dim1: int, *, memory_config: Any = None, **kwargs: Any
) -> Tensor:
    """Swap two dims of each device's tensor."""
    check_hw_kwargs("transpose", kwargs)
    a = norm_dim("transpose", input_tensor, dim0, "dim0")
    b = norm_dim("transpose", input_tensor, dim1, "dim1")
    perm = list(range(len(input_tensor._shape)))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(input_tensor, perm, memory_config=memory_config)


def concat(
    tensors: Sequence[Tensor],
    dim: int = 0,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Concatenate each device's tensors along ``dim`` (no communication).

    One tensor is moved to ``memory_config`` (DRAM when not given), as TT-NN does
    (concat.cpp: ``input_tensors.size() == 1`` returns ``to_memory_config``): inside a program
    that is nothing. Block-float tensors whose groups of 16 stay whole are joined as stored.
    """
    check_hw_kwargs("concat", kwargs)
    tensors = list(tensors)
    if not tensors:
        raise TTJaxError(
            "ttnn.concat needs at least one tensor.\nfix: pass a non-empty list of tensors."
        )
    d = norm_dim("concat", tensors[0], dim)
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        out = to_memory_config(tensors[0], memory_config or DRAM_MEMORY_CONFIG)
        return write_output(out, output_tensor)
    out = run_op(
        "concat",
        lambda *xs: jnp.concatenate(xs, axis=d),
        tensors,
        static=(d, len(tensors)),
        memory_config=memory_config,
        blocks_fn=per_field(lambda *xs: jnp.concatenate(xs, axis=d))
        if all(isinstance(t, Tensor) and moves_whole_blocks(t._spec, d) for t in tensors)
        else None,
    )
    return write_output(out, output_tensor)


def stack(input_tensors: Sequence[Tensor], dim: int) -> Tensor:
    """Stack each device's tensors along a new dim ``dim`` (torch.stack), per device."""
    tensors = list(input_tensors)
    if not tensors:
        raise TTJaxError("ttnn.stack needs at least one tensor.\nfix: pass a non-empty list.")
    rank = len(tensors[0]._shape)
    d = dim + rank + 1 if dim < 0 else dim
    if not 0 <= d <= rank:
        raise ShapeMismatchError(
            f"ttnn.stack: dim={dim} is out of range for rank-{rank} inputs.\n"
            f"fix: use dim in [{-rank - 1}, {rank}]."
        )
    return run_op("stack", lambda *xs: jnp.stack(xs, axis=d), tensors, static=(d, len(tensors)))


def expand(
    input_tensor: Tensor, output_shape: Sequence[int], *, memory_config: Any = None
) -> Tensor:
    """Repeat size-1 dims up to ``output_shape`` (-1 keeps a dim), per device, with TT-NN's rule
    (ttnn/cpp/.../expand/expand.cpp): dims are matched from the left and become a repeat."""
    shape = input_tensor._shape
    target = [int(s) for s in output_shape]
    if len(shape) > len(target):
        raise ShapeMismatchError(
            f"ttnn.expand: Only size 1 dimensions can be expanded in the output shape (per-device "
            f"shape {list(shape)} has more dims than {target}).\nfix: give one size per dim."
        )
    reps = []
    for i, t in enumerate(target):
        if i >= len(shape):
            reps.append(t)
        elif t in (-1, shape[i]):
            reps.append(1)
        elif shape[i] == 1:
            reps.append(t)
        else:
            raise ShapeMismatchError(
                f"ttnn.expand: Only size 1 dimensions can be expanded in the output shape: dim {i} "
                f"of per-device shape {list(shape)} is {shape[i]}, asked for {t}.\n"
                "fix: expand only size-1 dims (or pass -1 to keep one)."
            )
    return repeat(input_tensor, reps, memory_config=memory_config)


def broadcast_to(
    input: Tensor,
    output_shape: Sequence[int],
    *,
    memory_config: Any = None,
    output: Tensor | None = None,
) -> Tensor:
    """Broadcast size-1 dims to ``output_shape`` (numpy's rule, dims matched from the right; at
    most 4-D), per device: TT-NN's ``ttnn.experimental.broadcast_to``
    (ttnn/cpp/ttnn/operations/experimental/bcast_to/bcast_to.cpp)."""
    op = "experimental.broadcast_to"
    shape = tuple(input._shape)
    target = tuple(int(s) for s in output_shape)
    if len(shape) > len(target) or len(target) > 4:
        raise ShapeMismatchError(
            f"ttnn.{op}: Input tensor shape {list(shape)} must have at most as many dims as the "
            f"broadcast shape {list(target)}, both at most 4D.\nfix: pass an output_shape of the "
            "input's rank (up to 4 dims)."
        )
    for i in range(1, len(shape) + 1):
        if shape[-i] not in (1, target[-i]):
            raise ShapeMismatchError(
                f"ttnn.{op}: Input dimension {-i} (size {shape[-i]}) cannot be broadcast to "
                f"output dimension {-i} (size {target[-i]}).\nfix: broadcast only size-1 dims."
            )
    if input._layout is not Layout.TILE:
        raise LayoutError(
            f"ttnn.{op}: Input tensor layout must be TILE (got {input._layout!r}).\n"
            "fix: ttnn.to_layout(input, ttnn.TILE_LAYOUT)."
        )

    def fn(x: Any) -> Any:
        return jnp.broadcast_to(x, target)

    out = run_op(op, fn, [input], static=(target,), memory_config=memory_config)
    return write_output(out, output)


def tril(input_tensor: Tensor, diagonal: int = 0, *, memory_config: Any = None) -> Tensor:
    """The lower triangle of each device's last two dims: entries above ``diagonal`` become 0
    (torch.tril's rule; TT-NN's ``ttnn.tril``).

    >>> tuple(ttnn.tril(x).shape)
    (1, 1, 32, 32)
    """
    if len(input_tensor._shape) < 2:
        raise ShapeMismatchError(
            f"ttnn.tril: the input has per-device shape {list(input_tensor._shape)}; tril needs at "
            "least 2 dims.\nfix: reshape to [..., rows, cols]."
        )
    k = int(diagonal)

    def fn(x: Any) -> Any:
        return jnp.tril(x, k)

    return run_op("tril", fn, [input_tensor], static=(k,), memory_config=memory_config)


def _fill_rm(
    op: str, sizes: Sequence[int], any: Tensor, val_hi: float, val_lo: float, memory_config: Any
) -> Tensor:
    n, c, h, w, h_fill, w_fill = (int(v) for v in sizes)
    if min(n, c, h, w) <= 0 or not (0 <= h_fill <= h and 0 <= w_fill <= w):
        raise ShapeMismatchError(
            f"ttnn.{op}: N, C, H, W = {n}, {c}, {h}, {w} with hOnes={h_fill}, wOnes={w_fill}; "
            "TT-NN needs N, C, H, W > 0, hOnes <= H and wOnes <= W.\nfix: pass a fill region "
            "inside the [H, W] plane."
        )
    if any._dtype is not DataType.BFLOAT16:
        raise TTJaxError(
            f"ttnn.{op}: the 'any' tensor sets the output dtype and must be bfloat16 (got "
            f"{any._dtype!r}).\nfix: pass a bfloat16 tensor as `any`."
        )
    hi, lo = float(val_hi), float(val_lo)

    def fn(x: Any) -> Any:
        inside = (jnp.arange(h)[:, None] < h_fill) & (jnp.arange(w)[None, :] < w_fill)
        plane = jnp.where(inside, jnp.asarray(hi, x.dtype), jnp.asarray(lo, x.dtype))
        return jnp.broadcast_to(plane, (n, c, h, w))

    return run_op(
        op,
        fn,
        [any],
        static=(n, c, h, w, h_fill, w_fill, hi, lo),
        out_layout=Layout.ROW_MAJOR,
        memory_config=memory_config,
    )


def fill_rm(
    N: int,
    C: int,
    H: int,
    W: int,
    hOnes: int,
    wOnes: int,
    any: Tensor,
    val_hi: float,
    val_lo: float,
    *,
    memory_config: Any = None,
) -> Tensor:
    """A new row-major [N, C, H, W] tensor on ``any``'s devices (and of its dtype): ``val_hi``
    where ``h < hOnes and w < wOnes`` in every [H, W] plane, ``val_lo`` elsewhere (TT-NN's
    ``ttnn.fill_rm``, ttnn/cpp/ttnn/operations/data_movement/fill_rm).

    >>> out = ttnn.fill_rm(1, 1, 2, 3, 1, 2, ttnn.typecast(x, ttnn.bfloat16), 5.0, 0.0)
    >>> ttnn.to_torch(ttnn.get_device_tensors(out)[0])
    tensor([[[[5., 5., 0.],
              [0., 0., 0.]]]], dtype=torch.bfloat16)
    """
    return _fill_rm("fill_rm", (N, C, H, W, hOnes, wOnes), any, val_hi, val_lo, memory_config)


def fill_ones_rm(
    N: int,
    C: int,
    H: int,
    W: int,
    hOnes: int,
    wOnes: int,
    any: Tensor,
    *,
    memory_config: Any = None,
) -> Tensor:
    """``ttnn.fill_rm`` with ``val_hi=1`` and ``val_lo=0`` (TT-NN's ``ttnn.fill_ones_rm``)."""
    return _fill_rm("fill_ones_rm", (N, C, H, W, hOnes, wOnes), any, 1.0, 0.0, memory_config)


def reshape_on_device(
    input_tensor: Tensor,
    W: int,
    Z: int,
    Y: int,
    X: int,
    *,
    memory_config: Any = None,
) -> Tensor:
    """TT-NN's legacy 4-D reshape: ``reshape(t, (W, Z, Y, X))`` per device."""
    return reshape(input_tensor, (W, Z, Y, X), memory_config=memory_config)


def _index_key(index: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A hashable, validated form of a Python index (ints, slices, Ellipsis, None)."""
    if not isinstance(index, tuple):
        index = (index,)
    n_real = builtins.sum(1 for i in index if i is not None and i is not Ellipsis)
    if n_real > len(shape) or builtins.sum(1 for i in index if i is Ellipsis) > 1:
        raise ShapeMismatchError(
            f"index {index!r} does not fit a tensor of per-device shape {list(shape)}.\n"
            "fix: index at most one position per dim, with at most one `...`."
        )
    expanded: list[Any] = []
    for i in index:
        if i is Ellipsis:
            expanded += [builtins.slice(None)] * (len(shape) - n_real)
        else:
            expanded.append(i)
    key: list[Any] = []
    dim = 0
    for i in expanded:
        if i is None:
            key.append(("n",))
        elif isinstance(i, builtins.slice):
            key.append(("s", i.start, i.stop, i.step))
            dim += 1
        elif isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            size = shape[dim]
            if not -size <= int(i) < size:
                raise TensorIndexError(
                    f"index {int(i)} is out of range for dim {dim} of size {size} "
                    f"(per-device shape {list(shape)}).\nfix: indices are per device; use "
                    f"[{-size}, {size - 1}]."
                )
            key.append(("i", int(i)))
            dim += 1
        else:
            raise TTJaxError(
                f"unsupported index {i!r} ({type(i).__name__}).\nfix: use ints, slices, ... or None."
            )
    return tuple(key)


def _from_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for k in key:
        if k[0] == "n":
            out.append(None)
        elif k[0] == "s":
            out.append(builtins.slice(k[1], k[2], k[3]))
        else:
            out.append(k[1])
    return tuple(out)


def getitem(input_tensor: Tensor, index: Any) -> Tensor:
    """``tensor[index]`` on each device's tensor (ints, slices, ``...``, ``None``); a host
    tensor is sliced on the host, unit steps only, as TT-NN's ``Tensor.__getitem__`` does it
    (``ttnn/operations/core.py``: ``unpad`` of every shard)."""
    key = _index_key(index, input_tensor._shape)
    idx = _from_key(key)
    if isinstance(input_tensor, Tensor) and input_tensor._storage is StorageType.HOST:
        return _getitem_host(input_tensor, key, idx)
    return run_op("getitem", lambda x: x[idx], [input_tensor], static=key)


def _getitem_host(t: Tensor, key: tuple[Any, ...], idx: tuple[Any, ...]) -> Tensor:
    """``t[idx]`` of every shard of a host tensor; an axis that sharded a dim now holds
    per-device data (PlacementLocal), as :func:`_reshape_host` keeps it."""
    if t._data is None:
        raise deallocated_error("ttnn.Tensor.__getitem__", t)
    if any(k[0] == "s" and k[3] not in (None, 1) for k in key):
        raise ShapeMismatchError(
            f"ttnn.Tensor.__getitem__: Host tensors cannot be accessed with non-unit stride "
            f"(index {idx!r}).\nfix: slice with step 1, or move the tensor to a device first."
        )
    if t._dtype.is_block_float:
        raise LayoutError(
            f"ttnn.Tensor.__getitem__: a {t._dtype!r} host tensor is stored as whole tiles; "
            "TT-NN cannot unpad it on the host.\nfix: slice it on a device, or convert the "
            "source array with a bfloat16/float32 dtype."
        )
    spec = t._spec
    if spec.mesh is None:
        out = np.ascontiguousarray(np.asarray(t._data)[idx])
        return Tensor(out, spec.replace(shape=tuple(out.shape)))
    mesh_shape = tuple(spec.mesh.shape)
    blocks = host_blocks(t)[(builtins.slice(None),) * len(mesh_shape) + idx]
    placements = tuple(
        p if isinstance(p, PlacementReplicate) else PlacementLocal() for p in spec.placements
    )
    data = _specs.from_local_blocks(np, blocks, placements, mesh_shape)
    new = tuple(blocks.shape[len(mesh_shape) :])
    return Tensor(np.ascontiguousarray(data), spec.replace(shape=new, placements=placements))


def slice(
    input_tensor: Tensor,
    slice_start: Sequence[int] | None = None,
    slice_end: Sequence[int] | None = None,
    slice_step: Sequence[int] | None = None,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """``x[start0:end0:step0, start1:end1:step1, ...]`` on each device's tensor. TT-NN's binding
    also names them ``starts`` / ``ends`` / ``steps`` (its 4-D overload,
    ttnn/cpp/ttnn/operations/data_movement/slice/slice_pybind.cpp), as Falcon-7B calls it.

    >>> ttnn.slice(x, starts=(0, 0, 0, 0), ends=(1, 1, 16, 32), steps=(1, 1, 1, 1)).shape
    Shape([1, 1, 16, 32])
    """
    for alias, name in (("starts", "slice_start"), ("ends", "slice_end"), ("steps", "slice_step")):
        if alias in kwargs:
            given = {"slice_start": slice_start, "slice_end": slice_end, "slice_step": slice_step}
            if given[name] is not None:
                raise TTJaxError(
                    f"ttnn.slice: {alias}= and {name} were both given.\nfix: pass one of them."
                )
            value = kwargs.pop(alias)
            slice_start = value if name == "slice_start" else slice_start
            slice_end = value if name == "slice_end" else slice_end
            slice_step = value if name == "slice_step" else slice_step
    check_hw_kwargs("slice", kwargs)
    if slice_start is None or slice_end is None:
        raise TTJaxError(
            "ttnn.slice: the start and end indices are required.\n"
            "fix: ttnn.slice(x, [0, 0, 0, 0], [1, 1, 32, 32]) (or starts=..., ends=...)."
        )
    rank = len(input_tensor._shape)
    steps = list(slice_step) if slice_step is not None else [1] * len(slice_start)
    if not len(slice_start) == len(slice_end) == len(steps) == rank:
        raise ShapeMismatchError(
            f"ttnn.slice: starts {list(slice_start)}, ends {list(slice_end)} and steps {steps} must "
            f"each have one entry per dim of the rank-{rank} tensor.\nfix: give {rank} entries each."
        )
    index = tuple(
        builtins.slice(int(a), int(b), int(c)) for a, b, c in zip(slice_start, slice_end, steps)
    )
    return write_output(getitem(input_tensor, index), output_tensor)


def split(
    input_tensor: Tensor,
    split_size: int | Sequence[int],
    dim: int = 0,
    *,
    memory_config: Any = None,
    **kwargs: Any,
) -> tuple[Tensor, ...]:
    """Split each device's tensor along ``dim`` into pieces of ``split_size`` (torch semantics)."""
    check_hw_kwargs("split", kwargs)
    d = norm_dim("split", input_tensor, dim)
    size = input_tensor._shape[d]
    if isinstance(split_size, (int, np.integer)):
        split_size = int(split_size)
        if split_size <= 0:
            raise ShapeMismatchError(
                f"ttnn.split: split_size={split_size} must be positive.\n"
                "fix: pass the size of each piece (> 0), or a list of sizes."
            )
        sizes = [split_size] * (size // split_size) + (
            [size % split_size] if size % split_size else []
        )
    else:
        sizes = [int(s) for s in split_size]
        if builtins.sum(sizes) != size:
            raise ShapeMismatchError(
                f"ttnn.split: sizes {sizes} add up to {builtins.sum(sizes)}, but dim {d} has size {size} "
                "per device.\nfix: sizes must add up to the per-device dim size."
            )
    offsets = np.cumsum([0, *sizes]).tolist()
    bounds = tuple(itertools.pairwise(offsets))

    def fn(x: Any) -> Any:
        return tuple(jnp.take(x, jnp.arange(a, b), axis=d) for a, b in bounds)

    out = run_op("split", fn, [input_tensor], static=(d, bounds))
    return out if isinstance(out, tuple) else (out,)


def chunk(input_tensor: Tensor, chunks: int, dim: int = 0, **kwargs: Any) -> tuple[Tensor, ...]:
    """Split each device's tensor into ``chunks`` pieces along ``dim`` (torch.chunk semantics)."""
    d = norm_dim("chunk", input_tensor, dim)
    size = input_tensor._shape[d]
    return split(input_tensor, -(-size // chunks), d, **kwargs)


def repeat(
    input_tensor: Tensor,
    repeat_dims: Sequence[int],
    *,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Tile each device's tensor ``repeat_dims[d]`` times along every dim ``d`` (a list, tuple
    or ``ttnn.Shape``; the keyword is TT-NN's binding's, ``repeat_dims``)."""
    check_hw_kwargs("repeat", kwargs)
    reps = tuple(int(r) for r in repeat_dims)
    return run_op(
        "repeat",
        lambda x: jnp.tile(x, reps),
        [input_tensor],
        static=reps,
        memory_config=memory_config,
    )


def repeat_interleave(
    input_tensor: Tensor, repeats: int, dim: int, *, memory_config: Any = None, **kwargs: Any
) -> Tensor:
    """Repeat each element ``repeats`` times along ``dim`` (torch.repeat_interleave), per device."""
    check_hw_kwargs("repeat_interleave", kwargs)
    d = norm_dim("repeat_interleave", input_tensor, dim)
    r = int(repeats)
    return run_op(
        "repeat_interleave", lambda x: jnp.repeat(x, r, axis=d), [input_tensor], static=(r, d)
    )


def pad(
    input_tensor: Tensor,
    padding: Sequence[Any] | None = None,
    value: Any = None,
    fill_value: float | None = None,
    *,
    output_padded_shape: Sequence[int] | None = None,
    input_tensor_start: Sequence[int] | None = None,
    use_multicore: bool = True,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Pad each device's tensor, in TT-NN's two bound forms (ttnn/cpp/ttnn/operations/
    data_movement/pad/pad_pybind.cpp): ``pad(x, padding, value)`` with (before, after) per dim,
    leading dims optional; and ``pad(x, output_padded_shape, input_tensor_start, value)``: x
    placed at ``input_tensor_start`` inside a tensor of ``output_padded_shape`` (Falcon-7B's
    decode attention pads its query heads this way). A host tensor keeps its logical shape and
    values: TT-NN pads only its storage (see :func:`_pad_host`).

    >>> ttnn.pad(x, ((0, 0), (0, 0), (0, 16), (0, 0)), 0.0).shape
    Shape([1, 1, 48, 32])
    >>> ttnn.pad(q, [1, 8, 32, 16], [0, 0, 0, 0], 0.0).shape  # q [1, 2, 32, 16] -> 8 heads
    Shape([1, 8, 32, 16])
    """
    check_hw_kwargs("pad", kwargs)
    rank = len(input_tensor._shape)
    if output_padded_shape is not None or fill_value is not None:
        shape = output_padded_shape if output_padded_shape is not None else padding
        start = input_tensor_start if output_padded_shape is not None else value
        value = value if output_padded_shape is not None else fill_value
        if shape is None or start is None or value is None or not len(shape) == len(start) == rank:
            raise ShapeMismatchError(
                f"ttnn.pad: output_padded_shape {shape} and input_tensor_start {start} need "
                f"{rank} entries each, and a value.\nfix: ttnn.pad(x, [1, 1, 64, 64], "
                "[0, 0, 0, 0], 0.0)."
            )
        padding = [
            (int(b), int(o) - int(b) - int(n))
            for o, b, n in zip(shape, start, input_tensor._shape, strict=True)
        ]
    if padding is None or value is None:
        raise ShapeMismatchError(
            "ttnn.pad: padding and value are required.\n"
            "fix: ttnn.pad(x, ((0, 0), (0, 0), (0, 16), (0, 0)), 0.0)."
        )
    pairs = [tuple(int(v) for v in p) for p in padding]
    if len(pairs) > rank or any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise ShapeMismatchError(
            f"ttnn.pad: padding {pairs} must hold at most {rank} non-negative (before, after) pairs.\n"
            "fix: e.g. padding=((0, 0), (0, 0), (0, 16), (0, 0)); an output_padded_shape must "
            "hold the input at input_tensor_start."
        )
    pairs = [(0, 0)] * (rank - len(pairs)) + pairs
    if isinstance(input_tensor, Tensor) and input_tensor._storage is StorageType.HOST:
        return _pad_host(input_tensor, pairs)
    key = tuple(pairs)

    def fn(x: Any, v: Any) -> Any:
        return jnp.pad(x, key, constant_values=jnp.asarray(v, x.dtype))

    return run_op(
        "pad", fn, [input_tensor], static=key, scalars=(value,), memory_config=memory_config
    )


def _pad_host(t: Tensor, pairs: list[tuple[int, ...]]) -> Tensor:
    """TT-NN pads a host tensor's storage only (``Tensor::pad``, which ``pad.cpp`` calls off
    device): its padded shape grows, its logical shape and values stay, and those are what a
    ttjax tensor holds (segformer pads 3 image channels to 8 so, then reads ``shape[3]`` as the
    conv's ``in_channels``); a tile-layout one comes back as it was, as TT-NN returns it."""
    if t._data is None:
        raise deallocated_error("ttnn.pad", t)
    if t._layout is Layout.ROW_MAJOR and any(before for before, _ in pairs):
        raise ShapeMismatchError(
            f"ttnn.pad: padding {pairs} of a host tensor starts past 0; TT-NN keeps a host "
            "tensor's logical shape and pads only its storage, where that would move the values."
            "\nfix: ttnn.to_device(t, device) first, or pad only after each dim."
        )
    return Tensor(t._data, t._spec)


def _same_placements(tensors: Sequence[Tensor], shapes: Any) -> list[tuple[Placement, ...]]:
    return [tensors[0]._placements]


def copy(input_a: Tensor, input_b: Tensor, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.copy``: write ``input_a``'s values into ``input_b``, in place.

    Per-device shapes must match; values are cast to ``input_b``'s dtype and layout, and
    ``input_b`` takes ``input_a``'s placements. An open trace capture records the copy, so a
    replay writes into ``input_b`` again. Returns ``input_b``.

    >>> a = ttnn.from_torch(torch.ones(2, 32), device=mesh)
    >>> b = ttnn.zeros((2, 32), device=mesh)
    >>> ttnn.copy(a, b) is b, float(ttnn.to_torch(b, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)).sum())
    (True, 512.0)
    """
    check_hw_kwargs("copy", kwargs)
    if not isinstance(input_b, Tensor):
        raise TTJaxError(
            f"ttnn.copy: input_b is a {type(input_b).__name__}, not a ttnn Tensor.\n"
            "fix: preallocate the destination, e.g. ttnn.zeros_like(input_a)."
        )
    if input_b._shape != input_a._shape:
        raise ShapeMismatchError(
            f"ttnn.copy: input_a has per-device shape {list(input_a._shape)} but input_b has "
            f"{list(input_b._shape)}.\nfix: copy into a tensor of the same per-device shape."
        )
    out = run_op(
        "copy",
        lambda a, b: a,
        [input_a, input_b],
        out_dtype=input_b._dtype,
        out_layout=input_b._layout,
        placement_rule=_same_placements,
    )
    return input_b.assign(out)


def gather(
    input: Tensor,
    dim: int,
    index: Tensor,
    *,
    sparse_grad: bool = False,
    out: Tensor | None = None,
    memory_config: Any = None,
) -> Tensor:
    """``input``'s values at ``index`` along ``dim``, per device (TT-NN's ``ttnn.gather``,
    torch's ``gather``: ``out[i][j] = input[i][index[i][j]]`` for dim 1); the output has ``index``'s
    shape and ``input``'s dtype.

    >>> top = ttnn.gather(x, 3, ttnn.argmax(x, dim=3, keepdim=True))
    """
    d = norm_dim("gather", input, dim)
    if len(index._shape) != len(input._shape) or any(
        index._shape[i] > input._shape[i] for i in range(len(input._shape)) if i != d
    ):
        raise ShapeMismatchError(
            f"ttnn.gather: index {list(index._shape)} must have input's rank and be no larger "
            f"than input {list(input._shape)} outside dim {d}.\nfix: pass a matching index."
        )

    def local(x: Any, idx: Any) -> Any:
        grids = jnp.meshgrid(*[jnp.arange(n) for n in idx.shape], indexing="ij")
        grids[d] = idx.astype(jnp.int32)
        return x[tuple(grids)]

    result = run_op("gather", local, [input, index], static=(d,), memory_config=memory_config)
    return write_output(result, out)


def scatter(
    input: Tensor,
    dim: int,
    index: Tensor,
    src: Tensor,
    *,
    memory_config: Any = None,
    reduce: Any = None,
) -> Tensor:
    """``input`` with ``src``'s values written where ``index`` says along ``dim``, per device
    (TT-NN's ``ttnn.scatter``, torch's ``scatter``: ``out[i][index[i][j]] = src[i][j]`` for dim 1).
    ``index`` and ``src`` have one shape, equal to ``input``'s but along ``dim``; TT-NN supports
    no ``reduce`` yet (scatter_pybind.cpp), nor does ttjax.

    >>> y = ttnn.scatter(ttnn.zeros_like(x), 3, ttnn.argmax(x, dim=3, keepdim=True), x[:, :, :, :1])
    """
    if reduce is not None:
        raise TTJaxError(
            f"ttnn.scatter: reduce={reduce!r} is not supported (TT-NN's scatter has no reduction "
            "yet).\nfix: leave reduce unset."
        )
    d = norm_dim("scatter", input, dim)
    if tuple(index._shape) != tuple(src._shape) or len(index._shape) != len(input._shape):
        raise ShapeMismatchError(
            f"ttnn.scatter: index {list(index._shape)} and src {list(src._shape)} must have one "
            f"shape, of input's rank ({list(input._shape)}).\nfix: pass matching index and src."
        )
    others = [i for i in range(len(input._shape)) if i != d]
    if any(index._shape[i] > input._shape[i] for i in others):
        raise ShapeMismatchError(
            f"ttnn.scatter: index {list(index._shape)} is larger than input "
            f"{list(input._shape)} outside dim {d}.\nfix: index may only be smaller or equal."
        )

    def local(x: Any, idx: Any, values: Any) -> Any:
        grids = jnp.meshgrid(*[jnp.arange(n) for n in idx.shape], indexing="ij")
        grids[d] = idx.astype(jnp.int32)
        return x.at[tuple(grids)].set(values.astype(x.dtype))

    return run_op(
        "scatter",
        local,
        [input, index, src],
        static=(d,),
        out_dtype=input._dtype,
        memory_config=memory_config,
    )


def _check_embeddings_type(kind: Any, pad_token: int | None, w_shape: Sequence[int]) -> None:
    """Embeddings::validate (embedding_device_operation.cpp): a ``pad_token`` makes the lookup
    PADDED; PADDED needs one, BINARY needs a two-row table."""
    if kind is None or pad_token is not None:
        return
    if not isinstance(kind, EmbeddingsType):
        raise TTJaxError(
            f"ttnn.embedding: embeddings_type={kind!r} is not a ttnn.EmbeddingsType.\n"
            "fix: pass ttnn.EmbeddingsType.GENERIC, PADDED or BINARY."
        )
    if kind is EmbeddingsType.PADDED:
        raise TTJaxError(
            "ttnn.embedding: Pad token must be specified when PADDED Embeddings Type is "
            "specified.\nfix: pass pad_token= (the id whose rows come out as zeros)."
        )
    if kind is EmbeddingsType.BINARY and (len(w_shape) < 2 or w_shape[-2] != 2):
        raise ShapeMismatchError(
            f"ttnn.embedding: Weight tensor must have 2 embeddings for BINARY Embeddings Type "
            f"(got per-device weight {list(w_shape)}).\nfix: use EmbeddingsType.GENERIC."
        )


def embedding(
    input_tensor: Tensor,
    weight: Tensor,
    *,
    padding_idx: int | None = None,
    pad_token: int | None = None,
    layout: Layout | None = None,
    dtype: DataType | None = None,
    output_tensor: Tensor | None = None,
    memory_config: Any = None,
    embeddings_type: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Look up rows of ``weight`` for integer ids, per device, as TT-NN's ``ttnn.embedding``.

    ``weight`` is ``[vocab, hidden]`` or TT-NN's 4-D ``[1, 1, vocab, hidden]`` (rows along dim
    -2). Ids ``[batch, ..., seq]`` (batch = dim 0, seq = dim -1) give ``[batch, seq, hidden]``;
    1-D ids give ``[seq, hidden]``. Rows equal to ``padding_idx`` (TT-NN's binding's name;
    ``pad_token`` its C++ one) come out as zeros. With ``weight`` sharded on the hidden dim each
    device gets its slice of every embedding.
    """
    check_hw_kwargs("embedding", kwargs)
    out_dtype = check_dtype("embedding", dtype)
    if padding_idx is not None and pad_token is not None and padding_idx != pad_token:
        raise TTJaxError(
            f"ttnn.embedding: padding_idx={padding_idx} and pad_token={pad_token} disagree.\n"
            "fix: pass padding_idx= only (TT-NN's name for the pad token)."
        )
    pad = padding_idx if padding_idx is not None else pad_token
    ids_shape, w_shape = input_tensor._shape, weight._shape
    _check_embeddings_type(embeddings_type, pad, w_shape)
    if len(w_shape) < 2 or any(d != 1 for d in w_shape[:-2]):
        raise ShapeMismatchError(
            f"ttnn.embedding: weight has per-device shape {list(w_shape)}; TT-NN takes "
            "[vocab, hidden] or [1, 1, vocab, hidden].\nfix: reshape the weight to "
            "[1, 1, vocab, hidden]."
        )
    batch = 1 if len(ids_shape) <= 1 else ids_shape[0]
    seq = ids_shape[-1] if ids_shape else 1
    if batch * seq != int(np.prod(ids_shape)):
        raise ShapeMismatchError(
            f"ttnn.embedding: ids of per-device shape {list(ids_shape)} are read as [batch="
            f"{batch}, seq={seq}] ({batch * seq} ids) but hold {int(np.prod(ids_shape))}.\n"
            "fix: pass ids shaped [batch, seq] (or [seq], or [batch, 1, 1, seq])."
        )
    hidden = w_shape[-1]
    out_shape = (seq, hidden) if len(ids_shape) <= 1 else (batch, seq, hidden)

    def fn(ids: Any, w: Any) -> Any:
        ids_i = jnp.reshape(ids, (-1,)).astype(jnp.int32)
        table = jnp.reshape(w, w.shape[-2:])
        out = jnp.take(table, ids_i, axis=0, mode="clip")
        if pad is not None:
            out = jnp.where((ids_i == pad)[:, None], jnp.zeros((), w.dtype), out)
        return jnp.reshape(out, out_shape)

    out_layout = layout if layout is not None else weight._layout
    out = run_op(
        "embedding",
        fn,
        [input_tensor, weight],
        static=(pad, out_layout, out_shape),
        out_dtype=out_dtype or weight._dtype,
        out_layout=out_layout,
        memory_config=memory_config,
    )
    return write_output(out, output_tensor)
