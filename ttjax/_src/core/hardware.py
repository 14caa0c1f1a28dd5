"""TT-NN's hardware knobs: memory configs, core grids, compute-kernel and program configs (the
Wormhole systems' published figures are in :mod:`ttjax._src.core.systems`).

They tune placement in SRAM/DRAM and kernel scheduling on Tenstorrent chips. XLA makes those
choices itself, so values never depend on them, but ttjax keeps their TT-NN meaning: a tensor
carries its memory config, sharded configs are validated against the tensor as TT-NN does, and a
matmul program config's ``fused_activation`` is applied.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ttjax._src.core.errors import ConfigError, MemoryConfigError


class TensorMemoryLayout(enum.Enum):
    INTERLEAVED = "interleaved"
    HEIGHT_SHARDED = "height_sharded"
    WIDTH_SHARDED = "width_sharded"
    BLOCK_SHARDED = "block_sharded"

    def __repr__(self) -> str:
        return f"TensorMemoryLayout::{self.name}"


class BufferType(enum.Enum):
    DRAM = "dram"
    L1 = "l1"
    L1_SMALL = "l1_small"
    TRACE = "trace"

    def __repr__(self) -> str:
        return f"BufferType::{self.name}"


class ShardOrientation(enum.Enum):
    ROW_MAJOR = "row_major"
    COL_MAJOR = "col_major"


class ShardStrategy(enum.Enum):
    HEIGHT = "height"
    WIDTH = "width"
    BLOCK = "block"


class MathFidelity(enum.Enum):
    LoFi = "lofi"
    HiFi2 = "hifi2"
    HiFi3 = "hifi3"
    HiFi4 = "hifi4"


@dataclass(frozen=True)
class CoreCoord:
    """A core's (x, y) position on a chip's worker grid."""

    x: int
    y: int

    def __iter__(self) -> Iterator[int]:
        return iter((self.x, self.y))


def _coord(c: Any) -> CoreCoord:
    return c if isinstance(c, CoreCoord) else CoreCoord(int(c[0]), int(c[1]))


# The tile shapes Tenstorrent hardware supports, each with its face shape (TILE_FACE_HW_CHOICES,
# tt_metal/api/tt-metalium/tile.hpp).
TILE_FACE_SHAPES: dict[tuple[int, int], tuple[int, int]] = {
    (32, 32): (16, 16),
    (16, 32): (16, 16),
    (32, 16): (16, 16),
    (16, 16): (16, 16),
    (8, 32): (8, 16),
    (4, 32): (4, 16),
    (2, 32): (2, 16),
    (1, 32): (1, 16),
    (8, 16): (8, 16),
    (4, 16): (4, 16),
    (2, 16): (2, 16),
    (1, 16): (1, 16),
}


class Tile:
    """TT-NN's ``ttnn.Tile``: a tile's shape (one of the hardware's choices), its face shape and
    the transpose flags (``Tile::Tile``, tt_metal/impl/data_format/tile.cpp). Ops that take
    ``output_tile=`` check it against their inputs' tiles.

    >>> ttnn.Tile([16, 32]).face_shape
    [16, 16]
    """

    def __init__(self, tile_shape: Sequence[int] = (32, 32), transpose_tile: bool = False) -> None:
        shape = tuple(int(d) for d in tile_shape)
        if shape not in TILE_FACE_SHAPES:
            raise ConfigError(
                f"ttnn.Tile({list(tile_shape)}): Tile size is not valid for our hardware.\n"
                f"fix: use one of {[list(k) for k in TILE_FACE_SHAPES]}."
            )
        if transpose_tile and shape[0] not in (16, 32):
            raise ConfigError(
                f"ttnn.Tile({list(shape)}, transpose_tile=True): Tile height must equal 16 or 32 "
                "in transpose mode.\nfix: a tile of height 16 or 32, or transpose_tile=False."
            )
        face = TILE_FACE_SHAPES[shape]
        self.tile_shape = list(shape)
        self.face_shape = list(face)
        self.num_faces = shape[0] * shape[1] // (face[0] * face[1])
        self.partial_face = int(shape[0] < 32)
        self.narrow_tile = int(shape[1] < 32)
        self.transpose_within_face = bool(transpose_tile)
        self.transpose_of_faces = bool(transpose_tile)

    def get_tile_shape(self) -> list[int]:
        return list(self.tile_shape)

    def __eq__(self, other: object) -> bool:  # Tile::operator==: tile and face shapes
        if not isinstance(other, Tile):
            return NotImplemented
        return self.tile_shape == other.tile_shape and self.face_shape == other.face_shape

    def __hash__(self) -> int:
        return hash((tuple(self.tile_shape), tuple(self.face_shape)))

    def __repr__(self) -> str:
        return f"Tile with shape: [{self.tile_shape[0]}, {self.tile_shape[1]}]"


def as_tile(op: str, tile: Any) -> Tile:
    """``tile`` (a :class:`Tile` or a ``[height, width]`` list, as TT-NN's binding converts it)
    as a Tile."""
    if isinstance(tile, Tile):
        return tile
    if isinstance(tile, (list, tuple)) and len(tile) == 2:
        return Tile(tile)
    raise ConfigError(
        f"ttnn.{op}: output_tile={tile!r} is not a ttnn.Tile.\nfix: e.g. ttnn.Tile([32, 32])."
    )


@dataclass(frozen=True)
class CoreGrid:
    """A worker grid of ``y`` rows by ``x`` columns (``num_cores = x * y``)."""

    y: int
    x: int

    @property
    def num_cores(self) -> int:
        return self.x * self.y


@dataclass(frozen=True)
class CoreRange:
    """The rectangle of cores from ``start`` to ``end`` (both inclusive), as in TT-NN."""

    start: CoreCoord
    end: CoreCoord

    def __init__(self, start: Any, end: Any = None) -> None:
        object.__setattr__(self, "start", _coord(start))
        object.__setattr__(self, "end", _coord(end if end is not None else start))

    @property
    def start_coord(self) -> CoreCoord:
        return self.start

    @property
    def end_coord(self) -> CoreCoord:
        return self.end

    def grid_size(self) -> CoreCoord:
        return CoreCoord(self.end.x - self.start.x + 1, self.end.y - self.start.y + 1)

    def num_cores(self) -> int:
        g = self.grid_size()
        return g.x * g.y

    size = num_cores

    def contains(self, core: Any) -> bool:
        c = _coord(core)
        return self.start.x <= c.x <= self.end.x and self.start.y <= c.y <= self.end.y


class CoreRangeSet:
    """A set of core rectangles (TT-NN's ``CoreRangeSet``); compared and hashed by value."""

    def __init__(self, ranges: Any = ()) -> None:
        if isinstance(ranges, CoreRange):
            ranges = (ranges,)
        if isinstance(ranges, (set, frozenset)):
            # A Python set becomes TT-Metal's std::set<CoreRange>: ordered by start, then end
            # (CoreCoord order: x, then y); a list keeps its order, as TT-Metal's vector does.
            ranges = sorted(ranges, key=lambda r: (r.start.x, r.start.y, r.end.x, r.end.y))
        self.ranges_ = tuple(ranges)

    def contains(self, core: Any) -> bool:
        c = _coord(core)
        return any(r.contains(c) for r in self.ranges_)

    def ranges(self) -> list[CoreRange]:
        return list(self.ranges_)

    def num_cores(self) -> int:
        return sum(r.num_cores() for r in self.ranges_)

    def bounding_box(self) -> CoreRange:
        return CoreRange(
            CoreCoord(min(r.start.x for r in self.ranges_), min(r.start.y for r in self.ranges_)),
            CoreCoord(max(r.end.x for r in self.ranges_), max(r.end.y for r in self.ranges_)),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CoreRangeSet) and set(other.ranges_) == set(self.ranges_)

    def __hash__(self) -> int:
        return hash(frozenset(self.ranges_))

    def __repr__(self) -> str:
        return f"CoreRangeSet({list(self.ranges_)!r})"


def num_cores_to_corerangeset(
    target_num_cores: int, grid_size: Any, row_wise: bool = False
) -> CoreRangeSet:
    """The first ``target_num_cores`` cores of a ``grid_size`` grid, filled row by row
    (``row_wise=True``) or column by column, as TT-NN's ``num_cores_to_corerangeset``.

    >>> num_cores_to_corerangeset(10, CoreCoord(8, 8), row_wise=True).num_cores()
    10
    """
    g = (
        _coord(grid_size)
        if not isinstance(grid_size, CoreGrid)
        else CoreCoord(grid_size.x, grid_size.y)
    )
    n = int(target_num_cores)
    if n > g.x * g.y:
        raise MemoryConfigError(
            f"Target number of cores {n} is greater than total number of available cores "
            f"{g.x * g.y}.\nfix: ask for at most {g.x * g.y} cores of the {g.x}x{g.y} grid."
        )
    major = g.x if row_wise else g.y
    ranges = []
    full, rest = divmod(n, major)
    if full:
        end = (major - 1, full - 1) if row_wise else (full - 1, major - 1)
        ranges.append(CoreRange(CoreCoord(0, 0), CoreCoord(*end)))
    if rest:
        start = (0, full) if row_wise else (full, 0)
        end = (rest - 1, full) if row_wise else (full, rest - 1)
        ranges.append(CoreRange(CoreCoord(*start), CoreCoord(*end)))
    return CoreRangeSet(ranges)


def num_cores_to_corerangeset_in_subcoregrids(
    start_core: Any, target_num_cores: int, sub_core_grids: CoreRangeSet, row_wise: bool = False
) -> CoreRangeSet:
    """``target_num_cores`` cores from ``start_core`` on, walking ``sub_core_grids``' ranges in
    order (row by row when ``row_wise``, else column by column), split into CoreRanges exactly as
    TT-Metal's ``num_cores_to_corerangeset_in_subcoregrids`` (tt_metal/common/work_split.cpp).

    >>> grids = CoreRangeSet([CoreRange((1, 0), (3, 9)), CoreRange((5, 0), (6, 9))])
    >>> num_cores_to_corerangeset_in_subcoregrids(CoreCoord(1, 0), 12, grids).num_cores()
    12
    """
    n = int(target_num_cores)
    start = _coord(start_core)
    if n <= 0:
        raise MemoryConfigError(
            f"Target number of cores must be greater than 0 (got {n}).\nfix: ask for >= 1 core."
        )
    if n > sub_core_grids.num_cores():
        raise MemoryConfigError(
            f"Target number of cores {n} is greater than total number of available cores "
            f"{sub_core_grids.num_cores()}.\nfix: ask for fewer cores or pass larger sub-core grids."
        )
    if not sub_core_grids.contains(start):
        raise MemoryConfigError(
            f"Start core must be contained within the input CoreRangeSet (start {start!r}, "
            f"grids {sub_core_grids!r}).\nfix: start inside one of the sub-core grids."
        )

    # Row-wise walks rows (x along a row); column-wise is the same walk with x and y swapped.
    def get(c: CoreCoord) -> tuple[int, int]:
        return (c.x, c.y) if row_wise else (c.y, c.x)

    def make(inner: int, outer: int) -> CoreCoord:
        return CoreCoord(inner, outer) if row_wise else CoreCoord(outer, inner)

    out: list[CoreRange] = []
    cur_start, cur_end, remaining = start, start, n
    found = False
    for grid in sub_core_grids.ranges():
        if grid.contains(start):
            found = True
        elif not found:
            continue
        else:
            cur_start = cur_end = grid.start
        g_start, g_end = get(grid.start), get(grid.end)
        extent = g_end[0] - g_start[0] + 1
        for outer in range(get(cur_start)[1], g_end[1] + 1):
            if remaining == 0:
                break
            s_inner = get(cur_start)[0]
            width = min(g_end[0] - s_inner + 1, remaining)
            if width < extent:
                if cur_start != cur_end:
                    out.append(CoreRange(cur_start, cur_end))
                cur_end = make(s_inner + width - 1, outer)
                remaining -= width
                out.append(CoreRange(make(s_inner, outer), make(get(cur_end)[0], outer)))
                cur_start = make(g_start[0], outer + 1)
                cur_end = cur_start
            else:
                cur_end = make(g_end[0], outer)
                remaining -= width
        if cur_start != cur_end:
            out.append(CoreRange(cur_start, cur_end))
    if remaining:
        raise MemoryConfigError(
            "Failed to split target number of cores into CoreRangeSet.\n"
            "fix: check start_core and sub_core_grids."
        )
    return CoreRangeSet(out)


@dataclass(frozen=True)
class ShardSpec:
    """Where each shard of a sharded buffer goes: the core ``grid``, the 2-D shard ``shape``
    (height, width of the tensor flattened to 2-D) and the core order."""

    grid: Any
    shape: tuple[int, ...]
    orientation: ShardOrientation = ShardOrientation.ROW_MAJOR

    def __init__(
        self, grid: Any, shard_shape: Sequence[int], shard_orientation: Any = None
    ) -> None:
        """TT-NN's keyword names (ttnn-pybind/tensor.cpp), read back as ``shape``, ``orientation``."""
        orientation = ShardOrientation.ROW_MAJOR if shard_orientation is None else shard_orientation
        self.__dict__.update(grid=grid, shape=tuple(map(int, shard_shape)), orientation=orientation)

    def num_cores(self) -> int:
        grid = self.grid
        if isinstance(grid, CoreGrid):
            return grid.num_cores
        if isinstance(grid, CoreRange):
            return grid.num_cores()
        return int(grid.num_cores())


@dataclass(frozen=True)
class MemoryConfig:
    """Where a tensor's buffers live on a chip (DRAM or L1, interleaved or sharded over cores).

    A tensor carries one (``t.memory_config()``); ops' ``memory_config=`` sets it on their
    output. Sharded configs are validated against the tensor, as TT-NN validates them; the
    values never change (XLA decides actual placement).
    """

    memory_layout: TensorMemoryLayout = TensorMemoryLayout.INTERLEAVED
    buffer_type: BufferType = BufferType.DRAM
    shard_spec: ShardSpec | None = None

    def is_sharded(self) -> bool:
        return self.memory_layout is not TensorMemoryLayout.INTERLEAVED

    def interleaved(self) -> MemoryConfig:
        """The interleaved config in the same buffer type."""
        return MemoryConfig(TensorMemoryLayout.INTERLEAVED, self.buffer_type)

    def to_json(self) -> str:
        """This config as a JSON string (TT-NN's ``MemoryConfig.to_json``, with its field names:
        model code caches weight configs with it and recognises them by ``buffer_type``,
        ``memory_layout`` and ``created_with_nd_shard_spec``). ``from_json`` reads it back equal.

        >>> ttnn.MemoryConfig.from_json(ttnn.L1_MEMORY_CONFIG.to_json()) == ttnn.L1_MEMORY_CONFIG
        True
        """
        spec = self.shard_spec
        return json.dumps(
            {
                "memory_layout": self.memory_layout.name,
                "buffer_type": self.buffer_type.name,
                "shard_spec": None
                if spec is None
                else {
                    "grid": _grid_to_json(spec.grid),
                    "shape": list(spec.shape),
                    "orientation": spec.orientation.name,
                },
                "nd_shard_spec": None,
                "created_with_nd_shard_spec": False,
            }
        )

    @staticmethod
    def from_json(text: str) -> MemoryConfig:
        """The config :meth:`to_json` wrote (TT-NN's ``MemoryConfig.from_json``)."""
        try:
            raw = json.loads(text)
            spec = raw.get("shard_spec")
            return MemoryConfig(
                TensorMemoryLayout[raw["memory_layout"]],
                BufferType[raw["buffer_type"]],
                None
                if spec is None
                else ShardSpec(
                    _grid_from_json(spec["grid"]),
                    tuple(spec["shape"]),
                    ShardOrientation[spec["orientation"]],
                ),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise MemoryConfigError(
                f"MemoryConfig.from_json: {text[:200]!r} is not a memory config ({e!r}).\n"
                "fix: pass a string that MemoryConfig.to_json wrote."
            ) from e


def _grid_to_json(grid: Any) -> dict[str, Any]:
    if isinstance(grid, CoreGrid):
        return {"core_grid": [grid.y, grid.x]}
    ranges = [grid] if isinstance(grid, CoreRange) else list(grid.ranges())
    key = "core_range" if isinstance(grid, CoreRange) else "core_range_set"
    return {key: [[[r.start.x, r.start.y], [r.end.x, r.end.y]] for r in ranges]}


def _grid_from_json(raw: dict[str, Any]) -> Any:
    if "core_grid" in raw:
        return CoreGrid(*raw["core_grid"])
    ranges = [
        CoreRange(tuple(a), tuple(b))
        for a, b in raw.get("core_range", raw.get("core_range_set", []))
    ]
    return ranges[0] if "core_range" in raw else CoreRangeSet(ranges)


DRAM_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.DRAM)
L1_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.L1)
L1_HEIGHT_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.HEIGHT_SHARDED, BufferType.L1)
L1_WIDTH_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.WIDTH_SHARDED, BufferType.L1)
L1_BLOCK_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.BLOCK_SHARDED, BufferType.L1)


