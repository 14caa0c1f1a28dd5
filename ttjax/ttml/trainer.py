"""The training loop: batches by (seed, step), validation every N steps, a JSON log of every step,
orbax checkpoints written only for states whose loss was finite, a NaN/inf stop naming the
step, a rich progress bar (loss, tokens/s, ETA) and a loss-curve PNG.

A final checkpoint is always written at the last step (whatever ``eval_every`` and
``model_save_interval``). SIGINT and SIGTERM stop the loop at the next step boundary: the state
of that step is saved and ``run`` returns with ``trainer.interrupted`` set to the signal, so the
caller writes its outputs and exits ``128 + signal`` (130, 143). Under several processes the
stop step is agreed at every step boundary (an all-gather of the flags), so the collective save
cannot hang. ``resume`` restores the newest checkpoint that verifies (``Checkpointer.
restore_latest``) and reports the ones it skipped. ``segments`` records which mesh ran which
steps across resumes.

A donating step (:class:`ttjax.ttml.train.BaseTrainStep`, the default) overwrites the state it
is given, so a due checkpoint of a state is written before the step that reads it (the save is
waited for: its host copy is gone and the state's buffers free to reuse when the step runs, so a
save step peaks no higher than any other) and removed again if that step's loss is not finite.

Under ``ttjax-run`` every process runs the loop and writes its shards of each checkpoint; only
process 0 writes the log, the progress bar and the PNG. Every cross-process call (the step's
lowering for the MFU count, validation, saves, the stop vote, a barrier after the PNG) is made by
every process, in the same order, so none waits on a call another never makes.

The trainer takes its step by a protocol (:class:`TrainStepProtocol`: ``init_state``, ``__call__``,
``eval_loss``, ``mesh``, ``accum``): :class:`ttjax.ttml.train.TrainStep`, the pipelined
``PipelineTrainStep``, or a test's wrapper (``tests/distributed/killed_train.py`` kills a rank
after a step, the fault a ``--resume`` restart recovers from).

>>> trainer = Trainer(step, data, LoopSettings(batch_size=16, seq_len=64, max_steps=300), out_dir)
>>> state, history = trainer.run(state)                  # or trainer.resume(params) to continue
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from ttjax.errors import CheckpointError
from ttjax.ttml.checkpoint import Checkpointer, Restored
from ttjax.ttml.data import TokenDataset
from ttjax.ttml.metrics import MetricsLog, Peak, mesh_peak, mfu_line, step_flops
from ttjax.ttml.train import TrainingDivergedError, TrainState


class TrainStepProtocol(Protocol):
    """What the trainer calls on a train step (:class:`ttjax.ttml.train.BaseTrainStep` has it)."""

    @property
    def mesh(self) -> jax.sharding.Mesh:
        """The step's mesh (its shape is recorded in each run segment)."""
        ...

    @property
    def accum(self) -> int:
        """Micro-batches per step (gradient accumulation): the first dim of ``tokens``."""
        ...

    def init_state(self, params: Any) -> TrainState:
        """Whole parameters -> a fresh state on the mesh (also the template ``resume`` restores)."""
        ...

    def __call__(self, state: TrainState, tokens: Any) -> tuple[TrainState, dict[str, Any]]:
        """One step on ``tokens`` [accum, batch, seq + 1]: the new state and its metrics."""
        ...

    def eval_loss(self, params: Any, tokens: Any) -> Any:
        """Mean loss of ``params`` on ``tokens`` [n, batch, seq + 1] (validation)."""
        ...


@dataclass(frozen=True)
class LoopSettings:
    """How long to train and how often to evaluate and save (TTML's training_config keys)."""

    batch_size: int = 16
    seq_len: int = 64
    max_steps: int = 100
    seed: int = 5489
    eval_every: int = 50
    eval_batches: int = 8
    model_save_interval: int = 100
    progress: bool = True
    log_every: int = 10  # the metrics line (ttjax.ttml.metrics) every N steps; 0: none
    profile_steps: int = 0  # trace N steps (after the compile) with jax.profiler into out/profile


