"""The core: errors and enums, the mesh, the tensor, one dispatch path, the parallelism plan.

Imports nothing else of ttjax but ``ttjax.proto``.
"""
