"""How every op runs: one cached, jitted ``jax.shard_map`` per (op, static args, input layouts).

An op hands :func:`run_op` a *local* function, written for one device's tensors. ``run_op``
checks the inputs share a mesh, derives the output placements, and runs the function under
``shard_map`` so each device computes on exactly its TT-NN local tensor. The compiled program is
cached on the mesh (TT-NN's program cache), so a repeated call with the same shapes never
retraces; under ``jax.jit`` the same program is inlined into the caller's trace.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from ttjax._src.core import (
    blockfloat as _blockfloat,
    capture as _capture,
    config as _config,
    specs as _specs,
)
from ttjax._src.core.enums import DataType, Layout, StorageType, from_numpy_dtype
from ttjax._src.core.errors import (
    DeviceClosedError,
    MemoryConfigError,
    MeshMismatchError,
    ShapeMismatchError,
    TTJaxError,
)
from ttjax._src.core.hardware import DRAM_MEMORY_CONFIG, MemoryConfig, validate_memory_config
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.placements import (
    LOCAL,
    REPLICATE,
    Placement,
    PlacementLocal,
    PlacementReplicate,
    PlacementShard,
    placements_str,
)
from ttjax._src.core.tensor import Tensor, TensorSpec, deallocated_error, is_traced, tile_padded

PlacementRule = Callable[[Sequence[Tensor], Sequence[tuple[int, ...]]], list[tuple[Placement, ...]]]


@dataclass(frozen=True)
class OpMeta:
    """What a trace may know about an op beyond its compiled program, to rewrite a captured graph
    without changing values (``ttjax.trace`` fuses a reduce-scatter + all-gather into one
    all-reduce with it).

    ``kind`` is ``"reduce_scatter"`` (a native sum, ``lax.psum_scatter``), ``"all_gather"`` (a
    native ``lax.all_gather``) or ``"elementwise"`` (``fn`` applied to two same-shaped operands,
    element by element, so it gives the same numbers on any slice of them); ``dim`` and ``axes``
    (mesh axis names) say where a collective runs.

    >>> OpMeta("all_gather", dim=3, axes=("x", "y")).kind
    'all_gather'
    """

    kind: str
    dim: int | None = None
    axes: tuple[str, ...] | None = None
    fn: Callable[..., Any] | None = None


class Program:
    """A compiled op: the jitted shard_map, the specs of what it returns, and its :class:`OpMeta`
    (None for ops a trace treats as opaque)."""

    __slots__ = ("fn", "meta", "name", "outs", "single")

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        outs: list[TensorSpec],
        single: bool,
        meta: OpMeta | None = None,
    ) -> None:
        self.name = name
        self.fn = fn
        self.outs = outs
        self.single = single
        self.meta = meta


def capture_active() -> bool:
    return _capture.active()


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def _describe(t: Tensor) -> str:
    return f"Shape({list(t._shape)}) {t._dtype!r} placements {placements_str(t._placements)}"


def common_mesh(op: str, tensors: Sequence[Tensor]) -> MeshDevice:
    """The one mesh all ``tensors`` live on; raises a ttjax error otherwise."""
    mesh = None
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TTJaxError(
                f"ttnn.{op}: input {i} is a {type(t).__name__}, not a ttnn Tensor.\n"
                "fix: convert it with ttnn.from_torch(x, device=mesh_device)."
            )
        spec = t._spec
        m = spec.mesh
        if t._data is None:
            raise deallocated_error(f"ttnn.{op}: input {i}", t)
        if spec.storage is not StorageType.DEVICE or m is None:
            raise TTJaxError(
                f"ttnn.{op}: input {i} ({_describe(t)}) is a host tensor; Input tensor must be on device!\n"
                "fix: pass device=mesh_device to ttnn.from_torch, or call ttnn.to_device(t, mesh_device)."
            )
        if spec.gen != m._gen:
            if m._closed:
                raise DeviceClosedError(
                    f"ttnn.{op}: input {i} lives on {m!r}, which was closed.\n"
                    "fix: keep the mesh open while its tensors are used, or re-create the tensor."
                )
            raise MeshMismatchError(
                f"ttnn.{op}: input {i} was created before {m!r} was reshaped.\n"
                "fix: re-create the tensor on the reshaped mesh."
            )
        if mesh is None:
            mesh = m
        elif not mesh.same_mesh(m):
            raise MeshMismatchError(
                f"ttnn.{op}: input 0 lives on {mesh!r} (device ids {mesh.get_device_ids()}) but "
                f"input {i} lives on {m!r} (device ids {m.get_device_ids()}).\n"
                "fix: ops never move data between meshes; create both tensors on the same mesh "
                "(or submesh), or copy one over with ttnn.to_torch + ttnn.from_torch."
            )
    if mesh is None:
        raise TTJaxError(
            f"ttnn.{op} got no input tensors and no mesh.\nfix: pass a tensor or mesh_device=."
        )
    return mesh


# ---------------------------------------------------------------------------------------------
# Local (per-device) encode/decode inside shard_map
# ---------------------------------------------------------------------------------------------


def _n_hidden(placements: tuple[Placement, ...]) -> int:
    return sum(type(p) is PlacementLocal for p in placements)


def decode_local(x: Any, spec: TensorSpec) -> Any:
    """A device's storage block -> its logical local array (hidden axes dropped, block floats decoded)."""
    placements, dtype, shape = spec.placements, spec.dtype, spec.shape
    if dtype.is_block_float:
        m, e = x
        if _n_hidden(placements):
            m, e = (jnp.reshape(a, a.shape[_n_hidden(placements) :]) for a in (m, e))
        data = _blockfloat.BlockFloatData(m, e)
        return _blockfloat.decode(jnp, data, dtype, shape).astype(jnp.bfloat16)
    if _n_hidden(placements):
        x = jnp.reshape(x, shape)
    return x


