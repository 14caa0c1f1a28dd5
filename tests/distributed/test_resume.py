"""Restarting a multi-process training run: orbax checkpoints written collectively by both ranks
of a 2x4 big mesh, and a NanoGPT TP+DDP run under ttjax-run that loses rank 1 after a checkpoint,
then continues with ``--resume`` along the same loss trajectory."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import checkpoint_program
import jax
import jax.numpy as jnp
import killed_train
import numpy as np
import pytest
import yaml
from _launch import ROOT, Watched, assert_all_gone, descendants, launcher_argv, write_bindings
from conftest import mesh_of
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from models.nanogpt.train import build as nanogpt_build
from ttjax.ttml import cli
from ttjax.ttml.checkpoint import Checkpointer

pytestmark = pytest.mark.timeout(600)

BINDINGS = ROOT / "configs" / "rank_bindings" / "2x4_big_mesh.yaml"
MGD = ROOT / "configs" / "rank_bindings" / "t3k_2x4_two_hosts.textproto"


def run_launcher(argv: list[str], timeout: float = 400) -> tuple[int, str, list[int]]:
    """Run a launcher to its end; returns its exit code, its output and every rank pid seen."""
    w = Watched(argv)
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while w.proc.poll() is None and time.monotonic() < deadline:
        seen.update(descendants(w.proc.pid))
        time.sleep(0.5)
    code, _ = w.wait(timeout=max(1.0, deadline - time.monotonic()))
    return code, w.text(), sorted(seen)


def test_collective_checkpoint_save_and_restore(tmp_path):
    """Both ranks write their shards of one checkpoint and read them back; this process then
    restores the same checkpoint onto a 1x8 mesh."""
    ckpt = tmp_path / "ckpt"
    prog = [sys.executable, str(Path(checkpoint_program.__file__)), str(ckpt), str(tmp_path)]
    code, out, pids = run_launcher(launcher_argv(BINDINGS, tmp_path, *prog), timeout=200)
    assert code == 0, out[-3000:]
    assert_all_gone(pids)
    want = checkpoint_program.weight()
    for r in (0, 1):
        got = np.load(tmp_path / f"rank{r}.npz")
        np.testing.assert_array_equal(got["w"], want)
        assert int(got["step"]) == checkpoint_program.STEP and float(got["loss"]) == 1.5
        assert int(got["local_shards"]) == 4  # each process holds its own row of the mesh
    # Both processes wrote shards; one commit marker says the step is complete.
    state = ckpt / str(checkpoint_program.STEP) / "state"
    assert {p.name for p in state.glob("ocdbt.process_*")} == {"ocdbt.process_0", "ocdbt.process_1"}
    mesh = mesh_of((1, 8)).jax_mesh
    like = {
        "w": jax.ShapeDtypeStruct((8, 16), jnp.float32, sharding=NamedSharding(mesh, P(None, "x"))),
        "step": jax.ShapeDtypeStruct((), jnp.int32, sharding=NamedSharding(mesh, P())),
    }
    c = Checkpointer(ckpt, use_async=False)
    try:
        got, meta = c.restore(checkpoint_program.STEP, like)
    finally:
        c.close()
    np.testing.assert_array_equal(np.asarray(got["w"]), want)
    assert meta["history"] == [{"step": 1, "loss": 1.5}]


def tiny_config(path: Path, checkpoint_dir: Path) -> Path:
    """TP+DDP 2x4 NanoGPT, 6 steps, a checkpoint every 2 steps."""
    doc = yaml.safe_load((ROOT / "configs" / "training_nanogpt_tp_ddp.yaml").read_text())
    t = doc["training_config"]
    t.update(
        project_name="resume_tiny",
        batch_size=4,
        max_steps=6,
        eval_every=3,
        model_save_interval=2,
        checkpoint_dir=str(checkpoint_dir),
    )
    t.pop("model_config")
    model = yaml.safe_load((ROOT / "configs" / "model_configs" / "nanogpt_tiny.yaml").read_text())
    m = model["transformer_config"]
    m.update(num_heads=4, embedding_dim=32, num_blocks=1, max_sequence_length=16)
    m.pop("experimental", None)
    m.pop("model_type", None)
    t["transformer_config"] = m
    doc["scheduler_config"]["warmup_steps"] = 2
    path.write_text(yaml.safe_dump(doc))
    return path


def losses(path: Path) -> list[float]:
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in recs] == list(range(1, len(recs) + 1))
    return [r["loss"] for r in recs]


@pytest.mark.slow
def test_lost_rank_then_resume_continues_the_same_losses(tmp_path):
    cfg = tiny_config(tmp_path / "tiny.yaml", tmp_path / "ckpt")
    # NanoGPT's CLI, whose rank with TTJAX_FAULT_KILL_AT_STEP set dies (the step is wrapped).
    train = [sys.executable, str(Path(killed_train.__file__)), "--config", str(cfg)]
    train += ["--out", str(tmp_path / "out"), "--no-progress"]
    # Rank 1 kills itself (SIGKILL) after step 5: checkpoints 2 and 4 are on disk.
    faulty = write_bindings(
        tmp_path / "faulty.yaml",
        ["0,1,2,3", "4,5,6,7"],
        env={1: {killed_train.ENV: "5"}},
        mesh_graph_desc_path=str(MGD),
    )
    w = Watched(launcher_argv(faulty, tmp_path, *train))
    try:
        # The single-process 2x4 run of the same config, while the ranks train.
        ref_cfg = tiny_config(tmp_path / "ref.yaml", tmp_path / "ref_ckpt")
        ref_out = tmp_path / "ref"
        assert (
            cli.main(
                ["--config", str(ref_cfg), "--out", str(ref_out), "--no-progress"],
                build=nanogpt_build,
                prog="ref",
            )
            == 0
        )
        seen: set[int] = set()
        while w.proc.poll() is None:
            seen.update(descendants(w.proc.pid))
            time.sleep(0.5)
        code, _ = w.wait(timeout=60)
    finally:
        w.kill()
    out = w.text()
    assert code != 0, out[-3000:]
    assert "rank 1 was killed by signal 9 (SIGKILL)" in out, out[-3000:]
    assert_all_gone(sorted(seen))
    killed = losses(tmp_path / "out" / "log.jsonl")  # rank 0's log, up to step 5
    assert 4 <= len(killed) <= 5
    assert Checkpointer(tmp_path / "ckpt", use_async=False).latest_step() == 4

    plain = write_bindings(
        tmp_path / "plain.yaml", ["0,1,2,3", "4,5,6,7"], mesh_graph_desc_path=str(MGD)
    )
    code, out, pids = run_launcher(launcher_argv(plain, tmp_path, *train, "--resume"))
    assert code == 0, out[-3000:]
    assert_all_gone(pids)
    assert "resumed at step 4" in out
    resumed = losses(tmp_path / "out" / "log.jsonl")
    log = json.loads((tmp_path / "out" / "log.json").read_text())
    assert [r["loss"] for r in log["steps"]] == resumed and log["processes"] == 2
    reference = losses(ref_out / "log.jsonl")
    assert len(resumed) == len(reference) == 6
    # Same processes, same mesh: the restarted run repeats the lost run's steps bit for bit.
    assert resumed[: len(killed)] == killed
    # And one process on 8 devices follows it within float32 rounding (not bit for bit: from
    # step 2 on the two runs differ in the last bit, e.g. 4.83600378 vs 4.83600426, as the
    # multi-process collectives sum in another order).
    np.testing.assert_allclose(resumed, reference, rtol=1e-5)
    ref_log = json.loads((ref_out / "log.json").read_text())
    val = [(r["step"], r["val_loss"]) for r in log["steps"] if "val_loss" in r]
    ref_val = [(r["step"], r["val_loss"]) for r in ref_log["steps"] if "val_loss" in r]
    assert [s for s, _ in val] == [s for s, _ in ref_val] == [3, 6]
    np.testing.assert_allclose([v for _, v in val], [v for _, v in ref_val], rtol=1e-5)


def _rank_pid(launcher_pid: int, visible: str, timeout: float = 120) -> int:
    """The pid of the rank whose TT_VISIBLE_DEVICES is ``visible`` (read from /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in descendants(launcher_pid):
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if f"TT_VISIBLE_DEVICES={visible}".encode() in env and b"models.nanogpt" in cmd:
                return pid
        time.sleep(0.2)
    raise AssertionError(f"no rank with TT_VISIBLE_DEVICES={visible}")


@pytest.mark.slow
def test_sigterm_to_one_rank_stops_every_rank_at_one_step_then_resume(tmp_path):
    """SIGTERM reaches rank 1 only (as a parent-death signal might): both ranks agree on the stop
    step at the next step boundary, write that step's checkpoint together (no hang), rank 1
    exits 143, and ``--resume`` continues along the single-process run's losses."""
    cfg = tiny_config(tmp_path / "tiny.yaml", tmp_path / "ckpt")
    doc = yaml.safe_load(cfg.read_text())
    doc["training_config"].update(max_steps=100000, model_save_interval=100000)
    cfg.write_text(yaml.safe_dump(doc))
    train = [sys.executable, "-m", "models.nanogpt.train", "--config", str(cfg)]
    train += ["--out", str(tmp_path / "out"), "--no-progress"]
    plain = write_bindings(
        tmp_path / "plain.yaml", ["0,1,2,3", "4,5,6,7"], mesh_graph_desc_path=str(MGD)
    )
    w = Watched(launcher_argv(plain, tmp_path, *train))
    try:
        rank1 = _rank_pid(w.proc.pid, "4,5,6,7")
        log = tmp_path / "out" / "log.jsonl"
        deadline = time.monotonic() + 300
        while not (log.exists() and log.read_text().count("\n") >= 2):
            assert time.monotonic() < deadline and w.proc.poll() is None, w.text()[-3000:]
            time.sleep(0.05)
        seen = set(descendants(w.proc.pid))
        os.kill(rank1, signal.SIGTERM)
        code, _ = w.wait(timeout=120)
    finally:
        w.kill()
    out = w.text()
    assert code == 143, out[-3000:]
    assert "rank 1 exited with code 143" in out, out[-3000:]
    assert_all_gone(sorted(seen))
    (n,) = Checkpointer(tmp_path / "ckpt", use_async=False).all_steps()
    state = tmp_path / "ckpt" / str(n) / "state"
    # DDP over the two processes: rank 1's shards are replicas of rank 0's, and replicas this
    # small (under MIN_REPLICA_SLICE) are written by the first replica alone.
    assert {p.name for p in state.glob("ocdbt.process_*")} == {"ocdbt.process_0"}
    stopped = losses(log)
    assert len(stopped) == n

    code, out, pids = run_launcher(
        launcher_argv(plain, tmp_path, *train, "--resume", "--max-steps", str(n + 2))
    )
    assert code == 0, out[-3000:]
    assert_all_gone(pids)
    assert f"resumed at step {n}" in out
    ref_cfg = tiny_config(tmp_path / "ref.yaml", tmp_path / "ref_ckpt")
    doc = yaml.safe_load(ref_cfg.read_text())
    doc["training_config"].update(max_steps=100000, model_save_interval=100000)
    ref_cfg.write_text(yaml.safe_dump(doc))
    ref_out = tmp_path / "ref"
    argv = ["--config", str(ref_cfg), "--out", str(ref_out), "--no-progress"]
    assert cli.main([*argv, "--max-steps", str(n + 2)], build=nanogpt_build, prog="ref") == 0
    resumed, reference = losses(log), losses(ref_out / "log.jsonl")
    assert resumed[:n] == stopped and len(resumed) == len(reference) == n + 2
    np.testing.assert_allclose(resumed, reference, rtol=1e-5)  # 2 processes vs 1: float32 sums


@pytest.mark.slow
def test_kill_9_of_the_launcher_mid_training_leaves_a_resumable_checkpoint(tmp_path):
    """The launcher is SIGKILLed (a dropped SSH session): no rank is orphaned. Each gets SIGTERM
    from the kernel, both agree on a stop step, write its checkpoint together and exit; their
    last lines land in their logs; ``--resume`` continues from that step."""
    cfg = tiny_config(tmp_path / "tiny.yaml", tmp_path / "ckpt")
    doc = yaml.safe_load(cfg.read_text())
    doc["training_config"].update(max_steps=100000, model_save_interval=100000)
    cfg.write_text(yaml.safe_dump(doc))
    train = [sys.executable, "-m", "models.nanogpt.train", "--config", str(cfg)]
    train += ["--out", str(tmp_path / "out"), "--no-progress"]
    plain = write_bindings(
        tmp_path / "plain.yaml", ["0,1,2,3", "4,5,6,7"], mesh_graph_desc_path=str(MGD)
    )
    argv = launcher_argv(plain, tmp_path, *train)
    w = Watched([*argv[:3], "--log-dir", str(tmp_path / "logs"), *argv[3:]])
    try:
        ranks = [_rank_pid(w.proc.pid, v) for v in ("0,1,2,3", "4,5,6,7")]
        log = tmp_path / "out" / "log.jsonl"
        deadline = time.monotonic() + 300
        while not (log.exists() and log.read_text().count("\n") >= 2):
            assert time.monotonic() < deadline and w.proc.poll() is None, w.text()[-3000:]
            time.sleep(0.05)
        os.kill(w.proc.pid, signal.SIGKILL)
        w.wait(timeout=10)
        assert_all_gone(ranks, within=60)
    finally:
        w.kill()
    (n,) = Checkpointer(tmp_path / "ckpt", use_async=False).all_steps()
    state = tmp_path / "ckpt" / str(n) / "state"
    # DDP over the two processes: rank 1's shards are replicas of rank 0's, and replicas this
    # small (under MIN_REPLICA_SLICE) are written by the first replica alone.
    assert {p.name for p in state.glob("ocdbt.process_*")} == {"ocdbt.process_0"}
    assert not list((tmp_path / "ckpt").glob("*.orbax-checkpoint-tmp*"))
    stopped = losses(log)
    assert len(stopped) == n
    rank0 = (tmp_path / "logs" / "rank0.log").read_text()
    assert "received SIGTERM" in rank0 and f"interrupted at step {n}" in rank0, rank0[-2000:]

    code, out, pids = run_launcher(
        launcher_argv(plain, tmp_path, *train, "--resume", "--max-steps", str(n + 1))
    )
    assert code == 0, out[-3000:]
    assert_all_gone(pids)
    assert f"resumed at step {n}" in out
    resumed = losses(log)
    assert resumed[:n] == stopped and len(resumed) == n + 1