class Trainer:
    """Runs a train step (:class:`TrainStepProtocol`) over a :class:`TokenDataset`, logging into
    ``out_dir``."""

    def __init__(
        self,
        step: TrainStepProtocol,
        data: TokenDataset,
        settings: LoopSettings,
        out_dir: str | Path,
        *,
        checkpointer: Checkpointer | None = None,
    ) -> None:
        self.step, self.data, self.settings = step, data, settings
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.checkpointer = checkpointer
        s = settings
        self.val_tokens = data.val_batches(s.eval_batches, s.batch_size, s.seq_len)
        self.unigram = data.unigram_loss()
        self.log_path = self.out_dir / "log.jsonl"
        self.primary = jax.process_index() == 0
        self.interrupted: signal.Signals | None = None  # set when SIGINT/SIGTERM stopped `run`
        self.restored: Restored | None = None  # what `resume` used and skipped
        self.segments: list[dict[str, Any]] = []  # earlier launches: which mesh ran which steps
        self._start = 0

    @property
    def mesh_shape(self) -> list[int]:
        return [int(n) for n in self.step.mesh.devices.shape]

    # -- resume --------------------------------------------------------------------------------

    def resume(self, params_like: Any) -> tuple[TrainState, list[dict[str, Any]]]:
        """The newest checkpoint that verifies, restored onto this step's mesh and shardings.

        Newer checkpoints that do not verify (corrupt bytes, a missing chunk, corrupt metadata)
        are skipped, moved aside and reported; none verifying raises :class:`CheckpointError`.
        """
        if self.checkpointer is None:
            raise CheckpointError(
                "Trainer.resume: this trainer has no checkpointer.\n"
                "fix: pass checkpointer=Checkpointer(checkpoint_dir) to Trainer."
            )
        like = self.step.init_state(params_like)
        got = self.checkpointer.restore_latest(like)
        if self.primary:
            for s in got.skipped:
                print(
                    f"resume: skipped checkpoint {s}; using step {got.step}",
                    file=sys.stderr,
                    flush=True,
                )
        self.restored = got
        history = list(got.meta.get("history", []))
        self.segments = [dict(seg) for seg in got.meta.get("segments", [])]
        if not self.segments and got.step:
            self.segments = [{"start_step": 0, "end_step": got.step, "mesh_shape": None}]
        return TrainState(*got.state), history

    def all_segments(self, step: int) -> list[dict[str, Any]]:
        """The earlier launches' segments and this one's, up to ``step``."""
        now = {
            "start_step": self._start,
            "end_step": step,
            "mesh_shape": self.mesh_shape,
            "processes": jax.process_count(),
        }
        return [*self.segments, now] if step > self._start else list(self.segments)

    # -- the loop ------------------------------------------------------------------------------

    def run(
        self, state: TrainState, history: list[dict[str, Any]] | None = None
    ) -> tuple[TrainState, list[dict[str, Any]]]:
        """Train from ``state`` to ``max_steps``; returns the final state and one record per step.

        Stops early (``self.interrupted`` set, the current step saved) on SIGINT or SIGTERM.
        """
        s, history = self.settings, list(history or [])
        start = self._start = int(state.step)
        self.interrupted = None
        if self.primary:
            with self.log_path.open("w") as f:
                for rec in history:
                    f.write(json.dumps(rec) + "\n")
        tokens_per_step = self.step.accum * s.batch_size * s.seq_len
        progress = _Progress(s.max_steps, start, s.progress and self.primary)
        # Every process counts the step's FLOPs: lowering the step places a batch on the mesh
        # (a collective under several processes); only process 0 then writes the lines.
        flops, peak = self._step_cost(state) if s.log_every else (None, None)
        metrics_log = self._metrics_log(state, progress, flops, peak) if self.primary else None
        profiled = s.profile_steps if self.primary else 0
        profiler = _Profiler(self.out_dir / "profile", start, s.max_steps, profiled)
        stop = _StopSignals()
        try:
            stop.install()
            t0 = time.perf_counter()
            for i in range(start, s.max_steps):
                batch = self.data.batch(i, self.step.accum, s.batch_size, s.seq_len, s.seed)
                profiler.before(i)
                saved = self._maybe_save(state, history)  # before the step deletes `state`
                new_state, metrics = self.step(state, batch)
                loss = float(metrics["loss"])  # also waits for the step
                if not math.isfinite(loss):
                    if saved is not None and self.checkpointer is not None:
                        self.checkpointer.discard(saved)  # only states with a finite loss
                    self._diverged(i + 1, loss, new_state)
                now = time.perf_counter()
                rec = {
                    "step": i + 1,
                    "loss": loss,
                    "grad_norm": float(metrics["grad_norm"]),
                    "lr": float(metrics.get("lr", float("nan"))),
                    "tokens_per_s": tokens_per_step / max(now - t0, 1e-9),
                    "step_s": now - t0,
                }
                t0 = now
                state = new_state
                if s.eval_every and ((i + 1) % s.eval_every == 0 or i + 1 == s.max_steps):
                    rec["val_loss"] = float(self.step.eval_loss(state.params, self.val_tokens))
                    if not math.isfinite(rec["val_loss"]):
                        self._diverged(i + 1, rec["val_loss"], state)
                history.append(rec)
                if self.primary:
                    with self.log_path.open("a") as f:
                        f.write(json.dumps(rec) + "\n")
                progress.update(rec)
                profiler.after(i, metrics_log)
                if metrics_log is not None:
                    metrics_log.record(rec)
                signum = stop.agreed()
                if signum and i + 1 < s.max_steps:
                    self.interrupted = signal.Signals(signum)
                    break
            self._save_final(state, history)
        finally:
            stop.restore()
            profiler.stop(metrics_log)
            if metrics_log is not None:
                metrics_log.close()
            progress.close()
            if self.checkpointer is not None:
                self.checkpointer.wait()
        return state, history

    def _step_cost(self, state: TrainState) -> tuple[float | None, Peak | None]:
        """FLOPs of one step on the whole mesh (the compiled step; a conditional's branches
        weighted by the step's ``branch_weights`` when it has them) and the peak of the mesh's
        devices. Run on every process, in the same order: lowering places a batch on the mesh
        and the peak counts the hosts the mesh spans."""
        s, mesh = self.settings, self.step.mesh
        flops: float | None = None
        compiled = getattr(self.step, "compiled", None)
        if compiled is not None:
            step = int(state.step)
            batch = self.data.batch(step, self.step.accum, s.batch_size, s.seq_len, s.seed)
            weights = getattr(self.step, "branch_weights", None)  # a pipeline's schedule
            flops = step_flops(compiled(state, batch), mesh, branch_weights=weights)
        return flops, mesh_peak(mesh)

    def _metrics_log(
        self, state: TrainState, progress: _Progress, flops: float | None, peak: Peak | None
    ) -> MetricsLog:
        """The metrics line's log for this launch (process 0): MFU = ``flops`` per step over
        the step time and the mesh's peak (see :meth:`_step_cost`)."""
        s = self.settings
        log = MetricsLog(
            self.out_dir,
            log_every=s.log_every,
            last_step=s.max_steps,
            start_step=int(state.step),
            flops_per_step=flops,
            peak=peak,
            print_fn=progress.print_fn(),
        )
        if s.log_every:
            log.info(mfu_line(s.log_every, log, flops, peak))
        return log

    def _meta(self, step: int, history: list[dict]) -> dict[str, Any]:
        return {"history": history[:step], "segments": self.all_segments(step)}

    def _maybe_save(self, state: TrainState, history: list[dict]) -> int | None:
        """Save ``state`` when its step is due (finished before a donating step overwrites it);
        the step saved, else None."""
        every = self.settings.model_save_interval
        step = int(state.step)
        if self.checkpointer is None or step == 0 or not (every and step % every == 0):
            return None
        if step in self.checkpointer.all_steps():
            return None
        self.checkpointer.save(step, state, meta=self._meta(step, history))
        if getattr(self.step, "donate", False):
            self.checkpointer.wait()
        return step

    def _save_final(self, state: TrainState, history: list[dict]) -> None:
        """Save the last (or interrupted) step, whatever the intervals, if its weights are finite."""
        step = int(state.step)
        if self.checkpointer is None or step == 0 or step in self.checkpointer.all_steps():
            return
        if not _all_finite(state.params):
            self._diverged(step, float("nan"), state, what="the parameters are")
        self.checkpointer.save(step, state, meta=self._meta(step, history))

    def _diverged(self, step: int, loss: float, like: Any, what: str = "the loss is") -> None:
        """Raise TrainingDivergedError naming the newest checkpoint that *verifies* (restored)."""
        kept = "no checkpoint was written yet"
        if self.checkpointer is not None:
            self.checkpointer.wait()
            good, skipped = self.checkpointer.newest_verified_step(like)
            where = self.checkpointer.directory
            if good is not None:
                kept = f"the last good checkpoint (step {good}) verifies and is kept in {where}"
            elif skipped:
                kept = f"no checkpoint in {where} verifies"
            for sk in skipped:
                kept += f"; checkpoint step {sk.step} does not verify ({sk.reason})"
        what = f"{what} {loss}" if what == "the loss is" else f"{what} not finite"
        raise TrainingDivergedError(
            f"training diverged: {what} at step {step}; {kept}.\n"
            "fix: lower the learning rate, enable gradient clipping (use_clip_grad_norm), or "
            "resume from the checkpoint with a smaller learning rate."
        )

    # -- outputs -------------------------------------------------------------------------------

    def write_summary(self, history: list[dict[str, Any]], extra: dict[str, Any]) -> Path:
        """``log.json``: settings, the unigram baseline and every step's record (process 0 writes)."""
        path = self.out_dir / "log.json"
        if not self.primary:
            return path
        summary = {
            "settings": asdict(self.settings),
            "unigram_val_loss": self.unigram,
            **extra,
            "steps": history,
        }
        path.write_text(json.dumps(summary, indent=1))
        return path

    def plot(
        self, history: list[dict[str, Any]], title: str, path: str | Path | None = None
    ) -> Path | None:
        """The loss curve (train, validation, unigram baseline) as a PNG (process 0 draws it).

        Every process calls it: the others wait for process 0's drawing (one barrier), so none
        reaches the job's shutdown barrier, whose timeout is seconds, while process 0 draws.
        Without matplotlib (the ``viz`` extra) nothing is drawn: one line says so and None is
        returned; the run's log, metrics and checkpoints are written all the same.
        """
        path = Path(path or self.out_dir / "loss.png")
        try:
            return self._draw(history, title, path) if self.primary else path
        finally:
            _barrier("ttjax.ttml.trainer.plot")

    def _draw(self, history: list[dict[str, Any]], title: str, path: Path) -> Path | None:
        try:
            import matplotlib
        except ImportError:
            print(
                "loss plot skipped: it needs matplotlib, the viz extra (pip install "
                "'ttjax[viz]'); log.json and metrics.csv hold the same numbers",
                file=sys.stderr,
                flush=True,
            )
            return None

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
        segments = self.all_segments(history[-1]["step"] if history else self._start)
        if len(segments) > 1:
            for seg in segments[1:]:
                ax.axvline(seg["start_step"], color="black", lw=0.8, ls=":")
            for k, seg in enumerate(segments):
                ax.annotate(  # the first segment's label at the left edge, the others at theirs
                    _mesh_label(seg.get("mesh_shape")),
                    (0.0 if k == 0 else seg["start_step"], 1.0),
                    xycoords=("axes fraction" if k == 0 else "data", "axes fraction"),
                    xytext=(3, -12),
                    textcoords="offset points",
                    fontsize=8,
                )
        steps = [r["step"] for r in history]
        ax.plot(steps, [r["loss"] for r in history], lw=1, label="train loss")
        val = [(r["step"], r["val_loss"]) for r in history if "val_loss" in r]
        if val:
            ax.plot(*zip(*val), "o-", label="validation loss")
        ax.axhline(self.unigram, color="gray", ls="--", label="unigram baseline (validation)")
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats / token)")
        ax.set_title(title, fontsize=9)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return path


