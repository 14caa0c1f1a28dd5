"""Reductions (sum, mean, max, min, argmax, var, std) and normalizations (softmax, layer_norm,
rms_norm), all over each device's local tensor.

A reduction over a sharded dim gives each device the reduction of *its* shard (a partial
result); combine the partials with ``ttnn.all_reduce``, exactly as in TT-NN.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ttjax._src.core.dispatch import common_mesh, run_op
from ttjax._src.core.enums import TILE_SIZE, DataType, Layout
from ttjax._src.core.errors import ShapeMismatchError, UnsupportedDTypeError
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ops.common import (
    check_hw_kwargs,
    check_norm_program_config,
    norm_dim,
    write_output,
)


def _dims(op: str, t: Tensor, dim: int | Sequence[int] | None) -> tuple[int, ...] | None:
    if dim is None:
        return None
    dims = [dim] if isinstance(dim, (int, np.integer)) else list(dim)
    return tuple(sorted({norm_dim(op, t, d) for d in dims}))


def _reduction(name: str, fn: Callable[..., Any], doc: str) -> Callable[..., Tensor]:
    def op(
        input_tensor: Tensor,
        dim: int | Sequence[int] | None = None,
        keepdim: bool = False,
        *,
        memory_config: Any = None,
        compute_kernel_config: Any = None,
        **kwargs: Any,
    ) -> Tensor:
        check_hw_kwargs(name, kwargs)
        dims = _dims(name, input_tensor, dim)
        keep = bool(keepdim)

        def local(x: Any) -> Any:
            xf = x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.floating) else x
            return fn(xf, axis=dims, keepdims=keep).astype(x.dtype)

        return run_op(name, local, [input_tensor], static=(dims, keep), memory_config=memory_config)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


sum = _reduction("sum", jnp.sum, "Sum over ``dim`` (all dims when None) of each device's tensor.")
mean = _reduction("mean", jnp.mean, "Mean over ``dim`` of each device's tensor.")
max = _reduction("max", jnp.max, "Max over ``dim`` of each device's tensor.")
min = _reduction("min", jnp.min, "Min over ``dim`` of each device's tensor.")
var = _reduction("var", jnp.var, "Variance over ``dim`` of each device's tensor.")
std = _reduction("std", jnp.std, "Standard deviation over ``dim`` of each device's tensor.")


def argmax(
    input_tensor: Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    *,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    use_multicore: bool = False,
    **kwargs: Any,
) -> Tensor:
    """Index of the max along ``dim`` (flattened when None) per device, as uint32 (TT-NN's dtype)."""
    check_hw_kwargs("argmax", kwargs)
    d = None if dim is None else norm_dim("argmax", input_tensor, dim)
    keep = bool(keepdim)

    def local(x: Any) -> Any:
        return jnp.argmax(x, axis=d, keepdims=keep).astype(jnp.uint32)

    out = run_op("argmax", local, [input_tensor], static=(d, keep), out_dtype=DataType.UINT32)
    return write_output(out, output_tensor)


def softmax(
    input_tensor: Tensor,
    dim: int = -1,
    *,
    memory_config: Any = None,
    compute_kernel_config: Any = None,
    numeric_stable: bool = True,
    **kwargs: Any,
) -> Tensor:
    """Softmax along ``dim`` of each device's tensor (computed in float32)."""
    check_hw_kwargs("softmax", kwargs)
    d = norm_dim("softmax", input_tensor, dim)

    def local(x: Any) -> Any:
        return jax.nn.softmax(x.astype(jnp.float32), axis=d).astype(x.dtype)

    return run_op("softmax", local, [input_tensor], static=(d,), memory_config=memory_config)


def _norm_weight(w: Any, width: int) -> Any:
    """A norm's gamma/beta as a (width,) vector: TT-NN's [W], [1, 1, W] or [W/32, 32] forms, or
    a tile-high [.., 32, W] (the weight copied down a tile's rows, as tt-metal's TtLayerNorm
    makes it), of which TT-NN reads the first row: layernorm_op.cpp's validate takes a TILE gamma
    of padded height TILE_HEIGHT, and its kernels broadcast each gamma tile's row 0."""
    if w.ndim >= 2 and w.shape[-1] == width and w.size == TILE_SIZE * width:
        w = jnp.reshape(w, (TILE_SIZE, width))[0]
    return jnp.reshape(w, (width,)).astype(jnp.float32)


def _normalization(name: str, center: bool) -> Callable[..., Tensor]:
    def op(
        input_tensor: Tensor,
        *,
        epsilon: float = 1e-12,
        weight: Tensor | None = None,
        bias: Tensor | None = None,
        residual_input_tensor: Tensor | None = None,
        memory_config: Any = None,
        program_config: Any = None,
        compute_kernel_config: Any = None,
        **kwargs: Any,
    ) -> Tensor:
        check_hw_kwargs(name, kwargs)
        check_norm_program_config(name, program_config, input_tensor, residual_input_tensor)
        tensors = [input_tensor]
        has = (residual_input_tensor is not None, weight is not None, bias is not None)
        for t in (residual_input_tensor, weight, bias):
            if t is not None:
                tensors.append(t)

        def local(x: Any, *rest: Any) -> Any:
            it = iter(rest)
            res = next(it) if has[0] else None
            w = next(it) if has[1] else None
            b = next(it) if has[2] else None
            xf = x.astype(jnp.float32)
            if res is not None:
                xf = xf + res.astype(jnp.float32)
            width = x.shape[-1]
            if center:
                mu = jnp.mean(xf, axis=-1, keepdims=True)
                xc = xf - mu
                y = xc * jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + epsilon)
            else:
                y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + epsilon)
            if w is not None:
                y = y * _norm_weight(w, width)
            if b is not None:
                y = y + _norm_weight(b, width)
            return y.astype(x.dtype)

        return run_op(
            name, local, tensors, static=(float(epsilon), has), memory_config=memory_config
        )

    op.__name__ = op.__qualname__ = name
    return op


