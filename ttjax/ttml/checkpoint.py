"""Sharded, asynchronous training checkpoints with orbax, verified on restore.

Each shard is written once (``ocp.args.PyTreeSave``; a large replicated one split among its
replicas, a small one by its first) in a background thread while the next steps run. Orbax writes into a temporary directory and renames it into place only when
every file is complete, so a save cut short (a crash, a kill) leaves the previous step as the
latest. Restoring takes the target shardings, so a run saved on 2x4 resumes on 1x8.

Every checkpoint carries a fingerprint (a JSON item of the same orbax step, so written
atomically with it): per array its path, shape, dtype and a 64-bit hash of its values. The hash
is a wrapping integer sum over elements of ``mix(bits ^ mix(global index))``, computed by one
jitted reduction on the mesh; integer sums are exact in any order, so a checkpoint saved on 2x4
verifies on 1x8. Restore recomputes it: flipped bytes, a missing or truncated chunk and corrupt
metadata each become a reason, and :meth:`Checkpointer.restore_latest` falls back to the newest
checkpoint that verifies.

>>> ckpt = Checkpointer("checkpoints/run1")
>>> ckpt.save(100, state, meta={"history": [...]})
>>> got = ckpt.restore_latest(like=state)              # got.step, got.state, got.meta, got.skipped
>>> params = ckpt.load_model_parameters(like=params)   # the model alone (TTML's name)
"""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax import lax

from ttjax.errors import CheckpointError, CheckpointMismatchError

FORMAT = "ttjax-fingerprint-1"
UNVERIFIED = "unverified"
#: The smallest slice of a replicated shard that each replica writes (see ``_item_handlers``).
MIN_REPLICA_SLICE = 4 << 20  # skipped checkpoints are moved into <directory>/unverified/<step>
_SEEDS = (0x9E3779B9, 0x85EBCA77)
_NO_FINGERPRINT = (
    "no fingerprint (written before ttjax verified checkpoints, or not by ttjax.ttml's "
    "Checkpointer): cannot verify"
)


def _item_handlers() -> dict[str, Any]:
    """orbax's handlers for the three items of a step, with one change: replicated shards are
    split across their replicas for writing (orbax's replica-parallel mode, its CPU default)
    only where each replica's slice is at least :data:`MIN_REPLICA_SLICE` bytes; smaller ones
    are written whole by replica 0. Splitting slices each replicated shard with an eager
    ``lax.slice`` per array and replica, each a program to compile: about 6 s a save for a
    small model on 8 devices, to split writes that take milliseconds."""
    from orbax.checkpoint._src.metadata import array_metadata_store

    th = ocp.type_handlers
    arrays = th.ArrayHandler(
        min_slice_bytes_for_replica_parallel=MIN_REPLICA_SLICE,
        array_metadata_store=array_metadata_store.Store(),
    )
    scalar = th.ScalarHandler()
    registry = th.create_type_handler_registry(
        (int, scalar),
        (float, scalar),
        (bytes, scalar),
        (np.number, scalar),
        (np.ndarray, th.NumpyHandler()),
        (jax.Array, arrays),
        (str, th.StringHandler()),
    )
    return {
        "state": ocp.PyTreeCheckpointHandler(type_handler_registry=registry),
        "meta": ocp.JsonCheckpointHandler(),
        "fingerprint": ocp.JsonCheckpointHandler(),
    }


@dataclass(frozen=True)
class Skipped:
    """A checkpoint ``restore_latest`` did not use: its step, why, and where it was moved."""

    step: int
    reason: str
    moved_to: str | None = None

    def __str__(self) -> str:
        moved = f"; moved to {self.moved_to}" if self.moved_to else ""
        return f"step {self.step}: {self.reason}{moved}"


@dataclass(frozen=True)
class Restored:
    """What :meth:`Checkpointer.restore_latest` found: the step, its state and meta, the skips."""

    step: int
    state: Any
    meta: dict[str, Any]
    skipped: tuple[Skipped, ...] = ()

    def __repr__(self) -> str:
        return f"Restored(step={self.step}, skipped={[str(s) for s in self.skipped]})"


