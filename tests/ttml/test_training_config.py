"""TTML YAML configs: shipped files load, and every key rejects unknown names, bad types and bad values."""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ttjax import ttml
from ttjax.ttml import config as C
from ttjax.ttml.errors import ParallelismConfigError, TrainingConfigError
from ttjax.ttml.train import OptimizerSettings

CONFIGS = sorted((Path(__file__).parents[2] / "configs").glob("training_*.yaml"))

BASE: dict[str, Any] = {
    "training_config": {
        "batch_size": 8,
        "model_config": "model.yaml",
        "optimizer": {"type": "AdamW", "lr": 0.001},
    },
    "device_config": {"mesh_shape": [2, 4], "enable_ddp": True, "enable_tp": True},
    "scheduler_config": {"warmup_steps": 2},
    "eval_config": {"top_k": 5},
    "multihost_config": {
        "enabled": False,
        "num_workers": 2,
        "pipeline_parallel_config": {"num_blocks": 4, "blocks_per_rank": {0: 2, 1: 2}},
    },
}
MODEL: dict[str, Any] = {
    "transformer_config": {
        "model_type": "llama",
        "num_heads": 4,
        "num_groups": 2,
        "embedding_dim": 32,
        "rope_scaling": {"scaling_factor": 8.0, "original_context_length": 16},
        "experimental": {"use_composite_layernorm": False},
    }
}

# Allowed values, from tt-train (ttml_api.md section 2), independent of the implementation.
CHOICES = {
    "model_type": ["gpt2", "llama"],
    "tokenizer_type": ["char", "bpe"],
    "scheduler_type": ["identity", "warmup_linear", "warmup_cosine"],
    "runner_type": ["default", "memory_efficient"],
    "weight_tying": ["disabled", "enabled"],
    "positional_embedding_type": ["trainable", "fixed"],
    "socket_type": ["mpi", "fabric"],
    "type": [
        "AdamW",
        "AdamWFullPrecision",
        "MorehAdamW",
        "AdamWComposite",
        "SGD",
        "SGDComposite",
        "NoOp",
    ],
    "schedule": ["gpipe", "1f1b"],
}

# (dataclass, file, section path in that file)
SECTIONS = [
    (C.TrainingConfig, "train", ("training_config",)),
    (C.OptimizerConfig, "train", ("training_config", "optimizer")),
    (C.DeviceConfig, "train", ("device_config",)),
    (C.SchedulerConfig, "train", ("scheduler_config",)),
    (C.EvalConfig, "train", ("eval_config",)),
    (C.MultihostConfig, "train", ("multihost_config",)),
    (C.PipelineParallelConfig, "train", ("multihost_config", "pipeline_parallel_config")),
    (C.TransformerConfig, "model", ("transformer_config",)),
    (C.RopeScalingConfig, "model", ("transformer_config", "rope_scaling")),
]


def keys_of(cls: type) -> list[str]:
    return [
        f.metadata.get("key", f.name)
        for f in dataclasses.fields(cls)
        if "check" in f.metadata and f.metadata["check"] is not C._nested
    ]


def bad_values(cls: type, key: str) -> list[Any]:
    if key in CHOICES:
        return ["bogus"]
    kind = {f.metadata.get("key", f.name): f.type for f in dataclasses.fields(cls)}[key]
    if kind.startswith("int"):
        return ["x", -1, True]
    if kind.startswith("float"):
        return ["abc", -1.0]
    if kind == "bool":
        return ["yes"]
    if kind.startswith("str"):
        return [5]
    return [[1, -2]]  # tuples of ints


def dump(doc: Any) -> str:
    return yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))


def write(tmp: Path, train: dict[str, Any], model: dict[str, Any] | None = None) -> Path:
    (tmp / "model.yaml").write_text(dump(MODEL if model is None else model))
    path = tmp / "train.yaml"
    path.write_text(dump(train))
    return path


