"""Host memory of a training run, known before the state is allocated: an estimate from the
compiled step on abstract inputs, chunks that keep the step's activations small, and a refusal
in one message where the run cannot fit, instead of the kernel's OOM killer mid-step.

On a CPU mesh every device's memory is the host's. XLA's ``memory_analysis`` of the step
compiled on sharded ``jax.ShapeDtypeStruct``\\ s gives, per device, the bytes it reads (weights,
optimizer state, batch), writes (the new state), writes over what it reads (``alias``: the train
step donates its state, so the new state takes the old one's buffers and the state counts once)
and its temporaries (activations); the peak is about
``base + devices * (arguments + outputs - alias + temp) + RUNTIME``, ``base`` being the
process's own memory when the estimate is made and :data:`RUNTIME` what the run holds besides
the step (measured). The temporaries grow with the sequences a device runs at
once, so :func:`preflight` runs each device's share of the batch in equal chunks
(``TrainStep(micro_batch=...)``, the same mean gradient) sized to an activation budget, then
refuses if even that does not fit the host's available memory.

Settings (environment): ``TTJAX_MEMORY_CHECK=off`` estimates and prints but never refuses;
``TTJAX_MEMORY_AVAILABLE`` (``"6GB"``, ``"512MiB"``, bytes) replaces the host's ``MemAvailable``;
``TTJAX_MICRO_BATCH`` fixes the chunk (a number, or ``off`` for the whole share at once);
``TTJAX_ACTIVATION_BUDGET`` is the activation budget of the chunk choice (default 2 GiB).

>>> step = preflight(step, lambda mb: train_step(..., micro_batch=mb), params, 256, 256)
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import jax
import numpy as np

from ttjax.errors import ConfigError, TTJaxError

ENV_CHECK = "TTJAX_MEMORY_CHECK"
ENV_AVAILABLE = "TTJAX_MEMORY_AVAILABLE"
ENV_MICRO = "TTJAX_MICRO_BATCH"
ENV_BUDGET = "TTJAX_ACTIVATION_BUDGET"
#: The activation budget of the chunk choice: past a few sequences per device a CPU's matmuls
#: are no faster per token, so larger chunks only cost memory.
DEFAULT_BUDGET = 2 << 30
#: The share of the host's available memory a run may plan to use (the rest: allocator slack,
#: the checkpoint writer's copies, other processes).
HEADROOM = 0.9
#: What a training run holds besides the step, measured (``benchmarks/bench_memory.py``): the
#: compiler's working memory, the other programs (optimizer init, validation, the FLOP count's
#: lowering) and, at the end, the checkpoint writer and the loss plot. About 0.25 GiB on every
#: run measured, whatever the batch; it dominates small runs. :func:`step_estimate` adds the
#: checkpoint writer's host copy of the state where a save holds more than the step.
RUNTIME = 1 << 28
#: Blocks this large or larger get their own mappings (see :func:`pin_mmap_threshold`): XLA's
#: activations and gradients are larger, its small per-op buffers stay in the heap.
MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
GIB = float(1 << 30)
_UNITS = {"": 1, "b": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


class HostMemoryError(TTJaxError, MemoryError):
    """A run whose estimated peak host memory exceeds what the host has available."""


def parse_bytes(text: str, what: str = ENV_AVAILABLE) -> int:
    """``"6GB"``, ``"6G"``, ``"512MiB"``, ``"1.5e9"`` -> bytes (``KiB``/``MiB``/``GiB``: powers of
    1024); anything else raises naming ``what``.

    >>> parse_bytes("2GiB"), parse_bytes("1.5GB"), parse_bytes("4096")
    (2147483648, 1500000000, 4096)
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)(i?)b?\s*", text.lower())
    if not m:
        raise ConfigError(
            f"{what}={text!r} is not a size.\nfix: bytes, or a number with a unit: 6GB, 512MiB."
        )
    base = 1024 ** "bkmgt".index(m.group(2) or "b") if m.group(3) else _UNITS[m.group(2)]
    return int(float(m.group(1)) * base)


