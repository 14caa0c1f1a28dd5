"""TTML's YAML training configs, read with ``yaml.safe_load`` into validated frozen dataclasses.

A training file holds ``training_config`` and ``device_config`` (and optionally
``scheduler_config``, ``eval_config``, ``multihost_config``); ``training_config.model_config``
names the model file holding ``transformer_config``, as in tt-train's ``configs/``.

>>> cfg = load_config("configs/training_nanogpt_tp_ddp.yaml")
>>> cfg.training.batch_size, cfg.device.mesh_shape, cfg.model.num_blocks
(16, (2, 4), 2)

Every key is checked: an unknown key, a wrong type or a value outside the allowed set raises
``TrainingConfigError`` naming the file, the key and what is allowed. Relative paths inside a
file (``model_config``, ``multihost_config``) resolve against the file's folder, then its parent
folders, then the working directory.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from ttjax._src.core.userfile import read_user_text
from ttjax.errors import ParallelPlanError
from ttjax.plan import ParallelDims
from ttjax.ttml import sp
from ttjax.ttml.context import DistributedConfig, ParallelismContext, plan_dims
from ttjax.ttml.errors import ParallelismConfigError, TrainingConfigError
from ttjax.ttml.schedule import SCHEDULES, stage_sizes

# ---------------------------------------------------------------------------------------------
# Value checks: each takes (value, where) and returns the clean value or raises.
# ---------------------------------------------------------------------------------------------

Check = Callable[[Any, str], Any]


def _bad(where: str, value: Any, allowed: str) -> TrainingConfigError:
    return TrainingConfigError(
        f"{where} = {value!r} is not allowed: it must be {allowed}.\n"
        f"fix: set {where.rsplit(': ', 1)[-1]} to {allowed}, or remove it to use the default."
    )


def _int(minimum: int) -> Check:
    def check(v: Any, where: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise _bad(where, v, f"an integer >= {minimum}")
        return v

    return check


def _float(minimum: float, *, strict: bool = False, maximum: float | None = None) -> Check:
    lo = f"> {minimum}" if strict else f">= {minimum}"
    allowed = f"a number {lo}" + (f" and <= {maximum}" if maximum is not None else "")

    def check(v: Any, where: str) -> float:
        # PyYAML reads 3e-4 (no dot) as a string; accept any text float() reads.
        if isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                raise _bad(where, v, allowed) from None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _bad(where, v, allowed)
        if (v <= minimum if strict else v < minimum) or (maximum is not None and v > maximum):
            raise _bad(where, v, allowed)
        return float(v)

    return check


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise _bad(where, v, "true or false")
    return v


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise _bad(where, v, "a string")
    return v


def _opt_str(v: Any, where: str) -> str | None:
    return None if v is None else _str(v, where)


def _choice(*allowed: str) -> Check:
    def check(v: Any, where: str) -> str:
        if v not in allowed:
            raise _bad(where, v, "one of " + ", ".join(allowed))
        return v

    return check


def _opt(check: Check) -> Check:
    return lambda v, where: None if v is None else check(v, where)


def _int_list(v: Any, where: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v
    ):
        raise _bad(where, v, "a list of integers >= 0")
    return tuple(v)


def _mesh_shape(v: Any, where: str) -> tuple[int, ...]:
    ok = isinstance(v, list) and len(v) in (2, 3)
    if not ok or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in v):
        raise _bad(where, v, "a list of 2 positive integers [rows, cols] (or 3: [ddp, tp, pp])")
    return tuple(v)


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (insert, delete, substitute, swap two neighbours: 1 each)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        prev2, prev = prev, row
    return prev[-1]


def did_you_mean(word: str, keys: Any) -> str:
    """`` (did you mean 'enable_ddp' or 'enable_pp'?)``: every real key at the smallest edit
    distance (at most a third of the word, and 2 or more), same length first; "" if none is near.

    >>> did_you_mean("enable_dpp", ["enable_ddp", "enable_pp", "enable_tp"])
    " (did you mean 'enable_ddp' or 'enable_pp'?)"
    """
    dist = {k: edit_distance(word, str(k)) for k in keys}
    best = min(dist.values(), default=None)
    if best is None or best > max(2, len(word) // 3):
        return ""
    near = sorted((k for k, d in dist.items() if d == best), key=lambda k: (len(k) != len(word), k))
    return f" (did you mean {' or '.join(repr(k) for k in near[:3])}?)"


def _key(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get("key", f.name)


def _section(raw: Any, where: str) -> Mapping[Any, Any]:
    """``raw`` as a mapping (None, an empty section, is ``{}``); a list, string or number raises."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        shown = repr(raw) if len(repr(raw)) <= 60 else repr(raw)[:57] + "..."
        raise TrainingConfigError(
            f"{where} is {shown} ({type(raw).__name__}); it must be a mapping of keys.\n"
            f"fix: write `{where.rsplit(': ', 1)[-1].rsplit('.', 1)[-1]}:` followed by indented "
            "`key: value` lines."
        )
    return raw


