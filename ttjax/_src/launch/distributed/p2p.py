"""Send a tensor from one mesh to another (multi-mesh pipelines), as one collective of the job.

The implementation of :mod:`ttjax.distributed.p2p`, whose docstring says more.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ttjax._src.core.enums import StorageType
from ttjax._src.core.errors import MeshMismatchError, TTJaxError
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.tensor import Tensor
from ttjax._src.launch.distributed import runtime

_PAIR = "_p2p"


@functools.lru_cache(maxsize=64)
def _program(mesh: Mesh, spec: P) -> Any:
    def move(x: Any) -> Any:
        return jax.lax.ppermute(x, _PAIR, perm=[(0, 1)])

    return jax.jit(jax.shard_map(move, mesh=mesh, in_specs=spec, out_specs=spec))


def _check(t: Any, what: str) -> tuple[Tensor, MeshDevice]:
    mesh = t.mesh_device if isinstance(t, Tensor) else None
    if mesh is None:
        raise TTJaxError(
            f"ttjax.distributed.{what} needs a tensor on a mesh, got {type(t).__name__}.\n"
            "fix: place it with ttnn.from_torch(..., device=mesh)."
        )
    if t.dtype.is_block_float:
        raise TTJaxError(
            f"ttjax.distributed.{what}: block-float tensors ({t.dtype}) cannot be sent yet.\n"
            "fix: ttnn.typecast(t, ttnn.bfloat16) before sending."
        )
    return t, mesh


def _pair_mesh(local: MeshDevice, local_mesh: int, other_mesh: int, local_first: bool) -> Mesh:
    env = runtime.current()
    if other_mesh == local_mesh:
        raise MeshMismatchError(
            f"Rank {env.process_id} would send to its own mesh {local_mesh}.\n"
            "fix: send/recv move tensors between different meshes; within a mesh use "
            "ttnn.point_to_point."
        )
    mine = runtime.mesh_devices(local_mesh)
    if list(local.get_devices()) != mine:
        raise MeshMismatchError(
            f"The tensor lives on {local!r}, not on the whole of mesh {local_mesh} "
            f"({len(mine)} devices).\nfix: send tensors placed on the mesh from open_mesh_device()."
        )
    other = runtime.mesh_devices(other_mesh)
    if len(other) != len(mine):
        raise MeshMismatchError(
            f"Mesh {local_mesh} has {len(mine)} devices but mesh {other_mesh} has {len(other)}.\n"
            "fix: pipeline stages exchanging tensors must have meshes of the same size."
        )
    here = np.array(local.get_devices(), dtype=object).reshape(tuple(local.shape))
    there = np.array(other, dtype=object).reshape(tuple(local.shape))
    grid = np.stack([here, there] if local_first else [there, here])
    return Mesh(grid, (_PAIR, *local.axis_names))


def _exchange(t: Tensor, mesh: Mesh, fill_zeros: bool) -> jax.Array:
    value = t.value
    spec = tuple(value.sharding.spec) + (None,) * (value.ndim - len(value.sharding.spec))
    pair_spec = P(_PAIR, *spec)
    sharding = NamedSharding(mesh, pair_spec)
    blocks = []
    for s in value.addressable_shards:
        data = jax.numpy.zeros_like(s.data) if fill_zeros else s.data
        blocks.append(jax.device_put(data[None], s.device))
    glob = jax.make_array_from_single_device_arrays((2, *value.shape), sharding, blocks)
    return _program(mesh, pair_spec)(glob)


def send(tensor: Tensor, to_mesh: int) -> None:
    """Send ``tensor`` (on this rank's mesh) to the ranks of mesh ``to_mesh``, which call recv."""
    t, local = _check(tensor, "send")
    env = runtime.current()
    out = _exchange(t, _pair_mesh(local, env.mesh_id, to_mesh, local_first=True), False)
    out.block_until_ready()


def recv(template: Tensor, from_mesh: int) -> Tensor:
    """Receive the tensor mesh ``from_mesh`` sends; ``template`` (on this mesh) gives its layout.

    The template plays the role of TT-NN's ``optional_output_tensor``: same shape, dtype and mesh
    mapping as the sender's tensor (e.g. from ``ttnn.allocate_tensor_on_device``).
    """
    t, local = _check(template, "recv")
    env = runtime.current()
    mesh = _pair_mesh(local, env.mesh_id, from_mesh, local_first=False)
    out = _exchange(t, mesh, True)
    blocks = [s.data[0] for s in out.addressable_shards]
    by_device = dict(zip([s.device for s in out.addressable_shards], blocks))
    value = t.value
    data = jax.make_array_from_single_device_arrays(
        value.shape, value.sharding, [by_device[s.device] for s in value.addressable_shards]
    )
    return Tensor(data, t.spec.replace(storage=StorageType.DEVICE))


__all__ = ["recv", "send"]