def _proc_kib(path: str, field: str) -> int | None:
    """``field`` of a ``/proc`` table (``MemAvailable`` of ``/proc/meminfo``, ``VmRSS`` of
    ``/proc/self/status``) in bytes, or None where the file or the field is missing."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _max_rss() -> int:
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def available_bytes() -> int:
    """The memory this host can give a new run: ``TTJAX_MEMORY_AVAILABLE``, else ``MemAvailable``
    of ``/proc/meminfo``, else the physical memory."""
    env = os.environ.get(ENV_AVAILABLE, "").strip()
    if env:
        return parse_bytes(env)
    found = _proc_kib("/proc/meminfo", "MemAvailable")
    return found if found is not None else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def current_rss() -> int:
    """This process's resident memory now (bytes)."""
    found = _proc_kib("/proc/self/status", "VmRSS")
    return found if found is not None else _max_rss()


def peak_rss() -> int:
    """This process's peak resident memory (bytes): ``VmHWM``, the high-water mark of its own
    address space. Unlike ``ru_maxrss`` it does not start from the parent's resident size (Linux
    carries that over ``fork`` and ``exec``), so a child of a large process reads its own peak."""
    found = _proc_kib("/proc/self/status", "VmHWM")
    return found if found is not None else _max_rss()


def _agreed(available: int, base: int) -> tuple[int, int]:
    """The least available and the largest base over every process (one all-gather, made on
    every rank), so every rank picks the same chunk and refuses or trains alike."""
    if jax.process_count() == 1:
        return available, base
    from jax.experimental import multihost_utils

    # In KiB: without jax_enable_x64 the all-gather carries int32, which bytes overflow.
    kib = np.array([available // 1024, base // 1024], np.int32)
    both = np.asarray(multihost_utils.process_allgather(kib)).astype(np.int64).reshape(-1, 2)
    return int(both[:, 0].min()) * 1024, int(both[:, 1].max()) * 1024


@dataclass(frozen=True)
class MemoryEstimate:
    """A step's host memory: per-device figures of XLA's ``memory_analysis`` times the devices
    of this process, plus the process's own ``base``."""

    devices: int
    arguments: int  # per device: weights, optimizer state, the batch
    outputs: int  # per device: the new state and the metrics
    alias: int  # per device: outputs written over donated arguments (the donated state)
    temp: int  # per device: activations and other temporaries
    base: int  # the process before the state is placed
    micro_batch: int | None = None
    runtime: int = RUNTIME  # the run's other programs, checkpoint writer and plot (step_estimate)

    @property
    def state(self) -> int:
        """Bytes of the step's inputs and outputs alive at once, over this process's devices."""
        return self.devices * (self.arguments + self.outputs - self.alias)

    @property
    def compiled(self) -> int:
        """The compiled program's own figure over this process's devices (state and temps)."""
        return self.state + self.devices * self.temp

    @property
    def total(self) -> int:
        """The estimated peak resident memory of the process."""
        return self.base + self.compiled + self.runtime

    def describe(self) -> str:
        """``6.3 GiB (process 0.7 + state in and out 0.5 + temporaries 2 x 2.4 + other 0.25)``."""
        return (
            f"{self.total / GIB:.2f} GiB (process {self.base / GIB:.2f} + weights, optimizer "
            f"state and batch in and out {self.state / GIB:.2f} + the step's temporaries "
            f"{self.devices} device{'s' if self.devices != 1 else ''} x "
            f"{self.temp / GIB:.2f} + the run's other programs, checkpoint and plot "
            f"{self.runtime / GIB:.2f})"
        )


def local_devices(mesh: jax.sharding.Mesh) -> int:
    """The mesh's devices that this process holds."""
    me = jax.process_index()
    return sum(1 for d in mesh.devices.flat if d.process_index == me)


def step_estimate(step: Any, params: Any, batch: int, seq: int, base: int) -> MemoryEstimate:
    """The memory of ``step`` (a ``TrainStep``) on ``batch`` sequences of ``seq`` tokens, from the
    step compiled on abstract inputs (nothing allocated; the compile is kept for the run)."""
    like = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    state, tokens = step.abstract_inputs(like, batch, seq)
    m = step.compiled(state, tokens).memory_analysis()
    devices = local_devices(step.mesh)
    est = MemoryEstimate(
        devices=devices,
        arguments=int(m.argument_size_in_bytes),
        outputs=int(m.output_size_in_bytes),
        alias=int(m.alias_size_in_bytes),
        temp=int(m.temp_size_in_bytes),
        base=base,
        micro_batch=getattr(step, "micro_batch", None),
    )
    # A checkpoint save holds the placed state and the writer's host copy of this process's
    # part of it (orbax copies before it writes), after the step's temporaries are freed: where
    # that is more than the step's own figure, the excess joins the run's other memory.
    copy = sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(state))
    at_save = devices * est.arguments + copy // jax.process_count()
    return replace(est, runtime=RUNTIME + max(0, at_save - est.compiled))


def _micro_from_env() -> tuple[bool, int | None]:
    """(set, value) of ``TTJAX_MICRO_BATCH``: ``off`` -> (True, None), ``8`` -> (True, 8)."""
    raw = os.environ.get(ENV_MICRO, "").strip().lower()
    if not raw:
        return False, None
    if raw in ("off", "none", "0"):
        return True, None
    if raw.isdigit():
        return True, int(raw)
    raise ConfigError(
        f"{ENV_MICRO}={raw!r} is not a number of sequences.\nfix: {ENV_MICRO}=8 (sequences per "
        "device at once), or off (the whole per-device batch at once)."
    )


def check_off() -> bool:
    """True when ``TTJAX_MEMORY_CHECK`` turns the refusal off."""
    return os.environ.get(ENV_CHECK, "").strip().lower() in ("off", "0", "false", "no")


def pick_chunk(local: int, per_seq: float, budget: float) -> int:
    """The largest divisor of ``local`` sequences whose activations (``per_seq`` each) fit
    ``budget``; 1 when none does.

    >>> pick_chunk(128, 100.0, 900.0), pick_chunk(12, 100.0, 500.0), pick_chunk(8, 1e9, 1.0)
    (8, 4, 1)
    """
    fits = [d for d in range(1, local + 1) if local % d == 0 and d * per_seq <= budget]
    return fits[-1] if fits else 1


def refusal(est: MemoryEstimate, available: int, where: str, batch: int) -> HostMemoryError:
    """The one message of a run that does not fit: the estimate, the host's memory, the fix."""
    mb = est.micro_batch
    chunk = f" (each device running {mb} sequence{'s' if mb != 1 else ''} at once)" if mb else ""
    return HostMemoryError(
        f"{where}: this run needs about {est.describe()} of host memory at its peak{chunk}, and "
        f"the host has {available / GIB:.2f} GiB available ({HEADROOM:.0%} of it may be "
        f"planned).\nfix: a smaller training_config.batch_size (now {batch}), "
        "transformer_config.runner_type: memory_efficient (recompute each block), "
        "training_config.compute_dtype: bfloat16, or a mesh over more hosts (ttjax-run); "
        f"{ENV_CHECK}=off starts it anyway."
    )


def preflight(
    step: Any,
    make_step: Callable[[int | None], Any],
    params: Any,
    batch: int,
    seq: int,
    *,
    where: str = "training",
    report: Callable[[str], None] | None = None,
) -> Any:
    """The step to train with, its memory checked before the state is placed: :func:`plan`'s
    step (it raises :class:`HostMemoryError` where the run cannot fit)."""
    return plan(step, make_step, params, batch, seq, where=where, report=report)[0]


def plan(
    step: Any,
    make_step: Callable[[int | None], Any],
    params: Any,
    batch: int,
    seq: int,
    *,
    where: str = "training",
    report: Callable[[str], None] | None = None,
) -> tuple[Any, MemoryEstimate | None]:
    """The step to train with and its estimate, checked before the state is placed.

    ``make_step(micro_batch)`` builds the same step running each device's share in chunks.
    The chunk is ``TTJAX_MICRO_BATCH`` when set; else the whole share if its activations fit
    the budget (``TTJAX_ACTIVATION_BUDGET``, at most what the host leaves), else the largest
    divisor of the share that does, from the share's compiled per-sequence figure (a step
    without ``micro_batch``, the pipelined one, keeps its own). A step without
    ``abstract_inputs`` is returned unchecked. Raises
    :class:`HostMemoryError` when the estimate exceeds the host's available memory (unless
    ``TTJAX_MEMORY_CHECK=off``). ``report`` gets one line saying what was decided.
    """
    if not hasattr(step, "abstract_inputs"):
        if report:
            report("memory: not estimated (the step has no abstract inputs)")
        return step, None
    env_set, env_chunk = _micro_from_env()
    local = step.local_batch(batch)
    if env_set:
        step = make_step(env_chunk)
    est = step_estimate(step, params, batch, seq, 0)
    # base: the process with the compiler's memory returned and its program kept (all ranks)
    release_free_memory()
    available, base = _agreed(available_bytes(), current_rss())
    est = replace(est, base=base)
    room = HEADROOM * available
    if not env_set:
        budget = env_budget()
        budget = min(budget, max(room - base - est.state, 0.0))
        # chunks only help when the state leaves room for some activations
        # (a step without micro_batch, the pipelined one, runs its own micro-batches)
        if 0 < budget < est.devices * est.temp and local > 1 and hasattr(step, "micro_batch"):
            per_seq = est.temp / local
            chunk = pick_chunk(local, per_seq * est.devices, budget)
            while True:
                step = make_step(chunk)
                est = step_estimate(step, params, batch, seq, base)
                if chunk == 1 or est.devices * est.temp <= budget:
                    break
                chunk = _below(local, chunk)
    if report:
        how = (
            f"each device runs its {local} sequences in chunks of {est.micro_batch}"
            if est.micro_batch and est.micro_batch < local
            else f"each device runs its {local} sequences at once"
        )
        report(
            f"memory: estimated peak {est.describe()}; host has {available / GIB:.2f} GiB "
            f"available; {how} ({ENV_MICRO} sets it)"
        )
    if est.total > room and not check_off():
        raise refusal(est, available, where, batch)
    release_free_memory()
    return step, est


def pin_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Serve blocks of ``threshold`` bytes and more from their own mappings, returned to the
    system when freed (glibc's ``mallopt(M_MMAP_THRESHOLD)``; call it before the state is
    placed). Left as it is where ``MALLOC_MMAP_THRESHOLD_`` is set or the C library is not
    glibc; True when pinned.

    By default glibc raises the threshold to each mapped block it frees, up to 32 MiB, so after
    the first step the step's freed temporaries stay in the heap, where the next step's blocks
    of other sizes do not fit the holes: tt-train's gpt2m at 4 blocks peaked at 1.30x its
    estimate, 1.12x pinned (benchmarks/README.md).
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, int(threshold)))
    except (OSError, AttributeError):
        return False


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``): the compiler's
    freed working memory would otherwise stay resident under the step's activations."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _below(local: int, chunk: int) -> int:
    """The next divisor of ``local`` below ``chunk``."""
    return max(d for d in range(1, chunk) if local % d == 0)


def env_budget() -> float:
    """``TTJAX_ACTIVATION_BUDGET`` in bytes, else :data:`DEFAULT_BUDGET`."""
    raw = os.environ.get(ENV_BUDGET, "").strip()
    return float(parse_bytes(raw, ENV_BUDGET)) if raw else float(DEFAULT_BUDGET)


__all__ = [
    "DEFAULT_BUDGET",
    "ENV_AVAILABLE",
    "ENV_BUDGET",
    "ENV_CHECK",
    "ENV_MICRO",
    "MMAP_THRESHOLD",
    "RUNTIME",
    "HostMemoryError",
    "MemoryEstimate",
    "available_bytes",
    "check_off",
    "current_rss",
    "env_budget",
    "local_devices",
    "parse_bytes",
    "peak_rss",
    "pick_chunk",
    "pin_mmap_threshold",
    "plan",
    "preflight",
    "refusal",
    "release_free_memory",
    "step_estimate",
]