def _build(cls: type, raw: Any, where: str, **extra: Any) -> Any:
    """``cls`` from the mapping ``raw``: unknown keys and bad values raise, missing keys default."""
    raw = _section(raw, where)
    fields = {_key(f): f for f in dataclasses.fields(cls) if "check" in f.metadata}
    for k in raw:
        if k not in fields:
            hint = did_you_mean(str(k), fields)
            raise TrainingConfigError(
                f"{where}: unknown key {k!r}{hint}. Allowed keys: {', '.join(sorted(fields))}.\n"
                f"fix: remove or rename {k!r}."
            )
    values = {
        f.name: f.metadata["check"](raw[k], f"{where}.{k}") for k, f in fields.items() if k in raw
    }
    if "written" in {f.name for f in dataclasses.fields(cls)}:
        extra.setdefault("written", frozenset(str(k) for k in raw))
    return cls(**values, **extra)


def _nested(v: Any, where: str) -> Any:
    """Sections inside sections are built by their own builders; the field only lists the key."""
    return v


_NESTED: dict[str, Any] = {"check": _nested}


def _written() -> Any:
    """The keys the file wrote (set by ``_build``): a default never conflicts with a written value."""
    return field(default=frozenset(), repr=False, compare=False)


def _checked_field(default: Any, check: Check, *, key: str | None = None) -> Any:
    meta: dict[str, Any] = {"check": check}
    if key:
        meta["key"] = key
    return field(default=default, metadata=meta)


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------

ADAMW_TYPES = ("AdamW", "AdamWFullPrecision", "MorehAdamW", "AdamWComposite")
SGD_TYPES = ("SGD", "SGDComposite")
OPTIMIZER_TYPES = (*ADAMW_TYPES, *SGD_TYPES, "NoOp")


@dataclass(frozen=True)
class OptimizerConfig:
    """``training_config.optimizer``; ``lr``/``weight_decay`` default to the training config's.

    Read as TTML reads it; training (``OptimizerSettings.from_config``) runs every AdamW type as
    optax AdamW (the variants differ in TT kernels only), AMSGrad's when ``amsgrad``, SGD and
    SGDComposite as TTML's SGD (momentum, dampening, nesterov, coupled weight decay), NoOp as no
    update, and refuses ``stochastic_rounding`` and ``kahan_summation`` rather than ignore them.
    """

    type: str = _checked_field("AdamW", _choice(*OPTIMIZER_TYPES))
    lr: float | None = _checked_field(None, _opt(_float(0.0, strict=True)))
    beta1: float = _checked_field(0.9, _float(0.0, maximum=1.0))
    beta2: float = _checked_field(0.999, _float(0.0, maximum=1.0))
    epsilon: float = _checked_field(1e-8, _float(0.0, strict=True))
    weight_decay: float | None = _checked_field(None, _opt(_float(0.0)))
    amsgrad: bool = _checked_field(False, _bool)
    stochastic_rounding: bool = _checked_field(False, _bool)
    kahan_summation: bool = _checked_field(False, _bool)
    momentum: float = _checked_field(0.0, _float(0.0))
    dampening: float = _checked_field(0.0, _float(0.0))
    nesterov: bool = _checked_field(False, _bool)

    @property
    def is_adamw(self) -> bool:
        return self.type in ADAMW_TYPES

    @property
    def is_sgd(self) -> bool:
        return self.type in SGD_TYPES


_ADAMW_ONLY = ("beta1", "beta2", "epsilon", "amsgrad")
_SGD_ONLY = ("momentum", "dampening", "nesterov")