def segments_label(segments: list[dict[str, Any]]) -> str:
    """``mesh 2x4 (steps 0-300), 1x8 (steps 300-600)``: which mesh ran which steps."""
    if not segments:
        return "no steps"
    merged: list[dict[str, Any]] = []
    for seg in segments:
        if merged and merged[-1]["mesh_shape"] == seg.get("mesh_shape"):
            merged[-1]["end_step"] = seg["end_step"]
        else:
            merged.append(dict(seg))
    if len(merged) == 1:
        return f"mesh {_mesh_label(merged[0].get('mesh_shape'))}"
    parts = [
        f"{_mesh_label(m.get('mesh_shape'))} (steps {m['start_step']}-{m['end_step']})"
        for m in merged
    ]
    return "mesh " + ", ".join(parts)


def _mesh_label(shape: list[int] | None) -> str:
    return "x".join(str(n) for n in shape) if shape else "unrecorded mesh"


def _barrier(name: str) -> None:
    """Wait for every process of the job to get here (nothing to wait for alone)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


_finite = jax.jit(lambda x: jnp.all(jnp.isfinite(x)))


def _all_finite(tree: Any) -> bool:
    """Every element of ``tree`` finite: one leaf at a time, as one program over the tree makes
    every leaf's mask before it reduces any (a quarter of the float32 state)."""
    return all(bool(_finite(x)) for x in jax.tree_util.tree_leaves(tree))


