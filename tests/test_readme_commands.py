"""The README's "Commands" section runs as printed, in a fresh copy of the repository (tracked
files only): every command there is listed below with the small-shape flags its test adds, and
runs in its own interpreter. ``make`` targets are checked with ``make -n`` (they would build a
venv and run the suite); the commands they stand for run like the others. Big runs are `slow`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _reference import save_tiny_hf_llama

ROOT = Path(__file__).resolve().parents[1]

# printed command -> (flags the test appends for small shapes, text its output must hold, slow)
PYTHON_COMMANDS = {
    ".venv/bin/python -m models.llama.demo --mesh t3000 --mode tp --config tiny": (
        ["--max-new-tokens", "2"],
        "greedy tokens identical: True",
        True,
    ),
    ".venv/bin/python -m models.falcon.demo --mode dp --mesh 1x4": (
        ["--hidden", "128", "--seq", "32"],
        "PCC vs Flax FalconMLP: 1.0",
        False,
    ),
    ".venv/bin/python -m models.llama.demo --mesh 1x4 --mode dp --checkpoint path/to/hf-llama": (
        ["--max-new-tokens", "2", "--batch", "4"],
        "same greedy tokens: True",
        True,
    ),
    ".venv/bin/python examples/readme_snippet.py": ([], "out: [1, 1, 32, 512]", True),
    ".venv/bin/python -m models.llama.demo --frontend spmd --config tiny": (
        [],
        "PCC vs single device 1.000000",
        True,
    ),
    ".venv/bin/python -m models.llama.side_by_side": ([], "three programming models", True),
    ".venv/bin/python -m models.moe.demo --mesh t3000 --steps 150 --png routing.png": (
        ["--steps", "4"],
        "spread of tokens per expert",
        True,
    ),
    ".venv/bin/python -m models.moe.train --mesh 2x4 --steps 100": (
        ["--steps", "2"],
        '"final_cross_entropy"',
        False,
    ),
    ".venv/bin/ttjax inspect models.moe.inspect_targets:mixtral_decode --mesh t3000": (
        [],
        "collectives per step: 4 {'all-to-all': 4}",
        True,
    ),
    ".venv/bin/python -m models.nanogpt.train --config configs/training_nanogpt_tp_ddp.yaml": (
        ["--max-steps", "2", "--no-progress"],
        '"unigram_val_loss"',
        True,
    ),
    ".venv/bin/ttjax inspect models.llama.inspect_targets:decode_step --mesh t3000 "
    "--arg config=llama-3.1-70b --arg weight_dtype=bfloat8_b --arg cache_dtype=bfloat8_b": (
        ["--arg", "config=tiny", "--arg", "batch=8", "--arg", "context=64"],
        "collectives per step: 6",
        True,
    ),
}
# make target -> what its recipe must run
MAKE_TARGETS = {
    "demo": "-m models.llama.demo --mesh galaxy --mode hybrid --submesh 2x4 --trace",
    "test": '-m pytest -q -m "not slow"',
    "test-all": "-m pytest -q",
    "docs": "-m mkdocs build --strict",
    "bench": "-m benchmarks.run",
    "gpu-decode": "-m benchmarks.gpu_decode",
    "gpu-train": "-m benchmarks.gpu_train",
}


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## Commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", "", block)
    return [re.sub(r"\s+#.*$", "", line).strip() for line in joined.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The tracked files of this checkout, copied as a fresh clone would have them."""
    dest = tmp_path_factory.mktemp("clone")
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
    return dest


def _run(argv: list[str], cwd: Path, devices: int = 8) -> str:
    # `make` installs the clone itself (pip install -e), so its own ttjax and models import first.
    env = {
        **os.environ,
        "TTJAX_NUM_DEVICES": str(devices),
        "COLUMNS": "200",
        "PYTHONPATH": str(cwd),
    }
    run = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"{argv}\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
    return run.stdout


def _argv(command: str) -> list[str]:
    words = command.split()
    if words[0] == ".venv/bin/python":  # the venv's interpreter: the one running this test
        return [sys.executable, *words[1:]]
    assert words[0] == ".venv/bin/ttjax"  # the console script is ttjax.inspect:main
    return [sys.executable, "-m", "ttjax.inspect", *words[1:]]


def test_every_readme_command_is_covered():
    printed = readme_commands()
    makes = [c.split()[1] for c in printed if c.startswith("make ")]
    others = [c for c in printed if not c.startswith("make ")]
    assert sorted(makes) == sorted(MAKE_TARGETS)
    assert sorted(others) == sorted(PYTHON_COMMANDS)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_targets_exist_and_run_what_the_readme_says(clone):
    for target, recipe in MAKE_TARGETS.items():
        run = subprocess.run(
            ["make", "-n", target], cwd=clone, capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        assert recipe in run.stdout, (target, run.stdout)
    assert (
        "mypy"
        in subprocess.run(
            ["make", "-n", "lint"], cwd=clone, capture_output=True, text=True, timeout=60
        ).stdout
    )


def _cases():
    for command, (extra, expect, slow) in PYTHON_COMMANDS.items():
        marks = [pytest.mark.slow] if slow else []
        slug = re.sub(r"[^a-z0-9]+", "-", command.lower()).strip("-")[:60]
        yield pytest.param(command, extra, expect, marks=marks, id=slug)


@pytest.mark.parametrize(("command", "extra", "expect"), list(_cases()))
def test_readme_command_runs(clone, tmp_path, command, extra, expect):
    argv = _argv(command) + extra
    if "path/to/hf-llama" in argv:
        pytest.importorskip("transformers")
        checkpoint = tmp_path / "hf-llama"
        save_tiny_hf_llama(checkpoint)
        argv[argv.index("path/to/hf-llama")] = str(checkpoint)
    out = _run(argv, clone)
    assert expect in out, out[-3000:]
    if "models.llama.demo" in command and "--checkpoint" not in command:
        assert "weights: RANDOM" in out and "gibberish" in out
        if "--frontend" not in command:
            assert "tokenizer: byte-level fallback" in out


@pytest.mark.slow
def test_make_demo_command_with_a_tiny_model(clone):
    argv = [sys.executable, *MAKE_TARGETS["demo"].split()]
    argv += ["--config", "tiny", "--max-new-tokens", "2", "--batch", "8"]
    out = _run(argv, clone, devices=32)
    assert "greedy tokens identical: True" in out
    assert "device id (row, col)" in out  # the compact Galaxy picture


def test_no_readme_command_needs_an_activated_venv():
    """A fresh clone has no `python` with ttjax on PATH: shell blocks say `.venv/bin/python`."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    assert blocks
    bare = [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if re.match(r"\s*python3? ", line)
    ]
    assert bare == [], bare
