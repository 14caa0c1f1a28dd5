"""The training loop: batches by (seed, step), validation every N steps, a JSON log of every step,
orbax checkpoints written only for states whose loss was finite, a NaN/inf stop naming the
step, a rich progress bar (loss, tokens/s, ETA) and a loss-curve PNG.

Under ``ttjax-run`` every process runs the loop and writes its shards of each checkpoint; only
process 0 writes the log, the progress bar and the PNG. ``TTJAX_FAULT_KILL_AT_STEP=N`` (set on one
rank through ``env_overrides``) makes that process kill itself with SIGKILL after step N, once its
checkpoints are on disk: the fault a ``--resume`` restart recovers from.

>>> trainer = Trainer(step, data, LoopSettings(batch_size=16, seq_len=64, max_steps=300), out_dir)
>>> state, history = trainer.run(state)                  # or trainer.resume(params) to continue
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jax

from ttjax.errors import ConfigError
from ttjax.ttml.checkpoint import Checkpointer
from ttjax.ttml.data import TokenDataset
from ttjax.ttml.pipeline_train import PipelineTrainStep
from ttjax.ttml.train import TrainingDivergedError, TrainState, TrainStep


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


class Trainer:
    """Runs a :class:`TrainStep` (or a :class:`PipelineTrainStep`) over a :class:`TokenDataset`, logging into ``out_dir``."""

    def __init__(
        self,
        step: TrainStep | PipelineTrainStep,
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
        self.kill_at = _fault_step()

    # -- resume --------------------------------------------------------------------------------

    def resume(self, params_like: Any) -> tuple[TrainState, list[dict[str, Any]]]:
        """The latest complete checkpoint, restored onto this step's mesh and shardings."""
        assert self.checkpointer is not None
        step = self.checkpointer.latest_step()
        if step is None:
            raise FileNotFoundError(
                f"--resume: no complete checkpoint in {str(self.checkpointer.directory)!r}.\n"
                "fix: train without --resume first, or point checkpoint_dir at an earlier run."
            )
        like = self.step.init_state(params_like)
        state, meta = self.checkpointer.restore(step, like)
        return TrainState(*state), list(meta.get("history", []))

    # -- the loop ------------------------------------------------------------------------------

    def run(
        self, state: TrainState, history: list[dict[str, Any]] | None = None
    ) -> tuple[TrainState, list[dict[str, Any]]]:
        """Train from ``state`` to ``max_steps``; returns the final state and one record per step."""
        s, history = self.settings, list(history or [])
        start = int(state.step)
        if self.primary:
            with self.log_path.open("w") as f:
                for rec in history:
                    f.write(json.dumps(rec) + "\n")
        tokens_per_step = self.step.accum * s.batch_size * s.seq_len
        progress = _Progress(s.max_steps, start, s.progress and self.primary)
        try:
            t0 = time.perf_counter()
            for i in range(start, s.max_steps):
                batch = self.data.batch(i, self.step.accum, s.batch_size, s.seq_len, s.seed)
                new_state, metrics = self.step(state, batch)
                loss = float(metrics["loss"])  # also waits for the step
                if not math.isfinite(loss):
                    self._diverged(i + 1, loss, history)
                self._maybe_save(state, history)  # `state`'s loss is now known to be finite
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
                        self._diverged(i + 1, rec["val_loss"], history)
                history.append(rec)
                if self.primary:
                    with self.log_path.open("a") as f:
                        f.write(json.dumps(rec) + "\n")
                progress.update(rec)
                if self.kill_at == i + 1:
                    self._kill_self(i + 1)
            if history and "val_loss" in history[-1]:
                self._maybe_save(state, history, force=True)
        finally:
            progress.close()
            if self.checkpointer is not None:
                self.checkpointer.wait()
        return state, history

    def _maybe_save(self, state: TrainState, history: list[dict], force: bool = False) -> None:
        every = self.settings.model_save_interval
        step = int(state.step)
        if self.checkpointer is None or step == 0 or not (force or (every and step % every == 0)):
            return
        if step in self.checkpointer.all_steps():
            return
        self.checkpointer.save(step, state, meta={"history": history[:step]})

    def _kill_self(self, step: int) -> None:
        """Fault injection (``TTJAX_FAULT_KILL_AT_STEP``): die as a crashed host would."""
        if self.checkpointer is not None:
            self.checkpointer.wait()
        print(
            f"TTJAX_FAULT_KILL_AT_STEP={step}: process {jax.process_index()} kills itself "
            f"(latest checkpoint: step {self.checkpointer and self.checkpointer.latest_step()})",
            flush=True,
        )
        os.kill(os.getpid(), signal.SIGKILL)

    def _diverged(self, step: int, loss: float, history: list[dict]) -> None:
        last = None
        if self.checkpointer is not None:
            self.checkpointer.wait()
            last = self.checkpointer.latest_step()
        kept = (
            f"the last good checkpoint (step {last}) is kept in {self.checkpointer.directory}"
            if last is not None and self.checkpointer is not None
            else "no checkpoint was written yet"
        )
        raise TrainingDivergedError(
            f"training diverged: the loss is {loss} at step {step}; {kept}.\n"
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
    ) -> Path:
        """The loss curve (train, validation, unigram baseline) as a PNG (process 0 draws it)."""
        path = Path(path or self.out_dir / "loss.png")
        if not self.primary:
            return path
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
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


def _fault_step() -> int | None:
    """The step ``TTJAX_FAULT_KILL_AT_STEP`` names, or None when it is unset."""
    raw = os.environ.get("TTJAX_FAULT_KILL_AT_STEP", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(
            f"TTJAX_FAULT_KILL_AT_STEP={raw!r} is not a step number.\n"
            "fix: a positive integer (the step after which this process kills itself), or unset it."
        )
    return int(raw)


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


__all__ = ["LoopSettings", "Trainer"]