layer_norm = _normalization("layer_norm", center=True)
layer_norm.__doc__ = """LayerNorm over the last dim of each device's tensor (float32 statistics).

>>> y = ttnn.layer_norm(x, epsilon=1e-5, weight=gamma, bias=beta)
"""
rms_norm = _normalization("rms_norm", center=False)
rms_norm.__doc__ = """RMSNorm over the last dim of each device's tensor (float32 statistics).

>>> y = ttnn.rms_norm(x, epsilon=1e-6, weight=gamma)
"""


def topk(
    input_tensor: Tensor,
    k: int = 32,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,
    *,
    out: Any = None,
    memory_config: Any = None,
    sub_core_grids: Any = None,
    indices_tensor: Any = None,
) -> tuple[Tensor, Tensor]:
    """The ``k`` largest (or smallest) values along ``dim`` and their indices, per device
    (TT-NN's ``ttnn.topk``): ``(values, indices)``, values in the input's dtype, indices
    UINT16 (UINT32 when the dim has 65536 or more entries). Always sorted; ties keep the lower
    index first.

    >>> values, indices = ttnn.topk(x, 4)
    >>> indices.dtype, tuple(values.shape)
    (DataType::UINT16, (1, 1, 32, 4))
    """
    d = norm_dim("topk", input_tensor, dim)
    size = input_tensor._shape[d]
    kk = int(k)
    if not 1 <= kk <= size:
        raise ShapeMismatchError(
            f"ttnn.topk: k={kk} must be in [1, {size}] (dim {d} of per-device shape "
            f"{list(input_tensor._shape)}).\nfix: ask for at most {size} entries."
        )
    if input_tensor._dtype not in (DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32):
        raise UnsupportedDTypeError(
            f"ttnn.topk: Input tensor must be BFLOAT16, or BFLOAT8_B, got: "
            f"{input_tensor._dtype!r}.\nfix: ttnn.typecast(t, ttnn.bfloat16) first."
        )
    big = bool(largest)
    index_dtype = DataType.UINT16 if size < 65536 else DataType.UINT32

    def local(x: Any) -> Any:
        xt = jnp.moveaxis(x, d, -1).astype(jnp.float32)
        vals, idx = jax.lax.top_k(xt if big else -xt, kk)
        vals = vals if big else -vals
        return (
            jnp.moveaxis(vals, -1, d).astype(x.dtype),
            jnp.moveaxis(idx, -1, d).astype(index_dtype.numpy_dtype),
        )

    values, indices = run_op(
        "topk",
        local,
        [input_tensor],
        static=(kk, d, big),
        out_dtype=(input_tensor._dtype, index_dtype),
        memory_config=memory_config,
    )
    return values, indices