@dataclass(frozen=True)
class TrainingConfig:
    """``training_config``: hyper-parameters with tt-train's keys and defaults (old C++ ``TrainingConfig``).

    ``optimizer`` is always set: the inline ``optimizer:`` block, or AdamW (MorehAdamW when
    ``use_moreh_adamw``, NoOp when ``use_no_op``, as TTML's ``main.cpp`` picks) built from
    ``learning_rate`` and ``weight_decay``. An inline
    ``transformer_config`` (the old layout) is read into ``RunConfig.model``.
    """

    project_name: str = _checked_field("tt_train_nano_gpt", _str)
    model_type: str = _checked_field("gpt2", _choice("gpt2", "llama"))
    seed: int = _checked_field(5489, _int(0))
    model_save_interval: int = _checked_field(500, _int(0))
    batch_size: int = _checked_field(64, _int(1))
    num_epochs: int = _checked_field(1, _int(1))
    max_steps: int = _checked_field(5000, _int(1))
    learning_rate: float = _checked_field(3e-4, _float(0.0, strict=True))
    weight_decay: float = _checked_field(1e-2, _float(0.0))
    use_no_op: bool = _checked_field(False, _bool)
    use_moreh_adamw: bool = _checked_field(False, _bool)
    use_kahan_summation: bool = _checked_field(False, _bool)
    gradient_accumulation_steps: int = _checked_field(1, _int(1))
    model_config: str | None = _checked_field(None, _opt_str)
    model_path: str = _checked_field("", _str)
    data_path: str = _checked_field("", _str)
    tokenizer_type: str = _checked_field("char", _choice("char", "bpe"))
    tokenizer_path: str = _checked_field("", _str)
    scheduler_type: str = _checked_field(
        "identity", _choice("identity", "warmup_linear", "warmup_cosine")
    )
    use_clip_grad_norm: bool = _checked_field(False, _bool)
    clip_grad_norm_max_norm: float = _checked_field(1.0, _float(0.0, strict=True))
    eval_every: int = _checked_field(200, _int(0))
    checkpoint_dir: str = _checked_field("checkpoints", _str)
    multihost_config: str | None = _checked_field(None, _opt_str)
    # ttjax's own keys (not in tt-train's YAMLs): the run's metrics line, checkpoints kept, and
    # the forward/backward dtype (parameters and optimizer state stay float32).
    log_every: int = _checked_field(10, _int(0))
    keep_checkpoints: int = _checked_field(2, _int(1))
    compute_dtype: str = _checked_field("float32", _choice("float32", "bfloat16"))
    optimizer: OptimizerConfig | None = field(default=None, metadata=_NESTED)
    transformer_config: Any = field(default=None, repr=False, compare=False, metadata=_NESTED)
    written: frozenset[str] = _written()


@dataclass(frozen=True)
class DeviceConfig:
    """``device_config``: the mesh and the parallelism strategies (axes given out DDP, FSDP, CP, TP, PP)."""

    mesh_shape: tuple[int, ...] = _checked_field((1, 1), _mesh_shape)
    device_ids: tuple[int, ...] = _checked_field((), _int_list)
    enable_ddp: bool = _checked_field(False, _bool)
    enable_tp: bool = _checked_field(False, _bool)
    enable_pp: bool = _checked_field(False, _bool)
    enable_fsdp: bool = _checked_field(False, _bool)
    enable_cp: bool = _checked_field(False, _bool)
    # Megatron sequence parallelism over the TP axis (ttjax.ttml.sp); not a mesh axis of its own.
    enable_sp: bool = _checked_field(False, _bool)

    def total_devices(self) -> int:
        return math.prod(self.mesh_shape)

    @cached_property
    def dims(self) -> ParallelDims:
        """The run's parallelism plan: the role of each mesh axis (TTML's axis rule), made and
        checked once (``load_config`` checks it; the CLI hands this same object to
        ``initialize_parallelism_context``)."""
        return plan_dims(self.mesh_shape, self.distributed_config())

    def distributed_config(self) -> DistributedConfig:
        """The ``DistributedConfig`` for ``initialize_parallelism_context``."""
        return DistributedConfig(
            enable_ddp=self.enable_ddp,
            enable_tp=self.enable_tp,
            enable_pp=self.enable_pp,
            enable_cp=self.enable_cp,
            enable_fsdp=self.enable_fsdp,
            enable_sp=self.enable_sp,
        )


@dataclass(frozen=True)
class RopeScalingConfig:
    """``transformer_config.rope_scaling`` (Llama 3); applied only when factor and length are non-zero."""

    scaling_factor: float = _checked_field(0.0, _float(0.0))
    high_freq_factor: float = _checked_field(4.0, _float(0.0))
    low_freq_factor: float = _checked_field(1.0, _float(0.0))
    original_context_length: int = _checked_field(0, _int(0))

    @property
    def enabled(self) -> bool:
        return self.scaling_factor != 0.0 and self.original_context_length != 0


