"""TT-NN's Collective Communication Library on ``jax.lax`` collectives inside ``jax.shard_map``.

The implementation of :mod:`ttjax.ccl`, whose docstring says more.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ttjax._src.core import numerics, policy as _policy, specs as _specs
from ttjax._src.core.dispatch import OpMeta, moves_whole_blocks, run_op
from ttjax._src.core.enums import ReduceType, Topology
from ttjax._src.core.errors import CCLError, CCLSignatureError, MeshMismatchError
from ttjax._src.core.fabric import FabricConfig
from ttjax._src.core.mesh import MeshCoordinate, MeshDevice, fabric_setting
from ttjax._src.core.placements import (
    LOCAL,
    REPLICATE,
    Placement,
    PlacementReplicate,
    PlacementShard,
)
from ttjax._src.core.subdevice import GlobalSemaphore, create_global_semaphore
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.common import check_hw_kwargs, write_output

_LOWERINGS = ("native", "topology")
# Thread-local, and part of every jit cache key like ttjax.numerics: a jitted function that calls
# a collective is traced again when the lowering changes, never served a stale program.
_lowering_setting = _policy.Setting("ttjax.ccl_lowering", _LOWERINGS, "native")


def ccl_lowering(mode: str) -> _policy.Policy:
    """Lower every CCL call with ``mode``, ``"native"`` or ``"topology"``, in a ``with`` block
    (or for this thread, when not used as one). Part of jit's cache key, like ``ttjax.numerics``.

    >>> with ttnn.ccl_lowering("topology"):
    ...     y = ttnn.all_gather(x, dim=3)     # N-1 collective-permute steps around the ring
    """
    if mode not in _LOWERINGS:
        raise CCLError(f"ccl_lowering({mode!r}): unknown lowering.\nfix: one of {_LOWERINGS}.")
    return _policy.Policy(_lowering_setting, mode)


def _lowering(op: str, lowering: str | None) -> str:
    mode = lowering if lowering is not None else _lowering_setting.mode()
    if mode not in _LOWERINGS:
        raise CCLError(f"ttnn.{op}: lowering={mode!r} is unknown.\nfix: one of {_LOWERINGS}.")
    return mode


def _ring(op: str, topology: Any) -> bool:
    """True for a ring schedule, False for a line; validates ``topology``."""
    if topology is None:
        return True
    if not isinstance(topology, Topology):
        raise CCLError(
            f"ttnn.{op}: topology={topology!r} is not a ttnn.Topology.\n"
            "fix: ttnn.Topology.Ring or ttnn.Topology.Linear."
        )
    return topology in (Topology.Ring, Topology.Torus)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def _check_tensor(op: str, t: Any) -> Tensor:
    if not isinstance(t, Tensor) or t._mesh is None:
        raise CCLError(
            f"ttnn.{op}: expected a ttnn Tensor on a mesh device, got {type(t).__name__}.\n"
            "fix: create it with ttnn.from_torch(..., device=mesh_device)."
        )
    return t


def _group(op: str, mesh: MeshDevice, cluster_axis: Any) -> tuple[int, ...]:
    """Mesh axes the collective runs over (all axes when ``cluster_axis`` is None)."""
    rank = mesh.shape.dims()
    if cluster_axis is None:
        return tuple(range(rank))
    if isinstance(cluster_axis, bool) or not isinstance(cluster_axis, (int, np.integer)):
        raise CCLError(
            f"ttnn.{op}: cluster_axis={cluster_axis!r} is not an int.\n"
            f"fix: 0 (rows, '{mesh.axis_names[0]}'), {rank - 1} or None for all devices."
        )
    if not 0 <= int(cluster_axis) < rank:
        valid = ", ".join(
            f"{i} ({n!r}, size {s})" for i, (n, s) in enumerate(zip(mesh.axis_names, mesh.shape))
        )
        raise CCLError(
            f"ttnn.{op}: cluster axis {cluster_axis} is out of range for device coords rank {rank} "
            f"(mesh {mesh.shape!r}).\nfix: use one of {valid}, or None for all devices."
        )
    return (int(cluster_axis),)


def _dim(op: str, t: Tensor, dim: Any, name: str = "dim") -> int:
    rank = len(t._shape)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise CCLError(
            f"ttnn.{op}: {name}={dim!r} is not an int.\nfix: a tensor dim in [{-rank}, {rank - 1}]."
        )
    d = _specs.normalize_dim(int(dim), rank)
    if d is None:
        raise CCLError(
            f"ttnn.{op}: {name}={dim} is out of range for per-device shape {list(t._shape)} "
            f"(rank {rank}).\nfix: use {name} in [{-rank}, {rank - 1}]."
        )
    return d


def _math_op(op: str, math_op: Any) -> ReduceType:
    if isinstance(math_op, ReduceType):
        return math_op
    if isinstance(math_op, str) and math_op.lower() in ("sum", "max", "min"):
        return ReduceType(math_op.lower())
    raise CCLError(
        f"ttnn.{op}: math_op={math_op!r} is not supported.\n"
        "fix: ttnn.ReduceType.Sum, ttnn.ReduceType.Max or ttnn.ReduceType.Min."
    )


def _names(mesh: MeshDevice, axes: Sequence[int]) -> Any:
    names = tuple(mesh.axis_names[a] for a in axes)
    return names[0] if len(names) == 1 else names


def _axis_names(c: _Call) -> tuple[str, ...]:
    """The group's mesh axis names, always as a tuple (for :class:`OpMeta`)."""
    return tuple(c.mesh.axis_names[a] for a in c.axes)