def put(doc: dict[str, Any], section: tuple[str, ...], key: str, value: Any) -> None:
    for s in section:
        doc = doc.setdefault(s, {})
    doc[key] = value


def test_base_loads(tmp_path: Path) -> None:
    cfg = ttml.load_config(write(tmp_path, BASE))
    assert cfg.model.model_type == "llama" and cfg.model.rope_scaling.enabled
    assert cfg.training.optimizer == C.OptimizerConfig(type="AdamW", lr=0.001, weight_decay=0.01)
    assert cfg.multihost.pipeline_parallel_config.block_range(1) == range(2, 4)
    assert cfg.scheduler.warmup_steps == 2 and cfg.eval.top_k == 5
    assert cfg.model_path == str(tmp_path / "model.yaml")


@pytest.mark.parametrize(
    ("cls", "key"),
    [(cls, key) for cls, _, _ in SECTIONS for key in keys_of(cls)],
    ids=lambda v: v.__name__ if isinstance(v, type) else v,
)
def test_every_key_rejects_bad_values(tmp_path: Path, cls: type, key: str) -> None:
    _, which, section = next(s for s in SECTIONS if s[0] is cls)
    for bad in bad_values(cls, key):
        train, model = copy.deepcopy(BASE), copy.deepcopy(MODEL)
        doc = train if which == "train" else model
        if cls is C.OptimizerConfig and key in ("momentum", "dampening", "nesterov"):
            train["training_config"]["optimizer"]["type"] = "SGD"
        put(doc, section, key, bad)
        path = write(tmp_path, train, model)
        file = tmp_path / ("train.yaml" if which == "train" else "model.yaml")
        with pytest.raises(TrainingConfigError) as e:
            ttml.load_config(path)
        msg = str(e.value)
        assert msg.startswith(f"{file}: {'.'.join(section)}.{key} = {bad!r} is not allowed"), msg
        if key in CHOICES:
            assert all(v in msg for v in CHOICES[key]), msg
        assert "\nfix: " in msg


@pytest.mark.parametrize(
    ("cls", "which", "section"), SECTIONS, ids=lambda v: getattr(v, "__name__", None)
)
def test_unknown_key_in_every_section(
    tmp_path: Path, cls: type, which: str, section: tuple[str, ...]
) -> None:
    train, model = copy.deepcopy(BASE), copy.deepcopy(MODEL)
    put(train if which == "train" else model, section, "batch_sise", 3)
    with pytest.raises(TrainingConfigError) as e:
        ttml.load_config(write(tmp_path, train, model))
    msg = str(e.value)
    file = tmp_path / ("train.yaml" if which == "train" else "model.yaml")
    assert msg.startswith(f"{file}: {'.'.join(section)}: unknown key 'batch_sise'"), msg
    assert f"Allowed keys: {', '.join(sorted(keys_of(cls) + nested_keys(cls)))}." in msg


def nested_keys(cls: type) -> list[str]:
    return [
        f.metadata.get("key", f.name)
        for f in dataclasses.fields(cls)
        if f.metadata.get("check") is C._nested
    ]


def test_did_you_mean_and_unknown_section(tmp_path: Path) -> None:
    train = copy.deepcopy(BASE)
    train["training_config"]["learing_rate"] = 0.1
    with pytest.raises(
        TrainingConfigError, match=r"unknown key 'learing_rate' \(did you mean 'learning_rate'\?\)"
    ):
        ttml.load_config(write(tmp_path, train))
    train = copy.deepcopy(BASE)
    train["devices_config"] = {}
    with pytest.raises(
        TrainingConfigError,
        match=r"unknown section 'devices_config' \(did you mean 'device_config'\?\)",
    ):
        ttml.load_config(write(tmp_path, train))


