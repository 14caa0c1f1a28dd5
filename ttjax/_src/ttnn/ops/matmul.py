"""matmul and linear: per-device matrix products (no communication; see ttjax.ccl for that).

The implementation of :mod:`ttjax.ops.matmul`, whose docstring says more.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ttjax._src.core import kernels
from ttjax._src.core.dispatch import capture_active, run_op
from ttjax._src.core.enums import TILE_SIZE, DataType, Layout, UnaryOpType, UnaryWithParam
from ttjax._src.core.errors import ConfigError, LayoutError, ShapeMismatchError
from ttjax._src.core.hardware import (
    DRAM_MEMORY_CONFIG,
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MemoryConfig,
    as_tile,
)
from ttjax._src.core.matmul_specs import check_matmul_program_config, matmul_output_memory_config
from ttjax._src.core.tensor import Tensor, host_blocks, is_traced, tile_padded
from ttjax._src.ttnn.ops.activations import chain_fn, parse_activation
from ttjax._src.ttnn.ops.common import check_dtype, check_hw_kwargs, write_output


def _out_config(
    op: str,
    memory_config: Any,
    program_config: Any,
    a: Tensor,
    b: Tensor,
    transpose_a: bool,
    transpose_b: bool,
) -> Any:
    """TT-NN's matmul/linear write DRAM interleaved unless ``memory_config=`` says otherwise
    (``memory_config.has_value() ? ... : DRAM_MEMORY_CONFIG`` in ttnn/.../matmul/matmul.cpp); a
    sharded one with a sharded program config gets the shard spec TT-NN computes from the
    program config (:func:`ttjax._src.core.matmul_specs.matmul_output_memory_config`)."""

    def padded(t: Tensor, transpose: bool) -> tuple[int, ...]:
        shape = list(t._spec.shape)
        if transpose and len(shape) >= 2:
            shape[-2], shape[-1] = shape[-1], shape[-2]
        return tile_padded(shape) if t._spec.layout is Layout.TILE else tuple(shape)

    if program_config is not None and isinstance(a, Tensor):
        check_matmul_program_config(op, program_config, padded(a, transpose_a))
    if memory_config is None:
        return DRAM_MEMORY_CONFIG
    if program_config is None or not isinstance(memory_config, MemoryConfig):
        return memory_config
    if not isinstance(a, Tensor) or not isinstance(b, Tensor) or a._mesh is None:
        return memory_config
    return matmul_output_memory_config(
        op,
        program_config,
        memory_config,
        padded(a, transpose_a),
        padded(b, transpose_b),
        a._spec.memory_config.shard_spec if a.is_sharded() else None,
        a._mesh.compute_with_storage_grid_size(),
        b._spec.memory_config.shard_spec if b.is_sharded() else None,
    )


def _activation(
    op: str, activation: Any, program_config: Any, core_grid: Any
) -> tuple[Any, tuple[UnaryWithParam, ...]]:
    """The activations TT-NN applies to the product (ttnn/.../matmul/matmul.cpp, bound_matmul):
    the program config's ``fused_activation`` inside the kernel (after the bias), then
    ``activation=`` as its own op after it. Without ``core_grid`` TT-NN runs that one with GELU's
    approximation off ("Gelu must have approximation disabled for model accuracy"); with
    ``core_grid`` it is fused into the program config TT-NN generates, parameter kept, and with
    both ``core_grid`` and ``program_config`` the given config wins and ``activation=`` is dropped.
    Every form (string, UnaryOpType, UnaryWithParam, [op, param]) is read by
    :func:`ttjax.ops.activations.parse_activation`."""
    fused = (
        getattr(program_config, "fused_activation", None) if program_config is not None else None
    )
    chain: list[UnaryWithParam] = []
    if fused is not None:
        chain.append(parse_activation(op, fused))
    if activation is not None:
        user = parse_activation(op, activation)
        if core_grid is None:
            if user.op_type is UnaryOpType.GELU:
                user = UnaryWithParam(UnaryOpType.GELU, 0.0)
            chain.append(user)
        elif program_config is None:
            chain.append(user)
    acts = tuple(chain)
    return chain_fn(op, acts), acts


def _mm(a: Any, b: Any, transpose_a: bool, transpose_b: bool) -> Any:
    if not transpose_a:  # decode-sized products may take the Pallas GEMV (see ttjax.kernels)
        y = kernels.small_m_matmul(a, b, transpose_b)
        if y is not None:
            return y
    if transpose_a:
        a = jnp.swapaxes(a, -1, -2)
    if transpose_b:
        b = jnp.swapaxes(b, -1, -2)
    out_dtype = jnp.result_type(a.dtype, b.dtype)
    if out_dtype == jnp.float32:
        return jnp.matmul(a, b, preferred_element_type=jnp.float32)
    # bfloat16: XLA accumulates in float32 inside the dot (as Tenstorrent's matrix engine does)
    # and writes bfloat16; asking for a float32 result instead picks slower GPU kernels.
    return jnp.matmul(a, b).astype(out_dtype)


def matmul(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    transpose_a: bool = False,
    transpose_b: bool = False,
    memory_config: Any = None,
    dtype: DataType | None = None,
    program_config: Any = None,
    activation: Any = None,
    compute_kernel_config: Any = None,
    core_grid: Any = None,
    output_tile: Any = None,
    optional_output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """Batched matrix product of each device's local tensors (``a @ b`` broadcasting batch dims).

    >>> out = ttnn.matmul(a_replicated, b_sharded_on_dim3)   # each device: [.., M, N/devices]
    """
    check_hw_kwargs("matmul", kwargs)
    out_dtype = check_dtype("matmul", dtype)
    act, acts = _activation("matmul", activation, program_config, core_grid)
    ta, tb = bool(transpose_a), bool(transpose_b)

    def fn(a: Any, b: Any) -> Any:
        y = _mm(a, b, ta, tb)
        return act(y) if act is not None else y

    out = run_op(
        "matmul",
        fn,
        [input_tensor_a, input_tensor_b],
        static=(ta, tb, acts),
        out_dtype=out_dtype,
        memory_config=_out_config(
            "matmul", memory_config, program_config, input_tensor_a, input_tensor_b, ta, tb
        ),
    )
    return write_output(out, optional_output_tensor)


def linear(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    bias: Tensor | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    memory_config: Any = None,
    dtype: DataType | None = None,
    program_config: Any = None,
    activation: Any = None,
    compute_kernel_config: Any = None,
    core_grid: Any = None,
    output_tile: Any = None,
    optional_output_tensor: Tensor | None = None,
    **kwargs: Any,
) -> Tensor:
    """``a @ b + bias`` then an optional activation, per device.

    Weights are stored as TT-NN stores them: ``[in_features, out_features]`` (torch's weight
    transposed); ``bias`` is ``[1, out_features]`` or ``[out_features]``.
    """
    check_hw_kwargs("linear", kwargs)
    out_dtype = check_dtype("linear", dtype)
    act, acts = _activation("linear", activation, program_config, core_grid)
    ta, tb = bool(transpose_a), bool(transpose_b)
    tensors = [input_tensor_a, input_tensor_b] + ([bias] if bias is not None else [])

    def fn(a: Any, b: Any, *rest: Any) -> Any:
        y = _mm(a, b, ta, tb)
        if rest:
            bias_v = rest[0]
            y = (
                y.astype(jnp.float32) + bias_v.reshape(bias_v.shape[-1:]).astype(jnp.float32)
            ).astype(y.dtype)
        return act(y) if act is not None else y

    out = run_op(
        "linear",
        fn,
        tensors,
        static=(ta, tb, bias is not None, acts),
        out_dtype=out_dtype,
        memory_config=_out_config(
            "linear", memory_config, program_config, input_tensor_a, input_tensor_b, ta, tb
        ),
    )
    return write_output(out, optional_output_tensor)


def bmm(input_tensor_a: Tensor, input_tensor_b: Tensor, **kwargs: Any) -> Tensor:
    """TT-NN's older name of ``ttnn.matmul`` for batched products (``ttnn.bmm(a, b)``)."""
    return matmul(input_tensor_a, input_tensor_b, **kwargs)


