"""The checks TT-NN makes on the ``*_async`` collectives' hardware-only arguments.

Semaphores, sub-device ids, link counts, groups and persistent output buffers mean
nothing to the values, but TT-NN refuses bad ones; every op family shares these checks.
"""

from __future__ import annotations

from typing import Any

from ttjax._src.core.enums import DataType, Layout, Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ccl_async.resolve import _short


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
