"""The shared command line of the training scripts (``python -m models.nanogpt.train``, Llama's).

TTML's order: read the YAML, ``open_device(mesh_shape)``, ``initialize_parallelism_context``,
build the model from the seed, then train. ``--max-steps`` stops earlier without changing the
learning-rate schedule (so a stopped run and its ``--resume`` follow one trajectory).

Every ``python -m models.*.train`` runs through :func:`run_cli`: a ttjax error (a bad YAML key,
``--mesh-shape 2by4``, ``--max-steps 0``, ...) prints as one message ending with its ``fix:``
line and exit status 1, no traceback; ``--debug`` (or ``TTJAX_DEBUG=1``, e.g. under
``ttjax-run``) shows the traceback too.

>>> raise SystemExit(run_cli(lambda a: main(a, build=build, prog=prog), None, prog))
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from ttjax._src.core.cli import DEBUG_ENV, debug_requested, report_errors
from ttjax.errors import ConfigError, MeshShapeError, TTJaxError
from ttjax.ttml import memory
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.checkpoint import Checkpointer
from ttjax.ttml.config import PipelineParallelConfig, RunConfig, load_config, validate_batch
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.data import TokenDataset, load_dataset
from ttjax.ttml.errors import TrainingConfigError
from ttjax.ttml.pipeline import Pipeline
from ttjax.ttml.pipeline_train import PipelineTrainStep, make_pp_optimizer
from ttjax.ttml.train import (
    BaseTrainStep,
    OptimizerSettings,
    TrainStep,
    make_optimizer,
    mixed_precision,
)
from ttjax.ttml.trainer import LoopSettings, Trainer, segments_label, stop_now_line


@dataclass(frozen=True)
class StageParts:
    """A model cut for the pipeline: ``(embed, block, head)``, the params split and their specs."""

    embed: Callable[..., Any]
    block: Callable[..., Any]
    head: Callable[..., Any]
    split: Callable[[Any], tuple[Any, Any]]
    io_specs: Any
    block_specs: Any

    @classmethod
    def from_adapter(
        cls, adapter: Any, model: Any, config: Any, par: ParallelismContext
    ) -> StageParts:
        """The stages of ``model`` as its pipeline adapter module cuts them.

        ``adapter`` has ``stage_functions``, ``split_params``, ``io_specs`` and ``block_specs``
        (``models.nanogpt.pipeline``, ``models.llama.pipeline``).
        """
        embed, block, head = adapter.stage_functions(model)
        return cls(
            embed,
            block,
            head,
            adapter.split_params,
            adapter.io_specs(config, par),
            adapter.block_specs(config, par),
        )


@dataclass(frozen=True)
class ModelParts:
    """What a model script hands the trainer: its loss, whole parameters and their mesh specs.

    ``stages(par)`` cuts the model into pipeline stages (needed when ``enable_pp`` is set).
    With ``init``, ``params`` are the parameters' ``jax.ShapeDtypeStruct``\\ s and ``init()``
    builds them: the memory preflight runs on the shapes, before any weight is allocated.
    """

    loss_fn: Callable[..., Any]
    params: Any
    specs: Any
    description: str
    stages: Callable[[ParallelismContext], StageParts] | None = None
    init: Callable[[], Any] | None = None

    def whole_params(self) -> Any:
        """The whole parameters: ``init()`` when the model was built as shapes, else ``params``."""
        return self.params if self.init is None else self.init()


Build = Callable[[RunConfig, ParallelismContext, int], ModelParts]


#: TTML rounds the model's vocabulary up to a tile (32) per TP device (nano_gpt/main.cpp).
TILE = 32
#: TTML's line when it sets the model's vocabulary from the tokenizer.
VOCAB_LINE = "Overriding vocab size to be divisible by 32"


def ttml_vocab_size(tokens: int, tp_size: int = 1) -> int:
    """TTML's model vocabulary for a tokenizer of ``tokens`` ids: rounded up to ``32 * tp_size``.

    TTML's ``round_up_to_tile(vocab, (enable_tp ? num_devices : 1) * 32)``; TTML's TP takes the
    whole mesh, so its ``num_devices`` is the TP size (ttjax's TP+DDP splits only over TP).

    >>> ttml_vocab_size(65), ttml_vocab_size(103), ttml_vocab_size(103, 8)
    (96, 128, 256)
    """
    step = TILE * tp_size
    return -(-tokens // step) * step


def model_vocab(run: RunConfig, par: ParallelismContext, tokens: int | None = None) -> int:
    """The model's vocabulary, as TTML sets it: the tokenizer's ``tokens`` rounded up by
    :func:`ttml_vocab_size` when the file leaves ``transformer_config.vocab_size`` out or writes
    one too small for the tokens (TTML's YAMLs write a placeholder 96). A written value that
    holds the tokens is kept, so one config builds the same model on every mesh (and
    ``--resume --mesh-shape`` restores onto it); TTML would round it up again under TP. TP must
    divide the result. Without ``tokens``: the configured ``vocab_size``.
    """
    v = run.model.vocab_size
    if tokens is not None and ("vocab_size" not in run.model.written or v < tokens):
        v = ttml_vocab_size(tokens, par.tp_size)
    if v % par.tp_size:
        up = -(-v // par.tp_size) * par.tp_size
        raise TrainingConfigError(
            f"{run.path}: transformer_config.vocab_size = {v} is not divisible by the TP size "
            f"{par.tp_size} (the embedding and LM head split the vocabulary over TP).\n"
            f"fix: set vocab_size to a multiple of {par.tp_size}, e.g. {up}, or leave it out "
            "(TTML's rule: the tokenizer's, rounded up)."
        )
    return v


def check_model_type(run: RunConfig, model_type: str, other: str) -> None:
    """A script trains one ``model_type`` (TTML's ``training_config.model_type``); the other
    type's config names the script that trains it."""
    if run.model.model_type != model_type:
        raise TrainingConfigError(
            f"{run.path}: model_type = {run.model.model_type!r}, and this script trains "
            f"{model_type!r}.\nfix: run {other} --config {run.path}."
        )


def note_dropout(run: RunConfig) -> None:
    """Say once that ``dropout_prob`` is not applied (ttjax trains without dropout, so every mesh
    gives the single-device losses); the rest of the config trains as written."""
    p = run.model.dropout_prob
    if p and jax.process_index() == 0:
        print(
            f"note: transformer_config.dropout_prob = {p} is not applied: ttjax trains "
            "without dropout (every mesh then gives the single-device losses)."
        )


def tokenizer_file(run: RunConfig) -> Path | None:
    """``training_config.tokenizer_path`` for a BPE run, when it names a file (TTML reads it
    from the working directory; ttjax also looks beside the config and in its parent folders,
    and under ``$TT_METAL_HOME/tt-train``). None: the BPE is trained on the corpus."""
    t = run.training
    if t.tokenizer_type != "bpe" or not t.tokenizer_path:
        return None
    ref = Path(os.path.expanduser(t.tokenizer_path))
    if ref.is_absolute():
        places = [ref]
    else:
        base = Path(run.path).resolve().parent
        home = os.environ.get("TT_METAL_HOME")
        places = [Path.cwd() / ref, *(d / ref for d in (base, *base.parents))]
        places += [Path(home) / "tt-train" / ref] if home else []
    return next((p for p in places if p.is_file()), None)


def places_line(data_path: str, data: TokenDataset, out: Path, ckpt: Checkpointer) -> str:
    """The banner's second line: the corpus read and the folders written, absolute. Relative
    ``data_path``, ``--out`` and ``checkpoint_dir`` are read from the current folder, as tt-train
    and PyTorch scripts read theirs, so a run started elsewhere says where its files go."""
    tokens = f"{len(data.train) + len(data.val):,} tokens"
    corpus = (
        f"corpus {str(Path(os.path.expanduser(data_path)).resolve())!r} ({tokens})"
        if data_path
        else f"corpus: Python's documentation text (pydoc_data; data_path is empty; {tokens})"
    )
    return f"{corpus}; logs in {str(out.resolve())!r}; checkpoints in {str(ckpt.directory)!r}"


def bpe_size(run: RunConfig) -> int:
    """The size of a BPE trained on the corpus: ``vocab_size`` when the file wrote one above the
    256 byte tokens, else 512."""
    v = run.model.vocab_size
    return v if "vocab_size" in run.model.written and v > 256 else 512


def pipeline_step(
    run: RunConfig, par: ParallelismContext, parts: ModelParts, opt: OptimizerSettings
) -> PipelineTrainStep:
    """The PP train step of ``run``: stages on the plan's PP axis, DDP/TP as configured.

    ``multihost_config.pipeline_parallel_config`` gives the block map and the schedule; without
    it the model's blocks split evenly, one microbatch, GPipe (TTML's behaviour).
    """
    if parts.stages is None:
        raise ConfigError(
            f"{run.path}: device_config.enable_pp is true but this model has no pipeline "
            "stages.\nfix: set enable_pp: false, or train NanoGPT or Llama."
        )
    if run.training.compute_dtype != "float32":
        raise ConfigError(
            f"{run.path}: training_config.compute_dtype = {run.training.compute_dtype!r} with "
            "enable_pp is not supported yet (the pipeline stages are not cast).\n"
            "fix: set compute_dtype: float32, or enable_pp: false."
        )
    if par.cp_size > 1:
        raise ConfigError(
            f"{run.path}: device_config.enable_cp with enable_pp is not trained by ttjax yet (the "
            "pipeline's stages take whole sequences).\nfix: set enable_cp: false, or enable_pp: "
            "false."
        )
    cfg = run.multihost.pipeline_parallel_config or PipelineParallelConfig(
        num_blocks=run.model.num_blocks
    )
    if cfg.num_blocks != run.model.num_blocks:
        raise ConfigError(
            f"{run.path}: pipeline_parallel_config.num_blocks = {cfg.num_blocks} but the model "
            f"has num_blocks = {run.model.num_blocks}.\nfix: make them equal."
        )
    stages = par.get_pp_size()
    if stages > cfg.num_blocks:
        raise ConfigError(
            f"{run.path}: {stages} pipeline stages need at least {stages} blocks; the model has "
            f"{cfg.num_blocks} (transformer_config.num_blocks).\nfix: set num_blocks to "
            f"{stages} or more, or use a mesh with at most {cfg.num_blocks} devices on the PP "
            "axis."
        )
    sp = parts.stages(par)
    pipe = Pipeline.from_context(
        par,
        cfg,
        sp.embed,
        sp.block,
        sp.head,
        io_specs=sp.io_specs,
        block_specs=sp.block_specs,
    )
    return PipelineTrainStep(
        pipe,
        make_pp_optimizer(opt, clip=False),
        split=sp.split,
        accum=run.training.gradient_accumulation_steps,
        schedule=opt.schedule(),
        clip_norm=opt.clip_grad_norm_max_norm,
    )


def train_step(
    run: RunConfig,
    par: ParallelismContext,
    parts: ModelParts,
    opt: OptimizerSettings,
    micro_batch: int | None = None,
) -> BaseTrainStep:
    """The train step of ``run``: pipelined (:func:`pipeline_step`) when ``enable_pp`` is set,
    else plain (:class:`TrainStep` on the model's layout and ``par``'s plan; ``micro_batch``
    sequences per device at once, as :func:`ttjax.ttml.memory.preflight` picks it)."""
    if run.device.enable_pp:
        return pipeline_step(run, par, parts, opt)
    return TrainStep(
        mixed_precision(parts.loss_fn, run.training.compute_dtype),
        parts.specs,
        par,
        make_optimizer(opt, clip=False),  # the step clips, its norm summed by ttjax.numerics
        accum=run.training.gradient_accumulation_steps,
        schedule=opt.schedule(),
        clip_norm=opt.clip_grad_norm_max_norm,
        micro_batch=micro_batch,
    )


def parse_mesh_shape(text: str) -> list[int]:
    """``--mesh-shape`` text ``"RxC"`` (or ``"RxCxP"``) -> ``[R, C]``; anything else raises."""
    parts = text.strip().lower().split("x")
    if len(parts) in (2, 3) and all(p.isdigit() and int(p) > 0 for p in parts):
        return [int(p) for p in parts]
    raise MeshShapeError(
        f"--mesh-shape {text!r} is not of the form RxC (two positive integers joined by 'x'; "
        "RxCxP for three axes).\nfix: --mesh-shape 2x4, for example, or leave it out to use "
        "device_config.mesh_shape."
    )


def max_steps(run: RunConfig, flag: int | None) -> int:
    """The last step: ``--max-steps`` (1 .. ``training_config.max_steps``) or the config's.

    ``--max-steps`` stops early on the config's learning-rate schedule; 0, a negative value or one
    past the schedule's end is refused rather than silently replaced.
    """
    total = run.training.max_steps
    if flag is None:
        return total
    if flag < 1 or flag > total:
        raise TrainingConfigError(
            f"--max-steps {flag} is outside 1..{total} (training_config.max_steps = {total} in "
            f"{run.path}; the learning-rate schedule ends there).\nfix: pass --max-steps N with "
            f"1 <= N <= {total}, or raise training_config.max_steps to train longer."
        )
    return flag


def refuse_ignored_keys(run: RunConfig) -> None:
    """Keys this CLI would otherwise read and ignore: each raises, naming the key and the fix.

    ``multihost_config.enabled`` (TTML's 3-tier or multi-host pipeline training) needs several
    hosts joined by MPI or fabric sockets: refused in one line saying so.
    """
    t, mh = run.training, run.multihost
    if mh.enabled:
        raise TrainingConfigError(
            f"{run.path}: multihost_config.enabled = true needs {mh.num_workers or 'several'} "
            f"hosts joined by {mh.socket_type} sockets (TTML's "
            f"{'multi-host pipeline' if mh.pipeline_parallel_config else '3-tier'} training); "
            "this command trains on one host.\nfix: set multihost_config.enabled: false to "
            "train on this host's mesh (ttjax-run starts processes over several hosts)."
        )
    ignored = [
        (
            bool(t.model_path),
            "training_config.model_path",
            t.model_path,
            "the run starts from the seed's weights (--resume continues a checkpoint)",
        ),
        (
            bool(run.model.model_path),
            "transformer_config.model_path",
            run.model.model_path,
            "the run starts from the seed's weights (--resume continues a checkpoint)",
        ),
        (
            t.num_epochs != 1,
            "training_config.num_epochs",
            t.num_epochs,
            "training samples random windows for training_config.max_steps steps, not epochs",
        ),
    ]
    for bad, key, value, why in ignored:
        if bad:
            raise TrainingConfigError(
                f"{run.path}: {key} = {value!r} is not used by ttjax's training: {why}.\n"
                f"fix: remove {key.rsplit('.', 1)[-1]} (or set it to its default)."
            )


def check_writable_dir(folder: str | os.PathLike[str], key: str) -> None:
    """Create ``folder`` and write a probe file in it, before any device opens, so a checkpoint or
    log folder that cannot be made or written stops the run before step 1 (naming ``key``)."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".ttjax-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        why = f"{str(blocker)!r} is a file, not a folder" if blocker else e.strerror or str(e)
        raise TrainingConfigError(
            f"{key} = {str(folder)!r} cannot be created or written: {why}.\nfix: set {key} to a "
            "folder you can write (it is created if missing)."
        ) from None


def strategies(par: ParallelismContext, step: Any) -> str:
    """Every strategy in force, for the banner: DDP and TP axes and sizes, and PP's layout."""
    text = par.describe()
    pipe = getattr(step, "pipe", None)
    if pipe is None:
        return text + ", PP off"
    return text + (
        f", PP {pipe.num_stages} stages over mesh axis {pipe.pp_axis!r} (blocks per stage "
        f"{list(pipe.stage_sizes)}), schedule {pipe.schedule}, "
        f"{pipe.num_microbatches} microbatch{'es' if pipe.num_microbatches != 1 else ''}"
    )


def parse_args(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description="Train with TTML's configs on a ttjax mesh.")
    p.add_argument("--config", required=True, help="training YAML (configs/training_*.yaml)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="stop after this step (1 .. training_config.max_steps; the schedule is unchanged)",
    )
    p.add_argument("--mesh-shape", default=None, help="override device_config.mesh_shape, e.g. 1x8")
    p.add_argument(
        "--out",
        default=None,
        help="log/plot folder (default runs/<project_name>; relative paths, and "
        "training_config.checkpoint_dir, are from the current folder, as in tt-train)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config key, checked as the YAML's (repeatable), e.g. "
        "--set training_config.batch_size=8",
    )
    p.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="STEPS",
        help="trace STEPS steps with jax.profiler into <out>/profile (Perfetto / TensorBoard)",
    )
    add_debug_flag(p)
    return p.parse_args(argv)


def add_debug_flag(parser: argparse.ArgumentParser) -> None:
    """``--debug``: what :func:`run_cli` reads to show a ttjax error's traceback."""
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"show the traceback of an error (also: {DEBUG_ENV}=1)",
    )


def run_cli(fn: Callable[[list[str]], int], argv: Sequence[str] | None, prog: str) -> int:
    """Run a command line's ``fn(argv)``; a ttjax error becomes one clean message and status 1.

    The message is the error's own (it names the bad value and ends with ``fix:``). With
    ``--debug`` in ``argv`` or ``TTJAX_DEBUG`` set, the traceback is printed first
    (:func:`ttjax._src.core.cli.report_errors`).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return report_errors(lambda: fn(args), prog, debug_requested(args))
    except KeyboardInterrupt:  # Ctrl-C outside the loop (a second one, while the run saves)
        print(f"{prog}: {stop_now_line(signal.SIGINT, again=False)}", file=sys.stderr, flush=True)
        return 128 + signal.SIGINT


def main(argv: Sequence[str] | None, *, build: Build, prog: str) -> int:
    """Run one training from a TTML YAML file; returns the exit code (errors raise)."""
    args = parse_args(argv, prog)
    override = parse_mesh_shape(args.mesh_shape) if args.mesh_shape else None
    try:
        run = load_config(args.config, args.set, mesh_shape=override)
    except TTJaxError as e:
        if not args.set:
            raise
        first, _, rest = str(e).partition("\n")
        sets = " ".join(f"--set {s}" for s in args.set)
        raise type(e)(f"{first} (read with {sets})\n{rest}") from None
    if args.profile < 0:
        raise TrainingConfigError(
            f"--profile {args.profile} is negative.\nfix: --profile N traces N steps (0: none)."
        )
    t, dev = run.training, run.device
    shape = list(dev.mesh_shape)
    last_step = max_steps(run, args.max_steps)
    refuse_ignored_keys(run)
    check_writable_dir(t.checkpoint_dir, "training_config.checkpoint_dir")
    check_writable_dir(args.out or Path("runs") / t.project_name, "--out")
    opt = OptimizerSettings.from_config(run)
    ctx = AutoContext.get_instance()
    ctx.set_seed(t.seed)
    ctx.open_device(shape, list(dev.device_ids) or None)
    try:
        # The run's one plan: made and checked when the config was read, held by the context.
        par = ctx.initialize_parallelism_context(dev.dims)
        validate_batch(run, par)
        tok_file = tokenizer_file(run)
        if t.tokenizer_type == "bpe" and tok_file is None and jax.process_index() == 0:
            why = f"{t.tokenizer_path!r} not found" if t.tokenizer_path else "no tokenizer_path"
            print(
                f"{prog}: tokenizer: a byte-level BPE of {bpe_size(run)} tokens trained on the "
                f"corpus ({why})"
            )
        data = load_dataset(
            t.tokenizer_type,
            vocab_size=bpe_size(run) if t.tokenizer_type == "bpe" else None,
            data_path=t.data_path,
            tokenizer_path=tok_file,
        )
        data.check_windows(run.model.max_sequence_length, f"data_path {t.data_path!r}")
        vocab = model_vocab(run, par, data.vocab_size)
        if vocab != run.model.vocab_size and jax.process_index() == 0:
            print(
                f"{VOCAB_LINE} (tokenizer: {data.vocab_size} tokens; transformer_config."
                f"vocab_size {run.model.vocab_size} -> {vocab})"
            )
        memory.pin_mmap_threshold()  # before the state: freed temporaries go back to the system
        parts = build(run, par, vocab)
        step = memory.preflight(  # every rank: it agrees the host figures over the processes
            train_step(run, par, parts, opt),
            lambda mb: train_step(run, par, parts, opt, micro_batch=mb),
            parts.params,
            t.batch_size,
            run.model.max_sequence_length,
            where=str(run.path),
            report=print if jax.process_index() == 0 else None,
        )
        loop = LoopSettings(
            batch_size=t.batch_size,
            seq_len=run.model.max_sequence_length,
            max_steps=last_step,
            seed=t.seed,
            eval_every=t.eval_every,
            model_save_interval=t.model_save_interval,
            progress=not args.no_progress,
            log_every=t.log_every,
            profile_steps=args.profile,
        )
        ckpt = Checkpointer(t.checkpoint_dir, max_to_keep=t.keep_checkpoints)
        out = Path(args.out or Path("runs") / t.project_name)
        trainer = Trainer(step, data, loop, out, checkpointer=ckpt)
        if args.resume:
            state, history = trainer.resume(parts.whole_params())
        else:
            if ckpt.all_steps():
                raise ConfigError(
                    f"checkpoint_dir {str(ckpt.directory)!r} already holds steps "
                    f"{ckpt.all_steps()}.\nfix: pass --resume to continue, or remove the folder."
                )
            state, history = step.init_state(parts.whole_params()), []
        if args.resume and int(state.step) >= loop.max_steps:
            ckpt.close()
            if int(state.step) > loop.max_steps:
                raise ConfigError(
                    f"--resume: the checkpoint is at step {int(state.step)}, past this run's "
                    f"last step {loop.max_steps}, so there is nothing to train.\nfix: pass "
                    f"--max-steps above {int(state.step)} (at most {t.max_steps}), or raise "
                    "training_config.max_steps."
                )
            if trainer.primary:
                print(
                    f"{prog}: run already finished at step {int(state.step)} (checkpoint in "
                    f"{ckpt.directory}); raise --max-steps / training_config.max_steps to continue"
                )
            return 0
        if trainer.primary:
            print(
                f"{prog}: {parts.description} on mesh {shape}: {strategies(par, step)}; "
                f"{data.tokenizer!r}, unigram val loss {trainer.unigram:.4f}; steps "
                f"{int(state.step) + 1}..{last_step} of {t.max_steps}"
                + (f", resumed at step {int(state.step)}" if args.resume else "")
                + ("" if loop.eval_every else "; validation off (eval_every: 0)")
                + (
                    f"; compute {t.compute_dtype} (float32 master weights and optimizer state)"
                    if t.compute_dtype != "float32"
                    else ""
                )
            )
            print(f"{prog}: {places_line(t.data_path, data, out, ckpt)}")
        state, history = trainer.run(state, history)
        ckpt.close()
        last = history[-1] if history else {}
        segments = trainer.all_segments(int(state.step))
        summary = {
            "config": str(args.config),
            "mesh_shape": shape,
            "segments": segments,
            "processes": jax.process_count(),
            "model": parts.description,
            "final_loss": last.get("loss"),
            "final_val_loss": last.get("val_loss"),
        }
        log = trainer.write_summary(history, summary)
        png = trainer.plot(
            history, f"{t.project_name} on {segments_label(segments)}\n{parts.description}"
        )
        if trainer.primary:
            print(
                json.dumps(
                    {
                        **summary,
                        "unigram_val_loss": trainer.unigram,
                        "log": str(log),
                        "plot": None if png is None else str(png),
                    }
                )
            )
        if trainer.interrupted is not None:
            if trainer.primary:
                print(f"interrupted at step {int(state.step)}, resume with --resume", flush=True)
            return 128 + int(trainer.interrupted)
    finally:
        ctx.close_device()
    return 0


__all__ = [
    "VOCAB_LINE",
    "ModelParts",
    "StageParts",
    "add_debug_flag",
    "bpe_size",
    "check_model_type",
    "check_writable_dir",
    "main",
    "max_steps",
    "model_vocab",
    "note_dropout",
    "parse_mesh_shape",
    "pipeline_step",
    "places_line",
    "refuse_ignored_keys",
    "run_cli",
    "strategies",
    "tokenizer_file",
    "train_step",
    "ttml_vocab_size",
]
