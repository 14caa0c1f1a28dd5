"""TT-NN's ``ttnn.experimental.*_async`` collectives, called exactly as Tenstorrent's model code calls them.

Each op takes the arguments TT-NN's binding takes, in TT-NN's order, resolving overloads as
pybind does (the first whose names, arity and argument types fit). The hardware-only arguments
are checked as TT-NN checks them: a semaphore list has the count the kernel needs and belongs to
the tensor's mesh (or a mesh it was carved from), a ``subdevice_id`` exists in the loaded
sub-device manager, ``num_links > 0``. Like TT-NN, the kernel-specific checks (semaphore count,
scatter dims, rows per link) apply where TT-NN runs its native kernel (tile-aligned TILE
tensors); row-major or tile-padded tensors take TT-NN's composite path, which uses no semaphores.
The values come from the one collective floor in :mod:`ttjax.ccl`; a persistent output buffer is
checked against the result's shape and dtype, written, and returned (TT-NN's in-place form).

>>> cores = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(7, 7))})
>>> sems = [ttnn.create_global_semaphore(mesh, cores, 0) for _ in range(2)]
>>> y = ttnn.experimental.all_gather_async(
...     x, persistent_output_buffer=None, dim=3, multi_device_global_semaphore=sems,
...     num_links=1, cluster_axis=1, topology=ttnn.Topology.Linear,
...     chunks_per_sync=10, num_workers_per_link=2, num_buffers_per_channel=2)
>>> y.shape
Shape([1, 1, 32, 128])
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from ttjax import ccl
from ttjax._dispatch import run_op
from ttjax.enums import DataType, Layout, ReduceType, Topology
from ttjax.errors import CCLError, CCLSignatureError
from ttjax.hardware import BufferType, CoreCoord, MemoryConfig, TensorMemoryLayout
from ttjax.mesh import MeshDevice
from ttjax.ops._common import core_set
from ttjax.ops.data_movement import concat
from ttjax.ops.data_movement import slice as slice_op
from ttjax.ops.fused import (
    nlp_concat_heads_decode,
    rms_norm_post_all_gather,
    rms_norm_pre_all_gather,
)
from ttjax.ops.matmul import linear
from ttjax.ops.memory import to_memory_config
from ttjax.ops.pointwise import add, typecast
from ttjax.subdevice import GlobalSemaphore, SubDeviceId
from ttjax.tensor import Tensor

# ---------------------------------------------------------------------------------------------
# pybind-style overload resolution
# ---------------------------------------------------------------------------------------------


def _uint(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and int(x) >= 0


def _opt(pred: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda x: x is None or pred(x)


class GlobalSemaphoreArg:
    """TT-NN's argument type for all_gather_async's semaphores: one semaphore or a list of them."""

    def __init__(self, semaphores: GlobalSemaphore | Sequence[GlobalSemaphore]) -> None:
        if not (isinstance(semaphores, GlobalSemaphore) or _sems(semaphores)):
            raise CCLSignatureError(
                f"GlobalSemaphoreArg({_short(semaphores)}): expected a GlobalSemaphore or a list "
                "of them.\nfix: create them with ttnn.create_global_semaphore(mesh, cores, 0)."
            )
        self.semaphores: list[GlobalSemaphore] = (
            [semaphores] if isinstance(semaphores, GlobalSemaphore) else list(semaphores)
        )

    def get(self) -> list[GlobalSemaphore]:
        return list(self.semaphores)

    def __repr__(self) -> str:
        return f"GlobalSemaphoreArg({self.semaphores!r})"


def _sem(x: Any) -> bool:
    return isinstance(x, GlobalSemaphore)


def _sems(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and all(_sem(s) for s in x)


def _tensors(x: Any) -> bool:
    return isinstance(x, (list, tuple)) and all(isinstance(t, Tensor) for t in x)


# What pybind's casters accept for each argument name (a name not listed accepts anything).
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "Tensor": (lambda x: isinstance(x, Tensor), "a ttnn.Tensor"),
    "Tensor?": (_opt(lambda x: isinstance(x, Tensor)), "a ttnn.Tensor or None"),
    "Tensors?": (_opt(_tensors), "a list of ttnn.Tensor or None"),
    "int": (lambda x: isinstance(x, (int, np.integer)) and not isinstance(x, bool), "an int"),
    "uint": (_uint, "a non-negative int"),
    "uint?": (_opt(_uint), "a non-negative int or None"),
    "bool": (lambda x: isinstance(x, (bool, np.bool_)), "a bool"),
    "sem": (_sem, "a GlobalSemaphore"),
    "sem?": (_opt(_sem), "a GlobalSemaphore or None"),
    "sems": (_sems, "a list of GlobalSemaphore"),
    "sems?": (_opt(_sems), "a list of GlobalSemaphore or None"),
    "sem|sems": (
        lambda x: _sem(x) or _sems(x) or isinstance(x, GlobalSemaphoreArg),
        "a GlobalSemaphore, a list of them or a GlobalSemaphoreArg",
    ),
    "mesh": (lambda x: isinstance(x, MeshDevice), "a ttnn.MeshDevice"),
    "mem?": (_opt(lambda x: isinstance(x, MemoryConfig)), "a ttnn.MemoryConfig or None"),
    "topo": (lambda x: isinstance(x, Topology), "a ttnn.Topology"),
    "subdev?": (_opt(lambda x: isinstance(x, SubDeviceId)), "a ttnn.SubDeviceId or None"),
    "subdev": (lambda x: isinstance(x, SubDeviceId), "a ttnn.SubDeviceId"),
    "reduce": (lambda x: isinstance(x, ReduceType), "a ttnn.ReduceType"),
    "dtype?": (_opt(lambda x: isinstance(x, DataType)), "a ttnn.DataType or None"),
    "str": (lambda x: isinstance(x, str), "a str"),
    "shape2?": (
        _opt(lambda x: isinstance(x, (tuple, list)) and len(x) == 2 and all(_uint(v) for v in x)),
        "a (rows, cols) pair or None",
    ),
    "core": (
        lambda x: (
            isinstance(x, CoreCoord)
            or (isinstance(x, (tuple, list)) and len(x) == 2 and all(_uint(v) for v in x))
        ),
        "a ttnn.CoreCoord or an (x, y) pair",
    ),
}


@dataclass(frozen=True)
class _Overload:
    """One of a binding's overloads: its Python signature and each argument's pybind kind."""

    signature: inspect.Signature
    kinds: dict[str, str]

    def text(self) -> str:
        return str(self.signature).replace("'", "")

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | str:
        """The arguments by name, or why this overload does not fit."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            return str(e)
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            kind = self.kinds.get(name)
            if kind is not None and not _KINDS[kind][0](value):
                return f"{name}={_short(value)} is not {_KINDS[kind][1]}"
        return dict(bound.arguments)


def _overload(template: Callable[..., Any], **kinds: str) -> _Overload:
    """An overload from a template function's signature; ``kinds`` may hold names it lacks."""
    sig = inspect.signature(template)
    unknown = set(kinds.values()) - set(_KINDS)
    assert not unknown, f"{template.__name__}: unknown kinds {unknown}"
    return _Overload(sig, {k: v for k, v in kinds.items() if k in sig.parameters})


