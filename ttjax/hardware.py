"""TT-NN's hardware knobs: memory configs, core grids, compute-kernel and program configs.

They tune placement in SRAM/DRAM and kernel scheduling on Tenstorrent chips. XLA makes those
choices itself, so ttjax accepts these objects (real TT-NN code constructs and passes them),
keeps what they were given for ``repr``, and does not change any result because of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


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
    start: CoreCoord
    end: CoreCoord


class CoreRangeSet:
    def __init__(self, ranges: Any = ()) -> None:
        self.ranges = tuple(ranges)

    def __repr__(self) -> str:
        return f"CoreRangeSet({list(self.ranges)!r})"


@dataclass(frozen=True)
class ShardSpec:
    grid: Any
    shape: tuple[int, ...]
    orientation: ShardOrientation = ShardOrientation.ROW_MAJOR


@dataclass(frozen=True)
class MemoryConfig:
    """Where a tensor's buffers live on a chip. Accepted by every op; placement is XLA's call."""

    memory_layout: TensorMemoryLayout = TensorMemoryLayout.INTERLEAVED
    buffer_type: BufferType = BufferType.DRAM
    shard_spec: ShardSpec | None = None

    def is_sharded(self) -> bool:
        return self.memory_layout is not TensorMemoryLayout.INTERLEAVED


DRAM_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.DRAM)
L1_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.L1)
L1_HEIGHT_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.HEIGHT_SHARDED, BufferType.L1)
L1_WIDTH_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.WIDTH_SHARDED, BufferType.L1)
L1_BLOCK_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.BLOCK_SHARDED, BufferType.L1)


def create_sharded_memory_config(
    shape: Any,
    core_grid: Any = None,
    strategy: ShardStrategy = ShardStrategy.HEIGHT,
    orientation: ShardOrientation = ShardOrientation.ROW_MAJOR,
    use_height_and_width_as_shard_shape: bool = False,
    **_: Any,
) -> MemoryConfig:
    """A sharded L1 memory config, as TT-NN builds it (kept for its repr; no effect on results)."""
    layout = {
        ShardStrategy.HEIGHT: TensorMemoryLayout.HEIGHT_SHARDED,
        ShardStrategy.WIDTH: TensorMemoryLayout.WIDTH_SHARDED,
        ShardStrategy.BLOCK: TensorMemoryLayout.BLOCK_SHARDED,
    }[strategy]
    spec = ShardSpec(core_grid, tuple(shape), orientation)
    return MemoryConfig(layout, BufferType.L1, spec)


class _KernelConfig:
    """A TT-NN config object built from keyword arguments; it remembers them for its repr."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(map(repr, self.__dict__.items())))))


class WormholeComputeKernelConfig(_KernelConfig):
    pass


class GrayskullComputeKernelConfig(_KernelConfig):
    pass


class BlackholeComputeKernelConfig(_KernelConfig):
    pass


class MatmulMultiCoreReuseProgramConfig(_KernelConfig):
    pass


class MatmulMultiCoreReuseMultiCastProgramConfig(_KernelConfig):
    pass


class MatmulMultiCoreReuseMultiCast1DProgramConfig(_KernelConfig):
    pass


class MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(_KernelConfig):
    pass


class SDPAProgramConfig(_KernelConfig):
    pass


class LayerNormShardedMultiCoreProgramConfig(_KernelConfig):
    pass


class LayerNormDefaultProgramConfig(_KernelConfig):
    pass


class DispatchCoreConfig(_KernelConfig):
    pass


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
    "DispatchCoreConfig",
    "GrayskullComputeKernelConfig",
    "LayerNormDefaultProgramConfig",
    "LayerNormShardedMultiCoreProgramConfig",
    "MathFidelity",
    "MatmulMultiCoreReuseMultiCast1DProgramConfig",
    "MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig",
    "MatmulMultiCoreReuseMultiCastProgramConfig",
    "MatmulMultiCoreReuseProgramConfig",
    "MemoryConfig",
    "SDPAProgramConfig",
    "ShardOrientation",
    "ShardSpec",
    "ShardStrategy",
    "TensorMemoryLayout",
    "WormholeComputeKernelConfig",
    "create_sharded_memory_config",
    "init_device_compute_kernel_config",
]
