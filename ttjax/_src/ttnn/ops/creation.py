"""Tensor factories: zeros, ones, full, empty, rand, arange (and the ``*_like`` forms).

The implementation of :mod:`ttjax.ops.creation`, whose docstring says more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.blockfloat import quantize
from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import DataType, Layout, StorageType
from ttjax._src.core.errors import TTJaxError
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.tensor import Tensor, TensorSpec
from ttjax._src.ttnn.ops.common import check_dtype, check_hw_kwargs, is_scalar


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    dims = tuple(int(s) for s in shape)
    if any(d < 0 for d in dims):
        raise TTJaxError(f"shape {list(dims)} has a negative dim.\nfix: use sizes >= 0.")
    return dims


def _compute_dtype(dt: DataType) -> Any:
    return jnp.bfloat16 if dt.is_block_float else dt.numpy_dtype


def _create(
    name: str,
    fn: Any,
    shape: tuple[int, ...],
    dtype: DataType,
    layout: Layout,
    device: MeshDevice | None,
    static: Any,
    scalars: Sequence[Any] = (),
    memory_config: Any = None,
) -> Tensor:
    if dtype.is_block_float:
        layout = Layout.TILE
    if device is None:
        host = np.asarray(jax.jit(fn, static_argnums=())(*scalars))
        if dtype.is_block_float:
            host = quantize(np, host.astype(np.float32), dtype).astype(dtype.numpy_dtype)
        spec = TensorSpec(None, (), dtype, layout, shape, StorageType.HOST)
        return Tensor(host.astype(dtype.numpy_dtype), spec)
    if not isinstance(device, MeshDevice):
        raise TTJaxError(
            f"device={device!r} is not a MeshDevice.\nfix: pass the mesh from ttnn.open_mesh_device."
        )
    return run_op(
        name,
        fn,
        [],
        mesh=device,
        static=(shape, dtype, layout, static),
        scalars=tuple(scalars),
        out_dtype=dtype,
        out_layout=layout,
        memory_config=memory_config,
    )


def full(
    shape: Any,
    fill_value: float,
    dtype: DataType = DataType.BFLOAT16,
    layout: Layout = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """A tensor of per-device ``shape`` filled with ``fill_value``.

    >>> t = ttnn.full([1, 1, 32, 32], 3.0, device=mesh)
    """
    check_hw_kwargs("full", kwargs)
    dt = check_dtype("full", dtype) or DataType.BFLOAT16
    s = _shape(shape)
    cdt = _compute_dtype(dt)
    if not is_scalar(fill_value):
        raise TTJaxError(
            f"ttnn.full: fill_value={fill_value!r} must be a number.\n"
            "fix: pass a Python int or float, e.g. ttnn.full(shape, 0.5, device=mesh)."
        )

    def fn(v: Any) -> Any:
        return jnp.full(s, v, cdt)

    return _create("full", fn, s, dt, layout, device, None, (fill_value,), memory_config)


def zeros(
    shape: Any,
    dtype: DataType = DataType.BFLOAT16,
    layout: Layout = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """A tensor of zeros with per-device ``shape``."""
    check_hw_kwargs("zeros", kwargs)
    return full(shape, 0.0, dtype, layout, device, memory_config)


def ones(
    shape: Any,
    dtype: DataType = DataType.BFLOAT16,
    layout: Layout = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """A tensor of ones with per-device ``shape``."""
    check_hw_kwargs("ones", kwargs)
    return full(shape, 1.0, dtype, layout, device, memory_config)


def empty(
    shape: Any,
    dtype: DataType = DataType.BFLOAT16,
    layout: Layout = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """An allocated tensor of per-device ``shape`` (zero-filled here; TT-NN leaves it undefined)."""
    check_hw_kwargs("empty", kwargs)
    return full(shape, 0.0, dtype, layout, device, memory_config)


def _like(t: Tensor, dtype: DataType | None, layout: Layout | None, device: Any) -> tuple[Any, ...]:
    dev = device if device is not None else t.device()
    return t._shape, dtype or t._dtype, layout or t._layout, dev


def _like_config(t: Tensor, device: Any, kwargs: dict[str, Any]) -> Any:
    """``memory_config=`` when given, else the source tensor's (on its own mesh)."""
    if kwargs.get("memory_config") is not None or device is not None:
        return kwargs.get("memory_config")
    return t.memory_config()


def zeros_like(
    tensor: Tensor,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Zeros shaped like ``tensor``, on its mesh unless ``device`` is given (see ``zeros``)."""
    check_hw_kwargs("zeros_like", kwargs)
    s, dt, lay, dev = _like(tensor, dtype, layout, device)
    return full(s, 0.0, dt, lay, dev, _like_config(tensor, device, kwargs))


def ones_like(
    tensor: Tensor,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Ones shaped like ``tensor``, on its mesh unless ``device`` is given (see ``ones``)."""
    check_hw_kwargs("ones_like", kwargs)
    s, dt, lay, dev = _like(tensor, dtype, layout, device)
    return full(s, 1.0, dt, lay, dev, _like_config(tensor, device, kwargs))


def full_like(
    tensor: Tensor,
    fill_value: float,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``fill_value`` shaped like ``tensor``, on its mesh unless ``device`` is given."""
    check_hw_kwargs("full_like", kwargs)
    s, dt, lay, dev = _like(tensor, dtype, layout, device)
    return full(s, fill_value, dt, lay, dev, _like_config(tensor, device, kwargs))


def empty_like(
    tensor: Tensor,
    dtype: DataType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    **kwargs: Any,
) -> Tensor:
    """A tensor like ``tensor`` (zero-filled here; TT-NN leaves it uninitialised)."""
    check_hw_kwargs("empty_like", kwargs)
    return zeros_like(tensor, dtype, layout, device)


def rand(
    shape: Any,
    dtype: DataType = DataType.BFLOAT16,
    layout: Layout = Layout.ROW_MAJOR,
    device: MeshDevice | None = None,
    memory_config: Any = None,
    *,
    low: float = 0.0,
    high: float = 1.0,
    seed: int = 0,
    **kwargs: Any,
) -> Tensor:
    """Uniform random values in ``[low, high)`` with per-device ``shape``, seeded.

    Every device gets the same values (and so does a host tensor), whatever the mesh shape.
    """
    check_hw_kwargs("rand", kwargs)
    dt = check_dtype("rand", dtype) or DataType.BFLOAT16
    s = _shape(shape)
    cdt = _compute_dtype(dt)
    key_seed = int(seed)

    def fn(lo: Any, hi: Any) -> Any:
        u = jax.random.uniform(jax.random.key(key_seed), s, jnp.float32)
        return (lo + (hi - lo) * u).astype(cdt)

    return _create("rand", fn, s, dt, layout, device, key_seed, (low, high), memory_config)


def arange(
    start: int = 0,
    end: int | None = None,
    step: int = 1,
    dtype: DataType = DataType.BFLOAT16,
    device: MeshDevice | None = None,
    layout: Layout = Layout.ROW_MAJOR,
    memory_config: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``[start, start + step, ...)`` below ``end`` (a 1-D tensor on every device)."""
    check_hw_kwargs("arange", kwargs)
    if end is None:
        start, end = 0, start
    dt = check_dtype("arange", dtype) or DataType.BFLOAT16
    n = max(0, -(-(end - start) // step))
    cdt = _compute_dtype(dt)
    bounds = (int(start), int(step))

    def fn() -> Any:
        return (bounds[0] + bounds[1] * jnp.arange(n)).astype(cdt)

    return _create("arange", fn, (n,), dt, layout, device, bounds, (), memory_config)
