"""Send a tensor from one mesh to another (multi-mesh pipelines), as one collective of the job.

The sender's and the receiver's ranks both run one jitted program over the union of the two
meshes: a ``lax.ppermute`` along a pair axis (stage 0 -> stage 1), which JAX lowers to a
collective-permute between the processes (gloo on CPU, NCCL on GPU). TT-NN's multi-mesh
``send_async``/``recv_async`` over a mesh socket play this role on hardware.

>>> ttjax.distributed.send(activation, to_mesh=1)                  # on the stage-0 rank
>>> x = ttjax.distributed.recv(template, from_mesh=0)              # on the stage-1 rank

Public names only; the implementation is :mod:`ttjax._src.launch.distributed.p2p`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.launch.distributed.p2p import (
    recv as recv,
    send as send,
)

_publish(globals(), "ttjax._src.launch.distributed.p2p")
