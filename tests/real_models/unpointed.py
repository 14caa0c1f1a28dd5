"""tt-metal model tests nobody pointed ttjax at, run on its virtual meshes: tt_dit's Mochi and Wan 2.2
video transformers and SD3.5-Large's transformer (attention, whole transformer block); whisper's
encoder and decoder (``models/demos/whisper``, 1x2), sentence_bert's BERT-base modules and ViT
(one device); DistilBERT question answering (``models/demos/distilbert``, one device, and its
wormhole twin on 1x2), SqueezeBERT's grouped-conv modules up to the QA model
(``models/demos/squeezebert``, one device), SigLIP's attention (``models/demos/siglip``,
1x2), tiny BERT's modules and QA model (``models/demos/bert_tiny``, one device, and its wormhole
twin on 1x2) and SegFormer-B0's modules up to the segmentation and classification models
(``models/demos/segformer``, one device): each one of tt-metal's own test functions called
unchanged with small shapes.

    TT_METAL_HOME=/tmp/ttm-full .venv-ttmetal/bin/python -m tests.real_models.unpointed [--case NAME]

Each case imports the test module from ``$TT_METAL_HOME/models/experimental/tt_dit/tests`` and
calls its test function with a mesh opened as its ``mesh_device`` fixture would open it and one
of the parametrizations the test lists, but a shorter sequence (the released ones, 4,000 to
44,520 tokens at dim 2432 to 5120, take hours on two CPU cores). The tests load the released
checkpoints (``genmo/mochi-1-preview``, ``Wan-AI/Wan2.2-T2V-A14B-Diffusers``,
``stabilityai/stable-diffusion-3.5-large``); nothing is downloaded here: ``from_pretrained``
builds the model at the released configuration (diffusers' defaults for Mochi, 24 heads of 128,
and Wan 2.2 A14B, 40 heads of 128, FFN 13824; SD3.5-Large's config.json, 38 heads of 64, for
tt-metal's SD3.5 reference class) with the layers the test reads (Mochi 2: its first and its
last, context-pre-only block; the others 1) and random weights. The test's own
``assert_quality`` judges the result; the PCC it measured is printed next to its bar.

The whisper and sentence_bert tests read their configurations from the hub
(``distil-whisper/distil-large-v3``, ``emrecan/bert-base-turkish-cased-mean-nli-stsb-tr``): those
config.json values are written here and the models built with random weights; their own
``assert_with_pcc`` / ``comp_pcc`` judge. They need ``TT_METAL_HOME`` to hold tt-metal's
``tests/ttnn/utils_for_testing.py`` (a full checkout). So do DistilBERT's and SqueezeBERT's,
whose tests live in ``tests/ttnn/integration_tests/`` (checkpoints
``distilbert-base-uncased-distilled-squad``, ``squeezebert/squeezebert-uncased``), and SigLIP's
(``$HF_MODEL``: ``google/gemma-3-27b-it``'s vision config, as gemma3's README names it), tiny
BERT's (``mrm8488/bert-tiny-finetuned-squadv2``) and SegFormer's (its tests' ``load_torch_model``
reads ``nvidia/segformer-b0-finetuned-ade-512-512`` and ``nvidia/mit-b0``; the configurations
are the checkout's ``models/demos/segformer/configs``).
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib
import inspect
import sys
from collections.abc import Callable
from typing import Any

from tests.real_models import harness

TESTS = "models.experimental.tt_dit.tests.models."


# SD3.5-Large's transformer (its released config.json); tt-metal's reference class defaults to
# SD3-Medium's sizes. Mochi's and Wan 2.2's released configurations are diffusers' defaults.
SD35_LARGE = dict(num_attention_heads=38, attention_head_dim=64, caption_projection_dim=2432,
                  joint_attention_dim=4096, pooled_projection_dim=2048, pos_embed_max_size=192,
                  qk_norm="rms_norm")  # fmt: skip


def _random_pretrained(cls: Any, layers: int, config: dict[str, Any] | None = None) -> None:
    """``cls.from_pretrained(...)`` builds ``cls`` at its released configuration with ``layers``
    blocks, random weights, in the dtype the test asks for."""

    def from_pretrained(*_: Any, torch_dtype: Any = None, **__: Any) -> Any:
        import torch

        torch.manual_seed(0)
        model = cls(num_layers=layers, **(config or {}))
        return model.to(torch_dtype) if torch_dtype is not None else model

    cls.from_pretrained = staticmethod(from_pretrained)


def _measured(module: Any) -> list[str]:
    """Wrap the test module's ``assert_quality`` to record each PCC it measures (and its bar)."""
    found: list[str] = []
    original = module.assert_quality

    def assert_quality(a: Any, b: Any, **bars: Any) -> None:
        found.append(f"{harness.pcc(a, b):.5f} (bar {bars.get('pcc')})")
        original(a, b, **bars)

    module.assert_quality = assert_quality
    return found