class _Unverified(Exception):
    """Internal: one checkpoint failed verification; ``args[0]`` is the reason."""


class Checkpointer:
    """Keeps the ``max_to_keep`` newest checkpoints of a run under ``directory``."""

    def __init__(
        self, directory: str | os.PathLike[str], *, max_to_keep: int = 2, use_async: bool = True
    ) -> None:
        self.directory = Path(directory).absolute()
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep,
            enable_async_checkpointing=use_async,
            create=True,
            cleanup_tmp_directories=True,  # a save cut short (a crash, a full disk) is removed
        )
        self.manager = ocp.CheckpointManager(
            self.directory, options=options, item_handlers=_item_handlers()
        )
        self._pending: int | None = None  # the step whose asynchronous save may still fail
        _quiet_failed_saves()
        _quiet_leftover_reads()  # a failed save's other writes also end after orbax's loop

    def __repr__(self) -> str:
        return f"Checkpointer({str(self.directory)!r}, steps={self.all_steps()})"

    def all_steps(self) -> list[int]:
        """Steps with a complete checkpoint (unfinished saves are not listed; not yet verified)."""
        return sorted(self.manager.all_steps())

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    # -- saving --------------------------------------------------------------------------------

    def save(self, step: int, state: Any, meta: dict[str, Any] | None = None) -> None:
        """Start saving ``state`` (any pytree of arrays), its fingerprint and a JSON ``meta``."""
        self.wait()  # the previous save's failure is reported as that step's
        args = ocp.args.Composite(
            state=ocp.args.PyTreeSave(state),
            meta=ocp.args.JsonSave(meta or {}),
            fingerprint=ocp.args.JsonSave({"format": FORMAT, "leaves": fingerprint(state)}),
        )
        self._pending = step
        try:
            self.manager.save(step, args=args)
        except Exception as e:
            self._failed(step, e)

    def _failed(self, step: int, e: BaseException) -> None:
        """Raise one :class:`CheckpointError` for the save of ``step`` that failed with ``e``,
        naming the checkpoint that is kept; the unfinished save's folder is removed."""
        self._pending = None
        inner: BaseException = e
        while inner.__cause__ is not None or inner.__context__ is not None:
            inner = inner.__cause__ or inner.__context__  # type: ignore[assignment]
        for leftover in self.directory.glob(f"{step}.orbax-checkpoint-tmp*"):
            if jax.process_index() == 0:
                shutil.rmtree(leftover, ignore_errors=True)
        full = getattr(inner, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
        full = full or "no space left" in str(inner).lower()
        why = "the disk is full" if full else f"{type(inner).__name__}"
        first = (str(inner).strip() or type(inner).__name__).split("\n")[0][:240]
        kept = [s for s in self.all_steps() if s != step]
        keep = (
            f"the last good checkpoint, step {kept[-1]}, is kept in {self.directory}"
            if kept
            else f"no earlier checkpoint exists in {self.directory}"
        )
        fix = "free space on that disk" if full else "check the folder and its disk"
        raise CheckpointError(
            f"saving checkpoint step {step} failed: {why} ({first}); {keep}.\nfix: {fix} (or "
            "set training_config.checkpoint_dir elsewhere), then run again with --resume."
        ) from None

    # -- restoring -----------------------------------------------------------------------------

    def restore(self, step: int, like: Any) -> tuple[Any, dict[str, Any]]:
        """Restore ``step`` onto the shapes and shardings of ``like`` (arrays or ShapeDtypeStructs).

        Raises :class:`CheckpointError` naming the reason when the checkpoint does not verify,
        and :class:`CheckpointMismatchError` when it cannot hold ``like``'s parameters.
        """
        if step not in self.all_steps():
            raise CheckpointError(
                f"no complete checkpoint for step {step} in {str(self.directory)!r} "
                f"(complete: {self.all_steps()}).\nfix: resume from one of those steps."
            )
        try:
            return self._restore_verified(step, like)
        except _Unverified as e:
            raise CheckpointError(
                f"checkpoint step {step} in {str(self.directory)!r} does not verify: {e.args[0]}."
                "\nfix: restore from another step (Checkpointer.restore_latest falls back to the "
                "newest that verifies)."
            ) from None

    def restore_latest(self, like: Any, *, move_aside: bool = True) -> Restored:
        """The newest checkpoint that verifies, restored onto ``like``; newer ones are skipped.

        Each skipped checkpoint keeps its reason; with ``move_aside`` it is moved into
        ``<directory>/unverified/<step>`` so later saves of those steps are not refused.
        """
        steps = self.all_steps()
        if not steps:
            raise CheckpointError(
                f"no complete checkpoint in {str(self.directory)!r}.\nfix: train without "
                "--resume first, or point checkpoint_dir at the folder of an earlier run."
            )
        skipped: list[Skipped] = []
        for step in reversed(steps):
            try:
                state, meta = self._restore_verified(step, like)
            except _Unverified as e:
                skipped.append(Skipped(step, e.args[0]))
                continue
            if move_aside and skipped:
                skipped = self._move_aside(skipped)
            return Restored(step, state, meta, tuple(skipped))
        listing = "\n".join(f"  {s}" for s in skipped)
        raise CheckpointError(
            f"no checkpoint in {str(self.directory)!r} verifies:\n{listing}\n"
            "fix: restore the folder from a copy, or start over without --resume after moving "
            "the folder away (or set another checkpoint_dir)."
        )

    def newest_verified_step(self, like: Any) -> tuple[int | None, tuple[Skipped, ...]]:
        """The newest step that restores and verifies onto ``like`` (nothing is moved)."""
        skipped: list[Skipped] = []
        for step in reversed(self.all_steps()):
            try:
                self._restore_verified(step, like)
            except (_Unverified, CheckpointMismatchError) as e:
                skipped.append(Skipped(step, str(e.args[0]).split("\n")[0]))
                continue
            return step, tuple(skipped)
        return None, tuple(skipped)

    def load_model_parameters(self, like: Any, step: int | None = None, key: str = "params") -> Any:
        """The model's parameters alone (no optimizer state), verified: TTML's ``load_model_parameters``.

        ``like`` is the parameter pytree (arrays or ShapeDtypeStructs with the target shardings);
        ``key`` is the field of the saved state holding them (``TrainState.params``). Without
        ``step`` the newest checkpoint that verifies is used (nothing is moved).
        """
        steps = [step] if step is not None else list(reversed(self.all_steps()))
        if step is not None and step not in self.all_steps():
            raise CheckpointError(
                f"no complete checkpoint for step {step} in {str(self.directory)!r} "
                f"(complete: {self.all_steps()}).\nfix: load one of those steps."
            )
        reasons: list[Skipped] = []
        for s in steps:
            try:
                state, _ = self._restore_verified(s, {key: like}, partial=True)
            except _Unverified as e:
                reasons.append(Skipped(s, e.args[0]))
                continue
            return state[key]
        listing = "\n".join(f"  {r}" for r in reasons) or "  (none written)"
        raise CheckpointError(
            f"no checkpoint in {str(self.directory)!r} has parameters that verify:\n{listing}\n"
            "fix: point at the checkpoint folder of a finished run, or restore it from a copy."
        )

    # -- one checkpoint ------------------------------------------------------------------------

    def _restore_verified(
        self, step: int, like: Any, partial: bool = False
    ) -> tuple[Any, dict[str, Any]]:
        """Restore ``step`` and check it against its fingerprint; raises ``_Unverified(reason)``."""
        folder = self.directory / str(step)
        reason = _check_json_files(folder)
        saved: dict[str, Any] = {}
        meta: dict[str, Any] = {}
        if reason is None and not (folder / "fingerprint").is_dir():
            reason = _NO_FINGERPRINT
        if reason is None:
            items = {"fingerprint": ocp.args.JsonRestore()}
            if (folder / "meta").is_dir():
                items["meta"] = ocp.args.JsonRestore()
            try:
                out = self.manager.restore(step, args=ocp.args.Composite(**items))
                meta = dict(out["meta"] or {}) if "meta" in items else {}
                fp = out["fingerprint"] or {}
                if fp.get("format") != FORMAT or not isinstance(fp.get("leaves"), dict):
                    reason = _NO_FINGERPRINT
                else:
                    saved = fp["leaves"]
            except Exception as e:  # orbax raises bare Exceptions; each becomes a reason
                reason = _reason(e)
        if reason is None:
            _check_structure(step, folder, saved, like, partial)
        reason = _agree(reason)
        if reason is not None:
            raise _Unverified(reason)
        _quiet_leftover_reads()
        try:
            state = self.manager.restore(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.PyTreeRestore(
                        item=_abstract(like),
                        restore_args=_restore_args(like),
                        partial_restore=partial,
                    )
                ),
            )["state"]
        except Exception as e:
            reason = _reason(e)
        if reason is not None:
            _collect_pending_reads()
        reason = _agree(reason)
        if reason is not None:
            raise _Unverified(reason)
        got = fingerprint(state)
        bad = [p for p, leaf in got.items() if leaf["hash"] != saved[p]["hash"]]
        if bad:
            more = f" (and {len(bad) - 1} more arrays)" if len(bad) > 1 else ""
            raise _Unverified(
                f"corrupt bytes: the values of {bad[0]}{more} differ from the fingerprint saved "
                "with them"
            )
        return state, meta

    def _move_aside(self, skipped: list[Skipped]) -> list[Skipped]:
        """Move skipped steps into ``<directory>/unverified/`` (process 0), then re-list."""
        moved = []
        for s in skipped:
            dest = self.directory / UNVERIFIED / str(s.step)
            n = 1
            while dest.exists():
                n += 1
                dest = self.directory / UNVERIFIED / f"{s.step}.{n}"
            if jax.process_index() == 0:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(self.directory / str(s.step)), str(dest))
            moved.append(Skipped(s.step, s.reason, str(dest)))
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("ttjax.ttml.checkpoint.move_aside")
        self.manager.reload()
        return moved

    def discard(self, step: int) -> None:
        """Remove checkpoint ``step`` once its save is on disk (a state found bad after its save
        started: the trainer's step whose loss was not finite)."""
        self.wait()
        if step in self.all_steps():
            self.manager.delete(step)

    def wait(self) -> None:
        """Block until the save in flight is on disk; a failed save raises CheckpointError."""
        try:
            self.manager.wait_until_finished()
        except Exception as e:
            self._failed(self._pending if self._pending is not None else -1, e)
        self._pending = None

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.manager.close()


