"""The training command lines as a user meets them: one clean message per error, a banner that
names every strategy, and no silent setting (``--max-steps``, ``vocab_size``).

The subprocess tests run ``python -m models.*.train`` as a shell would; each fails before any
device opens, so they stay fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from _tiny import YAML_MODEL as MODEL

import ttjax as ttnn
from models.nanogpt import train as nanogpt_train
from ttjax.errors import ConfigError, MeshShapeError
from ttjax.plan import ParallelDims
from ttjax.ttml.autograd import AutoContext
from ttjax.ttml.cli import max_steps, model_vocab, parse_mesh_shape, pipeline_step, strategies
from ttjax.ttml.config import load_config
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.data import CharTokenizer, load_corpus, load_dataset
from ttjax.ttml.errors import TrainingConfigError
from ttjax.ttml.train import OptimizerSettings

ROOT = Path(__file__).resolve().parents[2]


def _config(
    tmp: Path, name: str = "run", *, mesh=(2, 4), pp: bool = False, save: int = 0, **model
) -> Path:
    doc = {
        "training_config": {
            "project_name": name,
            "batch_size": 4,
            "max_steps": 3,
            "eval_every": 0,
            "model_save_interval": save,
            "checkpoint_dir": str(tmp / name / "ckpt"),
            "tokenizer_type": "char",
            "optimizer": {"type": "AdamW", "lr": 0.003},
        },
        "transformer_config": {**MODEL, **model},
        "device_config": {
            "mesh_shape": list(mesh),
            "enable_ddp": True,
            "enable_tp": not pp,
            "enable_pp": pp,
        },
    }
    if pp:
        doc["multihost_config"] = {
            "pipeline_parallel_config": {
                "num_blocks": 4,
                "num_microbatches": 2,
                "schedule": "1f1b",
            }
        }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _shell(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TTJAX_NUM_DEVICES": "8", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _clean(run: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit status 1, and stderr is one message: the needles, a fix line, no traceback."""
    assert run.returncode == 1, run.stderr[-3000:]
    err = run.stderr
    assert "Traceback" not in err, err
    assert err.startswith("python -m models."), err
    assert "\nfix: " in err, err
    assert "--debug" in err.splitlines()[-1]
    assert len(err.strip().splitlines()) <= 4, err
    for needle in needles:
        assert needle in err, (needle, err)


# ---------------------------------------------------------------------------------------------
# Clean errors
# ---------------------------------------------------------------------------------------------


def test_bad_mesh_shape_is_one_message_naming_the_form(tmp_path):
    run = _shell("models.nanogpt.train", "--config", str(_config(tmp_path)), "--mesh-shape", "2by4")
    _clean(run, "'2by4'", "RxC", "fix: --mesh-shape 2x4")


