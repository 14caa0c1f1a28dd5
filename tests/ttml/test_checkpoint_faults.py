"""Damaged checkpoints, changed models, interrupts: what ``--resume`` does with each.

One tiny TP+DDP (2x4) run saves steps 3 and 6; each test copies its checkpoints, damages step 6
the way a disk or a user would, and checks that resuming falls back to step 3 naming step 6 and
the reason (or refuses, naming the parameter), and that the fallback continues the run's losses.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import yaml
from _tiny import (
    ACCUM,
    CONFIG,
    cli_config,
    cli_popen,
    cli_run,
    dataset,
    loop_settings,
    params,
    train_step,
)

from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.train import cli
from models.nanogpt.weights import init_params, param_specs
from ttjax.errors import CheckpointError, CheckpointMismatchError, ConfigError
from ttjax.ttml.checkpoint import Checkpointer, fingerprint, load_model_parameters
from ttjax.ttml.train import TrainingDivergedError, TrainStep
from ttjax.ttml.trainer import Trainer


def _trainer(step, folder: Path, max_steps: int, **kw) -> Trainer:
    ckpt = Checkpointer(folder / "ckpt")
    return Trainer(
        step, dataset(), loop_settings(max_steps, **kw), folder / "out", checkpointer=ckpt
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A 6-step run: checkpoints 3 and 6, its final state and its per-step records."""
    folder = tmp_path_factory.mktemp("saved")
    trainer = _trainer(train_step("tp_ddp"), folder, 6)
    state, history = trainer.run(train_step("tp_ddp").init_state(params()))
    trainer.checkpointer.close()
    assert Checkpointer(folder / "ckpt").all_steps() == [3, 6]
    return folder / "ckpt", state, history


def _copy(saved_dir: Path, tmp_path: Path) -> Path:
    shutil.copytree(saved_dir, tmp_path / "ckpt")
    return tmp_path / "ckpt"


def _data_chunks(ckpt: Path, step: int) -> list[Path]:
    """The files holding the arrays' values (each process's OCDBT data files).

    Not one file alone: a data folder also keeps b-tree nodes that the merged root manifest
    superseded, and damaging one of those loses nothing (restore still verifies, rightly).
    """
    chunks = sorted((ckpt / str(step) / "state").glob("ocdbt.process_*/d/*"))
    assert chunks, f"no OCDBT data files under {ckpt / str(step)}"
    return chunks


def _each(harm):
    return lambda c: [harm(p) for p in _data_chunks(c, 6)]