def _summary(found: list[str]) -> str:
    """The lowest PCC of each bar (the tests compare every device's copy of an output)."""
    by_bar: dict[str, list[str]] = {}
    for item in found:
        value, bar = item.split(" ", 1)
        by_bar.setdefault(bar, []).append(value)
    return ", ".join(f"{min(v)} {bar}, worst of {len(v)}" for bar, v in by_bar.items())


def _open(shape: tuple[int, int]) -> Any:
    import ttnn

    ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D)
    return ttnn.open_mesh_device(ttnn.MeshShape(*shape))


def _case(
    module: str, test: str, cls: str, mesh: tuple[int, int], **params: Any
) -> Callable[[], str]:
    def run() -> str:
        if cls == "SD3Transformer2DModel":  # tt-metal's own reference of SD3.5
            from models.experimental.stable_diffusion_35_large import reference

            _random_pretrained(reference.SD3Transformer2DModel, 1, SD35_LARGE)
        else:
            import diffusers

            _random_pretrained(getattr(diffusers, cls), 2 if "mochi" in module else 1)
        mod = importlib.import_module(TESTS + module)
        found = _measured(mod)
        device = _open(mesh)
        try:
            getattr(mod, test)(mesh_device=device, **params)
        except Exception as e:  # the test's own verdict: report it with the PCCs measured
            return f"fails: {harness.first_failing_call(e)}; PCC {_summary(found) or '-'}"
        finally:
            import ttnn

            ttnn.close_mesh_device(device)
        return "passes: PCC " + _summary(found)

    return run


def _mochi(test: str, pre_only: bool, **extra: Any) -> Callable[[], str]:
    return _case(
        "mochi." + ("test_attention_mochi" if "attention" in test else "test_transformer_mochi"),
        test, "MochiTransformer3DModel", (2, 4), sp_axis=0, tp_axis=1, num_links=1, B=1,
        spatial_seq_len=1000, prompt_seq_len=118, context_pre_only=pre_only, is_fsdp=True, **extra,
    )  # fmt: skip


def _wan(test: str, prompt: int | None, **extra: Any) -> Callable[[], str]:
    import ttnn

    return _case(
        "wan2_2." + ("test_attention_wan" if "attention" in test else "test_transformer_wan"),
        test, "WanTransformer3DModel", (2, 4), sp_axis=0, tp_axis=1, num_links=1, T=3, H=16,
        W=32, prompt_seq_len=prompt, is_fsdp=True, topology=ttnn.Topology.Linear, **extra,
    )  # fmt: skip


def _sd35(test: str) -> Callable[[], str]:
    shape = {"submesh_shape" if "block" in test else "mesh_shape": (2, 4)}
    return _case(
        "test_attention_sd35" if "attention" in test else "test_transformer_sd35",
        test, "SD3Transformer2DModel", (2, 4), sp_axis=1, tp_axis=0, num_links=1, B=1,
        spatial_seq_len=1024, prompt_seq_len=333,
        model_location_generator=lambda name, **_: name, **shape,
    )  # fmt: skip


# distil-whisper/distil-large-v3's config.json (the whisper tests' MODEL_NAME): the encoder of
# Whisper large-v3 (32 layers of 1280, 20 heads, FFN 5120, 128 mel bins) and 2 decoder layers.
DISTIL_LARGE_V3: dict[str, Any] = dict(d_model=1280, encoder_layers=32, decoder_layers=2, encoder_attention_heads=20,
                       decoder_attention_heads=20, encoder_ffn_dim=5120, decoder_ffn_dim=5120,
                       num_mel_bins=128, vocab_size=51866, max_source_positions=1500,
                       max_target_positions=448, pad_token_id=50256, bos_token_id=50257,
                       eos_token_id=50257, decoder_start_token_id=50258,
                       begin_suppress_tokens=[220, 50257])  # fmt: skip


def _stand_in(name: str) -> None:
    """An importable ``name`` (when it is not installed) whose every attribute raises when called:
    tt-metal's ``models/demos/utils/common_demo_utils.py`` imports ``cv2`` and ``datasets`` at its
    top for the image demos' helpers, which the whisper module tests never call (and wormhole
    distilbert ``ttnn.torch_tracer``, which ttjax leaves out on purpose)."""
    from tests.real_models.tt_metal_pytest import empty_module

    module = empty_module(name)
    if module is None:
        return

    def absent(*_: Any, **__: Any) -> Any:
        raise ModuleNotFoundError(f"{name} is not installed (the harness's stand-in)")

    def attribute(attr: str) -> Any:
        if attr.startswith("__"):  # no __file__ etc.: inspect walks every module in sys.modules
            raise AttributeError(attr)
        return absent

    module.__getattr__ = attribute  # type: ignore[method-assign]


