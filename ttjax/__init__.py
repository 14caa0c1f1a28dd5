"""ttjax: Tenstorrent TT-NN's multi-device programming model on JAX.

``import ttjax as ttnn`` and a TT-NN multi-device script runs on a laptop CPU (32 virtual XLA
devices by default), on a GPU host, or across hosts, giving TT-NN's answers:

>>> import ttjax as ttnn
>>> mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
>>> x = ttnn.from_torch(torch.rand(1, 1, 32, 256), device=mesh,
...                     mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
>>> y = ttnn.all_gather(ttnn.gelu(x), dim=3)

Layers, bottom to top (each module imports only from layers below it; ``make lint`` checks this
with the import-linter contract in ``pyproject.toml``, and docs/architecture.md
explains it):

1. ``errors``, ``enums``, ``placements``: the vocabulary; ``_policy`` (thread-local modes).
2. ``_capture`` (trace-capture state), ``_specs``, ``_blockfloat``, ``hardware``, ``_config``,
   ``_hlo``, ``numerics``, ``kernels`` (the Pallas GEMV): state and pure helpers; above them
   ``plan`` (parallelism checks), ``cost`` (the step-time model ``inspect`` predicts with) and
   ``subdevice`` (sub-devices, global semaphores and circular buffers).
3. ``mesh``: ``MeshDevice`` and friends.
4. ``tensor``: ``Tensor`` = data + frozen ``TensorSpec`` (which carries the memory config);
   liveness and host-read helpers. ``cluster``: what system is open (arch, cluster type).
5. ``_dispatch`` (one cached ``shard_map`` per op), ``_host`` (host arrays).
6. ``ops``, ``trace``, ``distribute`` (mappers/composers), ``transforms``.
7. ``ccl``, ``convert`` (host <-> mesh), ``abstract``.
8. ``inspect``, ``visualize``, ``model_preprocessing``, ``experimental``, ``transformer``,
   ``_tensor_methods`` (attaches ``Tensor``'s operators and conversion methods), ``ccl_async``
   (the ``experimental.*_async`` collectives).
9. frontends and training built on the public API (``ttjax.ttml``, ``ttjax.spmd``, ...).
"""

from ttjax import _config

# Must run before JAX starts its backend: XLA reads the host-device count only once.
_config.configure_virtual_devices()