@dataclass(frozen=True)
class TransformerConfig:
    """The model file's ``transformer_config`` (GPT-2 and Llama keys of tt-train).

    ``vocab_size`` is the value the file gives (96 when left out); the training CLI sets the
    model's vocabulary from it and the tokenizer as TTML does (``ttjax.ttml.cli.model_vocab``).
    ``written`` lists the keys the file wrote; a ``model_type`` left out is the training
    config's, with TTML's Llama defaults for a Llama.
    """

    model_type: str = _checked_field("gpt2", _choice("gpt2", "llama"))
    num_heads: int = _checked_field(6, _int(1))
    num_groups: int = _checked_field(3, _int(1))
    embedding_dim: int = _checked_field(384, _int(1))
    intermediate_dim: int | None = _checked_field(None, _opt(_int(1)))
    num_blocks: int = _checked_field(6, _int(1))
    vocab_size: int = _checked_field(96, _int(1))
    max_sequence_length: int = _checked_field(128, _int(1))
    dropout_prob: float = _checked_field(0.2, _float(0.0, maximum=1.0))
    runner_type: str = _checked_field("default", _choice("default", "memory_efficient"))
    weight_tying: str = _checked_field("disabled", _choice("disabled", "enabled"))
    positional_embedding_type: str = _checked_field("trainable", _choice("trainable", "fixed"))
    theta: float = _checked_field(500000.0, _float(0.0, strict=True))
    rope_scaling: RopeScalingConfig = field(default_factory=RopeScalingConfig, metadata=_NESTED)
    use_composite_layernorm: bool = _checked_field(False, _nested, key="experimental")
    model_path: str = _checked_field("", _str)
    written: frozenset[str] = _written()

    @property
    def head_dim(self) -> int:
        return self.embedding_dim // self.num_heads


@dataclass(frozen=True)
class PipelineParallelConfig:
    """``multihost_config.pipeline_parallel_config``: rank r owns ``blocks_per_rank[r]`` blocks in order.

    TTML's keys (``num_blocks``, ``blocks_per_rank``; empty = even split over the PP axis) plus
    ttjax's ``num_microbatches`` (TTML runs 1) and ``schedule`` (``gpipe`` or ``1f1b``).

    >>> PipelineParallelConfig.from_dict({"num_blocks": 6, "blocks_per_rank": {0: 3, 1: 3}})
    PipelineParallelConfig(num_blocks=6, blocks_per_rank=(3, 3), num_microbatches=1, schedule='gpipe')
    """

    num_blocks: int = _checked_field(6, _int(1))
    blocks_per_rank: tuple[int, ...] = _checked_field((), _nested)
    num_microbatches: int = _checked_field(1, _int(1))
    schedule: str = _checked_field("gpipe", _choice(*SCHEDULES))

    @classmethod
    def from_dict(
        cls, raw: Mapping[str, Any], source: str = "pipeline_parallel_config"
    ) -> PipelineParallelConfig:
        """Validate a YAML mapping (unknown keys and bad values name the key and ``source``)."""
        return _pipeline(raw, source)

    def block_range(self, rank: int) -> range:
        """The global block indices rank ``rank`` builds (``llama_block_{i}``)."""
        start = sum(self.blocks_per_rank[:rank])
        return range(start, start + self.blocks_per_rank[rank])

    def stage_sizes(self, num_stages: int) -> tuple[int, ...]:
        """Blocks on each of ``num_stages`` stages: ``blocks_per_rank`` if given, else even."""
        return stage_sizes(self.num_blocks, num_stages, self.blocks_per_rank or None)


@dataclass(frozen=True)
class MultihostConfig:
    """``multihost_config``: off by default; with a pipeline config it is pipeline-parallel training."""

    enabled: bool = _checked_field(False, _bool)
    num_workers: int = _checked_field(0, _int(0))
    socket_type: str = _checked_field("mpi", _choice("mpi", "fabric"))
    pipeline_parallel_config: PipelineParallelConfig | None = field(default=None, metadata=_NESTED)


@dataclass(frozen=True)
class SchedulerConfig:
    """``scheduler_config`` (tt-train's Python ``SchedulerConfig``); ``max_lr`` defaults to the lr."""

    max_lr: float | None = _checked_field(None, _opt(_float(0.0, strict=True)))
    min_lr: float = _checked_field(0.0, _float(0.0))
    warmup_steps: int = _checked_field(100, _int(0))
    hold_steps: int = _checked_field(0, _int(0))


@dataclass(frozen=True)
class EvalConfig:
    """``eval_config``: sampling settings for generation after training."""

    repetition_penalty: float = _checked_field(1.0, _float(0.0, strict=True))
    temperature: float = _checked_field(1.0, _float(0.0))
    top_k: int = _checked_field(0, _int(0))
    top_p: float = _checked_field(1.0, _float(0.0, strict=True, maximum=1.0))


@dataclass(frozen=True)
class RunConfig:
    """Everything one training run reads: ``load_config(path)`` gives ``.training``, ``.device``, ``.model``, ..."""

    path: str
    training: TrainingConfig
    device: DeviceConfig
    model: TransformerConfig
    scheduler: SchedulerConfig
    eval: EvalConfig
    multihost: MultihostConfig
    model_path: str | None = None


# ---------------------------------------------------------------------------------------------
# Section builders with cross-key checks
# ---------------------------------------------------------------------------------------------


