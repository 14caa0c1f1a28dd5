"""TT-NN trace capture and replay on top of ``jax.jit``.

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