def _size(mesh: MeshDevice, axes: Sequence[int]) -> int:
    return int(np.prod([mesh.shape[a] for a in axes]))


def _check_mesh_arg(op: str, t: Tensor, mesh_device: Any) -> None:
    if mesh_device is not None and mesh_device is not t._mesh:
        if not t._mesh.same_mesh(mesh_device):  # type: ignore[union-attr]
            raise MeshMismatchError(
                f"ttnn.{op}: mesh_device={mesh_device!r} is not the mesh the tensor lives on "
                f"({t._mesh!r}).\nfix: pass the tensor's own mesh (or omit mesh_device)."
            )


@dataclass(frozen=True)
class _Call:
    """A validated collective call: the tensor, its mesh and the group it runs over."""

    t: Tensor
    mesh: MeshDevice
    axes: tuple[int, ...]  # mesh axes of the group
    n: int  # devices per group
    names: Any  # the axis name(s) for jax.lax
    ring: bool
    mode: str  # "native" or "topology"

    @property
    def key(self) -> tuple[Any, ...]:
        """What selects the compiled program besides the op's own arguments."""
        return (self.axes, self.mode, self.ring if self.mode == "topology" else None)


# TT-NN's fabric-transfer tuning knobs (all_gather, reduce_scatter): counts that never change a value.
_FABRIC_TUNING = ("chunks_per_sync", "num_workers_per_link", "num_buffers_per_channel")


def _check_fabric_tuning(op: str, *values: Any) -> None:
    for name, v in zip(_FABRIC_TUNING, values):
        if v is not None and (
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < 0
        ):
            raise CCLError(
                f"ttnn.{op}: {name}={v!r} is not a non-negative int.\nfix: e.g. {name}=2, or omit it."
            )


def _check_fabric(op: str, mesh: MeshDevice, axes: Sequence[int]) -> None:
    """TT-Metal's CCLs move data over the fabric; on a mesh opened after an explicit
    ``set_fabric_config(FabricConfig.DISABLED)`` there is none, and TT-Metal fails."""
    setting = fabric_setting(mesh)
    if setting.explicit and setting.config is FabricConfig.DISABLED and _size(mesh, axes) > 1:
        raise CCLError(
            f"ttnn.{op}: Trying to get un-initialized fabric context: the mesh "
            f"{mesh.shape} was opened with set_fabric_config(FabricConfig.DISABLED), and "
            "collectives between its devices run over the fabric.\n"
            "fix: call ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D) (or FABRIC_1D_RING / "
            "FABRIC_2D) before ttnn.open_mesh_device."
        )