def _optimizer(raw: Any, where: str, training: dict[str, Any]) -> OptimizerConfig:
    if raw is None:
        kind = "MorehAdamW" if training.get("use_moreh_adamw") else "AdamW"
        kind = "NoOp" if training.get("use_no_op") else kind
        return OptimizerConfig(
            type=kind,
            lr=training["learning_rate"],
            weight_decay=training["weight_decay"],
            kahan_summation=training.get("use_kahan_summation", False),
        )
    opt = _build(OptimizerConfig, raw, where)
    if training.get("use_no_op") and opt.type != "NoOp":
        raise TrainingConfigError(
            f"{where}.type = {opt.type!r} but training_config.use_no_op is true.\n"
            "fix: keep one: use_no_op: true (TTML's key) or optimizer.type: NoOp."
        )
    wrong = _SGD_ONLY if opt.is_adamw else _ADAMW_ONLY if opt.is_sgd else ()
    given = [k for k in wrong if k in raw]
    if given:
        raise TrainingConfigError(
            f"{where}: {', '.join(given)} do(es) not apply to optimizer type {opt.type!r}.\n"
            f"fix: remove {', '.join(given)}, or pick a type they belong to "
            f"({'SGD' if opt.is_adamw else 'AdamW'})."
        )
    if opt.nesterov and (opt.momentum <= 0 or opt.dampening != 0):
        raise TrainingConfigError(
            f"{where}.nesterov = true with momentum = {opt.momentum} and dampening = "
            f"{opt.dampening}: Nesterov momentum requires a momentum and zero dampening "
            "(torch.optim.SGD's rule; TTML's SGD would run it without them).\n"
            "fix: set momentum above 0 and dampening: 0, or nesterov: false."
        )
    return dataclasses.replace(
        opt,
        lr=training["learning_rate"] if opt.lr is None else opt.lr,
        weight_decay=training["weight_decay"] if opt.weight_decay is None else opt.weight_decay,
    )


def _training(raw: Any, where: str) -> TrainingConfig:
    raw = _section(raw, where)
    if "mlp_config" in raw:
        raise TrainingConfigError(
            f"{where}.mlp_config: this is the config of TTML's MNIST MLP example, which ttjax's "
            "training command line does not train (it trains TTML's GPT-2 and Llama).\n"
            "fix: use a language-model config (training_config.transformer_config or model_config)."
        )
    base = _build(TrainingConfig, raw, where)
    values = dataclasses.asdict(base)
    opt = _optimizer(raw.get("optimizer"), f"{where}.optimizer", values)
    return dataclasses.replace(base, optimizer=opt)


def _device(raw: Any, where: str, mesh_shape: Sequence[int] | None = None) -> DeviceConfig:
    dev = _build(DeviceConfig, raw, where)
    if mesh_shape is not None:
        shape = _mesh_shape(list(mesh_shape), f"{where}.mesh_shape (given instead of the file's)")
        where = f"{where} (mesh_shape {list(shape)} given instead of the file's)"
        dev = dataclasses.replace(dev, mesh_shape=shape)
    n = dev.total_devices()
    if dev.device_ids and (len(dev.device_ids) != n or len(set(dev.device_ids)) != n):
        raise TrainingConfigError(
            f"{where}.device_ids = {list(dev.device_ids)} must list {n} distinct ids for "
            f"mesh_shape {list(dev.mesh_shape)}.\nfix: give one id per device, or [] for the first {n}."
        )
    if dev.enable_sp and not dev.enable_tp:
        raise ParallelismConfigError(
            f"{where}.enable_sp = true but enable_tp is false: sequence parallelism splits the "
            "sequence over the TP axis, between tensor-parallel layers.\nfix: set enable_tp: "
            "true (with a TP axis in mesh_shape), or enable_sp: false."
        )
    try:
        dev.dims  # noqa: B018  (the plan, checked here once and kept for the run)
    except ParallelismConfigError as e:
        first, _, rest = str(e).partition("\n")
        raise ParallelismConfigError(f"{first} ({where})\n{rest}") from None
    return dev


# TTML's Llama reader (models/llama.cpp read_config) defaults differ from GPT-2's for these.
_LLAMA_DEFAULTS = {"max_sequence_length": 256, "dropout_prob": 0.0}


