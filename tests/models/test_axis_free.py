"""The training models never name a mesh axis and apply no strategy themselves (issue 27).

Read from the source (``ast``): nothing under ``models/`` imports ``ttjax.ttml.fsdp``,
``ttjax.ttml.ops.ring_attention`` or ``ttjax.ttml.stacked`` (the modules apply FSDP, CP and the
layer scan), and no function or method of a training model takes a mesh axis name parameter.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
#: The strategy modules a model must not import: the TTML modules apply them.
STRATEGY_MODULES = ("ttjax.ttml.fsdp", "ttjax.ttml.ops.ring_attention", "ttjax.ttml.stacked")
#: The training models: their forwards, losses, pipeline stages and MoE training.
TRAINING = (
    "models/nanogpt/model.py",
    "models/nanogpt/pipeline.py",
    "models/nanogpt/train.py",
    "models/nanogpt/weights.py",
    "models/llama/train_model.py",
    "models/llama/pipeline.py",
    "models/llama/train.py",
    "models/moe/train.py",
)
#: Parameter names that carry a mesh axis (a name, an index, or TTML's Axes bundle).
AXIS_PARAMS = {"tp", "cp", "dp", "ep", "pp", "fsdp", "axes", "axis_name", "mesh_axis"}
AXIS_SUFFIXES = ("_axis", "_axis_name", "_axes")


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, and ``pkg.name`` for each ``from pkg import name``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _axis_params(path: Path) -> list[str]:
    """``function(param)`` for each parameter of ``path``'s functions that names a mesh axis."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                name = arg.arg.lower()
                if name in AXIS_PARAMS or name.endswith(AXIS_SUFFIXES):
                    bad.append(f"{getattr(node, 'name', 'lambda')}({arg.arg})")
    return bad


@pytest.mark.parametrize(
    "path", sorted(MODELS.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_models_import_no_strategy_module(path: Path):
    hits = sorted(m for m in _imports(path) if m.startswith(STRATEGY_MODULES))
    assert not hits, f"{path.relative_to(ROOT)} imports {hits}; compose ttjax.ttml.modules"


@pytest.mark.parametrize("rel", TRAINING)
def test_training_models_take_no_mesh_axis(rel: str):
    assert (ROOT / rel).exists()
    assert _axis_params(ROOT / rel) == []


def test_the_checks_catch_what_they_look_for(tmp_path: Path):
    """The two readers find an axis parameter and a strategy import when there is one."""
    src = tmp_path / "m.py"
    src.write_text(
        "from ttjax.ttml.stacked import scan_blocks\n"
        "import ttjax.ttml.fsdp\n"
        "def loss(params, x, tp=None): ...\n"
        "class M:\n    def block(self, p, x, *, cp_axis): ...\n"
        "f = lambda p, axes: p\n"
    )
    assert _axis_params(src) == ["loss(tp)", "block(cp_axis)", "lambda(axes)"]
    found = {m for m in _imports(src) if m.startswith(STRATEGY_MODULES)}
    assert found == {"ttjax.ttml.stacked", "ttjax.ttml.stacked.scan_blocks", "ttjax.ttml.fsdp"}
