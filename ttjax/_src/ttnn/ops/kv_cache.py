"""KV-cache writes, per device and in place as in TT-NN: ``fill_cache`` and ``update_cache``
(a prefill row, one decode token) and the paged family (``paged_update_cache``,
``paged_fused_update_cache``, ``paged_fill_cache``); kept apart from the attention that reads
the caches (:mod:`ttjax._src.ttnn.ops.transformer`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.dispatch import device_mask, run_op, spread_to_parent
from ttjax._src.core.enums import Layout
from ttjax._src.core.errors import LayoutError, ShapeMismatchError
from ttjax._src.core.placements import LOCAL, PlacementReplicate, PlacementShard
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.common import (
    _check_index,
    _check_int_tensor,
    _check_page_table,
    check_hw_kwargs,
    core_set,
    page_table_rows,
    write_output,
)


def _cache_rule(tensors: Any, shapes: Any) -> list[Any]:
    """A cache update keeps the cache's own layout; replicated axes become per-device only when
    the written values differ across them.

    Such an axis holds its devices' caches as blocks of dim 0 (``PlacementShard(0)``), not
    behind a hidden leading axis (``PlacementLocal``): the same per-device values, but a traced
    step's updated cache then needs no reshape, which XLA-CPU copied (a [1, *cache] layout of
    its own) once per cache and step.
    """
    cache = tensors[0]
    out = []
    for i, p in enumerate(cache._placements):
        if not isinstance(p, PlacementReplicate):
            out.append(p)
        elif all(isinstance(t._placements[i], PlacementReplicate) for t in tensors):
            out.append(p)
        else:
            out.append(PlacementShard(0) if len(shapes[0]) else LOCAL)
    return [tuple(out)]


def _on_part_of(cache: Tensor, input_tensor: Tensor) -> tuple[Tensor, list[Tensor]]:
    """``input_tensor`` over the cache's mesh, and ``[mask]`` when it was held on a block of it
    (the devices the write reaches, as TT-NN runs an op on its smallest input's coordinates)."""
    mesh = input_tensor._mesh
    if (
        mesh is not None
        and cache._mesh is not None
        and mesh is not cache._mesh
        and mesh._parent is cache._mesh
        and mesh._offset is not None
    ):
        spread, mask = spread_to_parent(input_tensor)
        return spread, [mask]
    return input_tensor, []


def _keep_outside(new: Any, cache: Any, mask: Sequence[Any]) -> Any:
    """``new`` where every per-device mask (if any) is 1, the old cache elsewhere."""
    if not mask:
        return new
    keep = functools.reduce(jnp.logical_and, [m.reshape(()) != 0 for m in mask])
    return jnp.where(keep, new, cache)


def _coords_mask(op: str, cache: Tensor, mesh_coords: Any) -> list[Tensor]:
    """``[mask]`` of the devices at ``mesh_coords`` (TT-NN's ``mesh_coords=``: the op runs on
    those devices only), or ``[]`` when it is None."""
    if mesh_coords is None:
        return []
    mesh = cache._mesh
    assert mesh is not None
    inside = np.zeros(tuple(mesh.shape), dtype=bool)
    for c in mesh_coords:
        coord = tuple(c.coords()) if hasattr(c, "coords") else tuple(c)
        if len(coord) != len(inside.shape) or not all(
            0 <= i < n for i, n in zip(coord, inside.shape)
        ):
            raise ShapeMismatchError(
                f"ttnn.{op}: mesh_coords holds {coord}, not a coordinate of the "
                f"{list(mesh.shape)} mesh.\nfix: pass ttnn.MeshCoordinate(row, col) values of it."
            )
        inside[coord] = True
    return [device_mask(mesh, inside)]


def fill_cache(cache_tensor: Tensor, input_tensor: Tensor, batch_idx: int, **kwargs: Any) -> Tensor:
    """Write a prefill's k or v [1, nkv, s, d] into ``cache_tensor[batch_idx, :, :s]`` in place.

    An input combined from some of the mesh's device tensors writes those devices' caches only.
    """
    check_hw_kwargs("fill_cache", kwargs)
    input_tensor, mask = _on_part_of(cache_tensor, input_tensor)

    def fn(cache: Any, x: Any, *rest: Any) -> Any:
        new = jax.lax.dynamic_update_slice(cache, x.astype(cache.dtype), (rest[-1], 0, 0, 0))
        return _keep_outside(new, cache, rest[:-1])

    out = run_op(
        "fill_cache",
        fn,
        [cache_tensor, input_tensor, *mask],
        scalars=(
            _check_index(
                "fill_cache", "batch_idx", batch_idx, cache_tensor._shape[0], "the cache batch"
            ),
        ),
        out_dtype=cache_tensor._dtype,
        placement_rule=_cache_rule,
    )
    return write_output(out, cache_tensor)


def update_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    update_idx: int,
    batch_offset: int = 0,
    **kwargs: Any,
) -> Tensor:
    """Write one decode step's k or v [1, nkv, b, d] at position ``update_idx`` of every user, in place."""
    check_hw_kwargs("update_cache", kwargs)

    def fn(cache: Any, x: Any, pos: Any, off: Any) -> Any:
        upd = jnp.transpose(x, (2, 1, 0, 3)).astype(cache.dtype)  # [b, nkv, 1, d]
        return jax.lax.dynamic_update_slice(cache, upd, (off, 0, pos, 0))

    out = run_op(
        "update_cache",
        fn,
        [cache_tensor, input_tensor],
        scalars=(
            _check_index(
                "update_cache", "update_idx", update_idx, cache_tensor._shape[2], "the cache length"
            ),
            int(batch_offset),
        ),
        out_dtype=cache_tensor._dtype,
        placement_rule=_cache_rule,
    )
    return write_output(out, cache_tensor)


