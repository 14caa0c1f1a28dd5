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
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from ttjax.errors import ConfigError, MeshShapeError, TTJaxError
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.checkpoint import Checkpointer
from ttjax.ttml.config import PipelineParallelConfig, RunConfig, load_config, validate_batch
from ttjax.ttml.data import load_dataset
from ttjax.ttml.errors import TrainingConfigError
from ttjax.ttml.parallel import Parallelism
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

DEBUG_ENV = "TTJAX_DEBUG"  # set (not "0") = --debug, for runs started by ttjax-run


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
    def from_adapter(cls, adapter: Any, model: Any, config: Any, par: Parallelism) -> StageParts:
        """The stages of ``model`` as its pipeline adapter module cuts them.

        ``adapter`` has ``stage_functions``, ``split_params``, ``io_specs`` and ``block_specs``
        (``models.nanogpt.pipeline``, ``models.llama.pipeline``).
        """
        embed, block, head = adapter.stage_functions(model, par.tp)
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
    """

    loss_fn: Callable[..., Any]
    params: Any
    specs: Any
    description: str
    stages: Callable[[Parallelism], StageParts] | None = None


Build = Callable[[RunConfig, Parallelism, int], ModelParts]


def model_vocab(run: RunConfig, par: Parallelism) -> int:
    """The model's vocabulary: ``transformer_config.vocab_size``, which TP must divide.

    The tokenizer's ids must fit in it (checked by ``load_dataset``); the same value on every
    mesh keeps every mesh's model (and its losses) equal.
    """
    v = run.model.vocab_size
    if v % par.tp_size:
        up = -(-v // par.tp_size) * par.tp_size
        raise TrainingConfigError(
            f"{run.path}: transformer_config.vocab_size = {v} is not divisible by the TP size "
            f"{par.tp_size} (the embedding and LM head split the vocabulary over TP).\n"
            f"fix: set vocab_size to a multiple of {par.tp_size}, e.g. {up}."
        )
    return v


def pipeline_step(
    run: RunConfig, pctx: Any, par: Parallelism, parts: ModelParts, opt: OptimizerSettings
) -> PipelineTrainStep:
    """The PP train step of ``run``: stages on the context's PP axis, DDP/TP as configured.

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
    pp = pctx.get_pp_axis_name()
    stages = int(pctx.jax_mesh.shape[pp]) if pp is not None else 1
    if stages > cfg.num_blocks:
        raise ConfigError(
            f"{run.path}: {stages} pipeline stages need at least {stages} blocks; the model has "
            f"{cfg.num_blocks} (transformer_config.num_blocks).\nfix: set num_blocks to "
            f"{stages} or more, or use a mesh with at most {cfg.num_blocks} devices on the PP "
            "axis."
        )
    sp = parts.stages(par)
    pipe = Pipeline.from_context(
        pctx,
        cfg,
        sp.embed,
        sp.block,
        sp.head,
        io_specs=sp.io_specs,
        block_specs=sp.block_specs,
    )
    pipe.check_batch(run.training.batch_size)
    return PipelineTrainStep(
        pipe,
        make_pp_optimizer(opt, clip=False),
        split=sp.split,
        accum=run.training.gradient_accumulation_steps,
        schedule=opt.schedule(),
        clip_norm=opt.clip_grad_norm_max_norm,
    )


def train_step(
    run: RunConfig, pctx: Any, par: Parallelism, parts: ModelParts, opt: OptimizerSettings
) -> BaseTrainStep:
    """The train step of ``run``: pipelined (:func:`pipeline_step`) when ``enable_pp`` is set,
    else plain (:class:`TrainStep` on the model's layout and ``par``'s plan)."""
    if run.device.enable_pp:
        return pipeline_step(run, pctx, par, parts, opt)
    return TrainStep(
        mixed_precision(parts.loss_fn, run.training.compute_dtype),
        parts.specs,
        par,
        make_optimizer(opt, clip=False),  # the step clips, its norm summed by ttjax.numerics
        accum=run.training.gradient_accumulation_steps,
        schedule=opt.schedule(),
        clip_norm=opt.clip_grad_norm_max_norm,
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
    """Keys this CLI would otherwise read and ignore: each raises, naming the key and the fix."""
    t = run.training
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
            bool(t.tokenizer_path),
            "training_config.tokenizer_path",
            t.tokenizer_path,
            "the tokenizer is built here from the text (tokenizer_type, vocab_size)",
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


def strategies(par: Parallelism, step: Any) -> str:
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
    p.add_argument("--out", default=None, help="log/plot folder (default runs/<project_name>)")
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
    ``--debug`` in ``argv`` or ``TTJAX_DEBUG`` set, the traceback is printed first.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        return fn(args)
    except KeyboardInterrupt:  # Ctrl-C outside the loop (a second one, while the run saves)
        print(f"{prog}: {stop_now_line(signal.SIGINT, again=False)}", file=sys.stderr, flush=True)
        return 128 + signal.SIGINT
    except (TTJaxError, OSError) as e:
        if debug:
            traceback.print_exc()
        message = str(e).strip() or type(e).__name__
        if "fix:" not in message:
            message += "\nfix: check the path and its permissions."
        hint = "" if debug else f"\n(run with --debug or {DEBUG_ENV}=1 for the traceback)"
        print(f"{prog}: error ({type(e).__name__}): {message}{hint}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None, *, build: Build, prog: str) -> int:
    """Run one training from a TTML YAML file; returns the exit code (errors raise)."""
    args = parse_args(argv, prog)
    try:
        run = load_config(args.config, args.set)
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
    if args.mesh_shape:
        shape = parse_mesh_shape(args.mesh_shape)
    last_step = max_steps(run, args.max_steps)
    refuse_ignored_keys(run)
    opt = OptimizerSettings.from_config(run)
    ctx = AutoContext.get_instance()
    ctx.set_seed(t.seed)
    mesh = ctx.open_device(shape, list(dev.device_ids) or None)
    try:
        pctx = ctx.initialize_parallelism_context(dev.distributed_config())
        validate_batch(run, pctx)
        par = Parallelism.from_context(pctx, mesh)
        vocab = model_vocab(run, par)
        data = load_dataset(t.tokenizer_type, vocab_size=vocab, data_path=t.data_path)
        parts = build(run, par, vocab)
        step = train_step(run, pctx, par, parts, opt)
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
            state, history = trainer.resume(parts.params)
        else:
            if ckpt.all_steps():
                raise ConfigError(
                    f"checkpoint_dir {str(ckpt.directory)!r} already holds steps "
                    f"{ckpt.all_steps()}.\nfix: pass --resume to continue, or remove the folder."
                )
            state, history = step.init_state(parts.params), []
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
                    f"; compute {t.compute_dtype} (float32 master weights and AdamW state)"
                    if t.compute_dtype != "float32"
                    else ""
                )
            )
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
    "ModelParts",
    "StageParts",
    "add_debug_flag",
    "main",
    "max_steps",
    "model_vocab",
    "parse_mesh_shape",
    "pipeline_step",
    "refuse_ignored_keys",
    "run_cli",
    "strategies",
    "train_step",
]
