"""TT-NN's enums with TT-NN's names and reprs: DataType, Layout, Topology, ReduceType.

``ttjax.bfloat16`` is ``DataType.BFLOAT16`` exactly as ``ttnn.bfloat16`` is, and it prints as
``DataType::BFLOAT16``.

Public names only; the implementation is :mod:`ttjax._src.core.enums`.
"""

from ttjax._src.core.enums import (
    ROW_MAJOR_LAYOUT as ROW_MAJOR_LAYOUT,
    TILE_LAYOUT as TILE_LAYOUT,
    TILE_SIZE as TILE_SIZE,
    BcastOpDim as BcastOpDim,
    BcastOpMath as BcastOpMath,
    DataType as DataType,
    EmbeddingsType as EmbeddingsType,
    Layout as Layout,
    MeshType as MeshType,
    ReduceType as ReduceType,
    StorageType as StorageType,
    Topology as Topology,
    UnaryOpType as UnaryOpType,
    UnaryWithParam as UnaryWithParam,
    bfloat4_b as bfloat4_b,
    bfloat8_b as bfloat8_b,
    bfloat16 as bfloat16,
    float32 as float32,
    from_numpy_dtype as from_numpy_dtype,
    int32 as int32,
    uint8 as uint8,
    uint16 as uint16,
    uint32 as uint32,
)
from ttjax._src.core.reexport import publish as _publish

_publish(globals(), "ttjax._src.core.enums")
