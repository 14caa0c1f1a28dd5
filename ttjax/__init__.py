"""ttjax: Tenstorrent TT-NN's multi-device programming model on JAX.

``import ttjax as ttnn`` and a TT-NN multi-device script runs on a laptop CPU (32 virtual XLA
devices by default), on a GPU host, or across hosts, giving TT-NN's answers:

>>> import ttjax as ttnn
>>> mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
>>> x = ttnn.from_torch(torch.rand(1, 1, 32, 256), device=mesh,
...                     mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3))
>>> y = ttnn.all_gather(ttnn.gelu(x), dim=3)

The code lives under ``ttjax/_src/``, one sub-package per layer (``core`` < ``ttnn`` < ``tools``,
``launch``); each public module (``ttjax.mesh``, ``ttjax.experimental``, ...) re-exports its
names, and this package re-exports TT-NN's. ``make lint`` checks the layers with the
import-linter contracts in ``pyproject.toml``; docs/architecture.md shows them.
"""

# ruff: noqa: E402  (the imports below follow configure_virtual_devices, which must run first)

from ttjax._src.core import config as _config

# Must run before JAX starts its backend: XLA reads the host-device count only once.
_config.configure_virtual_devices()

from ttjax import (
    abstract as abstract,
    ccl as ccl,
    ccl_async as ccl_async,
    cluster as cluster,
    conv as conv,
    convert as convert,
    core_config as core_config,
    cost as cost,
    device as device,
    distributed as distributed,
    dot_access as dot_access,
    enums as enums,
    errors as errors,
    experimental as experimental,
    fabric as fabric,
    hardware as hardware,
    kernels as kernels,
    kv_cache as kv_cache,
    mesh as mesh,
    mgd as mgd,
    model_preprocessing as model_preprocessing,
    numerics as numerics,
    ops as ops,
    placements as placements,
    plan as plan,
    subdevice as subdevice,
    tensor as tensor,
    trace as trace,
    transformer as transformer,
    transforms as transforms,
    visualize as visualize,
)
from ttjax._src.core.reexport import public_names as _public_names
from ttjax._src.ttnn import tensor_methods as _tensor_methods  # noqa: F401  (Tensor.__add__, ...)
from ttjax.abstract import abstract_tensor as abstract_tensor
from ttjax.ccl import (
    all_gather as all_gather,
    all_reduce as all_reduce,
    all_to_all as all_to_all,
    all_to_all_combine as all_to_all_combine,
    all_to_all_dispatch as all_to_all_dispatch,
    broadcast as broadcast,
    ccl_lowering as ccl_lowering,
    mesh_partition as mesh_partition,
    point_to_point as point_to_point,
    reduce_scatter as reduce_scatter,
    shift as shift,
)
from ttjax.ccl_async import fused_rms_1_1_32_8192 as fused_rms_1_1_32_8192
from ttjax.cluster import (
    GetNumAvailableDevices as GetNumAvailableDevices,
    GetNumPCIeDevices as GetNumPCIeDevices,
    get_arch_name as get_arch_name,
)
from ttjax.conv import (
    Conv1dConfig as Conv1dConfig,
    Conv2dConfig as Conv2dConfig,
    Conv2dDRAMSliceHeight as Conv2dDRAMSliceHeight,
    Conv2dDRAMSliceWidth as Conv2dDRAMSliceWidth,
    Conv2dL1Full as Conv2dL1Full,
    Conv2dL1FullSliceConfig as Conv2dL1FullSliceConfig,
    Conv2dSliceConfig as Conv2dSliceConfig,
    Conv3dConfig as Conv3dConfig,
    adaptive_avg_pool2d as adaptive_avg_pool2d,
    adaptive_max_pool2d as adaptive_max_pool2d,
    conv1d as conv1d,
    conv2d as conv2d,
    conv_transpose2d as conv_transpose2d,
    get_conv_output_dim as get_conv_output_dim,
    global_avg_pool2d as global_avg_pool2d,
    max_pool2d as max_pool2d,
    prepare_conv_bias as prepare_conv_bias,
    prepare_conv_weights as prepare_conv_weights,
    upsample as upsample,
)
from ttjax.convert import (
    aggregate_as_tensor as aggregate_as_tensor,
    allocate_tensor_on_device as allocate_tensor_on_device,
    allocate_tensor_on_host as allocate_tensor_on_host,
    as_tensor as as_tensor,
    combine_device_tensors as combine_device_tensors,
    copy_device_to_host_tensor as copy_device_to_host_tensor,
    copy_host_to_device_tensor as copy_host_to_device_tensor,
    dump_tensor as dump_tensor,
    from_device as from_device,
    from_host_shards as from_host_shards,
    from_torch as from_torch,
    get_device_tensors as get_device_tensors,
    load_tensor as load_tensor,
    to_device as to_device,
    to_dtype as to_dtype,
    to_numpy as to_numpy,
    to_torch as to_torch,
)
from ttjax.core_config import (
    CONFIG as CONFIG,
    Config as Config,
    get_fallback_function as get_fallback_function,
    manage_config as manage_config,
)
from ttjax.device import (
    CreateDevice as CreateDevice,
    DispatchCoreConfig as DispatchCoreConfig,
    GetDefaultDevice as GetDefaultDevice,
    GetPCIeDeviceID as GetPCIeDeviceID,
    ReadDeviceProfiler as ReadDeviceProfiler,
    SetDefaultDevice as SetDefaultDevice,
    SystemMeshDescriptor as SystemMeshDescriptor,
    using_distributed_env as using_distributed_env,
)
from ttjax.distribute import (
    ConcatMesh2dToTensor as ConcatMesh2dToTensor,
    ConcatMeshToTensor as ConcatMeshToTensor,
    CppMeshToTensor as CppMeshToTensor,
    CppTensorToMesh as CppTensorToMesh,
    MeshComposerConfig as MeshComposerConfig,
    MeshMapperConfig as MeshMapperConfig,
    MeshToTensor as MeshToTensor,
    ReplicateTensorToMesh as ReplicateTensorToMesh,
    ShardTensor2dMesh as ShardTensor2dMesh,
    ShardTensorToMesh as ShardTensorToMesh,
    TensorToMesh as TensorToMesh,
    concat_mesh_to_tensor_composer as concat_mesh_to_tensor_composer,
    create_mesh_composer as create_mesh_composer,
    create_mesh_mapper as create_mesh_mapper,
    distribute as distribute,
    plan_mesh_mapper as plan_mesh_mapper,
    replicate_tensor_to_mesh_mapper as replicate_tensor_to_mesh_mapper,
    shard_dims as shard_dims,
    shard_tensor_to_mesh_mapper as shard_tensor_to_mesh_mapper,
)
from ttjax.enums import (
    ROW_MAJOR_LAYOUT as ROW_MAJOR_LAYOUT,
    TILE_LAYOUT as TILE_LAYOUT,
    TILE_SIZE as TILE_SIZE,
    BcastOpDim as BcastOpDim,
    BcastOpMath as BcastOpMath,
    DataType as DataType,
    EmbeddingsType as EmbeddingsType,
    Layout as Layout,
    MeshType as MeshType,
    ReduceType as ReduceType,
    StorageType as StorageType,
    Topology as Topology,
    UnaryOpType as UnaryOpType,
    UnaryWithParam as UnaryWithParam,
    bfloat4_b as bfloat4_b,
    bfloat8_b as bfloat8_b,
    bfloat16 as bfloat16,
    float32 as float32,
    int32 as int32,
    uint8 as uint8,
    uint16 as uint16,
    uint32 as uint32,
)
from ttjax.errors import (
    CCLError as CCLError,
    CCLSignatureError as CCLSignatureError,
    ComposerRequiredError as ComposerRequiredError,
    ConfigError as ConfigError,
    DeallocatedTensorError as DeallocatedTensorError,
    DeviceClosedError as DeviceClosedError,
    LayoutError as LayoutError,
    MemoryConfigError as MemoryConfigError,
    MeshMismatchError as MeshMismatchError,
    MeshShapeError as MeshShapeError,
    ShapeMismatchError as ShapeMismatchError,
    ShapeTypeError as ShapeTypeError,
    ShardingError as ShardingError,
    SubDeviceError as SubDeviceError,
    TraceError as TraceError,
    TTJaxError as TTJaxError,
    UnsupportedDTypeError as UnsupportedDTypeError,
)
from ttjax.fabric import (
    FabricConfig as FabricConfig,
    FabricReliabilityMode as FabricReliabilityMode,
    FabricTensixConfig as FabricTensixConfig,
    get_fabric_config as get_fabric_config,
    set_fabric_config as set_fabric_config,
)
from ttjax.hardware import (
    DRAM_MEMORY_CONFIG as DRAM_MEMORY_CONFIG,
    L1_BLOCK_SHARDED_MEMORY_CONFIG as L1_BLOCK_SHARDED_MEMORY_CONFIG,
    L1_HEIGHT_SHARDED_MEMORY_CONFIG as L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    L1_MEMORY_CONFIG as L1_MEMORY_CONFIG,
    L1_WIDTH_SHARDED_MEMORY_CONFIG as L1_WIDTH_SHARDED_MEMORY_CONFIG,
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
    create_sharded_memory_config as create_sharded_memory_config,
    create_sharded_memory_config_ as create_sharded_memory_config_,
    init_device_compute_kernel_config as init_device_compute_kernel_config,
    num_cores_to_corerangeset as num_cores_to_corerangeset,
    num_cores_to_corerangeset_in_subcoregrids as num_cores_to_corerangeset_in_subcoregrids,
)
from ttjax.mesh import (
    GALAXY as GALAXY,
    N300 as N300,
    SYSTEMS as SYSTEMS,
    T3000 as T3000,
    Arch as Arch,
    Device as Device,
    MeshCoordinate as MeshCoordinate,
    MeshCoordinateRange as MeshCoordinateRange,
    MeshDevice as MeshDevice,
    MeshEvent as MeshEvent,
    MeshShape as MeshShape,
    close_device as close_device,
    close_mesh_device as close_mesh_device,
    create_mesh_device as create_mesh_device,
    event_synchronize as event_synchronize,
    get_device_ids as get_device_ids,
    get_num_devices as get_num_devices,
    get_num_pcie_devices as get_num_pcie_devices,
    get_pcie_device_ids as get_pcie_device_ids,
    open_device as open_device,
    open_mesh_device as open_mesh_device,
    parse_mesh_shape as parse_mesh_shape,
    record_event as record_event,
    synchronize_device as synchronize_device,
    synchronize_devices as synchronize_devices,
    system_mesh_shape as system_mesh_shape,
    wait_for_event as wait_for_event,
)
from ttjax.ops import *  # noqa: F403
from ttjax.ops.normalization import (
    dram_group_norm_params_from_torch as dram_group_norm_params_from_torch,
)
from ttjax.placements import (
    PlacementLocal as PlacementLocal,
    PlacementReplicate as PlacementReplicate,
    PlacementShard as PlacementShard,
)
from ttjax.subdevice import (
    GlobalCircularBuffer as GlobalCircularBuffer,
    GlobalSemaphore as GlobalSemaphore,
    SubDevice as SubDevice,
    SubDeviceId as SubDeviceId,
    SubDeviceManagerId as SubDeviceManagerId,
    create_global_circular_buffer as create_global_circular_buffer,
    create_global_semaphore as create_global_semaphore,
    get_global_semaphore_address as get_global_semaphore_address,
    reset_global_semaphore_value as reset_global_semaphore_value,
)
from ttjax.tensor import Shape as Shape, Tensor as Tensor, TensorTopology as TensorTopology
from ttjax.trace import (
    MeshTraceId as MeshTraceId,
    begin_trace_capture as begin_trace_capture,
    end_trace_capture as end_trace_capture,
    execute_trace as execute_trace,
    release_trace as release_trace,
)
from ttjax.transforms import scan as scan
from ttjax.visualize import (
    visualize_mesh_device as visualize_mesh_device,
    visualize_system_mesh as visualize_system_mesh,
    visualize_tensor as visualize_tensor,
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


# ``from ttjax import *`` takes every public name and these submodules (TT-NN's namespaces, tools).
__all__ = _public_names(
    globals(),
    submodules=(
        "cluster",
        "cost",
        "device",
        "distributed",
        "experimental",
        "kernels",
        "kv_cache",
        "model_preprocessing",
        "numerics",
        "transformer",
        "visualize",
    ),
)