def _attn_product(
    op: str,
    a: Tensor,
    b: Tensor,
    dtype: Any,
    memory_config: Any,
    num_tokens: int | None = None,
    transpose_hw: bool | None = None,
) -> Tensor:
    """TT-NN's decode attention matmuls (ttnn/cpp/ttnn/operations/experimental/matmul/): a is
    [1, q_heads, batch, K], b is [batch, kv_heads, K, N]; each query head h uses kv head
    h // (q_heads / kv_heads): ``torch.matmul(a.transpose(0, 2), b).transpose(0, 2)`` per group,
    out [1, q_heads, batch, N]. With ``num_tokens`` b is a cache read up to that many positions
    on dim 2 (transposed to [.., D, num_tokens] when ``transpose_hw``)."""
    sa, sb = tuple(a._shape), tuple(b._shape)

    def fail(rule: str, fix: str) -> ShapeMismatchError:
        return ShapeMismatchError(
            f"ttnn.experimental.{op}: {rule} (a {list(sa)}, b {list(sb)}).\nfix: {fix}"
        )

    if len(sa) != 4 or len(sb) != 4:
        raise fail("inputs are 4-D", "a [1, q_heads, batch, K], b [batch, kv_heads, K, N].")
    if sa[0] != 1:
        raise fail("Input q_len must be 1!", "decode one token: a is [1, q_heads, batch, K].")
    if sb[1] == 0 or sa[1] % sb[1]:
        raise fail("Number of q_heads must be divisible by kv_heads!", "group whole kv heads.")
    if sa[2] != sb[0]:
        raise fail("Num of users must match!", "a's dim 2 and b's dim 0 are the batch.")
    if num_tokens is not None:
        n = int(num_tokens)
        if n % 32 or not 0 < n <= sb[2]:
            raise fail(
                f"num_tokens {n} must be a multiple of 32 in (0, {sb[2]}]",
                "round the cache length read up to 32.",
            )
        k_dim = sb[3] if transpose_hw else n
        if sa[3] != k_dim:
            raise fail(f"dimension K (a.shape[3]) must be {k_dim}", "match the cache read.")
    elif sa[3] != sb[2]:
        raise fail("Dimension K (A.shape[3] and B.shape[2]) must match", "match K.")
    groups = sa[1] // sb[1]
    tr = bool(transpose_hw)

    def fn(x: Any, y: Any) -> Any:
        if num_tokens is not None:
            y = y[:, :, : int(num_tokens), :]
            if tr:
                y = jnp.swapaxes(y, -1, -2)
        y = jnp.repeat(y, groups, axis=1)  # [batch, q_heads, K, N]
        xb = jnp.swapaxes(x, 0, 2)  # [batch, q_heads, 1, K]
        out = jnp.matmul(xb, y, preferred_element_type=jnp.float32)
        return jnp.swapaxes(out, 0, 2).astype(x.dtype)

    out_dtype = check_dtype(op, dtype)
    return run_op(
        op,
        fn,
        [a, b],
        static=(num_tokens, tr),
        out_dtype=out_dtype,
        memory_config=memory_config,
    )


