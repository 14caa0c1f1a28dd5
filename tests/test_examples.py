"""Every script in examples/ runs and gets the numbers right (each checks itself against numpy or
transformers and returns its error). They run in this process to share JAX's start-up and
compile caches; tests/test_readme_commands.py runs scripts in fresh interpreters."""

from __future__ import annotations

import re
import runpy
import warnings
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _main(name: str):
    return runpy.run_path(str(EXAMPLES / f"{name}.py"))["main"]


def test_every_example_is_tested():
    # tessera_training needs 72 devices: tests/dist/test_dist_training_step.py runs it
    tested = {
        "readme_snippet",
        "tp_mlp",
        "submesh_trace",
        "hf_checkpoint",
        "seed004_torch_xla",
        "tessera_training",
    }
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


@pytest.mark.slow
@pytest.mark.torch
def test_hf_checkpoint_matches_transformers(capsys):
    pytest.importorskip("transformers")
    assert _main("hf_checkpoint")() < 1e-4
    assert "same argmax tokens: True" in capsys.readouterr().out


SEED_004 = sorted((EXAMPLES.parents[1] / "shared" / "seeds").glob("004_*.txt"))


def _lines(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if line.strip()]


@pytest.mark.skipif(not SEED_004, reason="needs the seeds (../shared/seeds/004_*.txt)")
def test_seed004_example_holds_every_code_block_of_the_seed_as_written():
    """Each ```python block of seed 004 appears in examples/seed004_torch_xla.py line for line
    (indentation aside), in the seed's order; only the lines of SEED_CHANGES differ."""
    changes = runpy.run_path(str(EXAMPLES / "seed004_torch_xla.py"))["SEED_CHANGES"]
    example = _lines((EXAMPLES / "seed004_torch_xla.py").read_text())
    blocks = re.findall(r"```python\n(.*?)```", SEED_004[0].read_text(), re.S)
    assert len(blocks) == 14
    at = 0
    for block in blocks:
        want = [changes.get(line, line) for line in _lines(block)]
        start = next(
            (i for i in range(at, len(example)) if example[i : i + len(want)] == want), None
        )
        assert start is not None, f"seed block not in the example as written:\n{block}"
        at = start + len(want)


@pytest.mark.torch
@pytest.mark.slow
def test_seed004_torch_xla_runs_on_1x8_and_2x4_like_one_device(monkeypatch):
    pytest.importorskip("torchax")
    pytest.importorskip("transformers")
    from jax.sharding import PartitionSpec as P

    import ttjax.compat

    for name in ("PJRT_DEVICE", "XLA_STABLEHLO_COMPILE", "ENABLE_AUTO_PARALLEL", "MESH_SHAPE"):
        monkeypatch.setenv(name, "")  # the seed's set-up sets them: restored after the test
        monkeypatch.delenv(name)
    ttjax.compat.install_as_torch_xla()
    try:
        from ttjax.torchxla import PluginNotLoadedWarning

        with warnings.catch_warnings(record=True) as caught:  # torch's own warnings too
            warnings.simplefilter("always")
            out = _main("seed004_torch_xla")()
    finally:
        ttjax.compat.uninstall_torch_xla()
    (plugin,) = [str(w.message) for w in caught if w.category is PluginNotLoadedWarning]
    assert plugin.startswith("torch_xla.experimental.plugins.register_plugin('TT', TTPjrtPlugin())")
    column, row = P("model", None), P(None, "model")
    want = {f"{m}.weight": column for m in ("self_attn.q_proj", "self_attn.k_proj")}
    want |= {f"{m}.weight": column for m in ("self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")}
    want |= {"self_attn.o_proj.weight": row, "mlp.down_proj.weight": row}
    assert out["annotations"] == (row, P(None, None)) or out["annotations"] == (row, P())
    assert out["spmd"][0] is True
    assert out["specs_1x8"] == want
    assert out["pcc_1x8"] > 0.999 and out["max_error_1x8"] < 1e-4
    assert {k: v for k, (v, _) in out["specs_bf16"].items() if k in want} == want
    assert {str(dtype) for _, dtype in out["specs_bf16"].values()} == {"torch.bfloat16"}
    assert out["pcc_bf16"] > 0.99
    for name, (spec, grad_spec, grad_error, weight_error) in out["grads"].items():
        annotated = want.get(name.split(".", 2)[-1])
        assert grad_spec == spec == annotated or annotated is None, name
        assert spec is None or grad_spec == spec, name  # XLA placed the rest alike
        assert grad_error < 1e-5 and weight_error < 1e-6, (name, grad_error, weight_error)
    assert abs(out["loss"][0] - out["loss"][1]) < 1e-6
    assert out["reshard_kept_values"]
    assert out["specs_2x4"] == {k: (v, (2, 4)) for k, v in want.items()}
    assert out["pcc_2x4"] > 0.999 and out["max_error_2x4"] < 1e-4
