"""The Galaxy Llama's fused collective + head split ops: ``llama_rs_create_heads`` (a sum
reduce-scatter of the decode QKV over users, then the heads) and ``all_reduce_create_qkv_heads``
(an all-reduce, then ``nlp_create_qkv_heads_decode``), on :mod:`ttjax.ccl`'s values."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import DataType, Layout, ReduceType, Topology
from ttjax._src.core.errors import CCLError, MemoryConfigError, ShapeMismatchError
from ttjax._src.core.hardware import (
    CoreRangeSet,
    MemoryConfig,
    ShardSpec,
    TensorMemoryLayout,
    num_cores_to_corerangeset_in_subcoregrids,
)
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import ccl
from ttjax._src.ttnn.ccl_async.checks import _check_common, _check_group
from ttjax._src.ttnn.ccl_async.resolve import _overload, _resolve
from ttjax._src.ttnn.ops.common import core_set
from ttjax._src.ttnn.ops.fused import nlp_create_qkv_heads_decode
from ttjax._src.ttnn.ops.memory import to_memory_config
from ttjax._src.ttnn.ops.pointwise import typecast


def _qkv_configs(
    qkv: MemoryConfig, batch: int, shard: tuple[int, int], kv_shard: tuple[int, int]
) -> tuple[MemoryConfig, MemoryConfig, MemoryConfig]:
    """Q, K and V height-sharded one user a core, from the start of ``qkv``'s grid: Q on the first
    ``batch`` cores, K after Q's cores and one more, V after 2 * batch + 1 (both ops'
    ``compute_output_specs``, num_cores_to_corerangeset_in_subcoregrids row-wise)."""
    sub = qkv.shard_spec.grid  # type: ignore[union-attr]
    if not isinstance(sub, CoreRangeSet):
        sub = CoreRangeSet([sub])
    start = sub.bounding_box().start

    def grid(at: Any, n: int) -> Any:
        return num_cores_to_corerangeset_in_subcoregrids(at, n, sub, row_wise=True)

    def end_of(n: int) -> Any:
        ranges = grid(start, n).ranges()
        return ranges[-1].end if ranges else start

    grids = (grid(start, batch), grid(end_of(batch + 1), batch), grid(end_of(2 * batch + 1), batch))
    orient = qkv.shard_spec.orientation  # type: ignore[union-attr]
    return tuple(  # type: ignore[return-value]
        MemoryConfig(qkv.memory_layout, qkv.buffer_type, ShardSpec(g, s, orient))
        for g, s in zip(grids, (shard, kv_shard, kv_shard))
    )


def _shard_height(op: str, name: str, mc: Any, want: int = 32) -> None:
    spec = getattr(mc, "shard_spec", None)
    if spec is None:
        raise MemoryConfigError(
            f"ttnn.experimental.{op}: {name} must have a shard spec (got {mc!r}).\nfix: give it a "
            "sharded memory config with a ShardSpec, as the Galaxy Llama's configs do."
        )
    if spec.shape[0] != want:
        raise MemoryConfigError(
            f"ttnn.experimental.{op}: {name} shard height must be {want} but got "
            f"{spec.shape[0]}.\nfix: shard it in rows of {want} (one tile)."
        )


def _llama_rs_heads(
    input_tensor,
    intermediate_packet_buffer,
    dim,
    cross_device_semaphore,
    subdevice_id,
    cluster_axis,
    mesh_device,
    topology,
    *,
    num_links=1,
    num_heads,
    num_kv_heads,
    memory_config=None,
    qkv_memory_config=None,
    use_noc1_only=False,
    use_optimal_ccl_for_llama=False,
): ...


_LLAMA_RS_HEADS = (
    _overload(
        _llama_rs_heads,
        input_tensor="Tensor",
        intermediate_packet_buffer="Tensor",
        dim="int",
        cross_device_semaphore="sem",
        subdevice_id="subdev",
        cluster_axis="uint",
        mesh_device="mesh",
        topology="topo",
        num_links="uint",
        num_heads="uint",
        num_kv_heads="uint",
        memory_config="mem?",
        qkv_memory_config="mem?",
        use_noc1_only="bool",
        use_optimal_ccl_for_llama="bool",
    ),
)


def llama_rs_create_heads(*args: Any, **kwargs: Any) -> tuple[Tensor, Tensor, Tensor]:
    """TT-NN's ``ttnn.experimental.llama_rs_create_heads`` (the Galaxy Llama's decode QKV): the
    decode QKV [1, 1, 32, (nh + 2 nkv) * d] partial sums of the ``cluster_axis`` row are summed
    and split over its devices by users (device j gets users j*32/n .. (j+1)*32/n - 1), then cut
    into q [1, 32/n, nh, d] and k, v of the same shape whose first nkv heads hold K / V (TT-NN
    writes only those rows; ttjax zeros the rest).

    ``(input_tensor, intermediate_packet_buffer, dim, cross_device_semaphore, subdevice_id,
    cluster_axis, mesh_device, topology, num_links=1, num_heads, num_kv_heads,
    memory_config=None, qkv_memory_config=None, use_noc1_only=False,
    use_optimal_ccl_for_llama=False)``. Rules and output specs:
    ttnn/cpp/ttnn/operations/experimental/ccl/llama_reduce_scatter_create_heads/ (the invoke's
    head_dim = width / (nh + 2 nkv), slice_size = rows / ring_devices; the device op's
    validate_on_program_cache_miss and compute_output_specs).
    """
    op = "llama_rs_create_heads"
    _, a = _resolve(op, _LLAMA_RS_HEADS, args, kwargs)
    t = _check_common(op, a, "cross_device_semaphore")
    axis = int(a["cluster_axis"])
    mesh: Any = t._mesh
    ring = tuple(mesh.shape)[axis] if axis < len(tuple(mesh.shape)) else 0
    if ring <= 1:
        raise CCLError(
            f"ttnn.experimental.{op}: reduce_scatter async op will only work for ring_devices > "
            f"1, but has {ring} (mesh {mesh!r}, cluster_axis={axis}).\nfix: run it on a mesh "
            "whose cluster axis has 2 or 4 devices."
        )
    nh, nkv = int(a["num_heads"]), int(a["num_kv_heads"])
    if len(t._shape) != 4 or nh + 2 * nkv == 0:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: input per-device shape {list(t._shape)} with num_heads="
            f"{nh}, num_kv_heads={nkv}.\nfix: pass the decode QKV [1, 1, users, width]."
        )
    width = -(-t._shape[-1] // 32) * 32 if t._layout is Layout.TILE else t._shape[-1]
    rows = -(-t._shape[-2] // 32) * 32 if t._layout is Layout.TILE else t._shape[-2]
    d, users = width // (nh + 2 * nkv), rows // ring
    dim = int(a["dim"]) % 4 if int(a["dim"]) < 0 else int(a["dim"])
    if dim != 3:
        raise CCLError(f"ttnn.experimental.{op}: dim must be 3, got {dim}.\nfix: dim=3.")
    if axis != 1:
        raise CCLError(
            f"ttnn.experimental.{op}: cluster_axis must be 1, got {axis}.\nfix: cluster_axis=1."
        )
    if ring not in (2, 4):
        raise CCLError(
            f"ttnn.experimental.{op}: ring_devices must be 4 or 2, got {ring} (mesh {mesh!r}).\n"
            "fix: run it on a mesh whose axis 1 has 2 or 4 devices."
        )
    _shard_height(op, "input_tensor", t.memory_config())
    buf = a["intermediate_packet_buffer"]
    if buf._mesh is None or not buf._mesh.same_mesh(mesh):
        raise CCLError(
            f"ttnn.experimental.{op}: intermediate_packet_buffer lives on {buf._mesh!r}, not on "
            f"the input's mesh {mesh!r}.\nfix: allocate it on the input's mesh device."
        )
    _shard_height(op, "intermediate_packet_buffer", buf.memory_config())
    qkv_mc = a["qkv_memory_config"]
    if qkv_mc is not None:
        _shard_height(op, "qkv_memory_config", qkv_mc)
    if t._shape[:2] != (1, 1) or t._shape[-1] != (nh + 2 * nkv) * d or t._shape[-2] != rows:
        raise ShapeMismatchError(
            f"ttnn.experimental.{op}: input per-device shape {list(t._shape)} is not [1, 1, "
            f"users, (num_heads + 2 * num_kv_heads) * head_dim] with tile-aligned users.\nfix: "
            "pass the fused QKV matmul's output."
        )
    summed = ccl.reduce_scatter(t, 2, ReduceType.Sum, cluster_axis=1, topology=a["topology"])

    def fn(x: Any) -> Any:
        x = jnp.reshape(x[0, 0], (users, nh + 2 * nkv, d))
        pad = jnp.zeros((users, nh - nkv, d), x.dtype)
        k = jnp.concatenate([x[:, nh : nh + nkv], pad], axis=1)
        v = jnp.concatenate([x[:, nh + nkv :], pad], axis=1)
        return x[None, :, :nh], k[None], v[None]

    outs = run_op(op, fn, [summed], static=(users, nh, nkv, d))
    if qkv_mc is None:
        return outs
    # TT-NN's spec says shards of [num_heads, d]; in TILE layout each is a [32, d] tile high
    # (TensorLayout's physical shard shape), which is what ttjax's memory configs hold.
    rows_per_core = -(-nh // 32) * 32
    cfgs = _qkv_configs(qkv_mc, users, (rows_per_core, d), (rows_per_core, d))
    return tuple(to_memory_config(o, mc) for o, mc in zip(outs, cfgs))  # type: ignore[return-value]


def _ar_heads(
    input_tensor,
    buffer_tensor,
    batch_offset,
    cluster_axis,
    mesh_device,
    multi_device_global_semaphore,
    num_heads,
    *,
    memory_config=None,
    topology=Topology.Linear,
    num_links=None,
    subdevice_id=None,
    num_kv_heads=None,
    slice_size=None,
    final_memory_config=None,
    dtype=None,
    use_noc1_only=False,
): ...


_AR_HEADS = (
    _overload(
        _ar_heads,
        input_tensor="Tensor",
        buffer_tensor="Tensor",
        batch_offset="Tensor",
        cluster_axis="uint",
        mesh_device="mesh",
        multi_device_global_semaphore="sem",
        num_heads="uint",
        memory_config="mem?",
        topology="topo",
        num_links="uint?",
        subdevice_id="subdev?",
        num_kv_heads="uint?",
        slice_size="uint?",
        final_memory_config="mem?",
        dtype="dtype?",
        use_noc1_only="bool",
    ),
)


def all_reduce_create_qkv_heads(*args: Any, **kwargs: Any) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """TT-NN's ``ttnn.experimental.all_reduce_create_qkv_heads``: the decode QKV [1, 1, B, width]
    summed over ``cluster_axis`` (returned first, in ``memory_config``), then its heads as
    ``nlp_create_qkv_heads_decode`` cuts them: q [1, S, nh, d], k and v [1, S, nkv, d] of users
    ``batch_offset .. batch_offset + slice_size - 1`` (S = slice_size, else B).

    ``(input_tensor, buffer_tensor, batch_offset, cluster_axis, mesh_device,
    multi_device_global_semaphore, num_heads, *, memory_config=None, topology=Linear,
    num_links=None, subdevice_id=None, num_kv_heads=None, slice_size=None,
    final_memory_config=None, dtype=None, use_noc1_only=False)``. Rules and output specs:
    ttnn/cpp/ttnn/operations/experimental/transformer/all_reduce_create_qkv_heads/ (the invoke and
    AllReduceCreateQkvHeads::validate / compute_output_specs).
    """
    op = "all_reduce_create_qkv_heads"
    _, a = _resolve(op, _AR_HEADS, args, kwargs)
    t = _check_common(op, a, "multi_device_global_semaphore")
    nh = int(a["num_heads"])
    nkv = int(a["num_kv_heads"]) if a["num_kv_heads"] is not None else nh
    n = _check_group(op, t, a["cluster_axis"])

    def fail(rule: str, fix: str, cls: type[Exception] = MemoryConfigError) -> Exception:
        return cls(f"ttnn.experimental.{op}: {rule}.\nfix: {fix}")

    if len(t._shape) != 4:
        raise fail(f"Input Tensor dim must be 4 while given dim = {len(t._shape)}",
                   "pass the decode QKV [1, 1, users, width].", ShapeMismatchError)  # fmt: skip
    if t._shape[3] % (nh + 2 * nkv):
        raise fail(f"Input shape {list(t._shape)} must be divisible by num_heads + 2*num_kv_heads "
                   f"= {nh + 2 * nkv}", "pass the heads per device.", ShapeMismatchError)  # fmt: skip
    if n % 2:
        raise fail("AllReduceAsync currently only supports even number of blocks in the "
                   f"reduction kernel ({n} devices on the cluster axis)",
                   "reduce over an even number of devices.", CCLError)  # fmt: skip
    out_mc = a["memory_config"] or t.memory_config()
    buf = a["buffer_tensor"]
    if buf._mesh is None or not buf._mesh.same_mesh(t._mesh):
        raise fail(f"buffer_tensor lives on {buf._mesh!r}, not on the input's mesh "
                   f"{t._mesh!r}", "allocate it on the input's mesh device.", CCLError)  # fmt: skip
    width_sharded = TensorMemoryLayout.WIDTH_SHARDED
    for name, mc in (("input tensor", t.memory_config()), ("buffer tensor", buf.memory_config()),
                     ("output tensor", out_mc)):  # fmt: skip
        if mc.memory_layout is not width_sharded:
            raise fail(f"Unsupported memory layout for {name} {mc.memory_layout!r}",
                       "width-shard it, as the Galaxy Llama's configs do.")  # fmt: skip
    out_spec, buf_spec = out_mc.shard_spec, buf.memory_config().shard_spec
    if out_spec is not None and buf_spec is not None:
        if not core_set(out_spec.grid) <= core_set(buf_spec.grid):
            raise fail("The output tensor must reside on a subset of the cores of the buffer "
                       "tensor", "put the output's shard grid inside the buffer's.")  # fmt: skip
        need = out_spec.shape[0] * out_spec.shape[1] * n
        if need > buf_spec.shape[0] * buf_spec.shape[1]:
            raise fail(f"The shard size for the buffer must be large enough to hold the "
                       f"intermediate tensor. Require at least {need} but has "
                       f"{buf_spec.shape[0] * buf_spec.shape[1]}",
                       "give the buffer larger shards.")  # fmt: skip
    dtype = a["dtype"] if a["dtype"] is not None else t._dtype
    if dtype is not DataType.BFLOAT16:
        raise fail(f"Unsupported data format{dtype!r}, currently only bfloat16 is supported",
                   "dtype=ttnn.bfloat16.")  # fmt: skip
    final = a["final_memory_config"] or t.memory_config()
    if not final.is_sharded() or final.memory_layout is not TensorMemoryLayout.HEIGHT_SHARDED:
        raise fail("Output tensor must be height sharded",
                   "final_memory_config: a HEIGHT_SHARDED config.")  # fmt: skip
    reduced = ccl.all_reduce(t, a["cluster_axis"], topology=a["topology"], memory_config=out_mc)
    if reduced._dtype is not dtype:
        reduced = typecast(reduced, dtype)
    q, k, v = nlp_create_qkv_heads_decode(
        reduced,
        num_heads=nh,
        num_kv_heads=nkv,
        batch_offset=a["batch_offset"] if a["slice_size"] is not None else None,
        slice_size=a["slice_size"],
    )
    if final.shard_spec is None:
        return reduced, q, k, v
    padded = -(-nh // 32) * 32  # TT-NN pads K's and V's shards by num_heads too
    cfgs = _qkv_configs(final, q._shape[1], (padded, q._shape[3]), (padded, q._shape[3]))
    q, k, v = (to_memory_config(x, mc) for x, mc in zip((q, k, v), cfgs))
    return reduced, q, k, v
