"""The README and the docs run as printed, in a fresh copy of the repository (tracked files only),
with the venv's ``.venv/bin/python`` / ``ttjax`` / ``ttjax-run`` as printed:

- every fenced ``python`` block of README.md and docs/ runs in its own interpreter, and a
  ``print(...)  # VALUE`` line prints VALUE;
- every shell command of README.md and docs/ is checked: each ``python -m`` module (and the
  ``ttjax``/``ttjax-run`` scripts) parses the printed arguments with its own parser, each
  ``ttjax-run`` command plans its ranks (``--dry-run``); the list of docs/commands.md runs with
  the small-shape flags listed below. ``make`` targets are checked with ``make -n`` (they would build
  a venv and run the suite); the commands they stand for run like the others. Big runs are `slow`.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from _reference import save_tiny_hf_llama

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# the page listing every runnable program (the README links to it), and the page whose
# ``ttjax-run ... prog.py`` example runs for real
COMMANDS_PAGE = ROOT / "docs" / "commands.md"
MULTIHOST_PAGE = ROOT / "docs" / "multihost.md"
# The venv's console scripts (pyproject's [project.scripts]) as modules of the clone.
PY, TTJAX, RUN = ".venv/bin/python", ".venv/bin/ttjax", ".venv/bin/ttjax-run"
# `make ttmetal-venv`'s interpreter (.venv plus the `ttmetal` extra): runs the same modules
TTMETAL_PY = ".venv-ttmetal/bin/python"
SCRIPTS = {
    PY: [sys.executable],  # the venv's interpreter: the one running this test
    TTMETAL_PY: [sys.executable],
    TTJAX: [sys.executable, "-m", "ttjax.inspect"],
    RUN: [sys.executable, "-m", "ttjax.run"],
}
# Python blocks that train or compile a pipeline: run under -m slow (a substring picks each).
SLOW_BLOCKS = ("PipelineTrainStep(pipe",)
# Python blocks that need something outside the repository: substring -> environment variable.
NEEDS = {"ttjax.compat": "TT_METAL_HOME"}  # Tenstorrent's model code: a tt-metal checkout

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
    "venv": 'pip install --quiet --no-compile -e ".[dev,torch,viz]"',
    "ttmetal-venv": 'pip install --quiet --no-compile -e ".[ttmetal]"',
    "demo": "-m models.llama.demo --mesh galaxy --mode hybrid --submesh 2x4 --trace",
    "test": '-m pytest -q -m "not slow"',
    "test-all": "-m pytest -q",
    "docs": "-m mkdocs build --strict",
    "bench": "-m benchmarks.run",
    "gpu-decode": "-m benchmarks.gpu_decode",
    "gpu-train": "-m benchmarks.gpu_train",
}


def readme_commands() -> list[str]:
    """The commands of docs/commands.md's list (continuations joined, comments dropped)."""
    text = COMMANDS_PAGE.read_text()
    block = text.split("# Commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
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
    (dest / ".venv").symlink_to(sys.prefix)  # what `make venv` made: this test's interpreter
    return dest


def _run(
    argv: list[str],
    cwd: Path,
    devices: int | None = 8,
    stdin: str | None = None,
) -> str:
    # `make` installs the clone itself (pip install -e), so its own ttjax and models import first.
    # devices=None: ttjax's default (32), as a user's shell has it.
    environ = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(cwd)}
    environ.pop("TTJAX_NUM_DEVICES", None)
    if devices is not None:
        environ["TTJAX_NUM_DEVICES"] = str(devices)
    run = subprocess.run(
        argv, cwd=cwd, env=environ, input=stdin, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, f"{argv}\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
    return run.stdout


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    return [*SCRIPTS[words[0]], *words[1:]]


def test_every_readme_command_is_covered():
    printed = readme_commands()
    others = [c for c in printed if not c.startswith("make ")]
    assert sorted(others) == sorted(PYTHON_COMMANDS)
    everywhere = [c for p in DOCS for c in shell_commands(p.read_text())]
    assert sorted({c.split()[1] for c in everywhere if c.startswith("make ")}) == sorted(
        MAKE_TARGETS
    )
    readme = shell_commands((ROOT / "README.md").read_text())
    assert {"make demo", "make test"} <= set(readme)  # the README's first screen


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_targets_exist_and_run_what_the_readme_says(clone):
    for target, recipe in MAKE_TARGETS.items():
        run = subprocess.run(
            ["make", "-n", "-B", target], cwd=clone, capture_output=True, text=True, timeout=60
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


# --- every fenced block and command of README.md and docs/ ---------------------------------------


def fenced_blocks(text: str, lang: str) -> list[str]:
    """The ```lang blocks of a Markdown text (indented ones too, e.g. inside a list), dedented."""
    return [code for _, code in numbered_blocks(text, lang)]


def numbered_blocks(text: str, lang: str) -> list[tuple[int, str]]:
    """``(line of the opening fence, dedented code)`` of each ```lang block."""
    pattern = rf"^( *)```{lang}\n(.*?)^\1```"
    return [
        (text.count("\n", 0, m.start()) + 1, textwrap.dedent(m[2]))
        for m in re.finditer(pattern, text, re.M | re.S)
    ]


def shell_commands(text: str) -> list[str]:
    """Every command of the ```bash blocks (continuations joined, comments dropped)."""
    out = []
    for block in fenced_blocks(text, "bash"):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            line = re.sub(r"(^|\s+)#.*$", "", line).strip()
            if line:
                out.append(line)
    return out


def all_commands() -> list[tuple[str, str]]:
    """``(file, command)`` for every shell command and inline ```python -m ...``` of the docs."""
    out = []
    for path in DOCS:
        text = path.read_text()
        name = str(path.relative_to(ROOT))
        out += [(name, c) for c in shell_commands(text)]
        # prose may name a module bare (`python -m models.nanogpt.train`): the venv's python
        out += [
            (name, f"{PY} -m {c}")
            for c in re.findall(r"`(?:\.venv/bin/)?python -m (\w[\w.]*(?: [^`]*)?)`", text)
        ]
    return out


def python_blocks() -> list[tuple[str, str]]:
    """``(file:line, code)`` of every fenced python block of the docs."""
    return [
        (f"{p.relative_to(ROOT)}:{line}", code)
        for p in DOCS
        for line, code in numbered_blocks(p.read_text(), "python")
    ]


SHELL_PLUMBING = ("|", "|&", ">", ">>", "2>", "2>&1")  # the program's words end before these


def command_words(command: str) -> list[str]:
    """The words of a command without its leading ``VAR=value`` environment assignments, up to
    a pipe or a redirection (``... | tee run.txt``: the output's destination, not an argument)."""
    words = shlex.split(command)
    cut = [i for i, w in enumerate(words) if w in SHELL_PLUMBING]
    words = words[: cut[0]] if cut else words
    while words and re.match(r"[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]
    return words


def module_runs(command: str) -> list[tuple[str, list[str]]]:
    """``(module, its arguments)`` of each program of ours a command starts: ``python -m M``,
    ``ttjax``/``ttjax-run``, and the ``python -m`` program that ``ttjax-run`` starts."""
    words = command_words(command)
    runs = []
    while words:
        if words[0] in (PY, TTMETAL_PY) and words[1:2] == ["-m"]:
            module, rest = words[2], words[3:]
        elif words[0] in (TTJAX, RUN):
            module = SCRIPTS[words[0]][-1]
            rest = words[1:]
        else:
            break
        runs.append((module, rest))
        # a launcher's program (`ttjax-run ... python -m M ...`) is checked as a run of its own
        words = rest[rest.index(PY) :] if PY in rest else []
    return runs


def test_every_command_of_the_docs_is_one_this_file_checks():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    commands = all_commands()
    assert len(commands) > 20
    for name, command in commands:
        words = command_words(command)
        if words[0] == "export":  # environment set-up, e.g. TT_METAL_HOME
            assert all(re.match(r"[A-Z_][A-Z0-9_]*=", w) for w in words[1:]), (name, command)
        elif words[0] == ".venv/bin/pip":  # pip install -e '.[extra,...]': each extra exists
            wanted = re.findall(r"^\.\[([\w,-]+)\]$", words[-1])
            assert words[1:3] == ["install", "-e"] and wanted, (name, command)
            assert set(wanted[0].split(",")) <= set(extras), (name, command)
        elif words[0] == "make":
            assert words[1] in MAKE_TARGETS, (name, command)
        elif words[0] == PY and words[1] != "-m":  # a script of the repository, or a block's
            assert (ROOT / words[1]).is_file() or any(
                f"# {words[1]}" in code for _, code in python_blocks()
            ), (name, command)
        else:
            assert words[0] in SCRIPTS and module_runs(command), (name, command)


def test_scripts_are_the_packaged_console_scripts():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"ttjax": "ttjax.inspect:main", "ttjax-run": "ttjax.run:main"}
    assert {s: SCRIPTS[f".venv/bin/{s}"][-1] for s in scripts} == {
        "ttjax": "ttjax.inspect",
        "ttjax-run": "ttjax.run",
    }


# One interpreter parses every printed command line with its module's own argparse parser (run
# as __main__ up to parse_args, which parses, then stops the program: nothing is computed).
_PARSE = """
import argparse, contextlib, io, json, runpy, sys


class Parsed(BaseException):
    pass


parse_args = argparse.ArgumentParser.parse_args


def stop(self, args=None, namespace=None):
    parse_args(self, args, namespace)  # a bad option, choice or value exits 2 here
    raise Parsed


argparse.ArgumentParser.parse_args = stop
out = []
for module, argv in json.loads(sys.argv[1]):
    sys.argv = [module, *argv]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            result = "ran without parsing arguments"
        except Parsed:
            result = "ok"
        except SystemExit as e:
            result = "ok" if e.code in (0, None) else f"exit {e.code}: {err.getvalue()[-1500:]}"
        except ModuleNotFoundError as e:
            result = f"needs {e.name}"
        except Exception as e:
            result = f"{type(e).__name__}: {e}"
    out.append(result)
print(json.dumps(out))
"""


INSTALLED_TOOLS = {"pytest"}  # `python -m pytest ...`: the dev extra's, not the project's


def _source(clone: Path, module: str) -> str | None:
    """The module's code; a public re-export module's with its implementation's (``ttjax._src``)."""
    path = clone / Path(*module.split("."))
    for file in (path / "__main__.py", path.with_suffix(".py")):
        if file.is_file():
            text = file.read_text()
            impl = re.search(r"the implementation is :mod:`(ttjax\._src\.[\w.]+)`", text)
            return text + (_source(clone, impl[1]) or "") if impl else text
    return None


def _is_command(module: str) -> bool:
    """Whether ``python -m module`` with no arguments is printed as a command (a bash block)."""
    return any(
        module_runs(c) == [(module, [])] for p in DOCS for c in shell_commands(p.read_text())
    )


def test_every_printed_command_line_parses(clone):
    """Each printed ``python -m M args`` parses with M's own parser: options, choices, values."""
    runs = sorted({(m, tuple(argv)) for _, c in all_commands() for m, argv in module_runs(c)})
    modules = {m for m, _ in runs}
    # a bare inline mention (`python -m models.nanogpt.train`) names the module: it must exist
    runs = [(m, argv) for m, argv in runs if argv or _source(clone, m) is None or _is_command(m)]
    runs = [(m, argv) for m, argv in runs if m not in INSTALLED_TOOLS]
    assert {"models.nanogpt.train", "models.llama.train", "ttjax.run", "ttjax.inspect"} <= modules
    parsed = []
    for module, argv in runs:
        source = _source(clone, module)
        assert source is not None, f"python -m {module}: no such module in the clone"
        if "argparse" in source or "ttjax.ttml.cli" in source:
            parsed.append((module, list(argv)))
        else:  # reads sys.argv itself (a benchmark, a launcher): names each --flag in its code
            for flag in itertools.takewhile(lambda w: w.startswith("-"), argv):
                if re.fullmatch(r"--[a-z][-a-z0-9]*", flag):
                    assert f'"{flag}"' in source, (module, flag)
    results = json.loads(
        _run([sys.executable, "-c", _PARSE, json.dumps(parsed)], clone).splitlines()[-1]
    )
    failed = [
        f"python -m {m} {shlex.join(a)}: {r}"
        for (m, a), r in zip(parsed, results, strict=True)
        if r != "ok" and not (r.startswith("needs ") and not r[6:].startswith(("ttjax", "models")))
    ]
    assert failed == [], "\n".join(failed)


def _dry_run(command: str) -> tuple[str, ...]:
    """The launch ``command`` as the test runs it: with ``--dry-run`` before the program."""
    words = shlex.split(command)
    at = words.index(PY)
    return tuple(words) if "--dry-run" in words else (*words[:at], "--dry-run", *words[at:])


def _launcher_cases():
    seen = set()  # a command printed on several pages (or with and without --dry-run) runs once
    for name, command in all_commands():
        if command.startswith(f"{RUN} ") and _dry_run(command) not in seen:
            seen.add(_dry_run(command))
            yield pytest.param(command, id=f"{name}:{command[:70]}")


@pytest.mark.parametrize("command", list(_launcher_cases()))
def test_every_ttjax_run_command_plans_its_ranks(clone, command):
    argv = _argv(command)
    program = argv.index(PY)
    if "--dry-run" not in argv:
        argv.insert(program, "--dry-run")
        program += 1
    out = _run(argv, clone)
    shown = " ".join(argv[program:])
    for rank in (0, 1):
        (line,) = [x for x in out.splitlines() if x.startswith(f"rank {rank}: ")]
        assert line.endswith(shown) and f"TT_MESH_HOST_RANK={rank}" in line, line


def _block_cases():
    for where, code in python_blocks():
        marks = [pytest.mark.slow] if any(s in code for s in SLOW_BLOCKS) else []
        yield pytest.param(code, marks=marks, id=where)


@pytest.mark.parametrize("code", list(_block_cases()))
def test_every_python_block_runs_as_printed(clone, code):
    for part, variable in NEEDS.items():
        if part in code and not os.environ.get(variable):
            pytest.skip(f"needs {variable} (the block uses {part})")
    out = _run([sys.executable, "-"], clone, devices=None, stdin=code)
    for expected in re.findall(r"^print\(.*\)  # (.+)$", code, re.M):
        shown = expected.split(": ")[0]  # "VALUE: what it means"
        assert shown in out, (shown, out[-3000:])


LAUNCH = f"{RUN} --rank-binding configs/rank_bindings/2x4_big_mesh.yaml {PY} prog.py"


@pytest.mark.slow
def test_readme_launcher_runs_prog_py_on_two_processes(clone):
    """The docs' ``ttjax-run ... python prog.py`` with its prog.py block, for real."""
    text = MULTIHOST_PAGE.read_text()
    assert LAUNCH in shell_commands(text)
    (prog,) = [b for b in fenced_blocks(text, "python") if "# prog.py" in b]
    (clone / "prog.py").write_text(prog)
    out = _run(_argv(LAUNCH), clone, devices=None)  # each rank runs the clone's .venv/bin/python
    for rank in (0, 1):
        assert f"[1,{rank}]<stdout>:(8, 1, 32, 256)" in out, out[-3000:]


def test_no_readme_command_needs_an_activated_venv():
    """A fresh clone has no `python` with ttjax on PATH: shell blocks say `.venv/bin/python`."""
    text = "\n".join(p.read_text() for p in DOCS)
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    assert blocks
    bare = [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if re.match(r"\s*python3? ", line)
    ]
    assert bare == [], bare
