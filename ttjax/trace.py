"""TT-NN trace capture and replay on top of ``jax.jit``.

Between ``begin_trace_capture`` and ``end_trace_capture`` every op dispatched to the mesh (or its
submeshes) is recorded. Ending the capture compiles the recorded op graph into one XLA program
per mesh (ahead of time, with a frozen signature); ``execute_trace`` runs it over the *same*
persistent input tensors and writes the results into the *same* output tensor objects, as TT-NN
does. Inputs are refreshed between replays with ``copy_host_to_device_tensor``. Work captured on
several submeshes (hybrid DP+TP) is replayed by one ``execute_trace``: each submesh's program is
dispatched without waiting, so the submeshes run concurrently.

>>> x = ttnn.from_torch(torch.zeros(1, 32), device=mesh)
>>> tid = ttnn.begin_trace_capture(mesh, cq_id=0)
>>> out = ttnn.add(x, 1.0)               # recorded (and run once)
>>> ttnn.end_trace_capture(mesh, tid, cq_id=0)
>>> ttnn.copy_host_to_device_tensor(ttnn.from_torch(torch.ones(1, 32)), x)
>>> ttnn.execute_trace(mesh, tid, cq_id=0, blocking=True)   # `out` now holds the new result
>>> float(ttnn.to_torch(ttnn.get_device_tensors(out)[0]).max())
2.0

Public names only; the implementation is :mod:`ttjax._src.ttnn.trace`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.trace import (
    MeshTraceId as MeshTraceId,
    begin_trace_capture as begin_trace_capture,
    compiled_programs as compiled_programs,
    end_trace_capture as end_trace_capture,
    execute_trace as execute_trace,
    fuse_all_reduces as fuse_all_reduces,
    release_trace as release_trace,
    trace_info as trace_info,
    trace_programs as trace_programs,
)

_publish(globals(), "ttjax._src.ttnn.trace")