def _div_up(a: int, b: int) -> int:
    return -(-a // b)


def validate_memory_config(
    what: str, memory_config: Any, padded_shape: Sequence[int], tile: bool
) -> None:
    """Refuse a sharded ``memory_config`` whose shard spec does not fit a tensor of per-device
    ``padded_shape``, with TT-NN's checks (``validate_sharding`` in ttnn/core/tensor/tensor_spec.cpp):
    the 2-D view is [prod(padded_shape[:-1]), padded_shape[-1]]; a height-sharded shard spans
    the full width, a width-sharded one the full height, and there are no more shards than cores.
    """
    if not isinstance(memory_config, MemoryConfig):
        raise MemoryConfigError(
            f"{what}: memory_config={memory_config!r} is not a ttnn.MemoryConfig.\n"
            "fix: pass e.g. ttnn.DRAM_MEMORY_CONFIG, ttnn.L1_MEMORY_CONFIG or "
            "ttnn.create_sharded_memory_config(...)."
        )
    spec = memory_config.shard_spec
    if not memory_config.is_sharded() or spec is None:
        return
    dims = [int(d) for d in padded_shape] or [1]
    height, width = int(np.prod(dims[:-1])), dims[-1]
    sh, sw = spec.shape if len(spec.shape) == 2 else (0, 0)
    layout = memory_config.memory_layout
    shape_txt = f"per-device padded shape {list(dims)} (2-D [{height}, {width}])"

    def fail(reason: str, fix: str) -> MemoryConfigError:
        return MemoryConfigError(
            f"{what}: {layout!r} shard shape {list(spec.shape)} does not fit a tensor of "
            f"{shape_txt}: {reason}.\nfix: {fix}"
        )

    if len(spec.shape) != 2 or sh <= 0 or sw <= 0:
        raise fail("a shard shape is [height, width] with positive sizes", "e.g. [32, 64].")
    if tile and (sh % 32 or sw % 32):
        raise fail(
            f"Physical shard shape [{sh}, {sw}] must be tile [32, 32] sized",
            "use multiples of 32 for both shard dims in TILE layout.",
        )
    cores = spec.num_cores()
    if layout is TensorMemoryLayout.HEIGHT_SHARDED:
        if sw != width:
            raise fail(
                f"Shard width {sw} must match physical width {width} for height sharded",
                f"use shard shape [{_div_up(height, cores)}, {width}] (or width-shard instead).",
            )
        if _div_up(height, sh) > cores:
            raise fail(
                f"Number of shards along height {_div_up(height, sh)} must not exceed number "
                f"of cores {cores}",
                f"use a shard height of at least {_div_up(height, cores)} or more cores.",
            )
    elif layout is TensorMemoryLayout.WIDTH_SHARDED:
        if sh != height:
            raise fail(
                f"Shard height {sh} must match physical height {height} for width sharded",
                f"use shard shape [{height}, {_div_up(width, cores)}].",
            )
        if _div_up(width, sw) > cores:
            raise fail(
                f"Number of shards along width {_div_up(width, sw)} must not exceed number of "
                f"cores {cores}",
                f"use a shard width of at least {_div_up(width, cores)} or more cores.",
            )
    else:
        grid = spec.grid
        if isinstance(grid, CoreRangeSet) and len(grid.ranges_) != 1:
            raise fail(
                f"Shard grid must be one full rectangular grid for block sharded (got {grid!r})",
                "use one CoreRange, e.g. ttnn.CoreRangeSet({ttnn.CoreRange((0, 0), (7, 3))}).",
            )
        box = (
            grid.bounding_box().grid_size()
            if isinstance(grid, CoreRangeSet)
            else (CoreCoord(grid.x, grid.y) if isinstance(grid, CoreGrid) else grid.grid_size())
        )
        rows, cols = (box.y, box.x)
        if spec.orientation is ShardOrientation.COL_MAJOR:
            rows, cols = cols, rows
        if _div_up(height, sh) > rows or _div_up(width, sw) > cols:
            raise fail(
                f"{_div_up(height, sh)} x {_div_up(width, sw)} shards do not fit the "
                f"{rows} x {cols} core grid (block sharded: shards along height <= rows, "
                "along width <= columns)",
                f"use shard shape [{_div_up(height, rows)}, {_div_up(width, cols)}] or a larger grid.",
            )


def _grid_set(core_grid: Any, use_shard_shape: bool) -> CoreRangeSet:
    if isinstance(core_grid, CoreGrid):
        return CoreRangeSet(
            [CoreRange(CoreCoord(0, 0), CoreCoord(core_grid.x - 1, core_grid.y - 1))]
        )
    if isinstance(core_grid, (list, tuple)) and len(core_grid) == 2:
        a, b = core_grid
        if isinstance(a, CoreGrid) and isinstance(b, CoreGrid):
            return CoreRangeSet(
                [
                    CoreRange(CoreCoord(0, 0), CoreCoord(a.x - 1, a.y - 1)),
                    CoreRange(CoreCoord(0, a.y), CoreCoord(b.x - 1, a.y)),
                ]
            )
    if isinstance(core_grid, CoreRangeSet):
        if not use_shard_shape:
            raise MemoryConfigError(
                "create_sharded_memory_config: height and width must be shard shape with "
                "CoreRangeSet.\nfix: pass use_height_and_width_as_shard_shape=True, or a CoreGrid."
            )
        return core_grid
    raise MemoryConfigError(
        f"create_sharded_memory_config: Invalid core_grid type {core_grid!r}.\n"
        "fix: pass a ttnn.CoreGrid(y=..., x=...) or a ttnn.CoreRangeSet."
    )


def create_sharded_memory_config(
    shape: Any,
    core_grid: Any,
    strategy: ShardStrategy,
    orientation: ShardOrientation | None = None,
    use_height_and_width_as_shard_shape: bool = False,
) -> MemoryConfig:
    """A sharded L1 memory config, computed as TT-NN's ``ttnn.create_sharded_memory_config``.

    ``shape`` is the tensor's shape (seen as [prod(dims[:-1]), width]) split over the core grid,
    or, with ``use_height_and_width_as_shard_shape=True``, its last two dims are the shard shape.

    >>> create_sharded_memory_config((1, 1, 32, 256), CoreGrid(y=1, x=8), ShardStrategy.WIDTH).shard_spec.shape
    (32, 32)
    """
    layouts = {
        ShardStrategy.HEIGHT: TensorMemoryLayout.HEIGHT_SHARDED,
        ShardStrategy.WIDTH: TensorMemoryLayout.WIDTH_SHARDED,
        ShardStrategy.BLOCK: TensorMemoryLayout.BLOCK_SHARDED,
    }
    if strategy not in layouts:
        raise MemoryConfigError(
            f"create_sharded_memory_config: Invalid sharding strategy {strategy!r}.\n"
            "fix: ttnn.ShardStrategy.HEIGHT, WIDTH or BLOCK."
        )
    orient = orientation or ShardOrientation.ROW_MAJOR
    grid = _grid_set(core_grid, use_height_and_width_as_shard_shape)
    *batch, height, width = (int(d) for d in shape)
    if use_height_and_width_as_shard_shape:
        shard = (height, width) if orient is ShardOrientation.ROW_MAJOR else (width, height)
    else:
        sh, sw = int(np.prod(batch)) * height, width
        if strategy is ShardStrategy.BLOCK:
            rows, cols = (core_grid.y, core_grid.x)
            if orient is ShardOrientation.COL_MAJOR:
                rows, cols = cols, rows
            splits = (rows, cols)
        elif strategy is ShardStrategy.HEIGHT:
            splits = (core_grid.num_cores, 1)
        else:
            splits = (1, core_grid.num_cores)
        if sh % splits[0] or sw % splits[1]:
            raise MemoryConfigError(
                f"create_sharded_memory_config: Invalid sharding core_grid {core_grid!r} for "
                f"shape {list(shape)} ({strategy!r}: [{sh}, {sw}] does not split into "
                f"{splits[0]} x {splits[1]} equal shards).\nfix: pick a core grid that divides "
                "the tensor, or pass the shard shape with use_height_and_width_as_shard_shape=True."
            )
        shard = (sh // splits[0], sw // splits[1])
    return MemoryConfig(layouts[strategy], BufferType.L1, ShardSpec(grid, shard, orient))


def create_sharded_memory_config_(
    shape: Any,
    core_grid: Any,
    strategy: ShardStrategy | TensorMemoryLayout,
    orientation: ShardOrientation,
    use_height_and_width_as_shard_shape: bool = False,
    tile_layout: bool = False,
) -> MemoryConfig:
    """TT-NN's ``ttnn.create_sharded_memory_config_`` (``ttnn/core.py``): the older form of
    :func:`create_sharded_memory_config`. Shards round up (the last one may be short),
    ``core_grid`` may be a CoreRangeSet or a pair of CoreGrids (a full block plus a partial
    row), ``strategy`` a ShardStrategy or a TensorMemoryLayout, and ``tile_layout`` pads the
    height to whole tiles per core.

    >>> create_sharded_memory_config_((1, 1, 100, 64), CoreGrid(y=1, x=4),
    ...     TensorMemoryLayout.HEIGHT_SHARDED, ShardOrientation.ROW_MAJOR).shard_spec.shape
    (25, 64)
    """
    layouts = {
        ShardStrategy.HEIGHT: TensorMemoryLayout.HEIGHT_SHARDED,
        ShardStrategy.WIDTH: TensorMemoryLayout.WIDTH_SHARDED,
        ShardStrategy.BLOCK: TensorMemoryLayout.BLOCK_SHARDED,
    }
    layout = layouts[strategy] if isinstance(strategy, ShardStrategy) else strategy
    if not isinstance(layout, TensorMemoryLayout) or layout is TensorMemoryLayout.INTERLEAVED:
        raise MemoryConfigError(
            f"create_sharded_memory_config_: Invalid sharding strategy {strategy!r}.\n"
            "fix: a ttnn.ShardStrategy or a sharded ttnn.TensorMemoryLayout."
        )
    if not isinstance(orientation, ShardOrientation):
        raise MemoryConfigError(
            f"create_sharded_memory_config_: Invalid type of shard orientation {orientation!r}.\n"
            "fix: ttnn.ShardOrientation.ROW_MAJOR or COL_MAJOR."
        )
    if isinstance(core_grid, CoreGrid):
        grid = CoreRangeSet({CoreRange((0, 0), (core_grid.x - 1, core_grid.y - 1))})
    elif isinstance(core_grid, (list, tuple)) and len(core_grid) == 2:
        full, partial = core_grid  # a block of full rows, then a row of partial.x cores
        grid = CoreRangeSet(
            {
                CoreRange((0, 0), (full.x - 1, full.y - 1)),
                CoreRange((0, full.y), (partial.x - 1, full.y)),
            }
        )
    elif isinstance(core_grid, CoreRangeSet):
        grid = core_grid
    else:
        raise MemoryConfigError(
            f"create_sharded_memory_config_: Invalid core_grid {core_grid!r}.\n"
            "fix: a ttnn.CoreGrid, a CoreRangeSet, or a pair of CoreGrids."
        )
    *batch, height, width = (int(d) for d in shape)
    row_major = orientation is ShardOrientation.ROW_MAJOR
    if use_height_and_width_as_shard_shape:
        shard = (height, width) if row_major else (width, height)
    else:
        rows, cols = int(np.prod(batch)) * height, width
        cores = grid.num_cores()
        box = grid.bounding_box().grid_size()
        if layout is TensorMemoryLayout.BLOCK_SHARDED:
            if box.x * box.y != cores:
                raise MemoryConfigError(
                    f"create_sharded_memory_config_: Invalid CoreRangeSet {grid!r} for block "
                    "sharding strategy (not a rectangle).\nfix: pass a rectangular core grid."
                )
            along_h, along_w = (box.y, box.x) if row_major else (box.x, box.y)
            padded = _div_up(rows, along_h * 32) * along_h * 32 if tile_layout else rows
            shard = (_div_up(padded, along_h), _div_up(cols, along_w))
        elif layout is TensorMemoryLayout.HEIGHT_SHARDED:
            padded = _div_up(rows, cores) * cores if tile_layout else rows
            shard = (_div_up(padded, cores), cols)
        else:
            shard = (rows, _div_up(cols, cores))
    if tile_layout and shard[0] % 32 and shard[1] % 32:
        raise MemoryConfigError(
            f"create_sharded_memory_config_: Incorrect tensor shape {list(shape)}: shard {shard} "
            "is not tile-aligned.\nfix: pad the tensor to whole tiles."
        )
    return MemoryConfig(layout, BufferType.L1, ShardSpec(grid, shard, orientation))


class _KernelConfig:
    """A TT-NN config object built from keyword arguments; it remembers them for its repr.

    ``_fields`` (when set) lists the keyword arguments TT-NN's binding takes: any other name
    raises ``TypeError`` as the binding would; unset ones default to None.
    """

    _fields: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if self._fields:
            if len(args) > len(self._fields):
                raise TypeError(
                    f"{type(self).__name__} takes at most {len(self._fields)} positional "
                    f"arguments ({len(args)} given).\nfix: pass {list(self._fields)} by name."
                )
            kwargs = {**dict(zip(self._fields, args)), **kwargs}
            unknown = sorted(k for k in kwargs if k not in self._fields)
            if unknown:
                raise TypeError(
                    f"{type(self).__name__} got unexpected keyword argument(s) {unknown}.\n"
                    f"fix: TT-NN's {type(self).__name__} takes {list(self._fields)}."
                )
        elif args:
            raise TypeError(f"{type(self).__name__} takes keyword arguments only.")
        self.__dict__.update(kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in type(self)._fields:
            return None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(map(repr, self.__dict__.items())))))


