"""The shared command line of the training scripts (``python -m models.nanogpt.train``, Llama's).

TTML's order: read the YAML, ``open_device(mesh_shape)``, ``initialize_parallelism_context``,
build the model from the seed, then train. ``--max-steps`` stops earlier without changing the
learning-rate schedule (so a stopped run and its ``--resume`` follow one trajectory).

>>> raise SystemExit(main(argv, build=build_nanogpt, name="nanogpt"))
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from ttjax.errors import ConfigError
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.checkpoint import Checkpointer
from ttjax.ttml.config import PipelineParallelConfig, RunConfig, load_config, validate_batch
from ttjax.ttml.context import DistributedConfig
from ttjax.ttml.data import TokenDataset, load_dataset
from ttjax.ttml.parallel import Parallelism
from ttjax.ttml.pipeline import Pipeline
from ttjax.ttml.pipeline_train import PipelineTrainStep, make_pp_optimizer
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer
from ttjax.ttml.trainer import LoopSettings, Trainer, segments_label

VOCAB_MULTIPLE = 64  # vocab rounded up to this (TTML rounds to a TP multiple): equal on every mesh


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
        (``models.nanogpt_pipeline``, ``models.llama_pipeline``).
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


def padded_vocab(data: TokenDataset) -> int:
    """The tokenizer's vocabulary rounded up to a multiple of 64 (any TP size up to 64 divides it)."""
    return -(-data.vocab_size // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


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
    cfg = run.multihost.pipeline_parallel_config or PipelineParallelConfig(
        num_blocks=run.model.num_blocks
    )
    if cfg.num_blocks != run.model.num_blocks:
        raise ConfigError(
            f"{run.path}: pipeline_parallel_config.num_blocks = {cfg.num_blocks} but the model "
            f"has num_blocks = {run.model.num_blocks}.\nfix: make them equal."
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
        make_pp_optimizer(opt),
        split=sp.split,
        accum=run.training.gradient_accumulation_steps,
        schedule=opt.schedule(),
    )


def parse_args(argv: Sequence[str] | None, prog: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description="Train with TTML's configs on a ttjax mesh.")
    p.add_argument("--config", required=True, help="training YAML (configs/training_*.yaml)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this step")
    p.add_argument("--mesh-shape", default=None, help="override device_config.mesh_shape, e.g. 1x8")
    p.add_argument("--out", default=None, help="log/plot folder (default runs/<project_name>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None, *, build: Build, prog: str) -> int:
    """Run one training from a TTML YAML file; returns the exit code."""
    args = parse_args(argv, prog)
    run = load_config(args.config)
    t, dev = run.training, run.device
    shape = list(dev.mesh_shape)
    if args.mesh_shape:
        shape = [int(x) for x in args.mesh_shape.lower().split("x")]
    ctx = AutoContext.get_instance()
    ctx.set_seed(t.seed)
    mesh = ctx.open_device(shape, list(dev.device_ids) or None)
    try:
        pctx = ctx.initialize_parallelism_context(
            DistributedConfig(
                enable_ddp=dev.enable_ddp, enable_tp=dev.enable_tp, enable_pp=dev.enable_pp
            )
        )
        validate_batch(run, pctx)
        par = Parallelism.from_context(pctx, mesh)
        data = load_dataset(
            t.tokenizer_type, vocab_size=run.model.vocab_size, data_path=t.data_path
        )
        parts = build(run, par, padded_vocab(data))
        opt = OptimizerSettings.from_config(run)
        step: TrainStep | PipelineTrainStep
        if dev.enable_pp:
            step = pipeline_step(run, pctx, par, parts, opt)
        else:
            step = TrainStep(
                parts.loss_fn,
                parts.specs,
                par,
                make_optimizer(opt),
                accum=t.gradient_accumulation_steps,
                schedule=opt.schedule(),
            )
        loop = LoopSettings(
            batch_size=t.batch_size,
            seq_len=run.model.max_sequence_length,
            max_steps=min(t.max_steps, args.max_steps or t.max_steps),
            seed=t.seed,
            eval_every=t.eval_every,
            model_save_interval=t.model_save_interval,
            progress=not args.no_progress,
        )
        ckpt = Checkpointer(t.checkpoint_dir)
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
                f"{prog}: {parts.description} on {par!r}; {data.tokenizer!r}, "
                f"unigram val loss {trainer.unigram:.4f}"
                + (f", resumed at step {int(state.step)}" if args.resume else "")
                + ("" if loop.eval_every else "; validation off (eval_every: 0)")
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
                        "plot": str(png),
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


__all__ = ["ModelParts", "StageParts", "main", "padded_vocab", "pipeline_step"]