def load_model_parameters(
    directory: str | os.PathLike[str], like: Any, step: int | None = None, key: str = "params"
) -> Any:
    """The parameters alone of the newest verified checkpoint in ``directory`` (for inference).

    >>> params = load_model_parameters("checkpoints/run1", like=model_params)
    """
    ckpt = Checkpointer(directory, use_async=False)
    try:
        return ckpt.load_model_parameters(like, step, key)
    finally:
        ckpt.close()


# -- the fingerprint ---------------------------------------------------------------------------


def _path_str(path: tuple[Any, ...]) -> str:
    parts = []
    for k in path:
        for attr in ("key", "name", "idx"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
        else:
            parts.append(str(k))
    return "/".join(parts)


def _fmix(h: Any) -> Any:
    """murmur3's 32-bit finalizer: a bijection that spreads every input bit."""
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def _bits(x: Any) -> Any:
    """The elements' bits as uint32 (8-byte elements folded), same shape as ``x``."""
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint32)
    size = x.dtype.itemsize
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return _bits(jnp.real(x)) ^ _fmix(_bits(jnp.imag(x)))
    if size == 8:
        pair = lax.bitcast_convert_type(x, jnp.uint32)
        return pair[..., 0] ^ _fmix(pair[..., 1])
    unsigned = {4: jnp.uint32, 2: jnp.uint16, 1: jnp.uint8}[size]
    return lax.bitcast_convert_type(x, unsigned).astype(jnp.uint32)