def encode_local(y: Any, spec: TensorSpec) -> Any:
    """A logical local array -> the storage block of a device (inverse of :func:`decode_local`)."""
    placements, dtype, shape = spec.placements, spec.dtype, spec.shape
    lead = (1,) * _n_hidden(placements)
    if dtype.is_block_float:
        data = _blockfloat.encode(jnp, y, dtype)
        return _blockfloat.BlockFloatData(*(jnp.reshape(a, lead + a.shape) for a in data))
    y = jnp.asarray(y).astype(dtype.numpy_dtype)
    return jnp.reshape(y, lead + tuple(shape)) if lead else y


def blocks_local(x: Any, spec: TensorSpec) -> _blockfloat.BlockFloatData:
    """A block-float device's storage without its hidden axes: (mantissas, exponents) as stored."""
    k = _n_hidden(spec.placements)
    return _blockfloat.BlockFloatData(*(jnp.reshape(a, a.shape[k:]) for a in x))


def blocks_storage(data: Any, spec: TensorSpec) -> _blockfloat.BlockFloatData:
    """Inverse of :func:`blocks_local`: the hidden axes of ``spec`` put back."""
    lead = (1,) * _n_hidden(spec.placements)
    return _blockfloat.BlockFloatData(*(jnp.reshape(a, lead + a.shape) for a in data))


def per_field(fn: Callable[..., Any]) -> Callable[..., _blockfloat.BlockFloatData]:
    """A ``blocks_fn`` for :func:`run_op` that applies ``fn`` (an op that only moves data) to the
    mantissas of every input, then to their exponents."""

    def apply(*blocks: _blockfloat.BlockFloatData) -> _blockfloat.BlockFloatData:
        return _blockfloat.BlockFloatData(*(fn(*parts) for parts in zip(*blocks)))

    return apply


def moves_whole_blocks(spec: TensorSpec, dim: int) -> bool:
    """Whether moving a block-float tensor's data along ``dim`` (gathering, concatenating,
    slicing there in per-device pieces) keeps every group of 16 whole: ``dim`` is not the last,
    or the last dim holds whole tiles (no padding inside a piece). Then the op can move the
    stored blocks themselves, as TT-NN moves tiles, with no decode and re-encode."""
    if not spec.dtype.is_block_float:
        return False
    rank = len(spec.shape)
    return dim % max(rank, 1) != rank - 1 or spec.shape[-1] % 32 == 0


def storage_spec(spec: TensorSpec, axis_names: Sequence[str]) -> PartitionSpec:
    return _specs.partition_spec(spec.placements, axis_names, len(spec.shape))


# ---------------------------------------------------------------------------------------------
# Output placement rules
# ---------------------------------------------------------------------------------------------