def _prepare(
    op: str,
    input_tensor: Any,
    kwargs: dict[str, Any],
    cluster_axis: Any = None,
    mesh_device: Any = None,
    topology: Any = None,
    lowering: str | None = None,
) -> _Call:
    """Validate the arguments every collective shares; raises ttjax errors naming the bad value."""
    check_hw_kwargs(op, kwargs)
    t = _check_tensor(op, input_tensor)
    mesh: MeshDevice = t._mesh  # type: ignore[assignment]  # _check_tensor: never None
    _check_mesh_arg(op, t, mesh_device)
    if kwargs.get("subdevice_id") is not None:  # must exist in the loaded sub-device manager
        mesh._sub_devices.check_id(op, kwargs["subdevice_id"])
    axes = _group(op, mesh, cluster_axis)
    _check_fabric(op, mesh, axes)
    ring = _ring(op, topology)
    mode = _lowering(op, lowering)
    return _Call(t, mesh, axes, _size(mesh, axes), _names(mesh, axes), ring, mode)


# ---------------------------------------------------------------------------------------------
# Placement rules
# ---------------------------------------------------------------------------------------------


def _rule(axes: Sequence[int], on_group: Placement | None) -> Any:
    """Group axes get ``on_group``; other axes keep the input's placement.

    ``on_group=None`` means the devices of the group end up holding different values (a
    point-to-point or a shift): they keep the input's placement, except that Replicate becomes
    per-device.
    """

    def rule(
        tensors: Sequence[Tensor], shapes: Sequence[tuple[int, ...]]
    ) -> list[tuple[Placement, ...]]:
        out = []
        for shape in shapes:
            pl: list[Placement] = []
            for i, p in enumerate(tensors[0]._placements):
                if i in axes:
                    if on_group is not None:
                        p = on_group
                    elif isinstance(p, PlacementReplicate):
                        p = LOCAL
                if isinstance(p, PlacementShard) and p.dim >= len(shape):
                    p = LOCAL
                pl.append(p)
            out.append(tuple(pl))
        return out

    return rule


# ---------------------------------------------------------------------------------------------
# Topology-faithful schedules (ppermute steps)
# ---------------------------------------------------------------------------------------------


def _chunk(x: Any, c: Any, n: int, dim: int) -> Any:
    size = x.shape[dim] // n
    return lax.dynamic_slice_in_dim(x, jnp.clip(c, 0, n - 1) * size, size, axis=dim)


def _stack_to_dim(buf: Any, dim: int) -> Any:
    """``buf`` [n, *shape] -> concatenation of the n pieces along ``dim``."""
    moved = jnp.moveaxis(buf, 0, dim)
    s = moved.shape
    return jnp.reshape(moved, (*s[:dim], s[dim] * s[dim + 1], *s[dim + 2 :]))


def _ring_all_gather(x: Any, names: Any, n: int, dim: int) -> Any:
    idx = lax.axis_index(names)
    perm = [(i, (i + 1) % n) for i in range(n)]
    buf = lax.dynamic_update_index_in_dim(jnp.zeros((n, *x.shape), x.dtype), x, idx, 0)
    cur = x
    for s in range(1, n):
        cur = lax.ppermute(cur, names, perm)
        buf = lax.dynamic_update_index_in_dim(buf, cur, (idx - s) % n, 0)
    return _stack_to_dim(buf, dim)


