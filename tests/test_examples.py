"""Every script in examples/ runs and gets the numbers right (each checks itself against numpy or
transformers and returns its error). They run in this process to share JAX's start-up and
compile caches; tests/test_readme_commands.py runs scripts in fresh interpreters."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _main(name: str):
    return runpy.run_path(str(EXAMPLES / f"{name}.py"))["main"]


def test_every_example_is_tested():
    # tessera_training needs 72 devices: tests/dist/test_dist_training_step.py runs it
    tested = {"readme_snippet", "tp_mlp", "submesh_trace", "hf_checkpoint", "tessera_training"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


def test_readme_snippet_out_is_every_device_tensor_concatenated(capsys):
    out = _main("readme_snippet")()
    assert out.shape == (1, 1, 32, 512)
    host = np.random.default_rng(0).random((1, 1, 32, 256), dtype=np.float32)
    g = np.asarray(__import__("jax").nn.gelu(host, approximate=False))
    shards = np.split(g, 8, axis=3)  # device d = (row, col) holds shard d
    columns = [np.concatenate([shards[c], shards[4 + c]], axis=3) for c in range(4)]
    want = np.concatenate([columns[d % 4] for d in range(8)], axis=3)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    printed = capsys.readouterr().out
    assert "Shape([1, 1, 32, 32])" in printed and "out: [1, 1, 32, 512]" in printed


def test_tensor_parallel_mlp_matches_numpy_with_one_all_reduce(capsys):
    assert _main("tp_mlp")() < 1e-4
    printed = capsys.readouterr().out
    assert "collectives per step: 1 {'all-reduce': 1}" in printed


def test_submeshes_and_trace_replay_match_numpy(capsys):
    assert _main("submesh_trace")() < 1e-4
    assert "device ids [4, 5, 6, 7]" in capsys.readouterr().out


@pytest.mark.torch
def test_hf_checkpoint_matches_transformers(capsys):
    pytest.importorskip("transformers")
    assert _main("hf_checkpoint")() < 1e-4
    assert "same argmax tokens: True" in capsys.readouterr().out
