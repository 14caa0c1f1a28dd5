"""SPMD big mesh: 2 processes x 4 virtual devices under ttjax-run form one 2x4 mesh, and the
Falcon TP MLP, a Llama TP decode and a TP+DDP training step give bitwise the single-process
2x4 results (the same functions, run here in one process on 8 devices)."""

from __future__ import annotations

import numpy as np
import pytest
import rank_programs
from _launch import PROGRAM, ROOT, launcher_argv, start_launcher, stop
from conftest import mesh_of

# Real processes on 127.0.0.1: bounded, so a hang fails the test instead of the suite.
pytestmark = pytest.mark.timeout(180)

CONFIG = ROOT / "configs" / "rank_bindings" / "2x4_big_mesh.yaml"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bigmesh")
    proc = start_launcher(launcher_argv(CONFIG, tmp, *PROGRAM, "bigmesh", str(tmp)))
    try:
        reference = rank_programs.bigmesh(mesh_of((2, 4)))  # runs while the ranks do
        out, err = proc.communicate(timeout=240)
    finally:
        stop(proc)
    assert proc.returncode == 0, f"launcher failed:\n{out[-3000:]}\n{err[-3000:]}"
    ranks = [dict(np.load(tmp / f"rank{r}.npz")) for r in (0, 1)]
    return reference, ranks, out


@pytest.mark.slow
def test_two_processes_form_one_2x4_mesh(results):
    _, ranks, out = results
    for rank in ranks:
        np.testing.assert_array_equal(rank["global_ids"], np.arange(8))
        # Row 0 of the mesh is rank 0's four devices, row 1 rank 1's.
        np.testing.assert_array_equal(rank["process_of_device"], [0, 0, 0, 0, 1, 1, 1, 1])
    # Output is tagged per rank, as mpirun --tag-output does.
    assert "[1,0]<stdout>:done rank=0" in out and "[1,1]<stdout>:done rank=1" in out


@pytest.mark.parametrize("prefix", ["falcon", "llama", "train"])
def test_bitwise_equal_to_single_process(results, prefix):
    reference, ranks, _ = results
    keys = [k for k in reference if k.startswith(prefix)]
    assert keys
    for rank in ranks:
        for k in keys:
            assert rank[k].dtype == reference[k].dtype and rank[k].shape == reference[k].shape
            np.testing.assert_array_equal(rank[k], reference[k], err_msg=k)


def test_training_step_trains(results):
    reference, _, _ = results
    losses = reference["train_losses"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