def test_bad_config_key_is_one_message_and_debug_shows_the_traceback(tmp_path):
    path = _config(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["training_config"]["batch_sise"] = 4
    path.write_text(yaml.safe_dump(doc))
    run = _shell("models.llama.train", "--config", str(path))
    _clean(run, "TrainingConfigError", "unknown key 'batch_sise'", "did you mean 'batch_size'")
    debug = _shell("models.llama.train", "--config", str(path), "--debug")
    assert debug.returncode == 1
    err = debug.stderr
    assert err.index("Traceback (most recent call last)") < err.index("error (TrainingConfigError)")
    assert "unknown key 'batch_sise'" in err and "\nfix: " in err
    env = _shell("models.llama.train", "--config", str(path), env={"TTJAX_DEBUG": "1"})
    assert "Traceback (most recent call last)" in env.stderr


def test_max_steps_zero_is_refused_not_ignored(tmp_path):
    run = _shell("models.nanogpt.train", "--config", str(_config(tmp_path)), "--max-steps", "0")
    _clean(run, "--max-steps 0 is outside 1..3", "training_config.max_steps = 3")


@pytest.mark.slow
def test_moe_help_prints_the_usage_and_errors_are_clean():
    run = _shell("models.moe.train", "--help")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: python -m models.moe.train")
    for flag in ("--mesh", "--steps", "--aux", "--debug"):
        assert flag in run.stdout
    _clean(_shell("models.moe.train", "--mesh", "2by4"), "mesh '2by4'", "RxC")
    _clean(_shell("models.moe.train", "--steps", "0"), "--steps 0")


@pytest.mark.slow
def test_moe_cli_trains_and_reports(capsys):
    from models.moe.train import cli

    assert cli(["--mesh", "1x4", "--steps", "2", "--rows", "2", "--seq", "8"]) == 0
    out = yaml.safe_load(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["mesh"] == [1, 4] and out["steps"] == 2 and out["expert_groups"] == 4
    # An untrained byte model starts near ln(256); two AdamW steps at lr 1e-2 lower it.
    assert abs(out["first_cross_entropy"] - np.log(256)) < 1.0
    assert out["final_cross_entropy"] < out["first_cross_entropy"]


# ---------------------------------------------------------------------------------------------
# The settings themselves
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shape"), [("2x4", [2, 4]), ("1X8", [1, 8]), ("2x2x2", [2, 2, 2])]
)
def test_parse_mesh_shape(text, shape):
    assert parse_mesh_shape(text) == shape


@pytest.mark.parametrize("text", ["2by4", "8", "2x0", "x4", "2x-4", "1x2x2x2"])
def test_parse_mesh_shape_refuses(text):
    with pytest.raises(MeshShapeError, match=rf"--mesh-shape '{text}' is not of the form RxC"):
        parse_mesh_shape(text)


def test_max_steps_range(tmp_path):
    run = load_config(_config(tmp_path))
    assert max_steps(run, None) == 3 and max_steps(run, 1) == 1 and max_steps(run, 3) == 3
    for bad in (0, -1, 4):
        with pytest.raises(TrainingConfigError, match=rf"--max-steps {bad} is outside 1..3"):
            max_steps(run, bad)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("training_config", "model_path", "weights.msgpack"),
        ("training_config", "num_epochs", 3),
        ("transformer_config", "model_path", "weights.msgpack"),
    ],
)
def test_keys_training_would_ignore_are_refused(tmp_path, section, key, value):
    path = _config(tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc[section][key] = value
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(
        TrainingConfigError,
        match=rf"{section}\.{key} = {value!r} is not used by ttjax's training(.|\n)*fix: remove",
    ):
        nanogpt_train.cli(["--config", str(path), "--out", str(tmp_path / "o")])


def test_char_vocab_size_is_honoured(tmp_path):
    """The model's embedding has exactly vocab_size rows; the characters must fit in it."""
    chars = len(CharTokenizer.train(load_corpus()).chars)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    par = ParallelismContext.from_axes(mesh)
    sizes = {}
    for v in (chars, 192):
        run = load_config(_config(tmp_path, f"v{v}", mesh=(1, 1), vocab_size=v))
        vocab = model_vocab(run, par)
        data = load_dataset("char", vocab_size=vocab)
        parts = nanogpt_train.build(run, par, vocab)
        sizes[v] = parts.params["wte"]["weight"].shape
        assert f"vocab {v}," in parts.description
        assert int(data.train.max()) < v
    assert sizes == {chars: (chars, 32), 192: (192, 32)}
    with pytest.raises(
        TrainingConfigError,
        match=rf"vocab_size = 50 is smaller than the {chars} distinct characters(.|\n)*"
        rf"fix: set transformer_config.vocab_size >= {chars}",
    ):
        load_dataset("char", vocab_size=50)


def test_vocab_size_must_split_over_tp(tmp_path):
    run = load_config(_config(tmp_path, vocab_size=126))
    par = ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(2, 4)), 0, 1)
    with pytest.raises(TrainingConfigError, match=r"vocab_size = 126 is not divisible by the TP"):
        model_vocab(run, par)
    assert (
        model_vocab(run, ParallelismContext.from_axes(par.mesh_device, 0, None)) == 126
    )  # DDP alone splits nothing


def test_bpe_vocab_size_is_honoured(tmp_path):
    """A BPE of vocab_size 320 is 256 byte tokens and 64 merges, each of them used."""
    data = load_dataset("bpe", vocab_size=320, cache_dir=str(tmp_path))
    assert data.tokenizer.vocab_size == 320
    merges = np.unique(data.train[data.train >= 256])
    assert merges.tolist() == list(range(256, 320))  # the 64 merged tokens, all in use


@pytest.mark.parametrize("v", [100, 256])
def test_bpe_vocab_without_merges_is_refused(v):
    with pytest.raises(
        TrainingConfigError,
        match=rf"vocab_size = {v} is too small for tokenizer_type 'bpe'(.|\n)*vocab_size >= 257",
    ):
        load_dataset("bpe", vocab_size=v)


# ---------------------------------------------------------------------------------------------
# The banner
# ---------------------------------------------------------------------------------------------


def test_parallelism_names_its_axes():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
    both = ParallelismContext.from_axes(mesh, 0, 1)
    assert repr(both) == "ParallelismContext(mesh=(2, 4), dp=2, tp=4)"
    assert both.describe() == "DDP 2 over mesh axis 'dp', TP 4 over mesh axis 'tp'"
    ddp = ParallelismContext.from_axes(mesh, 0, None)
    assert "None" not in repr(ddp) + ddp.describe()
    assert ddp.describe() == "DDP 2 over mesh axis 'dp', TP off"


