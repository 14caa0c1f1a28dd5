"""TT-NN's MoE token routing collectives, ``all_to_all_dispatch`` and ``all_to_all_combine``.

Dispatch sends each token to the devices holding one of its top-k experts; combine sends the
experts' rows back. Both validate through :mod:`ttjax.ccl`'s shared call checks and run as one
op inside ``jax.shard_map``.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jax import lax

from ttjax._src.core.dispatch import run_op
from ttjax._src.core.enums import DataType, Layout, Topology
from ttjax._src.core.errors import CCLError, MeshMismatchError
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn.ccl import _Call, _prepare, _rule


def _linear_device_index(mesh: MeshDevice) -> Any:
    """This device's row-major index on the mesh (TT-NN's ``linearized_mesh_coord``), traced."""
    index: Any = 0
    for name, size in zip(mesh.axis_names, mesh.shape):
        index = index * size + lax.axis_index(name)
    return index


def _moe_tensor(op: str, name: str, t: Any, c: _Call, dtypes: tuple[DataType, ...]) -> Tensor:
    if not isinstance(t, Tensor) or t._mesh is not c.mesh:
        raise MeshMismatchError(
            f"ttnn.{op}: {name} must be a ttnn Tensor on the same mesh as input_tensor.\n"
            "fix: ttnn.from_torch(..., device=mesh_device)."
        )
    if t._spec.layout is not Layout.ROW_MAJOR:
        raise CCLError(
            f"ttnn.{op}: {name} must be in row major layout, got {t._spec.layout!r}.\n"
            f"fix: ttnn.to_layout({name}, ttnn.ROW_MAJOR_LAYOUT)."
        )
    if dtypes and t._dtype not in dtypes:
        raise CCLError(
            f"ttnn.{op}: {name} must be {' or '.join(d.name.lower() for d in dtypes)}, got "
            f"{t._dtype!r}.\nfix: convert it with dtype=ttnn.{dtypes[0].name.lower()}."
        )
    if len(t._shape) != 4:
        raise CCLError(
            f"ttnn.{op}: {name} must be rank 4, got shape {list(t._shape)}.\n"
            "fix: ttnn.reshape it to 4 dims, as TT-NN requires."
        )
    return t


def _mapping(op: str, mapping: Any, c: _Call) -> Tensor:
    m = _moe_tensor(op, "expert_mapping_tensor", mapping, c, (DataType.UINT16,))
    devices = c.mesh.get_num_devices()
    if m._shape[0] != 1 or m._shape[1] != 1 or m._shape[3] != devices:
        raise CCLError(
            f"ttnn.{op}: expert_mapping_tensor must be [1, 1, experts, {devices}] per device (one "
            f"column per device of the mesh), got {list(m._shape)}.\nfix: a one-hot map "
            "torch.eye(devices).repeat_interleave(experts_per_device, 0)[None, None], replicated."
        )
    return m


def _refuse_outputs(op: str, given: Any) -> None:
    if given is not None:
        raise CCLError(
            f"ttnn.{op}: preallocated output tensors are not supported by ttjax (its outputs are "
            "new arrays).\nfix: drop the output tensor argument and use the returned tensor(s)."
        )


def all_to_all_dispatch(
    input_tensor: Tensor,
    expert_indices_tensor: Tensor,
    expert_mapping_tensor: Tensor,
    *,
    output_concat_dim: int | None = 1,
    cluster_axis: int | None = None,
    subdevice_id: Any = None,
    memory_config: Any = None,
    output_tensors: Any = None,
    num_links: int | None = None,
    topology: Topology | None = None,
) -> tuple[Tensor, Tensor]:
    """Send each token to the devices (of its ``cluster_axis`` group) that hold one of its top-k
    experts; return ``(tokens [1, B*n, S, H], metadata [1, B*n, S, K])`` per device.

    Every device of the group sees the group's tokens in device order (TT-NN's ``global_token``):
    a row holds the token where one of its experts maps to this device (``expert_mapping_tensor``
    [1, 1, E, devices], one-hot by row-major device index), zeros elsewhere (TT-NN leaves those
    rows unwritten); the metadata is every token's expert indices. TT-NN:
    ttnn/cpp/ttnn/operations/ccl/all_to_all_dispatch/ (``compute_output_specs``, the writer kernel).

    >>> eye = torch.eye(8, dtype=torch.int32).repeat_interleave(2, dim=0)[None, None]
    >>> mapping = ttnn.from_torch(eye, dtype=ttnn.uint16, device=mesh)  # 2 experts a device
    >>> tok = ttnn.from_torch(torch.rand(2, 1, 1, 32), dtype=ttnn.bfloat16, device=mesh)
    >>> top2 = torch.tensor([[0, 5], [3, 9]], dtype=torch.int32).reshape(2, 1, 1, 2)
    >>> idx = ttnn.from_torch(top2, dtype=ttnn.uint16, device=mesh)
    >>> rows, meta = ttnn.all_to_all_dispatch(tok, idx, mapping, cluster_axis=0)
    >>> rows.shape, meta.shape
    (Shape([1, 4, 1, 32]), Shape([1, 4, 1, 2]))
    """
    op = "all_to_all_dispatch"
    kwargs = {"subdevice_id": subdevice_id} if subdevice_id is not None else {}
    c = _prepare(op, input_tensor, kwargs, cluster_axis, None, topology)
    _refuse_outputs(op, output_tensors)
    if num_links is not None and num_links <= 0:
        raise CCLError(f"ttnn.{op}: Number of links must be greater than 0, got {num_links}.")
    x = _moe_tensor(op, "input_tensor", c.t, c, ())
    idx = _moe_tensor(op, "expert_indices_tensor", expert_indices_tensor, c, ())
    mapping = _mapping(op, expert_mapping_tensor, c)
    sx, si = tuple(x._shape), tuple(idx._shape)
    if sx[:3] != si[:3]:
        raise CCLError(
            f"ttnn.{op}: Input and indices tensor must have the same shape for all dimensions "
            f"except the last, got {list(sx)} and {list(si)}.\nfix: one row of K indices per token."
        )
    concat = 1 if output_concat_dim is None else int(output_concat_dim)
    if concat not in (1, 2):
        raise CCLError(
            f"ttnn.{op}: Output concat dimension must be 1 or 2, got {output_concat_dim}.\n"
            "fix: output_concat_dim=1 (batch) or 2 (sequence)."
        )
    n, h, k = c.n, sx[-1], si[-1]
    tokens = sx[0] * sx[1] * sx[2]
    batch, seq = (sx[0] * n, si[2]) if concat == 1 else (sx[0], si[2] * n)
    if batch * seq != tokens * n:
        raise CCLError(
            f"ttnn.{op}: input {list(sx)} holds {tokens} tokens per device but TT-NN's output "
            f"[1, {batch}, {seq}, {h}] holds {batch * seq // n}: dim 1 must be 1.\n"
            "fix: reshape the tokens to [batch, 1, seq, hidden]."
        )
    mesh, names = c.mesh, c.names

    def fn(xl: Any, il: Any, ml: Any) -> Any:
        xs = lax.all_gather(xl.reshape(tokens, h), names, tiled=True) if n > 1 else xl
        ids = lax.all_gather(il.reshape(tokens, k), names, tiled=True) if n > 1 else il
        xs, ids = xs.reshape(n * tokens, h), ids.reshape(n * tokens, k)
        mine = ml[0, 0][:, _linear_device_index(mesh)] == 1  # [E]: experts on this device
        wanted = jnp.any(mine[ids.astype(jnp.int32)], axis=-1)  # [tokens]
        rows = jnp.where(wanted[:, None], xs, jnp.zeros((), xs.dtype))
        return rows.reshape(1, batch, seq, h), ids.reshape(1, batch, seq, k)

    out = run_op(
        op,
        fn,
        [x, idx, mapping],
        static=(c.axes, concat, batch, seq),
        placement_rule=_rule(c.axes, None),
        memory_config=memory_config,
    )
    return out[0], out[1]


def all_to_all_combine(
    input_tensor: Tensor,
    expert_metadata_tensor: Tensor,
    expert_mapping_tensor: Tensor,
    *,
    local_reduce: bool = False,
    output_shard_dim: int = 1,
    cluster_axis: int | None = None,
    subdevice_id: Any = None,
    memory_config: Any = None,
    output_tensor: Tensor | None = None,
    num_links: int | None = None,
    topology: Topology | None = None,
) -> Tensor:
    """The inverse of :func:`all_to_all_dispatch`: each expert's output row for a token goes back
    to the device that token came from, at the position ``k`` the expert has in the token's
    top-k (its first match); out ``[K, B/n, S, H]`` per device (``output_shard_dim=1``), rows of
    experts outside the group are zeros (TT-NN fills the output with zeros first).

    ``input_tensor`` is ``[experts_per_device, B, S, H]`` (the device's experts in index order),
    or ``[1, B, S, H]`` with ``local_reduce=True`` (already summed: sent once, at the first
    matching expert). TT-NN: ttnn/cpp/ttnn/operations/ccl/all_to_all_combine/ (validation, output
    spec, reader and writer kernels).

    >>> eye = torch.eye(8, dtype=torch.int32).repeat_interleave(2, dim=0)[None, None]
    >>> mapping = ttnn.from_torch(eye, dtype=ttnn.uint16, device=mesh)  # 2 experts a device
    >>> top2 = torch.tensor([[0, 5], [3, 9]] * 2, dtype=torch.int32).reshape(1, 4, 1, 2)
    >>> meta = ttnn.from_torch(top2, dtype=ttnn.uint16, device=mesh)  # as dispatch returns it
    >>> out = ttnn.from_torch(torch.rand(2, 4, 1, 32), dtype=ttnn.bfloat16, device=mesh)
    >>> ttnn.all_to_all_combine(out, meta, mapping, cluster_axis=0).shape
    Shape([2, 2, 1, 32])
    """
    op = "all_to_all_combine"
    kwargs = {"subdevice_id": subdevice_id} if subdevice_id is not None else {}
    if cluster_axis is None:
        raise CCLError(
            f"ttnn.{op}: Axis must be specified at the moment.\nfix: cluster_axis=0 or 1."
        )
    c = _prepare(op, input_tensor, kwargs, cluster_axis, None, topology)
    _refuse_outputs(op, output_tensor)
    x = _moe_tensor(op, "input_tensor", c.t, c, (DataType.BFLOAT16,))
    meta = _moe_tensor(op, "expert_metadata_tensor", expert_metadata_tensor, c, (DataType.UINT16,))
    mapping = _mapping(op, expert_mapping_tensor, c)
    mesh, n, names = c.mesh, c.n, c.names
    devices = mesh.get_num_devices()
    sx, sm = tuple(x._shape), tuple(meta._shape)
    experts, batch, seq, k, h = mapping._shape[2], sm[1], sm[2], sm[3], sx[3]
    local = experts // devices
    rules = [
        (
            experts % devices == 0,
            f"Number of experts {experts} should be evenly divisible by devices: {devices}",
        ),
        (
            sx[0] == (1 if local_reduce else local),
            f"Expected input shape dim 0 to be {1 if local_reduce else local} (experts per device"
            f"{', locally reduced' if local_reduce else ''}), got {sx[0]}",
        ),
        (
            output_shard_dim in (1, 2),
            f"Output shard dimension must be 1 or 2, got {output_shard_dim}",
        ),
        (
            (batch if output_shard_dim == 1 else seq) % n == 0,
            f"{'Batch' if output_shard_dim == 1 else 'Sequence length'} "
            f"{batch if output_shard_dim == 1 else seq} must be divisible by axis group {n}",
        ),
        (sx[1:3] == sm[1:3], f"input {list(sx)} and metadata {list(sm)} must share [B, S]"),
    ]
    for ok, rule in rules:
        if not ok:
            raise CCLError(
                f"ttnn.{op}: {rule}.\nfix: the input is the experts' output for the metadata "
                "all_to_all_dispatch returned, on the same cluster_axis."
            )
    tokens = batch * seq
    out_shape = (k, batch // n, seq, h) if output_shard_dim == 1 else (k, batch, seq // n, h)
    slots = 1 if local_reduce else local

    def fn(xl: Any, metal: Any, ml: Any) -> Any:
        mine = ml[0, 0][:, _linear_device_index(mesh)] == 1
        expert_ids = jnp.nonzero(mine, size=local, fill_value=experts)[0]  # in index order
        ids = metal.reshape(tokens, k).astype(jnp.int32)
        match = ids[:, None, :] == expert_ids[None, :, None]  # [tokens, local, K]
        first_k = match & (jnp.cumsum(match, axis=-1) == 1)  # find_if: the first position
        found = jnp.any(match, axis=-1)  # [tokens, local]
        if local_reduce:  # one row per token, at the first matching expert
            first_e = found & (jnp.cumsum(found, axis=-1) == 1)
            first_k = first_k & first_e[..., None]
        rows = xl.reshape(slots, tokens, h)
        out = jnp.zeros((k, tokens, h), xl.dtype)
        for j in range(local):
            send = first_k[:, j, :].T[..., None]  # [K, tokens, 1]
            out = jnp.where(send, rows[0 if local_reduce else j][None], out)
        if n > 1:  # each (k, token) comes from one device of the group: a sum of one value
            out = lax.psum_scatter(out, names, scatter_dimension=1, tiled=True)
        return out.reshape(out_shape)

    return run_op(
        op,
        fn,
        [x, meta, mapping],
        static=(c.axes, bool(local_reduce), output_shard_dim),
        placement_rule=_rule(c.axes, None),
        memory_config=memory_config,
    )


__all__ = ["all_to_all_combine", "all_to_all_dispatch"]
