"""Orbax checkpoints of a training run: bit-exact resume, resume on another mesh shape, a save
cut short keeps the last good checkpoint, and a NaN loss stops training naming the step."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from _tiny import ACCUM, CONFIG, dataset, loop_settings, params, train_step

from models.nanogpt.model import GPT
from models.nanogpt.weights import param_specs
from ttjax.ttml.checkpoint import Checkpointer
from ttjax.ttml.data import TokenDataset
from ttjax.ttml.train import TrainingDivergedError, TrainStep
from ttjax.ttml.trainer import LoopSettings, Trainer


def _data() -> TokenDataset:
    return dataset()


def _settings(max_steps: int) -> LoopSettings:
    return loop_settings(max_steps)


def _train(step, folder, max_steps, resume=False):
    trainer = Trainer(
        step,
        _data(),
        _settings(max_steps),
        folder / "out",
        checkpointer=Checkpointer(folder / "ckpt"),
    )
    if resume:
        state, history = trainer.resume(params())
    else:
        state, history = step.init_state(params()), []
    state, history = trainer.run(state, history)
    trainer.checkpointer.close()
    return state, history


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("full")
    return _train(train_step("tp_ddp"), folder, 6)


def test_resume_is_bit_exact_on_the_same_mesh(tmp_path, full_run):
    _, full = full_run
    _train(train_step("tp_ddp"), tmp_path, 3)
    assert Checkpointer(tmp_path / "ckpt").all_steps() == [3]
    _, resumed = _train(train_step("tp_ddp"), tmp_path, 6, resume=True)
    assert [r["step"] for r in resumed] == list(range(1, 7))
    assert [r["loss"] for r in resumed] == [r["loss"] for r in full]  # bit for bit
    assert [r.get("val_loss") for r in resumed] == [r.get("val_loss") for r in full]
    assert (tmp_path / "out" / "log.jsonl").read_text().count("\n") == 6


@pytest.mark.slow
def test_resume_on_another_mesh_shape(tmp_path, full_run):
    full_state, full = full_run
    _train(train_step("tp_ddp"), tmp_path, 3)  # saved on 2x4 (DDP 2 x TP 4)
    tp8 = train_step("tp")  # resumed on 1x8 (TP 8)
    trainer = Trainer(
        tp8, _data(), _settings(6), tmp_path / "out8", checkpointer=Checkpointer(tmp_path / "ckpt")
    )
    state, history = trainer.resume(params())
    assert int(state.step) == 3 and len(history) == 3
    w = state.params["wte"]["weight"]
    assert w.sharding.spec == tp8.param_shardings["wte"]["weight"].spec
    state, history = trainer.run(state, history)
    np.testing.assert_allclose([r["loss"] for r in history], [r["loss"] for r in full], rtol=2e-5)
    for a, b in zip(
        jax.tree_util.tree_leaves(state.params), jax.tree_util.tree_leaves(full_state.params)
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


INTERRUPTED_SAVE = """
import os, sys
import numpy as np
from ttjax.ttml.checkpoint import Checkpointer
ckpt = Checkpointer(sys.argv[1])
ckpt.save(1, {"w": np.arange(1000, dtype=np.float32)})
ckpt.wait()
ckpt.save(2, {"w": np.arange(1000, dtype=np.float32) + 1,
              "big": np.ones((64, 1024, 1024), np.float32)})