from ttjax import (  # noqa: E402
    _tensor_methods,  # noqa: F401  (attaches Tensor.__add__, .to_torch, ...)
    cluster,
    cost,
    device,
    distributed,
    experimental,
    kernels,
    kv_cache,
    model_preprocessing,
    numerics,
    transformer,
    visualize,
)
from ttjax import ops as _ops  # noqa: E402
from ttjax.abstract import abstract_tensor  # noqa: E402
from ttjax.ccl import (  # noqa: E402
    all_gather,
    all_reduce,
    all_to_all,
    all_to_all_combine,
    all_to_all_dispatch,
    broadcast,
    ccl_lowering,
    mesh_partition,
    point_to_point,
    reduce_scatter,
    shift,
)
from ttjax.ccl_async import fused_rms_1_1_32_8192  # noqa: E402
from ttjax.cluster import (  # noqa: E402
    GetNumAvailableDevices,
    GetNumPCIeDevices,
    get_arch_name,
)
from ttjax.convert import (  # noqa: E402
    aggregate_as_tensor,
    allocate_tensor_on_device,
    allocate_tensor_on_host,
    as_tensor,
    combine_device_tensors,
    copy_device_to_host_tensor,
    copy_host_to_device_tensor,
    dump_tensor,
    from_device,
    from_host_shards,
    from_torch,
    get_device_tensors,
    load_tensor,
    to_device,
    to_dtype,
    to_numpy,
    to_torch,
)
from ttjax.core_config import CONFIG, Config, get_fallback_function, manage_config  # noqa: E402
from ttjax.device import (  # noqa: E402
    CreateDevice,
    DispatchCoreConfig,
    GetDefaultDevice,
    GetPCIeDeviceID,
    ReadDeviceProfiler,
    SetDefaultDevice,
    SystemMeshDescriptor,
    using_distributed_env,
)
from ttjax.distribute import (  # noqa: E402
    ConcatMesh2dToTensor,
    ConcatMeshToTensor,
    CppMeshToTensor,
    CppTensorToMesh,
    MeshComposerConfig,
    MeshMapperConfig,
    MeshToTensor,
    ReplicateTensorToMesh,
    ShardTensor2dMesh,
    ShardTensorToMesh,
    TensorToMesh,
    concat_mesh_to_tensor_composer,
    create_mesh_composer,
    create_mesh_mapper,
    distribute,
    plan_mesh_mapper,
    replicate_tensor_to_mesh_mapper,
    shard_dims,
    shard_tensor_to_mesh_mapper,
)
from ttjax.enums import (  # noqa: E402
    ROW_MAJOR_LAYOUT,
    TILE_LAYOUT,
    TILE_SIZE,
    BcastOpDim,
    BcastOpMath,
    DataType,
    EmbeddingsType,
    Layout,
    MeshType,
    ReduceType,
    StorageType,
    Topology,
    UnaryOpType,
    UnaryWithParam,
    bfloat4_b,
    bfloat8_b,
    bfloat16,
    float32,
    int32,
    uint8,
    uint16,
    uint32,
)
from ttjax.errors import (  # noqa: E402
    CCLError,
    CCLSignatureError,
    ComposerRequiredError,
    ConfigError,
    DeallocatedTensorError,
    DeviceClosedError,
    LayoutError,
    MemoryConfigError,
    MeshMismatchError,
    MeshShapeError,
    ShapeMismatchError,
    ShapeTypeError,
    ShardingError,
    SubDeviceError,
    TraceError,
    TTJaxError,
    UnsupportedDTypeError,
)
from ttjax.fabric import (  # noqa: E402
    FabricConfig,
    FabricReliabilityMode,
    FabricTensixConfig,
    get_fabric_config,
    set_fabric_config,
)
from ttjax.hardware import (  # noqa: E402
    DRAM_MEMORY_CONFIG,
    L1_BLOCK_SHARDED_MEMORY_CONFIG,
    L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    L1_MEMORY_CONFIG,
    L1_WIDTH_SHARDED_MEMORY_CONFIG,
    BlackholeComputeKernelConfig,
    BufferType,
    CoreCoord,
    CoreGrid,
    CoreRange,
    CoreRangeSet,
    DeviceComputeKernelConfig,
    DispatchCoreAxis,
    DispatchCoreType,
    GrayskullComputeKernelConfig,
    LayerNormDefaultProgramConfig,
    LayerNormShardedMultiCoreProgramConfig,
    MathFidelity,
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseProgramConfig,
    MatmulProgramConfig,
    MemoryConfig,
    SDPAProgramConfig,
    ShardOrientation,
    ShardSpec,
    ShardStrategy,
    SoftmaxDefaultProgramConfig,
    SoftmaxShardedMultiCoreProgramConfig,
    TensorMemoryLayout,
    Tile,
    WormholeComputeKernelConfig,
    create_sharded_memory_config,
    create_sharded_memory_config_,
    init_device_compute_kernel_config,
    num_cores_to_corerangeset,
    num_cores_to_corerangeset_in_subcoregrids,
)
from ttjax.mesh import (  # noqa: E402
    GALAXY,
    N300,
    SYSTEMS,
    T3000,
    Arch,
    Device,
    MeshCoordinate,
    MeshCoordinateRange,
    MeshDevice,
    MeshEvent,
    MeshShape,
    close_device,
    close_mesh_device,
    create_mesh_device,
    event_synchronize,
    get_device_ids,
    get_num_devices,
    get_num_pcie_devices,
    get_pcie_device_ids,
    open_device,
    open_mesh_device,
    parse_mesh_shape,
    record_event,
    synchronize_device,
    synchronize_devices,
    system_mesh_shape,
    wait_for_event,
)
from ttjax.ops import *  # noqa: E402,F403
from ttjax.placements import PlacementLocal, PlacementReplicate, PlacementShard  # noqa: E402
from ttjax.subdevice import (  # noqa: E402
    GlobalCircularBuffer,
    GlobalSemaphore,
    SubDevice,
    SubDeviceId,
    SubDeviceManagerId,
    create_global_circular_buffer,
    create_global_semaphore,
    get_global_semaphore_address,
    reset_global_semaphore_value,
)
from ttjax.tensor import Shape, Tensor, TensorTopology  # noqa: E402
from ttjax.trace import (  # noqa: E402
    MeshTraceId,
    begin_trace_capture,
    end_trace_capture,
    execute_trace,
    release_trace,
)
from ttjax.transforms import scan  # noqa: E402
from ttjax.visualize import (  # noqa: E402
    visualize_mesh_device,
    visualize_system_mesh,
    visualize_tensor,
)

