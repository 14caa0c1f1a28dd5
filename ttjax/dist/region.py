"""Per-device regions (``dist.local``, a ``jax.shard_map``) and collectives by mesh-axis name.

Inside a region a function sees each device's local block; collectives name the axis they run
over, as in Tessera:

>>> @dist.local(mesh=mesh, out_layouts=dist.ShardSpec(partition=(0,), mesh_axes=("tp",)))
... def y(W_local, X_local):
...     return dist.all_reduce(op.matmul(W_local, X_local), axis="dp")

Sums (``all_reduce``, ``reduce_scatter``) follow the numerics policy (``ttjax.numerics``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from ttjax import numerics
from ttjax.dist.layout import ShardSpec, to_partition_spec
from ttjax.dist.mesh import Mesh
from ttjax.dist.padded import PaddedArray
from ttjax.errors import CCLError, ShardingError

_regions = threading.local()


def _stack() -> list[tuple[Mesh, tuple[str, ...]]]:
    if not hasattr(_regions, "stack"):
        _regions.stack = []
    return _regions.stack


def _is_layout(x: Any) -> bool:
    return x is None or isinstance(x, (ShardSpec, PartitionSpec))


def _infer_spec(mesh: Mesh, x: Any, path: str) -> PartitionSpec:
    if isinstance(x, jax.core.Tracer):
        raise ShardingError(
            f"dist.local: argument {path} is traced (inside jax.jit), so its layout is unknown.\n"
            "fix: pass in_layouts= (ShardSpec, PartitionSpec or None per argument)."
        )
    sharding = getattr(x, "sharding", None)
    if isinstance(sharding, NamedSharding) and not sharding.is_fully_replicated:
        if sharding.mesh.devices.shape != mesh.shape or tuple(sharding.mesh.axis_names) != tuple(
            mesh.axes
        ):
            raise ShardingError(
                f"dist.local: argument {path} is laid out on another mesh "
                f"{dict(sharding.mesh.shape)}, not {mesh.topology}.\nfix: create it on this mesh."
            )
        return sharding.spec
    return PartitionSpec()


def _specs(mesh: Mesh, layouts: Any, args: Any, infer: bool, divisible: bool = True) -> Any:
    if layouts is None and infer:
        paths = jax.tree_util.tree_flatten_with_path(args)[0]
        specs = [_infer_spec(mesh, x, f"args{jax.tree_util.keystr(p)}") for p, x in paths]
        return jax.tree.unflatten(jax.tree.structure(args), specs)
    return jax.tree.map(
        lambda lay, x: jax.tree.map(
            lambda leaf: to_partition_spec(lay, mesh, np.shape(leaf), divisible), x
        ),
        layouts,
        args,
        is_leaf=_is_layout,
    )


def _refuse_uneven(args: Any) -> None:
    paths = jax.tree_util.tree_flatten_with_path(
        args, is_leaf=lambda x: isinstance(x, PaddedArray)
    )[0]
    for path, x in paths:
        if isinstance(x, PaddedArray):
            raise ShardingError(
                f"dist.local: argument args{jax.tree_util.keystr(path)} of shape {x.shape} is "
                f"split unevenly by {x.spec} (blocks of {x.shard_shape}, stored as "
                f"{x.padded_shape}); a per-device region would see the zero padding of the last "
                "blocks as data.\nfix: make its split dims multiples of their mesh axes (e.g. "
                f"dist.tensor({x.padded_shape}, ...) and mask the padding yourself), or use it in "
                "the global view (jax.jit, graph.training_step), where XLA keeps the padding out."
            )


def local(
    fn: Callable[..., Any] | None = None,
    *,
    mesh: Mesh,
    in_layouts: Any = None,
    out_layouts: Any = None,
    axes: Sequence[str] | None = None,
) -> Any:
    """Run ``fn`` on every device's local blocks (a ``jax.shard_map`` over ``mesh``).

    ``in_layouts``: one ShardSpec/PartitionSpec/None per argument (a pytree prefix); omitted,
    they are read from the arguments' shardings (concrete arrays only). ``out_layouts``: the
    same for the results (default: replicated). ``axes``: the mesh axes the region maps over
    (default all); collectives over other axes are refused.
    """
    if fn is None:
        return functools.partial(
            local, mesh=mesh, in_layouts=in_layouts, out_layouts=out_layouts, axes=axes
        )
    mapped = tuple(mesh.axes) if axes is None else tuple(axes)
    for a in mapped:
        mesh.axis_index(a)

    def body(*local_args: Any) -> Any:
        _stack().append((mesh, mapped))
        try:
            return fn(*local_args)
        finally:
            _stack().pop()

    programs: dict[Any, Callable[..., Any]] = {}

    @functools.wraps(fn)
    def run(*args: Any) -> Any:
        _refuse_uneven(args)
        in_specs = _specs(mesh, in_layouts, args, infer=True)
        leaves, tree = jax.tree.flatten(args)
        key = (
            tree,
            tuple((np.shape(x), jnp.result_type(x)) for x in leaves),
            tuple(jax.tree.leaves(in_specs, is_leaf=_is_layout)),
        )
        program = programs.get(key)
        if program is None:
            program = programs[key] = _build(args, in_specs)
        try:
            return program(*args)
        except ValueError as e:
            if "out_specs" not in str(e):
                raise
            raise ShardingError(
                f"dist.local({getattr(fn, '__name__', 'fn')}): a result is not replicated over "
                f"a mesh axis its out_layouts leaves replicated.\n{str(e).splitlines()[0]}\n"
                "fix: all_reduce (or all_gather) it over that axis inside the region, or give "
                "out_layouts that shard it over the axis."
            ) from None

    def _build(args: Any, in_specs: Any) -> Callable[..., Any]:
        if out_layouts is None:
            out_specs: Any = PartitionSpec()
        else:
            local_out = jax.eval_shape(
                jax.shard_map(
                    body,
                    mesh=mesh.jax_mesh,
                    in_specs=tuple(in_specs),
                    out_specs=PartitionSpec(),
                    axis_names=set(mapped),
                    check_vma=False,
                ),
                *jax.tree.map(
                    lambda x: jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x)), args
                ),
            )
            out_specs = _specs(mesh, out_layouts, local_out, infer=False, divisible=False)
        mapped_fn = jax.shard_map(
            body,
            mesh=mesh.jax_mesh,
            in_specs=tuple(in_specs),
            out_specs=out_specs,
            axis_names=set(mapped),
        )
        return jax.jit(mapped_fn)

    return run


def _region(op: str, axis: Any) -> tuple[str, ...]:
    axes = (axis,) if isinstance(axis, str) else tuple(axis)
    stack = _stack()
    if not stack:
        raise CCLError(
            f"dist.{op}(axis={axis!r}) was called outside a dist.local region.\n"
            "fix: call it inside a function run by dist.local(fn, mesh=mesh)."
        )
    mesh, mapped = stack[-1]
    for a in axes:
        if a not in mesh.axes:
            raise CCLError(
                f"dist.{op}: axis {a!r} is not an axis of the mesh {list(mesh.axes)}.\n"
                f"fix: use one of {list(mapped)}."
            )
        if a not in mapped:
            raise CCLError(
                f"dist.{op}: axis {a!r} is not mapped by this dist.local region (it maps "
                f"{list(mapped)}); devices along {a!r} are not split apart here.\n"
                f"fix: add {a!r} to dist.local(..., axes=...), or reduce over {list(mapped)}."
            )
    return axes


def all_reduce(x: Any, axis: Any, op: str = "sum", local: str | None = None) -> Any:
    """Combine ``x`` over the devices along ``axis`` (``sum``, ``mean``, ``max``, ``min``).

    ``local``: the intra-node axis among ``axis`` for a hierarchical sum (``sum``/``mean``):
    reduce-scatter over ``local``, all-reduce over the other (node) axes, all-gather over
    ``local``, so only ``1/size(local)`` of ``x`` crosses nodes
    (``ttjax.numerics.psum_hierarchical``).

    >>> dist.all_reduce(g, axis=("node", "local"), local="local")
    """
    axes = _region("all_reduce", axis)
    if local is not None:
        if local not in axes or op not in ("sum", "mean"):
            raise CCLError(
                f"dist.all_reduce(axis={axis!r}, op={op!r}, local={local!r}): a hierarchical "
                "all-reduce sums over axes that include local.\nfix: op='sum' or 'mean' and "
                f"local= one of {list(axes)}."
            )
        total = numerics.psum_hierarchical(x, axes, local)
        if op == "sum":
            return total
        n = numerics.group_size(axes)
        return jax.tree.map(lambda s: (s / n).astype(s.dtype), total)
    if op == "sum":
        return numerics.psum(x, axes)
    if op == "mean":
        return numerics.pmean(x, axes)
    if op in ("max", "min"):
        return (lax.pmax if op == "max" else lax.pmin)(x, axes)
    raise CCLError(f"dist.all_reduce: op={op!r} is unknown.\nfix: 'sum', 'mean', 'max' or 'min'.")


def reduce_scatter(x: Any, axis: Any, dim: int = 0) -> Any:
    """Sum over ``axis`` and keep this device's ``1/n`` slice along ``dim``."""
    axes = _region("reduce_scatter", axis)
    return numerics.psum_scatter(x, axes, scatter_dimension=dim, tiled=True)