def test_ranges(tmp_path: Path) -> None:
    cases = [
        (("training_config",), "batch_size", 0, "an integer >= 1"),
        (("training_config",), "learning_rate", 0, "a number > 0.0"),
        (("transformer_config",), "dropout_prob", 1.5, "a number >= 0.0 and <= 1.0"),
        (("eval_config",), "top_p", 0.0, "a number > 0.0 and <= 1.0"),
        (("device_config",), "mesh_shape", [2, 0], "a list of 2 positive integers"),
        (("device_config",), "mesh_shape", [8], "a list of 2 positive integers"),
        (("device_config",), "enable_fsdp", "yes", "true or false"),
    ]
    for section, key, bad, allowed in cases:
        train, model = copy.deepcopy(BASE), copy.deepcopy(MODEL)
        put(model if section == ("transformer_config",) else train, section, key, bad)
        with pytest.raises(TrainingConfigError, match=re.escape(f"must be {allowed}")):
            ttml.load_config(write(tmp_path, train, model))


def test_float_written_without_a_dot(tmp_path: Path) -> None:
    # PyYAML reads 3e-4 as a string; tt-train files write it that way.
    path = tmp_path / "t.yaml"
    path.write_text("training_config:\n  learning_rate: 3e-4\n")
    cfg = ttml.load_config(path)
    assert cfg.training.learning_rate == 3e-4 and cfg.training.optimizer.lr == 3e-4


