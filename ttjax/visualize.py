"""Pictures of a mesh and of how a tensor is spread over it: TT-NN's ``visualize_*`` functions.

The ``visualize_*`` functions print a box grid with ``rich`` (imported inside each function,
as ``jax.debug.visualize_sharding`` does, so importing ttjax stays cheap). Like TT-NN, they log
errors and never raise. ``mesh_layout`` gives the same facts as plain data (for tests and tools)
and ``save_mesh_layout_png`` draws them with matplotlib, an optional dependency.

Everything here reads only metadata (mesh, placements, per-device shape), never tensor values,
so it is cheap on big tensors and works on a tensor inside ``jax.jit``.

>>> import ttjax as ttnn
>>> mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
>>> ttnn.visualize_mesh_device(mesh)
       MeshDevice(rows=1, cols=2)
┌──────────────────────────────┬──────────────────────────────┐
│          Dev. ID: 0          │          Dev. ID: 1          │
│            (0, 0)            │            (0, 1)            │
│                              │                              │
└──────────────────────────────┴──────────────────────────────┘

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
