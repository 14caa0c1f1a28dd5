"""Send a tensor from one mesh to another (multi-mesh pipelines), as one collective of the job.

Public names only; the implementation is :mod:`ttjax._src.launch.distributed.p2p`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.launch.distributed.p2p import (
    recv as recv,
    send as send,
)

_publish(globals(), "ttjax._src.launch.distributed.p2p")