class DeviceComputeKernelConfig(_KernelConfig):
    """TT-NN's common type of the per-architecture compute-kernel configs below."""


class WormholeComputeKernelConfig(DeviceComputeKernelConfig):
    pass


class GrayskullComputeKernelConfig(DeviceComputeKernelConfig):
    pass


class BlackholeComputeKernelConfig(DeviceComputeKernelConfig):
    pass


_MM_COMMON = ("compute_with_storage_grid_size", "in0_block_w", "out_subblock_h", "out_subblock_w")


class MatmulProgramConfig(_KernelConfig):
    """TT-NN's ``MatmulProgramConfig``: the one type every matmul program config is (TT-NN binds
    the variant of the four configs under this name), so ``isinstance(pc, ttnn.MatmulProgramConfig)``
    holds for each of them."""


class MatmulMultiCoreReuseProgramConfig(MatmulProgramConfig):
    _fields = (*_MM_COMMON, "per_core_M", "per_core_N")


class MatmulMultiCoreReuseMultiCastProgramConfig(MatmulProgramConfig):
    """2-D multicast matmul config; its ``fused_activation`` is applied to the product."""

    _fields = (
        *_MM_COMMON,
        "out_block_h",
        "out_block_w",
        "per_core_M",
        "per_core_N",
        "transpose_mcast",
        "fused_activation",
        "fuse_batch",
    )


