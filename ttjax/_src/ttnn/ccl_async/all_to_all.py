"""``all_to_all_async``: TT-NN's persistent-buffer all-to-all over the whole mesh, on
:func:`ttjax.all_to_all`'s values."""

from __future__ import annotations

from typing import Any

from ttjax._src.core.enums import Layout, Topology
from ttjax._src.core.errors import CCLError
from ttjax._src.core.hardware import BufferType
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ccl_async.checks import _check_common, _check_group, _check_link_rows, _write
from ttjax._src.ttnn.ccl_async.resolve import _overload, _resolve


def _a2a(
    input_tensor,
    persistent_intermediate_buffer,
    persistent_output_buffer,
    in_dim,
    out_dim,
    multi_device_global_semaphore,
    *,
    num_links=1,
    memory_config=None,
    topology=Topology.Ring,
    subdevice_id=None,
): ...


_A2A = (
    _overload(
        _a2a,
        input_tensor="Tensor",
        persistent_intermediate_buffer="Tensor",
        persistent_output_buffer="Tensor",
        in_dim="int",
        out_dim="int",
        multi_device_global_semaphore="sem",
        num_links="uint",
        memory_config="mem?",
        topology="topo",
        subdevice_id="subdev?",
    ),
)


def all_to_all_async(*args: Any, **kwargs: Any) -> Tensor:
    """TT-NN's ``ttnn.experimental.all_to_all_async`` over the whole mesh.

    ``(input_tensor, persistent_intermediate_buffer, persistent_output_buffer, in_dim, out_dim,
    multi_device_global_semaphore, *, num_links=1, memory_config=None, topology=Ring,
    subdevice_id=None)``; the result is written into ``persistent_output_buffer``.
    """
    op = "all_to_all_async"
    _, a = _resolve(op, _A2A, args, kwargs)
    t = _check_common(op, a, "multi_device_global_semaphore")
    # TT-NN's native kernel serves only tile-aligned 4-D DRAM-interleaved tensors exchanged
    # between dims 2 and 3; everything else takes its composite path.
    mc = t.memory_config()
    out_mc = a["memory_config"]
    native = (
        len(t._shape) == 4
        and t._layout is Layout.TILE
        and mc.buffer_type is BufferType.DRAM
        and not mc.is_sharded()
        and (out_mc is None or not out_mc.is_sharded())
        and a["in_dim"] in (2, 3)
        and a["out_dim"] in (2, 3)
        and t._shape[2] % 32 == 0
        and t._shape[3] % 32 == 0
    )
    if native:
        _check_link_rows(op, t, a["num_links"])
        if a["in_dim"] == a["out_dim"]:
            raise CCLError(
                f"ttnn.experimental.{op}: AllToAllAsync: in_dim and out_dim must be different, "
                f"but are both {a['in_dim']}.\nfix: e.g. in_dim=2, out_dim=3."
            )
    _check_group(op, t, None)
    out = ccl.all_to_all(
        t, a["in_dim"], a["out_dim"], topology=a["topology"], memory_config=a["memory_config"]
    )
    return _write(op, "persistent_output_buffer", out, a["persistent_output_buffer"], t)