def softmax_in_place(
    input_tensor: Tensor,
    *,
    program_config: Any = None,
    compute_kernel_config: Any = None,
    numeric_stable: bool = True,
    **kwargs: Any,
) -> Tensor:
    """Softmax over the last dim written back into ``input_tensor`` (TT-NN's in-place form).

    >>> y = ttnn.softmax_in_place(ttnn.clone(x))
    """
    check_hw_kwargs("softmax_in_place", kwargs)
    return write_output(softmax(input_tensor, -1), input_tensor)


def scale_mask_softmax_in_place(
    input_tensor: Tensor,
    scale: float | None = None,
    mask: Tensor | None = None,
    *,
    program_config: Any = None,
    is_causal_mask: bool = False,
    compute_kernel_config: Any = None,
    numeric_stable: bool = True,
    **kwargs: Any,
) -> Tensor:
    """``softmax(x * scale + mask)`` over the last dim, written back into ``input_tensor``
    (TT-NN's ``ttnn.scale_mask_softmax_in_place``; the mask broadcasts over x per device: [N, 1,
    1, W] for one row per batch, x's own shape for a causal mask). A scale needs a mask, as in
    TT-NN ("Scale value must not be set when mask is not present")."""
    op = "scale_mask_softmax_in_place"
    check_hw_kwargs(op, kwargs)
    return write_output(scale_mask_softmax_op(op, input_tensor, scale, mask), input_tensor)


def scale_mask_softmax_op(
    op: str,
    input_tensor: Tensor,
    scale: float | None,
    mask: Tensor | None,
    memory_config: Any = None,
) -> Tensor:
    """``softmax(x * scale + mask)`` over the last dim of each device's tensor, with TT-NN's
    scale_mask_softmax rules (softmax_device_operation.cpp), as the op named ``op``."""
    if mask is None and scale is not None:
        raise ShapeMismatchError(
            f"ttnn.{op}: Scale value must not be set when mask is not present.\n"
            "fix: pass a mask, or scale the input first (ttnn.multiply)."
        )
    sc = 1.0 if scale is None else float(scale)
    tensors = [input_tensor] + ([mask] if mask is not None else [])
    rows = _row_major_mask_width(op, input_tensor, mask)

    def local(x: Any, *m: Any) -> Any:
        y = x.astype(jnp.float32) * sc
        if m:
            add = m[0] if rows is None else m[0].reshape(m[0].shape[0], 1, 1, rows)
            y = y + add.astype(jnp.float32)
        return jax.nn.softmax(y, axis=-1).astype(x.dtype)

    return run_op(
        op, local, tensors, static=(sc, mask is not None, rows), memory_config=memory_config
    )


# Each mesh's sampling stream: (the last nonzero seed, draws since it), as the chip's generator.
_SAMPLING_STREAMS: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()