def _checkout_tests() -> None:
    """tt-metal's ``tests/`` (``tests.ttnn.utils_for_testing``) importable beside this project's
    own namespace package ``tests``, and the image libraries the whisper tests' imports name."""
    import os

    from tests.real_models import tt_metal_pytest

    home = os.environ["TT_METAL_HOME"]
    if home not in sys.path:
        sys.path.append(home)
    tt_metal_pytest._stand_in_torchvision()
    _stand_in("cv2")
    _stand_in("datasets")


def _verdict(mod: Any, call: Callable[[], None], check: str = "assert_with_pcc") -> str:
    """Run ``call`` (one of ``mod``'s test functions), recording each PCC its ``check`` measures
    (tt-metal's ``assert_with_pcc`` of ``tests/ttnn/utils_for_testing.py``, or a model's own
    ``comp_pcc``) at the check's own bar; the test's own verdict, with them."""
    found: list[str] = []
    original = getattr(mod, check)
    bar = inspect.signature(original).parameters["pcc"].default

    def recorded(expected: Any, actual: Any, pcc: float = bar) -> Any:
        if tuple(expected.shape) == tuple(actual.shape):  # else the test's own check says so
            found.append(f"{harness.pcc(expected, actual):.5f} (bar {pcc})")
        return original(expected, actual, pcc)

    setattr(mod, check, recorded)
    try:
        call()
    except Exception as e:  # the test's own verdict: report it with the PCCs measured
        return f"fails: {harness.first_failing_call(e)}; PCC {_summary(found) or '-'}"
    finally:
        setattr(mod, check, original)
    return "passes: PCC " + _summary(found)


def _whisper(
    test: str, mesh: tuple[int, int], encoder_layers: int = 32, **params: Any
) -> Callable[[], str]:
    """One of ``models/demos/whisper/tests/test_whisper_modules.py``'s test functions, unchanged,
    on ``mesh`` (batch 1 a device, split over the mesh as its ``get_mesh_mappers`` splits it),
    with distil-large-v3's configuration (``encoder_layers`` of its 32 for the whole encoder)."""

    def run() -> str:
        import transformers

        _checkout_tests()
        # "eager": what transformers 4.53 (tt-metal's pin) reports for a config that names no
        # attention implementation; 4.57 reports None, which Whisper's modules cannot look up
        config = dict(DISTIL_LARGE_V3, encoder_layers=encoder_layers, attn_implementation="eager")
        transformers.WhisperConfig.from_pretrained = staticmethod(  # type: ignore[method-assign]
            lambda *_, **__: transformers.WhisperConfig(**config)
        )
        mod: Any = importlib.import_module("models.demos.whisper.tests.test_whisper_modules")
        import ttnn

        from models.demos.whisper.tt import ttnn_optimized_functional_whisper as ttnn_model

        device = ttnn.open_mesh_device(ttnn.MeshShape(*mesh))
        try:
            return _verdict(mod, lambda: getattr(mod, test)(
                mesh_device=device, ttnn_model=ttnn_model, model_name=mod.MODEL_NAME,
                batch_size_per_device=1, **params))  # fmt: skip
        finally:
            ttnn.close_mesh_device(device)

    return run


# emrecan/bert-base-turkish-cased-mean-nli-stsb-tr's config.json (sentence_bert's tests): BERT-base.
TURKISH_BERT_BASE: dict[str, Any] = dict(vocab_size=32000, hidden_size=768, num_hidden_layers=12,
                                         num_attention_heads=12, intermediate_size=3072,
                                         max_position_embeddings=512, type_vocab_size=2,
                                         attn_implementation="eager")  # fmt: skip