def _line_all_gather(x: Any, names: Any, n: int, dim: int) -> Any:
    idx = lax.axis_index(names)
    right = [(i, i + 1) for i in range(n - 1)]
    left = [(i + 1, i) for i in range(n - 1)]
    buf = lax.dynamic_update_index_in_dim(jnp.zeros((n, *x.shape), x.dtype), x, idx, 0)
    cur_r, cur_l = x, x
    for s in range(1, n):
        cur_r = lax.ppermute(cur_r, names, right)
        cur_l = lax.ppermute(cur_l, names, left)
        for cur, src in ((cur_r, idx - s), (cur_l, idx + s)):
            valid = (src >= 0) & (src < n)
            at = jnp.clip(src, 0, n - 1)
            old = lax.dynamic_index_in_dim(buf, at, 0, keepdims=False)
            buf = lax.dynamic_update_index_in_dim(buf, jnp.where(valid, cur, old), at, 0)
    return _stack_to_dim(buf, dim)


_COMBINE: dict[ReduceType, Callable[[Any, Any], Any]] = {
    ReduceType.Sum: jnp.add,
    ReduceType.Max: jnp.maximum,
    ReduceType.Min: jnp.minimum,
}


def _ring_reduce_scatter(x: Any, names: Any, n: int, dim: int, op: ReduceType) -> Any:
    idx = lax.axis_index(names)
    perm = [(i, (i + 1) % n) for i in range(n)]
    f = _COMBINE[op]
    partial = _chunk(x, (idx - 1) % n, n, dim)
    for s in range(n - 1):
        recv = lax.ppermute(partial, names, perm)
        partial = f(recv, _chunk(x, (idx - s - 2) % n, n, dim))
    return partial


def _line_reduce_scatter(x: Any, names: Any, n: int, dim: int, op: ReduceType) -> Any:
    """Bidirectional line: partials for chunk c flow in from both ends, one chunk per link-step."""
    idx = lax.axis_index(names)
    f = _COMBINE[op]
    right = [(i, i + 1) for i in range(n - 1)]
    left = [(i + 1, i) for i in range(n - 1)]
    recv_r = jnp.zeros_like(_chunk(x, 0, n, dim))
    recv_l = recv_r
    for s in range(1, n):
        c_r = n - s + idx  # chunk this device forwards rightwards at step s (valid if idx <= s-1)
        send_r = jnp.where(idx >= 1, f(recv_r, _chunk(x, c_r, n, dim)), _chunk(x, c_r, n, dim))
        c_l = s - n + idx  # chunk forwarded leftwards (valid if idx >= n-s)
        send_l = jnp.where(idx <= n - 2, f(recv_l, _chunk(x, c_l, n, dim)), _chunk(x, c_l, n, dim))
        recv_r = lax.ppermute(send_r, names, right)
        recv_l = lax.ppermute(send_l, names, left)
    own = _chunk(x, idx, n, dim)
    out = jnp.where(idx >= 1, f(own, recv_r), own)
    return jnp.where(idx <= n - 2, f(out, recv_l), out)


def _flat_chunks(x: Any, n: int) -> tuple[Any, int]:
    flat = jnp.reshape(x, (-1,))
    pad = (-flat.shape[0]) % n
    return (jnp.pad(flat, (0, pad)) if pad else flat), pad


def _topology_all_reduce(x: Any, names: Any, n: int, op: ReduceType, ring: bool) -> Any:
    flat, pad = _flat_chunks(x, n)
    if op is not ReduceType.Sum and pad:
        fill = -jnp.inf if op is ReduceType.Max else jnp.inf
        flat = flat.at[flat.shape[0] - pad :].set(jnp.asarray(fill, flat.dtype))
    rs = _ring_reduce_scatter if ring else _line_reduce_scatter
    ag = _ring_all_gather if ring else _line_all_gather
    part = rs(flat, names, n, 0, op)
    full = ag(part, names, n, 0)
    return jnp.reshape(full[: full.shape[0] - pad], x.shape)


