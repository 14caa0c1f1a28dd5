"""tt-metal model tests nobody pointed ttjax at, run on its virtual meshes: tt_dit's Mochi and Wan 2.2
video transformers and SD3.5-Large's transformer (attention, whole transformer block), each one of
tt-metal's own test functions called unchanged with small shapes.

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
"""

from __future__ import annotations

import argparse
import importlib
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
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    cases = {name: (lambda c=c: c()()) for name, c in CASES.items()}
    return harness.run_cases(cases, "case", parser.parse_args(argv).case)


if __name__ == "__main__":
    sys.exit(main())
