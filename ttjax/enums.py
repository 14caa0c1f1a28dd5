"""TT-NN's enums with TT-NN's names and reprs: DataType, Layout, Topology, ReduceType.

``ttjax.bfloat16`` is ``DataType.BFLOAT16`` exactly as ``ttnn.bfloat16`` is, and it prints as
``DataType::BFLOAT16``.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class DataType(enum.Enum):
    """Element types of a TT-NN tensor. ``BFLOAT8_B``/``BFLOAT4_B`` are block floats (TILE only)."""

    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"
    UINT32 = "uint32"
    INT32 = "int32"
    UINT16 = "uint16"
    UINT8 = "uint8"
    BFLOAT8_B = "bfloat8_b"
    BFLOAT4_B = "bfloat4_b"

    def __repr__(self) -> str:
        return f"DataType::{self.name}"

    __str__ = __repr__

    @property
    def is_block_float(self) -> bool:
        """True for the shared-exponent formats bfloat8_b and bfloat4_b."""
        return self in (DataType.BFLOAT8_B, DataType.BFLOAT4_B)

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype that holds this type's logical values (bfloat16 for block floats)."""
        return _NUMPY[self]

    @property
    def itemsize(self) -> float:
        """Bytes per element as stored on device (1 + 1/16 for bfloat8_b, 1/2 + 1/16 for bfloat4_b)."""
        return _ITEMSIZE[self]


_NUMPY = {
    DataType.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    DataType.FLOAT32: np.dtype(np.float32),
    DataType.UINT32: np.dtype(np.uint32),
    DataType.INT32: np.dtype(np.int32),
    DataType.UINT16: np.dtype(np.uint16),
    DataType.UINT8: np.dtype(np.uint8),
    DataType.BFLOAT8_B: np.dtype(ml_dtypes.bfloat16),
    DataType.BFLOAT4_B: np.dtype(ml_dtypes.bfloat16),
}
_ITEMSIZE = {
    DataType.BFLOAT16: 2.0,
    DataType.FLOAT32: 4.0,
    DataType.UINT32: 4.0,
    DataType.INT32: 4.0,
    DataType.UINT16: 2.0,
    DataType.UINT8: 1.0,
    DataType.BFLOAT8_B: 1.0 + 1.0 / 16,
    DataType.BFLOAT4_B: 0.5 + 1.0 / 16,
}

bfloat16 = DataType.BFLOAT16
float32 = DataType.FLOAT32
uint32 = DataType.UINT32
int32 = DataType.INT32
uint16 = DataType.UINT16
uint8 = DataType.UINT8
bfloat8_b = DataType.BFLOAT8_B
bfloat4_b = DataType.BFLOAT4_B


class Layout(enum.Enum):
    """Memory layout of a tensor: row-major, or 32x32 tiles (last two dims padded to 32)."""

    ROW_MAJOR = "row_major"
    TILE = "tile"

    def __repr__(self) -> str:
        return f"Layout::{self.name}"

    __str__ = __repr__


ROW_MAJOR_LAYOUT = Layout.ROW_MAJOR
TILE_LAYOUT = Layout.TILE
TILE_SIZE = 32


class Topology(enum.Enum):
    """CCL topology. It changes the communication schedule, never the result."""

    Ring = "ring"
    Linear = "linear"
    Mesh = "mesh"
    Torus = "torus"

    def __repr__(self) -> str:
        return f"Topology.{self.name}"


class ReduceType(enum.Enum):
    """Reduction applied by reduce_scatter and all_reduce."""

    Sum = "sum"
    Max = "max"
    Min = "min"

    def __repr__(self) -> str:
        return f"ReduceType.{self.name}"


class MeshType(enum.Enum):
    """Legacy ``open_mesh_device(mesh_type=...)`` values; accepted and ignored."""

    RowMajor = "row_major"
    Ring = "ring"
    Line = "line"


class StorageType(enum.Enum):
    """Where a tensor's data lives."""

    HOST = "host"
    DEVICE = "device"

    def __repr__(self) -> str:
        return f"StorageType::{self.name}"

    __str__ = __repr__


_FROM_NUMPY = {
    np.dtype(np.float32): DataType.FLOAT32,
    np.dtype(ml_dtypes.bfloat16): DataType.BFLOAT16,
    np.dtype(np.int32): DataType.INT32,
    np.dtype(np.uint32): DataType.UINT32,
    np.dtype(np.uint16): DataType.UINT16,
    np.dtype(np.uint8): DataType.UINT8,
}


def from_numpy_dtype(dtype: np.dtype) -> DataType | None:
    """The TT-NN DataType that stores numpy ``dtype`` without loss, or None."""
    return _FROM_NUMPY.get(np.dtype(dtype))


__all__ = [
    "ROW_MAJOR_LAYOUT",
    "TILE_LAYOUT",
    "TILE_SIZE",
    "DataType",
    "Layout",
    "MeshType",
    "ReduceType",
    "StorageType",
    "Topology",
    "bfloat4_b",
    "bfloat8_b",
    "bfloat16",
    "float32",
    "int32",
    "uint8",
    "uint16",
    "uint32",
]
