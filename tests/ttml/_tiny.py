"""A tiny NanoGPT training set-up shared by the training and checkpoint tests (cached per mesh)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import ttjax as ttnn
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_specs
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.data import CharTokenizer, TokenDataset
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer
from ttjax.ttml.trainer import LoopSettings

# The model file of the CLI tests' YAML runs: a 4-block character NanoGPT (TTML's keys).
YAML_MODEL = {
    "model_type": "gpt2",
    "num_heads": 4,
    "embedding_dim": 32,
    "dropout_prob": 0.0,
    "num_blocks": 4,
    "vocab_size": 128,
    "max_sequence_length": 8,
    "weight_tying": "enabled",
    "positional_embedding_type": "trainable",
}

CONFIG = GPTConfig(vocab_size=64, block_size=8, n_layer=1, n_head=8, n_embd=32)
SEED = 5489
ACCUM, BATCH, SEQ = 2, 8, 8
OPT = OptimizerSettings(
    learning_rate=3e-3, warmup_steps=3, total_steps=20, min_lr=3e-4, clip_grad_norm_max_norm=1.0
)
# name -> (mesh shape, DDP axis, TP axis), TTML's axis order.
LAYOUTS = {
    "single": ((1, 1), None, None),
    "ddp": ((1, 8), 1, None),
    "tp": ((1, 8), None, 1),
    "tp_ddp": ((2, 4), 0, 1),
    "tp_ddp_1x8": ((1, 8), 0, 1),
    "tp_ddp_8x1": ((8, 1), 0, 1),
    "tp_ddp_4x8": ((4, 8), 0, 1),
    "ddp_2": ((1, 2), 1, None),
}


@functools.cache
def mesh(shape: tuple[int, int]) -> ttnn.MeshDevice:
    return ttnn.open_mesh_device(ttnn.MeshShape(*shape))


@functools.cache
def train_step(layout: str, opt: OptimizerSettings = OPT, step_clips: bool = False) -> TrainStep:
    """The tiny NanoGPT step on ``layout``; ``step_clips``: the step clips the gradients at
    ``opt.clip_grad_norm_max_norm`` (its norm summed through ``ttjax.numerics``), not the
    optimizer (optax's ``clip_by_global_norm``)."""
    shape, ddp, tp = LAYOUTS[layout]
    par = ParallelismContext.from_axes(mesh(shape), ddp, tp)
    return TrainStep(
        GPT(CONFIG).loss,
        param_specs(CONFIG, par),
        par,
        make_optimizer(opt, clip=not step_clips),
        accum=ACCUM,
        schedule=opt.schedule(),
        clip_norm=opt.clip_grad_norm_max_norm if step_clips else None,
    )


def params() -> dict:
    return init_params(CONFIG, SEED)


def batches(steps: int, seed: int = 0) -> np.ndarray:
    """[steps, accum, batch, seq + 1] learnable sequences: t[i + 1] = (5 t[i] + k) mod vocab."""
    rng = np.random.default_rng(seed)
    shape = (steps, ACCUM, BATCH, 1)
    start = rng.integers(0, CONFIG.vocab_size, shape)
    k = rng.integers(1, 3, shape)
    toks = [start]
    for _ in range(SEQ):
        toks.append((5 * toks[-1] + k) % CONFIG.vocab_size)
    return np.concatenate(toks, axis=-1).astype(np.int32)


def losses(layout: str, steps: int = 20) -> np.ndarray:
    step = train_step(layout)
    state = step.init_state(params())
    out = []
    for tokens in batches(steps):
        state, metrics = step(state, tokens)
        out.append(float(metrics["loss"]))
    return np.asarray(out)


def dataset() -> TokenDataset:
    """A learnable character stream (t[i + 1] = 5 t[i] + k) split 3600 / 400 tokens."""
    rng = np.random.default_rng(1)
    stream = [int(rng.integers(CONFIG.vocab_size))]
    for _ in range(4000):
        stream.append((5 * stream[-1] + int(rng.integers(1, 3))) % CONFIG.vocab_size)
    ids = np.asarray(stream, np.int32)
    chars = "".join(chr(48 + i) for i in range(CONFIG.vocab_size))
    return TokenDataset(ids[:3600], ids[3600:], CharTokenizer(chars))


def loop_settings(max_steps: int, eval_every: int = 3, save_every: int = 3) -> LoopSettings:
    return LoopSettings(
        batch_size=BATCH,
        seq_len=SEQ,
        max_steps=max_steps,
        eval_every=eval_every,
        eval_batches=2,
        model_save_interval=save_every,
        progress=False,
    )


# The CLI subprocess tests' smallest run: a 1-block NanoGPT on a [1, 2] DDP mesh (the N300's).
N300_ENV = {"TT_MESH_GRAPH_DESC_PATH": "n300_mesh_graph_descriptor.textproto"}


def cli_config(tmp: Path, name: str, **training: Any) -> Path:
    """A training YAML in ``tmp`` for ``name``: 6 steps, no validation, no saves but the last;
    ``training`` overrides training_config keys."""
    doc = {
        "training_config": {
            "project_name": name,
            "batch_size": 4,
            "max_steps": 6,
            "eval_every": 0,
            "model_save_interval": 1000,
            "checkpoint_dir": str(tmp / name / "ckpt"),
            "tokenizer_type": "char",
            "optimizer": {"type": "AdamW", "lr": 0.003},
            **training,
        },
        "transformer_config": {**YAML_MODEL, "num_blocks": 1},
        "device_config": {"mesh_shape": [1, 2], "enable_ddp": True},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _cli(argv: tuple[str, ...], env: dict[str, str] | None) -> dict[str, Any]:
    root = Path(__file__).resolve().parents[2]
    shim = str(Path(__file__).parent / "_shim.py")
    return {
        "args": [sys.executable, shim, "models.nanogpt.train", *argv],
        "cwd": root,
        "env": {
            **os.environ,
            "PYTHONPATH": str(root),
            "TTJAX_NUM_DEVICES": "8",
            **N300_ENV,
            **(env or {}),
        },
        "text": True,
    }


def cli_run(
    *argv: str, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """``python -m models.nanogpt.train ARGV`` through ``_shim.py`` (a fault from ``env``), as
    a shell runs it: stdout and stderr are pipes, returned apart."""
    return subprocess.run(**_cli(argv, env), capture_output=True, timeout=300, **kw)


def cli_popen(*argv: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    """The same command started in the background (to signal it)."""
    return subprocess.Popen(**_cli(argv, env), **kw)