def _sentence_bert(module: str, test: str, layers: int = 12) -> Callable[[], str]:
    """One of ``models/demos/sentence_bert/tests/pcc``'s test functions, unchanged, on one device
    (its ``device`` fixture), the checkpoint's BERT-base configuration (``layers`` of its 12 for
    the whole model) with random weights: its ``load_torch_model`` reads them from
    ``AutoModel.from_pretrained``, which builds the model here."""

    def run() -> str:
        import torch
        import transformers

        _checkout_tests()
        config = transformers.BertConfig(**dict(TURKISH_BERT_BASE, num_hidden_layers=layers))
        transformers.BertConfig.from_pretrained = staticmethod(  # type: ignore[method-assign]
            lambda *_, **__: config
        )

        def random_bert(*_: Any, **__: Any) -> Any:
            torch.manual_seed(0)
            return transformers.BertModel(config)

        transformers.AutoModel.from_pretrained = staticmethod(random_bert)  # type: ignore[method-assign]
        mod: Any = importlib.import_module(f"models.demos.sentence_bert.tests.pcc.{module}")
        inputs = next(m.args[1][0] for m in getattr(mod, test).pytestmark if m.args[0] == "inputs")
        import ttnn

        device = ttnn.open_device(device_id=0)
        try:
            return _verdict(mod, lambda: getattr(mod, test)(
                device=device, inputs=inputs, model_location_generator=None))  # fmt: skip
        finally:
            ttnn.close_device(device)

    return run


# google/vit-base-patch16-224's config.json (the vit tests' model_name): ViT-Base/16 at 224.
VIT_BASE: dict[str, Any] = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                intermediate_size=3072, image_size=224, patch_size=16,
                                num_channels=3, qkv_bias=True, attn_implementation="eager")  # fmt: skip


def _vit(test: str, **extra: Any) -> Callable[[], str]:
    """One of ``models/demos/vit/tests/pcc/test_ttnn_optimized_sharded_vit_wh.py``'s module tests
    (they build the torch module from the config alone: random weights), unchanged, on one
    device at its parametrization (batch 8, 224 tokens: 197 padded); the encoder test's
    ``load_torch_model`` gets a random ``ViTForImageClassification`` of that configuration."""

    def run() -> str:
        import torch
        import transformers

        _checkout_tests()
        transformers.ViTConfig.from_pretrained = staticmethod(  # type: ignore[method-assign]
            lambda *_, **__: transformers.ViTConfig(**VIT_BASE)
        )

        def random_vit(*_: Any, config: Any = None, **__: Any) -> Any:  # vit's load_torch_model
            torch.manual_seed(0)
            return transformers.ViTForImageClassification(config)

        transformers.ViTForImageClassification.from_pretrained = staticmethod(random_vit)  # type: ignore[method-assign]
        mod: Any = importlib.import_module(
            "models.demos.vit.tests.pcc.test_ttnn_optimized_sharded_vit_wh"
        )
        import ttnn

        device = ttnn.open_device(device_id=0)
        try:
            return _verdict(mod, lambda: getattr(mod, test)(
                device=device, model_name="google/vit-base-patch16-224", batch_size=8,
                sequence_size=224, **extra))  # fmt: skip
        finally:
            ttnn.close_device(device)

    return run


# distilbert-base-uncased-distilled-squad's config.json (distilbert's tests): 6 layers of 768,
# 12 heads, FFN 3072, learned positions. DistilBertConfig's defaults are these values.
DISTILBERT_SQUAD: dict[str, Any] = dict(vocab_size=30522, dim=768, n_layers=6, n_heads=12,
                                        hidden_dim=3072, max_position_embeddings=512,
                                        activation="gelu", sinusoidal_pos_embds=False,
                                        pad_token_id=0, attn_implementation="eager")  # fmt: skip
INTEGRATION = "tests.ttnn.integration_tests."


def _seeded(build: Callable[[], Any]) -> Any:
    """``build()`` under seed 0 without moving the caller's torch generator (a checkpoint load
    draws no numbers the test's later ``torch.randint`` would see)."""
    import torch

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return build().eval()


def _reset_seeds() -> None:
    """What tt-metal's ``reset_seeds`` fixture (its conftest.py) does before the test."""
    import random

    import numpy
    import torch

    torch.manual_seed(213919)
    numpy.random.seed(213919)
    random.seed(213919)


def _run_on(
    mod: Any,
    call: Callable[..., None],
    params: dict[str, Any],
    mesh: tuple[int, int] | None,
    **device_params: Any,
) -> str:
    """``call(**params)`` (one of ``mod``'s test functions) on one device opened as its
    ``device_params`` ask (its ``device`` fixture) or, with ``mesh``, on that mesh as its
    ``mesh_device``, the device count it reads set to the mesh's (a ``_wh`` test doubles its batch
    where it finds an N300's 2); seeded as tt-metal's conftest seeds it; the test's verdict."""
    import ttnn

    available = ttnn.GetNumAvailableDevices
    if mesh is None:
        device = params["device"] = ttnn.open_device(device_id=0, **device_params)
    else:
        ttnn.GetNumAvailableDevices = lambda: mesh[0] * mesh[1]
        device = params["mesh_device"] = ttnn.open_mesh_device(ttnn.MeshShape(*mesh))
    _reset_seeds()
    try:
        return _verdict(mod, lambda: call(**params))
    finally:
        ttnn.close_mesh_device(device)
        ttnn.GetNumAvailableDevices = available


