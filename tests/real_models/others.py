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


def _galaxy_args(mesh_shape: tuple[int, int] = (8, 4)) -> tuple[Any, Any]:
    """An 8x4 mesh opened as the Galaxy tests open it (dispatch on a column) and the model's
    TtModelArgs for one layer of a random dim-1024 Llama (its configs need dim % 1024 == 0)."""
    import ttnn

    from models.demos.llama3_70b_galaxy.tt.model_config import TtModelArgs
    from tests.real_models.checkpoint import galaxy_70b_sizes, write_tiny_llama

    folder = write_tiny_llama(
        os.path.join(os.environ["TT_CACHE_PATH"], "tiny-llama-1024"), galaxy_70b_sizes(1024)
    )
    mesh = ttnn.open_mesh_device(
        ttnn.MeshShape(*mesh_shape),
        dispatch_core_config=ttnn.DispatchCoreConfig(axis=ttnn.DispatchCoreAxis.COL),
    )
    saved = os.environ["HF_MODEL"]
    os.environ["HF_MODEL"] = str(folder)
    try:
        args = TtModelArgs(mesh, max_batch_size=32, max_seq_len=128)
    finally:
        os.environ["HF_MODEL"] = saved
    args.n_layers = 1
    return mesh, args


def _galaxy_embedding() -> str:
    """llama3_70b_galaxy: TtModelArgs on an 8x4 mesh from HF_MODEL, then TtLlamaEmbedding."""
    import torch
    import ttnn

    from models.demos.llama3_70b_galaxy.tt.llama_embedding import TtLlamaEmbedding

    mesh, args = _galaxy_args()
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


def _galaxy_setup(mesh: Any, args: Any, mode: str, n_tensors: int = 0) -> tuple[Any, Any]:
    """What the Galaxy unit tests build before a module: the prefetcher's sub-devices and the
    model's CCL helper (prefill: without the 70B-sized prefill buffers, the model's own
    ``allocate_prefill_buffers=False``: ~1 GB each replicated on 32 devices)."""
    from models.demos.llama3_70b_galaxy.tt.llama_ccl import TT_CCL
    from models.demos.llama3_70b_galaxy.tt.prefetcher_common import TtLlamaPrefetcherSetup

    prefetcher = TtLlamaPrefetcherSetup(mesh, n_tensors=n_tensors, n_layers=1, mode=mode)
    mesh.set_sub_device_stall_group([prefetcher.worker_sub_device_id])
    ccl = TT_CCL(mesh, args, prefetcher.worker_sub_device_id, mode=mode,
                 allocate_prefill_buffers=False)  # fmt: skip
    return prefetcher, ccl


def _galaxy_rms_norm(mode: str) -> Callable[[], str]:
    """test_llama_rms_norm.py's module (models.common RMSNorm in the Galaxy DistributedNorm) on
    the dim-1024 checkpoint, against torch's RMSNorm with the checkpoint's weight."""

    def probe() -> str:
        import torch
        import ttnn

        from models.common.rmsnorm import RMSNorm
        from models.demos.llama3_70b_galaxy.tt.distributed_norm import DistributedNorm

        mesh, args = _galaxy_args()
        state_dict = args.load_state_dict()
        prefix = args.get_state_dict_prefix("", 0)
        _, ccl = _galaxy_setup(mesh, args, mode)
        config = args.get_model_config()
        inner = RMSNorm(
            device=mesh,
            dim=args.dim,
            state_dict=state_dict,
            state_dict_prefix=prefix,
            weight_key="attention_norm",
            weight_dtype=ttnn.bfloat16,
            is_distributed=args.is_distributed_norm,
            sharded_program_config=config["SHARDED_NORM_ATTN_PRGM_CFG"],
            sharded_output_config=config["SHARDED_ATTN_INPUT_MEMCFG"],
        )
        norm = DistributedNorm(inner, args, TG=args.is_galaxy, tt_ccl=ccl,
                               ccl_topology=config["CCL_TOPOLOGY"])  # fmt: skip
        x = torch.rand(1, 1, 32 if mode == "decode" else 128, args.dim)
        memcfg = config["DECODE_RESIDUAL_MEMCFG"] if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG

        def put(t: Any) -> Any:
            return ttnn.from_torch(
                t, device=mesh, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, memory_config=memcfg,
                mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, -1), mesh_shape=args.cluster_shape),
            )  # fmt: skip

        out, _ = norm(put(x), put(x * 0), mode=mode)
        got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMesh2dToTensor(
            mesh, dims=(0, 3), mesh_shape=args.cluster_shape))[:1]  # fmt: skip
        weight = state_dict[prefix + "attention_norm.weight"].float()
        ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + args.norm_eps) * weight
        return f"DistributedNorm {mode} on 8x4, dim {args.dim}: PCC {harness.pcc(ref, got):.5f}"

    return probe