def sampling(
    input_values_tensor: Tensor,
    input_indices_tensor: Tensor,
    *,
    k: Tensor,
    p: Tensor,
    temp: Tensor,
    seed: int = 0,
    sub_core_grids: Any = None,
    output_tensor: Tensor | None = None,
) -> Tensor:
    """TT-NN's on-device token sampling for 32 users (ttnn/cpp/ttnn/operations/reduction/sampling):
    per user (row of [.., 32 users, W]) the top ``k[u]`` values (k <= 32), softmax of them times
    ``temp[u]`` (1/T), the smallest prefix whose cumulative probability passes ``p[u]``, then a
    multinomial draw within that prefix; returns ``input_indices_tensor[u, chosen]`` as
    [1, 1, 1, 32] uint32. As on the chip, a nonzero ``seed`` reseeds the mesh's generator and
    ``seed=0`` draws the next numbers of its stream (the compute kernel's ``rand_tile_init`` runs
    only for seed != 0). The draws are JAX's (TT-NN's generator differs), so the distribution,
    not the sampled token, matches TT-NN; k = 1 or p = 0 is greedy."""
    op = "sampling"
    shape = tuple(input_values_tensor._shape)

    def fail(rule: str, fix: str) -> ShapeMismatchError:
        return ShapeMismatchError(f"ttnn.{op}: {rule}.\nfix: {fix}")

    if len(shape) != 4 or shape[0] * shape[1] * shape[2] != 32 or shape[3] % TILE_SIZE:
        raise fail(f"Input must have 32 users and an inner dim divisible by 32 (per-device shape "
                   f"{list(shape)})", "pass the logits as [1, 1, 32, W], W padded to 32.")  # fmt: skip
    if tuple(input_indices_tensor._shape) != shape:
        raise fail(f"Input values and indices must have the same shape ({list(shape)} vs "
                   f"{list(input_indices_tensor._shape)})", "pass one index per value.")  # fmt: skip
    if input_indices_tensor._dtype not in (DataType.UINT32, DataType.INT32):
        raise UnsupportedDTypeError(
            f"ttnn.{op}: Only UINT32 & INT32 dtypes are supported for input indices (got "
            f"{input_indices_tensor._dtype!r}).\nfix: create the indices with dtype=ttnn.uint32."
        )
    for name, t in (("k", k), ("p", p), ("temp", temp)):
        if tuple(t._shape) != (32,):
            raise fail(f"{name} must have shape [32]! (got {list(t._shape)})",
                       f"pass one {name} per user as a [32] tensor.")  # fmt: skip
    if sub_core_grids is not None and sub_core_grids.num_cores() != 32:
        raise fail(f"Subcore grid expects num_users cores, but found {sub_core_grids.num_cores()}!",
                   "pass 32 cores (one per user).")  # fmt: skip
    width = shape[3]

    mesh = common_mesh(op, [input_values_tensor])
    base, step = _SAMPLING_STREAMS.get(mesh, (0, 0))
    if int(seed) != 0:
        base, step = int(seed) & 0xFFFFFFFF, 0
    _SAMPLING_STREAMS[mesh] = (base, step + 1)

    def fn(values: Any, indices: Any, kk: Any, pp: Any, tt: Any, sd: Any, n: Any) -> Any:
        v = values.reshape(32, width).astype(jnp.float32)
        top_v, top_i = jax.lax.top_k(v, 32)  # width is a multiple of 32
        rank = jnp.arange(top_v.shape[-1])[None, :]
        keep_k = rank < jnp.clip(kk.astype(jnp.int32), 1, 32)[:, None]
        logits = jnp.where(keep_k, top_v * tt.astype(jnp.float32)[:, None], -jnp.inf)
        probs = jax.nn.softmax(logits, axis=-1)
        cum = jnp.cumsum(probs, axis=-1)
        passed = cum > pp.astype(jnp.float32)[:, None]
        cutoff = jnp.where(passed.any(-1), jnp.argmax(passed, axis=-1), top_v.shape[-1] - 1)
        kept = jnp.where(rank <= cutoff[:, None], probs, 0.0)
        draw = jax.random.uniform(jax.random.fold_in(jax.random.PRNGKey(sd), n), (32, 1))
        over = jnp.cumsum(kept, axis=-1) / jnp.sum(kept, axis=-1, keepdims=True) > draw
        choice = jnp.where(over.any(-1), jnp.argmax(over, axis=-1), 0)
        picked = jnp.take_along_axis(top_i, choice[:, None], axis=-1)
        ids = jnp.take_along_axis(indices.reshape(32, width), picked, axis=-1)
        return ids.reshape(1, 1, 1, 32).astype(jnp.uint32)

    out = run_op(
        op,
        fn,
        [input_values_tensor, input_indices_tensor, k, p, temp],
        scalars=(np.uint32(base), np.uint32(step)),
        out_dtype=DataType.UINT32,
        out_layout=Layout.ROW_MAJOR,
    )
    return write_output(out, output_tensor)