def _check_update(
    op: str,
    cache_tensor: Tensor,
    input_tensor: Tensor,
    update_idxs: list[int] | None,
    update_idxs_tensor: Tensor | None,
    share: bool,
    page_table: Tensor | None,
    batch_offset: int,
) -> tuple[int, ...]:
    """TT-NN's checks of one (cache, input) pair of a decode-step write
    (paged_cache_operation.cpp ``validateUpdateOperation``); the positions of ``update_idxs``."""
    users = input_tensor._shape[1]
    if int(batch_offset) != 0:
        raise ShapeMismatchError(
            f"ttnn.{op}: batch_offset={batch_offset}; TT-NN: batch_offset must be 0.\n"
            "fix: shard the users over devices instead (each device updates its own users)."
        )
    if input_tensor._shape[-1] != cache_tensor._shape[-1] or len(input_tensor._shape) != 4:
        raise ShapeMismatchError(
            f"ttnn.{op}: input has per-device shape {list(input_tensor._shape)} for a cache of "
            f"shape {list(cache_tensor._shape)}.\nfix: the input is [1, batch, nkv, head_dim] "
            "with the cache's head_dim."
        )
    if page_table is not None:
        if share:
            raise ShapeMismatchError(
                f"ttnn.{op}: share_cache not supported with paged cache.\n"
                "fix: drop share_cache= or page_table=."
            )
        length = _check_page_table(
            op, page_table, page_table_rows(op, page_table, users), cache_tensor
        )
    else:
        length = cache_tensor._shape[2]
        want = 1 if share else users
        if cache_tensor._shape[0] != want:
            raise ShapeMismatchError(
                f"ttnn.{op}: the cache has batch {cache_tensor._shape[0]} but the input has "
                f"{users} users{' (share_cache expects a cache batch of 1)' if share else ''}.\n"
                "fix: give the cache one row per user, or pass share_cache=True with batch 1."
            )
    if (update_idxs_tensor is None) == (not update_idxs):
        raise ShapeMismatchError(
            f"ttnn.{op}: Only an update tensor or an update vector can be provided. Not both or "
            "neither.\nfix: pass update_idxs=[...] or update_idxs_tensor= (the position of every user)."
        )
    if update_idxs_tensor is not None:
        # TT-NN counts the indices along dim 0 (interleaved; dim 1 when sharded) of a tensor of
        # any rank (paged_cache_operation.cpp): [batch], [batch, 1] and [1, batch] all hold one
        # position per user
        sharded = update_idxs_tensor.is_sharded()  # each core's shard: all users' positions
        _check_int_tensor(
            op,
            "update_idxs_tensor",
            update_idxs_tensor,
            (None, users) if sharded else (users,),
            "[cores, batch] shards" if sharded else "one position per user",
            flat=not sharded,
        )
        return ()
    positions = tuple(int(p) for p in update_idxs or ())
    if len(positions) != users:
        raise ShapeMismatchError(
            f"ttnn.{op}: Number of update_idxs ({len(positions)}) should match batch size "
            f"({users}).\nfix: pass one position per user (-1 skips a user)."
        )
    for p in positions:
        if not -1 <= p < length:
            raise ShapeMismatchError(
                f"ttnn.{op}: update index {p} is beyond the cache of {length} positions per "
                "user.\nfix: use positions in [0, cache length) (or -1 to skip a user)."
            )
    return positions