def _transformer(raw: Any, where: str, model_type: str | None = None) -> TransformerConfig:
    """The model section; ``model_type`` (training_config's, when written there) is the type
    when the section does not write its own, and picks TTML's per-type defaults."""
    raw = _section(raw, where)
    written = frozenset(str(k) for k in raw)
    if model_type is not None and "model_type" not in raw:
        raw = {"model_type": model_type, **raw}
    if raw.get("model_type") == "llama":
        raw = {**_LLAMA_DEFAULTS, **raw}
    rope = _build(RopeScalingConfig, raw.get("rope_scaling"), f"{where}.rope_scaling")
    exp = _build(_Experimental, raw.get("experimental"), f"{where}.experimental")
    model = _build(
        TransformerConfig,
        {k: v for k, v in raw.items() if k not in ("rope_scaling", "experimental")},
        where,
        rope_scaling=rope,
        use_composite_layernorm=exp.use_composite_layernorm,
        written=written,
    )
    if model.embedding_dim % model.num_heads:
        raise TrainingConfigError(
            f"{where}: embedding_dim = {model.embedding_dim} is not divisible by num_heads = "
            f"{model.num_heads}.\nfix: pick embedding_dim a multiple of num_heads."
        )
    if model.model_type == "llama" and model.num_heads % model.num_groups:
        raise TrainingConfigError(
            f"{where}: num_heads = {model.num_heads} is not divisible by num_groups = "
            f"{model.num_groups} (key/value heads).\nfix: pick num_groups dividing num_heads."
        )
    return model


@dataclass(frozen=True)
class _Experimental:
    use_composite_layernorm: bool = _checked_field(False, _bool)


def _blocks_per_rank(v: Any, where: str) -> tuple[int, ...]:
    if isinstance(v, list):
        v = dict(enumerate(v))
    if not isinstance(v, Mapping) or not v:
        raise _bad(where, v, "a mapping {rank: blocks} such as {0: 16, 1: 16}")
    if set(v) != set(range(len(v))):
        raise _bad(where, v, f"a mapping with ranks 0..{len(v) - 1}, each once")
    check = _int(1)
    return tuple(check(v[r], f"{where}[{r}]") for r in range(len(v)))


def _pipeline(raw: Any, where: str) -> PipelineParallelConfig:
    raw = _section(raw, where)
    bpr = raw.get("blocks_per_rank")
    blocks = () if bpr is None else _blocks_per_rank(bpr, f"{where}.blocks_per_rank")
    pp = _build(
        PipelineParallelConfig,
        {k: v for k, v in raw.items() if k != "blocks_per_rank"},
        where,
        blocks_per_rank=blocks,
    )
    if blocks and sum(blocks) != pp.num_blocks:
        raise TrainingConfigError(
            f"Number of blocks must match number of blocks per rank. ({where}: num_blocks = "
            f"{pp.num_blocks}, blocks_per_rank {list(blocks)} sum to {sum(blocks)})\n"
            "fix: make the blocks per rank add up to num_blocks."
        )
    return pp


def _multihost(raw: Any, where: str) -> MultihostConfig:
    raw = _section(raw, where)
    pp_raw = raw.get("pipeline_parallel_config")
    pp = None if pp_raw is None else _pipeline(pp_raw, f"{where}.pipeline_parallel_config")
    mh = _build(
        MultihostConfig,
        {k: v for k, v in raw.items() if k != "pipeline_parallel_config"},
        where,
        pipeline_parallel_config=pp,
    )
    if (
        pp is not None
        and mh.num_workers
        and pp.blocks_per_rank
        and len(pp.blocks_per_rank) != mh.num_workers
    ):
        raise TrainingConfigError(
            f"{where}: num_workers = {mh.num_workers} but pipeline_parallel_config.blocks_per_rank "
            f"names {len(pp.blocks_per_rank)} ranks.\nfix: give one entry per worker."
        )
    return mh


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


# yaml.safe_load's loader, in libyaml's C build when PyYAML has it (same safe tag set, faster).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_text(path: Path, what: str, example: str) -> str:
    """The UTF-8 text of the user's file ``path`` (:func:`ttjax._src.core.userfile.read_user_text`)."""
    return read_user_text(path, what, example, TrainingConfigError)


def _read_yaml(path: Path) -> dict[str, Any]:
    text = read_text(path, "config file", "a YAML file, e.g. configs/training_nanogpt_tp_ddp.yaml")
    try:
        data = yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        pos = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise TrainingConfigError(
            f"{path}{pos}: not valid YAML: {e.problem}.\nfix: correct the YAML syntax there "
            "(one document per file)."
        ) from None
    except yaml.YAMLError as e:
        raise TrainingConfigError(f"{path}: not valid YAML: {e}.\nfix: correct the YAML.") from None
    if data is None:
        raise TrainingConfigError(
            f"config file {str(path)!r} holds only comments.\nfix: write its sections "
            "(`training_config:` ...) into it."
        )
    if not isinstance(data, dict):
        raise TrainingConfigError(
            f"{path}: the top level is a {type(data).__name__}; it must be a mapping of sections.\n"
            "fix: start the file with `training_config:`."
        )
    return data


