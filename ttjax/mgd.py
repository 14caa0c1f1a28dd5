"""Mesh graph descriptors (MGD 2.0): TT-Fabric's textproto files that say how the chips are wired.

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
