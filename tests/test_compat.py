"""ttjax.compat / python -m ttjax.ttnn_run: ``import ttnn`` gives ttjax, tt-metal's tree mounts."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import ttjax
import ttjax.compat
from ttjax.errors import ConfigError


@pytest.fixture
def ttnn():
    yield ttjax.compat.install_as_ttnn(tt_metal_home=None)
    ttjax.compat.uninstall_ttnn()


def test_names_are_ttjax_objects(ttnn) -> None:
    assert ttnn.open_mesh_device is ttjax.open_mesh_device
    assert ttnn._ttnn.multi_device.MeshDevice is ttjax.MeshDevice
    assert ttnn._ttnn.tensor.Tensor is ttjax.Tensor
    assert ttnn.experimental.all_gather_async is ttjax.experimental.all_gather_async
    assert ttnn._ttnn.global_semaphore.global_semaphore is ttjax.GlobalSemaphore
    assert ttnn.core.divup(65, 32) == 3  # TT-NN's python helpers, from ttjax.hardware


def test_every_module_of_the_tree_reaches_ttjax(ttnn) -> None:
    """One name per ``ttnn.X`` module tt-metal's model files reach (see TTNN_MODULES)."""
    import ttjax.cluster
    import ttjax.kv_cache

    assert ttnn.kv_cache.fill_cache_for_user_ is ttjax.kv_cache.fill_cache_for_user_
    assert ttnn.cluster.ClusterType is ttnn._ttnn.cluster.ClusterType is ttjax.cluster.ClusterType
    assert ttnn.device.Arch is ttjax.Arch
    assert ttnn.types.TensorMemoryLayout is ttjax.TensorMemoryLayout
    assert ttnn._ttnn.operations.ccl.Topology is ttjax.Topology
    assert ttnn._ttnn.device.SubDeviceId is ttjax.SubDeviceId
    exp = ttnn._ttnn.operations.experimental.ccl_experimental
    assert exp.GlobalSemaphoreArg is ttjax.experimental.GlobalSemaphoreArg
    for name in ttjax.compat.TTNN_MODULES:
        assert isinstance(importlib.import_module(name), ttjax.compat.TTNNModule), name


def test_import_forms_of_tt_metal_files(ttnn) -> None:
    from ttnn import ReplicateTensorToMesh, ShardTensor2dMesh
    from ttnn.distributed.distributed import ConcatMeshToTensor
    from ttnn.model_preprocessing import preprocess_model_parameters

    assert ConcatMeshToTensor is ttjax.ConcatMeshToTensor
    assert (ReplicateTensorToMesh, ShardTensor2dMesh) == (
        ttjax.ReplicateTensorToMesh,
        ttjax.ShardTensor2dMesh,
    )
    assert preprocess_model_parameters is ttjax.model_preprocessing.preprocess_model_parameters
    import ttnn.experimental as exp

    assert exp is ttnn.experimental


def test_bound_ttnn_computes_like_ttjax(ttnn, t3000) -> None:
    x = np.arange(2 * 32 * 64, dtype=np.float32).reshape(1, 2, 32, 64) / 100
    t = ttnn.from_torch(
        x, device=t3000, layout=ttnn.TILE_LAYOUT, mesh_mapper=ttnn.ShardTensorToMesh(t3000, dim=3)
    )
    got = ttnn.to_torch(
        ttnn.all_gather(ttnn.relu(t), dim=3), mesh_composer=ttnn.ConcatMeshToTensor(t3000, dim=0)
    )
    np.testing.assert_allclose(np.asarray(got)[:1], np.maximum(x, 0), rtol=1e-2)


def test_missing_name_says_which_and_how_to_fix(ttnn) -> None:
    with pytest.raises(AttributeError, match=r"ttnn.device.no_such_call(.|\n)*fix:"):
        ttnn.device.no_such_call  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        import ttnn.no_such_module


def test_refused_name_says_why(ttnn) -> None:
    """A name refused on purpose (NOT_PROVIDED) says why, not "yet"; none of them resolves."""
    with pytest.raises(AttributeError, match="image family") as e:
        ttnn.grid_sample  # noqa: B018
    assert "yet" not in str(e.value)
    for name in ttjax.compat.NOT_PROVIDED:
        module, _, attr = name.rpartition(".")
        with pytest.raises(AttributeError, match="on TT-NN itself"):
            getattr(importlib.import_module(module), attr)


def test_the_conv_family_resolves_to_ttjax_conv(ttnn) -> None:
    """CNN model code's most used names (conv2d and its configs, the pools) are ttjax.conv's."""
    for name in ("conv2d", "Conv2dConfig", "Conv2dDRAMSliceWidth", "max_pool2d",
                 "Conv2dL1FullSliceConfig", "get_conv_output_dim", "prepare_conv_weights"):  # fmt: skip
        assert getattr(ttnn, name) is getattr(ttjax.conv, name)
        assert f"ttnn.{name}" not in ttjax.compat.NOT_PROVIDED


