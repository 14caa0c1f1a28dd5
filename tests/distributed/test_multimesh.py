"""Multi-mesh: two ranks, each its own 1x4 mesh (pipeline stage), exchange activations with
ttjax.distributed.send/recv; the 2-stage pipeline's output equals the single-process model."""

from __future__ import annotations

import numpy as np
import pytest
import rank_programs
from _launch import PROGRAM, ROOT, launcher_argv, start_launcher, stop
from conftest import mesh_of

# Real processes on 127.0.0.1: bounded, so a hang fails the test instead of the suite.
pytestmark = pytest.mark.timeout(180)

CONFIG = ROOT / "configs" / "rank_bindings" / "2_stage_pipeline.yaml"


@pytest.mark.slow
def test_two_stage_pipeline_equals_single_process(tmp_path):
    proc = start_launcher(launcher_argv(CONFIG, tmp_path, *PROGRAM, "pipeline", str(tmp_path)))
    try:
        want = rank_programs.pipeline_single(mesh_of((1, 4)))  # runs while the ranks do
        out, err = proc.communicate(timeout=240)
    finally:
        stop(proc)
    assert proc.returncode == 0, f"launcher failed:\n{out[-3000:]}\n{err[-3000:]}"
    got = np.load(tmp_path / "stage1.npy")
    assert not (tmp_path / "stage0.npy").exists()  # stage 0 only sends
    assert got.shape == want.shape == (rank_programs.MICROBATCHES, 1, 1, 32, rank_programs.WIDTH)
    np.testing.assert_array_equal(got, want)
    assert np.abs(want).max() > 0.05  # a real signal went through both stages