class MatmulMultiCoreReuseMultiCast1DProgramConfig(MatmulProgramConfig):
    """1-D multicast matmul config; its ``fused_activation`` is applied to the product."""

    _fields = (
        *_MM_COMMON,
        "out_block_h",
        "out_block_w",
        "per_core_M",
        "per_core_N",
        "fuse_batch",
        "fused_activation",
        "mcast_in0",
        "gather_in0",
        "hop_cores",
        "num_global_cb_receivers",
        "untilize_out",
    )


class MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(MatmulProgramConfig):
    """DRAM-sharded matmul config; its ``fused_activation`` is applied to the product."""

    _fields = ("in0_block_w", "per_core_M", "per_core_N", "fused_activation")


class SDPAProgramConfig(_KernelConfig):
    pass


class LayerNormShardedMultiCoreProgramConfig(_KernelConfig):
    """Sharded layer/RMS norm config (TT-NN's binding: these keywords, ``inplace`` required).

    A plain struct, as in TT-NN: its rules are checked when a norm runs on a tensor
    (:func:`ttjax.ops._common.check_norm_program_config`), so configs for other sizes can be built.
    """

    _fields = (
        "compute_with_storage_grid_size",
        "subblock_w",
        "block_h",
        "block_w",
        "inplace",
        "legacy_reduction",
        "legacy_rsqrt",
        "use_welford",
    )


