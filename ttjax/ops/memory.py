"""Memory-config ops: to_memory_config, interleaved <-> sharded (and their ``_partial`` slices),
deallocate.

A tensor carries its TT-NN memory config (``t.memory_config()``); these ops change it (the values
never change: XLA decides where buffers live) after validating sharded configs against the
tensor's per-device padded shape, as TT-NN does. The ``_partial`` forms move one of
``num_slices`` row slices, as TT-NN's ``sharded_partial`` ops do.

>>> y = ttnn.to_memory_config(x, ttnn.L1_MEMORY_CONFIG, dtype=ttnn.bfloat16)
>>> y.memory_config() == ttnn.L1_MEMORY_CONFIG
True

Public names only; the implementation is :mod:`ttjax._src.ttnn.ops.memory`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.ops.memory import (
    deallocate as deallocate,
    dram_prefetcher as dram_prefetcher,
    get_memory_config as get_memory_config,
    interleaved_to_sharded as interleaved_to_sharded,
    interleaved_to_sharded_partial as interleaved_to_sharded_partial,
    is_sharded as is_sharded,
    is_tensor_storage_on_device as is_tensor_storage_on_device,
    move as move,
    reallocate as reallocate,
    reshard as reshard,
    sharded_to_interleaved as sharded_to_interleaved,
    sharded_to_interleaved_partial as sharded_to_interleaved_partial,
    to_memory_config as to_memory_config,
)

_publish(globals(), "ttjax._src.ttnn.ops.memory")
