"""TT-NN's hardware knobs (memory configs, core grids, compute-kernel and program configs) and
the Wormhole systems' published figures that ``ttjax.cost`` predicts step times with.

Public names only; the implementation is :mod:`ttjax._src.core.hardware` and
:mod:`ttjax._src.core.systems`.
"""

from ttjax._src.core.hardware import (
    DRAM_MEMORY_CONFIG as DRAM_MEMORY_CONFIG,
    L1_BLOCK_SHARDED_MEMORY_CONFIG as L1_BLOCK_SHARDED_MEMORY_CONFIG,
    L1_HEIGHT_SHARDED_MEMORY_CONFIG as L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    L1_MEMORY_CONFIG as L1_MEMORY_CONFIG,
    L1_WIDTH_SHARDED_MEMORY_CONFIG as L1_WIDTH_SHARDED_MEMORY_CONFIG,
    TILE_FACE_SHAPES as TILE_FACE_SHAPES,
    BlackholeComputeKernelConfig as BlackholeComputeKernelConfig,
    BufferType as BufferType,
    CoreCoord as CoreCoord,
    CoreGrid as CoreGrid,
    CoreRange as CoreRange,
    CoreRangeSet as CoreRangeSet,
    DeviceComputeKernelConfig as DeviceComputeKernelConfig,
    DispatchCoreAxis as DispatchCoreAxis,
    DispatchCoreType as DispatchCoreType,
    GrayskullComputeKernelConfig as GrayskullComputeKernelConfig,
    LayerNormDefaultProgramConfig as LayerNormDefaultProgramConfig,
    LayerNormShardedMultiCoreProgramConfig as LayerNormShardedMultiCoreProgramConfig,
    MathFidelity as MathFidelity,
    MatmulMultiCoreReuseMultiCast1DProgramConfig as MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig as MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig as MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseProgramConfig as MatmulMultiCoreReuseProgramConfig,
    MatmulProgramConfig as MatmulProgramConfig,
    MemoryConfig as MemoryConfig,
    SDPAProgramConfig as SDPAProgramConfig,
    ShardOrientation as ShardOrientation,
    ShardSpec as ShardSpec,
    ShardStrategy as ShardStrategy,
    SoftmaxDefaultProgramConfig as SoftmaxDefaultProgramConfig,
    SoftmaxShardedMultiCoreProgramConfig as SoftmaxShardedMultiCoreProgramConfig,
    TensorMemoryLayout as TensorMemoryLayout,
    Tile as Tile,
    WormholeComputeKernelConfig as WormholeComputeKernelConfig,
    as_tile as as_tile,
    create_sharded_memory_config as create_sharded_memory_config,
    create_sharded_memory_config_ as create_sharded_memory_config_,
    divup as divup,
    init_device_compute_kernel_config as init_device_compute_kernel_config,
    num_cores_to_corerangeset as num_cores_to_corerangeset,
    num_cores_to_corerangeset_in_subcoregrids as num_cores_to_corerangeset_in_subcoregrids,
    roundup as roundup,
    validate_memory_config as validate_memory_config,
    worker_grid_size as worker_grid_size,
)
from ttjax._src.core.reexport import publish as _publish
from ttjax._src.core.systems import (
    ETHERNET_HOP_SECONDS as ETHERNET_HOP_SECONDS,
    ETHERNET_LINK_BANDWIDTH as ETHERNET_LINK_BANDWIDTH,
    FIDELITY_PASSES as FIDELITY_PASSES,
    SYSTEMS as SYSTEMS,
    WORMHOLE_CLOCK_HZ as WORMHOLE_CLOCK_HZ,
    WORMHOLE_COMPUTE_CORES as WORMHOLE_COMPUTE_CORES,
    WORMHOLE_DRAM_BANDWIDTH as WORMHOLE_DRAM_BANDWIDTH,
    WORMHOLE_DRAM_BYTES as WORMHOLE_DRAM_BYTES,
    WORMHOLE_DRAM_MEASURED as WORMHOLE_DRAM_MEASURED,
    WORMHOLE_TENSIX_FLOPS_PER_CYCLE as WORMHOLE_TENSIX_FLOPS_PER_CYCLE,
    System as System,
    get_system as get_system,
    tensix_flops as tensix_flops,
)

_publish(globals(), "ttjax._src.core.hardware", "ttjax._src.core.systems")