def _plans_made(monkeypatch) -> list[ParallelDims]:
    """Every ``ParallelDims`` constructed from now on (its ``__post_init__`` counts them)."""
    made: list[ParallelDims] = []
    real = ParallelDims.__post_init__

    def counted(self: ParallelDims) -> None:
        real(self)
        made.append(self)

    monkeypatch.setattr(ParallelDims, "__post_init__", counted)
    return made


@pytest.mark.slow
def test_banner_of_a_tp_ddp_run_and_its_one_plan(tmp_path, capsys, monkeypatch):
    """The banner names every strategy; the run makes its plan once (read with the config, held
    by the ParallelismContext, read by the step, the model and the banner)."""
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_mesh_graph_descriptor.textproto")
    path = _config(tmp_path, "banner", save=1)
    argv = ["--config", str(path), "--no-progress", "--out", str(tmp_path / "out")]
    made = _plans_made(monkeypatch)
    assert nanogpt_train.cli([*argv, "--max-steps", "2"]) == 0
    assert [(d.shape, d.roles) for d in made] == [((2, 4), ("dp", "tp"))]
    lines = capsys.readouterr().out.splitlines()
    banner = next(line for line in lines if " on mesh " in line)
    places = next(line for line in lines if ": corpus" in line)
    assert "on mesh [2, 4]: DDP 2 over mesh axis 'dp', TP 4 over mesh axis 'tp', PP off" in banner
    corpus = load_dataset(vocab_size=None)
    tokens = len(corpus.train) + len(corpus.val)
    assert places.startswith(
        "python -m models.nanogpt.train: corpus: Python's documentation text (pydoc_data; "
        f"data_path is empty; {tokens:,} tokens); logs in {str(tmp_path / 'out')!r}"
    )
    assert "vocab 128," in banner and "steps 1..2 of 3" in banner
    assert "None" not in banner
    # The final checkpoint is at step 2: resuming and stopping at 1 would train nothing.
    with pytest.raises(
        ConfigError, match=r"the checkpoint is at step 2, past this run's last step 1"
    ):
        nanogpt_train.cli([*argv, "--max-steps", "1", "--resume"])


@pytest.mark.slow
def test_fsdp_cp_run_with_mesh_shape_makes_one_plan(tmp_path, capsys, monkeypatch):
    """FSDP x CP, the file's 1x8 mesh replaced by --mesh-shape 2x4: one plan, for the 2x4 mesh."""
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_mesh_graph_descriptor.textproto")
    path = _config(tmp_path, "fsdp_cp", mesh=(1, 8))
    doc = yaml.safe_load(path.read_text())
    doc["device_config"] = {"mesh_shape": [1, 8], "enable_fsdp": True, "enable_cp": True}
    path.write_text(yaml.safe_dump(doc))
    argv = ["--config", str(path), "--no-progress", "--out", str(tmp_path / "out")]
    made = _plans_made(monkeypatch)
    assert nanogpt_train.cli([*argv, "--max-steps", "1", "--mesh-shape", "2x4"]) == 0
    assert [(d.shape, d.roles) for d in made] == [((2, 4), ("fsdp", "cp"))]
    banner = next(line for line in capsys.readouterr().out.splitlines() if " on mesh " in line)
    assert "FSDP 2 over mesh axis 'fsdp', CP 4 over mesh axis 'cp', TP off, PP off" in banner


@pytest.mark.slow
def test_pp_run_makes_one_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_mesh_graph_descriptor.textproto")
    path = _config(tmp_path, "pp_plan", pp=True)
    argv = ["--config", str(path), "--no-progress", "--out", str(tmp_path / "out")]
    made = _plans_made(monkeypatch)
    assert nanogpt_train.cli([*argv, "--max-steps", "1"]) == 0
    assert [(d.shape, d.roles) for d in made] == [((2, 4), ("dp", "pp"))]


def test_banner_of_a_pp_run(tmp_path, monkeypatch):
    """PP: stages, their blocks, the schedule and the microbatches (no training needed)."""
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_mesh_graph_descriptor.textproto")
    run = load_config(_config(tmp_path, pp=True))
    ctx = AutoContext.get_instance()
    ctx.open_device([2, 4])
    try:
        par = ctx.initialize_parallelism_context(run.device.distributed_config())
        assert isinstance(par, ParallelismContext)
        parts = nanogpt_train.build(run, par, model_vocab(run, par))
        step = pipeline_step(run, par, parts, OptimizerSettings.from_config(run))
        assert strategies(par, step) == (
            "DDP 2 over mesh axis 'dp', TP off, PP 4 stages over mesh axis 'pp' "
            "(blocks per stage [1, 1, 1, 1]), schedule 1f1b, 2 microbatches"
        )
    finally:
        ctx.close_device()