def default_placements(
    tensors: Sequence[Tensor], out_shapes: Sequence[tuple[int, ...]], num_axes: int
) -> list[tuple[Placement, ...]]:
    """Replicate where every input is replicated; otherwise keep a natural shard dim or go Local.

    Any per-device data of equal shape can be stored as ``PlacementShard(d)`` for any ``d`` (it is
    just a layout of the device blocks), so the choice only affects how natural the global array
    looks; correctness only needs Replicate to mean "identical on every device of the axis".
    """
    result = []
    for shape in out_shapes:
        rank = len(shape)
        pl: list[Placement] = []
        for i in range(num_axes):
            ps = [t._placements[i] for t in tensors]
            if all(type(p) is PlacementReplicate for p in ps):
                pl.append(REPLICATE)
                continue
            choice: Placement = LOCAL
            for p in ps:
                if type(p) is PlacementShard and p.dim < rank:
                    choice = p
                    break
            pl.append(choice)
        result.append(tuple(pl))
    return result


# ---------------------------------------------------------------------------------------------
# Output memory configs
# ---------------------------------------------------------------------------------------------


def output_memory_config(
    op: str,
    given: MemoryConfig | None,
    first_input: MemoryConfig,
    shape: tuple[int, ...],
    layout: Layout,
    inputs: Sequence[tuple[MemoryConfig, tuple[int, ...]]] = (),
) -> MemoryConfig:
    """The memory config of an op's output: ``memory_config=`` when given (validated against the
    output's per-device padded shape), else the first input's when it fits the output (TT-NN's
    ``memory_config.value_or(input.memory_config())``), else that buffer type interleaved.

    A given sharded config without a shard spec (``ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG``) takes
    the spec of the first sharded input (``inputs``: memory config and per-device shape) of the
    output's own shape, as TT-NN's eltwise ops compute their output spec
    (binary_ng_device_operation.cpp: the given spec, else input a's, else input b's)."""
    tile = layout is Layout.TILE
    padded = tile_padded(shape) if tile else shape
    if given is not None:
        if given.is_sharded() and given.shard_spec is None:
            spec = next(
                (m.shard_spec for m, s in inputs if m.shard_spec is not None and s == shape),
                None,
            )
            if spec is not None:
                given = MemoryConfig(given.memory_layout, given.buffer_type, spec)
        validate_memory_config(f"ttnn.{op}: memory_config", given, padded, tile)
        return given
    try:
        validate_memory_config(f"ttnn.{op}", first_input, padded, tile)
    except MemoryConfigError:
        return first_input.interleaved()
    return first_input


# ---------------------------------------------------------------------------------------------
# The op runner
# ---------------------------------------------------------------------------------------------


_FLOAT_TYPES = frozenset(
    {DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B, DataType.BFLOAT4_B}
)


def _out_dtype(y: jax.ShapeDtypeStruct, ref: DataType | None, given: DataType | None) -> DataType:
    if given is not None:
        return given
    kind = np.dtype(y.dtype).kind
    if kind in "fV" or np.dtype(y.dtype) == np.dtype(jnp.bfloat16):
        return ref if ref is not None else (from_numpy_dtype(y.dtype) or DataType.FLOAT32)
    if kind == "b":
        return ref if ref is not None else DataType.UINT8
    dt = from_numpy_dtype(y.dtype)
    if dt is None:
        dt = DataType.INT32 if kind == "i" else DataType.UINT32
    return dt


def _shape_error(op: str, tensors: Sequence[Tensor], err: Exception) -> ShapeMismatchError:
    lines = [f"ttnn.{op}: the per-device inputs do not fit together:"]
    lines += [f"  input {i}: {_describe(t)}" for i, t in enumerate(tensors)]
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    lines.append(f"  ({first})")
    lines.append(
        "fix: shapes here are per device (TT-NN semantics); distribute the inputs so their local "
        "shapes match or broadcast, e.g. with the same mesh mapper, or all_gather one of them first."
    )
    return ShapeMismatchError("\n".join(lines))