def _word_tokenizer(words: str) -> Any:
    """An uncased WordPiece tokenizer standing in for the checkpoint's: BERT's special tokens at
    their ids ([PAD] 0, [UNK] 100, [CLS] 101, [SEP] 102) and each word of ``words`` after them."""
    import tempfile
    from pathlib import Path

    import transformers

    vocab = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += sorted(set(words.lower().split()))
    path = Path(tempfile.mkdtemp()) / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n")
    return transformers.DistilBertTokenizerFast(vocab_file=str(path), do_lower_case=True)


def _distilbert(mesh: tuple[int, int] | None = None) -> Callable[[], str]:
    """``tests/ttnn/integration_tests/distilbert/test_ttnn_distilbert.py`` (it runs
    ``models/demos/distilbert``'s model) on one device, or its ``_wh`` twin
    (``models/demos/wormhole/distilbert``, batch split over ``mesh``, weights replicated),
    unchanged, at their parametrization (batch 8, 384 tokens), the checkpoint's configuration,
    all 6 layers, random weights; its tokenizer is a word-level WordPiece vocabulary of the
    test's sentences (the released vocab.txt is not here): other token ids, the same padding."""

    def run() -> str:
        import transformers

        _checkout_tests()
        config = transformers.DistilBertConfig(**DISTILBERT_SQUAD)
        qa = transformers.DistilBertForQuestionAnswering
        qa.from_pretrained = staticmethod(lambda *_, **__: _seeded(lambda: qa(config)))  # type: ignore[method-assign]
        tokenizer = _word_tokenizer("where do i live ? my name is merve and i live in istanbul .")
        transformers.AutoTokenizer.from_pretrained = staticmethod(lambda *_, **__: tokenizer)  # type: ignore[method-assign]
        if mesh is not None:  # the wormhole copy imports it and calls nothing in it
            _stand_in("ttnn.torch_tracer")
        name = "distilbert.test_ttnn_distilbert" + ("_wh" if mesh else "")
        mod: Any = importlib.import_module(INTEGRATION + name)
        params = dict(model_name="distilbert-base-uncased-distilled-squad", batch_size=8,
                      sequence_size=768, reset_seeds=None)  # fmt: skip
        return _run_on(mod, mod.test_distilbert_for_question_answering, params, mesh)

    return run


# squeezebert/squeezebert-uncased's config.json (squeezebert's tests): BERT-base's sizes with
# grouped 1x1 convolutions (q, k, v, intermediate and output in 4 groups, post-attention in 1).
SQUEEZEBERT_UNCASED: dict[str, Any] = dict(vocab_size=30528, hidden_size=768, num_hidden_layers=12,
                                           num_attention_heads=12, intermediate_size=3072,
                                           hidden_act="gelu", max_position_embeddings=512,
                                           type_vocab_size=2, pad_token_id=0, embedding_size=768,
                                           q_groups=4, k_groups=4, v_groups=4,
                                           post_attention_groups=1, intermediate_groups=4,
                                           output_groups=4, layer_norm_eps=1e-12,
                                           attn_implementation="eager")  # fmt: skip


def _squeezebert(test: str) -> Callable[[], str]:
    """One of ``tests/ttnn/integration_tests/squeezebert/test_ttnn_squeezebert.py``'s tests (they
    run ``models/demos/squeezebert``'s functions), unchanged, on one device opened as its
    ``device_params`` ask (``l1_small_size=16384``), at its parametrization (batch 8, 384
    tokens), the checkpoint's configuration (all 12 layers) with random weights."""

    def run() -> str:
        import transformers

        _checkout_tests()
        config = transformers.SqueezeBertConfig(**SQUEEZEBERT_UNCASED)
        transformers.SqueezeBertConfig.from_pretrained = staticmethod(lambda *_, **__: config)  # type: ignore[method-assign]
        for cls in (transformers.SqueezeBertModel, transformers.SqueezeBertForQuestionAnswering):
            cls.from_pretrained = staticmethod(  # type: ignore[method-assign]
                lambda *_, cls=cls, **__: _seeded(lambda: cls(config))
            )
        mod: Any = importlib.import_module(INTEGRATION + "squeezebert.test_ttnn_squeezebert")
        import torch

        params: dict[str, Any] = dict(model_name="squeezebert/squeezebert-uncased", batch_size=8,
                                      sequence_size=384, reset_seeds=None)  # fmt: skip
        if "torch_dtype" in getattr(mod, test).__code__.co_varnames:
            params["torch_dtype"] = torch.bfloat16
        return _run_on(mod, getattr(mod, test), params, None, l1_small_size=16384)

    return run