def test_names_page_is_current_and_lists_every_name() -> None:
    """docs/ttnn_api.md is names_page()'s output (regenerate: ttjax.compat.write_names_page())."""
    root = Path(__file__).resolve().parents[1]
    page = (root / ttjax.compat.NAMES_PAGE).read_text()
    assert page == ttjax.compat.names_page(), (
        "docs/ttnn_api.md is stale: run "
        "python -c 'import ttjax.compat as c; c.write_names_page()' in the repository root"
    )
    for name in ("`open_mesh_device`", "`all_gather_async`", "`conv2d`", "`ttnn.grid_sample`"):
        assert name in page


def test_every_doc_path_in_an_error_message_exists() -> None:
    """A ``docs/*.md`` named anywhere in ttjax's code (error messages, fix lines) is a real page."""
    import re

    root = Path(__file__).resolve().parents[1]
    named = {
        m
        for f in (root / "ttjax").rglob("*.py")
        for m in re.findall(r"docs/[\w/.-]+\.md", f.read_text())
    }
    assert "docs/ttnn_api.md" in named
    assert [p for p in named if not (root / p).is_file()] == []


def test_refuses_when_real_ttnn_already_imported() -> None:
    ttjax.compat.uninstall_ttnn()
    sys.modules["ttnn"] = types.ModuleType("ttnn")
    try:
        with pytest.raises(ConfigError, match="already imported"):
            ttjax.compat.install_as_ttnn(tt_metal_home=None)
    finally:
        del sys.modules["ttnn"]


def test_mount_adds_checkout_models_beside_project_models(tmp_path: Path) -> None:
    pkg = tmp_path / "models" / "fake_tt_pkg"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text("import ttnn\nVALUE = ttnn.TILE_SIZE\n")
    ttjax.compat.install_as_ttnn(tt_metal_home=tmp_path)
    try:
        import models.llama  # the project's own models package still imports
        from models.fake_tt_pkg.mod import VALUE  # type: ignore[import-not-found]

        assert VALUE == ttjax.TILE_SIZE == 32
        assert models.llama.__name__ == "models.llama"
    finally:
        ttjax.compat.uninstall_ttnn()
        sys.path.remove(str(tmp_path.resolve()))
        sys.modules.pop("models.fake_tt_pkg.mod", None)
        sys.modules.pop("models.fake_tt_pkg", None)


def test_mount_refuses_a_folder_without_models(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="fix:"):
        ttjax.compat.mount_tt_metal(tmp_path)


def test_ttnn_run_runs_a_script_with_ttnn_bound(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(
        "import sys, ttnn\n"
        "from ttnn._ttnn.multi_device import MeshDevice\n"
        "mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))\n"
        "print(type(mesh).__name__, isinstance(mesh, MeshDevice), sys.argv[1:])\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "ttjax.ttnn_run", str(script), "--flag"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "MeshDevice True ['--flag']"


def test_ttnn_run_without_program_prints_usage() -> None:
    from ttjax import ttnn_run

    assert ttnn_run.main([]) == 2


def test_ttnn_run_pytest_shorthand_runs_pytest_with_ttnn_bound(tmp_path: Path) -> None:
    (tmp_path / "test_bound.py").write_text(
        "import ttnn\n"
        "import ttjax\n"
        "def test_bound():\n"
        "    assert ttnn._ttnn.multi_device.MeshDevice is ttjax.MeshDevice\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ttjax.ttnn_run",
            "pytest",
            str(tmp_path),
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-2000:]
    assert "1 passed" in out.stdout


def test_ttnn_run_errors_are_one_message_and_debug_shows_the_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing script, a missing module, and a ttjax error raised inside the program."""
    from ttjax import ttnn_run

    assert ttnn_run.main([str(tmp_path / "nope.py")]) == 1
    err = capsys.readouterr().err
    assert "error (ConfigError): script" in err and "nope.py' does not exist" in err
    assert "\nfix: " in err and "Traceback" not in err
    assert ttnn_run.main(["-m", "no_such_module_xyz"]) == 1
    assert "no module named 'no_such_module_xyz'" in capsys.readouterr().err
    prog = tmp_path / "prog.py"
    prog.write_text("import ttnn\nttnn.open_mesh_device(ttnn.MeshShape(64, 64))\n")
    assert ttnn_run.main([str(prog)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("python -m ttjax.ttnn_run: error (") and "Traceback" not in err
    assert "\nfix: " in err and len(err.strip().splitlines()) <= 4
    assert ttnn_run.main(["--debug", str(prog)]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_ttnn_run_puts_the_real_package_back_over_a_clone_folder(tmp_path: Path) -> None:
    """A folder ``ttjax`` without ``__init__.py`` (a clone) imported as a namespace package in
    the package's place: the runner restores the real package before the script runs."""
    (tmp_path / "ttjax").mkdir()
    code = (
        "import sys, types\n"
        "import ttjax.ttnn_run as r\n"
        "fake = types.ModuleType('ttjax'); fake.__path__ = [sys.argv[1]]\n"
        "sys.modules['ttjax'] = fake\n"
        "print(r.unshadow())\n"
        "import ttjax\n"
        "print(hasattr(ttjax, 'open_mesh_device'), ttjax.__file__ == r.__file__.replace("
        "'ttnn_run.py', '__init__.py'), r.unshadow())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ttjax")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == [str(tmp_path / "ttjax"), "True True None"]
    assert "was imported as `ttjax`; using the package at" in out.stderr
