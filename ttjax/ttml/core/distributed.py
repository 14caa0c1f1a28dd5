"""TTML's ``ttml.core.distributed``: fabric set-up (and, from the training half, gradient sync)."""

from __future__ import annotations

from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.mgd import MeshGraphDescriptor


def enable_fabric(num_devices: int) -> MeshGraphDescriptor:
    """Pick the mesh graph descriptor for ``num_devices``; call it before ``open_device``.

    ``TT_MESH_GRAPH_DESC_PATH`` (or ``TTJAX_MESH_GRAPH_DESC_PATH``) wins; otherwise 8 devices take
    the T3000 1x8 line and 32 the Galaxy 1x32 line.
    """
    return AutoContext.get_instance().enable_fabric(num_devices)


__all__ = ["enable_fabric"]