def _resolve(ref: str, base: Path, where: str) -> Path:
    p = Path(os.path.expanduser(ref))
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = [d / p for d in (base.parent, *base.parent.parents)] + [Path.cwd() / p]
    for c in candidates:
        if c.is_file():
            return c
    raise TrainingConfigError(
        f"{where} = {ref!r}: no such file (looked beside {base} and in its parent folders, "
        f"and in {Path.cwd()}).\nfix: give a path relative to the config file or an absolute path."
    )


def _check_top(data: Mapping[str, Any], allowed: tuple[str, ...], path: Path) -> None:
    for k in data:
        if k not in allowed:
            hint = did_you_mean(str(k), allowed)
            raise TrainingConfigError(
                f"{path}: unknown section {k!r}{hint}. Allowed sections: {', '.join(allowed)}.\n"
                f"fix: remove or rename {k!r}."
            )


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """``--set`` text ``section.key=value`` -> (key path, value read as YAML: ``8``, ``true``,
    ``[1, 2]``, ``3e-4``); anything else raises naming the text.

    >>> parse_override("training_config.batch_size=8")
    (('training_config', 'batch_size'), 8)
    """
    key, eq, value = text.partition("=")
    keys = tuple(k.strip() for k in key.split("."))
    if not eq or len(keys) < 2 or not all(keys):
        raise TrainingConfigError(
            f"--set {text!r} is not of the form section.key=value.\n"
            "fix: --set training_config.batch_size=8, for example."
        )
    try:
        parsed = yaml.load(value, Loader=_SAFE_LOADER)
    except yaml.YAMLError as e:
        raise TrainingConfigError(
            f"--set {text!r}: the value {value!r} is not valid YAML ({e}).\n"
            "fix: quote it for the shell, e.g. --set 'device_config.mesh_shape=[1, 2]'."
        ) from None
    return keys, parsed


def _apply_overrides(data: dict[str, Any], sets: Sequence[str], path: Path) -> dict[str, Any]:
    """``data`` with each ``--set`` written into it, before any check: a value is validated
    exactly as if the file held it (an error names the key path)."""
    for text in sets:
        keys, value = parse_override(text)
        node = data
        for depth, k in enumerate(keys[:-1]):
            child = node.get(k)
            if child is None:
                child = node[k] = {}
            if not isinstance(child, dict):
                raise TrainingConfigError(
                    f"--set {text!r}: {path}: {'.'.join(keys[: depth + 1])} is "
                    f"{child!r}, not a section of keys.\nfix: set {'.'.join(keys[: depth + 1])} "
                    "itself, or fix the file."
                )
            node = child
        node[keys[-1]] = value
    return data


def load_model_config(
    path: str | os.PathLike[str],
    overrides: Sequence[str] = (),
    *,
    model_type: str | None = None,
) -> TransformerConfig:
    """The ``transformer_config`` of a model YAML file (``overrides``: ``--set
    transformer_config.key=value`` texts, applied before the checks; ``model_type``: the type
    when the file does not write one, e.g. the training file's ``training_config.model_type``)."""
    p = Path(path)
    data = _apply_overrides(_read_yaml(p), overrides, p)
    _check_top(data, ("transformer_config",), p)
    return _transformer(data.get("transformer_config"), f"{p}: transformer_config", model_type)


_SECTIONS = (
    "training_config",
    "device_config",
    "transformer_config",
    "scheduler_config",
    "eval_config",
    "multihost_config",
)