def test_defaults_are_tt_trains(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("training_config:\n  use_moreh_adamw: true\n")
    cfg = ttml.load_config(path)
    t = cfg.training
    assert (t.seed, t.batch_size, t.max_steps, t.learning_rate, t.weight_decay) == (
        5489,
        64,
        5000,
        3e-4,
        1e-2,
    )
    assert (t.model_save_interval, t.gradient_accumulation_steps, t.tokenizer_type) == (
        500,
        1,
        "char",
    )
    assert t.optimizer == C.OptimizerConfig(type="MorehAdamW", lr=3e-4, weight_decay=1e-2)
    assert cfg.device == C.DeviceConfig(mesh_shape=(1, 1))
    assert (cfg.model.num_groups, cfg.model.theta, cfg.model.runner_type) == (
        3,
        500000.0,
        "default",
    )
    assert not cfg.model.rope_scaling.enabled and not cfg.multihost.enabled


def test_optimizer_cross_checks(tmp_path: Path) -> None:
    train = copy.deepcopy(BASE)
    train["training_config"]["optimizer"] = {"type": "AdamW", "momentum": 0.9}
    with pytest.raises(
        TrainingConfigError, match="momentum do\\(es\\) not apply to optimizer type 'AdamW'"
    ):
        ttml.load_config(write(tmp_path, train))
    train["training_config"]["optimizer"] = {"type": "SGD", "beta1": 0.9}
    with pytest.raises(
        TrainingConfigError, match="beta1 do\\(es\\) not apply to optimizer type 'SGD'"
    ):
        ttml.load_config(write(tmp_path, train))
    train["training_config"]["optimizer"] = {"type": "SGD", "momentum": 0.9}
    train["training_config"]["learning_rate"] = 0.05
    opt = ttml.load_config(write(tmp_path, train)).training.optimizer
    assert (opt.is_sgd, opt.lr, opt.momentum) == (True, 0.05, 0.9)


def test_model_checks(tmp_path: Path) -> None:
    for change, message in [
        ({"embedding_dim": 30}, "embedding_dim = 30 is not divisible by num_heads = 4"),
        ({"num_groups": 3}, "num_heads = 4 is not divisible by num_groups = 3"),
    ]:
        model = copy.deepcopy(MODEL)
        model["transformer_config"].update(change)
        with pytest.raises(TrainingConfigError, match=re.escape(message)):
            ttml.load_config(write(tmp_path, BASE, model))
    model = copy.deepcopy(MODEL)
    model["transformer_config"]["experimental"] = {"use_composite": True}
    with pytest.raises(
        TrainingConfigError, match=r"transformer_config\.experimental: unknown key 'use_composite'"
    ):
        ttml.load_config(write(tmp_path, BASE, model))


def test_model_file_problems(tmp_path: Path) -> None:
    train = copy.deepcopy(BASE)
    train["training_config"]["model_config"] = "missing.yaml"
    with pytest.raises(
        TrainingConfigError, match=r"training_config.model_config = 'missing.yaml': no such file"
    ):
        ttml.load_config(write(tmp_path, train))
    train = copy.deepcopy(BASE)
    train["transformer_config"] = {"num_heads": 2}
    with pytest.raises(TrainingConfigError, match="the model is given more than once"):
        ttml.load_config(write(tmp_path, train))
    train["training_config"].pop("model_config")
    assert ttml.load_config(write(tmp_path, train)).model.num_heads == 2  # inline, old layout
    train["training_config"]["model_type"] = "llama"
    train["transformer_config"] = {"num_heads": 6}
    # Defaults are defaults: the model section did not write model_type, so it is training's,
    # with TTML's Llama defaults (models/llama.cpp read_config) for the keys it left out.
    model = ttml.load_config(write(tmp_path, train)).model
    assert (model.model_type, model.max_sequence_length, model.dropout_prob) == ("llama", 256, 0.0)
    assert model.written == {"num_heads"}
    train["transformer_config"]["model_type"] = "gpt2"  # both written, and they differ
    with pytest.raises(TrainingConfigError, match=r"training_config\.model_type = 'llama' but"):
        ttml.load_config(write(tmp_path, train))


def test_no_op_optimizer_leaves_the_parameters() -> None:
    """TTML's use_no_op: the update is zero, so the parameters after a step are the ones before."""
    import jax.numpy as jnp
    import optax

    from ttjax.ttml.train import OptimizerSettings, make_optimizer

    params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
    grads = {"w": jnp.full((2, 3), 0.5), "b": jnp.full(3, -2.0)}
    for clip in (None, 1.0):
        opt = make_optimizer(OptimizerSettings(no_op=True, clip_grad_norm_max_norm=clip))
        updates, _ = opt.update(grads, opt.init(params), params)
        after = optax.apply_updates(params, updates)
        assert all((after[k] == params[k]).all() for k in params)


def test_yaml_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("training_config:\n  batch_size: [1,\n  seed: 3\n")
    with pytest.raises(TrainingConfigError, match=re.escape(f"{path}:4:1: not valid YAML")):
        ttml.load_config(path)
    path.write_text("training_config: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(TrainingConfigError, match="not valid YAML"):
        ttml.load_config(path)
    path.write_text("- 1\n- 2\n")
    with pytest.raises(TrainingConfigError, match="the top level is a list"):
        ttml.load_config(path)
    path.write_text("training_config: 5\n")
    with pytest.raises(
        TrainingConfigError, match="training_config is 5 \\(int\\); it must be a mapping"
    ):
        ttml.load_config(path)
    with pytest.raises(TrainingConfigError, match="does not exist"):
        ttml.load_config(tmp_path / "none.yaml")


def test_device_checks(tmp_path: Path) -> None:
    train = copy.deepcopy(BASE)
    train["device_config"] = {"mesh_shape": [2, 4], "enable_ddp": True}
    with pytest.raises(ParallelismConfigError) as e:
        ttml.load_config(write(tmp_path, train))
    assert str(e.value).startswith(
        "The number of parallelization axes must be equal to the number of mesh shape dimensions"
    )
    assert "train.yaml: device_config" in str(e.value)
    train["device_config"] = {"mesh_shape": [1, 8], "enable_ddp": True, "device_ids": [0, 1]}
    with pytest.raises(
        TrainingConfigError, match=r"device_ids = \[0, 1\] must list 8 distinct ids"
    ):
        ttml.load_config(write(tmp_path, train))
    train["device_config"] = {
        "mesh_shape": [2, 2, 2],
        "enable_ddp": True,
        "enable_tp": True,
        "enable_pp": True,
    }
    dev = ttml.load_config(write(tmp_path, train)).device
    assert dev.total_devices() == 8
    assert dev.distributed_config() == ttml.DistributedConfig(True, True, True)


def test_pipeline_and_multihost(tmp_path: Path) -> None:
    train = copy.deepcopy(BASE)
    pp = train["multihost_config"]["pipeline_parallel_config"]
    pp["blocks_per_rank"] = {0: 2, 1: 3}
    with pytest.raises(TrainingConfigError) as e:
        ttml.load_config(write(tmp_path, train))
    assert str(e.value).startswith("Number of blocks must match number of blocks per rank.")
    pp["blocks_per_rank"] = {0: 2, 2: 2}
    with pytest.raises(TrainingConfigError, match=r"ranks 0\.\.1, each once"):
        ttml.load_config(write(tmp_path, train))
    pp["blocks_per_rank"] = {0: 1, 1: 1, 2: 2}
    with pytest.raises(TrainingConfigError, match="num_workers = 2 but"):
        ttml.load_config(write(tmp_path, train))
    pp["blocks_per_rank"] = [1, 3]
    pp.update(num_microbatches=4, schedule="1f1b")
    mh = ttml.load_config(write(tmp_path, train)).multihost.pipeline_parallel_config
    assert (mh.blocks_per_rank, mh.num_microbatches, mh.schedule) == ((1, 3), 4, "1f1b")
    # tt-train's layout: training_config names a separate multihost file.
    (tmp_path / "mh.yaml").write_text(dump({"multihost_config": train.pop("multihost_config")}))
    train["training_config"]["multihost_config"] = "mh.yaml"
    assert ttml.load_config(write(tmp_path, train)).multihost.num_workers == 2
    train["multihost_config"] = {"enabled": True}
    with pytest.raises(TrainingConfigError, match="given both as a section"):
        ttml.load_config(write(tmp_path, train))
    del train["multihost_config"]
    train["training_config"].pop("multihost_config")
    train["multihost_config"] = {"enabled": True}
    train["training_config"]["use_clip_grad_norm"] = True
    with pytest.raises(
        TrainingConfigError, match="Gradient clipping is not supported with multihost training"
    ):
        ttml.load_config(write(tmp_path, train))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_load_with_their_values(path: Path) -> None:
    cfg = ttml.load_config(path)
    raw = yaml.safe_load(path.read_text())
    model_raw = yaml.safe_load(Path(cfg.model_path).read_text())["transformer_config"]
    for key, value in raw["training_config"].items():
        if key != "optimizer":
            assert getattr(cfg.training, key) == value, key
    for key, value in raw["training_config"]["optimizer"].items():
        assert getattr(cfg.training.optimizer, key) == value, key
    for key, value in raw["device_config"].items():
        assert getattr(cfg.device, key) == (tuple(value) if isinstance(value, list) else value), key
    for key, value in model_raw.items():
        if key == "rope_scaling":
            assert dataclasses.asdict(cfg.model.rope_scaling) == value
        elif key == "experimental":
            assert cfg.model.use_composite_layernorm == value["use_composite_layernorm"]
        else:
            assert getattr(cfg.model, key) == value, key
    dp = cfg.device.mesh_shape[0] if cfg.device.enable_tp else cfg.device.total_devices()
    assert cfg.training.batch_size % dp == 0
    assert cfg.model.num_heads % (cfg.device.mesh_shape[1] if cfg.device.enable_tp else 1) == 0


def test_shipped_set() -> None:
    names = {p.name for p in CONFIGS}
    for model in ("nanogpt", "llama"):
        assert {
            f"training_{model}_ddp_1x8.yaml",
            f"training_{model}_tp_ddp.yaml",
            f"training_{model}_tp_ddp_4x8.yaml",
        } <= names


@pytest.mark.parametrize(
    ("optimizer", "training", "message"),
    [
        ({"stochastic_rounding": True}, {}, "optimizer.stochastic_rounding = true"),
        ({"kahan_summation": True}, {}, "optimizer.kahan_summation"),
        (None, {"use_kahan_summation": True}, "use_kahan_summation"),
    ],
)
def test_optimizer_keys_training_cannot_honour_are_refused(
    tmp_path: Path, optimizer: Any, training: dict[str, Any], message: str
) -> None:
    """Read as TTML reads them, but refused (with the fix) when a run would ignore them."""
    train = copy.deepcopy(BASE)
    train["training_config"].update(training)
    if optimizer is None:
        del train["training_config"]["optimizer"]
    else:
        train["training_config"]["optimizer"] = optimizer
    run = ttml.load_config(write(tmp_path, train))
    with pytest.raises(TrainingConfigError, match=re.escape(message) + r"(.|\n)*\nfix: "):
        OptimizerSettings.from_config(run)


@pytest.mark.parametrize(
    ("momentum", "dampening", "nesterov", "weight_decay"),
    [
        (0.0, 0.0, False, 0.0),
        (0.9, 0.0, False, 0.01),
        (0.9, 0.3, False, 0.05),
        (0.8, 0.0, True, 0.1),
    ],
)
def test_sgd_from_a_ttml_config_matches_torch_sgd(
    tmp_path: Path, momentum: float, dampening: float, nesterov: bool, weight_decay: float
) -> None:
    """TTML's SGD block trains as torch.optim.SGD: 4 steps of the same gradients give the same
    parameters (weight decay on the matrices only: torch given the same two groups)."""
    import jax.numpy as jnp
    import numpy as np
    import optax
    import torch

    from ttjax.ttml.train import make_optimizer

    train = copy.deepcopy(BASE)
    train["training_config"].update(scheduler_type="identity", use_clip_grad_norm=False)
    train["training_config"]["optimizer"] = {
        "type": "SGD",
        "lr": 0.1,
        "momentum": momentum,
        "dampening": dampening,
        "nesterov": nesterov,
        "weight_decay": weight_decay,
    }
    settings = OptimizerSettings.from_config(ttml.load_config(write(tmp_path, train)))
    assert (settings.sgd, settings.momentum, settings.dampening, settings.nesterov) == (
        True,
        momentum,
        dampening,
        nesterov,
    )
    rng = np.random.default_rng(0)
    start = {"w": rng.normal(size=(3, 4)), "b": rng.normal(size=4)}
    grads = [{k: rng.normal(size=v.shape) for k, v in start.items()} for _ in range(4)]

    opt = make_optimizer(settings)
    params = {k: jnp.asarray(v, jnp.float32) for k, v in start.items()}
    state = opt.init(params)
    for g in grads:
        updates, state = opt.update(
            {k: jnp.asarray(v, jnp.float32) for k, v in g.items()}, state, params
        )
        params = optax.apply_updates(params, updates)

    tp = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in start.items()}
    ref = torch.optim.SGD(
        [
            {"params": [tp["w"]], "weight_decay": weight_decay},
            {"params": [tp["b"]], "weight_decay": 0.0},
        ],
        lr=0.1,
        momentum=momentum,
        dampening=dampening,
        nesterov=nesterov,
    )
    for g in grads:
        for k, v in g.items():
            tp[k].grad = torch.tensor(v, dtype=torch.float32)
        ref.step()
    for k in start:
        np.testing.assert_allclose(
            np.asarray(params[k]), tp[k].detach().numpy(), rtol=1e-5, atol=1e-6
        )
        assert not np.allclose(np.asarray(params[k]), start[k])


def test_sgd_nesterov_needs_momentum_and_no_dampening(tmp_path: Path) -> None:
    train = copy.deepcopy(BASE)
    for opt in ({"momentum": 0.0}, {"momentum": 0.9, "dampening": 0.1}):
        train["training_config"]["optimizer"] = {"type": "SGD", "nesterov": True, **opt}
        with pytest.raises(
            TrainingConfigError,
            match=r"optimizer\.nesterov = true with momentum(.|\n)*Nesterov momentum requires(.|\n)*\nfix: ",
        ):
            ttml.load_config(write(tmp_path, train))


def test_every_honoured_optimizer_key_reaches_the_settings(tmp_path: Path) -> None:
    train = copy.deepcopy(BASE)
    train["training_config"]["optimizer"] = {
        "type": "MorehAdamW",
        "lr": 0.002,
        "beta1": 0.8,
        "beta2": 0.95,
        "epsilon": 1e-6,
        "weight_decay": 0.05,
        "amsgrad": True,
        "stochastic_rounding": False,
        "kahan_summation": False,
    }
    s = OptimizerSettings.from_config(ttml.load_config(write(tmp_path, train)))
    assert (s.learning_rate, s.beta1, s.beta2, s.epsilon, s.weight_decay, s.amsgrad) == (
        0.002,
        0.8,
        0.95,
        1e-6,
        0.05,
        True,
    )


# ---------------------------------------------------------------------------------------------
# Untrusted files: any value at any key path is a ttjax error or a valid config
# ---------------------------------------------------------------------------------------------


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a nested mapping (sections and leaves)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


_TRAIN_PATHS = _paths(BASE)
_MODEL_PATHS = _paths(MODEL)


def _yaml_values() -> Any:
    from hypothesis import strategies as st

    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True),
        st.text(max_size=8),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.one_of(st.text(max_size=6), st.integers(0, 3)), inner, max_size=3),
        ),
        max_leaves=6,
    )


