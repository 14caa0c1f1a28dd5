"""Pipeline parallelism over a mesh axis: stages, microbatches, GPipe and 1F1B in one jitted step.

A model is ``embed -> block x num_blocks -> head``. Block ``i`` lives on stage
``i // blocks_per_stage`` of the PP mesh axis (or on TTML's ``blocks_per_rank`` map; short stages
are padded with masked identity slots). One ``jax.shard_map`` runs the whole schedule as a
``lax.scan`` over the ticks of :func:`ttjax.ttml.schedule.schedule_table`: at each tick every stage
runs one forward or one backward of one microbatch (or idles), then activations move one stage
forward and gradients one stage back with ``lax.ppermute``. The backward is written per tick: a
stage keeps its input for each microbatch in flight (a ring buffer of ``stash_slots``: ``m`` for
GPipe, ``p`` for 1F1B) and runs ``jax.vjp`` of the stage on it when the gradient arrives (the
forward is recomputed, as in GPipe). No block is replicated; the embedding and head (``io``
parameters, small) are held by every stage, used by the first and last, and their gradients
summed over the PP axis once per step.

The pipeline takes the plan (``dims``: a :class:`ttjax.plan.ParallelDims` with a ``pp`` role) and
runs on the mesh named by it, so the stage functions name no mesh axis: TTML's modules inside
them read the plan (``ParallelDims.current()``) and split over ``tp`` on their own.

Under FSDP (the plan's ``fsdp``) every parameter is also sharded over that axis where its spec says
(the plan's ``("embed", "fsdp")``) and the batch splits over it as over DDP. A stage gathers
each block where it runs it (one block whole at a time; the block is rematerialised, so its
backward gathers it again) and the io parameters where the embedding or head use them; the
gather's transpose reduce-scatters their gradients over the fsdp axis.

Local functions see one device's parameters inside ``shard_map`` (``check_vma=False``, TTML's
explicit-collective style, as in ``ttjax.ttml.train``)::

    embed(io, tokens) -> x             # [mb, T] ids -> activations
    block(block_params, x) -> x        # one block; TP collectives inside are fine
    head(io, x, targets) -> loss       # mean loss of one microbatch

>>> dims = ParallelDims.from_sizes(pp=4, dp=2)                 # a 2x4 mesh: DDP 2, PP 4
>>> pipe = Pipeline(mesh, embed, block, head, num_blocks=8, dims=dims, num_microbatches=8)
>>> blocks = pipe.stage_blocks(stacked_blocks)     # [num_blocks, ...] -> [p, slots, ...]
>>> loss, (d_io, d_blocks) = jax.jit(pipe.value_and_grad)(io, blocks, tokens, targets)

The train step around it (optimizer, accumulation, ``TrainState``) is the one step of
``ttjax.ttml.train`` with the pipelined gradient strategy, ``ttjax.ttml.pipeline_train``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ttjax import numerics
from ttjax.errors import ConfigError, ShapeMismatchError
from ttjax.inspect import ProgramReport
from ttjax.plan import ParallelDims, average_gradients, gather_sharded
from ttjax.ttml.schedule import (
    BACKWARD,
    FORWARD,
    IDLE,
    SCHEDULES,
    ScheduleTable,
    block_layout,
    schedule_table,
    stage_sizes,
)

Params = Any


def _jax_mesh(mesh: Any) -> Mesh:
    """A ``jax.sharding.Mesh`` from itself or from a ttjax ``MeshDevice`` (``.jax_mesh``)."""
    if isinstance(mesh, Mesh):
        return mesh
    jm = getattr(mesh, "jax_mesh", None)
    if jm is not None and not isinstance(jm, Mesh) and callable(jm):
        jm = jm()
    if isinstance(jm, Mesh):
        return jm
    raise ConfigError(
        f"pipeline: mesh={mesh!r} is neither a jax.sharding.Mesh nor a ttjax MeshDevice.\n"
        "fix: pass ttjax.open_mesh_device(...) or a jax Mesh."
    )


def _prepend(spec: P | None, *lead: Any) -> P:
    return P(*lead, *(tuple(spec) if spec is not None else ()))


def _tree_specs(specs: Any, tree: Any) -> Any:
    """``specs`` broadcast over ``tree`` (None = replicated everywhere)."""
    if specs is None:
        return jax.tree.map(lambda _: P(), tree)
    return specs


def _is_spec(x: Any) -> bool:
    return isinstance(x, P)


@dataclass(frozen=True, eq=False)
class TickPlan:
    """The scan's per-tick inputs, ``[ticks, stages]`` each.

    ``kind`` (0 idle, 1 forward, 2 backward) picks the ``lax.switch`` branch, ``microbatch`` its
    microbatch; ``recv_act`` / ``recv_grad`` name the microbatch whose activation (from stage
    s-1) or gradient (from stage s+1) arrives at the end of the tick, -1 for none.
    """

    kind: np.ndarray
    microbatch: np.ndarray
    recv_act: np.ndarray
    recv_grad: np.ndarray


def tick_plan(table: ScheduleTable) -> TickPlan:
    """Turn a schedule table into the arrays the scan indexes."""
    k, mb = table.kinds, table.microbatches
    recv_act = -np.ones_like(mb)
    recv_grad = -np.ones_like(mb)
    recv_act[:, 1:] = np.where(k[:, :-1] == FORWARD, mb[:, :-1], -1)
    recv_grad[:, :-1] = np.where(k[:, 1:] == BACKWARD, mb[:, 1:], -1)
    return TickPlan(k.astype(np.int32), mb.astype(np.int32), recv_act, recv_grad)


@dataclass(frozen=True)
class Pipeline:
    """A pipeline-parallel loss-and-gradient over the ``pp`` axis of the plan ``dims`` on
    ``mesh``'s devices (see the module doc).

    ``dp`` splits the batch (DDP: gradients averaged once per step); ``fsdp`` splits it too and
    shards the parameters whose specs name it (gathered where used); under ``tp`` the blocks'
    modules split themselves (the per-block ``block_specs`` shard over it). ``cp`` is refused:
    the stages take whole sequences. ``io_specs`` / ``block_specs`` are PartitionSpecs of the
    embedding/head parameters and of one block's parameters (default: replicated), e.g. the
    plan's ``par.specs(logical axes)`` (``models/nanogpt/pipeline.py``).
    """

    mesh: Any
    embed: Callable[[Params, Any], Any]
    block: Callable[[Params, Any], Any]
    head: Callable[[Params, Any, Any], Any]
    num_blocks: int
    dims: ParallelDims
    num_microbatches: int = 1
    schedule: str = "gpipe"
    blocks_per_rank: tuple[int, ...] | None = None
    io_specs: Any = None
    block_specs: Any = None
    unroll: int | bool = 1

    def __post_init__(self) -> None:
        devices = _jax_mesh(self.mesh).devices
        if not isinstance(self.dims, ParallelDims):
            raise ConfigError(
                f"pipeline: dims={self.dims!r} is not a ttjax.plan.ParallelDims.\nfix: pass the "
                "plan, e.g. ParallelDims.from_sizes(dp=2, pp=4) or the context's dims."
            )
        if devices.size != self.dims.num_devices:
            raise ConfigError(
                f"pipeline: the plan {self.dims!r} has {self.dims.num_devices} devices but the "
                f"mesh has {devices.size} {tuple(devices.shape)}.\nfix: give the plan of this "
                "mesh (one role, or None, per mesh axis)."
            )
        if self.dims.axis("pp") is None:
            raise ConfigError(
                f"pipeline: the plan {self.dims!r} has no pp axis for the stages.\nfix: give "
                "one mesh axis the pp role, e.g. ParallelDims.from_sizes(dp=2, pp=4)."
            )
        if self.dims.active("cp"):
            raise ConfigError(
                f"pipeline: the plan {self.dims!r} splits the sequence (cp), but pipeline "
                "stages take whole sequences.\nfix: drop cp from the plan, or pp."
            )
        if self.dims.sequence_parallel:
            raise ConfigError(
                f"pipeline: the plan {self.dims!r} splits the blocks' sequence over tp (sequence "
                "parallelism), but pipeline stages run their blocks outside the layer scan that "
                "SP splits.\nfix: set device_config.enable_sp: false, or enable_pp: false."
            )
        if self.schedule not in SCHEDULES:
            raise ConfigError(
                f"pipeline: schedule={self.schedule!r} is not a known schedule (allowed: "
                f"{', '.join(SCHEDULES)}).\nfix: set schedule to gpipe or 1f1b."
            )
        if self.blocks_per_rank is not None:
            object.__setattr__(self, "blocks_per_rank", tuple(self.blocks_per_rank))
        stage_sizes(self.num_blocks, self.num_stages, self.blocks_per_rank)

    @classmethod
    def from_config(
        cls,
        mesh: Any,
        config: Any,
        embed: Callable[..., Any],
        block: Callable[..., Any],
        head: Callable[..., Any],
        **kwargs: Any,
    ) -> Pipeline:
        """Build from a ``pipeline_parallel_config`` (TTML's keys plus ttjax's schedule keys).

        ``config`` is any object with ``num_blocks``, ``blocks_per_rank`` (empty = even split),
        ``num_microbatches`` and ``schedule``, e.g. ``ttjax.ttml.config.PipelineParallelConfig``.
        """
        return cls(
            mesh,
            embed,
            block,
            head,
            num_blocks=config.num_blocks,
            blocks_per_rank=tuple(config.blocks_per_rank or ()) or None,
            num_microbatches=config.num_microbatches,
            schedule=config.schedule,
            **kwargs,
        )

    @classmethod
    def from_context(
        cls,
        context: Any,
        config: Any,
        embed: Callable[..., Any],
        block: Callable[..., Any],
        head: Callable[..., Any],
        **kwargs: Any,
    ) -> Pipeline:
        """Build on a TTML ``ParallelismContext`` (DDP, FSDP, TP, PP take mesh axes in order).

        The context's plan (``context.dims``) places the roles: its PP axis holds the stages,
        DDP and FSDP split the batch, FSDP shards the parameters (as ``io_specs`` /
        ``block_specs`` say), TP shards inside each stage.
        """
        dims = context.dims
        if dims.axis("pp") is None:
            raise ConfigError(
                "pipeline: the ParallelismContext has no PP axis (enable_pp=False).\n"
                "fix: DistributedConfig(enable_pp=True) with a mesh axis for the stages."
            )
        return cls.from_config(context.jax_mesh, config, embed, block, head, dims=dims, **kwargs)

    # -- structure -------------------------------------------------------------------------

    @cached_property
    def jax_mesh(self) -> Mesh:
        """``mesh``'s devices, their axes named by the plan's roles (what the stages read)."""
        return self.dims.jax_mesh(_jax_mesh(self.mesh).devices)

    @property
    def pp_axis(self) -> str:
        """The mesh axis name of the stages (``"pp"``)."""
        return "pp"

    @property
    def dp_axis(self) -> str | None:
        """The DDP axis name when DDP splits, else None."""
        return self.dims.name("dp")

    @property
    def tp_axis(self) -> str | None:
        """The TP axis name when TP splits, else None."""
        return self.dims.name("tp")

    @property
    def fsdp_axis(self) -> str | None:
        """The FSDP axis name when FSDP splits, else None."""
        return self.dims.name("fsdp")

    @property
    def num_stages(self) -> int:
        return self.dims.size("pp")

    @property
    def dp_size(self) -> int:
        return self.dims.size("dp")

    @property
    def data_axes(self) -> tuple[str, ...]:
        """The mesh axes that split the batch: DDP, then FSDP (the plan's ``"batch"`` rules)."""
        return self.dims.split_roles("batch")

    @property
    def data_size(self) -> int:
        """How many groups the batch splits into (DDP size x FSDP size)."""
        return int(np.prod([self.jax_mesh.shape[a] for a in self.data_axes], dtype=np.int64))

    @property
    def data_spec(self) -> P:
        """The batch's PartitionSpec: its leading dim over :attr:`data_axes`."""
        axes = self.data_axes
        return P(None if not axes else axes[0] if len(axes) == 1 else axes)

    @cached_property
    def stage_sizes(self) -> tuple[int, ...]:
        """Blocks on each stage."""
        return stage_sizes(self.num_blocks, self.num_stages, self.blocks_per_rank)

    @cached_property
    def table(self) -> ScheduleTable:
        """The tick table the scan runs."""
        return schedule_table(self.schedule, self.num_stages, self.num_microbatches)

    @cached_property
    def plan(self) -> TickPlan:
        return tick_plan(self.table)

    @property
    def slots(self) -> int:
        """Block slots per stage (the largest stage; shorter ones are padded)."""
        return max(self.stage_sizes)

    @property
    def even(self) -> bool:
        return len(set(self.stage_sizes)) == 1

    def branch_weights(self, flops: list[float], loops: int) -> list[float] | None:
        """How often each branch of the step's conditionals runs, averaged over the mesh's
        devices (``ttjax.inspect.BranchWeights``), so that MFU counts what the schedule runs:
        the tick's switch (idle, forward, backward) by the table's share of each kind; the
        embedding or head (the costlier branch of a stage's ``first``/``last`` test) on one
        stage of ``p``; inside the slot scan, a block by the share of live (unpadded) slots."""
        if len(flops) == 3:
            kinds = self.table.kinds
            return [float(np.mean(kinds == k)) for k in (IDLE, FORWARD, BACKWARD)]
        if len(flops) != 2:
            return None
        share = 1.0 / self.num_stages
        if loops > 0 and not self.even:
            share = float(np.mean(block_layout(self.stage_sizes)[1]))
        heavy = int(flops[1] >= flops[0])
        return [share if i == heavy else 1.0 - share for i in range(2)]

    # -- parameters ------------------------------------------------------------------------

    def staged_specs(self, blocks: Params) -> Params:
        """PartitionSpecs of staged block parameters: ``[stage, slot, *block dims]``."""
        specs = _tree_specs(self.block_specs, blocks)
        return jax.tree.map(
            lambda s: _prepend(s, self.pp_axis, None), specs, is_leaf=lambda x: isinstance(x, P)
        )

    def io_partition_specs(self, io: Params) -> Params:
        return _tree_specs(self.io_specs, io)

    def stage_blocks(self, stacked: Params) -> Params:
        """Stacked blocks ``[num_blocks, ...]`` -> staged ``[p, slots, ...]``, placed on the mesh.

        Padded slots (uneven ``blocks_per_rank``) hold zeros and are skipped at run time.
        """
        index, mask = block_layout(self.stage_sizes)
        leaves = jax.tree.leaves(stacked)
        if any(np.shape(a)[0] != self.num_blocks for a in leaves):
            raise ShapeMismatchError(
                f"pipeline: stacked block parameters must have num_blocks={self.num_blocks} "
                f"rows, got leading dims {sorted({np.shape(a)[0] for a in leaves})}.\n"
                "fix: stack one entry per block on axis 0."
            )
        flat, keep = np.maximum(index, 0).reshape(-1), mask.reshape(-1)

        def stage(a: Any) -> Any:  # on the host: no program to compile per parameter
            a = np.asarray(a)
            g = np.take(a, flat, axis=0)
            g = np.where(keep.reshape((-1,) + (1,) * (a.ndim - 1)), g, np.zeros((), a.dtype))
            return g.reshape((self.num_stages, self.slots, *a.shape[1:]))

        staged = jax.tree.map(stage, stacked)
        return self._place(staged, self.staged_specs(stacked))

    def unstage_blocks(self, staged: Params) -> Params:
        """The inverse of :meth:`stage_blocks`: ``[p, slots, ...]`` -> ``[num_blocks, ...]``."""
        index, mask = block_layout(self.stage_sizes)
        rows = np.flatnonzero(mask.reshape(-1))
        order = np.argsort(index.reshape(-1)[rows])
        pick = rows[order]
        return jax.tree.map(lambda a: jnp.take(a.reshape((-1, *a.shape[2:])), pick, axis=0), staged)

    def place_io(self, io: Params) -> Params:
        return self._place(io, self.io_partition_specs(io))

    def _place(self, tree: Params, specs: Params) -> Params:
        jm = self.jax_mesh
        shardings = jax.tree.map(
            lambda s: NamedSharding(jm, s), specs, is_leaf=lambda x: isinstance(x, P)
        )
        return jax.device_put(tree, shardings)

    # -- the step ----------------------------------------------------------------------------

    def check_batch(self, batch: int) -> None:
        """Raise a ConfigError unless ``batch`` splits over DDP and then into microbatches."""
        dp, m = self.data_size, self.num_microbatches
        self.dims.check_batch(batch, "pipeline: ")
        if (batch // dp) % m:
            raise ConfigError(
                f"pipeline: num_microbatches={m} does not divide the batch of {batch // dp} "
                f"per DDP group (batch_size={batch}, data-parallel size {dp}).\nfix: use a batch "
                f"size that is a multiple of {dp * m}, or a num_microbatches that divides "
                f"{batch // dp}."
            )

    def value_and_grad(
        self, io: Params, blocks: Params, tokens: Any, targets: Any
    ) -> tuple[Any, tuple[Params, Params]]:
        """Mean loss over the batch and its gradients ``(d_io, d_blocks)`` (staged like ``blocks``).

        Jittable; the schedule runs as one ``lax.scan`` inside one ``shard_map``.
        """
        return self._shard_mapped(io, blocks, tokens, targets, count=False)

    def value_grad_and_busy_ticks(
        self, io: Params, blocks: Params, tokens: Any, targets: Any
    ) -> tuple[Any, tuple[Params, Params], Any]:
        """:meth:`value_and_grad` plus, per stage, how many ticks ran a forward or a backward.

        The count is taken inside the program (the switch branches it ran), so
        ``1 - busy.sum() / (p * num_ticks)`` is the idle fraction measured from the program.
        """
        return self._shard_mapped(io, blocks, tokens, targets, count=True)

    def _shard_mapped(
        self, io: Params, blocks: Params, tokens: Any, targets: Any, count: bool
    ) -> Any:
        self.check_batch(int(tokens.shape[0]))
        data = self.data_spec
        io_specs = self.io_partition_specs(io)
        one_block = _tree_specs(self.block_specs, jax.tree.map(lambda a: a[0, 0], blocks))
        block_specs = jax.tree.map(
            lambda s: _prepend(s, self.pp_axis, None), one_block, is_leaf=_is_spec
        )
        out_specs: tuple[Any, ...] = (P(), (io_specs, block_specs))
        if count:
            out_specs = (*out_specs, P(self.pp_axis))
        fn = jax.shard_map(
            partial(self._local_step, count=count, specs=(io_specs, one_block)),
            mesh=self.jax_mesh,
            in_specs=(io_specs, block_specs, data, data),
            out_specs=out_specs,
            check_vma=False,
        )
        with self.dims.bind():  # the modules traced inside read this plan (ParallelDims.current)
            return fn(io, blocks, tokens, targets)

    def _block_fn(self, specs: Params) -> Callable[[Params, Any], Any]:
        """``block`` on one device's block shard: under FSDP it gathers the block first and is
        rematerialised, so only one block is whole at a time, forward and backward."""
        if self.fsdp_axis is None:
            return self.block
        axis = self.fsdp_axis
        return jax.checkpoint(lambda bp, h: self.block(gather_sharded(bp, specs, axis), h))

    def _run_blocks(
        self, blocks: Params, x: Any, stage: Any, block: Callable[[Params, Any], Any]
    ) -> Any:
        """Apply this stage's block slots in order (padded slots are identity)."""
        if self.even:
            return lax.scan(lambda h, bp: (block(bp, h), None), x, blocks)[0]
        _, mask = block_layout(self.stage_sizes)
        on = jnp.asarray(mask)[stage]

        def body(h: Any, inp: tuple[Params, Any]) -> tuple[Any, None]:
            bp, live = inp
            return lax.cond(live, lambda: block(bp, h), lambda: h), None

        return lax.scan(body, x, (blocks, on))[0]

    def _local_step(
        self,
        io: Params,
        blocks: Params,
        tokens: Any,
        targets: Any,
        count: bool = False,
        specs: tuple[Params, Params] = (None, None),
    ) -> Any:
        p, m, pp = self.num_stages, self.num_microbatches, self.pp_axis
        table, plan = self.table, self.plan
        stage = lax.axis_index(pp)
        blocks = jax.tree.map(lambda a: a[0], blocks)
        tok = tokens.reshape((m, tokens.shape[0] // m, *tokens.shape[1:]))
        tgt = targets.reshape((m, targets.shape[0] // m, *targets.shape[1:]))
        io_specs, one_block = specs
        fsdp = self.fsdp_axis

        def embed(e: Params, t: Any) -> Any:
            return self.embed(gather_sharded(e, io_specs, fsdp), t)

        def head(e: Params, y: Any, t: Any) -> Any:
            return self.head(gather_sharded(e, io_specs, fsdp), y, t)

        block = self._block_fn(one_block)
        x_aval = jax.eval_shape(embed, io, tok[0])
        y_aval = jax.eval_shape(lambda x: block(jax.tree.map(lambda a: a[0], blocks), x), x_aval)
        if (y_aval.shape, y_aval.dtype) != (x_aval.shape, x_aval.dtype):
            raise ShapeMismatchError(
                f"pipeline: a block maps activations {x_aval.shape} {x_aval.dtype} to "
                f"{y_aval.shape} {y_aval.dtype}; stages pass one activation shape.\n"
                "fix: make block(params, x) return x's shape and dtype."
            )
        ks, ka, kg = table.stash_slots, table.activation_slots, table.gradient_slots
        zeros_x = jnp.zeros(x_aval.shape, x_aval.dtype)

        def buf(k: int) -> Any:
            return jnp.zeros((k, *x_aval.shape), x_aval.dtype)

        run = partial(self._run_blocks, stage=stage, block=block)
        first, last = stage == 0, stage == p - 1

        def stage_fn(e: Params, b: Params, x_in: Any, i: Any) -> tuple[Any, Any]:
            """One stage on one microbatch: (embed on the first) blocks (head on the last)."""
            if p == 1:
                x = embed(e, tok[i])
            else:
                x = lax.cond(first, lambda: embed(e, tok[i]).astype(x_aval.dtype), lambda: x_in)
            y = run(b, x)
            zero = jnp.zeros((), jnp.float32)
            loss = lax.cond(last, lambda: head(e, y, tgt[i]).astype(jnp.float32), lambda: zero)
            return y, loss

        def get(b: Any, i: Any, k: int) -> Any:
            return lax.dynamic_index_in_dim(b, i % k, keepdims=False)

        def put(b: Any, i: Any, k: int, v: Any) -> Any:
            return lax.dynamic_update_index_in_dim(b, v, i % k, 0)

        def idle(c: dict[str, Any], i: Any) -> tuple[dict[str, Any], Any, Any]:
            return c, zeros_x, zeros_x

        def forward(c: dict[str, Any], i: Any) -> tuple[dict[str, Any], Any, Any]:
            c = dict(c)
            x_in = get(c["act"], i, ka)
            y, loss = stage_fn(io, blocks, x_in, i)
            c["stash"] = put(c["stash"], i, ks, x_in)
            c["losses"] = c["losses"].at[i].set(loss)
            c["busy"] = c["busy"] + 1
            return c, y, zeros_x

        def backward(c: dict[str, Any], i: Any) -> tuple[dict[str, Any], Any, Any]:
            c = dict(c)
            _, vjp = jax.vjp(partial(stage_fn, i=i), io, blocks, get(c["stash"], i, ks))
            d_y = jnp.where(last, zeros_x, get(c["grad"], i, kg))
            d_loss = jnp.where(last, jnp.float32(1.0 / m), jnp.float32(0.0))
            d_io, d_b, d_x = vjp((d_y, d_loss))
            c["d_io"] = jax.tree.map(jnp.add, c["d_io"], d_io)
            c["d_blocks"] = jax.tree.map(jnp.add, c["d_blocks"], d_b)
            c["busy"] = c["busy"] + 1
            return c, zeros_x, d_x

        fns = [idle, forward, backward]
        fwd_perm = [(j, j + 1) for j in range(p - 1)]
        bwd_perm = [(j + 1, j) for j in range(p - 1)]

        def tick(c: dict[str, Any], row: tuple[Any, ...]) -> tuple[dict[str, Any], None]:
            kind, mb, r_act, r_grad = (a[stage] for a in row)
            c, send_f, send_b = lax.switch(kind, fns, c, jnp.maximum(mb, 0))
            if p > 1:
                got_f = lax.ppermute(send_f, pp, fwd_perm)
                got_b = lax.ppermute(send_b, pp, bwd_perm)
                c = dict(c)
                ia, ig = jnp.maximum(r_act, 0), jnp.maximum(r_grad, 0)
                c["act"] = put(
                    c["act"], ia, ka, jnp.where(r_act >= 0, got_f, get(c["act"], ia, ka))
                )
                c["grad"] = put(
                    c["grad"], ig, kg, jnp.where(r_grad >= 0, got_b, get(c["grad"], ig, kg))
                )
            return c, None

        carry = {
            "stash": buf(ks),
            "act": buf(ka),
            "grad": buf(kg),
            "losses": jnp.zeros((m,), jnp.float32),
            "busy": jnp.zeros((1,), jnp.int32),
            "d_io": jax.tree.map(jnp.zeros_like, io),
            "d_blocks": jax.tree.map(jnp.zeros_like, blocks),
        }
        rows = tuple(
            jnp.asarray(a) for a in (plan.kind, plan.microbatch, plan.recv_act, plan.recv_grad)
        )
        carry, _ = lax.scan(tick, carry, rows, unroll=self.unroll)
        loss = jnp.mean(carry["losses"])
        d_io, d_blocks = carry["d_io"], carry["d_blocks"]
        if p > 1:
            loss, d_io = numerics.psum((loss, d_io), pp)
        data = self.data_axes
        if data:
            loss = numerics.pmean(loss, data)
            d_io = self._sync(d_io, _tree_specs(io_specs, d_io))
            d_blocks = self._sync(d_blocks, _tree_specs(one_block, d_blocks))
        out = loss, (d_io, jax.tree.map(lambda a: a[None], d_blocks))
        if count:
            busy = carry["busy"]
            if data:
                busy = lax.pmax(busy, data)
            return (*out, busy)
        return out

    def _sync(self, grads: Params, specs: Params) -> Params:
        """Average gradients over the batch-splitting axes (DDP, FSDP). A leaf sharded over FSDP
        had its gradient reduce-scattered (summed) over it by the gather's transpose, so FSDP
        only scales it; every other axis is summed (``ttjax.plan.average_gradients``)."""
        return average_gradients(grads, specs, self.data_axes)


# ---------------------------------------------------------------------------------------------
# What a step sends
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TickPermute:
    """One collective-permute of one tick: direction, stage pairs carrying data, bytes."""

    tick: int
    direction: str
    pairs: tuple[tuple[int, int], ...]
    live: tuple[tuple[int, int], ...]
    bytes_per_device: int


def permutes_per_tick(pipe: Pipeline, report: ProgramReport) -> list[TickPermute]:
    """The collective-permutes of a compiled pipeline step (``ttjax.inspect``), tick by tick.

    The scan body holds the step's collective-permutes (one forward, one backward), so each runs
    once per tick; ``live`` lists the stage pairs whose sender really produced a value at that
    tick (the others send zeros: every device runs the same program).
    """
    jm, pp = pipe.jax_mesh, pipe.pp_axis
    names = tuple(jm.axis_names)
    pp_dim = names.index(pp)
    shape = tuple(jm.devices.shape)
    permutes = [c for c in report.collectives if c.kind == "collective-permute"]
    out = []
    for c in permutes:
        stage_pairs = sorted(
            {
                (int(np.unravel_index(a, shape)[pp_dim]), int(np.unravel_index(b, shape)[pp_dim]))
                for a, b in c.source_target_pairs
            }
        )
        direction = "forward" if all(b == a + 1 for a, b in stage_pairs) else "backward"
        kind = FORWARD if direction == "forward" else BACKWARD
        for t in range(pipe.table.num_ticks):
            live = tuple((a, b) for a, b in stage_pairs if pipe.table.kinds[t, a] == kind)
            out.append(TickPermute(t, direction, tuple(stage_pairs), live, int(c.bytes)))
    return sorted(out, key=lambda r: (r.tick, r.direction != "forward"))


def print_permutes(rows: list[TickPermute], console: Any = None) -> None:
    """A rich table of :func:`permutes_per_tick`."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="collective-permutes per tick (scan body, once per tick)")
    for col in ("tick", "direction", "stage pairs", "carrying data", "bytes/device"):
        table.add_column(col, justify="right" if col in ("tick", "bytes/device") else "left")
    for r in rows:
        table.add_row(
            str(r.tick),
            r.direction,
            ",".join(f"{a}->{b}" for a, b in r.pairs),
            ",".join(f"{a}->{b}" for a, b in r.live) or "-",
            str(r.bytes_per_device),
        )
    (console or Console()).print(table)


__all__ = [
    "Pipeline",
    "TickPermute",
    "TickPlan",
    "permutes_per_tick",
    "print_permutes",
    "tick_plan",
]
