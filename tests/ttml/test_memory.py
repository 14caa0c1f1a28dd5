"""Training memory: chunked steps give the whole batch's loss and gradients, the preflight's
estimate tracks the measured peak, and a run that cannot fit is refused in one message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import yaml
from _tiny import YAML_MODEL as MODEL

from models.nanogpt import train as nanogpt_train
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_axes
from ttjax.errors import ConfigError
from ttjax.ttml import memory
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.cli import train_step
from ttjax.ttml.config import load_config
from ttjax.ttml.train import OptimizerSettings, TrainStep, make_optimizer

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp: Path) -> Path:
    doc = {
        "training_config": {
            "project_name": "mem",
            "batch_size": 8,
            "max_steps": 3,
            "eval_every": 0,
            "model_save_interval": 0,
            "checkpoint_dir": str(tmp / "ckpt"),
            "tokenizer_type": "char",
        },
        "transformer_config": MODEL,
        "device_config": {"mesh_shape": [1, 2], "enable_ddp": True},
    }
    path = tmp / "mem.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_parse_bytes_and_pick_chunk():
    assert memory.parse_bytes("2GiB") == 2 << 30
    assert memory.parse_bytes("1.5GB") == 1_500_000_000
    assert memory.parse_bytes("512m") == 512_000_000
    with pytest.raises(ConfigError, match="fix:"):
        memory.parse_bytes("lots")
    assert memory.pick_chunk(128, 100.0, 900.0) == 8
    assert memory.pick_chunk(12, 100.0, 500.0) == 4
    assert memory.pick_chunk(8, 1e9, 1.0) == 1


def test_chunked_step_equals_the_whole_batch(tmp_path):
    """micro_batch=2 on 8 sequences per device: the same loss, gradients and eval loss."""
    ctx = AutoContext.get_instance()
    ctx.open_device([1, 2])
    try:
        par = ctx.initialize_parallelism_context(load_config(_config(tmp_path)).device.dims)
        config = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32)
        params = init_params(config, 0)
        opt = make_optimizer(OptimizerSettings(1e-2), clip=False)
        tokens = np.random.default_rng(0).integers(0, 64, (1, 16, 17)).astype(np.int32)
        out = []
        for mb in (None, 2):
            step = TrainStep(GPT(config).loss, param_axes(config), par, opt, micro_batch=mb)
            state, metrics = step(step.init_state(params), tokens)
            _, grads = step.grads(step.place_params(params), tokens)
            out.append((metrics, grads, step.eval_loss(state.params, tokens)))
        (m0, p0, v0), (m1, p1, v1) = out
        # the chunks sum the same float32 terms in another order: each of a device's 8 x 16
        # token losses can move the mean by one rounding (the summation bound n * eps)
        summed = 8 * 16 * np.finfo(np.float32).eps
        np.testing.assert_allclose(float(m1["loss"]), float(m0["loss"]), rtol=summed)
        np.testing.assert_allclose(float(m1["grad_norm"]), float(m0["grad_norm"]), rtol=1e-5)
        np.testing.assert_allclose(float(v1), float(v0), rtol=summed)
        for a, b in zip(jax.tree_util.tree_leaves(p1), jax.tree_util.tree_leaves(p0), strict=True):
            b = np.asarray(b)
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-4, atol=1e-6 * np.abs(b).max())
        with pytest.raises(ConfigError, match="micro_batch=3 does not divide"):
            TrainStep(GPT(config).loss, param_axes(config), par, opt, micro_batch=3)(
                step.init_state(params), tokens
            )
    finally:
        ctx.close_device()


@pytest.mark.slow
def test_donated_state_counts_once(tmp_path):
    """The donating step's estimate holds the state once: its outputs are written over the
    state it is given (XLA's alias), the keeping step's state counts in and out."""
    ctx = AutoContext.get_instance()
    ctx.open_device([1, 2])
    try:
        par = ctx.initialize_parallelism_context(load_config(_config(tmp_path)).device.dims)
        config = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32)
        shapes = jax.eval_shape(lambda: init_params(config, 0))
        opt = make_optimizer(OptimizerSettings(1e-2), clip=False)
        steps = {
            donate: TrainStep(GPT(config).loss, param_axes(config), par, opt, donate=donate)
            for donate in (True, False)
        }
        est = {k: memory.step_estimate(s, shapes, 8, 16, 0) for k, s in steps.items()}
        # per device (DDP: all replicated): weights, AdamW's moments, the step counters
        abstract, _ = steps[True].abstract_inputs(shapes, 8, 16)
        state = sum(a.size * a.dtype.itemsize for a in jax.tree_util.tree_leaves(abstract))
        assert est[False].alias == 0 and est[True].alias == state
        assert est[True].arguments == est[False].arguments
        assert est[False].state - est[True].state == 2 * state  # 2 devices, one state each
        # a save holds the placed state (both replicas) and the writer's host copy of it (once);
        # where that is more than the step's figure the excess joins the runtime
        for e in est.values():
            at_save = 2 * e.arguments + state
            assert e.runtime == memory.RUNTIME + max(0, at_save - e.compiled)
    finally:
        ctx.close_device()


def test_cli_refuses_a_run_that_does_not_fit(tmp_path, monkeypatch):
    """A tiny "available" figure: one message with the estimate, the host's figure, the fix."""
    monkeypatch.setenv(memory.ENV_AVAILABLE, "100MB")
    argv = ["--config", str(_config(tmp_path)), "--no-progress", "--out", str(tmp_path / "o")]
    with pytest.raises(memory.HostMemoryError) as err:
        nanogpt_train.cli(argv)
    text = str(err.value)
    assert "this run needs about" in text and "of host memory at its peak" in text, text
    assert "the step's temporaries 2 devices x" in text, text
    assert "the host has 0.09 GiB available" in text, text
    fix = text.splitlines()[-1]
    assert fix.startswith("fix: a smaller training_config.batch_size (now 8)"), fix
    assert "runner_type: memory_efficient" in fix and "bfloat16" in fix and "a mesh" in fix
    assert memory.ENV_CHECK in fix
    assert not (tmp_path / "ckpt").exists() or not any((tmp_path / "ckpt").iterdir())


class _Sized:
    """A step whose compiled program reports fixed per-device sizes (1 GB of temporaries on
    each of 2 devices; nothing is compiled): what the preflight weighs against the host."""

    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:2]), ("dp",))

    def abstract_inputs(self, params, batch, seq):
        return params, None

    def local_batch(self, batch):
        return batch // 2

    def compiled(self, state, tokens):
        return self

    def memory_analysis(self):
        sizes = {"argument": 1000, "output": 1000, "alias": 0, "temp": 10**9}
        return type("Analysis", (), {f"{k}_size_in_bytes": v for k, v in sizes.items()})