def test_any_value_at_any_key_path_is_a_ttjax_error_or_a_config(tmp_path: Path) -> None:
    """The 5 forms of issue 28 (a section that is a list or a string, ...) and everything else
    hypothesis draws: load_config returns a RunConfig or raises a ttjax error with a fix line."""
    from hypothesis import given
    from hypothesis import strategies as st

    from ttjax.errors import TTJaxError

    @given(
        st.sampled_from(
            [("train", p) for p in _TRAIN_PATHS] + [("model", p) for p in _MODEL_PATHS]
        ),
        _yaml_values(),
    )
    def check(where: tuple[str, tuple[Any, ...]], value: Any) -> None:
        which, path = where
        train, model = BASE, MODEL
        if which == "train":
            train = _set(BASE, path, value)
        else:
            model = _set(MODEL, path, value)
        try:
            run = ttml.load_config(write(tmp_path, train, model))
        except TTJaxError as e:
            assert "\nfix: " in str(e), str(e)
        else:
            assert isinstance(run, C.RunConfig)

    check()


@pytest.mark.parametrize(
    ("section", "value", "message"),
    [
        ("training_config", [1, 2], r"training_config is \[1, 2\] \(list\); it must be a mapping"),
        ("training_config", "x", r"training_config is 'x' \(str\); it must be a mapping"),
        ("device_config", ["a"], r"device_config is \['a'\] \(list\)"),
        ("multihost_config", "on", r"multihost_config is 'on' \(str\)"),
        ("scheduler_config", [3], r"scheduler_config is \[3\] \(list\)"),
    ],
)
def test_a_section_that_is_not_a_mapping(
    tmp_path: Path, section: str, value: Any, message: str
) -> None:
    train = {**copy.deepcopy(BASE), section: value}
    with pytest.raises(TrainingConfigError, match=message + r"(.|\n)*\nfix: write `"):
        ttml.load_config(write(tmp_path, train))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("transformer_config", [1]),
        ("optimizer", "AdamW"),
        ("rope_scaling", [8.0]),
    ],
)
def test_a_nested_section_that_is_not_a_mapping(tmp_path: Path, key: str, value: Any) -> None:
    train, model = copy.deepcopy(BASE), MODEL
    if key == "optimizer":
        train["training_config"]["optimizer"] = value
    elif key == "transformer_config":
        del train["training_config"]["model_config"]
        train["training_config"]["transformer_config"] = value
    else:
        model = _set(MODEL, ("transformer_config", "rope_scaling"), value)
    with pytest.raises(TrainingConfigError, match=rf"{key} is (.|\n)*must be a mapping"):
        ttml.load_config(write(tmp_path, train, model))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"training_config:\n  project_name: caf\xe9\n", r":2: config file is not UTF-8 text"),
        (b"", r"is empty\.\nfix: "),
        (b"   \n\n", r"is empty\.\nfix: "),
        (b"# only a comment\n", r"holds only comments"),
    ],
)
def test_config_file_bytes(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "t.yaml"
    path.write_bytes(content)
    with pytest.raises(TrainingConfigError, match=message):
        ttml.load_config(path)
    (tmp_path / "m.yaml").write_bytes(content)  # the same for the model file it names
    path.write_text(yaml.safe_dump({"training_config": {"model_config": "m.yaml"}}))
    with pytest.raises(TrainingConfigError, match=message):
        ttml.load_config(path)


def test_corpus_and_tokenizer_file_bytes(tmp_path: Path) -> None:
    from ttjax.ttml.data import load_corpus, load_dataset

    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"hello\nw\xf6rld\n")
    with pytest.raises(TrainingConfigError, match=r"latin1.txt:2: data_path is not UTF-8"):
        load_corpus(bad)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(TrainingConfigError, match=r"data_path .*empty.txt' is empty"):
        load_corpus(tmp_path / "empty.txt")
    (tmp_path / "tok.json").write_text("{not json")
    with pytest.raises(TrainingConfigError, match=r"tok.json' is not a Hugging Face tokenizer"):
        load_dataset("bpe", vocab_size=None, tokenizer_path=tmp_path / "tok.json")


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("kitten", "sitting", 3),  # the textbook case: 2 substitutions and 1 insertion
        ("ab", "ba", 1),  # one swap of neighbours
        ("enable_dpp", "enable_ddp", 1),  # p -> d
        ("enable_dpp", "enable_pp", 1),  # delete d
        ("enable_dpp", "enable_tp", 2),  # delete one d, the other d -> t
        ("", "abc", 3),
    ],
)
def test_edit_distance_by_hand(a: str, b: str, distance: int) -> None:
    assert C.edit_distance(a, b) == distance == C.edit_distance(b, a)