def _galaxy_module(name: str) -> Callable[[], str]:
    """Build the Galaxy MLP / attention / LM head as their unit tests do, at dim 1024, to show
    where each stops: the MLP's and attention's 70B-fixed memory configs meet the smaller weights
    (the first TT-NN rule that fails); the LM head sets its decode memory config only for 70B."""

    def probe() -> str:
        import ttnn

        mesh, args = _galaxy_args()
        state_dict = args.load_state_dict()
        prefetcher, ccl = _galaxy_setup(mesh, args, "decode", n_tensors=3)
        if name == "mlp":
            from models.demos.llama3_70b_galaxy.tt.llama_mlp import TtLlamaMLP

            TtLlamaMLP(mesh_device=mesh, args=args, state_dict=state_dict,
                       weight_cache_path=args.weight_cache_path(ttnn.bfloat8_b), layer_num=0,
                       dtype=ttnn.bfloat8_b, model_config=args.get_model_config(),
                       prefetcher_setup=prefetcher, tt_ccl=ccl)  # fmt: skip
        elif name == "LM head":
            from models.demos.llama3_70b_galaxy.tt.lm_head import LMHead

            LMHead(args=args, mesh_device=mesh, dtype=ttnn.bfloat8_b, state_dict=state_dict,
                   state_dict_prefix=args.get_state_dict_prefix("", None),
                   weight_cache_path=args.weight_cache_path(ttnn.bfloat8_b), tt_ccl=ccl,
                   prefetcher_setup=prefetcher)  # fmt: skip
        else:
            from models.demos.llama3_70b_galaxy.tt.llama_attention import TtLlamaAttention
            from models.demos.llama3_70b_galaxy.tt.llama_rope import TtLlamaRotarySetup

            rope = TtLlamaRotarySetup(mesh, 32, args.head_dim, args.max_seq_len, args.rope_theta,
                                      args.use_scaled_rope, args.rope_scaling_factor)  # fmt: skip
            TtLlamaAttention(mesh, state_dict, weight_cache_path=args.weight_cache_path(ttnn.bfloat8_b),
                             layer_num=0, dtype=ttnn.bfloat8_b,
                             transformation_mats=rope.get_both_trans_mats(), configuration=args,
                             paged_attention_config=None, prefetcher_setup=prefetcher,
                             tt_ccl=ccl)  # fmt: skip
        return f"{name} builds at dim {args.dim}"

    return probe


def _import(module: str) -> Callable[[], str]:
    def probe() -> str:
        __import__(module)
        return "imports"

    return probe


PROBES: list[tuple[str, Callable[[], str]]] = [
    ("llama3_70b_galaxy (8x4) embedding", _galaxy_embedding),
    ("llama3_70b_galaxy (8x4) RMSNorm decode", _galaxy_rms_norm("decode")),
    ("llama3_70b_galaxy (8x4) RMSNorm prefill", _galaxy_rms_norm("prefill")),
    ("llama3_70b_galaxy (8x4) MLP", _galaxy_module("mlp")),
    ("llama3_70b_galaxy (8x4) attention", _galaxy_module("attention")),
    ("llama3_70b_galaxy (8x4) LM head", _galaxy_module("LM head")),
    ("t3000/falcon40b", _import("models.demos.t3000.falcon40b.tt.falcon_model")),
    ("t3000/llama2_70b", _import("models.demos.t3000.llama2_70b.tt.llama_model_optimized")),
    ("qwen25_vl", _import("models.demos.qwen25_vl.tt.model")),
    ("deepseek_v3", _import("models.demos.deepseek_v3.tt.model.row_batched_model")),
    ("gpt_oss", _import("models.demos.gpt_oss.tt.model")),
    ("tt_dit SD3.5 VAE", _import("models.experimental.tt_dit.models.vae.vae_sd35")),
    ("tt_dit Mochi VAE", _import("models.experimental.tt_dit.models.vae.vae_mochi")),
    ("tt_dit Wan 2.1 VAE", _import("models.experimental.tt_dit.models.vae.vae_wan2_1")),
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
    with tempfile.TemporaryDirectory(prefix="ttjax-real-models-") as tmp:  # ~130 MB: removed after
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
        resolved, total, missing = name_coverage(
            Path(os.environ["TT_METAL_HOME"]) / "models", top=0
        )
        refused = [(n, c) for n, c in missing if n in ttjax.compat.NOT_PROVIDED]
        not_yet = [(n, c) for n, c in missing if n not in ttjax.compat.NOT_PROVIDED]
        print(
            f"\nTT-NN names used across models/: {resolved} of {total} uses resolve; "
            f"{sum(c for _, c in refused)} more are CNN / profiler names, or names TT-NN does not define, that ttjax refuses on purpose "
            f"(docs/ttnn_api.md). Most used missing:"
        )
        print(", ".join(f"`{name}` ({count})" for name, count in not_yet[:30]))
        print("\nRefused on purpose (CNN ops, profiler, not TT-NN names):")
        print(", ".join(f"`{name}` ({count})" for name, count in refused))
    return 0


if __name__ == "__main__":
    sys.exit(main())