def _short(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"Tensor(shape={list(value._shape)}, dtype={value._dtype!r})"
    if isinstance(value, GlobalSemaphore):
        return f"GlobalSemaphore(address={value.address:#x}, mesh id {value.mesh_device.id()})"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _resolve(
    op: str, overloads: Sequence[_Overload], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    """The first overload that fits, as pybind picks it; raises TT-NN's TypeError otherwise."""
    reasons = []
    for i, ov in enumerate(overloads):
        got = ov.bind(args, kwargs)
        if isinstance(got, dict):
            return i, got
        reasons.append(f"    {i + 1}. {op}{ov.text()}\n       -> {got}")
    invoked = ", ".join([_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()])
    raise CCLSignatureError(
        f"ttnn.experimental.{op}(): incompatible function arguments. The following argument "
        "types are supported:\n" + "\n".join(reasons) + f"\nInvoked with: {invoked}\n"
        f"fix: call ttnn.experimental.{op} with one of the signatures above."
    )


# ---------------------------------------------------------------------------------------------
# Checks TT-NN makes on the hardware-only arguments
# ---------------------------------------------------------------------------------------------


def _mesh_name(mesh: Any) -> str:
    return f"{mesh!r} (id {mesh.id()})"


def _on_mesh_or_ancestor(sem_mesh: MeshDevice, mesh: MeshDevice) -> bool:
    """Whether ``sem_mesh`` is ``mesh`` or a mesh it was carved from (its semaphore's L1 buffer
    then exists on every device of ``mesh``)."""
    m: MeshDevice | None = mesh
    while m is not None:
        if m.same_mesh(sem_mesh):
            return True
        m = m._parent
    return False


def _check_semaphores(op: str, t: Tensor, name: str, sems: Any, count: int | None = None) -> None:
    """Each semaphore belongs to the tensor's mesh; a list has the ``count`` the kernel needs."""
    if sems is None:
        return
    many = isinstance(sems, (list, tuple))
    items = list(sems) if many else [sems]
    mesh: MeshDevice = t._mesh  # type: ignore[assignment]
    for i, s in enumerate(items):
        where = f"{name}[{i}]" if many else name
        if not s.mesh_device.is_open:
            raise CCLError(
                f"ttnn.experimental.{op}: {where} was created on mesh "
                f"{_mesh_name(s.mesh_device)}, which was closed.\n"
                "fix: create the semaphores again on the open mesh with "
                "ttnn.create_global_semaphore."
            )
        if not _on_mesh_or_ancestor(s.mesh_device, mesh):
            raise CCLError(
                f"ttnn.experimental.{op}: {where} was created on mesh {_mesh_name(s.mesh_device)}, "
                f"but the tensor lives on mesh {_mesh_name(mesh)}.\n"
                "fix: create the semaphores with ttnn.create_global_semaphore(<the tensor's mesh "
                "device>, cores, 0)."
            )
    if count is not None and len(items) != count:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, semaphore size should be {count} but has "
            f"{len(items)} ({name}={_short(sems)}).\n"
            f"fix: pass a list of {count} semaphores from ttnn.create_global_semaphore."
        )


def _check_common(
    op: str,
    a: dict[str, Any],
    sem_name: str | None = None,
    sem_count: int | None = None,
) -> Tensor:
    """Tensor on a mesh, mesh_device, semaphores, barrier, subdevice_id and num_links."""
    t = ccl._check_tensor(op, a["input_tensor"])
    mesh: MeshDevice = t._mesh  # type: ignore[assignment]
    ccl._check_mesh_arg(op, t, a.get("mesh_device"))
    if sem_name is not None:
        _check_semaphores(op, t, sem_name, a[sem_name], sem_count)
    _check_semaphores(op, t, "barrier_semaphore", a.get("barrier_semaphore"))
    sub = a.get("subdevice_id")
    if sub is not None:
        mesh._sub_devices.check_id(f"experimental.{op}", sub)
    links = a.get("num_links")
    if links is not None and int(links) <= 0:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, num_links should be more than 0 but has {links}.\n"
            "fix: num_links=1."
        )
    return t


def _check_link_rows(op: str, t: Tensor, num_links: Any) -> None:
    """TT-NN spreads a link's worker cores over grid rows: at most one link per row."""
    rows = t._mesh.compute_with_storage_grid_size().y  # type: ignore[union-attr]
    if num_links is not None and int(num_links) > rows:
        raise CCLError(
            f"ttnn.experimental.{op}: num_links={num_links}: Worker cores used by links are "
            f"parallelized over rows, and the grid has {rows} rows.\nfix: num_links <= {rows}."
        )


def _check_group(op: str, t: Tensor, cluster_axis: Any) -> int:
    """The devices in the op's group; TT-NN's async CCLs refuse a group of one."""
    axes = ccl._group(op, t._mesh, cluster_axis)  # type: ignore[arg-type]
    n = ccl._size(t._mesh, axes)  # type: ignore[arg-type]
    if n <= 1:
        raise CCLError(
            f"ttnn.experimental.{op}: {op} op will only work for num_devices > 1, but has {n} "
            f"(cluster_axis={cluster_axis!r} on mesh {t._mesh!r}).\n"
            "fix: skip the collective on a single device, or pick a mesh axis with several devices."
        )
    return n


def _check_topology(op: str, topology: Topology) -> None:
    if topology not in (Topology.Ring, Topology.Linear):
        raise CCLError(
            f"ttnn.experimental.{op}: topology={topology!r}: topology must be Ring or Linear.\n"
            "fix: ttnn.Topology.Ring or ttnn.Topology.Linear."
        )


def _check_output(
    op: str, name: str, buf: Tensor, t: Tensor, shape: tuple[int, ...], dtype: DataType
) -> None:
    """A persistent buffer lives on the tensor's mesh and matches the result (TT-NN's checks)."""
    if buf._mesh is None or not buf._mesh.same_mesh(t._mesh):
        raise CCLError(
            f"ttnn.experimental.{op}: {name} lives on {buf._mesh!r}, not on the input's mesh "
            f"{t._mesh!r}.\nfix: allocate {name} on the input tensor's mesh device."
        )
    if buf._dtype is not dtype:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, Output tensor dtype should be same as input tensor "
            f"dtype but has {buf._dtype!r} ({name}; expected {dtype!r}).\n"
            f"fix: allocate {name} with dtype={dtype!r}."
        )
    if buf._layout is not t._layout:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, Output tensor layout should be same as input tensor "
            f"layout but has {buf._layout!r} ({name}; expected {t._layout!r}).\n"
            f"fix: allocate {name} with layout={t._layout!r}."
        )
    if len(buf._shape) != len(shape):
        raise CCLError(
            f"ttnn.experimental.{op}: Error, Output tensor shape should have same number of "
            f"dimensions as input tensor but has {len(buf._shape)} ({name} has per-device shape "
            f"{list(buf._shape)}, the result {list(shape)}).\n"
            f"fix: allocate {name} with per-device shape {list(shape)}."
        )
    for i, (have, want) in enumerate(zip(buf._shape, shape)):
        if have != want:
            raise CCLError(
                f"ttnn.experimental.{op}: Error, Output tensor shape at dimension {i} should be "
                f"{want} but has {have} ({name} has per-device shape {list(buf._shape)}, the "
                f"result {list(shape)}).\nfix: allocate {name} with per-device shape {list(shape)}."
            )


def _write(op: str, name: str, result: Tensor, buf: Tensor | None, t: Tensor) -> Tensor:
    """Write ``result`` into the persistent buffer ``buf`` (TT-NN's checks first) and return it."""
    if buf is None:
        return result
    _check_output(op, name, buf, t, tuple(result._shape), result._dtype)
    if buf.memory_config() != result.memory_config():
        raise CCLError(
            f"ttnn.experimental.{op}: Error, Output tensor memory config should be same as "
            f"output_mem_config but has {buf.memory_config()!r} ({name}; the op's output memory "
            f"config is {result.memory_config()!r}).\n"
            f"fix: allocate {name} with memory_config={result.memory_config()!r}, or pass that "
            "memory_config to the op."
        )
    return buf.assign(result)


def _padded_or_row_major(t: Tensor, d: int) -> bool:
    """Whether TT-NN takes its composite path: a row-major tensor, or tiles padded on dim ``d``."""
    if t._layout is not Layout.TILE:
        return True
    rank = len(t._shape)
    return (d == rank - 2 and t._shape[d] % 32 != 0) or (d == rank - 1 and t._shape[d] % 32 != 0)


