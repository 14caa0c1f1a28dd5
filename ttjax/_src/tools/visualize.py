"""Pictures of a mesh and of how a tensor is spread over it: TT-NN's ``visualize_*`` functions.

The implementation of :mod:`ttjax.visualize`, whose docstring says more.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from ttjax._src.core import specs as _specs
from ttjax._src.core.errors import MissingDependencyError, TTJaxError
from ttjax._src.core.mesh import MeshDevice, MeshShape, available_devices, system_mesh_shape
from ttjax._src.core.placements import Placement, PlacementLocal, PlacementReplicate, PlacementShard
from ttjax._src.core.tensor import Tensor

logger = logging.getLogger(__name__)

# TT-NN's cell width (ttnn/distributed/distributed.py).
CELL_SIZE = 30

# Cell backgrounds, one per distinct shard (replicas of a shard share a colour, as in TT-NN).
_SHARD_COLORS = (
    "dark_green",
    "dark_blue",
    "dark_red",
    "dark_magenta",
    "dark_cyan",
    "orange4",
    "purple4",
    "deep_pink4",
    "dark_orange3",
    "steel_blue",
    "chartreuse4",
    "medium_purple4",
    "dark_goldenrod",
    "indian_red",
    "dodger_blue3",
    "grey37",
)
# Foreground styles that keep replicated, sharded and per-device axes apart.
_PLACEMENT_STYLES = {"R": "bold bright_cyan", "S": "bold bright_yellow", "L": "bold bright_magenta"}


# ---------------------------------------------------------------------------------------------
# Plain-data layout (no rich, no matplotlib)
# ---------------------------------------------------------------------------------------------


def _grid(shape: Sequence[int]) -> tuple[int, int]:
    """Rows and columns of the picture of a mesh: leading mesh dims stack as rows."""
    shape = tuple(shape)
    cols = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    return rows, cols


def _norm_placements(placements: Sequence[Placement], rank: int) -> tuple[Placement, ...]:
    out: list[Placement] = []
    for p in placements:
        if isinstance(p, PlacementShard):
            d = _specs.normalize_dim(p.dim, rank)
            out.append(PlacementShard(p.dim if d is None else d))
        else:
            out.append(p)
    return tuple(out)


def _shard_number(
    coord: Sequence[int], placements: Sequence[Placement], mesh_shape: Sequence[int]
) -> int:
    """Which distinct shard a device holds: row-major index over the non-replicated mesh axes.

    Devices that hold copies of the same data (differ only along replicated axes) get the same
    number; ``ShardTensorToMesh`` on a 2x4 mesh numbers the devices 0..7 row-major.
    """
    n = 0
    for i, p in enumerate(placements):
        if not isinstance(p, PlacementReplicate):
            n = n * int(mesh_shape[i]) + int(coord[i])
    return n


def _check_tensor(tensor: Any, what: str) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise TTJaxError(
            f"{what} expects a ttnn Tensor, got {type(tensor).__name__}.\n"
            "fix: pass a tensor made by ttnn.from_torch (or any ttnn op)."
        )
    return tensor


def mesh_layout(tensor: Tensor) -> list[dict[str, Any]]:
    """Where every shard of ``tensor`` lives, one dict per device in row-major coordinate order.

    Each dict holds ``device_id``, ``coord``, ``shard_shape`` (per-device shape), ``placements``
    (``"R"``/``"S(d)"``/``"L"`` per mesh axis), ``shard`` (distinct-shard number; replicas share
    it), ``global_shape`` and ``index``: one ``(start, stop)`` per tensor dim giving the slice of
    the global tensor this device holds. ``global_shape`` and ``index`` are None when a mesh
    axis is ``PlacementLocal`` (per-device values are not slices of one tensor).

    Examples:
        >>> mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
        >>> x = ttnn.from_torch(torch.rand(1, 1, 32, 64), device=mesh,
        ...                     mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
        >>> [d["index"][3] for d in ttnn.visualize.mesh_layout(x)]
        [(0, 32), (32, 64)]
    """
    t = _check_tensor(tensor, "mesh_layout")
    local = tuple(int(s) for s in t.shape)
    mesh = t.mesh_device
    if mesh is None:
        return [
            {
                "device_id": None,
                "coord": (),
                "shard_shape": local,
                "placements": (),
                "shard": 0,
                "global_shape": local,
                "index": tuple((0, s) for s in local),
            }
        ]
    mesh_shape = tuple(mesh.shape)
    pl = _norm_placements(t.placements, len(local))
    has_local = any(isinstance(p, PlacementLocal) for p in pl)
    gshape = None if has_local else _specs.global_shape(local, pl, mesh_shape)
    labels = tuple(str(p) for p in pl)
    out = []
    for coord in np.ndindex(*mesh_shape):
        index = None
        if not has_local:
            ranges = []
            for d, size in enumerate(local):
                k = 0
                for a in _specs.axes_sharding(pl, d):  # major axis first
                    k = k * mesh_shape[a] + coord[a]
                ranges.append((k * size, (k + 1) * size))
            index = tuple(ranges)
        out.append(
            {
                "device_id": int(mesh.devices[coord].id),
                "coord": tuple(int(c) for c in coord),
                "shard_shape": local,
                "placements": labels,
                "shard": _shard_number(coord, pl, mesh_shape),
                "global_shape": gshape,
                "index": index,
            }
        )
    return out


# ---------------------------------------------------------------------------------------------
# rich rendering
# ---------------------------------------------------------------------------------------------


def _placement_text(labels: Sequence[str]) -> Any:
    """``[R, S(3)]`` with replicated, sharded and local axes in different colours."""
    from rich.text import Text

    text = Text("[")
    for i, label in enumerate(labels):
        if i:
            text.append(", ")
        text.append(label, style=_PLACEMENT_STYLES.get(label[:1]))
    text.append("]")
    return text


def _table(title: str, rows: int, cols: int, cells: list[tuple[Any, str | None]]) -> Any:
    """TT-NN's grid: ``rows x cols`` boxes of width 30; ``cells`` row-major (text, style)."""
    from rich import box
    from rich.align import Align
    from rich.table import Table

    table = Table(
        title=title,
        show_header=False,
        show_footer=False,
        box=box.SQUARE,
        expand=False,
        show_lines=True,
        padding=(0, 0),
    )
    for _ in range(cols):
        table.add_column(justify="center", vertical="middle", width=CELL_SIZE)
    for r in range(rows):
        row = []
        for text, style in cells[r * cols : (r + 1) * cols]:
            row.append(Align(text, "center", vertical="middle", style=style))
        table.add_row(*row)
    return table


def _compact_table(mesh_device: MeshDevice, rows: int, cols: int) -> Any:
    """One line per mesh row: ``id (row, col)`` per device, no boxes (fits 80x24 for a Galaxy)."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"MeshDevice(rows={rows}, cols={cols}): device id (row, col)",
        show_header=False,
        box=box.SIMPLE,
        padding=(0, 1),
    )
    for _ in range(cols):
        table.add_column(justify="right")
    ids = mesh_device.get_device_ids()
    for r in range(rows):
        table.add_row(*[f"{ids[r * cols + c]} ({r}, {c})" for c in range(cols)])
    return table


def _console(cols: int) -> Any:
    """A console wide enough for ``cols`` cells (a captured stdout defaults to 80 columns)."""
    from rich.console import Console

    console = Console()
    needed = cols * (CELL_SIZE + 1) + 1
    if console.width < needed:
        console = Console(width=needed)
    return console


def _shard_style(placements: Sequence[Placement], mesh_shape: Sequence[int]) -> Any:
    """Cell style per coordinate: one background colour per distinct shard."""

    def style(c: tuple[int, ...]) -> str:
        n = _shard_number(c, placements, mesh_shape)
        return f"white on {_SHARD_COLORS[n % len(_SHARD_COLORS)]}"

    return style


def _coord_str(coord: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(c)) for c in coord) + ")"


def _mesh_cells(
    mesh: MeshDevice, *, show_ids: bool, annotate: Any = None, style: Any = None
) -> list[tuple[Any, str | None]]:
    """One (Text, style) per device, row-major, with TT-NN's Local/Remote lines when needed.

    ``annotate`` is extra cell text: a fixed ``Text`` or a function of the coordinate.
    """
    from rich.text import Text

    coords = list(np.ndindex(*tuple(mesh.shape)))
    me = jax.process_index()
    local = [mesh.devices[c].process_index == me for c in coords]
    fully_local = all(local)
    cells = []
    for c, is_local in zip(coords, local):
        text = Text(justify="center")
        if not fully_local:
            text.append("Local\n" if is_local else "Remote\n")
        if show_ids:
            text.append(f"Dev. ID: {mesh.devices[c].id}\n")
        text.append(f"{_coord_str(c)}\n")
        if annotate is not None:
            text.append_text(annotate(c) if callable(annotate) else annotate)
        cells.append((text, style(c) if style is not None else None))
    return cells


def _tensor_mesh(t: Tensor, mesh_device: MeshDevice | None) -> MeshDevice:
    mesh = t.mesh_device
    if mesh is None:
        raise TTJaxError(
            "This tensor is a host tensor that is not distributed over any mesh.\n"
            "fix: convert it with a mesh_mapper (or device=mesh) first."
        )
    if mesh_device is not None and tuple(mesh_device.shape) != tuple(mesh.shape):
        raise TTJaxError(
            f"The tensor is distributed over a {mesh.shape!r} mesh, not over {mesh_device!r}.\n"
            "fix: pass the tensor's own mesh (tensor.mesh_device)."
        )
    return mesh


def visualize_mesh_device(
    mesh_device: MeshDevice, tensor: Tensor | None = None, *, compact: bool = False
) -> None:
    """Print the mesh as TT-NN's grid: one box per device with its id and coordinate.

    With ``tensor``, each box also shows that device's shard shape and the tensor's placement
    per mesh axis (``R`` replicated, ``S(d)`` sharded on tensor dim ``d``, ``L`` per-device);
    boxes holding the same data share a colour. ``compact=True`` (a ttjax option, for meshes
    with no tensor to show) prints one short line per mesh row instead, so an 8x4 Galaxy fits a
    screen. Errors are logged, never raised (TT-NN).

    >>> ttnn.visualize_mesh_device(mesh, tensor=x)
    MeshDevice(rows=2, cols=4)
    ...
    """
    try:
        from rich.text import Text

        if not isinstance(mesh_device, MeshDevice):
            raise TTJaxError(
                f"visualize_mesh_device expects a MeshDevice, got {type(mesh_device).__name__}.\n"
                "fix: pass the mesh from ttnn.open_mesh_device(...)."
            )
        rows, cols = _grid(mesh_device.shape)
        if compact and tensor is None:
            _console(0).print(_compact_table(mesh_device, rows, cols))
            return
        annotate = style = None
        if tensor is not None:
            t = _check_tensor(tensor, "visualize_mesh_device")
            _tensor_mesh(t, mesh_device)
            pl = _norm_placements(t.placements, len(t.shape))
            head = Text(f"Shard: {[int(s) for s in t.shape]}\n")
            head.append_text(_placement_text([str(p) for p in pl]))
            annotate = head
            style = _shard_style(pl, tuple(mesh_device.shape))
        cells = _mesh_cells(mesh_device, show_ids=True, annotate=annotate, style=style)
        title = f"MeshDevice(rows={rows}, cols={cols})"
        _console(cols).print(_table(title, rows, cols, cells))
    except Exception as e:
        logger.error("Error visualizing mesh device: %s", e)


def _placement_lines(placements: Sequence[Placement]) -> list[str]:
    lines = []
    for i, p in enumerate(placements):
        if isinstance(p, PlacementShard):
            lines.append(f"Tensor dim {p.dim} SHARDED across mesh dim {i}")
        elif isinstance(p, PlacementReplicate):
            lines.append(f"Tensor shards REPLICATED across mesh dim {i}")
        else:
            lines.append(f"Tensor shards hold per-device values (LOCAL) across mesh dim {i}")
    return lines


def visualize_tensor(tensor: Tensor) -> None:
    """Print how ``tensor`` is placed: a "Placement Configuration" panel, then the device grid.

    The panel has one line per mesh dim (``Tensor dim 3 SHARDED across mesh dim 1`` or
    ``Tensor shards REPLICATED across mesh dim 0``); each box names its shard, shape, dtype and
    layout. Errors are logged, never raised (TT-NN).

    >>> ttnn.visualize_tensor(x)
    ╭─────── Placement Configuration ────────╮
    ...
    """
    try:
        from rich.panel import Panel
        from rich.text import Text

        t = _check_tensor(tensor, "visualize_tensor")
        mesh = _tensor_mesh(t, None)
        rank = len(t.shape)
        pl = _norm_placements(t.placements, rank)
        ms = tuple(mesh.shape)
        styles = {"SHARDED": "S", "REPLICATED": "R", "LOCAL": "L"}
        info = Text()
        for i, line in enumerate(_placement_lines(pl)):
            if i:
                info.append("\n")
            key = next(k for k in styles if k in line)
            head, tail = line.split(key, 1)
            info.append(head)
            info.append(key, style=_PLACEMENT_STYLES[styles[key]])
            info.append(tail)
        panel = Panel(info, title="Placement Configuration", border_style="blue", expand=False)
        shape_str = str([int(s) for s in t.shape])

        def annotate(c: tuple[int, ...]) -> Any:
            n = _shard_number(c, pl, ms)
            return Text(
                f"Shard {n}\nShape: {shape_str}\nDtype: {t.dtype.name}\nLayout: {t.layout.name}"
            )

        storage = t.storage_type()
        on_device = storage.name == "DEVICE"
        style = _shard_style(pl, ms)
        cells = _mesh_cells(mesh, show_ids=on_device, annotate=annotate, style=style)
        rows, cols = _grid(ms)
        console = _console(cols)
        console.print(panel)
        console.print(_table(f"Tensor(storage: {storage})", rows, cols, cells))
    except Exception as e:
        logger.error("Error visualizing tensor: %s", e)


def _system_grid() -> tuple[MeshShape, MeshShape, np.ndarray]:
    """The system mesh (global shape), this process's part of it (local shape), its devices."""
    devices = available_devices()
    shape = system_mesh_shape(len(devices))
    grid = np.array(devices[: shape.mesh_size()], dtype=object).reshape(tuple(shape))
    me = jax.process_index()
    mask = np.vectorize(lambda d: d.process_index == me, otypes=[bool])(grid)
    if mask.all() or not mask.any():
        local = shape
    else:
        idx = np.argwhere(mask)
        local = MeshShape([int(s) for s in idx.max(axis=0) - idx.min(axis=0) + 1])
    return shape, local, grid


def visualize_system_mesh() -> None:
    """Print the system mesh's global and local shapes, then its device grid (TT-NN).

    32 virtual devices form a Galaxy 8x4, 8 a T3000 2x4, 2 an N300 1x2.

    >>> ttnn.visualize_system_mesh()
    SystemMesh Global Shape: MeshShape([8, 4])
    ...
    """
    try:
        from rich.text import Text

        shape, local, grid = _system_grid()
        rows, cols = _grid(tuple(shape))
        me = jax.process_index()
        all_local = all(d.process_index == me for d in grid.flat)
        cells: list[tuple[Any, str | None]] = []
        for c in np.ndindex(*grid.shape):
            dev: Any = grid[c]
            if all_local:
                text = Text(f"Dev. ID: {dev.id}\n{_coord_str(c)}", justify="center")
                cells.append((text, "white on dark_green"))
            else:
                is_local = dev.process_index == me
                text = Text(justify="center")
                text.append("Local\n" if is_local else "Remote\n")
                text.append(f"Dev. ID: {dev.id}\n" if is_local else "Unknown\n")
                text.append(_coord_str(c))
                cells.append((text, None))
        dims = ", ".join(map(str, shape))
        ldims = ", ".join(map(str, local))
        title = f"SystemMesh Global Shape: ({dims}) | Local Shape: ({ldims})"
        console = _console(cols)
        console.print(Text(f"\nSystemMesh Global Shape: {shape!r}", style="bold green"))
        console.print(Text(f"\nSystemMesh Local Shape: {local!r}\n", style="bold blue"))
        console.print(_table(title, rows, cols, cells))
    except Exception as e:
        logger.error("Error visualizing the system mesh: %s", e)


# ---------------------------------------------------------------------------------------------
# PNG (matplotlib, optional)
# ---------------------------------------------------------------------------------------------


def save_mesh_layout_png(tensor_or_mesh: Tensor | MeshDevice, path: str | os.PathLike[str]) -> str:
    """Draw the mesh (and, for a tensor, each device's shard) to a PNG file; returns the path.

    Needs matplotlib, which ttjax does not depend on: without it this raises
    ``MissingDependencyError`` (an ``ImportError``) saying ``pip install matplotlib``.

    >>> ttnn.visualize.save_mesh_layout_png(x, "layout.png")
    'layout.png'
    """
    if isinstance(tensor_or_mesh, Tensor):
        t: Tensor | None = tensor_or_mesh
        mesh = _tensor_mesh(tensor_or_mesh, None)
    elif isinstance(tensor_or_mesh, MeshDevice):
        t, mesh = None, tensor_or_mesh
    else:
        raise TTJaxError(
            f"save_mesh_layout_png expects a ttnn Tensor or MeshDevice, got "
            f"{type(tensor_or_mesh).__name__}.\nfix: pass a tensor or the mesh from "
            "ttnn.open_mesh_device(...)."
        )
    try:
        from matplotlib.figure import Figure
        from matplotlib.patches import Rectangle
    except ImportError:
        raise MissingDependencyError(
            "save_mesh_layout_png needs matplotlib, which is not installed (ttjax does not "
            "depend on it).\nfix: pip install matplotlib (or print the grid with "
            "ttnn.visualize_tensor / ttnn.visualize_mesh_device, which need only rich)."
        ) from None

    ms = tuple(mesh.shape)
    rows, cols = _grid(ms)
    layout = mesh_layout(t) if t is not None else None
    fig = Figure(figsize=(max(2.2 * cols, 4.0), max(1.4 * rows, 2.0) + 0.6))
    ax = fig.add_subplot()
    palette = [
        "#1b9e77", "#7570b3", "#d95f02", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
        "#1f78b4", "#b2df8a", "#fb9a99", "#cab2d6", "#fdbf6f", "#8dd3c7", "#bebada",
    ]  # fmt: skip
    for i, c in enumerate(np.ndindex(*ms)):
        r, col = divmod(i, cols)
        lines = [f"Dev. ID: {mesh.devices[c].id}", _coord_str(c)]
        color = "#dddddd"
        if layout is not None:
            entry = layout[i]
            lines.append(f"Shard {entry['shard']}: {list(entry['shard_shape'])}")
            lines.append("[" + ", ".join(entry["placements"]) + "]")
            color = palette[entry["shard"] % len(palette)]
        ax.add_patch(Rectangle((col, rows - 1 - r), 1, 1, facecolor=color, edgecolor="black"))
        ax.text(col + 0.5, rows - 0.5 - r, "\n".join(lines), ha="center", va="center", fontsize=8)
    ax.set_xlim(0, cols)
    ax.set_ylim(0, rows)
    ax.set_aspect("auto")
    ax.axis("off")
    if t is not None:
        title = f"Tensor(storage: {t.storage_type()}) on MeshDevice(rows={rows}, cols={cols})"
    else:
        title = f"MeshDevice(rows={rows}, cols={cols})"
    ax.set_title(title)
    fig.savefig(os.fspath(path), dpi=100, bbox_inches="tight")
    return os.fspath(path)


__all__ = [
    "MissingDependencyError",
    "mesh_layout",
    "save_mesh_layout_png",
    "visualize_mesh_device",
    "visualize_system_mesh",
    "visualize_tensor",
]