def test_check_off_starts_a_run_that_does_not_fit(monkeypatch):
    """2 GB of temporaries on a host with 100 MB: refused; with the check off, the same estimate
    is returned and the run goes on (the CLI's path: tests/ttml/test_memory.py's slow
    test_cli_trains_when_the_check_is_off)."""
    monkeypatch.setenv(memory.ENV_AVAILABLE, "100MB")
    step, lines = _Sized(), []
    with pytest.raises(memory.HostMemoryError, match="the step's temporaries 2 devices x"):
        memory.plan(step, lambda mb: step, {}, 8, 8)
    monkeypatch.setenv(memory.ENV_CHECK, "off")
    got, est = memory.plan(step, lambda mb: step, {}, 8, 8, report=lines.append)
    assert got is step and est is not None
    assert (est.devices, est.temp, est.arguments, est.outputs) == (2, 10**9, 1000, 1000)
    assert est.total > memory.HEADROOM * memory.parse_bytes("100MB")
    assert len(lines) == 1 and lines[0].startswith("memory: estimated peak"), lines


@pytest.mark.slow  # a whole CLI run; test_check_off_starts_a_run_that_does_not_fit checks the switch
def test_cli_trains_when_the_check_is_off(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(memory.ENV_AVAILABLE, "100MB")
    monkeypatch.setenv(memory.ENV_CHECK, "off")
    argv = ["--config", str(_config(tmp_path)), "--no-progress", "--out", str(tmp_path / "o")]
    argv += ["--max-steps", "1"]
    assert nanogpt_train.cli(argv) == 0
    assert "memory: estimated peak" in capsys.readouterr().out


@pytest.mark.slow
def test_budget_picks_chunks(tmp_path, monkeypatch, capsys):
    """A small activation budget: each device's 4 sequences run in chunks the line names."""
    monkeypatch.setenv(memory.ENV_BUDGET, "1KB")
    argv = ["--config", str(_config(tmp_path)), "--no-progress", "--out", str(tmp_path / "o")]
    argv += ["--max-steps", "1"]
    assert nanogpt_train.cli(argv) == 0
    assert "each device runs its 4 sequences in chunks of 1" in capsys.readouterr().out


@pytest.mark.slow  # a fresh process's compile and 2 steps (about a minute on 2 cores)
def test_estimate_tracks_the_measured_peak():
    """A fresh process (the benchmark's child, a small NanoGPT, XLA's default settings): its peak
    RSS is within [0.67, 1.5] of the preflight's estimate. The child reads its own high-water
    mark (``VmHWM``): ``ru_maxrss`` would start at this test process's size, whatever ran before."""
    spec = json.dumps({"model": "tiny", "remat": "none", "batch": 8})
    # a user's plain environment: not the suite's fast-compile XLA flags nor what earlier tests set
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(PYTHONPATH=str(ROOT), TTJAX_MEMORY_CHECK="off")
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_memory", "--child", spec],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = proc.communicate(timeout=300)
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])
    assert 0.67 <= result["peak_rss"] / result["estimate"] <= 1.5, result