def _probe(
    name: str,
    mesh: MeshDevice,
    local_fn: Callable[..., Any],
    tensors: Sequence[Tensor],
    metas: Sequence[TensorSpec],
    scalars: Sequence[Any],
    in_specs: tuple[PartitionSpec, ...],
) -> Any:
    """Per-device output shapes/dtypes of ``local_fn``, traced inside ``shard_map`` (so collectives
    see their axis names) without running anything."""
    n = len(tensors)

    def probe(*args: Any) -> Any:
        xs = [decode_local(a, m) for a, m in zip(args[:n], metas)]
        ys = local_fn(*xs, *args[n:])
        return jax.tree_util.tree_map(lambda y: jnp.asarray(y)[None], ys)

    every_device = PartitionSpec(tuple(mesh.axis_names))
    mapped = jax.shard_map(
        probe, mesh=mesh.jax_mesh, in_specs=in_specs, out_specs=every_device, check_vma=False
    )
    args = [
        jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), t._data)
        for t in tensors
    ]
    args += [jax.ShapeDtypeStruct((), jnp.asarray(s).dtype, weak_type=True) for s in scalars]
    try:
        out = jax.eval_shape(mapped, *args)
    except (TypeError, ValueError, IndexError) as e:
        raise _shape_error(name, tensors, e) from None
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], a.dtype), out)


def build_program(
    name: str,
    mesh: MeshDevice,
    local_fn: Callable[..., Any],
    tensors: Sequence[Tensor],
    scalars: Sequence[Any],
    out_dtype: DataType | Sequence[DataType | None] | None,
    out_layout: Layout | None,
    placement_rule: PlacementRule | None,
    memory_config: MemoryConfig | None = None,
    meta: OpMeta | None = None,
    blocks_fn: Callable[..., Any] | None = None,
) -> Program:
    metas = [t._spec for t in tensors]
    names = mesh.axis_names
    in_specs = tuple(storage_spec(m, names) for m in metas) + (PartitionSpec(),) * len(scalars)
    n = len(tensors)
    out_avals = _probe(name, mesh, local_fn, tensors, metas, scalars, in_specs)
    single = not isinstance(out_avals, (tuple, list))
    outs_list = [out_avals] if single else list(out_avals)
    ref = next((t._dtype for t in tensors if t._dtype in _FLOAT_TYPES), None)
    given: list[Any] = (
        list(out_dtype) if isinstance(out_dtype, (list, tuple)) else [out_dtype] * len(outs_list)
    )
    dtypes = [_out_dtype(y, ref, g) for y, g in zip(outs_list, given)]
    shapes = [tuple(y.shape) for y in outs_list]
    layout = out_layout or (tensors[0]._layout if tensors else Layout.ROW_MAJOR)
    if placement_rule is not None:
        placements = placement_rule(tensors, shapes)
    else:
        placements = default_placements(tensors, shapes, len(mesh.shape))
    layouts = [Layout.TILE if dt.is_block_float else layout for dt in dtypes]
    first = tensors[0]._spec.memory_config if tensors else DRAM_MEMORY_CONFIG
    out_metas = [
        TensorSpec(
            mesh,
            p,
            dt,
            lay,
            s,
            StorageType.DEVICE,
            output_memory_config(
                name,
                memory_config,
                first,
                s,
                lay,
                [(t._spec.memory_config, tuple(t._spec.shape)) for t in tensors],
            ),
        )
        for p, dt, s, lay in zip(placements, dtypes, shapes, layouts)
    ]
    out_specs = [storage_spec(m, names) for m in out_metas]
    dtypes_in = {m.dtype for m in metas}
    if blocks_fn is not None and single and len(dtypes_in) == 1 and out_metas[0].dtype in dtypes_in:

        def body(*args: Any) -> Any:
            blocks = [blocks_local(a, m) for a, m in zip(args[:n], metas)]
            return blocks_storage(blocks_fn(*blocks, *args[n:]), out_metas[0])

    else:

        def body(*args: Any) -> Any:
            xs = [decode_local(a, m) for a, m in zip(args[:n], metas)]
            ys = local_fn(*xs, *args[n:])
            ys_list = [ys] if single else list(ys)
            enc = [encode_local(y, m) for y, m in zip(ys_list, out_metas)]
            return enc[0] if single else tuple(enc)

    mapped = jax.shard_map(
        body,
        mesh=mesh.jax_mesh,
        in_specs=in_specs,
        out_specs=out_specs[0] if single else tuple(out_specs),
        check_vma=False,
    )
    return Program(name, jax.jit(mapped), out_metas, single, meta)