def cumsum(
    input_tensor: Tensor,
    dim: int,
    *,
    dtype: DataType | None = None,
    reverse_order: bool = False,
    out: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Cumulative sum along ``dim`` of each device's tensor (TT-NN's ``ttnn.cumsum``);
    ``reverse_order`` sums from the end.

    >>> tuple(ttnn.cumsum(x, 3).shape)
    (1, 1, 32, 32)
    """
    check_hw_kwargs("cumsum", kwargs)
    d = norm_dim("cumsum", input_tensor, dim)
    rev = bool(reverse_order)

    def local(x: Any) -> Any:
        acc = jnp.float32 if jnp.issubdtype(x.dtype, jnp.floating) else x.dtype
        y = jnp.flip(x, d) if rev else x
        y = jnp.cumsum(y.astype(acc), axis=d)
        return (jnp.flip(y, d) if rev else y).astype(x.dtype)

    result = run_op("cumsum", local, [input_tensor], static=(d, rev), out_dtype=dtype)
    return write_output(result, out)


def _row_major_mask_width(op: str, x: Tensor, mask: Tensor | None) -> int | None:
    """A ROW_MAJOR mask is one [W] row per batch folded into tiles, [N, 1, W / 32, 32], as TT-NN
    requires ("Non-sharded mask shape must match expected shape", ttnn/cpp/ttnn/operations/
    normalization/softmax/device/softmax_device_operation.cpp): returns W (None for a TILE mask)."""
    if mask is None or mask.layout != Layout.ROW_MAJOR:
        return None
    width = x._shape[-1]
    want = (mask._shape[0], 1, width // 32, 32)
    if len(mask._shape) != 4 or tuple(mask._shape) != want:
        raise ShapeMismatchError(
            f"ttnn.{op}: a ROW_MAJOR mask must have shape {list(want)} (one row of the input's "
            f"width {width} per batch, in tile-wide rows), got {list(mask._shape)}.\n"
            "fix: mask.reshape(batch, 1, width // 32, 32), or tilize a [batch, 1, 1, width] mask."
        )
    return int(width)


def scale_causal_mask_hw_dims_softmax_in_place(
    input_tensor: Tensor,
    scale: float | None = None,
    mask: Tensor | None = None,
    *,
    program_config: Any = None,
    compute_kernel_config: Any = None,
    numeric_stable: bool = True,
    **kwargs: Any,
) -> Tensor:
    """``softmax(x * scale + mask)`` in place, TT-NN's ``ttnn.scale_causal_mask_hw_dims_softmax_
    in_place`` (Falcon-7B's sliced prefill attention). The mask is one [H, W] matrix (its last two
    dims) read cyclically down x's rows, all leading dims flattened: row r of x adds mask row
    r mod H, as TT-NN's sharded softmax reads mask tiles from ``mask_start_tile_id`` modulo the
    mask's tile count (ttnn/cpp/ttnn/operations/normalization/softmax/device/
    softmax_program_factory.cpp). So [1, heads * S, S] scores of one slice take an [S, S] mask.

    >>> rep = ttnn.ReplicateTensorToMesh(mesh)
    >>> scores = ttnn.from_torch(torch.rand(1, 2 * 32, 32), device=mesh, mesh_mapper=rep)
    >>> causal = ttnn.from_torch(torch.triu(torch.full((32, 32), -1e9), 1), device=mesh, mesh_mapper=rep)
    >>> y = ttnn.scale_causal_mask_hw_dims_softmax_in_place(scores, 0.125, causal)
    >>> float(ttnn.to_torch(y, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))[0, 0, 1])
    0.0
    """
    op = "scale_causal_mask_hw_dims_softmax_in_place"
    check_hw_kwargs(op, kwargs)
    width = input_tensor._shape[-1] if input_tensor._shape else None
    if mask is None or not mask._shape or mask._shape[-1] != width:
        raise ShapeMismatchError(
            f"ttnn.{op}: the mask's last dim must equal the input's last two dims' width "
            f"{list(input_tensor._shape[-2:])} (got {None if mask is None else list(mask._shape)})."
            "\nfix: pass the [1, 1, H, W] causal mask of this slice (its rows repeat down the input)."
        )
    if scale is None:
        raise ShapeMismatchError(
            f"ttnn.{op}: Scale value is required for scale causal mask HW dims softmax.\n"
            "fix: pass scale= (e.g. 1 / sqrt(head_dim))."
        )
    sc = float(scale)
    height = mask._shape[-2] if len(mask._shape) >= 2 else 1

    def local(x: Any, m: Any) -> Any:
        rows = x.reshape(-1, x.shape[-1]).astype(jnp.float32) * sc
        table = m.reshape(-1, height, m.shape[-1])[0].astype(jnp.float32)
        rows = rows + table[jnp.arange(rows.shape[0]) % height]
        return jax.nn.softmax(rows, axis=-1).reshape(x.shape).astype(x.dtype)

    out = run_op(op, local, [input_tensor, mask], static=(sc, height))
    return write_output(out, input_tensor)