class LayerNormDefaultProgramConfig(_KernelConfig):
    _fields = ("legacy_reduction", "legacy_rsqrt", "use_welford")


class SoftmaxShardedMultiCoreProgramConfig(_KernelConfig):
    """Sharded softmax config (TT-NN's binding: these four keywords)."""

    _fields = ("compute_with_storage_grid_size", "subblock_w", "block_h", "block_w")


class SoftmaxDefaultProgramConfig(_KernelConfig):
    pass


class DispatchCoreType(enum.Enum):
    """Which cores run TT-Metal's dispatch (``ttnn.DispatchCoreType``)."""

    WORKER = 0
    ETH = 1


class DispatchCoreAxis(enum.Enum):
    """Whether dispatch takes a row or a column of cores (``ttnn.DispatchCoreAxis``)."""

    ROW = 0
    COL = 1


# A chip's worker grid (compute_with_storage_grid_size) by arch, product and dispatch cores: the
# "compute_with_storage_grid_range" of TT-Metal's core descriptors (tt_metal/core_descriptors/
# wormhole_b0_80_arch.yaml for tensix (WORKER) dispatch, ..._eth_dispatch.yaml for ETH dispatch,
# blackhole_140_arch*.yaml), same for 1 and 2 command queues. The product is TT-Metal's
# get_product_name(arch, harvested rows) (tt_metal/llrt/core_descriptor.hpp): Wormhole "galaxy"
# (0 harvested: Galaxy/TG chips, 8x10 Tensix), "nebula_x1" (1: N150, 8x9), "nebula_x2" (2: N300
# cards of N300/T3000, 8x8). Dispatch on a row takes the last row; on a column, the last column.
_WORKER_GRIDS: dict[
    tuple[str, str], dict[tuple[DispatchCoreType, DispatchCoreAxis], tuple[int, int]]
] = {
    ("wormhole_b0", "galaxy"): {
        (DispatchCoreType.WORKER, DispatchCoreAxis.ROW): (8, 9),
        (DispatchCoreType.WORKER, DispatchCoreAxis.COL): (7, 10),
        (DispatchCoreType.ETH, DispatchCoreAxis.ROW): (8, 10),
    },
    ("wormhole_b0", "nebula_x1"): {
        (DispatchCoreType.WORKER, DispatchCoreAxis.ROW): (8, 8),
        (DispatchCoreType.WORKER, DispatchCoreAxis.COL): (7, 9),
        (DispatchCoreType.ETH, DispatchCoreAxis.ROW): (8, 8),
    },
    ("wormhole_b0", "nebula_x2"): {
        (DispatchCoreType.WORKER, DispatchCoreAxis.ROW): (8, 7),
        (DispatchCoreType.WORKER, DispatchCoreAxis.COL): (7, 8),
        (DispatchCoreType.ETH, DispatchCoreAxis.ROW): (8, 8),
    },
    ("blackhole", "unharvested"): {
        (DispatchCoreType.WORKER, DispatchCoreAxis.COL): (13, 10),
        (DispatchCoreType.ETH, DispatchCoreAxis.COL): (14, 10),
    },
    ("blackhole", "1xharvested"): {
        (DispatchCoreType.WORKER, DispatchCoreAxis.COL): (12, 10),
        (DispatchCoreType.ETH, DispatchCoreAxis.COL): (13, 10),
    },
    ("blackhole", "2xharvested"): {
        (DispatchCoreType.WORKER, DispatchCoreAxis.COL): (11, 10),
        (DispatchCoreType.ETH, DispatchCoreAxis.COL): (12, 10),
    },
}