def run_op(name: str, local_fn: Callable[..., Any], tensors: Sequence[Tensor], **kw: Any) -> Any:
    """:func:`_run_op`; an error raised while a trace capture is open is noted on the capture
    (and says so), so later errors can point back to it."""
    try:
        return _run_op(name, local_fn, tensors, **kw)
    except Exception as e:
        recorder = _capture.current()
        if recorder is not None:
            recorder.interrupted(e)
        raise


def _run_op(
    name: str,
    local_fn: Callable[..., Any],
    tensors: Sequence[Tensor],
    *,
    static: Any = (),
    scalars: Sequence[Any] = (),
    out_dtype: DataType | Sequence[DataType | None] | None = None,
    out_layout: Layout | None = None,
    placement_rule: PlacementRule | None = None,
    mesh: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
    meta: OpMeta | None = None,
    blocks_fn: Callable[..., Any] | None = None,
) -> Any:
    """Run ``local_fn`` on every device's local tensors; return the output Tensor(s).

    ``local_fn(*local_arrays, *scalars)`` must depend only on ``(name, static)`` besides its
    arguments: the compiled program is cached under that key. Scalars are traced (not baked in),
    so a loop over changing scalars does not recompile. ``memory_config`` (an op's
    ``memory_config=``) becomes the outputs' memory config (see :func:`output_memory_config`).
    ``meta`` (an :class:`OpMeta`) tells a trace capture what the op computes.

    ``blocks_fn`` (for an op that only moves data, keeping groups of 16 whole: see
    :func:`moves_whole_blocks`, :func:`per_field`) computes the op on block-float inputs of one
    dtype as stored, ``BlockFloatData`` in and out, with no decode and re-encode: the same
    values, as encoding decoded blocks gives the blocks back, and TT-NN moves tiles as stored.
    """
    tensors = on_smallest(name, tensors)
    if mesh is None:
        mesh = common_mesh(name, tensors)
    elif tensors:
        mesh = common_mesh(name, tensors)
    elif mesh._closed:
        mesh._check_open()
    key = (
        name,
        static,
        tuple(t._spec for t in tensors),
        tuple(type(s) for s in scalars),
        out_dtype,
        out_layout,
        memory_config,
        blocks_fn is not None,
    )
    cache = mesh._program_cache
    prog = cache.get(key)
    if prog is None:
        prog = build_program(
            name,
            mesh,
            local_fn,
            tensors,
            scalars,
            out_dtype,
            out_layout,
            placement_rule,
            memory_config,
            meta,
            blocks_fn,
        )
        if mesh._program_cache_enabled:
            cache[key] = prog
    results = call_program(prog, mesh, [t._data for t in tensors], scalars)
    recorder = _capture.current()
    if recorder is not None:
        recorder.record(prog, mesh, tensors, scalars, results)
    return results[0] if prog.single else tuple(results)


# Programs ttjax lets run ahead of the host when XLA's CPU launch pool could not be sized
# (_config.launch_pool_sized): XLA's CPU client lets 32 run per device, then blocks a launch thread.
DISPATCH_WINDOW = 16
_in_flight: collections.deque[Any] = collections.deque()
_window: list[bool] = []  # [whether the window is on], decided at the first launch


def launched(output: Any) -> None:
    """Note a program just dispatched (``output``: one of its output arrays); past
    :data:`DISPATCH_WINDOW` programs in flight, wait for the oldest to finish, unless XLA's CPU
    client has two launch threads per device (``import ttjax`` before JAX starts sees to that).

    A launch on XLA's CPU client that finds 32 programs running on a device blocks one of the
    client's pool threads until one finishes; a program's collective needs a pool thread on each
    of its devices at once, so with one thread per device the blocked launches starve it and the
    process freezes (gemma3's vision MLP all-gather, gpt_oss's prefill reduce-scatter). Bounding
    the run-ahead keeps every launch from blocking; the wait is on work ``DISPATCH_WINDOW``
    programs old, so the devices stay busy. The window costs time where the pool was sized (each
    wait gives the host thread's CPU away), so it is on only where it is needed.

    >>> import jax.numpy as jnp
    >>> launched(jnp.zeros(2)); len(_in_flight) <= DISPATCH_WINDOW
    True
    """
    if not _window:
        devices = jax.devices()
        sized = _config.launch_pool_sized(len(devices))
        _window.append(devices[0].platform == "cpu" and not sized)
    if not _window[0]:
        return
    _in_flight.append(output)
    if len(_in_flight) > DISPATCH_WINDOW:
        oldest = _in_flight.popleft()
        if not oldest.is_deleted():
            oldest.block_until_ready()


