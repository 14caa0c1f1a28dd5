"""One parallelism plan: which mesh axis plays which role, and one table from logical axes to roles.

The implementation of :mod:`ttjax.plan`, whose docstring says more.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import jax
from jax.sharding import Mesh, PartitionSpec as P

from ttjax._src.core.errors import ParallelPlanError
from ttjax._src.core.fsdp import gather_sharded

#: Every role, in the order mesh axes are given out (TTML's DDP -> FSDP -> CP -> TP, then PP, EP).
ROLES: tuple[str, ...] = ("dp", "fsdp", "cp", "tp", "pp", "ep")

#: Logical axis -> role. A logical axis may appear more than once (it is then split over every
#: listed role that is in use, in this order); a logical axis with no rule is never split.
LOGICAL_AXIS_RULES: tuple[tuple[str, str], ...] = (
    ("batch", "dp"),
    ("batch", "fsdp"),
    ("embed", "fsdp"),
    ("seq", "cp"),
    ("vocab", "tp"),
    ("heads", "tp"),
    ("kv_heads", "tp"),
    ("mlp", "tp"),
    ("layers", "pp"),
    ("experts", "ep"),
)

#: Megatron sequence parallelism's one rule (:meth:`ParallelDims.with_sequence_parallel`): between
#: the TP pairs, the activations' sequence dimension splits over tp (``ttjax.ttml.sp``).
SEQUENCE_PARALLEL_RULE: tuple[str, str] = ("activation_seq", "tp")


@dataclass(frozen=True)
class LogicalAxes:
    """The logical name of each dimension of one parameter (``None``: never split).

    >>> LogicalAxes("vocab", "embed")
    LogicalAxes('vocab', 'embed')
    """

    names: tuple[str | None, ...]

    def __init__(self, *names: str | None) -> None:
        for n in names:
            if n is not None and not isinstance(n, str):
                raise ParallelPlanError(
                    f"LogicalAxes{names!r}: {n!r} is not an axis name.\n"
                    "fix: give one str (or None) per dimension, e.g. LogicalAxes('embed', 'mlp')."
                )
        object.__setattr__(self, "names", tuple(names))

    def __repr__(self) -> str:
        return f"LogicalAxes({', '.join(repr(n) for n in self.names)})"

    def __len__(self) -> int:
        return len(self.names)

    def prepend(self, *names: str | None) -> LogicalAxes:
        """The same axes with leading dimensions added, e.g. ``"layers"`` for stacked blocks."""
        return LogicalAxes(*names, *self.names)


def is_logical(x: Any) -> bool:
    """``is_leaf`` for pytrees of :class:`LogicalAxes`."""
    return isinstance(x, LogicalAxes)


_BOUND: contextvars.ContextVar[ParallelDims | None] = contextvars.ContextVar(
    "ttjax.plan bound plan", default=None
)


def _path_name(path: Sequence[Any]) -> str:
    return ".".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path)


@dataclass(frozen=True)
class ParallelDims:
    """The role (or ``None``) and size of each mesh axis; every parallelism rule is checked here.

    Make one from sizes (:meth:`from_sizes`, a mesh shaped by the roles) or from TTML's flags on
    a given mesh shape (:meth:`from_flags`).
    """

    shape: tuple[int, ...]
    roles: tuple[str | None, ...]
    rules: tuple[tuple[str, str], ...] = LOGICAL_AXIS_RULES

    def __post_init__(self) -> None:
        if len(self.shape) != len(self.roles):
            raise ParallelPlanError(
                f"ParallelDims: shape {self.shape} and roles {self.roles} differ in length.\n"
                "fix: give one role (or None) per mesh axis."
            )
        named = [r for r in self.roles if r is not None]
        for r in named:
            if r not in ROLES:
                raise ParallelPlanError(
                    f"ParallelDims: {r!r} is not a role.\nfix: use one of {', '.join(ROLES)}."
                )
        dup = sorted({r for r in named if named.count(r) > 1})
        if dup:
            raise ParallelPlanError(
                f"ParallelDims: role {dup[0]!r} is given more than one mesh axis {self.roles}.\n"
                "fix: each role takes its own mesh axis."
            )
        for logical, role in self.rules:
            if role not in ROLES:
                raise ParallelPlanError(
                    f"logical axis rule ({logical!r}, {role!r}) names no role.\n"
                    f"fix: map {logical!r} to one of {', '.join(ROLES)}."
                )

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_sizes(cls, **sizes: int) -> ParallelDims:
        """A mesh with one axis per role given, in :data:`ROLES` order: ``from_sizes(dp=2, tp=4)``."""
        bad = [r for r in sizes if r not in ROLES]
        if bad:
            raise ParallelPlanError(
                f"ParallelDims.from_sizes: {bad[0]!r} is not a role.\n"
                f"fix: use {', '.join(f'{r}=N' for r in ROLES)}."
            )
        for r, n in sizes.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ParallelPlanError(
                    f"ParallelDims.from_sizes: {r}={n!r} is not a positive int.\nfix: {r}=2, say."
                )
        roles = tuple(r for r in ROLES if r in sizes)
        return cls(tuple(sizes[r] for r in roles), roles)

    @classmethod
    def from_axes(
        cls, shape: Sequence[int], axes: Mapping[str, int | None], where: str = "ParallelDims"
    ) -> ParallelDims:
        """Roles placed on given mesh axes: ``from_axes((2, 4), {"dp": 0, "tp": 1})``.

        The one check that each role's axis exists and no two roles share an axis.
        """
        shape = tuple(int(d) for d in shape)
        roles: list[str | None] = [None] * len(shape)
        for role, axis in axes.items():
            if axis is None:
                continue
            if isinstance(axis, bool) or not isinstance(axis, int) or not 0 <= axis < len(shape):
                raise ParallelPlanError(
                    f"{where}: {role} axis {axis!r} is not an axis of the {len(shape)}-D mesh "
                    f"{shape}.\nfix: use an axis in [0, {len(shape) - 1}] or None."
                )
            if roles[axis] is not None:
                raise ParallelPlanError(
                    f"{where}: {roles[axis]} and {role} both use mesh axis {axis}.\nfix: each "
                    f"strategy takes its own mesh axis (TTML's order: {' -> '.join(ROLES)})."
                )
            roles[axis] = role
        return cls(shape, tuple(roles))

    @classmethod
    def from_flags(cls, shape: Sequence[int], enabled: Iterable[str]) -> ParallelDims:
        """TTML's axis rule: enabled roles take mesh axes 0, 1, ... in :data:`ROLES` order.

        Their number must equal the mesh rank, except on a line mesh (at most one axis above 1),
        where exactly one role takes that axis, and a single device, where none is needed.
        """
        shape = tuple(int(d) for d in shape)
        on = [r for r in ROLES if r in set(enabled)]
        if len(on) == len(shape):
            return cls(shape, tuple(on))
        big = [a for a, d in enumerate(shape) if d > 1]
        if len(big) <= 1 and (len(on) == 1 or (not on and math.prod(shape) == 1)):
            roles: list[str | None] = [None] * len(shape)
            if on:
                roles[big[0] if big else 0] = on[0]
            return cls(shape, tuple(roles))
        raise ParallelPlanError(
            "The number of parallelization axes must be equal to the number of mesh shape "
            f"dimensions: mesh_shape {list(shape)} has {len(shape)} dimensions but {len(on)} "
            f"strategies are enabled ({', '.join(on) or 'none'}).\n"
            f"fix: enable {len(shape)} strategies (they take mesh axes in the order "
            f"{' -> '.join(ROLES)}), or use a line mesh such as [1, N] with exactly one."
        )

    @classmethod
    def current(cls) -> ParallelDims:
        """The plan of the step being traced: the role-named mesh axes bound here (``shard_map``).

        Inside the step the mesh is the plan: each manual mesh axis named by a role (``tp``,
        ``cp``, ...) plays that role, with its size. Outside ``shard_map``, or for axes named
        otherwise, nothing splits (every role has size 1), so the same model code runs whole on
        one device. What modules read instead of taking a mesh axis name. A step that
        :meth:`bind` s its plan gets that plan object back (its rules included), not a copy.

        >>> ParallelDims.current()
        ParallelDims()
        """
        mesh = jax.sharding.get_abstract_mesh()
        manual = set(getattr(mesh, "manual_axes", ()))
        if not manual:
            return _UNSPLIT
        roles = tuple(n if n in ROLES and n in manual else None for n in mesh.axis_names)
        shape = tuple(int(d) for d in mesh.axis_sizes)
        bound = _BOUND.get()  # the step's own plan, with rules that name activations (SP's)
        if bound is not None and (bound.shape, bound.roles) == (shape, roles):
            return bound
        return cls(shape, roles, LOGICAL_AXIS_RULES if bound is None else bound.rules)

    def with_sequence_parallel(self) -> ParallelDims:
        """This plan with :data:`SEQUENCE_PARALLEL_RULE` (Megatron SP), which needs a tp axis.

        >>> ParallelDims.from_sizes(dp=2, tp=4).with_sequence_parallel().sequence_parallel
        True
        """
        if self.axis("tp") is None:
            raise ParallelPlanError(
                f"sequence parallelism splits the activations over the tp axis, but {self!r} "
                "has none.\nfix: enable tensor parallelism too (device_config.enable_tp: true), "
                "or set enable_sp: false."
            )
        if SEQUENCE_PARALLEL_RULE in self.rules:
            return self
        return replace(self, rules=(*self.rules, SEQUENCE_PARALLEL_RULE))

    @property
    def sequence_parallel(self) -> bool:
        """Whether the plan splits the activations' sequence between the TP pairs (SP)."""
        return SEQUENCE_PARALLEL_RULE in self.rules

    @contextmanager
    def bind(self) -> Iterator[ParallelDims]:
        """Make this plan's rules the ones :meth:`current` reads while a step is traced.

        The mesh carries the roles and sizes, not rules that name activations only (SP's):
        the train step binds its plan around the model's forward.
        """
        token = _BOUND.set(self)
        try:
            yield self
        finally:
            _BOUND.reset(token)

    # -- reading -------------------------------------------------------------------------------

    def axis(self, role: str) -> int | None:
        """The mesh axis (index) of ``role``, None when it has none."""
        self._known(role)
        return self.roles.index(role) if role in self.roles else None

    def size(self, role: str) -> int:
        """How many ways ``role`` splits (1 when it has no axis)."""
        axis = self.axis(role)
        return 1 if axis is None else self.shape[axis]

    def active(self, role: str) -> bool:
        """Whether ``role`` really splits (size above 1)."""
        return self.size(role) > 1

    def name(self, role: str) -> str | None:
        """The mesh axis name of ``role`` when it splits, else None (what collectives take)."""
        return role if self.active(role) else None

    @property
    def axis_names(self) -> tuple[str, ...]:
        """Mesh axis names: the role, or ``_<i>`` for an axis no role uses."""
        return tuple(r if r is not None else f"_{i}" for i, r in enumerate(self.roles))

    @property
    def num_devices(self) -> int:
        return math.prod(self.shape)

    def jax_mesh(self, devices: Any) -> Mesh:
        """A ``jax.sharding.Mesh`` of ``devices`` (an array of the mesh's shape) named by role."""
        import numpy as np

        arr = np.asarray(devices)
        if arr.shape != self.shape:
            arr = arr.reshape(self.shape)
        return Mesh(arr, self.axis_names)

    def _known(self, role: str) -> None:
        if role not in ROLES:
            raise ParallelPlanError(f"{role!r} is not a role.\nfix: one of {', '.join(ROLES)}.")

    # -- logical axes -> PartitionSpec ---------------------------------------------------------

    def mesh_axes(self, logical: str | None, used: set[str] | None = None) -> tuple[str, ...]:
        """The active mesh axes a logical axis splits over (rules in order, each role once)."""
        if logical is None:
            return ()
        used = set() if used is None else used
        out: list[str] = []
        for name, role in self.rules:
            if name == logical and self.active(role) and role not in used and role not in out:
                out.append(role)
        return tuple(out)

    def spec(self, logical: LogicalAxes, shape: Sequence[int] | None = None, where: str = "") -> P:
        """The ``PartitionSpec`` of one parameter; with ``shape``, each split dim must divide.

        A role splits at most one dimension of a parameter (the first that maps to it).
        """
        used: set[str] = set()
        entries: list[Any] = []
        for dim, name in enumerate(logical.names):
            axes = self.mesh_axes(name, used)
            used.update(axes)
            if shape is not None and axes:
                n = math.prod(self.size(a) for a in axes)
                if shape[dim] % n:
                    sizes = " x ".join(f"{a}={self.size(a)}" for a in axes)
                    raise ParallelPlanError(
                        f"{where or 'parameter'} of shape {list(shape)}: dim {dim} "
                        f"({name!r}, size {shape[dim]}) does not divide by {sizes} under "
                        f"{self!r}.\nfix: pick sizes that divide by {n}, or a mesh whose "
                        f"{'/'.join(axes)} axis divides them."
                    )
            entries.append(None if not axes else axes[0] if len(axes) == 1 else axes)
        while entries and entries[-1] is None:
            entries.pop()
        return P(*entries)

    def specs(self, logical: Any, shapes: Any = None) -> Any:
        """:meth:`spec` over a pytree of :class:`LogicalAxes` (``shapes``: a matching tree of arrays)."""
        if shapes is None:
            return jax.tree_util.tree_map(self.spec, logical, is_leaf=is_logical)
        flat, treedef = jax.tree_util.tree_flatten_with_path(logical, is_leaf=is_logical)
        leaves = treedef.flatten_up_to(shapes)  # type: ignore[attr-defined]
        out = []
        for (path, lg), arr in zip(flat, leaves, strict=True):
            where = f"parameter {_path_name(path)}"
            if len(lg) != len(arr.shape):
                raise ParallelPlanError(
                    f"{where} has shape {list(arr.shape)} but {len(lg)} logical axes {lg!r}.\n"
                    "fix: give one logical axis per dimension."
                )
            out.append(self.spec(lg, arr.shape, where))
        return jax.tree_util.tree_unflatten(treedef, out)

    def split_roles(self, logical: str) -> tuple[str, ...]:
        """The active roles that split data along ``logical`` (e.g. ``"batch"``: dp, fsdp)."""
        return self.mesh_axes(logical)

    @property
    def data_parallel_size(self) -> int:
        """How many ways the batch splits: the product of the roles splitting ``"batch"``."""
        return math.prod(self.size(r) for r in self.split_roles("batch"))

    def check_batch(self, batch: int, where: str = "") -> int:
        """The per-group batch; raises when ``batch`` does not split over the batch roles."""
        roles, n = self.split_roles("batch"), self.data_parallel_size
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1 or batch % n:
            sizes = " x ".join(f"{r}={self.size(r)}" for r in roles) or "none"
            raise ParallelPlanError(
                f"{where}batch_size={batch!r} must be divisible by the data-parallel size {n} "
                f"({sizes}) of {self!r}.\nfix: use a batch_size that is a positive multiple of {n}."
            )
        return batch // n

    def gather(self, tree: Any, logical: Any) -> Any:
        """Each leaf of ``tree`` made whole over the ``fsdp`` axis where ``logical`` (a matching
        tree of :class:`LogicalAxes`) shards it, inside ``shard_map``: FSDP's gather where a
        parameter is used; its transpose reduce-scatters the gradient. The identity when FSDP
        does not split.
        """
        fsdp = self.name("fsdp")
        return tree if fsdp is None else gather_sharded(tree, self.specs(logical), fsdp)

    # -- text ----------------------------------------------------------------------------------

    def describe(self) -> str:
        """``"dp 2 over mesh axis 0, tp 4 over mesh axis 1"``; roles of size 1 are left out."""
        parts = [
            f"{r} {self.shape[a]} over mesh axis {a}"
            for a, r in enumerate(self.roles)
            if r is not None and self.shape[a] > 1
        ]
        return ", ".join(parts) or "one device"

    def sizes(self) -> str:
        """``"dp=2, tp=4"``: each mesh axis's role (``_<i>`` when none) and size."""
        return ", ".join(f"{name}={n}" for name, n in zip(self.axis_names, self.shape, strict=True))

    def __repr__(self) -> str:
        sp = ", sequence parallel" if self.sequence_parallel else ""
        return f"ParallelDims({self.sizes()}{sp})"


_UNSPLIT = ParallelDims((), ())  # current() outside shard_map: nothing splits


__all__ = [
    "LOGICAL_AXIS_RULES",
    "ROLES",
    "SEQUENCE_PARALLEL_RULE",
    "LogicalAxes",
    "ParallelDims",
    "is_logical",
]