def test_more_stages_than_blocks_is_told_in_stages_and_blocks(tmp_path, monkeypatch):
    """8 PP stages over a 4-block model: said in stages and blocks, before any parameter split."""
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_1x8_mesh_graph_descriptor.textproto")
    path = _config(tmp_path, mesh=(1, 8), pp=True)
    doc = yaml.safe_load(path.read_text())
    doc["device_config"]["enable_ddp"] = False  # all 8 devices on the PP axis
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(
        ConfigError, match=r"8 pipeline stages need at least 8 blocks; the model has 4 "
    ):
        nanogpt_train.cli(["--config", str(path), "--no-progress", "--out", str(tmp_path)])


def test_bf16_with_pp_is_refused_not_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", "t3k_mesh_graph_descriptor.textproto")
    path = _config(tmp_path, pp=True)
    with pytest.raises(ConfigError, match=r"compute_dtype = 'bfloat16' with enable_pp"):
        nanogpt_train.cli(
            ["--config", str(path), "--no-progress", "--out", str(tmp_path)]
            + ["--set", "training_config.compute_dtype=bfloat16"]
        )


@pytest.mark.parametrize(("runner", "policy"), [("default", "none"), ("memory_efficient", "full")])
def test_runner_type_picks_the_remat_policy(tmp_path, runner, policy):
    """TTML's ``memory_efficient`` runner recomputes each block (remat); ``default`` keeps all."""
    from models.llama import train as llama_train

    run = load_config(_config(tmp_path, runner_type=runner))
    assert nanogpt_train.gpt_config(run, 128).remat_policy == policy
    llama = {"model_type": "llama", "num_groups": 2, "weight_tying": "disabled"}
    run = load_config(_config(tmp_path, "llama", runner_type=runner, **llama))
    par = ParallelismContext.from_axes(ttnn.open_mesh_device(ttnn.MeshShape(1, 1)))
    loss_fn = llama_train.build(run, par, 128).loss_fn
    assert loss_fn.__self__.remat_policy == policy


def test_a_checkpoint_folder_that_cannot_be_made_stops_before_step_1(tmp_path, monkeypatch):
    """A file where the folder should be: one message naming the key, before any device opens."""
    (tmp_path / "afile").write_text("")
    path = _config(tmp_path, mesh=(1, 1))
    doc = yaml.safe_load(path.read_text())
    doc["training_config"]["checkpoint_dir"] = str(tmp_path / "afile" / "ck")
    path.write_text(yaml.safe_dump(doc))
    opened = []
    monkeypatch.setattr(AutoContext, "open_device", lambda *a, **k: opened.append(a))
    with pytest.raises(
        TrainingConfigError,
        match=r"checkpoint_dir = '.*afile/ck' cannot be created or written: '.*afile' is a file",
    ):
        nanogpt_train.cli(["--config", str(path), "--out", str(tmp_path / "o")])
    assert opened == []
    with pytest.raises(TrainingConfigError, match=r"--out = '.*afile/o' cannot be created"):
        nanogpt_train.cli(
            [
                "--config",
                str(_config(tmp_path, "b", mesh=(1, 1))),
                "--out",
                str(tmp_path / "afile" / "o"),
            ]
        )


@pytest.mark.slow
def test_a_run_started_elsewhere_says_what_it_reads_and_where_it_writes(
    tmp_path, capsys, monkeypatch
):
    """Relative data_path, checkpoint_dir and the default --out are read from the current
    folder (tt-train's and PyTorch's rule), not beside the config; the banner's second line names
    the corpus and both folders, absolute. The run trains with TTML's SGD (momentum, nesterov)."""
    configs, work = tmp_path / "configs", tmp_path / "work"
    configs.mkdir()
    work.mkdir()
    corpus = work / "corpus.txt"
    corpus.write_text(load_corpus()[:20_000])
    path = _config(configs, "where", mesh=(1, 2))
    doc = yaml.safe_load(path.read_text())
    doc["training_config"].update(
        checkpoint_dir="ckpts",
        data_path="corpus.txt",
        model_save_interval=1,
        optimizer={"type": "SGD", "lr": 0.05, "momentum": 0.9, "nesterov": True},
    )
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.chdir(work)
    assert nanogpt_train.cli(["--config", str(path), "--no-progress", "--max-steps", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    tokens = len(CharTokenizer.train(corpus.read_text()).encode(corpus.read_text()))
    assert next(line for line in lines if ": corpus" in line) == (
        f"python -m models.nanogpt.train: corpus {str(corpus)!r} ({tokens:,} tokens); logs in "
        f"{str(work / 'runs' / 'where')!r}; checkpoints in {str(work / 'ckpts')!r}"
    )
    assert (work / "runs" / "where" / "log.json").is_file()
    assert [p.name for p in (work / "ckpts").iterdir()] == ["1"]
    assert sorted(p.name for p in configs.iterdir()) == ["where.yaml"]