# ---------------------------------------------------------------------------------------------
# Collectives
# ---------------------------------------------------------------------------------------------


def all_gather(
    input_tensor: Tensor,
    dim: int,
    cluster_axis: int | None = None,
    mesh_device: MeshDevice | None = None,
    *,
    num_links: int = 1,
    topology: Topology | None = Topology.Ring,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    lowering: str | None = None,
    **kwargs: Any,
) -> Tensor:
    """Gather every device's tensor along ``dim`` within each group; all group members get the
    concatenation, ordered by device position (per-device ``shape[dim]`` grows by the group size).

    >>> y = ttnn.all_gather(x, dim=3)                  # [1,1,32,32] per device -> [1,1,32,256] on 2x4
    >>> y = ttnn.all_gather(x, dim=3, cluster_axis=0)  # one gather per column -> [1,1,32,64]
    """
    op = "all_gather"
    c = _prepare(op, input_tensor, kwargs, cluster_axis, mesh_device, topology, lowering)
    _check_fabric_tuning(op, chunks_per_sync, num_workers_per_link, num_buffers_per_channel)
    d = _dim(op, c.t, dim)
    if c.n == 1:
        return write_output(c.t, output_tensor)
    names, n = c.names, c.n
    policy = numerics.mode()
    meta = None
    if c.mode == "native":
        meta = OpMeta("all_gather", dim=d, axes=_axis_names(c))

        def gather(x: Any, dim: int) -> Any:  # its backward sums: in device order (policy)
            return numerics.all_gather(x, names, axis=dim, tiled=True)

    else:
        sched = _ring_all_gather if c.ring else _line_all_gather

        def gather(x: Any, dim: int) -> Any:
            return sched(x, names, n, dim)

    out = run_op(
        op,
        lambda x: gather(x, d),
        [c.t],
        static=(d, policy, *c.key),
        placement_rule=_rule(c.axes, REPLICATE),
        memory_config=memory_config,
        meta=meta,
        blocks_fn=_gather_blocks(gather, d) if moves_whole_blocks(c.t._spec, d) else None,
    )
    return write_output(out, output_tensor)


def _gather_blocks(gather: Callable[[Any, int], Any], dim: int) -> Callable[[Any], Any]:
    """All-gather of block-float storage as stored (TT-NN's all-gather moves tiles): mantissas
    and exponents side by side in one byte array, so it is one collective, then put back."""

    def fn(blocks: Any) -> Any:
        m, e = blocks
        width = m.shape[-1]
        packed = jnp.concatenate([lax.bitcast_convert_type(m, jnp.uint8), e], axis=-1)
        every = gather(packed[None], 0)  # [group, *shape]: each device's blocks
        mant = lax.bitcast_convert_type(every[..., :width], m.dtype)
        return type(blocks)(_stack_to_dim(mant, dim), _stack_to_dim(every[..., width:], dim))

    return fn