def call_program(
    prog: Program, mesh: MeshDevice, datas: Sequence[Any], scalars: Sequence[Any]
) -> list[Tensor]:
    """Run a compiled program on raw storage and wrap its outputs as Tensors."""
    out = prog.fn(*datas, *scalars)
    leaves = [out] if prog.single else list(out)
    results = [Tensor(d, spec) for d, spec in zip(leaves, prog.outs)]
    first = _blockfloat.primary(leaves[0])
    if not isinstance(first, jax.core.Tracer):
        mesh._last_outputs = (first,)
        launched(first)
    return results


__all__ = [
    "OpMeta",
    "Program",
    "blocks_local",
    "blocks_storage",
    "build_program",
    "call_program",
    "capture_active",
    "common_mesh",
    "decode_local",
    "default_placements",
    "device_mask",
    "encode_local",
    "launched",
    "moves_whole_blocks",
    "output_memory_config",
    "per_field",
    "run_op",
]


def _view_of(small: MeshDevice, mesh: MeshDevice) -> bool:
    """Whether ``small`` is a block or device view of ``mesh`` (not a submesh of it)."""
    parent = small._parent
    return (
        parent is not None
        and small not in parent._submeshes
        and parent.same_mesh(mesh)
        and not small.same_mesh(mesh)
    )


def on_smallest(op: str, tensors: Sequence[Tensor]) -> Sequence[Tensor]:
    """``tensors``, those of a whole mesh restricted to the devices of an input TT-NN keeps on
    some of that mesh's devices only (a block of it), when there is one.

    TT-NN runs an op on the coordinates of its input that spans the fewest devices, the others'
    being a superset (``extract_tensor_coordinates``, mesh_device_operation_utils.hpp): a
    replicated weight meets an activation that lives on the first device only, and the op runs
    there. Anything else is left to :func:`common_mesh`'s checks.
    """
    meshes = [
        t._mesh
        for t in tensors
        if isinstance(t, Tensor) and t._mesh is not None and t._storage is StorageType.DEVICE
    ]
    if all(m is meshes[0] for m in meshes):  # the usual case: one mesh
        return tensors
    small = min(meshes, key=lambda m: m.get_num_devices())
    big = [m for m in meshes if not m.same_mesh(small)]
    if not big or not all(_view_of(small, m) for m in big):
        return tensors
    if _capture.active() or any(is_traced(t) for t in tensors):
        raise MeshMismatchError(
            f"ttnn.{op}: one input lives on the {small.shape!r} block of {big[0]!r} only (a "
            "split with fewer chunks than devices, or combine_device_tensors of some devices' "
            "tensors); ttjax runs such an op on that block eagerly, not inside a trace capture "
            "or jax.jit.\nfix: run it outside the capture / jit, or give that input every "
            "device of the mesh (e.g. ttnn.ReplicateTensorToMesh)."
        )
    return [
        restrict_to_block(t, small)
        if isinstance(t, Tensor) and t._mesh is not None and not t._mesh.same_mesh(small)
        else t
        for t in tensors
    ]


def restrict_to_block(tensor: Tensor, block: MeshDevice) -> Tensor:
    """``tensor`` (on ``block``'s parent mesh) held on ``block``'s devices only: replicated it
    stays replicated; otherwise each device keeps its own local tensor (``PlacementLocal``)."""
    parent = tensor._mesh
    assert parent is not None
    spec = tensor._spec
    replicated = all(isinstance(p, PlacementReplicate) for p in spec.placements)
    placements: tuple[Placement, ...] = (
        (PlacementReplicate(),) * block.shape.dims()
        if replicated
        else (PlacementLocal(),) * block.shape.dims()
    )
    lead = () if replicated else (1,) * block.shape.dims()
    sharding = jax.sharding.NamedSharding(
        block.jax_mesh, _specs.partition_spec(placements, block.axis_names, len(spec.shape))
    )
    devices = [block.devices[c] for c in np.ndindex(*block.shape)]

    def restrict(leaf: Any, shape: tuple[int, ...]) -> Any:
        here = {s.device: s.data for s in leaf.addressable_shards}
        arrays = [jnp.reshape(here[d], lead + shape) for d in devices]
        gshape = shape if replicated else tuple(block.shape) + shape
        return jax.make_array_from_single_device_arrays(gshape, sharding, arrays)

    if spec.dtype.is_block_float:
        ms, es = _blockfloat.storage_shapes(spec.dtype, spec.shape)
        data: Any = _blockfloat.BlockFloatData(
            restrict(tensor._data.mantissa, tuple(ms)), restrict(tensor._data.exponent, tuple(es))
        )
    else:
        data = restrict(tensor._data, tuple(spec.shape))
    return Tensor(data, spec.replace(mesh=block, placements=placements))