def attn_matmul(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    compute_with_storage_grid_size: Any = None,
    dtype: DataType | None = None,
    compute_kernel_config: Any = None,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
) -> Tensor:
    """``ttnn.experimental.attn_matmul``: a [1, q_heads, batch, K] times b [batch, 1, K, N]
    per user, out [1, q_heads, batch, N] (one kv head; see :func:`group_attn_matmul`)."""
    if len(input_tensor_b._shape) == 4 and input_tensor_b._shape[1] != 1:
        raise ShapeMismatchError(
            f"ttnn.experimental.attn_matmul: Number of kv_heads must be 1! (b "
            f"{list(input_tensor_b._shape)}).\nfix: use ttnn.experimental.group_attn_matmul."
        )
    out = _attn_product("attn_matmul", input_tensor_a, input_tensor_b, dtype, memory_config)
    return write_output(out, output_tensor)


def group_attn_matmul(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    compute_with_storage_grid_size: Any = None,
    memory_config: Any = None,
    dtype: DataType | None = None,
    compute_kernel_config: Any = None,
    optional_output_tensor: Tensor | None = None,
) -> Tensor:
    """``ttnn.experimental.group_attn_matmul``: a [1, q_heads, batch, K] times b
    [batch, kv_heads, K, N], query head h with kv head h // (q_heads / kv_heads), out
    [1, q_heads, batch, N] (TT-NN's ``torch.matmul(A.transpose(0, 2), B).transpose(0, 2)``)."""
    out = _attn_product("group_attn_matmul", input_tensor_a, input_tensor_b, dtype, memory_config)
    return write_output(out, optional_output_tensor)


def attn_matmul_from_cache(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    num_tokens: int,
    transpose_hw: bool,
    compute_with_storage_grid_size: Any = None,
    memory_config: Any = None,
    dtype: DataType | None = None,
    compute_kernel_config: Any = None,
) -> Tensor:
    """``ttnn.experimental.attn_matmul_from_cache``: :func:`attn_matmul` reading the first
    ``num_tokens`` (a multiple of 32) positions of the cache b [batch, 1, max_len, D], transposed
    for the pre-softmax product (``transpose_hw=True``: out [1, q_heads, batch, num_tokens])."""
    return _attn_product(
        "attn_matmul_from_cache",
        input_tensor_a,
        input_tensor_b,
        dtype,
        memory_config,
        num_tokens=num_tokens,
        transpose_hw=transpose_hw,
    )