def _flip(path: Path) -> None:
    """Flip 8 bytes at 16 places spread over the chunk file.

    One place is not enough: an OCDBT data file also holds superseded nodes that a read skips.
    """
    data = bytearray(path.read_bytes())
    for at in range(len(data) // 32, len(data) - 8, max(len(data) // 16, 8)):
        for k in range(8):
            data[at + k] ^= 0xFF
    path.write_bytes(bytes(data))


def _rewrite_one_value(ckpt: Path) -> None:
    """Change one float of step 6 by one ulp through tensorstore: the chunk is re-compressed into a
    valid zstd frame and the OCDBT index updated, so the restore reads it without complaint and
    only the fingerprint can tell (flipped bytes are caught earlier, by zstd)."""
    import tensorstore as ts

    base = f"file://{ckpt / '6' / 'state'}/"
    keys = ts.KvStore.open({"driver": "ocdbt", "base": base}).result().list().result()
    arrays = sorted(k.decode()[: -len("/.zarray")] for k in keys if k.endswith(b"/.zarray"))
    for name in arrays:
        spec = {"driver": "zarr", "kvstore": {"driver": "ocdbt", "base": base, "path": f"{name}/"}}
        array = ts.open(spec).result()
        values = np.array(array.read().result())
        if values.dtype == np.float32 and values.size > 1:
            values.flat[values.size // 2] = np.nextafter(values.flat[values.size // 2], np.inf)
            array.write(values).result()
            return
    raise AssertionError(f"no float32 array in {base}: {arrays}")


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {
    "flipped_bytes": (
        _each(_flip),
        r"^(corrupt bytes: the values of \S+|missing or truncated chunk|missing file)",
    ),
    "rewritten_value": (
        _rewrite_one_value,
        r"^corrupt bytes: the values of \S+ differ from the fingerprint saved with them$",
    ),
    "truncated_chunk": (
        _each(_truncate),
        r"^(missing or truncated chunk|missing file): .*OCDBT",
    ),
    "deleted_chunk": (
        _each(Path.unlink),
        r"^(missing or truncated chunk|missing file): .*OCDBT",
    ),
    "corrupt_metadata": (
        lambda c: _truncate(c / "6" / "state" / "_METADATA"),
        r"^corrupt metadata: 6/state/_METADATA is not valid JSON",
    ),
    "corrupt_fingerprint": (
        lambda c: (c / "6" / "fingerprint" / "metadata").write_text('{"format": '),
        r"^corrupt metadata: 6/fingerprint/metadata is not valid JSON",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_newest_checkpoint_falls_back_to_the_previous(tmp_path, saved, damage, capsys):
    saved_dir, _, full = saved
    ckpt = _copy(saved_dir, tmp_path)
    harm, reason = DAMAGE[damage]
    harm(ckpt)
    trainer = _trainer(train_step("tp_ddp"), tmp_path, 6)
    state, history = trainer.resume(params())
    assert int(state.step) == 3 and [r["step"] for r in history] == [1, 2, 3]
    (skip,) = trainer.restored.skipped
    assert skip.step == 6
    assert re.search(reason, skip.reason), skip.reason
    assert skip.moved_to == str(ckpt / "unverified" / "6")
    err = capsys.readouterr().err
    assert f"resume: skipped checkpoint step 6: {skip.reason}" in err and "using step 3" in err
    # The fallback is a real restore: steps 4-6 repeat the undamaged run bit for bit.
    state, history = trainer.run(state, history)
    trainer.checkpointer.close()
    assert [r["loss"] for r in history] == [r["loss"] for r in full]
    assert Checkpointer(ckpt).all_steps() == [3, 6]  # step 6 written again, verified
    assert trainer.checkpointer.restore(6, state)[1]["history"] == history


def test_no_checkpoint_verifies_names_every_step(tmp_path, saved):
    ckpt = _copy(saved[0], tmp_path)
    _truncate(ckpt / "6" / "state" / "_METADATA")
    [p.unlink() for p in _data_chunks(ckpt, 3)]
    trainer = _trainer(train_step("tp_ddp"), tmp_path, 6)
    with pytest.raises(CheckpointError, match=r"no checkpoint in .* verifies") as info:
        trainer.resume(params())
    msg = str(info.value)
    assert "step 6: corrupt metadata" in msg and "step 3: missing or truncated chunk" in msg
    assert msg.splitlines()[-1].startswith("fix: ")
    assert Checkpointer(ckpt).all_steps() == [3, 6]  # nothing moved when nothing verifies


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            {"n_layer": 2},
            "params/blocks/attn_proj/bias has saved shape [1, 32] but model shape [2, 32]",
        ),
        (
            {"n_embd": 64},
            "params/blocks/attn_proj/bias has saved shape [1, 32] but model shape [1, 64]",
        ),
        ({}, "opt_state/0/count (shape []) is in the model but not in the checkpoint"),
    ],
    ids=["2_blocks", "dim_64", "no_clipping"],
)
def test_changed_model_is_refused_naming_the_parameter(tmp_path, saved, change, problem):
    ckpt = _copy(saved[0], tmp_path)
    config = GPTConfig(**{**CONFIG.__dict__, **change})
    par = train_step("tp_ddp").par
    step = TrainStep(
        GPT(config).loss, param_specs(config, par), par, optax.adamw(1e-3), accum=ACCUM
    )
    trainer = _trainer(step, tmp_path, 6)
    with pytest.raises(
        CheckpointMismatchError, match="checkpoint step 6 .*: " + re.escape(problem)
    ) as info:
        trainer.resume(init_params(config, 5489))
    assert "fix: restore with the model configuration the run was saved with" in str(info.value)
    assert Checkpointer(ckpt).all_steps() == [3, 6]


def test_model_only_restore_equals_the_saved_parameters_on_another_mesh(saved):
    saved_dir, state, _ = saved
    tp8 = train_step("tp")  # saved on 2x4, loaded on 1x8: the fingerprint is mesh-independent
    like = jax.device_put(params(), tp8.param_shardings)
    got = load_model_parameters(saved_dir, like)
    want = jax.tree_util.tree_leaves(state.params)
    assert len(jax.tree_util.tree_leaves(got)) == len(want)
    for a, b in zip(jax.tree_util.tree_leaves(got), want):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    w = got["wte"]["weight"]
    assert w.sharding.spec == tp8.param_shardings["wte"]["weight"].spec
    ckpt = Checkpointer(saved_dir, use_async=False)
    older = ckpt.load_model_parameters(like, step=3)
    ckpt.close()
    assert not np.array_equal(np.asarray(older["wte"]["weight"]), np.asarray(w))


def test_fingerprint_is_mesh_independent_and_sees_one_bit():
    w = np.random.default_rng(0).standard_normal((CONFIG.vocab_size, CONFIG.n_embd))
    w = w.astype(np.float32)
    host = fingerprint({"w": w})["w"]  # one device, from numpy
    for layout in ("tp_ddp", "tp", "ddp"):
        sharding = train_step(layout).param_shardings["wte"]["weight"]
        on_mesh = jax.device_put(w, sharding)
        assert len({str(s.index) for s in on_mesh.addressable_shards}) > 1 or layout == "ddp"
        assert fingerprint({"w": on_mesh})["w"] == host
    flipped = w.view(np.uint32).copy()
    flipped[7, 9] ^= 1  # the lowest bit of one element
    assert fingerprint({"w": flipped.view(np.float32)})["w"]["hash"] != host["hash"]
    swapped = w.copy()
    swapped[[0, 1]] = swapped[[1, 0]]  # same values, other places
    assert fingerprint({"w": swapped})["w"]["hash"] != host["hash"]
    assert host["shape"] == [CONFIG.vocab_size, CONFIG.n_embd] and host["dtype"] == "float32"


class _RottingCheckpointer(Checkpointer):
    """Each checkpoint's bytes go bad once written (a failing disk)."""

    def save(self, step, state, meta=None):
        super().save(step, state, meta)
        self.wait()
        [p.unlink() for p in _data_chunks(self.directory, step)]


@pytest.mark.slow
def test_divergence_never_calls_an_unverified_checkpoint_good(tmp_path):
    good = train_step("ddp_2")
    sgd = optax.sgd(lambda count: jnp.where(count >= 3, jnp.inf, 1e-3))
    step = TrainStep(GPT(CONFIG).loss, param_specs(CONFIG, good.par), good.par, sgd, accum=ACCUM)
    ckpt = _RottingCheckpointer(tmp_path / "ckpt")
    trainer = Trainer(step, dataset(), loop_settings(8), tmp_path / "out", checkpointer=ckpt)
    with pytest.raises(TrainingDivergedError) as info:
        trainer.run(step.init_state(params()))
    msg = str(info.value)
    assert "the loss is nan at step 5" in msg and "last good checkpoint" not in msg
    assert f"no checkpoint in {ckpt.directory} verifies" in msg
    assert "checkpoint step 3 does not verify (missing or truncated chunk" in msg


@pytest.mark.slow
@pytest.mark.parametrize(("steps", "want"), [(2, [2]), (5, [3, 5])])
def test_final_checkpoint_with_eval_every_0(tmp_path, steps, want):
    trainer = _trainer(train_step("ddp_2"), tmp_path, steps, eval_every=0)
    state, history = trainer.run(train_step("ddp_2").init_state(params()))
    trainer.checkpointer.close()
    assert all("val_loss" not in r for r in history) and len(history) == steps
    ckpt = Checkpointer(tmp_path / "ckpt")
    assert ckpt.all_steps() == want
    restored, meta = ckpt.restore(steps, state)
    for a, b in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(state)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert meta["history"] == history


# -- the command line ---------------------------------------------------------------------------


def _config(tmp: Path, name: str, max_steps: int, eval_every: int = 0) -> Path:
    doc = {
        "training_config": {
            "project_name": name,
            "seed": 5489,
            "batch_size": 4,
            "max_steps": max_steps,
            "eval_every": eval_every,
            "model_save_interval": 1000,
            "checkpoint_dir": str(tmp / name / "ckpt"),
            "tokenizer_type": "char",
            "scheduler_type": "warmup_cosine",
            "use_clip_grad_norm": True,
            "clip_grad_norm_max_norm": 1.0,
            "optimizer": {"type": "AdamW", "lr": 0.003, "weight_decay": 0.01},
        },
        "transformer_config": {
            "model_type": "gpt2",
            "num_heads": 8,
            "embedding_dim": 32,
            "dropout_prob": 0.0,
            "num_blocks": 1,
            "vocab_size": 128,
            "max_sequence_length": 8,
            "weight_tying": "enabled",
            "positional_embedding_type": "trainable",
        },
        "scheduler_config": {"warmup_steps": 2, "min_lr": 0.0003},
        "device_config": {"mesh_shape": [2, 4], "enable_ddp": True, "enable_tp": True},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _cli(config: Path, out: Path, *extra: str) -> int:
    return cli(["--config", str(config), "--no-progress", "--out", str(out), *extra])


def _losses(out: Path) -> list[float]:
    return [r["loss"] for r in json.loads((out / "log.json").read_text())["steps"]]


@pytest.mark.slow
def test_cli_final_checkpoint_finished_resume_and_mesh_segments(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_mesh_graph_descriptor.textproto")
    config = _config(tmp_path, "seg", max_steps=4)
    assert _cli(config, tmp_path / "a", "--max-steps", "2") == 0
    assert "validation off (eval_every: 0)" in capsys.readouterr().out
    assert Checkpointer(tmp_path / "seg" / "ckpt").all_steps() == [2]  # eval_every 0, 2 steps
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_1x8_mesh_graph_descriptor.textproto")
    assert _cli(config, tmp_path / "b", "--resume", "--mesh-shape", "1x8") == 0
    log = json.loads((tmp_path / "b" / "log.json").read_text())
    assert log["segments"] == [
        {"start_step": 0, "end_step": 2, "mesh_shape": [2, 4], "processes": 1},
        {"start_step": 2, "end_step": 4, "mesh_shape": [1, 8], "processes": 1},
    ]
    assert [r["step"] for r in log["steps"]] == [1, 2, 3, 4]
    assert (tmp_path / "b" / "loss.png").stat().st_size > 0
    capsys.readouterr()
    assert _cli(config, tmp_path / "c", "--resume", "--mesh-shape", "1x8") == 0
    out = capsys.readouterr().out
    assert "run already finished at step 4" in out
    assert "raise --max-steps / training_config.max_steps to continue" in out
    assert not (tmp_path / "c" / "log.json").exists()
    with pytest.raises(
        ConfigError, match=r"the checkpoint is at step 4, past this run's last step 3"
    ):
        _cli(config, tmp_path / "d", "--resume", "--mesh-shape", "1x8", "--max-steps", "3")


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_text().count("\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {n} lines (exit {proc.poll()})")


@pytest.mark.parametrize(
    "sig",
    [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)],
    ids=["SIGINT", "SIGTERM"],
)
def test_signal_saves_the_step_and_resume_continues_bit_for_bit(tmp_path, monkeypatch, sig):
    desc = "t3k_mesh_graph_descriptor.textproto"
    config = _config(tmp_path, "sig", max_steps=100000, eval_every=5)
    out = tmp_path / "out"
    proc = cli_popen(
        *("--config", str(config), "--no-progress", "--out", str(out)),
        env={"TT_MESH_GRAPH_DESC_PATH": desc},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_lines(out / "log.jsonl", 3, proc)
        proc.send_signal(sig)
        text, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, text[-3000:]
    stopped = json.loads((out / "log.json").read_text())["steps"]
    n = stopped[-1]["step"]
    assert f"interrupted at step {n}, resume with --resume" in text
    assert f"received {sig.name}" in text
    assert (out / "loss.png").stat().st_size > 0
    assert Checkpointer(tmp_path / "sig" / "ckpt").all_steps() == [n]
    # --resume (same YAML, so the same schedule) to n + 3; an uninterrupted run to n + 3.
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", desc)
    assert _cli(config, out, "--resume", "--max-steps", str(n + 3)) == 0
    ref = _config(tmp_path, "ref", max_steps=100000, eval_every=5)
    assert _cli(ref, tmp_path / "ref_out", "--max-steps", str(n + 3)) == 0
    resumed, reference = _losses(out), _losses(tmp_path / "ref_out")
    assert len(resumed) == n + 3 and resumed == reference  # bit for bit
    assert [r["loss"] for r in stopped] == reference[:n]


def test_a_checkpoint_without_fingerprint_is_not_trusted(tmp_path):
    import orbax.checkpoint as ocp

    w = np.arange(12, dtype=np.float32)
    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=False, create=True)
    manager = ocp.CheckpointManager(tmp_path / "ckpt", options=options)
    manager.save(1, args=ocp.args.Composite(state=ocp.args.PyTreeSave({"w": w})))
    manager.close()
    ckpt = Checkpointer(tmp_path / "ckpt", use_async=False)
    with pytest.raises(
        CheckpointError, match=r"checkpoint step 1 .* does not verify: no fingerprint"
    ):
        ckpt.restore(1, {"w": jnp.zeros(12, jnp.float32)})
    ckpt.save(2, {"w": jnp.asarray(w)})  # the same values with a fingerprint: restored
    got = ckpt.restore_latest({"w": jnp.zeros(12, jnp.float32)})
    assert got.step == 2 and got.skipped == ()
    np.testing.assert_array_equal(np.asarray(got.state["w"]), w)
    ckpt.close()


# -- a full disk, a second Ctrl-C (subprocesses: the exit code and stderr are the user's) -----


@pytest.mark.slow
def test_disk_full_at_a_save_is_one_message_naming_the_checkpoint_kept(tmp_path):
    """ENOSPC in orbax's background save of step 4 (step 2 saved): one message, exit 1."""
    config = cli_config(tmp_path, "full", model_save_interval=2, log_every=0)
    run = cli_run(
        "--config",
        str(config),
        "--no-progress",
        "--out",
        str(tmp_path / "out"),
        env={
            "SHIM_ENOSPC_AFTER": "2"
        },  # step 2's two JSON items are written, then the disk is full
    )
    assert run.returncode == 1, run.stderr[-3000:]
    ckpt = tmp_path / "full" / "ckpt"
    err = run.stderr.strip()
    assert err.startswith(
        "python -m models.nanogpt.train: error (CheckpointError): saving "
        "checkpoint step 4 failed: the disk is full ([Errno 28]"
    ), err
    assert f"the last good checkpoint, step 2, is kept in {ckpt}" in err
    assert "Traceback" not in err and "absl" not in err and len(err.splitlines()) == 3, err
    assert Checkpointer(ckpt).all_steps() == [2]


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once_with_one_line(tmp_path):
    config = cli_config(tmp_path, "twice", max_steps=100000, eval_every=5, log_every=0)
    out = tmp_path / "out"
    proc = cli_popen(
        "--config",
        str(config),
        "--out",
        str(out),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_lines(out / "log.jsonl", 3, proc)
        proc.send_signal(signal.SIGINT)
        first = proc.stderr.readline()  # "received SIGINT: saving at the end of this step ..."
        while first.strip() == "":
            first = proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=120)[1]
    finally:
        proc.kill()
    assert first.startswith("received SIGINT: saving"), first
    assert proc.returncode == 130, rest
    assert "Traceback" not in rest and len(rest.strip().splitlines()) == 1, rest
    assert "received SIGINT" in rest and "stopped at once, without saving" in rest


@pytest.mark.slow
def test_a_real_full_disk_at_the_first_save_is_one_message(tmp_path):
    """A 100 KiB tmpfs (mounting needs root and the right to mount: skipped elsewhere) fills
    during the first save's array writes (TensorStore's own ENOSPC, not an injected one)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=100k", "tmpfs", str(disk)], capture_output=True
    )
    if mount.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode().strip()}")
    try:
        ckpt = disk / "ckpt"
        config = cli_config(tmp_path, "tmpfs", model_save_interval=2, log_every=0)
        run = cli_run(
            *("--config", str(config), "--no-progress", "--out", str(tmp_path / "out")),
            f"--set=training_config.checkpoint_dir={ckpt}",
        )
        err = run.stderr.strip()
        assert run.returncode == 1, err
        assert "saving checkpoint step 2 failed: the disk is full" in err
        assert f"no earlier checkpoint exists in {ckpt}" in err
        assert "Traceback" not in err and len(err.splitlines()) == 3, err
        # the unfinished step is removed (writes still in flight may recreate its folder: then
        # the next start's Checkpointer removes it)
        assert Checkpointer(ckpt).all_steps() == [] and list(ckpt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)
