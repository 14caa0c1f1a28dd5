"""ttjax's exceptions: one class per kind of mistake, each also a builtin so ``except ValueError`` works.

Every message names the bad value and ends with a ``fix:`` line. Like TT-NN's ``TT_FATAL``
(which Python sees as ``RuntimeError``), every ttjax error is a ``RuntimeError`` too.

Public names only; the implementation is :mod:`ttjax._src.core.errors`.
"""

from ttjax._src.core.errors import (
    CCLError as CCLError,
    CCLSignatureError as CCLSignatureError,
    CheckpointError as CheckpointError,
    CheckpointMismatchError as CheckpointMismatchError,
    ComposerRequiredError as ComposerRequiredError,
    ConfigError as ConfigError,
    DeallocatedTensorError as DeallocatedTensorError,
    DeviceClosedError as DeviceClosedError,
    LayoutError as LayoutError,
    MemoryConfigError as MemoryConfigError,
    MeshGraphDescriptorError as MeshGraphDescriptorError,
    MeshMismatchError as MeshMismatchError,
    MeshShapeError as MeshShapeError,
    MissingDependencyError as MissingDependencyError,
    ParallelPlanError as ParallelPlanError,
    ShapeMismatchError as ShapeMismatchError,
    ShapeTypeError as ShapeTypeError,
    ShardingError as ShardingError,
    SubDeviceError as SubDeviceError,
    TensorIndexError as TensorIndexError,
    TopologyMismatchError as TopologyMismatchError,
    TraceError as TraceError,
    TTJaxError as TTJaxError,
    UnsupportedDTypeError as UnsupportedDTypeError,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.errors")