def _sparse_layout(
    sa: tuple[int, ...], sb: tuple[int, ...], a_sparse: bool, b_sparse: bool
) -> tuple[int, int, tuple[int, ...]]:
    """``(batchA, batchB, output shape)`` of a sparse matmul, as TT-NN computes them: the output
    keeps A's batch dims unless both inputs are sparse, and B's unless only A is
    (``compute_sparse_matmul_output_shape``, ttnn/cpp/ttnn/operations/matmul/device/matmul_op.cpp);
    the kernel loops batchA x batchB (``sparse_matmul_multi_core_reuse_mcast_1d_optimized``:
    batchA is 1 when both are sparse, A's batch / B's batch when only A is, A's batch otherwise)."""
    bat_a = int(np.prod(sa[:-2], dtype=np.int64)) if len(sa) > 2 else 1
    bat_b = int(np.prod(sb[:-2], dtype=np.int64)) if len(sb) > 2 else 1
    a_dims = () if (a_sparse and b_sparse) or len(sa) <= 2 else sa[:-2]
    b_dims = () if (a_sparse and not b_sparse) or len(sb) <= 2 else sb[:-2]
    out = (*a_dims, *b_dims, sa[-2], sb[-1])
    if a_sparse and b_sparse:
        return 1, bat_b, out
    if a_sparse:
        return bat_a // bat_b, bat_b, out
    return bat_a, bat_b, out


