"""TT-NN's enums with TT-NN's names and reprs: DataType, Layout, Topology, ReduceType.

The implementation of :mod:`ttjax.enums`, whose docstring says more.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

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


class EmbeddingsType(enum.Enum):
    """``ttnn.embedding``'s ``embeddings_type`` (ttnn/cpp/ttnn/operations/embedding): GENERIC,
    PADDED (rows equal to ``pad_token`` come out as zeros; needs ``pad_token``) or BINARY (a
    two-row table, e.g. BERT's token types). A ``pad_token`` makes the lookup PADDED."""

    GENERIC = 0
    PADDED = 1
    BINARY = 2

    def __repr__(self) -> str:
        return f"EmbeddingsType.{self.name}"


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


class UnaryOpType(enum.Enum):
    """TT-NN's SFPU unary op codes (``ttnn.UnaryOpType``), in the C++ enum's order
    (ttnn/cpp/ttnn/operations/eltwise/unary/common/unary_op_types.hpp). They name activations
    fused into other ops (``input_tensor_a_activations=``, a matmul's ``fused_activation``).
    """

    EXP = 0
    RECIP = 1
    GELU = 2
    RELU = 3
    SQRT = 4
    SIGMOID = 5
    LOG = 6
    LOG1P = 7
    TANH = 8
    LOG2 = 9
    LOG10 = 10
    SIN = 11
    COS = 12
    COSH = 13
    SINH = 14
    ABS = 15
    ABS_INT32 = 16
    SIGN = 17
    SQUARE = 18
    EQZ = 19
    NEZ = 20
    GTZ = 21
    LTZ = 22
    GEZ = 23
    LEZ = 24
    RELU_MAX = 25
    RELU_MIN = 26
    POWER = 27
    LEAKY_RELU = 28
    ELU = 29
    EXP2 = 30
    HEAVISIDE = 31
    EXPM1 = 32
    SIGNBIT = 33
    ASIN = 34
    ACOS = 35
    ACOSH = 36
    RSQRT = 37
    RELU6 = 38
    ATAN = 39
    ASINH = 40
    ATANH = 41
    ERF = 42
    ERFC = 43
    ISINF = 44
    ISPOSINF = 45
    ISNEGINF = 46
    ISNAN = 47
    LOGICAL_NOT_UNARY = 48
    ISFINITE = 49
    ERFINV = 50
    I0 = 51
    I1 = 52
    TAN = 53
    RSUB = 54
    RDIV = 55
    SILU = 56
    SOFTPLUS = 57
    IDENTITY = 58
    NEG = 59
    ADD_UNARY_SFPU = 60
    SUB_UNARY_SFPU = 61
    MUL_UNARY_SFPU = 62
    DIV_UNARY_SFPU = 63
    UNARY_NE = 64
    UNARY_EQ = 65
    UNARY_GT = 66
    UNARY_LT = 67
    UNARY_GE = 68
    UNARY_LE = 69
    TILED_PROD = 70
    TYPECAST = 71
    BITWISE_XOR = 72
    BITWISE_NOT = 73
    BITWISE_AND = 74
    BITWISE_OR = 75
    RIGHT_SHIFT = 76
    FLOOR = 77
    CEIL = 78
    TRUNC = 79
    FRAC = 80
    ROUND = 81
    LEFT_SHIFT = 82
    REMAINDER = 83
    FMOD = 84
    DROPOUT = 85
    FILL = 86
    PRELU_SFPU = 87
    ZERO_POINT = 88
    ALT_COMPLEX_ROTATE90 = 89
    MISH = 90
    HARDMISH = 91
    MAXIMUM = 92
    MINIMUM = 93
    TANHSHRINK = 94
    THRESHOLD = 95
    SOFTSHRINK = 96
    HARDSHRINK = 97
    HARDTANH = 98
    HARDSIGMOID = 99
    HARDSWISH = 100
    WHERE_TSS = 101
    SOFTSIGN = 102
    CELU = 103
    CLAMP_TSS = 104
    SELU = 105
    RPOW = 106
    CBRT = 107

    def __repr__(self) -> str:
        return f"UnaryOpType.{self.name}"


class UnaryWithParam:
    """A unary op code plus its parameter(s), TT-NN's ``ttnn.UnaryWithParam(op_type, param)``:
    ``UnaryWithParam(UnaryOpType.GELU, 1.0)`` is the tanh-approximated GELU.

    >>> UnaryWithParam(UnaryOpType.RELU_MAX, 6.0)
    UnaryWithParam(UnaryOpType.RELU_MAX, 6.0)
    """

    __slots__ = ("op_type", "params")

    def __init__(
        self,
        op_type: UnaryOpType | tuple[UnaryOpType, float],
        param: float | Sequence[float] | None = None,
    ) -> None:
        if isinstance(op_type, (tuple, list)) and len(op_type) == 2:
            op_type, param = op_type
        if not isinstance(op_type, UnaryOpType):
            raise TypeError(
                f"UnaryWithParam: op_type={op_type!r} is not a ttnn.UnaryOpType.\n"
                "fix: e.g. ttnn.UnaryWithParam(ttnn.UnaryOpType.GELU, 1.0)."
            )
        self.op_type = op_type
        # C++'s UnaryWithParam holds a vector of parameters (sigmoid: vector mode and approx;
        # softplus: beta and threshold); the Python binding passes one, ttjax also takes a list.
        if param is None:
            self.params: tuple[float, ...] = ()
        elif isinstance(param, Sequence):
            self.params = tuple(float(p) for p in param)
        else:
            self.params = (float(param),)

    @property
    def param(self) -> float | None:
        return self.params[0] if self.params else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnaryWithParam) and (other.op_type, other.params) == (
            self.op_type,
            self.params,
        )

    def __hash__(self) -> int:
        return hash((self.op_type, self.params))

    def __repr__(self) -> str:
        args = ", ".join([repr(self.op_type), *map(repr, self.params)])
        return f"UnaryWithParam({args})"


class BcastOpMath(enum.Enum):
    """``ttnn.BcastOpMath`` (ttnn/cpp/ttnn/operations/data_movement/bcast/bcast_types.hpp)."""

    ADD = 0
    SUB = 1
    MUL = 2


class BcastOpDim(enum.Enum):
    """``ttnn.BcastOpDim``: the dims of ``a`` along which ``b``'s single row/column/value is
    repeated (H: b is one row, W: one column, HW: one value)."""

    H = 0
    W = 1
    HW = 2


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
    "BcastOpDim",
    "BcastOpMath",
    "DataType",
    "EmbeddingsType",
    "Layout",
    "MeshType",
    "ReduceType",
    "StorageType",
    "Topology",
    "UnaryOpType",
    "UnaryWithParam",
    "bfloat4_b",
    "bfloat8_b",
    "bfloat16",
    "float32",
    "int32",
    "uint8",
    "uint16",
    "uint32",
]