def _leaf_hash(x: Any) -> Any:
    """Two wrapping uint32 sums of mixed (bits, global index): independent of the sharding."""
    bits = _bits(x)
    index = jnp.zeros(x.shape, jnp.uint32)
    stride = 1
    for d in reversed(range(x.ndim)):
        index = index + lax.broadcasted_iota(jnp.uint32, x.shape, d) * jnp.uint32(
            stride & 0xFFFFFFFF
        )
        stride *= x.shape[d]
    return jnp.stack(
        [jnp.sum(_fmix(bits ^ _fmix(index + jnp.uint32(s))), dtype=jnp.uint32) for s in _SEEDS]
    )


_hash_leaf = jax.jit(_leaf_hash)


def fingerprint(tree: Any) -> dict[str, dict[str, Any]]:
    """Per array of ``tree``: ``{"path": {"shape", "dtype", "hash"}}`` (same on every mesh).

    >>> fingerprint({"w": jnp.ones(3)})["w"]["shape"]
    [3]
    """
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    arrays = [x if isinstance(x, jax.Array) else jnp.asarray(x) for _, x in flat]
    # One leaf at a time, each hash read before the next starts: in one program XLA's CPU
    # schedule makes every leaf's mixed bits before it sums any (twice the state: 7 GB at
    # tt-train's gpt2m's final checkpoint); this way, twice the largest leaf.
    hashes = [np.asarray(_hash_leaf(x)) for x in arrays]
    out = {}
    for (path, _), x, h in zip(flat, arrays, hashes):
        lo, hi = (int(v) for v in h)
        out[_path_str(path)] = {
            "shape": list(x.shape),
            "dtype": str(x.dtype),
            "hash": f"{lo:08x}{hi:08x}",
        }
    return out