def load_config(
    path: str | os.PathLike[str],
    overrides: Sequence[str] = (),
    *,
    mesh_shape: Sequence[int] | None = None,
) -> RunConfig:
    """Read a training YAML file (and the model and multihost files it names) into a ``RunConfig``.

    ``overrides`` are ``--set section.key=value`` texts, written into the file's mapping before
    any check (``transformer_config.*`` into the model file when ``model_config`` names one).
    ``mesh_shape`` replaces ``device_config.mesh_shape`` (the CLI's ``--mesh-shape``) before the
    parallelism plan is made and checked (``run.device.dims``).
    """
    p = Path(path)
    model_sets = [s for s in overrides if s.startswith("transformer_config.")]
    data = _apply_overrides(_read_yaml(p), [s for s in overrides if s not in model_sets], p)
    raw = data.get("training_config")
    raw = raw if isinstance(raw, dict) else {}
    if raw.get("model_config") is None:  # no model file: the model is set in this file
        prefix = "training_config." if raw.get("transformer_config") is not None else ""
        data = _apply_overrides(data, [prefix + s for s in model_sets], p)
        model_sets = []
    _check_top(data, _SECTIONS, p)
    training = _training(data.get("training_config"), f"{p}: training_config")
    device = _device(data.get("device_config"), f"{p}: device_config", mesh_shape)

    inline = [
        s
        for s, v in (
            ("transformer_config", data.get("transformer_config")),
            ("training_config.transformer_config", training.transformer_config),
        )
        if v is not None
    ]
    if len(inline) + (training.model_config is not None) > 1:
        given = inline + ["training_config.model_config"] * (training.model_config is not None)
        raise TrainingConfigError(
            f"{p}: the model is given more than once ({', '.join(given)}).\n"
            "fix: keep one: `model_config: <model yaml>` inside training_config (tt-train's layout)."
        )
    # TTML reads training_config.model_type as the model's type; a model section that does not
    # write its own takes it (a default never conflicts with a written value).
    given_type = training.model_type if "model_type" in training.written else None
    model_path: str | None = None
    if training.model_config is not None:
        mp = _resolve(training.model_config, p, f"{p}: training_config.model_config")
        model = load_model_config(mp, model_sets, model_type=given_type)
        model_path = str(mp)
    elif inline:
        top = data.get("transformer_config")
        raw = top if top is not None else training.transformer_config
        model = _transformer(raw, f"{p}: {inline[0]}", given_type)
    else:
        model = _transformer(None, f"{p}: transformer_config", given_type)
    if given_type is not None and model.model_type != given_type:
        raise TrainingConfigError(
            f"{p}: training_config.model_type = {given_type!r} but the model's "
            f"transformer_config.model_type = {model.model_type!r}.\nfix: make them agree "
            "(or drop one of the two)."
        )
    training = dataclasses.replace(training, model_type=model.model_type)

    if training.multihost_config is not None and data.get("multihost_config") is not None:
        raise TrainingConfigError(
            f"{p}: multihost_config is given both as a section and as training_config."
            "multihost_config.\nfix: keep one."
        )
    if training.multihost_config is not None:
        mp = _resolve(training.multihost_config, p, f"{p}: training_config.multihost_config")
        mdata = _read_yaml(mp)
        _check_top(mdata, ("multihost_config",), mp)
        multihost = _multihost(mdata.get("multihost_config"), f"{mp}: multihost_config")
    else:
        multihost = _multihost(data.get("multihost_config"), f"{p}: multihost_config")
    if multihost.enabled and training.use_clip_grad_norm:
        raise TrainingConfigError(
            f"{p}: Gradient clipping is not supported with multihost training "
            "(training_config.use_clip_grad_norm is true and multihost_config.enabled is true).\n"
            "fix: set use_clip_grad_norm: false, or disable multihost_config."
        )
    if device.enable_sp:  # each sequence splits over TP between the TP layers
        where = f"{p}: transformer_config.max_sequence_length: "
        sp.check_seq_len(model.max_sequence_length, device.dims, where)
    return RunConfig(
        path=str(p),
        training=dataclasses.replace(training, transformer_config=None),
        device=device,
        model=model,
        scheduler=_build(SchedulerConfig, data.get("scheduler_config"), f"{p}: scheduler_config"),
        eval=_build(EvalConfig, data.get("eval_config"), f"{p}: eval_config"),
        multihost=multihost,
        model_path=model_path,
    )


def validate_batch(
    config: RunConfig | TrainingConfig | int, ctx: ParallelismContext | None = None
) -> int:
    """The batch each data-parallel group gets; raises (TTML's words) when ``batch_size`` does not
    split over the plan's batch roles (``ParallelDims.check_batch``, the one check).

    >>> validate_batch(8, ctx_with_ddp_size_2)
    4
    """
    where = ""
    if isinstance(config, RunConfig):
        where, batch = f" ({config.path}: training_config.batch_size)", config.training.batch_size
    elif isinstance(config, TrainingConfig):
        where, batch = " (training_config.batch_size)", config.batch_size
    else:
        batch = config
    dims = ParallelDims.from_sizes() if ctx is None else ctx.dims
    try:
        return dims.check_batch(batch)
    except ParallelPlanError:
        dp = dims.data_parallel_size
        raise TrainingConfigError(
            f"batch_size ({batch!r}) must be divisible by dp_size ({dp}){where}.\n"
            f"fix: use a batch_size that is a positive multiple of {dp}, the data-parallel size "
            f"of mesh {list(dims.shape) or [1, 1]}."
        ) from None


__all__ = [
    "ADAMW_TYPES",
    "OPTIMIZER_TYPES",
    "SGD_TYPES",
    "DeviceConfig",
    "EvalConfig",
    "MultihostConfig",
    "OptimizerConfig",
    "PipelineParallelConfig",
    "RopeScalingConfig",
    "RunConfig",
    "SchedulerConfig",
    "TrainingConfig",
    "TransformerConfig",
    "did_you_mean",
    "load_config",
    "load_model_config",
    "parse_override",
    "validate_batch",
]
