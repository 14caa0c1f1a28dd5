"""ttjax's exceptions: one class per kind of mistake, each also a builtin so ``except ValueError`` works.

The implementation of :mod:`ttjax.errors`, whose docstring says more.
"""

from __future__ import annotations


class TTJaxError(RuntimeError):
    """Base class of every error ttjax raises on purpose."""


class ConfigError(TTJaxError, ValueError):
    """A bad environment variable or configuration value."""


class MeshShapeError(TTJaxError, ValueError):
    """A mesh shape that is malformed or does not fit the available devices."""


class MeshMismatchError(TTJaxError, ValueError):
    """Tensors (or a tensor and a mapper) that live on different meshes were combined."""


class ShardingError(TTJaxError, ValueError):
    """A mapper, composer or placement that cannot apply to this tensor."""


class ComposerRequiredError(TTJaxError):
    """A multi-device tensor was read back without a mesh composer."""


class ShapeMismatchError(TTJaxError, ValueError):
    """Per-device shapes that an op cannot combine."""


class ShapeTypeError(ShapeMismatchError, TypeError):
    """A ``ttnn.Shape`` built from something other than ints (a ``TypeError``, as TT-NN's
    binding raises for ``ttnn.Shape([None])``)."""


class TensorIndexError(ShapeMismatchError, IndexError):
    """An integer index out of a tensor's range (an ``IndexError``, as TT-NN's ``__getitem__``
    raises, so ``for row in tensor`` and ``zip(tensor, ...)`` stop at the end)."""


class UnsupportedDTypeError(TTJaxError, TypeError):
    """A dtype ttjax (like TT-NN) does not support, or a dtype/layout pair it forbids."""


class LayoutError(TTJaxError, ValueError):
    """A layout that the dtype or op forbids."""


class CCLError(TTJaxError, ValueError):
    """Bad arguments to a collective."""


class CCLSignatureError(CCLError, TypeError):
    """A collective called with arguments that match none of TT-NN's overloads (pybind's TypeError)."""


class SubDeviceError(TTJaxError, ValueError):
    """A sub-device, sub-device manager, global semaphore or global circular buffer used wrongly."""


class TraceError(TTJaxError):
    """A trace was used in a state that does not allow it (released, not captured, host I/O, ...)."""


class DeviceClosedError(TTJaxError):
    """A tensor or op uses a mesh device that was closed."""


class ParallelPlanError(ConfigError):
    """Parallelism roles that do not fit the mesh, the batch or a parameter's shape."""


class MemoryConfigError(TTJaxError, ValueError):
    """A memory config (sharded layout, shard spec, core grid) that does not fit the tensor."""


class DeallocatedTensorError(TTJaxError):
    """A tensor was used after ``ttnn.deallocate`` freed its buffers."""


class CheckpointError(TTJaxError, OSError):
    """No checkpoint to resume from: none written yet, or none whose bytes verify."""


class CheckpointMismatchError(TTJaxError, ValueError):
    """A checkpoint whose parameters (paths, shapes, dtypes) differ from the model restoring it."""


class MissingDependencyError(TTJaxError, ImportError):
    """An optional dependency (matplotlib) that a ttjax feature needs is not installed."""


class MeshGraphDescriptorError(ConfigError):
    """A mesh graph descriptor (MGD) that is missing, malformed or cannot be chosen."""


class TopologyMismatchError(MeshShapeError):
    """A ``mesh_shape`` that the descriptor's ``device_topology`` does not accept."""


__all__ = [
    "CCLError",
    "CCLSignatureError",
    "CheckpointError",
    "CheckpointMismatchError",
    "ComposerRequiredError",
    "ConfigError",
    "DeallocatedTensorError",
    "DeviceClosedError",
    "LayoutError",
    "MemoryConfigError",
    "MeshGraphDescriptorError",
    "MeshMismatchError",
    "MeshShapeError",
    "MissingDependencyError",
    "ParallelPlanError",
    "ShapeMismatchError",
    "ShapeTypeError",
    "ShardingError",
    "SubDeviceError",
    "TTJaxError",
    "TensorIndexError",
    "TopologyMismatchError",
    "TraceError",
    "UnsupportedDTypeError",
]