def reduce_scatter(
    input_tensor: Tensor,
    dim: int,
    math_op: ReduceType | str = ReduceType.Sum,
    *,
    cluster_axis: int | None = None,
    mesh_device: MeshDevice | None = None,
    num_links: int = 1,
    topology: Topology | None = Topology.Ring,
    memory_config: Any = None,
    intermediate_memory_config: Any = None,
    output_tensor: Tensor | None = None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    lowering: str | None = None,
    **kwargs: Any,
) -> Tensor:
    """Reduce (sum by default) the group's tensors, split the result along ``dim`` into group-size
    pieces, and leave piece ``i`` on the ``i``-th device of the group (row-major).

    >>> y = ttnn.reduce_scatter(x, dim=3)   # [1,1,32,256] per device -> [1,1,32,32] on 2x4
    """
    op = "reduce_scatter"
    c = _prepare(op, input_tensor, kwargs, cluster_axis, mesh_device, topology, lowering)
    _check_fabric_tuning(op, chunks_per_sync, num_workers_per_link, num_buffers_per_channel)
    d = _dim(op, c.t, dim)
    rop = _math_op(op, math_op)
    names, n, shape = c.names, c.n, c.t._shape
    if shape[d] % n:
        raise CCLError(
            f"ttnn.{op}: Dimension {d} must be divisible by ring_size: per-device shape "
            f"{list(shape)} has {shape[d]} along dim {d}, which does not split into {n} "
            f"pieces over mesh axes {[c.mesh.axis_names[a] for a in c.axes]}.\n"
            f"fix: pad dim {d} to a multiple of {n}, or scatter along another dim."
        )
    if n == 1:
        return write_output(c.t, output_tensor)
    policy = numerics.mode() if rop is ReduceType.Sum else None
    meta = None
    if policy == "deterministic":  # the numerics policy wins over the lowering for sums

        def fn(x: Any) -> Any:
            return numerics.psum_scatter(x, names, scatter_dimension=d, tiled=True)

    elif c.mode == "topology":
        sched = _ring_reduce_scatter if c.ring else _line_reduce_scatter

        def fn(x: Any) -> Any:
            return sched(x, names, n, d, rop)

    elif rop is ReduceType.Sum:
        meta = OpMeta("reduce_scatter", dim=d, axes=_axis_names(c))

        def fn(x: Any) -> Any:
            return lax.psum_scatter(x, names, scatter_dimension=d, tiled=True)

    else:
        reducer = lax.pmax if rop is ReduceType.Max else lax.pmin

        def fn(x: Any) -> Any:
            return _chunk(reducer(x, names), lax.axis_index(names), n, d)

    rule = _rule(c.axes, PlacementShard(d))
    out = run_op(
        op,
        fn,
        [c.t],
        static=(d, rop, policy, *c.key),
        placement_rule=rule,
        memory_config=memory_config,
        meta=meta,
    )
    return write_output(out, output_tensor)


def all_reduce(
    input_tensor: Tensor,
    cluster_axis: int | None = None,
    mesh_device: MeshDevice | None = None,
    *,
    math_op: ReduceType | str = ReduceType.Sum,
    num_links: int = 1,
    topology: Topology | None = Topology.Ring,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    lowering: str | None = None,
    **kwargs: Any,
) -> Tensor:
    """Reduce (sum, max or min) the group's tensors; every group member gets the result.

    >>> y = ttnn.all_reduce(partial_sums, cluster_axis=1)   # Megatron row-parallel combine
    """
    op = "all_reduce"
    c = _prepare(op, input_tensor, kwargs, cluster_axis, mesh_device, topology, lowering)
    rop = _math_op(op, math_op)
    if c.n == 1:
        return write_output(c.t, output_tensor)
    names, n, ring = c.names, c.n, c.ring
    policy = numerics.mode() if rop is ReduceType.Sum else None
    if policy == "deterministic":  # the numerics policy wins over the lowering for sums

        def fn(x: Any) -> Any:
            return numerics.psum(x, names)

    elif c.mode == "topology":

        def fn(x: Any) -> Any:
            return _topology_all_reduce(x, names, n, rop, ring)

    else:
        reducer = {ReduceType.Sum: lax.psum, ReduceType.Max: lax.pmax, ReduceType.Min: lax.pmin}
        reduce_fn = reducer[rop]

        def fn(x: Any) -> Any:
            return reduce_fn(x, names)

    rule = _rule(c.axes, REPLICATE)
    out = run_op(
        op,
        fn,
        [c.t],
        static=(rop, policy, *c.key),
        placement_rule=rule,
        memory_config=memory_config,
    )
    return write_output(out, output_tensor)