os._exit(3)  # the process dies while step 2 is being written
"""


def test_interrupted_save_keeps_the_last_good_checkpoint(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(INTERRUPTED_SAVE), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "TTJAX_NUM_DEVICES": "1"},
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert not (tmp_path / "2").exists()  # never renamed into place
    ckpt = Checkpointer(tmp_path)
    assert ckpt.all_steps() == [1] and ckpt.latest_step() == 1
    state, _ = ckpt.restore(1, {"w": jnp.zeros(1000, jnp.float32)})
    np.testing.assert_array_equal(np.asarray(state["w"]), np.arange(1000, dtype=np.float32))
    ckpt.close()


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
    good = train_step("ddp_2")
    # A learning rate that turns infinite after three updates: the 4th update makes the
    # parameters inf/NaN, so the loss of step 5 is NaN.
    sgd = optax.sgd(lambda count: jnp.where(count >= 3, jnp.inf, 1e-3))
    step = TrainStep(GPT(CONFIG).loss, param_specs(CONFIG, good.par), good.par, sgd, accum=ACCUM)
    trainer = Trainer(
        step, _data(), _settings(8), tmp_path / "out", checkpointer=Checkpointer(tmp_path / "ckpt")
    )
    state = step.init_state(params())
    with pytest.raises(
        TrainingDivergedError,
        match=r"the loss is nan at step 5; the last good checkpoint \(step 3\)",
    ):
        trainer.run(state)
    ckpt = Checkpointer(tmp_path / "ckpt")
    assert ckpt.all_steps() == [3]
    restored, meta = ckpt.restore(3, step.init_state(params()))
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree_util.tree_leaves(restored))
    assert [r["step"] for r in meta["history"]] == [1, 2, 3]
    ckpt.close()


def _saved_with_compiles(folder, state, caplog):
    """Save and restore ``state``; the programs the save compiled, and the restored state."""
    caplog.clear()
    ckpt = Checkpointer(folder, use_async=False)
    with caplog.at_level("WARNING"), jax.log_compiles(True):
        ckpt.save(1, state)
        ckpt.wait()
    logged = [r.getMessage() for r in caplog.records]
    got, _ = ckpt.restore(1, state)
    ckpt.close()
    return [m for m in logged if "Finished XLA compilation" in m], got


def test_small_replicated_shards_are_written_whole_large_ones_split(tmp_path, caplog, monkeypatch):
    """A DDP state (every array replicated over 8 devices) whose per-replica slices are under
    ``MIN_REPLICA_SLICE`` is written whole by its first replica: no per-replica ``slice``
    program is compiled (orbax's CPU default compiled one per array and replica, about 6 s a
    save). Over the threshold orbax splits the writes among the replicas, as before. Both
    restore the saved values."""
    from ttjax.ttml import checkpoint

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]), ("dp",))
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    state = {
        name: jax.device_put(np.arange(n * 8, dtype=np.float32).reshape(8, n) + i, replicated)
        for i, (name, n) in enumerate([("w", 16), ("b", 24), ("e", 40)])
    }
    small, got = _saved_with_compiles(tmp_path / "small", state, caplog)
    assert not [m for m in small if "jit(slice)" in m], small
    for name, value in state.items():
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(value))
    # 8 x 16 float32 = 512 bytes over 8 replicas: 64-byte slices, over a 64-byte threshold
    monkeypatch.setattr(checkpoint, "MIN_REPLICA_SLICE", 64)
    split, got = _saved_with_compiles(tmp_path / "split", state, caplog)
    assert [m for m in split if "jit(slice)" in m], split
    for name, value in state.items():
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(value))


_FINGERPRINT_PEAK = """
import jax, jax.numpy as jnp
from ttjax.ttml import memory
from ttjax.ttml.checkpoint import fingerprint
from ttjax.ttml.trainer import _all_finite
memory.pin_mmap_threshold()  # freed temporaries leave the process, so RSS shows each phase
tree = {f"w{i}": jnp.full((4 << 20,), float(i), jnp.float32) for i in range(8)}  # 8 x 16 MiB
fingerprint({"w": tree["w0"]}), _all_finite({"w": tree["w0"]})  # compiled before
jax.block_until_ready(tree)
memory.release_free_memory()
before = memory.current_rss()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from here
fingerprint(tree)
assert _all_finite(tree)
print((memory.peak_rss() - before) >> 20)
"""


def test_fingerprint_and_finite_check_take_a_leaf_at_a_time():
    """Checking 128 MiB of state takes less than the state (about four leaves), not the state twice
    over (one program over the tree made every leaf's mixed bits at once: gpt2m's final save
    peaked 7 GB above the state)."""
    out = subprocess.run(
        [sys.executable, "-c", _FINGERPRINT_PEAK], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) < 128, out.stdout  # the state: 8 x 16 MiB