# google/gemma-3-27b-it's config.json vision_config (siglip's tests read $HF_MODEL; gemma3's
# README names this checkpoint): SigLIP-So400m at 896 px, 1152 wide, 16 heads of 72.
GEMMA3_SIGLIP: dict[str, Any] = dict(hidden_size=1152, intermediate_size=4304, num_hidden_layers=27,
                                     num_attention_heads=16, image_size=896, patch_size=14,
                                     vision_use_head=False)  # fmt: skip


def _siglip(mesh: tuple[int, int]) -> Callable[[], str]:
    """``models/demos/siglip/tests/test_attention.py``'s ``test_attention`` with its TT-NN
    function (``siglip_attention_ttnn``: tt_transformers' image attention, heads split over the
    mesh, all-reduced), unchanged, on the mesh its ``mesh_device`` fixture opens for
    ``MESH_DEVICE`` (N300: 1x2, fabric 1D), 4096 tokens; its ``comp_pcc`` (bar 0.99) judges."""

    def run() -> str:
        import transformers

        _checkout_tests()
        eager: dict[str, Any] = dict(attn_implementation="eager")  # the vision config's too
        config = transformers.Gemma3Config(vision_config=GEMMA3_SIGLIP, **eager)
        transformers.AutoConfig.from_pretrained = staticmethod(lambda *_, **__: config)  # type: ignore[method-assign]
        mod: Any = importlib.import_module("models.demos.siglip.tests.test_attention")
        import ttnn

        from models.demos.siglip.tt.attention import siglip_attention_ttnn

        device = _open(mesh)
        _reset_seeds()
        try:
            return _verdict(mod, lambda: mod.test_attention(
                mesh_device=device, attention_func=siglip_attention_ttnn,
                model_location_generator=None, is_ci_env=False), check="comp_pcc")  # fmt: skip
        finally:
            ttnn.close_mesh_device(device)

    return run


# mrm8488/bert-tiny-finetuned-squadv2's config.json (bert_tiny's tests): 2 layers of 128, 2 heads.
BERT_TINY: dict[str, Any] = dict(vocab_size=30522, hidden_size=128, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=512,
                                 max_position_embeddings=512, type_vocab_size=2,
                                 attn_implementation="eager")  # fmt: skip


def _bert_tiny(test: str, mesh: tuple[int, int] | None = None) -> Callable[[], str]:
    """One of ``tests/ttnn/integration_tests/bert_tiny/test_bert_tiny.py``'s tests (they run
    ``models/demos/bert_tiny``'s functions) on one device opened as its ``device_params`` ask, or
    its ``_wh`` twin (``models/demos/wormhole/bert_tiny``, batch split over ``mesh``, weights
    replicated), unchanged, at their parametrization (batch 8, 128 tokens), the checkpoint's
    configuration with random weights."""

    def run() -> str:
        import transformers

        _checkout_tests()
        # a new config each call: the QA test sets ``num_hidden_layers`` on the one it reads
        transformers.BertConfig.from_pretrained = staticmethod(  # type: ignore[method-assign]
            lambda *_, **__: transformers.BertConfig(**BERT_TINY)
        )
        qa = transformers.BertForQuestionAnswering

        def random_qa(*_: Any, config: Any = None, **__: Any) -> Any:
            # a copy, as from_pretrained copies the config it is given (the QA test changes
            # ``num_hidden_layers`` on its own after the load: the model keeps its 2 layers)
            own = copy.deepcopy(config) if config else transformers.BertConfig(**BERT_TINY)
            return _seeded(lambda: qa(own))

        qa.from_pretrained = staticmethod(random_qa)  # type: ignore[method-assign]
        name = "bert_tiny.test_bert_tiny" + ("_wh" if mesh else "")
        mod: Any = importlib.import_module(INTEGRATION + name)
        params: dict[str, Any] = dict(reset_seeds=None)
        if "model_name" in inspect.signature(getattr(mod, test)).parameters:
            params.update(model_name="mrm8488/bert-tiny-finetuned-squadv2", sequence_size=128,
                          num_hidden_layers=1)  # fmt: skip
        else:
            params["model_location_generator"] = lambda name, **_: name
        if mesh is None:
            params["batch_size"] = 8
        return _run_on(mod, getattr(mod, test), params, mesh, l1_small_size=24576)

    return run


