"""Pictures of a mesh and of how a tensor is spread over it: TT-NN's ``visualize_*`` functions.

Public names only; the implementation is :mod:`ttjax._src.tools.visualize`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.tools.visualize import (
    CELL_SIZE as CELL_SIZE,
    MissingDependencyError as MissingDependencyError,
    mesh_layout as mesh_layout,
    save_mesh_layout_png as save_mesh_layout_png,
    visualize_mesh_device as visualize_mesh_device,
    visualize_system_mesh as visualize_system_mesh,
    visualize_tensor as visualize_tensor,
)

_publish(globals(), "ttjax._src.tools.visualize")
