"""How far other multi-device model code of the same checkout gets with ``ttnn`` bound to ttjax.

    TT_METAL_HOME=~/tt-metal python -m tests.real_models.others

Not tests (nothing here is compared with a reference): each probe imports a model family, builds
what its own tests build first, and prints the step it reached or the first call that failed.
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.real_models import harness


def _galaxy_embedding() -> str:
    """llama3_70b_galaxy: TtModelArgs on an 8x4 mesh from HF_MODEL, then TtLlamaEmbedding."""
    import torch
    import ttnn

    from models.demos.llama3_70b_galaxy.tt.llama_embedding import TtLlamaEmbedding
    from models.demos.llama3_70b_galaxy.tt.model_config import TtModelArgs
    from tests.real_models.checkpoint import TinyLlama, write_tiny_llama

    # its configs need dim to be a multiple of 1024 (LM head rows of 32 x 32)
    sizes = TinyLlama(hidden_size=1024, intermediate_size=2048, num_attention_heads=16)
    folder = write_tiny_llama(os.path.join(os.environ["TT_CACHE_PATH"], "tiny-llama-1024"), sizes)
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(8, 4))
    saved = os.environ["HF_MODEL"]
    os.environ["HF_MODEL"] = str(folder)
    try:
        args = TtModelArgs(mesh, max_batch_size=32, max_seq_len=128)
    finally:
        os.environ["HF_MODEL"] = saved
    args.n_layers = 1
    state_dict = args.load_state_dict()
    emb = TtLlamaEmbedding(
        mesh_device=mesh,
        args=args,
        weight_cache_path=args.weight_cache_path(ttnn.bfloat16),
        state_dict=state_dict,
        dtype=ttnn.bfloat16,
    )
    ids = torch.randint(0, args.vocab_size, (32, 1))
    tt_ids = ttnn.from_torch(
        ids.squeeze(1),
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
        dtype=ttnn.uint32,
        layout=ttnn.ROW_MAJOR_LAYOUT,
    )
    out = emb(tt_ids)
    got = ttnn.to_torch(
        out,
        mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(0, -1), mesh_shape=args.cluster_shape),
    )[0, :, : args.max_batch_size, : args.dim].reshape(32, args.dim)
    ref = state_dict["tok_embeddings.weight"][ids.squeeze(1)]
    return f"TtLlamaEmbedding on 8x4: PCC {harness.pcc(ref, got):.5f}"


def _import(module: str) -> Callable[[], str]:
    def probe() -> str:
        __import__(module)
        return "imports"

    return probe


PROBES: list[tuple[str, Callable[[], str]]] = [
    ("llama3_70b_galaxy (8x4)", _galaxy_embedding),
    ("t3000/falcon40b", _import("models.demos.t3000.falcon40b.tt.falcon_model")),
    ("t3000/llama2_70b", _import("models.demos.t3000.llama2_70b.tt.llama_model_optimized")),
    ("qwen25_vl", _import("models.demos.qwen25_vl.tt.model")),
    ("deepseek_v3", _import("models.demos.deepseek_v3.tt.model.row_batched_model")),
    ("gpt_oss", _import("models.demos.gpt_oss.tt.model")),
]


def name_coverage(root: Path, top: int = 25) -> tuple[int, int, list[tuple[str, int]]]:
    """How many ``ttnn.X`` / ``ttnn.X.Y`` / ``from ttnn.X import Y`` uses under ``root`` resolve
    through the binding: (resolved, total, the ``top`` most used names that do not; 0: all)."""
    import importlib
    import re

    ttnn = importlib.import_module("ttnn")
    uses: collections.Counter[tuple[str, str | None]] = collections.Counter()
    for f in root.rglob("*.py"):
        text = f.read_text(errors="ignore")
        for m in re.finditer(r"(?<![\w.])ttnn\.(\w+)(?:\.(\w+))?", text):
            uses[(m.group(1), m.group(2))] += 1
        for m in re.finditer(r"^\s*from (ttnn[.\w]*) import ([\w, ]+)", text, re.M):
            for name in filter(None, (n.strip() for n in m.group(2).split(","))):
                uses[("from " + m.group(1), name)] += 1
    missing: collections.Counter[str] = collections.Counter()
    for (a, b), count in uses.items():
        if a.startswith("from "):
            try:
                getattr(importlib.import_module(a[5:]), str(b))
            except (ImportError, AttributeError):
                missing[f"{a[5:]}.{b}"] += count
            continue
        obj = getattr(ttnn, a, None)
        if obj is None:
            missing[f"ttnn.{a}"] += count
        elif b and isinstance(obj, types.ModuleType) and not hasattr(obj, b):
            missing[f"ttnn.{a}.{b}"] += count
    total = sum(uses.values())
    return total - sum(missing.values()), total, missing.most_common(top or None)


def main() -> int:
    why = harness.missing_requirements()
    if why:
        print(f"cannot run tt-metal's model code: {why}", file=sys.stderr)
        return 2
    import ttjax.compat

    ttjax.compat.install_as_ttnn()
    tmp = tempfile.mkdtemp(prefix="ttjax-real-models-")
    if "HF_MODEL" not in os.environ:
        from tests.real_models.checkpoint import write_tiny_llama

        os.environ["HF_MODEL"] = str(write_tiny_llama(os.path.join(tmp, "tiny-llama")))
    os.environ.setdefault("TT_CACHE_PATH", os.path.join(tmp, "cache"))
    print("| model code | how far it gets |\n| --- | --- |")
    for name, probe in PROBES:
        try:
            result: Any = probe()
        except Exception as e:
            result = harness.first_failing_call(e)
        print(f"| {name} | {str(result).replace('|', '/')} |", flush=True)
    resolved, total, missing = name_coverage(Path(os.environ["TT_METAL_HOME"]) / "models", top=0)
    refused = [(n, c) for n, c in missing if n in ttjax.compat.NOT_PROVIDED]
    not_yet = [(n, c) for n, c in missing if n not in ttjax.compat.NOT_PROVIDED]
    print(
        f"\nTT-NN names used across models/: {resolved} of {total} uses resolve; "
        f"{sum(c for _, c in refused)} more are CNN / profiler names ttjax refuses on purpose "
        f"(docs/ttnn_api.md). Most used missing:"
    )
    print(", ".join(f"`{name}` ({count})" for name, count in not_yet[:30]))
    print("\nRefused on purpose (CNN ops, profiler):")
    print(", ".join(f"`{name}` ({count})" for name, count in refused))
    return 0


if __name__ == "__main__":
    sys.exit(main())