def _write_step(cache: Any, x: Any, pos: Any, table: Any, share: bool) -> Any:
    """One decode step's rows ``x`` [1, b, rows, d] written into ``cache`` at each user's
    position ``pos`` [b] (through the page table ``table`` when it is not None)."""
    # TT-NN's kernels write the cache's nkv heads from the first rows of each user's tile
    # (paged_*update_cache_program_factory.cpp: num_heads = cache.padded_shape()[1]); the
    # Galaxy's llama_rs_create_heads hands K / V over with 8 rows, the first one the head.
    upd = x[0, :, : cache.shape[1]].astype(cache.dtype)  # [b, nkv, d]
    # A scatter writes one position per user in place (no pass over the whole cache);
    # position -1 (TT-NN: skip this user) maps past the end, where mode="drop" ignores it.
    skip = pos < 0
    if table is not None:
        table = table.astype(jnp.int32)[: x.shape[1]]  # sharded: the first core's copy
        block = cache.shape[2]
        p = jnp.where(skip, 0, pos)
        rows = table[jnp.arange(table.shape[0]), p // block]
        rows = jnp.where(skip, cache.shape[0], rows)
        return cache.at[rows, :, p % block, :].set(upd, mode="drop")
    users_idx = jnp.zeros_like(pos) if share else jnp.arange(pos.shape[0])
    pos = jnp.where(skip, cache.shape[2], pos)
    return cache.at[users_idx, :, pos, :].set(upd, mode="drop")


def _run_update(
    name: str,
    pairs: Sequence[tuple[Tensor, Tensor]],
    update_idxs_tensor: Tensor | None,
    positions: tuple[int, ...],
    share: bool,
    page_table: Tensor | None,
    mesh_coords: Any,
) -> list[Tensor]:
    """One program writing every (cache, input) pair of a decode step (TT-NN runs the fused K/V
    update as one device operation: one program cache entry, keyed on its inputs,
    ``compute_program_hash``); the caches, updated in place."""
    op = f"experimental.{name}"
    n = 2 * len(pairs)
    extra = [t for t in (update_idxs_tensor, page_table) if t is not None]
    only = _coords_mask(op, pairs[0][0], mesh_coords)
    tensors = [t for pair in pairs for t in pair] + extra + only
    from_tensor, paged = update_idxs_tensor is not None, page_table is not None

    def fn(*args: Any) -> Any:
        # args: cache, input per pair, the index tensor / page table, the mesh_coords mask,
        # then the cur_pos scalars
        rest = args[n:]
        if from_tensor:
            pos = rest[0].reshape(-1)[: args[1].shape[1]].astype(jnp.int32)
        else:  # one traced scalar per user: every step reuses the compiled program
            pos = jnp.stack([jnp.asarray(p, jnp.int32) for p in rest[len(tensors) - n :]])
        table = rest[len(extra) - 1] if paged else None
        masks = rest[len(extra) : len(extra) + len(only)]
        outs = tuple(
            _keep_outside(_write_step(args[i], args[i + 1], pos, table, share), args[i], masks)
            for i in range(0, n, 2)
        )
        return outs[0] if len(outs) == 1 else outs

    def placements(ts: Any, shapes: Any) -> list[Any]:
        rest = list(ts[n:])
        return [_cache_rule([ts[i], ts[i + 1], *rest], [shapes[i // 2]])[0] for i in range(0, n, 2)]

    out = run_op(
        name,
        fn,
        tensors,
        static=(from_tensor, paged, share, len(only), len(pairs)),
        scalars=positions,
        out_dtype=tuple(cache._dtype for cache, _ in pairs),
        placement_rule=placements,
    )
    outs = [out] if len(pairs) == 1 else list(out)
    return [write_output(o, cache) for o, (cache, _) in zip(outs, pairs)]


def paged_update_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    *,
    update_idxs: list[int] | None = None,
    update_idxs_tensor: Tensor | None = None,
    share_cache: bool | None = None,
    page_table: Tensor | None = None,
    batch_offset: int = 0,
    mesh_coords: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Write one decode step's k or v [1, b, nkv, d] at each user's own position, in place.
    ``mesh_coords`` (a set of MeshCoordinates) writes those devices' caches only.

    ``update_idxs_tensor`` (int32 [b], on device) keeps positions on device for trace replay;
    position -1 skips a user. With ``page_table`` (int32 [b, blocks_per_user]) the cache is
    paged, [max_blocks, nkv, block, d]: position p of user i lands in block
    ``page_table[i, p // block]``, row ``p % block``. ``share_cache``: one cache [1, ...] for all.
    """
    check_hw_kwargs("paged_update_cache", kwargs)
    share = bool(share_cache)
    positions = _check_update(
        "experimental.paged_update_cache", cache_tensor, input_tensor, update_idxs,
        update_idxs_tensor, share, page_table, batch_offset,
    )  # fmt: skip
    (out,) = _run_update(
        "paged_update_cache", [(cache_tensor, input_tensor)], update_idxs_tensor, positions,
        share, page_table, mesh_coords,
    )  # fmt: skip
    return out


def paged_fused_update_cache(
    cache_tensor1: Tensor,
    input_tensor1: Tensor,
    cache_tensor2: Tensor,
    input_tensor2: Tensor,
    *,
    update_idxs: list[int] | None = None,
    update_idxs_tensor: Tensor | None = None,
    share_cache: bool | None = None,
    page_table: Tensor | None = None,
    batch_offset: int = 0,
    compute_kernel_config: Any = None,
    mesh_coords: Any = None,
) -> tuple[Tensor, Tensor]:
    """:func:`paged_update_cache` of the K and the V cache in one op and one program (the Galaxy
    Llama's decode step), with TT-NN's FUSED_UPDATE rules (paged_cache_operation.cpp): both
    inputs tilized or both row-major (row-major only at Llama-70B's shapes), each sharded, on as
    many cores and on cores that do not overlap. Returns the two caches, updated in place."""
    op = "paged_fused_update_cache"
    layouts = {input_tensor1._layout, input_tensor2._layout}
    if len(layouts) != 1:
        raise LayoutError(
            f"ttnn.experimental.{op}: input_tensor1 and input_tensor2 must be either both tiled "
            f"or both row-major (got {input_tensor1._layout!r}, {input_tensor2._layout!r}).\n"
            "fix: give the K and V inputs one layout."
        )
    if Layout.ROW_MAJOR in layouts and (
        input_tensor1._shape[-1] != 128 or input_tensor2._shape[-2] != 8
    ):
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: when input_tensor1 and input_tensor2 are row major, only "
            f"Llama70b tensor shapes are supported (head_dim 128, 8 heads; got "
            f"{list(input_tensor1._shape)}, {list(input_tensor2._shape)}).\nfix: tilize the inputs."
        )
    specs = [t._spec.memory_config.shard_spec for t in (input_tensor1, input_tensor2)]
    grids: list[Any] = [getattr(spec, "grid", None) for spec in specs]
    if not all(hasattr(g, "contains") and hasattr(g, "ranges") for g in grids):
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: both inputs must be sharded (each on its own cores).\n"
            "fix: height-shard the K and V inputs, e.g. on two disjoint core sets."
        )
    cores = [core_set(g) for g in grids]
    if cores[0] & cores[1] or len(cores[0]) != len(cores[1]):
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: input_tensor1 ({grids[0]!r}) and input_tensor2 ({grids[1]!r}) "
            "must not overlap and must have same number of cores.\nfix: shard K and V on two "
            "disjoint core sets of one size."
        )
    share = bool(share_cache)
    pairs = [(cache_tensor1, input_tensor1), (cache_tensor2, input_tensor2)]
    positions: tuple[int, ...] = ()
    for cache, x in pairs:
        positions = _check_update(
            f"experimental.{op}", cache, x, update_idxs, update_idxs_tensor, share, page_table,
            batch_offset,
        )  # fmt: skip
    out1, out2 = _run_update(
        op, pairs, update_idxs_tensor, positions, share, page_table, mesh_coords
    )
    return out1, out2


def paged_fill_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    page_table: Tensor,
    *,
    batch_idx_tensor: Tensor | None = None,
    batch_idx: int = 0,
    mesh_coords: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Write a prefill's k or v [1, nkv, s, d] for user ``batch_idx`` into the paged cache
    [max_blocks, nkv, block, d], in place: token t goes to block ``page_table[batch_idx, t //
    block]``, row ``t % block``. ``batch_idx_tensor`` (one int) overrides ``batch_idx``."""
    op = "experimental.paged_fill_cache"
    check_hw_kwargs("paged_fill_cache", kwargs)
    _check_int_tensor(op, "page_table", page_table, (None, None), "a page table [batch, blocks]")
    _check_page_table(op, page_table, page_table._shape[0], cache_tensor)
    shape, cshape = tuple(input_tensor._shape), tuple(cache_tensor._shape)
    if len(shape) != 4 or shape[0] != 1 or shape[1] != cshape[1] or shape[3] != cshape[3]:
        raise ShapeMismatchError(
            f"ttnn.{op}: input has per-device shape {list(shape)} for a paged cache of shape "
            f"{list(cshape)}.\nfix: the input is [1, nkv={cshape[1]}, seq_len, head_dim={cshape[3]}]."
        )
    capacity = page_table._shape[1] * cshape[2]
    if shape[2] > capacity:
        raise ShapeMismatchError(
            f"ttnn.{op}: Input seq_len {shape[2]} must fit in max_num_blocks_per_seq "
            f"({page_table._shape[1]} blocks of {cshape[2]} = {capacity} positions).\n"
            "fix: slice the input to the page table's length, or give the user more blocks."
        )
    input_tensor, mask = _on_part_of(cache_tensor, input_tensor)
    mask += _coords_mask(op, cache_tensor, mesh_coords)  # mesh_coords: those devices only
    tensors = [cache_tensor, input_tensor, page_table, *mask]
    scalars: tuple[int, ...] = ()
    if batch_idx_tensor is not None:
        if not isinstance(batch_idx_tensor, Tensor) or math.prod(batch_idx_tensor._shape) != 1:
            raise ShapeMismatchError(
                f"ttnn.{op}: Batch idx tensor must have a single element.\n"
                "fix: pass a one-element int32 tensor, or batch_idx=<int>."
            )
        tensors.append(batch_idx_tensor)
    else:
        scalars = (
            _check_index(op, "batch_idx", batch_idx, page_table._shape[0], "the page table batch"),
        )

    def fn(cache: Any, x: Any, table: Any, *rest: Any) -> Any:
        b = rest[-1]
        user = b.reshape(()).astype(jnp.int32) if batch_idx_tensor is not None else b
        block = cache.shape[2]
        t = jnp.arange(x.shape[2])
        rows = jnp.take(table.astype(jnp.int32), user, axis=0)[t // block]
        vals = jnp.transpose(x[0], (1, 0, 2)).astype(cache.dtype)  # [s, nkv, d]
        return _keep_outside(cache.at[rows, :, t % block, :].set(vals), cache, rest[:-1])

    out = run_op(
        "paged_fill_cache",
        fn,
        tensors,
        static=(batch_idx_tensor is not None, len(mask)),
        scalars=scalars,
        out_dtype=cache_tensor._dtype,
        placement_rule=_cache_rule,
    )
    return write_output(out, cache_tensor)