@pytest.mark.slow  # ~20 s of CPU: the pipelined step's compile
def test_pipelined_step_is_estimated_on_the_state_it_places(monkeypatch):
    """PP: the abstract state is the one ``init_state`` places (shapes, dtypes, shardings), the
    step compiled on it runs on the placed state, and the preflight estimates (and refuses) it."""
    run = load_config(ROOT / "configs" / "training_nanogpt_pp.yaml")
    ctx = AutoContext.get_instance()
    ctx.open_device(run.device.mesh_shape)
    try:
        par = ctx.initialize_parallelism_context(run.device.dims)
        parts = nanogpt_train.build(run, par, run.model.vocab_size)
        step = train_step(run, par, parts, OptimizerSettings.from_config(run))
        batch, seq = run.training.batch_size, run.model.max_sequence_length
        state = step.init_state(parts.whole_params())
        like = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state)
        abstract, tokens = step.abstract_inputs(parts.params, batch, seq)
        for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(abstract)):
            assert (a.shape, a.dtype) == (b.shape, b.dtype)
            assert a.sharding.is_equivalent_to(b.sharding, a.ndim), (a.sharding, b.sharding)
        assert jax.tree_util.tree_structure(like) == jax.tree_util.tree_structure(abstract)
        host = np.random.default_rng(0).integers(0, run.model.vocab_size, tokens.shape)
        # the program compiled on the shapes takes the placed state as it is (it raises on
        # another layout), and its first loss is the untrained model's, about log(vocab)
        _, got = step.compiled(abstract, tokens)(state, step._put_batch(host.astype(np.int32)))
        assert abs(float(got["loss"]) - np.log(run.model.vocab_size)) < 0.5, float(got["loss"])
        monkeypatch.setenv(memory.ENV_AVAILABLE, "10MB")
        with pytest.raises(memory.HostMemoryError, match="the step's temporaries 8 devices x"):
            memory.preflight(step, lambda mb: step, parts.params, batch, seq)
    finally:
        ctx.close_device()


_FREED_BLOCK = """
import ctypes, sys
from ttjax.ttml import memory
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
pinned = memory.pin_mmap_threshold() if sys.argv[1] == "pin" else False
big = libc.malloc(16 << 20); ctypes.memset(big, 1, 16 << 20); libc.free(big)  # raises glibc's
block = libc.malloc(4 << 20); ctypes.memset(block, 1, 4 << 20)  # threshold unless pinned
keep = libc.malloc(1024)  # above the block: the heap cannot shrink past it
before = memory.current_rss()
libc.free(block)
print(pinned, (before - memory.current_rss()) >> 20)
"""


@pytest.mark.parametrize("how", ["pin", "default"])
def test_pinned_mmap_threshold_returns_freed_blocks(how):
    """A freed 4 MiB block leaves the process when the threshold is pinned; by default glibc,
    having freed a 16 MiB mapping, keeps the next 4 MiB block in its heap after it is freed."""
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    out = subprocess.run(
        [sys.executable, "-c", _FREED_BLOCK, how],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert out[0] == str(how == "pin")
    assert (int(out[1]) >= 4) == (how == "pin"), out


def test_pin_leaves_a_users_malloc_setting(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert memory.pin_mmap_threshold() is False