# Under ttjax-run, the first device query (open_mesh_device) starts the jax.distributed job.
distributed.install_launcher_hook()


def __getattr__(name: str) -> object:
    # ttjax.inspect is imported lazily so that `python -m ttjax.inspect` runs it fresh.
    if name == "inspect":
        import importlib

        return importlib.import_module("ttjax.inspect")
    raise AttributeError(f"module 'ttjax' has no attribute {name!r}")


def init(num_devices: int = _config.DEFAULT_NUM_DEVICES) -> None:
    """Ask XLA for ``num_devices`` virtual host devices; must run before any JAX computation.

    Raises ``ConfigError`` (with the fix) when JAX already started with another count.
    """
    import jax

    if _config.configure_virtual_devices(num_devices):
        return
    have = len(jax.devices("cpu"))
    if have != num_devices:
        raise ConfigError(
            f"JAX's backend already started with {have} CPU device(s); ttjax.init({num_devices}) "
            "came too late.\nfix: set TTJAX_NUM_DEVICES before starting Python, or call "
            "ttjax.init before any JAX computation."
        )


__all__ = [
    "fused_rms_1_1_32_8192",
    "CONFIG",
    "Config",
    "get_fallback_function",
    "manage_config",
    "DRAM_MEMORY_CONFIG",
    "GALAXY",
    "L1_BLOCK_SHARDED_MEMORY_CONFIG",
    "L1_HEIGHT_SHARDED_MEMORY_CONFIG",
    "L1_MEMORY_CONFIG",
    "L1_WIDTH_SHARDED_MEMORY_CONFIG",
    "N300",
    "ROW_MAJOR_LAYOUT",
    "SYSTEMS",
    "T3000",
    "TILE_LAYOUT",
    "TILE_SIZE",
    "BufferType",
    "CCLError",
    "CCLSignatureError",
    "ComposerRequiredError",
    "ConcatMesh2dToTensor",
    "ConcatMeshToTensor",
    "ConfigError",
    "CoreCoord",
    "CoreGrid",
    "CoreRange",
    "CoreRangeSet",
    "CppMeshToTensor",
    "CppTensorToMesh",
    "DataType",
    "EmbeddingsType",
    "DeviceClosedError",
    "DispatchCoreConfig",
    "GlobalCircularBuffer",
    "Layout",
    "LayoutError",
    "MathFidelity",
    "MatmulMultiCoreReuseMultiCast1DProgramConfig",
    "MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig",
    "MatmulMultiCoreReuseMultiCastProgramConfig",
    "MatmulMultiCoreReuseProgramConfig",
    "MatmulProgramConfig",
    "MemoryConfig",
    "MeshComposerConfig",
    "MeshCoordinate",
    "MeshCoordinateRange",
    "MeshDevice",
    "MeshMapperConfig",
    "MeshMismatchError",
    "MeshShape",
    "MeshShapeError",
    "MeshToTensor",
    "MeshTraceId",
    "MeshType",
    "PlacementLocal",
    "PlacementReplicate",
    "PlacementShard",
    "ReduceType",
    "ReplicateTensorToMesh",
    "SDPAProgramConfig",
    "Shape",
    "ShapeMismatchError",
    "ShapeTypeError",
    "ShardOrientation",
    "ShardSpec",
    "ShardStrategy",
    "ShardTensor2dMesh",
    "ShardTensorToMesh",
    "ShardingError",
    "StorageType",
    "SubDevice",
    "SubDeviceError",
    "SubDeviceId",
    "SubDeviceManagerId",
    "TTJaxError",
    "Tensor",
    "TensorMemoryLayout",
    "Tile",
    "TensorToMesh",
    "TensorTopology",
    "Topology",
    "TraceError",
    "UnsupportedDTypeError",
    "GlobalSemaphore",
    "WormholeComputeKernelConfig",
    "abstract_tensor",
    "aggregate_as_tensor",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "all_to_all_combine",
    "all_to_all_dispatch",
    "broadcast",
    "ccl_lowering",
    "create_global_circular_buffer",
    "create_global_semaphore",
    "get_global_semaphore_address",
    "mesh_partition",
    "point_to_point",
    "reduce_scatter",
    "reset_global_semaphore_value",
    "shift",
    "allocate_tensor_on_device",
    "allocate_tensor_on_host",
    "as_tensor",
    "bfloat4_b",
    "bfloat8_b",
    "begin_trace_capture",
    "bfloat16",
    "close_device",
    "close_mesh_device",
    "combine_device_tensors",
    "concat_mesh_to_tensor_composer",
    "copy_device_to_host_tensor",
    "copy_host_to_device_tensor",
    "create_mesh_composer",
    "create_mesh_device",
    "create_mesh_mapper",
    "create_sharded_memory_config",
    "create_sharded_memory_config_",
    "distribute",
    "distributed",
    "end_trace_capture",
    "execute_trace",
    "experimental",
    "float32",
    "from_device",
    "to_dtype",
    "from_host_shards",
    "from_torch",
    "get_device_ids",
    "get_device_tensors",
    "get_num_devices",
    "get_num_pcie_devices",
    "get_pcie_device_ids",
    "init",
    "init_device_compute_kernel_config",
    "int32",
    "kernels",
    "kv_cache",
    "model_preprocessing",
    "numerics",
    "open_device",
    "open_mesh_device",
    "parse_mesh_shape",
    "release_trace",
    "plan_mesh_mapper",
    "replicate_tensor_to_mesh_mapper",
    "scan",
    "shard_dims",
    "shard_tensor_to_mesh_mapper",
    "synchronize_device",
    "synchronize_devices",
    "system_mesh_shape",
    "to_device",
    "to_numpy",
    "to_torch",
    "transformer",
    "uint8",
    "uint16",
    "uint32",
    "visualize",
    "visualize_mesh_device",
    "visualize_system_mesh",
    "visualize_tensor",
    "Arch",
    "Device",
    "DeviceComputeKernelConfig",
    "DispatchCoreAxis",
    "DispatchCoreType",
    "dump_tensor",
    "load_tensor",
    "cluster",
    "cost",
    "device",
    "FabricConfig",
    "FabricReliabilityMode",
    "FabricTensixConfig",
    "GetDefaultDevice",
    "ReadDeviceProfiler",
    "SetDefaultDevice",
    "CreateDevice",
    "GetPCIeDeviceID",
    "SystemMeshDescriptor",
    "get_fabric_config",
    "set_fabric_config",
    "using_distributed_env",
    "GetNumAvailableDevices",
    "GetNumPCIeDevices",
    "get_arch_name",
    "UnaryOpType",
    "UnaryWithParam",
    "BcastOpDim",
    "BcastOpMath",
    "DeallocatedTensorError",
    "MemoryConfigError",
    "BlackholeComputeKernelConfig",
    "GrayskullComputeKernelConfig",
    "LayerNormDefaultProgramConfig",
    "LayerNormShardedMultiCoreProgramConfig",
    "SoftmaxDefaultProgramConfig",
    "SoftmaxShardedMultiCoreProgramConfig",
    "num_cores_to_corerangeset",
    "num_cores_to_corerangeset_in_subcoregrids",
    "MeshEvent",
    "event_synchronize",
    "record_event",
    "wait_for_event",
    *_ops.__all__,
]
