"""Host <-> mesh conversion: from_torch, to_torch, to_device, from_device, per-device views.

``from_torch`` accepts torch tensors (when torch is installed), numpy arrays and JAX arrays. A
mapper turns the host tensor into placements; the host array then *is* the global array and is
placed one device block at a time (each block cast, or block-float encoded, on its own: the host
never holds a second full-size copy). ``to_torch``/``to_numpy`` need a composer whenever the tensor
has more than one shard, exactly like TT-NN.

Public names only; the implementation is :mod:`ttjax._src.ttnn.convert`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.convert import (
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
    host_to_layout as host_to_layout,
    load_tensor as load_tensor,
    to_device as to_device,
    to_dtype as to_dtype,
    to_numpy as to_numpy,
    to_torch as to_torch,
)

_publish(globals(), "ttjax._src.ttnn.convert")