def _parametrizations(test: Callable[..., Any]) -> list[dict[str, Any]]:
    """Every parameter set ``test``'s ``pytest.mark.parametrize`` marks list (their product),
    but the ``device_params`` its device fixture reads."""
    import itertools

    axes = []
    for mark in getattr(test, "pytestmark", []):
        if mark.name != "parametrize" or mark.args[0] == "device_params":
            continue
        names = [n.strip() for n in mark.args[0].split(",") if n.strip()]
        axes.append([dict(zip(names, v if len(names) > 1 else (v,))) for v in mark.args[1]])
    return [{k: v for d in combo for k, v in d.items()} for combo in itertools.product(*axes)]


def _photo() -> Any:
    """What the segformer model tests download (a COCO photo, 640x480; the cats-image data set):
    a fixed random RGB picture of that size, as ``requests.get(url).raw`` and as that data set."""
    import io
    import types

    import numpy
    from PIL import Image

    pixels = numpy.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=numpy.uint8)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, format="PNG")
    image = Image.open(io.BytesIO(png.getvalue()))
    return types.SimpleNamespace(
        get=lambda *_, **__: types.SimpleNamespace(raw=io.BytesIO(png.getvalue())),
        load_dataset=lambda *_, **__: {"train": {"image": [image]}},
    )


def _segformer(module: str, test: str) -> Callable[[], str]:
    """One of ``models/demos/segformer/tests/pcc``'s test functions, unchanged, on one device
    opened as its ``device_params`` ask, at every parametrization it lists (each of the four
    encoder stages), worst PCC reported. Its ``load_torch_model`` reads the weights of
    ``SegformerForSemanticSegmentation.from_pretrained`` (``SegformerForImageClassification``'s
    for the classifier), which builds the model here at the checkout's
    ``configs/segformer_semantic_config.json`` (segformer-b0-finetuned-ade-512-512's, MiT-b0:
    stages 32, 64, 160, 256 wide; ``segformer_img_classification_config.json`` for mit-b0) with
    random weights; the image processors are ``SegformerImageProcessor()``'s defaults (512x512,
    ImageNet's mean and std; the released preprocessor configs are not here) and the picture
    :func:`_photo`'s."""

    def run() -> str:
        import transformers

        _checkout_tests()
        from models.demos.segformer.common import load_config

        models = ((transformers.SegformerForSemanticSegmentation, "semantic"),
                  (transformers.SegformerForImageClassification, "img_classification"))  # fmt: skip
        for cls, name in models:
            cls.from_pretrained = staticmethod(  # type: ignore[method-assign]
                lambda *_, cls=cls, name=name, **__: _seeded(
                    lambda: cls(load_config(f"configs/segformer_{name}_config.json")))
            )  # fmt: skip
        for processor in (transformers.SegformerImageProcessor, transformers.AutoImageProcessor):
            processor.from_pretrained = staticmethod(  # type: ignore[method-assign]
                lambda *_, **__: transformers.SegformerImageProcessor()
            )
        mod: Any = importlib.import_module(f"models.demos.segformer.tests.pcc.{module}")
        for download in ("requests", "load_dataset"):  # the test module's own names only
            if hasattr(mod, download):
                photo = _photo()
                setattr(mod, download, photo if download == "requests" else photo.load_dataset)
        fn = getattr(mod, test)
        device_params = [m.args[1][0] for m in fn.pytestmark if m.args[0] == "device_params"]

        def every(device: Any) -> None:
            for params in _parametrizations(fn):
                fn(device=device, model_location_generator=None, **params)

        return _run_on(mod, every, {}, None, **(device_params[0] if device_params else {}))

    return run


# bert_tiny_<part>[_n300]: test_bert_tiny[_wh].py's test function
BERT_TINY_TESTS = (("attention", "test_bert_attention_inference"),
                   ("intermediate", "test_bert_intermediate_inference"),
                   ("output", "test_bert_output_inference"), ("layer", "test_bert_layer_inference"),
                   ("qa", "test_bert_for_question_answering"))  # fmt: skip
# segformer_<part>: the test function of segformer's tests/pcc/test_segformer_<part>.py
SEGFORMER_TESTS = tuple((part, "test_segformer_" + test) for part, test in (
    ("efficient_selfattention", "efficient_selfattention"), ("selfoutput", "selfoutput"),
    ("attention", "attention"), ("mix_ffn", "mix_ffn"), ("mlp", "mlp"), ("dwconv", "dw_conv"),
    ("overlap_path_embeddings", "overlap_patch_embeddings"), ("layer", "layer"),
    ("decode_head", "decode_head"), ("encoder", "encoder"), ("model", "model"),
    ("for_semantic_segmentation", "for_semantic_segmentation"),
    ("for_image_classification", "image_classificaton")))  # fmt: skip