# -- checks --------------------------------------------------------------------------------------


def _check_structure(
    step: int, folder: Path, saved: dict[str, Any], like: Any, partial: bool
) -> None:
    """Raise :class:`CheckpointMismatchError` at the first parameter ``like`` and ``saved`` differ."""
    flat = jax.tree_util.tree_flatten_with_path(like)[0]
    want = {_path_str(p): x for p, x in flat}
    problem = None
    for path, x in want.items():
        if path not in saved:
            problem = f"{path} (shape {list(x.shape)}) is in the model but not in the checkpoint"
        elif saved[path]["shape"] != list(x.shape):
            problem = (
                f"{path} has saved shape {saved[path]['shape']} but model shape {list(x.shape)}"
            )
        elif saved[path]["dtype"] != str(np.dtype(x.dtype)):
            problem = (
                f"{path} has saved dtype {saved[path]['dtype']} but model dtype {np.dtype(x.dtype)}"
            )
        if problem:
            break
    if problem is None and not partial:
        extra = [p for p in saved if p not in want]
        if extra:
            problem = f"{extra[0]} is in the checkpoint but not in the model"
    if problem is not None:
        raise CheckpointMismatchError(
            f"checkpoint step {step} ({folder}) does not match the model: {problem}.\n"
            "fix: restore with the model configuration the run was saved with (num_blocks, "
            "embedding_dim, num_heads, vocab_size, ...; for opt_state: the optimizer and "
            "use_clip_grad_norm), load the weights alone with load_model_parameters, or start a "
            "new run in another checkpoint_dir."
        )


_JSON_FILES = ("_CHECKPOINT_METADATA", "_METADATA", "metadata", "_sharding")