def stop_now_line(signum: int, again: bool = True) -> str:
    """What a second SIGINT/SIGTERM (or one outside the training loop) prints before the process
    stops without saving."""
    name = signal.Signals(signum).name
    return (
        f"received {name}{' again' if again else ''}: stopped at once, without saving (complete "
        "checkpoints are kept; --resume continues from the newest)"
    )


def _stop_now(signum: int) -> None:
    """Print :func:`stop_now_line` and end the process with ``128 + signum``, skipping the
    interpreter's clean-up (whose thread joins a second Ctrl-C would interrupt)."""
    try:
        sys.stdout.flush()
        print(stop_now_line(signum), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    os._exit(128 + signum)


class _StopSignals:
    """SIGINT/SIGTERM set a flag that the loop reads at each step boundary (a second one aborts)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.received = 0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received:  # a second signal: stop at once, no save, one line (no traceback)
            _stop_now(signum)
        self.received = signum
        try:  # a rank whose launcher died writes into a closed pipe: the save must still happen
            print(
                f"\nreceived {signal.Signals(signum).name}: saving at the end of this step "
                "(send it again to stop at once, without saving)",
                file=sys.stderr,
                flush=True,
            )
        except OSError:
            pass

    def agreed(self) -> int:
        """The signal to stop for, the same on every process (0 to go on)."""
        if jax.process_count() == 1:
            return self.received
        from jax.experimental import multihost_utils

        flags = multihost_utils.process_allgather(np.array([self.received], np.int32))
        return int(np.max(np.asarray(flags)))

    def restore(self) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        self._previous = {}


class _Profiler:
    """``jax.profiler`` over ``steps`` steps, from the second step of the launch (the first
    compiles) or the first when only one runs; the trace lands in ``folder`` (Perfetto's
    ``perfetto_trace.json.gz`` and TensorBoard's ``*.xplane.pb``)."""

    def __init__(self, folder: Path, start: int, last: int, steps: int) -> None:
        self.folder, self.active = folder, False
        self.first = start + 1 if last - start > 1 else start
        self.end = min(self.first + steps, last)  # exclusive
        self.steps = steps if steps > 0 else 0

    def before(self, i: int) -> None:
        if self.steps and i == self.first and not self.active:
            self.folder.mkdir(parents=True, exist_ok=True)
            jax.profiler.start_trace(str(self.folder), create_perfetto_trace=True)
            self.active = True

    def after(self, i: int, log: MetricsLog | None) -> None:
        if self.active and i + 1 >= self.end:
            self.stop(log)

    def stop(self, log: MetricsLog | None) -> None:
        if not self.active:
            return
        jax.profiler.stop_trace()
        self.active = False
        traces = sorted(self.folder.rglob("perfetto_trace.json.gz"))
        where = traces[-1] if traces else self.folder
        text = (
            f"profile: steps {self.first + 1}..{self.end} traced into {where} (open it at "
            "ui.perfetto.dev, or the folder with TensorBoard's profile plugin)"
        )
        if log is not None:
            log.info(text)


class _Progress:
    """A rich progress bar with loss, tokens/s and ETA (silent when disabled)."""

    def __init__(self, total: int, start: int, enabled: bool) -> None:
        self.bar: Any = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("val {task.fields[val]}"),
            TextColumn("{task.fields[tps]} tok/s"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        self.bar.start()
        self.task = self.bar.add_task(
            "train", total=total, completed=start, loss="-", val="-", tps="-"
        )

    def print_fn(self) -> Any:
        """Prints a line above the bar (None without a bar: print plainly)."""
        if self.bar is None:
            return None
        console = self.bar.console
        return lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)

    def update(self, rec: dict[str, Any]) -> None:
        if self.bar is None:
            return
        fields = {"loss": f"{rec['loss']:.4f}", "tps": f"{rec['tokens_per_s']:,.0f}"}
        if "val_loss" in rec:
            fields["val"] = f"{rec['val_loss']:.4f}"
        self.bar.update(self.task, advance=1, **fields)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


__all__ = ["LoopSettings", "TrainStepProtocol", "Trainer", "segments_label", "stop_now_line"]