def spread_to_parent(tensor: Tensor) -> tuple[Tensor, Tensor]:
    """``tensor``, held on a block of its parent mesh (``combine_device_tensors`` of some of a
    mesh's device tensors), over the whole parent with zeros elsewhere, and an int32 [1] tensor
    that is 1 on the block's devices, 0 on the others.

    TT-NN runs an op on the coordinates of its input that spans the fewest devices
    (``extract_tensor_coordinates``, mesh_device_operation_utils.hpp); an in-place op reaching
    the whole mesh this way keeps its old values where the mask is 0.
    """
    block = tensor._mesh
    assert block is not None and block._parent is not None and block._offset is not None
    parent = block._parent
    inside = np.zeros(tuple(parent.shape), dtype=bool)
    inside[tuple(slice(o, o + n) for o, n in zip(block._offset, block.shape))] = True
    lead = (1,) * parent.shape.dims()
    placements = (PlacementLocal(),) * parent.shape.dims()

    def spread(leaf: Any, shape: tuple[int, ...], fill: Callable[[tuple[int, ...]], Any]) -> Any:
        here = {s.device: s.data for s in leaf.addressable_shards} if leaf is not None else {}
        arrays = [
            jax.device_put(
                jnp.reshape(here[dev], lead + shape)
                if leaf is not None and inside[c]
                else fill(c).reshape(lead + shape),
                dev,
            )
            for c in np.ndindex(*parent.shape)
            for dev in [parent.devices[c]]
        ]
        sharding = jax.sharding.NamedSharding(
            parent.jax_mesh, _specs.partition_spec(placements, parent.axis_names, len(shape))
        )
        return jax.make_array_from_single_device_arrays(
            tuple(parent.shape) + shape, sharding, arrays
        )

    def zeros(leaf: Any, shape: tuple[int, ...]) -> Callable[[tuple[int, ...]], Any]:
        return lambda c: np.zeros(shape, dtype=leaf.dtype)

    if tensor._dtype.is_block_float:
        ms, es = _blockfloat.storage_shapes(tensor._dtype, tensor._shape)
        m, e = tensor._data.mantissa, tensor._data.exponent
        data: Any = _blockfloat.BlockFloatData(
            spread(m, tuple(ms), zeros(m, tuple(ms))), spread(e, tuple(es), zeros(e, tuple(es)))
        )
    else:
        shape = tuple(tensor._shape)
        data = spread(tensor._data, shape, zeros(tensor._data, shape))
    spread_tensor = Tensor(
        data,
        TensorSpec(
            parent, placements, tensor._dtype, tensor._layout, tensor._shape, StorageType.DEVICE
        ),
    )
    return spread_tensor, device_mask(parent, inside)


def device_mask(mesh: MeshDevice, inside: np.ndarray) -> Tensor:
    """An int32 [1] tensor per device of ``mesh``: 1 where ``inside`` (a bool array of the mesh's
    shape) is True, else 0 (the devices an op writes, e.g. TT-NN's ``mesh_coords=``)."""
    placements = (PlacementLocal(),) * mesh.shape.dims()
    lead = (1,) * mesh.shape.dims()
    arrays = [
        jax.device_put(np.array([int(inside[c])], dtype=np.int32).reshape(lead + (1,)), dev)
        for c in np.ndindex(*mesh.shape)
        for dev in [mesh.devices[c]]
    ]
    sharding = jax.sharding.NamedSharding(
        mesh.jax_mesh, _specs.partition_spec(placements, mesh.axis_names, 1)
    )
    data = jax.make_array_from_single_device_arrays(tuple(mesh.shape) + (1,), sharding, arrays)
    spec = TensorSpec(mesh, placements, DataType.INT32, Layout.ROW_MAJOR, (1,), StorageType.DEVICE)
    return Tensor(data, spec)