def _check_json_files(folder: Path) -> str | None:
    """The first metadata file of the step folder that is not valid JSON, as a reason."""
    if not folder.is_dir():
        return f"missing folder {folder}"
    paths = [p for name in _JSON_FILES for p in folder.rglob(name)]
    paths += list(folder.glob("*/array_metadatas/*"))
    for p in sorted(paths):
        if not p.is_file():
            continue
        try:
            json.loads(p.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            return f"corrupt metadata: {p.relative_to(folder.parent)} is not valid JSON ({e})"
    return None


def _reason(e: BaseException) -> str:
    """One line for an orbax/TensorStore failure: its kind and the innermost message."""
    inner: BaseException = e
    while inner.__cause__ is not None or inner.__context__ is not None:
        inner = inner.__cause__ or inner.__context__  # type: ignore[assignment]
    text = (str(inner).strip() or str(e).strip() or type(e).__name__).split("\n")[0][:240]
    low = text.lower()
    if isinstance(inner, json.JSONDecodeError):
        kind = "corrupt metadata"
    elif isinstance(inner, FileNotFoundError) or "not_found" in low or "no such file" in low:
        kind = "missing file"
    elif any(w in low for w in ("out_of_range", "truncated", "zstd", "data_loss", "byte range")):
        kind = "missing or truncated chunk"
    else:
        kind = f"unreadable ({type(inner).__name__})"
    return f"{kind}: {text}"


class _LeftoverReads(logging.Filter):
    """Drops asyncio's "<Future/Task> exception was never retrieved" for orbax's abandoned reads."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        first = text.split("\n", 1)[0]
        return not (
            first.endswith("exception was never retrieved")
            and any(word in text for word in ("OCDBT", "orbax", "TensorStore"))
        )


_QUIET = {"installed": False}


def _is_leftover(u: Any) -> bool:
    """An unraisable left by a read orbax abandoned: its coroutine, or its late callback."""
    if isinstance(u.exc_value, RuntimeError) and str(u.exc_value) == "Event loop is closed":
        return True
    return asyncio.iscoroutine(u.object) or isinstance(u.object, asyncio.Future)


def _quiet_leftover_reads() -> None:
    """Drop (only) what orbax's abandoned reads leave behind after a failed restore.

    When one array's read fails, orbax abandons the others: each later prints "Exception ignored
    in: <coroutine ...>", or "Event loop is closed" when TensorStore finishes a read after
    orbax's event loop closed, and asyncio logs "... exception was never retrieved": one damaged
    checkpoint would print dozens of TensorStore tracebacks beside its one-line reason. Installed
    before the first restore (the leftovers can arrive before the failure is handled); every
    other unraisable still reaches the previous hook.
    """
    if _QUIET["installed"]:
        return
    _QUIET["installed"] = True
    previous = sys.unraisablehook

    def hook(u: Any) -> None:
        if not _is_leftover(u):
            previous(u)

    sys.unraisablehook = hook
    logging.getLogger("asyncio").addFilter(_LeftoverReads())


class _FailedSave(logging.Filter):
    """Drops orbax's traceback of a save that failed in its background thread: the same error is
    raised again by ``wait_until_finished``, and :meth:`Checkpointer._failed` reports it once."""

    MARKS = (
        "_SignalingThread.run() raised an exception",
        "in background save thread",
        "Save Finalize thread",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not any(mark in text for mark in self.MARKS)


def _quiet_failed_saves() -> None:
    """Install :class:`_FailedSave` on absl's logger (orbax logs there) once."""
    logger = logging.getLogger("absl")
    if not any(isinstance(f, _FailedSave) for f in logger.filters):
        logger.addFilter(_FailedSave())


def _collect_pending_reads() -> None:
    """Collect the abandoned reads of a failed restore now (see ``_quiet_leftover_reads``)."""
    gc.collect()


def _agree(reason: str | None) -> str | None:
    """Every process takes the same decision: if one failed, all fail (collective restores)."""
    if jax.process_count() == 1:
        return reason
    from jax.experimental import multihost_utils

    flags = multihost_utils.process_allgather(np.array([reason is not None], np.int32))
    failed = [i for i, f in enumerate(np.asarray(flags).reshape(-1)) if f]
    if not failed or reason is not None:
        return reason
    return f"failed on process {failed[0]} (see its output)"


def _abstract(like: Any) -> Any:
    def one(a: Any) -> Any:
        sharding = getattr(a, "sharding", None)
        return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding)

    return jax.tree_util.tree_map(one, like)


def _restore_args(like: Any) -> Any:
    def one(a: Any) -> Any:
        sharding = getattr(a, "sharding", None)
        if sharding is None:
            return ocp.RestoreArgs(restore_type=np.ndarray, dtype=a.dtype)
        return ocp.ArrayRestoreArgs(sharding=sharding, global_shape=a.shape, dtype=a.dtype)

    return jax.tree_util.tree_map(one, like)


__all__ = ["Checkpointer", "Restored", "Skipped", "fingerprint", "load_model_parameters"]
