"""Mesh graph descriptors (MGD 2.0): TT-Fabric's textproto files that say how the chips are wired.

TTML picks one from ``TT_MESH_GRAPH_DESC_PATH`` (ttjax also reads ``TTJAX_MESH_GRAPH_DESC_PATH``,
which wins) or, when unset, by device count: 1 device takes the N150, 2 the N300, 8 the T3000
1x8 line and 32 the Galaxy 1x32 line. Files are parsed with protobuf's ``text_format`` against the shipped schema; like tt-metal, fields
the schema lacks are skipped (forward compatibility), each with a warning naming it. ``ttjax-run``
(``ttjax.distributed``) and TTML (``ttjax.ttml.mgd``) share this one parser.

>>> mgd = load_mesh_graph_descriptor(shipped_descriptors()["t3k_mesh_graph_descriptor.textproto"])
>>> mgd.device_topology, mgd.accepts([2, 4]), mgd.accepts([1, 8])
((2, 4), True, False)

The mesh rule (seed 002): a mesh shape opens when it equals ``device_topology``; a line topology
(at most one dimension above 1, e.g. 1x32) accepts any mesh with the same number of devices
(1x32, 4x8, 8x4, 32x1). Anything else, a 2x4 grid asked for 1x8 or a 4x8 grid asked for 1x32,
is refused with both shapes named (TT-NN hangs or crashes there).

Public names only; the implementation is :mod:`ttjax._src.core.mgd`.
"""

from ttjax._src.core.mgd import (
    DEFAULT_DESCRIPTORS as DEFAULT_DESCRIPTORS,
    ENV_VARS as ENV_VARS,
    MeshGraphDescriptor as MeshGraphDescriptor,
    MeshSpec as MeshSpec,
    UnknownFieldWarning as UnknownFieldWarning,
    fitting_meshes as fitting_meshes,
    load_mesh_graph_descriptor as load_mesh_graph_descriptor,
    mesh_graph_descriptor_path as mesh_graph_descriptor_path,
    parse_mesh_graph_descriptor as parse_mesh_graph_descriptor,
    select_mesh_graph_descriptor as select_mesh_graph_descriptor,
    shipped_descriptors as shipped_descriptors,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.mgd")
