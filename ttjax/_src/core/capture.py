"""Trace-capture state: which recorder (if any) is taking down the ops dispatched right now.

``ttjax.trace`` opens and closes a capture; the dispatcher and ``Tensor.assign`` report to the
open one. Only one capture is open at a time, as in TT-NN.

>>> from ttjax._src.core import capture as _capture
>>> _capture.current() is None
True
"""

from __future__ import annotations

from typing import Any

from ttjax._src.core.errors import TraceError

_recorder: Any = None


def begin(recorder: Any) -> None:
    """Make ``recorder`` the open capture (it gets ``record(...)`` and ``alias(...)`` calls)."""
    global _recorder
    if _recorder is not None:
        raise TraceError(
            f"begin_trace_capture: trace {_recorder.id!r} is still being captured.\n"
            "fix: call end_trace_capture for it first."
        )
    _recorder = recorder


def end() -> None:
    """Close the open capture (a no-op when none is open)."""
    global _recorder
    _recorder = None


def current() -> Any:
    """The open capture's recorder, or None."""
    return _recorder


def active() -> bool:
    """Whether a trace capture is open."""
    return _recorder is not None


def forbid_host_io(kind: str) -> None:
    """Host reads and writes cannot be replayed by a trace: refuse them while capturing."""
    tr = _recorder
    if tr is None or getattr(tr, "allows_host_io", False):  # a recorder that only observes
        return
    earlier = getattr(tr, "error", None)
    if earlier is not None:
        first = str(earlier).splitlines()[0] if str(earlier) else ""
        note = (
            f" Trace {tr.id!r} is still being captured: an earlier error interrupted it "
            f"({type(earlier).__name__}: {first}; shown above)."
        )
    else:
        note = f" Trace {tr.id!r} is still being captured."
    raise TraceError(
        f"{kind} are not supported during trace capture.{note}\n"
        "fix: move host reads/writes out of the begin_trace_capture/end_trace_capture block; "
        "refresh trace inputs with ttnn.copy_host_to_device_tensor between replays; after an "
        "error, ttnn.release_trace(mesh, trace_id) closes the capture."
    ) from earlier


__all__ = ["active", "begin", "current", "end", "forbid_host_io"]