def worker_grid_size(
    arch: str,
    product: str,
    dispatch_core_type: DispatchCoreType,
    dispatch_core_axis: DispatchCoreAxis,
) -> CoreCoord:
    """The worker grid (``compute_with_storage_grid_size()``) of a ``product`` chip of ``arch``
    opened with dispatch on ``dispatch_core_type`` cores along ``dispatch_core_axis``, from
    TT-Metal's core descriptors (see ``_WORKER_GRIDS``).

    >>> worker_grid_size("wormhole_b0", "galaxy", DispatchCoreType.WORKER, DispatchCoreAxis.COL)
    CoreCoord(x=7, y=10)
    """
    table = _WORKER_GRIDS.get((arch, product))
    if table is None:
        raise MemoryConfigError(
            f"No core descriptor for a {product!r} chip of arch {arch!r}.\nfix: one of "
            f"{sorted(_WORKER_GRIDS)}."
        )
    grid = table.get((dispatch_core_type, dispatch_core_axis))
    if grid is None:
        raise MemoryConfigError(
            f"A {product!r} {arch} chip has no core descriptor for dispatch on "
            f"{dispatch_core_type} cores along {dispatch_core_axis} (TT-Metal's core "
            f"descriptors list {sorted((t.name, a.name) for t, a in table)}).\nfix: open the "
            "device with one of those ttnn.DispatchCoreConfig(type, axis)."
        )
    return CoreCoord(*grid)