CASES: dict[str, Callable[[], Callable[[], str]]] = {
    "mochi_attention": lambda: _mochi("test_mochi_attention", False),
    "mochi_attention_context_pre_only": lambda: _mochi("test_mochi_attention", True),
    "mochi_block": lambda: _mochi("test_mochi_transformer_block", False, mesh_shape=(2, 4)),
    "mochi_block_context_pre_only": lambda: _mochi(
        "test_mochi_transformer_block", True, mesh_shape=(2, 4)
    ),
    "wan_self_attention": lambda: _wan("test_wan_attention", None),
    "wan_cross_attention": lambda: _wan("test_wan_attention", 26),
    "wan_block": lambda: _wan("test_wan_transformer_block", 26, mesh_shape=(2, 4), B=1),
    "sd35_joint_attention": lambda: _sd35("test_sd35_joint_attention"),
    "sd35_block": lambda: _sd35("test_sd35_transformer_block"),
    "vit_intermediate": lambda: _vit("test_vit_intermediate"),
    "vit_output": lambda: _vit("test_vit_output"),
    "vit_encoder": lambda: _vit("test_vit_encoder", model_location_generator=None),
    "whisper_encoder_layer": lambda: _whisper("test_encoder_layer", (1, 2), sequence_size=1500),
    "whisper_encoder": lambda: _whisper("test_encoder", (1, 2), 2, sequence_length=3000),
    "whisper_decoder_layer": lambda: _whisper(
        "test_decoder_layer",
        (1, 2),
        encoder_sequence_size=1500,
        decoder_sequence_size=32,
        use_kv_cache=False,
    ),
    "whisper_decoder_layer_kv_cache": lambda: _whisper(
        "test_decoder_layer",
        (1, 2),
        encoder_sequence_size=1500,
        decoder_sequence_size=1,
        use_kv_cache=True,
    ),
    "whisper_decoder": lambda: _whisper(
        "test_decoder",
        (1, 2),
        encoder_sequence_size=1500,
        decoder_sequence_size=32,
        use_kv_cache=False,
    ),
    "sentence_bert_embeddings": lambda: _sentence_bert(
        "test_ttnn_sentencebert_embeddings", "test_ttnn_sentence_bert_Embeddings"
    ),
    "sentence_bert_attention": lambda: _sentence_bert(
        "test_ttnn_sentencebert_attention", "test_ttnn_sentence_bert_attention"
    ),
    "sentence_bert_layer": lambda: _sentence_bert(
        "test_ttnn_sentencebert_layer", "test_ttnn_sentence_bert_layer"
    ),
    "sentence_bert_model": lambda: _sentence_bert(
        "test_ttnn_sentencebert_model", "test_ttnn_sentence_bert_model", layers=2
    ),
    "whisper_decoder_kv_cache": lambda: _whisper(
        "test_decoder",
        (1, 2),
        encoder_sequence_size=1500,
        decoder_sequence_size=1,
        use_kv_cache=True,
    ),
    "distilbert_qa": _distilbert,
    "distilbert_qa_n300": lambda: _distilbert((1, 2)),
    "squeezebert_attention": lambda: _squeezebert("test_squeezebert_attention"),
    "squeezebert_intermediate": lambda: _squeezebert("test_squeezebert_intermediate"),
    "squeezebert_output": lambda: _squeezebert("test_squeezebert_output"),
    "squeezebert_layer": lambda: _squeezebert("test_squeezebert_layer"),
    "squeezebert_encoder": lambda: _squeezebert("test_squeezebert_encoder"),
    "squeezebert_model": lambda: _squeezebert("test_squeezebert_model"),
    "squeezebert_qa": lambda: _squeezebert("test_squeezebert_for_question_answering"),
    "siglip_attention": lambda: _siglip((1, 2)),
    **{
        f"bert_tiny_{part}{suffix}": functools.partial(_bert_tiny, test, mesh)
        for part, test in BERT_TINY_TESTS
        for suffix, mesh in (("", None), ("_n300", (1, 2)))
    },
    **{
        f"segformer_{part}": functools.partial(_segformer, f"test_segformer_{part}", test)
        for part, test in SEGFORMER_TESTS
    },
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    cases = {name: (lambda c=c: c()()) for name, c in CASES.items()}
    return harness.run_cases(cases, "case", parser.parse_args(argv).case)


if __name__ == "__main__":
    sys.exit(main())