def test_did_you_mean_names_every_closest_real_key(tmp_path: Path) -> None:
    """``enable_dpp`` is one edit from both enable_ddp and enable_pp: both are named, the
    same-length one first (difflib's ratio picked enable_pp alone)."""
    train = copy.deepcopy(BASE)
    train["device_config"]["enable_dpp"] = True
    with pytest.raises(
        TrainingConfigError,
        match=r"unknown key 'enable_dpp' \(did you mean 'enable_ddp' or 'enable_pp'\?\)",
    ):
        ttml.load_config(write(tmp_path, train))
    train = copy.deepcopy(BASE)
    train["training_config"]["batchsize"] = 8
    with pytest.raises(TrainingConfigError, match=r"'batchsize' \(did you mean 'batch_size'\?\)"):
        ttml.load_config(write(tmp_path, train))


def test_a_corpus_shorter_than_a_window_is_refused(tmp_path: Path) -> None:
    from ttjax.ttml.data import load_dataset

    text = tmp_path / "tiny.txt"
    text.write_text("to be or not to be, " * 3)  # 60 characters: 54 train, 6 validation
    data = load_dataset("char", vocab_size=None, data_path=str(text))
    with pytest.raises(
        TrainingConfigError, match=r"tiny.txt' is too short: its validation split has 6 tokens"
    ):
        data.check_windows(16, f"data_path {str(text)!r}")
    data.check_windows(4, "x")  # a window of 4 + 1 tokens fits in 6