def divup(a: int, b: int) -> int:
    """``ceil(a / b)`` for ints (TT-NN's ``ttnn.core.divup``)."""
    return (a + b - 1) // b


def roundup(a: int, b: int) -> int:
    """``a`` rounded up to a multiple of ``b`` (TT-NN's ``ttnn.core.roundup``)."""
    return divup(a, b) * b


def init_device_compute_kernel_config(
    arch: Any = None, **kwargs: Any
) -> WormholeComputeKernelConfig:
    """TT-NN's helper for a compute-kernel config; returns the config it describes."""
    return WormholeComputeKernelConfig(arch=arch, **kwargs)


__all__ = [
    "DRAM_MEMORY_CONFIG",
    "L1_BLOCK_SHARDED_MEMORY_CONFIG",
    "L1_HEIGHT_SHARDED_MEMORY_CONFIG",
    "L1_MEMORY_CONFIG",
    "L1_WIDTH_SHARDED_MEMORY_CONFIG",
    "BlackholeComputeKernelConfig",
    "BufferType",
    "CoreCoord",
    "CoreGrid",
    "CoreRange",
    "CoreRangeSet",
    "DeviceComputeKernelConfig",
    "DispatchCoreAxis",
    "DispatchCoreType",
    "GrayskullComputeKernelConfig",
    "LayerNormDefaultProgramConfig",
    "LayerNormShardedMultiCoreProgramConfig",
    "MathFidelity",
    "MatmulMultiCoreReuseMultiCast1DProgramConfig",
    "MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig",
    "MatmulMultiCoreReuseMultiCastProgramConfig",
    "MatmulMultiCoreReuseProgramConfig",
    "MatmulProgramConfig",
    "MemoryConfig",
    "SDPAProgramConfig",
    "ShardOrientation",
    "ShardSpec",
    "ShardStrategy",
    "SoftmaxDefaultProgramConfig",
    "SoftmaxShardedMultiCoreProgramConfig",
    "TensorMemoryLayout",
    "WormholeComputeKernelConfig",
    "create_sharded_memory_config",
    "create_sharded_memory_config_",
    "divup",
    "init_device_compute_kernel_config",
    "num_cores_to_corerangeset",
    "num_cores_to_corerangeset_in_subcoregrids",
    "roundup",
    "validate_memory_config",
    "worker_grid_size",
]