def _rank3(op: str, t: Tensor) -> None:
    if len(t._shape) <= 2:
        raise CCLError(
            f"ttnn.experimental.{op}: AllGatherAsync requires tensor of rank 3 or greater, got "
            f"per-device shape {list(t._shape)}.\nfix: reshape to 4-D, e.g. [1, 1, H, W]."
        )


# ---------------------------------------------------------------------------------------------
# all_gather_async
# ---------------------------------------------------------------------------------------------


def _ag_plain(
    input_tensor,
    dim,
    multi_device_global_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Ring,
    subdevice_id=None,
    use_optimal_ccl_for_llama=False,
    barrier_semaphore=None,
): ...


def _ag_persistent(
    input_tensor,
    persistent_output_buffer,
    dim,
    multi_device_global_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Ring,
    subdevice_id=None,
    cluster_axis=None,
    use_optimal_ccl_for_llama=False,
    barrier_semaphore=None,
    chunks_per_sync=None,
    num_workers_per_link=None,
    num_buffers_per_channel=None,
): ...


def _ag_axis(
    input_tensor,
    dim,
    cluster_axis,
    mesh_device,
    topology,
    multi_device_global_semaphore,
    *,
    persistent_output_tensor=None,
    num_links=None,
    memory_config=None,
    subdevice_id=None,
    use_optimal_ccl_for_llama=False,
    barrier_semaphore=None,
): ...


_AG_COMMON = dict(
    input_tensor="Tensor",
    dim="int",
    multi_device_global_semaphore="sem|sems",
    num_links="uint?",
    memory_config="mem?",
    topology="topo",
    subdevice_id="subdev?",
    use_optimal_ccl_for_llama="bool",
    barrier_semaphore="sem?",
    chunks_per_sync="uint?",
    num_workers_per_link="uint?",
    num_buffers_per_channel="uint?",
)
_AG_OVERLOADS = (
    _overload(_ag_plain, **_AG_COMMON),
    _overload(
        _ag_persistent, persistent_output_buffer="Tensor?", cluster_axis="uint?", **_AG_COMMON
    ),
    _overload(
        _ag_axis,
        cluster_axis="uint",
        mesh_device="mesh",
        persistent_output_tensor="Tensor?",
        **_AG_COMMON,
    ),
)


def _all_gather(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], reverse: bool) -> Tensor:
    which, a = _resolve(op, _AG_OVERLOADS, args, kwargs)
    if isinstance(a["multi_device_global_semaphore"], GlobalSemaphoreArg):
        a["multi_device_global_semaphore"] = a["multi_device_global_semaphore"].get()
    t = ccl._check_tensor(op, a["input_tensor"])
    d = ccl._dim(op, t, a["dim"])
    # TT-NN runs a composite (all-broadcast + concat, no semaphores) for row-major tensors and
    # tiles padded on the gather dim; its native kernel needs two semaphores ("Default
    # implementation requires 2 semaphores"), or one for its llama-sharded variant (sharded
    # output, memory_config.value_or(input's)).
    mc = a["memory_config"]
    llama = (mc if mc is not None else t.memory_config()).is_sharded()
    native = llama or not _padded_or_row_major(t, d)
    count = 2 if native and not llama and not a["use_optimal_ccl_for_llama"] else None
    t = _check_common(op, a, "multi_device_global_semaphore", count)
    if native:
        _check_link_rows(op, t, a["num_links"])
        _rank3(op, t)
    axis = a.get("cluster_axis")
    n = _check_group(op, t, axis)
    out = ccl.all_gather(t, d, axis, topology=a["topology"], memory_config=mc)
    if reverse:
        out = _reverse_chunks(out, d, n, mc)
    buf = a.get("persistent_output_buffer", a.get("persistent_output_tensor"))
    name = "persistent_output_buffer" if which == 1 else "persistent_output_tensor"
    return _write(op, name, out, buf, t)


def _reverse_chunks(t: Tensor, dim: int, n: int, memory_config: Any) -> Tensor:
    """The gathered pieces in reverse device order (all_gather_async_reversed)."""
    size = t._shape[dim] // n
    pieces = []
    for i in reversed(range(n)):
        start = [0] * len(t._shape)
        end = list(t._shape)
        start[dim], end[dim] = i * size, (i + 1) * size
        pieces.append(slice_op(t, start, end))
    return concat(pieces, dim, memory_config=memory_config)


def all_gather_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.all_gather_async``: the values of :func:`ttjax.all_gather`.

    Overloads, as bound by TT-NN (the first that fits wins):

    1. ``(input_tensor, dim, multi_device_global_semaphore, *, num_links=1, memory_config=None,
       topology=Ring, subdevice_id=None, use_optimal_ccl_for_llama=False, barrier_semaphore=None)``
    2. ``(input_tensor, persistent_output_buffer, dim, multi_device_global_semaphore, *, ...,
       cluster_axis=None, ..., chunks_per_sync=None, num_workers_per_link=None,
       num_buffers_per_channel=None)`` (tt_transformers' form)
    3. ``(input_tensor, dim, cluster_axis, mesh_device, topology, multi_device_global_semaphore, *,
       persistent_output_tensor=None, num_links=None, memory_config=None, subdevice_id=None,
       use_optimal_ccl_for_llama=False, barrier_semaphore=None)`` (the Galaxy Llama's form)

    ``multi_device_global_semaphore`` is a list of 2; TT-NN's llama-sharded kernel (a sharded output
    memory config, or ``use_optimal_ccl_for_llama=True``) takes one.
    """
    return _all_gather("all_gather_async", args, kwargs, reverse=False)


def all_gather_async_reversed(*args: Any, **kwargs: Any) -> Tensor:
    """``all_gather_async`` with the gathered pieces in reverse device order (same overloads)."""
    return _all_gather("all_gather_async_reversed", args, kwargs, reverse=True)


# ---------------------------------------------------------------------------------------------
# reduce-scatters
# ---------------------------------------------------------------------------------------------


def _rs_minimal(
    input_tensor,
    persistent_output_buffers=None,
    dim=None,
    multi_device_global_semaphore=None,
    *,
    barrier_semaphore=None,
    num_links=1,
    memory_config=None,
    intermediate_memory_config=None,
    topology=Topology.Ring,
    subdevice_id=None,
    cluster_axis=None,
    chunks_per_sync=None,
    num_workers_per_link=None,
    num_buffers_per_channel=None,
): ...


_RS_MINIMAL = (
    _overload(
        _rs_minimal,
        input_tensor="Tensor",
        persistent_output_buffers="Tensors?",
        dim="int",
        multi_device_global_semaphore="sems",
        barrier_semaphore="sem?",
        num_links="uint",
        memory_config="mem?",
        intermediate_memory_config="mem?",
        topology="topo",
        subdevice_id="subdev?",
        cluster_axis="uint?",
        chunks_per_sync="uint?",
        num_workers_per_link="uint?",
        num_buffers_per_channel="uint?",
    ),
)


def _scatter_dim(op: str, t: Tensor, dim: Any, n: int, allowed: Sequence[int]) -> int:
    d = ccl._dim(op, t, dim)
    if d not in allowed:
        raise CCLError(
            f"ttnn.experimental.{op}: dim={dim}: {op} only supports scattering on dim "
            f"{', '.join(map(str, allowed))} (per-device shape {list(t._shape)}).\n"
            f"fix: scatter along one of dims {list(allowed)}, reshaping first if needed."
        )
    if t._shape[d] % n:
        raise CCLError(
            f"ttnn.experimental.{op}: dim {d} of per-device shape {list(t._shape)} has size "
            f"{t._shape[d]}, which does not split into {n} pieces (one per device of the group).\n"
            f"fix: make dim {d} a multiple of {n}."
        )
    return d


def _composite_scatter(t: Tensor, d: int, n: int) -> bool:
    if t._layout is not Layout.TILE or d not in (1, 2, 3):
        return True
    return d in (2, 3) and (t._shape[d] // n) % 32 != 0


def reduce_scatter_minimal_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.reduce_scatter_minimal_async``: a sum reduce-scatter.

    ``(input_tensor, persistent_output_buffers=None, dim, multi_device_global_semaphore, *,
    barrier_semaphore=None, num_links=1, memory_config=None, intermediate_memory_config=None,
    topology=Ring, subdevice_id=None, cluster_axis=None, chunks_per_sync=None,
    num_workers_per_link=None, num_buffers_per_channel=None)``. The semaphore list holds 3;
    ``persistent_output_buffers`` is ``[intermediate, output]``: the result is written into
    ``output`` and returned.
    """
    op = "reduce_scatter_minimal_async"
    _, a = _resolve(op, _RS_MINIMAL, args, kwargs)
    t = ccl._check_tensor(op, a["input_tensor"])
    n = _check_group(op, t, a["cluster_axis"])
    d = ccl._dim(op, t, a["dim"])
    # TT-NN's composite (all-broadcast, add, mesh_partition; no semaphores) serves an even split
    # of a row-major tensor, of a dim other than 1-3, or with an output not tile-aligned; its
    # native kernel checks dims 1-3, 3 semaphores and Ring/Linear.
    native = not (t._shape[d] % n == 0 and _composite_scatter(t, d, n))
    t = _check_common(op, a, "multi_device_global_semaphore", 3 if native else None)
    if native:
        _check_topology(op, a["topology"])
        _scatter_dim(op, t, d, n, (1, 2, 3))
    bufs = a["persistent_output_buffers"]
    if bufs is not None and len(bufs) != 2:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, Number of output tensors should be 2 but has "
            f"{len(bufs)} (persistent_output_buffers).\nfix: pass [intermediate, output]."
        )
    if bufs is not None:
        inter = bufs[0]
        if inter._mesh is None or not inter._mesh.same_mesh(t._mesh):
            raise CCLError(
                f"ttnn.experimental.{op}: persistent_output_buffers[0] lives on {inter._mesh!r}, "
                f"not on the input's mesh {t._mesh!r}.\nfix: allocate it on the input's mesh."
            )
        if inter._dtype is not t._dtype or inter._layout is not t._layout:
            raise CCLError(
                f"ttnn.experimental.{op}: Error, intermediate tensor dtype/layout should be same as "
                f"input tensor's ({t._dtype!r}, {t._layout!r}) but has ({inter._dtype!r}, "
                f"{inter._layout!r}).\nfix: allocate the intermediate buffer like the input."
            )
    out = ccl.reduce_scatter(
        t,
        d,
        ReduceType.Sum,
        cluster_axis=a["cluster_axis"],
        topology=a["topology"],
        memory_config=a["memory_config"],
    )
    return _write(op, "persistent_output_buffers[1]", out, bufs[1] if bufs else None, t)