def all_to_all(
    input_tensor: Tensor,
    in_dim: int,
    out_dim: int,
    *,
    cluster_axis: int | None = None,
    mesh_device: MeshDevice | None = None,
    num_links: int = 1,
    topology: Topology | None = Topology.Ring,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Each device splits its tensor into group-size chunks along ``out_dim`` and sends chunk ``i``
    to the ``i``-th device; received chunks are concatenated along ``in_dim`` (expert parallelism).

    >>> y = ttnn.all_to_all(x, in_dim=2, out_dim=3, cluster_axis=1)
    """
    op = "all_to_all"
    c = _prepare(op, input_tensor, kwargs, cluster_axis, mesh_device, topology)
    di = _dim(op, c.t, in_dim, "in_dim")
    do = _dim(op, c.t, out_dim, "out_dim")
    names, n, shape = c.names, c.n, c.t._shape
    if shape[do] % n:
        raise CCLError(
            f"ttnn.{op}: out_dim {do} of per-device shape {list(shape)} has size {shape[do]}, "
            f"which does not split into {n} chunks (one per device of the group).\n"
            f"fix: make dim {do} a multiple of {n}."
        )
    if n == 1:
        return c.t

    def fn(x: Any) -> Any:
        return lax.all_to_all(x, names, split_axis=do, concat_axis=di, tiled=True)

    rule = _rule(c.axes, PlacementShard(do))
    return run_op(
        op, fn, [c.t], static=(di, do, c.axes), placement_rule=rule, memory_config=memory_config
    )


def _coord(op: str, mesh: MeshDevice, coord: Any, name: str) -> int:
    """Row-major linear index of ``coord``; raises when it is outside the mesh."""
    try:
        c = tuple(MeshCoordinate(coord))
    except Exception:
        raise CCLError(
            f"ttnn.{op}: {name}={coord!r} is not a mesh coordinate.\nfix: e.g. ttnn.MeshCoordinate(0, 1)."
        ) from None
    shape = tuple(mesh.shape)
    if len(c) != len(shape) or not all(0 <= a < s for a, s in zip(c, shape)):
        raise CCLError(
            f"ttnn.{op}: {name}={MeshCoordinate(c)!r} is outside the {mesh.shape!r} mesh.\n"
            f"fix: coordinates run from {[0] * len(shape)} to {[s - 1 for s in shape]}."
        )
    return int(np.ravel_multi_index(c, shape))


def point_to_point(
    input_tensor: Tensor,
    sender_coord: Any,
    receiver_coord: Any,
    *,
    output_tensor: Tensor | None = None,
    intermediate_tensor: Tensor | None = None,
    topology: Topology | None = Topology.Linear,
    optional_output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Copy the shard at ``sender_coord`` onto the device at ``receiver_coord``.

    The receiver gets the sender's data; every other device keeps ``output_tensor``'s values
    when given (TT-NN's in-place form; ``optional_output_tensor`` is its older name), else zeros.
    Positional order as TT-NN's binding at 821525122af5 (point_to_point_pybind.cpp): sender,
    then receiver. ``intermediate_tensor`` (TT-NN's staging buffer) changes nothing here.

    >>> y = ttnn.point_to_point(x, receiver_coord=ttnn.MeshCoordinate(0, 1),
    ...                         sender_coord=ttnn.MeshCoordinate(0, 0))
    """
    op = "point_to_point"
    if output_tensor is not None and optional_output_tensor is not None:
        raise CCLSignatureError(
            "ttnn.point_to_point: output_tensor and optional_output_tensor are one argument.\n"
            "fix: pass output_tensor= only."
        )
    optional_output_tensor = output_tensor if output_tensor is not None else optional_output_tensor
    c = _prepare(op, input_tensor, kwargs, topology=topology)
    r = _coord(op, c.mesh, receiver_coord, "receiver_coord")
    s = _coord(op, c.mesh, sender_coord, "sender_coord")
    names = c.names
    tensors = [c.t]
    if optional_output_tensor is not None:
        tensors.append(optional_output_tensor)

    def fn(x: Any, *base: Any) -> Any:
        idx = lax.axis_index(names)
        recv = x if r == s else lax.ppermute(x, names, [(s, r)])
        keep = base[0].astype(x.dtype) if base else jnp.zeros_like(x)
        return jnp.where(idx == r, recv, keep)

    rule = _rule(c.axes, None)
    out = run_op(op, fn, tensors, static=(r, s, len(tensors)), placement_rule=rule)
    return write_output(out, optional_output_tensor)


def shift(
    input_tensor: Tensor,
    shift: int = 1,
    *,
    cluster_axis: int,
    wrap: bool = True,
    **kwargs: Any,
) -> Tensor:
    """Send every device's tensor ``shift`` positions along mesh axis ``cluster_axis``.

    With ``wrap`` the devices form a ring; without it devices with no sender get zeros (a line).
    Pipeline parallelism uses this to pass activations to the next stage.

    >>> nxt = ttnn.shift(x, 1, cluster_axis=1)   # device (r, c) receives from (r, c-1)
    """
    op = "shift"
    c = _prepare(op, input_tensor, kwargs, cluster_axis)
    n, k, names = c.n, int(shift), c.names
    if wrap:
        perm = [(i, (i + k) % n) for i in range(n)]
    else:
        perm = [(i, i + k) for i in range(n) if 0 <= i + k < n]
    if n == 1 or (wrap and k % n == 0):
        return c.t

    def fn(x: Any) -> Any:
        return lax.ppermute(x, names, perm)

    rule = _rule(c.axes, None)
    return run_op(op, fn, [c.t], static=(c.axes, tuple(perm)), placement_rule=rule)


def broadcast(
    input_tensor: Tensor,
    sender_coord: Any,
    *,
    cluster_axis: int | None = None,
    mesh_device: MeshDevice | None = None,
    topology: Topology | None = Topology.Linear,
    num_links: int = 1,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Copy the sender's shard to every device of its group (the whole mesh by default)."""
    op = "broadcast"
    c = _prepare(op, input_tensor, kwargs, cluster_axis, mesh_device, topology)
    s = _coord(op, c.mesh, sender_coord, "sender_coord")
    shape = tuple(c.mesh.shape)
    coord = np.unravel_index(s, shape)
    src = int(np.ravel_multi_index([coord[a] for a in c.axes], [shape[a] for a in c.axes]))
    names = c.names

    def fn(x: Any) -> Any:  # one contributor: exact; the backward sums, under the numerics policy
        mine = lax.axis_index(names) == src
        return numerics.psum(jnp.where(mine, x, jnp.zeros_like(x)), names)

    return run_op(
        op,
        fn,
        [c.t],
        static=(s, c.axes, numerics.mode()),
        placement_rule=_rule(c.axes, REPLICATE),
        memory_config=memory_config,
    )


def mesh_partition(
    input_tensor: Tensor,
    dim: int,
    cluster_axis: int | None = None,
    *,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Keep the ``i``-th of group-size slices along ``dim`` on the ``i``-th device (no communication)."""
    op = "mesh_partition"
    c = _prepare(op, input_tensor, kwargs, cluster_axis)
    d = _dim(op, c.t, dim)
    n, names, shape = c.n, c.names, c.t._shape
    if shape[d] % n:
        raise CCLError(
            f"ttnn.{op}: dim {d} of per-device shape {list(shape)} does not split into {n} slices.\n"
            f"fix: make dim {d} a multiple of {n}."
        )

    def fn(x: Any) -> Any:
        return _chunk(x, lax.axis_index(names), n, d)

    rule = _rule(c.axes, PlacementShard(d))
    return run_op(
        op, fn, [c.t], static=(d, c.axes), placement_rule=rule, memory_config=memory_config
    )


__all__ = [
    "GlobalSemaphore",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "broadcast",
    "ccl_lowering",
    "create_global_semaphore",
    "mesh_partition",
    "point_to_point",
    "reduce_scatter",
    "shift",
]