def all_gather(x: Any, axis: Any, dim: int = 0) -> Any:
    """Concatenate the blocks of the devices along ``axis`` on ``dim`` (device order).

    JAX types the result as per-device: return it with an out layout sharded over ``axis``, or
    use it inside the region (only sums, ``all_reduce``, come back as replicated)."""
    axes = _region("all_gather", axis)
    return numerics.all_gather(x, axes, axis=dim, tiled=True)


def _shift(op: str, x: Any, axis: str, k: int) -> Any:
    (name,) = _region(op, axis)
    n = lax.axis_size(name)
    perm = [(i, i + k) for i in range(n) if 0 <= i + k < n]
    return lax.ppermute(x, name, perm)


def send(x: Any, axis: str, to: int = 1) -> Any:
    """Pipeline send: every device sends ``x`` to the device ``to`` steps along ``axis``; returns
    what this device received (zeros where nobody sends, e.g. on the first stage)."""
    return _shift("send", x, axis, to)


def recv(x: Any, axis: str, frm: int = -1) -> Any:
    """Pipeline receive from the device ``frm`` steps along ``axis`` (the same step as
    ``send(x, axis, to=-frm)`` seen from the receiver)."""
    return _shift("recv", x, axis, -frm)


def axis_index(axis: str) -> Any:
    """This device's position along ``axis`` (inside a region)."""
    _region("axis_index", axis)
    return lax.axis_index(axis)


def per_replica(x: Any, axis: str) -> Any:
    """Give every device along ``axis`` its own copy of replicated ``x`` (e.g. parameters), so
    gradients stay per replica until an explicit ``all_reduce(grads, axis, op="mean")``."""
    _region("per_replica", axis)
    return jax.tree.map(lambda a: lax.pcast(a, axis, to="varying"), x)


__all__ = [
    "all_gather",
    "all_reduce",
    "axis_index",
    "local",
    "per_replica",
    "recv",
    "reduce_scatter",
    "send",
]