def sparse_matmul(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    sparsity: Tensor,
    nnz: int | None = None,
    is_input_a_sparse: bool = False,
    is_input_b_sparse: bool = True,
    memory_config: Any = None,
    dtype: DataType | None = None,
    program_config: Any = None,
    compute_kernel_config: Any = None,
    core_grid: Any = None,
    output_tile: Any = None,
    optional_output_tensor: Tensor | None = None,
    global_cb: Any = None,
    sub_device_id: Any = None,
) -> Tensor:
    """TT-NN's expert matmul: the batched products whose ``sparsity`` entry is non-zero.

    ``sparsity`` holds batchA x batchB entries (a row of batchB per A batch; only zero vs non-zero
    counts, as TT-NN's kernels test the bfloat16 bits against 0). Only B sparse (the default):
    ``out[a..., b..., :, :] = A[a] @ B[b]``; both sparse: ``out[b] = A[b] @ B[b]``; only A:
    ``out[a, b] = A[a, b] @ B[b]`` with A's batch dims kept. Skipped blocks are zeros (TT-NN
    leaves them unwritten). ``nnz`` is how many entries are non-zero on each device; TT-NN's
    compute kernel runs exactly that many products, so a wrong count is an error here.

    >>> w = ttnn.from_torch(torch.ones(1, 4, 32, 16), device=mesh, layout=ttnn.TILE_LAYOUT)
    >>> s = ttnn.from_torch(torch.tensor([[[[0.5, 0.0, 0.0, 0.5]]]]), device=mesh)
    >>> ttnn.sparse_matmul(ttnn.to_layout(x, ttnn.TILE_LAYOUT), w, sparsity=s, nnz=2).shape
    Shape([1, 1, 1, 4, 32, 16])
    """
    op = "sparse_matmul"
    out_dtype = check_dtype(op, dtype)
    for name, t in (("input_tensor_a", input_tensor_a), ("input_tensor_b", input_tensor_b)):
        if isinstance(t, Tensor) and t._spec.layout is not Layout.TILE:
            raise LayoutError(
                f"ttnn.{op}: {name} is in {t._spec.layout!r}; TT-NN's sparse matmul reads tiles."
                "\nfix: ttnn.to_layout(t, ttnn.TILE_LAYOUT) first."
            )
    if isinstance(sparsity, Tensor) and sparsity._spec.layout is not Layout.ROW_MAJOR:
        raise LayoutError(
            f"ttnn.{op}: sparsity is in {sparsity._spec.layout!r}; TT-NN reads it a row per page."
            "\nfix: ttnn.to_layout(sparsity, ttnn.ROW_MAJOR_LAYOUT) first."
        )
    if program_config is not None and not isinstance(
        program_config, MatmulMultiCoreReuseMultiCast1DProgramConfig
    ):
        raise ConfigError(
            f"ttnn.{op}: Unsupported program config {type(program_config).__name__} (TT-NN runs "
            "the sparse matmul with the 1D multicast kernel only).\nfix: pass a "
            "ttnn.MatmulMultiCoreReuseMultiCast1DProgramConfig, or program_config=None."
        )
    if output_tile is not None:
        tile = as_tile(op, output_tile)
        if tile.tile_shape != [TILE_SIZE, TILE_SIZE]:  # get_output_tile, matmul_op.cpp
            raise ConfigError(
                f"ttnn.{op}: output_tile {tile.tile_shape}: the override output tile height must "
                f"equal the in0 tile height ({TILE_SIZE}) and its width the in1 tile width "
                f"({TILE_SIZE}) for an interleaved output.\nfix: output_tile=ttnn.Tile([32, 32])."
            )
    sa, sb = tuple(input_tensor_a._shape), tuple(input_tensor_b._shape)
    a_sp, b_sp = bool(is_input_a_sparse), bool(is_input_b_sparse)

    def fail(rule: str, fix: str) -> ShapeMismatchError:
        return ShapeMismatchError(
            f"ttnn.{op}: {rule} (a {list(sa)}, b {list(sb)}, sparsity "
            f"{list(sparsity._shape)}).\nfix: {fix}"
        )

    if len(sa) < 2 or len(sb) < 2 or tile_padded(sa)[-1] != tile_padded(sb)[-2] or sa[-1] != sb[-2]:
        raise fail("Dimension K of A (its last dim) and B's rows must match", "transpose or pad")
    bat_a, bat_b, out_shape = _sparse_layout(sa, sb, a_sp, b_sp)
    full_a = int(np.prod(sa[:-2], dtype=np.int64)) if len(sa) > 2 else 1
    if (a_sp and b_sp and full_a != bat_b) or (a_sp and not b_sp and full_a % bat_b):
        raise fail(
            "with A sparse, A's batch dims must hold B's batch (a block of A per expert)",
            "give A and B the same batch dims",
        )
    batch = bat_a * bat_b
    if int(np.prod(sparsity._shape, dtype=np.int64)) != batch:
        raise fail(
            f"sparsity.logical_volume() must be equal to the product of all batch dimensions "
            f"({batch})",
            f"give sparsity {bat_a} row(s) of {bat_b} entries",
        )
    if sparsity._shape[-1] != bat_b:
        raise fail(
            f"each sparsity row (a page) must hold B's {bat_b} batch entries",
            f"reshape sparsity to [..., {bat_a}, {bat_b}]",
        )
    if nnz is not None and not 0 < int(nnz) <= batch:
        raise fail(
            f"nnz ({nnz}) must be greater than 0 and at most the length of all batch dimensions "
            f"({batch})",
            "pass the number of non-zero sparsity entries (or nnz=None to count them)",
        )
    if nnz is not None and not is_traced(sparsity) and not capture_active():
        counts = np.count_nonzero(host_blocks(sparsity).reshape(-1, batch), axis=1)
        if (counts != int(nnz)).any():
            raise fail(
                f"nnz={nnz} but the sparsity tensor has {sorted(set(counts.tolist()))} non-zero "
                "entries per device (TT-NN's compute kernel would run nnz products and wait for "
                "the rest)",
                "pass nnz equal to each device's count of non-zero entries, or nnz=None",
            )

    def fn(a: Any, b: Any, s: Any) -> Any:
        m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
        b3 = b.reshape(bat_b, k, n)
        if a_sp and b_sp:
            y = _mm(a.reshape(bat_b, m, k), b3, False, False)  # [B, M, N]
        elif a_sp:
            y = _mm(a.reshape(bat_a, bat_b, m, k), b3[None], False, False)  # [A, B, M, N]
        else:
            y = _mm(a.reshape(bat_a, 1, m, k), b3[None], False, False)  # [A, B, M, N]
        keep = (s.reshape(y.shape[:-2]) != 0)[..., None, None]
        return jnp.where(keep, y, jnp.zeros((), y.dtype)).reshape(out_shape)

    out = run_op(
        op,
        fn,
        [input_tensor_a, input_tensor_b, sparsity],
        static=(a_sp, b_sp, bat_a, bat_b, out_shape),
        out_dtype=out_dtype or input_tensor_a._dtype,
        memory_config=DRAM_MEMORY_CONFIG if memory_config is None else memory_config,
    )
    return write_output(out, optional_output_tensor)
