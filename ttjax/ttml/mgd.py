"""TTML's name for the mesh graph descriptor parser, which lives in :mod:`ttjax.mgd` (shared with
``ttjax-run``): ``ttjax.ttml.mgd.load_mesh_graph_descriptor`` is ``ttjax.mgd``'s."""

from ttjax.mgd import (
    DEFAULT_DESCRIPTORS,
    ENV_VARS,
    MeshGraphDescriptor,
    MeshSpec,
    UnknownFieldWarning,
    fitting_meshes,
    load_mesh_graph_descriptor,
    mesh_graph_descriptor_path,
    parse_mesh_graph_descriptor,
    select_mesh_graph_descriptor,
    shipped_descriptors,
)

__all__ = [
    "DEFAULT_DESCRIPTORS",
    "ENV_VARS",
    "MeshGraphDescriptor",
    "MeshSpec",
    "UnknownFieldWarning",
    "fitting_meshes",
    "load_mesh_graph_descriptor",
    "mesh_graph_descriptor_path",
    "parse_mesh_graph_descriptor",
    "select_mesh_graph_descriptor",
    "shipped_descriptors",
]
