"""NanoGPT's training CLI with a rank that dies: ``python killed_train.py --config ... [--resume]``.

``TTJAX_FAULT_KILL_AT_STEP=N`` (set on one rank through ``env_overrides``) makes that rank SIGKILL
itself as a crashed host would, once step N is logged and its checkpoints are on disk: the fault a
``--resume`` restart recovers from. The trainer knows nothing of it: the step it is given is
wrapped here (its :class:`ttjax.ttml.trainer.TrainStepProtocol`), so no fault path ships in ttjax.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import jax

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as a script by ttjax-run: this checkout's ttjax

from models.nanogpt.train import PROG, build  # noqa: E402
from ttjax.errors import ConfigError  # noqa: E402
from ttjax.ttml import cli  # noqa: E402
from ttjax.ttml.checkpoint import Checkpointer  # noqa: E402
from ttjax.ttml.train import TrainState  # noqa: E402
from ttjax.ttml.trainer import Trainer, TrainStepProtocol  # noqa: E402

ENV = "TTJAX_FAULT_KILL_AT_STEP"


def kill_step() -> int | None:
    """The step ``TTJAX_FAULT_KILL_AT_STEP`` names, or None when it is unset."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{ENV}={raw!r} is not a step number.\nfix: a positive integer.")
    return int(raw)


class KillAfter:
    """A train step that SIGKILLs this process when asked for step ``at + 1``.

    By then the trainer has logged step ``at`` and started the saves it calls for; they are
    waited for first, so the newest checkpoint on disk is complete.
    """

    def __init__(self, step: TrainStepProtocol, at: int, checkpointer: Checkpointer | None):
        self.step, self.at, self.checkpointer = step, at, checkpointer

    def __getattr__(self, name: str) -> Any:
        """All else is the wrapped step's own (``mesh``, ``compiled``, ``donate``, ...): the rank
        that will die makes the same cross-process calls as the others until it dies (without
        ``compiled`` it skipped the MFU lowering, and the other rank's lowering waited on a
        collective it never joined)."""
        if name == "step":
            raise AttributeError(name)
        return getattr(self.step, name)

    def __call__(self, state: TrainState, tokens: Any) -> tuple[TrainState, dict[str, Any]]:
        if int(state.step) == self.at:
            latest = None
            if self.checkpointer is not None:
                self.checkpointer.wait()
                latest = self.checkpointer.latest_step()
            print(
                f"{ENV}={self.at}: process {jax.process_index()} kills itself "
                f"(latest checkpoint: step {latest})",
                flush=True,
            )
            os.kill(os.getpid(), signal.SIGKILL)
        return self.step(state, tokens)


class KillingTrainer(Trainer):
    """The CLI's trainer, its step wrapped in :class:`KillAfter` where ``ENV`` is set."""

    def __init__(self, step: TrainStepProtocol, *args: Any, **kw: Any) -> None:
        at = kill_step()
        if at is not None:
            step = KillAfter(step, at, kw.get("checkpointer"))
        super().__init__(step, *args, **kw)


def main(argv: list[str]) -> int:
    cli.Trainer = KillingTrainer  # the CLI builds this trainer instead
    return cli.main(argv, build=build, prog=PROG)


if __name__ == "__main__":
    raise SystemExit(cli.run_cli(main, None, PROG))