def _rs_async_plain(
    input_tensor,
    dim,
    from_remote_multi_device_global_semaphore,
    to_remote_multi_device_global_semaphore,
    math_op,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


def _rs_async_axis(
    input_tensor,
    dim,
    cluster_axis,
    mesh_device,
    from_remote_multi_device_global_semaphore,
    to_remote_multi_device_global_semaphore,
    *,
    persistent_output_tensors=None,
    math_op=ReduceType.Sum,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


_RS_ASYNC_COMMON = dict(
    input_tensor="Tensor",
    dim="int",
    from_remote_multi_device_global_semaphore="sem",
    to_remote_multi_device_global_semaphore="sem",
    math_op="reduce",
    memory_config="mem?",
    topology="topo",
    num_links="uint?",
    subdevice_id="subdev?",
)
_RS_ASYNC = (
    _overload(_rs_async_plain, **_RS_ASYNC_COMMON),
    _overload(
        _rs_async_axis,
        cluster_axis="uint",
        mesh_device="mesh",
        persistent_output_tensors="Tensors?",
        **_RS_ASYNC_COMMON,
    ),
)


def reduce_scatter_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's older ``ttnn.experimental.reduce_scatter_async`` (from/to-remote semaphores).

    1. ``(input_tensor, dim, from_remote_multi_device_global_semaphore,
       to_remote_multi_device_global_semaphore, math_op, *, memory_config=None, topology=Linear,
       num_links=None, subdevice_id=None)``
    2. ``(input_tensor, dim, cluster_axis, mesh_device, from_remote_..., to_remote_..., *,
       persistent_output_tensors=None, math_op=Sum, memory_config=None, topology=Linear,
       num_links=None, subdevice_id=None)``
    """
    op = "reduce_scatter_async"
    _, a = _resolve(op, _RS_ASYNC, args, kwargs)
    t = _check_common(op, a)
    for name in (
        "from_remote_multi_device_global_semaphore",
        "to_remote_multi_device_global_semaphore",
    ):
        _check_semaphores(op, t, name, a[name])
    n = _check_group(op, t, a.get("cluster_axis"))
    d = _scatter_dim(op, t, a["dim"], n, range(len(t._shape)))
    out = ccl.reduce_scatter(
        t,
        d,
        a["math_op"],
        cluster_axis=a.get("cluster_axis"),
        topology=a["topology"],
        memory_config=a["memory_config"],
    )
    bufs = a.get("persistent_output_tensors")
    return _write(op, "persistent_output_tensors[-1]", out, bufs[-1] if bufs else None, t)


def _llama_rs(
    input_tensor,
    intermediate_packet_buffer,
    dim,
    cross_device_semaphore,
    subdevice_id,
    cluster_axis,
    mesh_device,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Linear,
    use_noc1_only=False,
): ...


_LLAMA_RS = (
    _overload(
        _llama_rs,
        input_tensor="Tensor",
        intermediate_packet_buffer="Tensor",
        dim="uint",
        cross_device_semaphore="sem",
        subdevice_id="subdev",
        cluster_axis="uint",
        mesh_device="mesh",
        num_links="uint",
        memory_config="mem?",
        topology="topo",
        use_noc1_only="bool",
    ),
)


def llama_reduce_scatter(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.llama_reduce_scatter``: a sum reduce-scatter along the last dim
    over the 2 or 4 devices of mesh axis 1 (the Galaxy Llama's decode MLP).

    ``(input_tensor, intermediate_packet_buffer, dim, cross_device_semaphore, subdevice_id,
    cluster_axis, mesh_device, *, num_links=1, memory_config=None, topology=Linear,
    use_noc1_only=False)``
    """
    op = "llama_reduce_scatter"
    _, a = _resolve(op, _LLAMA_RS, args, kwargs)
    t = _check_common(op, a, "cross_device_semaphore")
    if a["dim"] != 3:
        raise CCLError(
            f"ttnn.experimental.{op}: dim must be 3, got {a['dim']}.\n"
            "fix: scatter the last dim of a 4-D tensor (dim=3)."
        )
    if a["cluster_axis"] != 1:
        raise CCLError(
            f"ttnn.experimental.{op}: cluster_axis must be 1, got {a['cluster_axis']}.\n"
            "fix: cluster_axis=1."
        )
    n = _check_group(op, t, 1)
    if n not in (2, 4):
        raise CCLError(
            f"ttnn.experimental.{op}: ring_devices must be 4 or 2, got {n} (mesh {t._mesh!r}).\n"
            "fix: run it on a mesh whose axis 1 has 2 or 4 devices."
        )
    d = _scatter_dim(op, t, 3, n, (3,))
    buf = a["intermediate_packet_buffer"]
    if buf._mesh is None or not buf._mesh.same_mesh(t._mesh):
        raise CCLError(
            f"ttnn.experimental.{op}: intermediate_packet_buffer lives on {buf._mesh!r}, not on "
            f"the input's mesh {t._mesh!r}.\nfix: allocate it on the input's mesh device."
        )
    return ccl.reduce_scatter(
        t,
        d,
        ReduceType.Sum,
        cluster_axis=1,
        topology=a["topology"],
        memory_config=a["memory_config"],
    )


# ---------------------------------------------------------------------------------------------
# all-reduce
# ---------------------------------------------------------------------------------------------


def _ar_devices(
    input_tensor,
    num_devices,
    barrier_semaphores,
    rs_global_semaphores,
    ag_global_semaphores,
    math_op,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


def _ar_axis(
    input_tensor,
    cluster_axis,
    mesh_device,
    barrier_semaphores,
    rs_global_semaphores,
    ag_global_semaphores,
    math_op,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


def _ar_buffer(
    input_tensor,
    buffer_tensor,
    cluster_axis,
    mesh_device,
    multi_device_global_semaphore,
    *,
    dtype=None,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
    use_noc1_only=False,
    use_optimal_ccl_for_llama=False,
): ...


def _ar_remote(
    input_tensor,
    cluster_axis,
    mesh_device,
    from_remote_multi_device_global_semaphore,
    to_remote_multi_device_global_semaphore,
    gather_multi_device_global_semaphore,
    math_op,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
): ...


_AR_COMMON = dict(
    input_tensor="Tensor",
    math_op="reduce",
    memory_config="mem?",
    topology="topo",
    num_links="uint?",
    subdevice_id="subdev?",
)
_AR = (
    _overload(
        _ar_devices,
        num_devices="uint",
        barrier_semaphores="sems",
        rs_global_semaphores="sems",
        ag_global_semaphores="sems",
        **_AR_COMMON,
    ),
    _overload(
        _ar_axis,
        cluster_axis="uint?",
        mesh_device="mesh",
        barrier_semaphores="sems?",
        rs_global_semaphores="sems?",
        ag_global_semaphores="sems?",
        **_AR_COMMON,
    ),
    _overload(
        _ar_buffer,
        buffer_tensor="Tensor",
        cluster_axis="uint",
        mesh_device="mesh",
        multi_device_global_semaphore="sem",
        dtype="dtype?",
        use_noc1_only="bool",
        use_optimal_ccl_for_llama="bool",
        **_AR_COMMON,
    ),
    _overload(
        _ar_remote,
        cluster_axis="uint?",
        mesh_device="mesh",
        from_remote_multi_device_global_semaphore="sem",
        to_remote_multi_device_global_semaphore="sem",
        gather_multi_device_global_semaphore="sem",
        **_AR_COMMON,
    ),
)

# Semaphores per list in the composite (reduce_scatter_minimal_async + all_gather_async) path.
_AR_SEM_COUNTS = {"barrier_semaphores": 2, "rs_global_semaphores": 3, "ag_global_semaphores": 2}


def all_reduce_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.all_reduce_async``: the values of :func:`ttjax.all_reduce`.

    1. ``(input_tensor, num_devices, barrier_semaphores, rs_global_semaphores,
       ag_global_semaphores, math_op, *, memory_config=None, topology=Linear, num_links=None,
       subdevice_id=None)`` over the whole mesh (``num_devices`` must be its size)
    2. ``(input_tensor, cluster_axis, mesh_device, barrier_semaphores, rs_global_semaphores,
       ag_global_semaphores, math_op, *, ...)``
    3. ``(input_tensor, buffer_tensor, cluster_axis, mesh_device, multi_device_global_semaphore, *,
       dtype=None, memory_config=None, topology=Linear, num_links=None, subdevice_id=None,
       use_noc1_only=False, use_optimal_ccl_for_llama=False)`` (the Galaxy Llama's sum)
    4. the older ``(input_tensor, cluster_axis, mesh_device, from_remote_..., to_remote_...,
       gather_multi_device_global_semaphore, math_op, *, ...)`` that SD3.5's VAE still passes
    """
    op = "all_reduce_async"
    which, a = _resolve(op, _AR, args, kwargs)
    t = _check_common(op, a)
    if which in (0, 1):
        for name, count in _AR_SEM_COUNTS.items():
            _check_semaphores(op, t, name, a[name], count)
    elif which == 2:
        _check_semaphores(
            op, t, "multi_device_global_semaphore", a["multi_device_global_semaphore"]
        )
    else:
        for name in (
            "from_remote_multi_device_global_semaphore",
            "to_remote_multi_device_global_semaphore",
            "gather_multi_device_global_semaphore",
        ):
            _check_semaphores(op, t, name, a[name])
    axis = a.get("cluster_axis")
    n = _check_group(op, t, axis)
    if which == 0 and a["num_devices"] != n:
        raise CCLError(
            f"ttnn.experimental.{op}: num_devices={a['num_devices']} but the tensor's mesh "
            f"{t._mesh!r} has {n} devices.\nfix: num_devices={n}, or use the cluster_axis form."
        )
    math_op = a.get("math_op", ReduceType.Sum)
    out = ccl.all_reduce(
        t, axis, math_op=math_op, topology=a["topology"], memory_config=a["memory_config"]
    )
    if which == 2:
        buf = a["buffer_tensor"]
        if buf._mesh is None or not buf._mesh.same_mesh(t._mesh):
            raise CCLError(
                f"ttnn.experimental.{op}: buffer_tensor lives on {buf._mesh!r}, not on the "
                f"input's mesh {t._mesh!r}.\nfix: allocate it on the input's mesh device."
            )
        if a["dtype"] is not None and a["dtype"] is not out._dtype:
            out = typecast(out, a["dtype"])
    return out


# ---------------------------------------------------------------------------------------------
# all-to-all
# ---------------------------------------------------------------------------------------------


def _a2a(
    input_tensor,
    persistent_intermediate_buffer,
    persistent_output_buffer,
    in_dim,
    out_dim,
    multi_device_global_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Ring,
    subdevice_id=None,
): ...


_A2A = (
    _overload(
        _a2a,
        input_tensor="Tensor",
        persistent_intermediate_buffer="Tensor",
        persistent_output_buffer="Tensor",
        in_dim="int",
        out_dim="int",
        multi_device_global_semaphore="sem",
        num_links="uint",
        memory_config="mem?",
        topology="topo",
        subdevice_id="subdev?",
    ),
)


def all_to_all_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.all_to_all_async`` over the whole mesh.

    ``(input_tensor, persistent_intermediate_buffer, persistent_output_buffer, in_dim, out_dim,
    multi_device_global_semaphore, *, num_links=1, memory_config=None, topology=Ring,
    subdevice_id=None)``; the result is written into ``persistent_output_buffer``.
    """
    op = "all_to_all_async"
    _, a = _resolve(op, _A2A, args, kwargs)
    t = _check_common(op, a, "multi_device_global_semaphore")
    # TT-NN's native kernel serves only tile-aligned 4-D DRAM-interleaved tensors exchanged
    # between dims 2 and 3; everything else takes its composite path.
    mc = t.memory_config()
    out_mc = a["memory_config"]
    native = (
        len(t._shape) == 4
        and t._layout is Layout.TILE
        and mc.buffer_type is BufferType.DRAM
        and not mc.is_sharded()
        and (out_mc is None or not out_mc.is_sharded())
        and a["in_dim"] in (2, 3)
        and a["out_dim"] in (2, 3)
        and t._shape[2] % 32 == 0
        and t._shape[3] % 32 == 0
    )
    if native:
        _check_link_rows(op, t, a["num_links"])
        if a["in_dim"] == a["out_dim"]:
            raise CCLError(
                f"ttnn.experimental.{op}: AllToAllAsync: in_dim and out_dim must be different, "
                f"but are both {a['in_dim']}.\nfix: e.g. in_dim=2, out_dim=3."
            )
    _check_group(op, t, None)
    out = ccl.all_to_all(
        t, a["in_dim"], a["out_dim"], topology=a["topology"], memory_config=a["memory_config"]
    )
    return _write(op, "persistent_output_buffer", out, a["persistent_output_buffer"], t)


# ---------------------------------------------------------------------------------------------
# all-gather + matmul
# ---------------------------------------------------------------------------------------------


def _agmm(
    input_tensor,
    weight_tensor,
    persistent_output_buffer,
    dim,
    multi_device_global_semaphore,
    all_gather_core_grid_offset,
    *,
    bias=None,
    num_links=1,
    memory_config_ag=None,
    topology=Topology.Ring,
    barrier_semaphore=None,
    subdevice_id=None,
    memory_config_mm=None,
    transpose_a=False,
    transpose_b=False,
    dtype=None,
    program_config=None,
    activation=None,
    compute_kernel_config=None,
    core_grid=None,
    chunks_per_sync=None,
    num_workers_per_link=None,
    num_buffers_per_channel=None,
): ...


_AGMM = (
    _overload(
        _agmm,
        input_tensor="Tensor",
        weight_tensor="Tensor",
        persistent_output_buffer="Tensor?",
        dim="uint",
        multi_device_global_semaphore="sems",
        all_gather_core_grid_offset="core",
        bias="Tensor?",
        num_links="uint",
        memory_config_ag="mem?",
        topology="topo",
        barrier_semaphore="sem?",
        subdevice_id="subdev?",
        memory_config_mm="mem?",
        transpose_a="bool",
        transpose_b="bool",
        dtype="dtype?",
        chunks_per_sync="uint?",
        num_workers_per_link="uint?",
        num_buffers_per_channel="uint?",
    ),
)


def all_gather_matmul_async(*args: Any, **kwargs: Any) -> list[Tensor]:
    """TT-NN's ``ttnn.experimental.all_gather_matmul_async``: all-gather ``input_tensor`` over the
    whole mesh along ``dim``, then ``linear`` with ``weight_tensor`` on each device.

    Returns ``[all_gather_output, matmul_output]`` as TT-NN does (``_, out = ...`` in model code).
    ``(input_tensor, weight_tensor, persistent_output_buffer, dim, multi_device_global_semaphore,
    all_gather_core_grid_offset, *, bias=None, num_links=1, memory_config_ag=None, topology=Ring,
    barrier_semaphore=None, subdevice_id=None, memory_config_mm=None, transpose_a=False,
    transpose_b=False, dtype=None, program_config=None, activation=None,
    compute_kernel_config=None, core_grid=None, chunks_per_sync=None, num_workers_per_link=None,
    num_buffers_per_channel=None)``
    """
    op = "all_gather_matmul_async"
    _, a = _resolve(op, _AGMM, args, kwargs)
    ag_args = dict(
        input_tensor=a["input_tensor"],
        persistent_output_buffer=a["persistent_output_buffer"],
        dim=a["dim"],
        multi_device_global_semaphore=a["multi_device_global_semaphore"],
        num_links=a["num_links"],
        memory_config=a["memory_config_ag"],
        topology=a["topology"],
        subdevice_id=a["subdevice_id"],
        barrier_semaphore=a["barrier_semaphore"],
    )
    gathered = _all_gather(op, (), ag_args, reverse=False)
    w = a["weight_tensor"]
    if w._mesh is None or not w._mesh.same_mesh(gathered._mesh):
        raise CCLError(
            f"ttnn.experimental.{op}: weight_tensor lives on {w._mesh!r}, not on the input's mesh "
            f"{gathered._mesh!r}.\nfix: put the weight on the input's mesh device."
        )
    out = linear(
        gathered,
        w,
        bias=a["bias"],
        transpose_a=a["transpose_a"],
        transpose_b=a["transpose_b"],
        memory_config=a["memory_config_mm"],
        dtype=a["dtype"],
        program_config=a["program_config"],
        activation=a["activation"],
        compute_kernel_config=a["compute_kernel_config"],
        core_grid=a["core_grid"],
    )
    return [gathered, out]


# ---------------------------------------------------------------------------------------------
# matmul + llama reduce-scatter (the Galaxy Llama's decode MLP)
# ---------------------------------------------------------------------------------------------


def _rs_mm(
    input_tensor,
    weight_tensor,
    intermediate_packet_buffer,
    dim,
    cross_device_semaphore,
    cluster_axis,
    mesh_device,
    num_links,
    subdevice_id,
    *,
    second_weight_tensor=None,
    rs_tensor=None,
    topology=Topology.Linear,
    memory_config_rs=None,
    memory_config_mm=None,
    compute_kernel_config=None,
    global_cb=None,
    core_grid=None,
    transpose_a=False,
    transpose_b=False,
    dtype=None,
    program_config=None,
    activation=None,
    output_tile=None,
    optional_output_tensor=None,
    use_noc1_only=False,
): ...


_RS_MM = (
    _overload(
        _rs_mm,
        input_tensor="Tensor",
        weight_tensor="Tensor",
        intermediate_packet_buffer="Tensor",
        dim="int",
        cross_device_semaphore="sem",
        cluster_axis="uint",
        mesh_device="mesh",
        num_links="uint",
        subdevice_id="subdev",
        second_weight_tensor="Tensor?",
        rs_tensor="Tensor?",
        topology="topo",
        memory_config_rs="mem?",
        memory_config_mm="mem?",
        transpose_a="bool",
        transpose_b="bool",
        dtype="dtype?",
        optional_output_tensor="Tensor?",
        use_noc1_only="bool",
    ),
)


def llama_rs_matmul(*args: Any, **kwargs: Any) -> list[Tensor]:
    """TT-NN's ``ttnn.experimental.llama_rs_matmul``: a matmul fused with a llama reduce-scatter.

    With ``second_weight_tensor`` it returns ``[x @ w, x @ w2, llama_reduce_scatter(x @ w)]``;
    with ``rs_tensor`` ``[x @ w, llama_reduce_scatter(rs_tensor)]`` (exactly one of the two).
    ``(input_tensor, weight_tensor, intermediate_packet_buffer, dim, cross_device_semaphore,
    cluster_axis, mesh_device, num_links, subdevice_id, *, second_weight_tensor=None,
    rs_tensor=None, topology=Linear, memory_config_rs=None, memory_config_mm=None,
    compute_kernel_config=None, global_cb=None, core_grid=None, transpose_a=False,
    transpose_b=False, dtype=None, program_config=None, activation=None, output_tile=None,
    optional_output_tensor=None, use_noc1_only=False)``
    """
    op = "llama_rs_matmul"
    _, a = _resolve(op, _RS_MM, args, kwargs)
    if (a["rs_tensor"] is None) == (a["second_weight_tensor"] is None):
        raise CCLError(
            f"ttnn.experimental.{op}: Exactly one of rs_tensor or second_weight_tensor must have a "
            f"value (rs_tensor={_short(a['rs_tensor'])}, second_weight_tensor="
            f"{_short(a['second_weight_tensor'])}).\nfix: pass second_weight_tensor= for the "
            "w1/w3 form, or rs_tensor= to reduce-scatter another tensor."
        )
    t = _check_common(op, a, "cross_device_semaphore")
    mm = dict(
        transpose_a=a["transpose_a"],
        transpose_b=a["transpose_b"],
        memory_config=a["memory_config_mm"],
        dtype=a["dtype"],
        program_config=a["program_config"],
        activation=a["activation"],
        compute_kernel_config=a["compute_kernel_config"],
        core_grid=a["core_grid"],
    )
    weights = [a["weight_tensor"]]
    if a["second_weight_tensor"] is not None:
        weights.append(a["second_weight_tensor"])
    outs = [linear(t, w, **mm) for w in weights]
    if a["optional_output_tensor"] is not None:
        outs[0] = _write(op, "optional_output_tensor", outs[0], a["optional_output_tensor"], t)
    rs_in = outs[0] if a["rs_tensor"] is None else a["rs_tensor"]
    reduced = llama_reduce_scatter(
        rs_in,
        a["intermediate_packet_buffer"],
        a["dim"] % len(rs_in._shape) if a["dim"] < 0 else a["dim"],
        a["cross_device_semaphore"],
        a["subdevice_id"],
        a["cluster_axis"],
        a["mesh_device"],
        num_links=a["num_links"],
        memory_config=a["memory_config_rs"],
        topology=a["topology"],
        use_noc1_only=a["use_noc1_only"],
    )
    return [*outs, reduced]


# ---------------------------------------------------------------------------------------------
# halo exchange and slice-reshard (tt_dit's spatially parallel VAE)
# ---------------------------------------------------------------------------------------------


def _neighbor_pad(
    input_tensor,
    dim,
    padding_left,
    padding_right,
    padding_mode,
    cluster_axis,
    final_semaphore,
    barrier_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Linear,
    secondary_cluster_axis=None,
    secondary_mesh_shape=None,
): ...


_NEIGHBOR_PAD = (
    _overload(
        _neighbor_pad,
        input_tensor="Tensor",
        dim="uint",
        padding_left="uint",
        padding_right="uint",
        padding_mode="str",
        cluster_axis="uint",
        final_semaphore="sem",
        barrier_semaphore="sem?",
        num_links="uint",
        memory_config="mem?",
        topology="topo",
        secondary_cluster_axis="uint?",
        secondary_mesh_shape="shape2?",
    ),
)


def _row_major(op: str, t: Tensor) -> None:
    if t._layout is not Layout.ROW_MAJOR:
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported input tensor layout {t._layout!r}.\n"
            "fix: ttnn.to_layout(x, ttnn.ROW_MAJOR_LAYOUT) first."
        )


def _cluster_axis_01(op: str, name: str, axis: Any) -> None:
    if axis not in (0, 1):
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported {name.replace('_', ' ')} {axis}.\n"
            f"fix: {name}=0 or {name}=1."
        )


def _line_neighbors(
    n: int, secondary_axis: int | None, secondary_shape: Sequence[int] | None
) -> tuple[list[int | None], list[int | None]]:
    """For each position on the line, the positions of its backward and forward neighbours.

    With a secondary axis the line of ``n`` devices is a row-major ``secondary_shape`` grid and
    neighbours are one step along ``secondary_axis`` of that grid (TT-NN's 2-D halo)."""
    back: list[int | None] = []
    fwd: list[int | None] = []
    for k in range(n):
        if secondary_axis is None or secondary_shape is None:
            b, f, step = k > 0, k < n - 1, 1
        else:
            rows, cols = secondary_shape
            r, c = divmod(k, cols)
            if secondary_axis == 1:
                b, f, step = c > 0, c < cols - 1, 1
            else:
                b, f, step = r > 0, r < rows - 1, cols
        back.append(k - step if b else None)
        fwd.append(k + step if f else None)
    return back, fwd


def neighbor_pad_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.neighbor_pad_async``: pad each device's tensor along ``dim``
    with its neighbours' edge rows along ``cluster_axis`` (a halo); the ends of the line get zeros
    or their own edge row repeated (``padding_mode`` ``"zeros"`` / ``"replicate"``).

    ``(input_tensor, dim, padding_left, padding_right, padding_mode, cluster_axis,
    final_semaphore, barrier_semaphore, *, num_links=1, memory_config=None, topology=Linear,
    secondary_cluster_axis=None, secondary_mesh_shape=None)``
    """
    op = "neighbor_pad_async"
    _, a = _resolve(op, _NEIGHBOR_PAD, args, kwargs)
    t = _check_common(op, a, "final_semaphore")
    _row_major(op, t)
    d, left, right, mode = (
        int(a["dim"]),
        int(a["padding_left"]),
        int(a["padding_right"]),
        a["padding_mode"],
    )
    if d >= 3 or d >= len(t._shape) - 1:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, neighbor pad currently only supports padding non last "
            f"dim, provided {d} (per-device shape {list(t._shape)}).\nfix: a dim < 3 that is not the last."
        )
    if mode not in ("zeros", "replicate"):
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported padding mode {mode!r}.\n"
            "fix: padding_mode='zeros' or 'replicate'."
        )
    if left > t._shape[d] or right > t._shape[d]:
        raise CCLError(
            f"ttnn.experimental.{op}: One of the padding values {left} or {right} exceeds the shape "
            f"of the input tensor in that dim {t._shape[d]}.\nfix: pad by at most {t._shape[d]}."
        )
    _cluster_axis_01(op, "cluster_axis", a["cluster_axis"])
    axis = int(a["cluster_axis"])
    n = _check_group(op, t, axis)
    sec_axis, sec_shape = a["secondary_cluster_axis"], a["secondary_mesh_shape"]
    if sec_axis is not None:
        _cluster_axis_01(op, "secondary_cluster_axis", sec_axis)
        if sec_shape is None:
            raise CCLError(
                f"ttnn.experimental.{op}: If secondary cluster axis is specified, need to have a "
                "secondary mesh shape.\nfix: pass secondary_mesh_shape=(rows, cols)."
            )
        if n % sec_shape[0] or n % sec_shape[1] or sec_shape[0] * sec_shape[1] != n:
            raise CCLError(
                f"ttnn.experimental.{op}: Secondary mesh shape ({sec_shape[0]},{sec_shape[1]}) is "
                f"not valid given main cluster axis device count {n}.\n"
                f"fix: rows * cols == {n}."
            )
    c = ccl._prepare(op, t, {}, axis, topology=a["topology"])
    back, fwd = _line_neighbors(n, sec_axis, tuple(sec_shape) if sec_shape else None)
    to_fwd = [(k, f) for k, f in enumerate(fwd) if f is not None]  # my last rows -> next's left
    to_back = [(k, b) for k, b in enumerate(back) if b is not None]
    first = np.array([b is None for b in back])
    last = np.array([f is None for f in fwd])
    names, size = c.names, t._shape[d]

    def fn(x: Any) -> Any:
        idx = lax.axis_index(names)
        pieces = []
        if left:
            recv = lax.ppermute(lax.slice_in_dim(x, size - left, size, axis=d), names, to_fwd)
            if mode == "replicate":
                edge = jnp.repeat(lax.slice_in_dim(x, 0, 1, axis=d), left, axis=d)
                recv = jnp.where(jnp.asarray(first)[idx], edge, recv)
            pieces.append(recv)
        pieces.append(x)
        if right:
            recv = lax.ppermute(lax.slice_in_dim(x, 0, right, axis=d), names, to_back)
            if mode == "replicate":
                edge = jnp.repeat(lax.slice_in_dim(x, size - 1, size, axis=d), right, axis=d)
                recv = jnp.where(jnp.asarray(last)[idx], edge, recv)
            pieces.append(recv)
        return jnp.concatenate(pieces, axis=d)

    static = (d, left, right, mode, c.axes, tuple(to_fwd), tuple(to_back))
    return run_op(
        op,
        fn,
        [t],
        static=static,
        placement_rule=ccl._rule(c.axes, None),
        memory_config=a["memory_config"],
    )


def _slice_reshard(
    input_tensor,
    dim,
    output_dim_offset,
    output_dim_shape,
    cluster_axis,
    final_semaphore,
    barrier_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Linear,
): ...


_SLICE_RESHARD = (
    _overload(
        _slice_reshard,
        input_tensor="Tensor",
        dim="uint",
        output_dim_offset="uint",
        output_dim_shape="uint",
        cluster_axis="uint",
        final_semaphore="sem",
        barrier_semaphore="sem?",
        num_links="uint",
        memory_config="mem?",
        topology="topo",
    ),
)


def slice_reshard_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.slice_reshard_async``: slice ``[output_dim_offset,
    output_dim_offset + output_dim_shape)`` of the tensor the devices of ``cluster_axis`` hold
    together along ``dim``, and reshard that slice evenly over them (trims a VAE's padding).

    ``(input_tensor, dim, output_dim_offset, output_dim_shape, cluster_axis, final_semaphore,
    barrier_semaphore, *, num_links=1, memory_config=None, topology=Linear)``
    """
    op = "slice_reshard_async"
    _, a = _resolve(op, _SLICE_RESHARD, args, kwargs)
    t = _check_common(op, a, "final_semaphore")
    if a["dim"] != 0:
        raise CCLError(
            f"ttnn.experimental.{op}: Error, neighbor pad currently only supports sharding dim 0, "
            f"provided {a['dim']}.\nfix: move the sharded dim to 0 first."
        )
    _row_major(op, t)
    _cluster_axis_01(op, "cluster_axis", a["cluster_axis"])
    axis = int(a["cluster_axis"])
    n = _check_group(op, t, axis)
    offset, length = int(a["output_dim_offset"]), int(a["output_dim_shape"])
    if length % n:
        raise CCLError(
            f"ttnn.experimental.{op}: Output dim shape must be divisible by num devices on cluster "
            f"axis: output_dim_shape={length}, {n} devices.\nfix: a multiple of {n}."
        )
    total = t._shape[0] * n
    if offset + length > total:
        raise CCLError(
            f"ttnn.experimental.{op}: output_dim_offset + output_dim_shape = {offset + length} "
            f"exceeds the {total} rows the {n} devices hold together.\n"
            f"fix: keep the slice within [0, {total})."
        )
    whole = ccl.all_gather(t, 0, axis, topology=a["topology"])
    end = list(whole._shape)
    start = [0] * len(end)
    start[0], end[0] = offset, offset + length
    return ccl.mesh_partition(
        slice_op(whole, start, end), 0, axis, memory_config=a["memory_config"]
    )


def fused_rms_1_1_32_8192(
    input_tensor: Tensor,
    program_config: Any,
    cluster_axis: int,
    mesh_device: MeshDevice,
    global_semaphore: Any,
    *,
    persistent_output_tensor: Tensor | None = None,
    num_links: int | None = None,
    topology: Topology = Topology.Linear,
    subdevice_id: SubDeviceId | None = None,
    dtype: DataType | None = None,
    compute_kernel_config: Any = None,
    memory_config: MemoryConfig | None = None,
    residual_input_tensor: Tensor | None = None,
    epsilon: float = 1e-12,
    weight: Tensor | None = None,
    stats: Tensor | None = None,
    use_noc1_only: bool = False,
) -> Tensor:
    """The Galaxy Llama's fused distributed RMSNorm (TT-NN's ``RMSAllGather``,
    ttnn/cpp/ttnn/operations/experimental/ccl/rms_allgather): with ``residual_input_tensor``
    the residual becomes ``input + residual`` in place (its buffer takes the sum, as the kernel
    packs it there); each device's sum of squares of that is all-gathered over ``cluster_axis``
    (into ``stats`` when given), and each device's slice is normalized with the full hidden dim's
    mean and scaled by its ``weight`` slice (required, row-major). Activations are 32 rows."""
    op = "fused_rms_1_1_32_8192"
    shape = tuple(input_tensor._shape)
    if len(shape) != 4 or input_tensor.layout != Layout.TILE:
        raise CCLError(
            f"ttnn.{op}: Input shape must be rank 4 and TILE (got {list(shape)}, "
            f"{input_tensor.layout!r}).\nfix: pass the [1, 1, 32, hidden/devices] activations tilized."
        )
    if shape[-2] != 32:
        raise CCLError(
            f"ttnn.{op}: Only activations with batch size = 32 are supported (per-device shape "
            f"{list(shape)}).\nfix: pad the users to 32 rows."
        )
    if weight is None or weight.layout != Layout.ROW_MAJOR:
        raise CCLError(
            f"ttnn.{op}: RMS all gather requires a weight which is row major.\nfix: pass "
            "weight= (the norm's gamma as [1, 1, W/32, 32] ROW_MAJOR, sharded like the input)."
        )
    x = input_tensor
    if residual_input_tensor is not None:
        res = residual_input_tensor
        if res._shape != input_tensor._shape:
            raise CCLError(
                f"ttnn.{op}: shape is not same! (residual {list(res._shape)} vs input "
                f"{list(shape)}).\nfix: pass a residual shaped like the input."
            )
        if input_tensor.is_sharded() and res.memory_config() != input_tensor.memory_config():
            raise CCLError(
                f"ttnn.{op}: Both a and b should have the same memory config ({res.memory_config()!r}"
                f" vs {input_tensor.memory_config()!r}).\nfix: shard the residual like the input."
            )
        x = res.assign(add(input_tensor, res, dtype=res.dtype))
    partial = rms_norm_pre_all_gather(x, dtype=DataType.BFLOAT16)
    gathered = ccl.all_gather(partial, 3, cluster_axis, mesh_device, topology=topology,
                              subdevice_id=subdevice_id)  # fmt: skip
    if stats is not None:
        gathered = stats.assign(gathered) if stats._shape == gathered._shape else gathered
    out = rms_norm_post_all_gather(x, gathered, epsilon=epsilon, weight=weight, dtype=dtype)
    if memory_config is not None:
        out = to_memory_config(out, memory_config)
    return out


_ALL_GATHER_CONCAT_CORES = {(x, y) for x in (1, 2, 3) for y in (0, 1)} | {(1, 2), (2, 2)}


def all_gather_concat(
    input_tensor: Tensor,
    buffer_tensor: Tensor,
    dim: int,
    *,
    cluster_axis: int,
    mesh_device: MeshDevice,
    multi_device_global_semaphore: Any,
    num_heads: int,
    memory_config: MemoryConfig,
    use_noc1_only: bool = False,
    num_links: int | None = 1,
    topology: Topology = Topology.Linear,
    subdevice_id: SubDeviceId | None = None,
) -> Tensor:
    """The Galaxy attention's all-gather of each device's users then head concat (TT-NN's
    ``AllGatherConcat``): [1, 8, heads, 128] per device is gathered on ``dim`` over
    ``cluster_axis`` and becomes [1, 1, 32, num_heads * 128] (users padded to 32), as
    ``nlp_concat_heads_decode`` lays heads out. TT-NN's kernel takes only that Llama-70B shape,
    height-sharded on its cores (all_gather_concat_op.cpp); the same rules are checked here."""
    op = "all_gather_concat"
    shape = tuple(input_tensor._shape)
    mc = input_tensor.memory_config()
    if mc.memory_layout is not TensorMemoryLayout.HEIGHT_SHARDED:
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported memory layout {mc.memory_layout!r}.\nfix: "
            "height-shard the attention output (the model's SDPA decode output config)."
        )
    if len(shape) != 4 or shape[0] != 1 or shape[1] != 8 or shape[3] != 128:
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported input shape {list(shape)}, should be "
            "[1, 8, 32, 128] or [1, 8, 8, 128]!\nfix: this fused op serves Llama-70B's decode "
            "heads only; use all_gather then nlp_concat_heads_decode for other shapes."
        )
    grid = mc.shard_spec.grid if mc.shard_spec is not None else None
    if grid is None or core_set(grid) != _ALL_GATHER_CONCAT_CORES:
        raise CCLError(
            f"ttnn.experimental.{op}: Unsupported input core ranges {grid!r}; TT-NN's kernel reads "
            "the heads from cores (1, 0)-(3, 1) and (1, 2)-(2, 2).\nfix: shard the input on those "
            "8 cores (the Galaxy model's SDPA decode output config)."
        )
    if not num_links or num_links <= 0:
        raise CCLError(
            f"ttnn.experimental.{op}: num_links should be more than 0 but has {num_links}.\n"
            "fix: pass num_links=1."
        )
    gathered = ccl.all_gather(input_tensor, dim, cluster_axis, mesh_device, topology=topology,
                              subdevice_id=subdevice_id)  # fmt: skip
    return nlp_concat_heads_decode(gathered, num_heads=num_heads, memory_config=memory_config)


__all__ = [
    "GlobalSemaphoreArg",
    "all_gather_async",
    "all_gather_async_reversed",
    "all_gather_concat",
    "all_gather_matmul_async",
    "all_reduce_async",
    "all_to_all_async",
    "fused_rms_1_1_32_8192",
    "llama_reduce_scatter",
    "llama_rs_matmul",
    "neighbor_pad_async",
    "reduce_scatter_async",
    "reduce_scatter_minimal_async",
    "slice_reshard_async",
]
