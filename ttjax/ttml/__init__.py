"""``ttjax.ttml``: TTML (tt-train)'s training workflow on JAX, with TTML's names.

>>> from ttjax import ttml
>>> ctx = ttml.autograd.AutoContext.get_instance()
>>> ctx.open_device([2, 4])
>>> ctx.initialize_parallelism_context(ttml.DistributedConfig(enable_ddp=True, enable_tp=True))
"""

from ttjax.ttml import autograd, config, context, core, errors, mgd, modules, ops
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.config import (
    DeviceConfig,
    EvalConfig,
    MultihostConfig,
    OptimizerConfig,
    PipelineParallelConfig,
    RopeScalingConfig,
    RunConfig,
    SchedulerConfig,
    TrainingConfig,
    TransformerConfig,
    load_config,
    load_model_config,
    validate_batch,
)
from ttjax.ttml.context import DistributedConfig, ParallelismContext
from ttjax.ttml.errors import (
    AutoContextError,
    MeshGraphDescriptorError,
    ParallelismConfigError,
    ParallelismContextError,
    TopologyMismatchError,
    TrainingConfigError,
)
from ttjax.ttml.mgd import MeshGraphDescriptor, load_mesh_graph_descriptor
from ttjax.ttml.modules import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding

__all__ = [
    "AutoContext",
    "AutoContextError",
    "ColumnParallelLinear",
    "DeviceConfig",
    "DistributedConfig",
    "EvalConfig",
    "MeshGraphDescriptor",
    "MeshGraphDescriptorError",
    "MultihostConfig",
    "OptimizerConfig",
    "ParallelismConfigError",
    "ParallelismContext",
    "ParallelismContextError",
    "PipelineParallelConfig",
    "RopeScalingConfig",
    "RowParallelLinear",
    "RunConfig",
    "SchedulerConfig",
    "TopologyMismatchError",
    "TrainingConfig",
    "TrainingConfigError",
    "TransformerConfig",
    "VocabParallelEmbedding",
    "autograd",
    "config",
    "context",
    "core",
    "errors",
    "load_config",
    "load_mesh_graph_descriptor",
    "load_model_config",
    "mgd",
    "modules",
    "ops",
    "validate_batch",
]
