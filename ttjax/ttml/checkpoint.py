"""Sharded, asynchronous training checkpoints with orbax; a save never replaces the last good one.

Each device writes its own shards (``ocp.args.StandardSave``) in a background thread while the
next steps run. Orbax writes into a temporary directory and renames it into place only when
every file is complete, so a save cut short (a crash, a kill) leaves the previous step as the
latest. Restoring takes the target shardings, so a run saved on 2x4 resumes on 1x8.

>>> ckpt = Checkpointer("checkpoints/run1")
>>> ckpt.save(100, state, meta={"losses": [...]})
>>> state, meta = ckpt.restore(ckpt.latest_step(), like=state_shardings_tree)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from ttjax.errors import ConfigError


class Checkpointer:
    """Keeps the ``max_to_keep`` newest checkpoints of a run under ``directory``."""

    def __init__(
        self, directory: str | os.PathLike[str], *, max_to_keep: int = 2, use_async: bool = True
    ) -> None:
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, enable_async_checkpointing=use_async, create=True
        )
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def __repr__(self) -> str:
        return f"Checkpointer({str(self.directory)!r}, steps={self.all_steps()})"

    def all_steps(self) -> list[int]:
        """Steps with a complete checkpoint (unfinished saves are not listed)."""
        return sorted(self.manager.all_steps())

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any, meta: dict[str, Any] | None = None) -> None:
        """Start saving ``state`` (any pytree of arrays) and a JSON ``meta`` at ``step``."""
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta or {})
        )
        self.manager.save(step, args=args)

    def restore(self, step: int, like: Any) -> tuple[Any, dict[str, Any]]:
        """Restore ``step`` onto the shapes and shardings of ``like`` (arrays or ShapeDtypeStructs)."""
        if step not in self.all_steps():
            raise ConfigError(
                f"no complete checkpoint for step {step} in {str(self.directory)!r} "
                f"(complete: {self.all_steps()}).\nfix: resume from one of those steps."
            )
        abstract = jax.tree_util.tree_map(
            lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding), like
        )
        out = self.manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
            ),
        )
        return out["state"], dict(out["meta"] or {})

    def wait(self) -> None:
        """Block until the save in flight is on disk."""
        self.manager.wait_until_finished()

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()


__all__ = ["Checkpointer"]
