"""Run tt-metal's own model modules (read from ``$TT_METAL_HOME``) on ttjax and score them.

Each ``run_*`` function builds one module exactly as tt-metal's tests in
``models/tt_transformers/tests`` do (``ModelArgs`` from ``HF_MODEL``, the module's constructor,
its inputs in TT-NN's layouts), runs it on a ttjax mesh, and returns the PCC of its output against
transformers' ``LlamaForCausalLM`` read from the same checkpoint (an independent reference).
The tests assert on the number; ``report.py`` prints it, or the first tt-metal call that failed.
"""

from __future__ import annotations

import importlib.util
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MESHES: dict[str, tuple[int, int]] = {"1x8": (1, 8), "2x4": (2, 4), "8x4": (8, 4)}
PCC_REQUIRED = 0.99
# What tt-metal's model files import besides TT-NN (the `ttmetal` extra of pyproject.toml).
THIRD_PARTY = (
    "loguru",
    "llama_models",
    "tiktoken",
    "tqdm",
    "pydantic",
    "PIL",
    "transformers",
    "multiprocess",
)
# A git submodule of a tt-metal checkout (tenstorrent-metal/llama, `git submodule update --init`):
# tt_transformers' model_config.py (and gemma3's, and the llama2_70b / llama3_70b demos) import
# it; Mixtral and the other demos do not.
LLAMA_REFERENCE = "models/demos/t3000/llama2_70b/reference/llama/llama31_8b/model.py"


def missing_requirements() -> str | None:
    """Why no real file can run here (None when they can; see also
    :func:`missing_llama_reference`, which only the code importing that submodule needs)."""
    home = os.environ.get("TT_METAL_HOME")
    if not home:
        return "TT_METAL_HOME is unset (point it at a tt-metal checkout)"
    if not (Path(home) / "models" / "tt_transformers").is_dir():
        return f"TT_METAL_HOME={home} has no models/tt_transformers"
    lacking = [m for m in THIRD_PARTY if importlib.util.find_spec(m) is None]
    if lacking:
        return f"tt-metal's model code needs {', '.join(lacking)} (make ttmetal-venv; README)"
    import transformers

    if int(transformers.__version__.split(".")[0]) >= 5:
        return (
            f"tt-metal's model code targets transformers 4.x (it pins 4.53: AutoModelForVision2Seq, "
            f"config.to_dict()['rope_theta']); found {transformers.__version__}"
        )
    return None


def missing_llama_reference() -> str | None:
    """Why the code that imports tt-metal's Llama reference submodule cannot run (tt_transformers,
    gemma3, the llama2_70b / llama3_70b demos), or None."""
    home = os.environ.get("TT_METAL_HOME", "")
    if (Path(home) / LLAMA_REFERENCE).exists():
        return None
    return (
        f"{home} lacks {LLAMA_REFERENCE}, a git submodule that tt_transformers' model_config.py "
        "imports (fix: `git submodule update --init models/demos/t3000/llama2_70b/reference/llama` "
        "in the checkout)"
    )


def pcc(expected: Any, actual: Any) -> float:
    """Pearson correlation of two arrays (tt-metal's ``comp_pcc`` measure)."""
    a = np.asarray(_np(expected), dtype=np.float64).ravel()
    b = np.asarray(_np(actual), dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: expected {a.shape}, got {b.shape}")
    if np.allclose(a, b):
        return 1.0
    return float(np.corrcoef(a, b)[0, 1])


def _np(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().float().numpy()
    return np.asarray(x)


@dataclass
class Setup:
    """One mesh, tt-metal's ``ModelArgs`` for the checkpoint, and transformers' model of it."""

    mesh: Any
    args: Any
    state_dict: dict[str, Any]
    hf: Any


def setup(
    mesh: Any, n_layers: int = 1, max_seq_len: int = 128, batch: int = 1, wide: bool = False
) -> Setup:
    """``ModelArgs`` (from ``HF_MODEL``) cut to ``n_layers``, its state dict, and the HF model.
    ``wide``: on a Galaxy, the dim-8192 checkpoint (:data:`checkpoint.GALAXY_DIM_8192`)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    from models.tt_transformers.tt.model_config import ModelArgs

    folder = checkpoint_for(mesh, wide)
    saved = {k: os.environ.get(k) for k in ("HF_MODEL", "TT_CACHE_PATH")}
    os.environ["HF_MODEL"] = folder
    if wide:  # its own weight cache: tt-metal names cached weights by device, not by checkpoint
        os.environ["TT_CACHE_PATH"] = os.environ["TT_CACHE_PATH"] + "-8192"
    try:
        args = ModelArgs(mesh, max_batch_size=batch, max_seq_len=max_seq_len, cache_hf=False)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    args.n_layers = n_layers
    state_dict = args.load_state_dict()
    # a text checkpoint's causal LM (Llama's, Gemma-3 1b's), or an image-text one's whole model
    # (Qwen2.5-VL: its generate builds the text-only mrope positions itself)
    multimodal = hasattr(AutoConfig.from_pretrained(folder), "vision_config")
    hf_class = AutoModelForImageTextToText if multimodal else AutoModelForCausalLM
    hf = hf_class.from_pretrained(folder, torch_dtype=torch.float32).eval()
    return Setup(mesh, args, state_dict, hf)


def checkpoint_for(mesh: Any, wide: bool = False) -> str:
    """``HF_MODEL``'s checkpoint, or on a Galaxy (32 devices, where tt-metal's TG paths need
    other sizes) :data:`checkpoint.GALAXY` (``wide``: ``GALAXY_DIM_8192``) written once next to
    ``TT_CACHE_PATH``."""
    if mesh.get_num_devices() != 32:
        return os.environ["HF_MODEL"]
    from tests.real_models.checkpoint import GALAXY, GALAXY_DIM_8192, write_tiny_llama

    name = "tiny-llama-galaxy-8192" if wide else "tiny-llama-galaxy"
    folder = Path(os.environ["TT_CACHE_PATH"]).parent / name
    if not (folder / "config.json").exists():
        write_tiny_llama(folder, GALAXY_DIM_8192 if wide else GALAXY)
    return str(folder)


def _ttnn() -> Any:
    import ttnn

    return ttnn


def _tt_ccl(s: Setup) -> Any:
    from models.tt_transformers.tt.ccl import TT_CCL

    return TT_CCL(s.mesh)


def _replicated_input(s: Setup, x: Any, memory_config: Any, dtype: Any = None) -> Any:
    """``x`` replicated, or on a Galaxy its last dim split over the mesh's 4 columns (as
    tt-metal's test_mlp.py / test_lm_head.py feed it)."""
    ttnn = _ttnn()
    return ttnn.from_torch(
        x,
        device=s.mesh,
        dtype=dtype or ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=ttnn.ShardTensor2dMesh(
            s.mesh,
            dims=(None, 3) if s.args.is_galaxy else (None, None),
            mesh_shape=s.args.cluster_shape,
        ),
        memory_config=memory_config,
    )


def run_rmsnorm(s: Setup, mode: str) -> float:
    """test_rms_norm.py: RMSNorm inside DistributedNorm, input sharded on its last dim."""
    import torch

    from models.common.rmsnorm import RMSNorm
    from models.tt_transformers.tt.distributed_norm import DistributedNorm

    ttnn, args = _ttnn(), s.args
    tt_ccl = _tt_ccl(s)
    inner = RMSNorm(
        device=s.mesh,
        dim=args.dim,
        state_dict=s.state_dict,
        state_dict_prefix=args.get_state_dict_prefix("", 0),
        weight_key="attention_norm",
        weight_dtype=ttnn.bfloat16,
        add_unit_offset=args.rms_norm_add_unit_offset,
        is_distributed=args.is_distributed_norm,
        sharded_program_config=args.get_model_config()["SHARDED_NORM_ATTN_PRGM_CFG"],
        sharded_output_config=args.get_model_config()["SHARDED_ATTN_INPUT_MEMCFG"],
        tt_ccl=tt_ccl,
    )
    norm = DistributedNorm(inner, args, tt_ccl, TG=args.is_galaxy)
    x = torch.rand(1, 1, 32, args.dim)
    tt_x = ttnn.from_torch(
        x,
        device=s.mesh,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=ttnn.ShardTensor2dMesh(s.mesh, dims=(None, -1), mesh_shape=args.cluster_shape),
        memory_config=(
            args.get_model_config()["DECODE_RESIDUAL_MEMCFG"]
            if mode == "decode"
            else ttnn.DRAM_MEMORY_CONFIG
        ),
    )
    out = norm(tt_x, mode=mode)
    if args.is_galaxy or 1 in tuple(s.mesh.shape):
        got = ttnn.to_torch(
            out,
            mesh_composer=ttnn.ConcatMesh2dToTensor(
                s.mesh, dims=(0, 3) if args.is_galaxy else (3, 0), mesh_shape=args.cluster_shape
            ),
        )[:1]
    else:
        # a 2-D mesh outside Galaxy (2x4): the norm is distributed (model_config.py
        # is_distributed_norm) and its closing all_gather (no cluster_axis) runs over all 8
        # devices in row-major order, so each device ends with the 4 column shards twice; the
        # first `dim` columns of any device are the result (test_rms_norm.py's 1xN composer
        # would concatenate the copies)
        got = ttnn.to_torch(ttnn.get_device_tensors(out)[0])[..., : args.dim]
    with torch.no_grad():
        ref = s.hf.model.layers[0].input_layernorm(x)
    return pcc(ref, got)


def run_embedding(s: Setup) -> float:
    """test_embedding.py: 32 token ids, replicated, row-major uint32."""
    import torch

    from models.tt_transformers.tt.embedding import Embedding

    ttnn, args = _ttnn(), s.args
    emb = Embedding(
        mesh_device=s.mesh,
        args=args,
        weight_cache_path=args.weight_cache_path(ttnn.bfloat16),
        state_dict=s.state_dict,
        dtype=ttnn.bfloat16,
    )
    ids = torch.randint(0, args.vocab_size, (32, 1))
    tt_ids = ttnn.from_torch(
        ids.squeeze(1),
        device=s.mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(s.mesh),
        dtype=ttnn.uint32,
        layout=ttnn.ROW_MAJOR_LAYOUT,
    )
    out = emb(tt_ids)
    with torch.no_grad():
        ref = s.hf.model.embed_tokens(ids)
    got = ttnn.to_torch(
        out,
        mesh_composer=ttnn.ConcatMesh2dToTensor(
            s.mesh, dims=(0, -1), mesh_shape=args.cluster_shape
        ),
    )[:32].view(ref.shape)
    return pcc(ref, got)


def run_mlp(s: Setup, mode: str) -> float:
    """test_mlp.py: one layer's MLP, decode (32 rows, sharded input) or prefill (128 rows)."""
    import torch

    from models.tt_transformers.tt.mlp import MLP

    ttnn, args = _ttnn(), s.args
    dtype = ttnn.bfloat8_b
    mlp = MLP(
        mesh_device=s.mesh,
        tt_ccl=_tt_ccl(s),
        args=args,
        state_dict=s.state_dict,
        weight_cache_path=args.weight_cache_path(dtype),
        layer_num=0,
        dtype=dtype,
        model_config=args.get_model_config(),
    )
    seq_len = 32 if mode == "decode" else 128
    x = torch.randn(1, 1, seq_len, args.dim)
    if mode == "prefill":
        memcfg = ttnn.DRAM_MEMORY_CONFIG
    elif args.is_galaxy:
        memcfg = mlp.model_config["MLP_ACT_MEMCFG"]
    else:
        memcfg = args.model_config["SHARDED_MLP_INPUT_MEMCFG"]
    tt_x = _replicated_input(s, x, memcfg, dtype=ttnn.bfloat8_b)
    out = mlp(tt_x, mode)
    got = ttnn.to_torch(
        out,
        mesh_composer=ttnn.ConcatMesh2dToTensor(s.mesh, dims=(1, 3), mesh_shape=args.cluster_shape),
    )[:, :1]
    with torch.no_grad():
        ref = s.hf.model.layers[0].mlp(x)
    return pcc(ref, got)


def run_lm_head(s: Setup) -> float:
    """test_lm_head.py: LMHead over 32 rows of hidden states."""
    import torch

    from models.tt_transformers.tt.lm_head import LMHead

    ttnn, args = _ttnn(), s.args
    dtype = ttnn.bfloat8_b
    head = LMHead(
        args=args,
        mesh_device=s.mesh,
        tt_ccl=_tt_ccl(s),
        dtype=dtype,
        state_dict=s.state_dict,
        state_dict_prefix=args.get_state_dict_prefix("", None),
        weight_cache_path=args.weight_cache_path(dtype),
        max_columns_per_device=args.max_columns_per_device_lm_head,
    )
    x = torch.randn(1, 1, 32, args.dim)
    tt_x = _replicated_input(s, x, args.model_config["LM_HEAD_INPUT_MEMCFG"], dtype=dtype)
    out = head(tt_x)
    got = ttnn.to_torch(
        out,
        mesh_composer=ttnn.ConcatMesh2dToTensor(
            s.mesh, args.cluster_shape, dims=(3, 1) if args.is_galaxy else (1, 3)
        ),
    )[:, :1, :, : args.vocab_size]
    with torch.no_grad():
        ref = s.hf.lm_head(x)
    return pcc(ref, got)


def _hf_rope(s: Setup, x: Any, positions: Any) -> Any:
    return s.hf.model.rotary_emb(x, positions)


def _hf_layer_prefill(s: Setup, module: Callable[..., Any], x: Any) -> Any:
    """A decoder layer (or its attention) over ``x`` [1, seq, dim] with a causal mask."""
    import torch

    seq = x.shape[1]
    positions = torch.arange(seq).unsqueeze(0)
    mask = torch.full((seq, seq), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        out = module(
            hidden_states=x,
            position_embeddings=_hf_rope(s, x, positions),
            attention_mask=mask,
        )
    return out[0] if isinstance(out, tuple) else out


def _rope_setup(s: Setup) -> Any:
    from models.tt_transformers.tt.rope import RotarySetup

    a = s.args
    return RotarySetup(
        s.mesh, a.max_batch_size, a.head_dim, a.max_seq_len, a.rope_theta, a.rope_scaling
    )


# Paged KV cache as tt-metal's tests lay it out (block size 32), blocks out of order.
PAGE_BLOCK_SIZE = 32


def paged_setup(s: Setup) -> tuple[Any, Any]:
    """(PagedAttentionConfig, page table [batch, blocks per user] as torch) for ``s``'s sizes:
    the physical blocks in reverse order (tt-metal's tests shuffle them at random)."""
    import torch

    from models.tt_transformers.tt.common import PagedAttentionConfig

    a = s.args
    blocks = a.max_batch_size * a.max_seq_len // PAGE_BLOCK_SIZE
    config = PagedAttentionConfig(block_size=PAGE_BLOCK_SIZE, max_num_blocks=blocks)
    page_table = torch.arange(blocks).flip(0)  # virtual block 0 lives in the last physical one
    page_table = page_table.reshape(a.max_batch_size, blocks // a.max_batch_size)
    return config, page_table


def _page_table_tt(s: Setup, page_table: Any) -> Any:
    ttnn = _ttnn()
    return ttnn.from_torch(
        page_table,
        device=s.mesh,
        dtype=ttnn.int32,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        mesh_mapper=ttnn.ReplicateTensorToMesh(s.mesh),
    )


def _attention_like(s: Setup, kind: str, paged_config: Any = None) -> tuple[Any, Any]:
    """tt-metal's Attention or TransformerBlock for layer 0, and its rotary set-up."""
    ttnn, args = _ttnn(), s.args
    rope = _rope_setup(s)
    mats = rope.get_both_trans_mats()
    dtype = ttnn.bfloat8_b
    if kind == "attention":
        from models.tt_transformers.tt.attention import Attention

        module = Attention(
            s.mesh,
            _tt_ccl(s),
            s.state_dict,
            weight_cache_path=args.weight_cache_path(dtype),
            layer_num=0,
            dtype=dtype,
            transformation_mats=mats,
            configuration=args,
            paged_attention_config=paged_config,
        )
    else:
        from models.tt_transformers.tt.decoder import TransformerBlock

        module = TransformerBlock(
            args=args,
            mesh_device=s.mesh,
            tt_ccl=_tt_ccl(s),
            dtype=dtype,
            state_dict=s.state_dict,
            layer_num=0,
            weight_cache_path=args.weight_cache_path(dtype),
            transformation_mats=mats,
            paged_attention_config=paged_config,
        )
    return module, rope


def run_attention_like(
    s: Setup, kind: str, mode: str, steps: int = 3, paged: bool = False
) -> float:
    """test_attention(_prefill).py / test_decoder(_prefill).py; returns the worst step's PCC.

    Decode feeds one token per step (positions 0..steps-1) and compares step i with transformers'
    causal run over the first i+1 inputs, row i. ``paged``: the KV cache is paged (shuffled
    blocks of 32 positions) and the page table goes with every call, as in tt-metal's tests.
    """
    import torch

    ttnn, args = _ttnn(), s.args
    paged_config, page_table = paged_setup(s) if paged else (None, None)
    module, rope = _attention_like(s, kind, paged_config)
    page_table_tt = _page_table_tt(s, page_table) if paged else None
    hf_layer = s.hf.model.layers[0]
    hf_module = hf_layer.self_attn if kind == "attention" else hf_layer
    if mode == "prefill":
        seq = 128
        x = torch.randn(1, seq, args.dim)
        tt_x = args.prepare_residual_tensor_prefill(
            x, force_replicated=kind == "attention" and not args.is_galaxy
        )
        from models.tt_transformers.tt.rope import get_rot_mats

        rot = get_rot_mats(
            head_dim=args.head_dim,
            device=s.mesh,
            seq_len=seq,
            theta=args.rope_theta,
            rope_scaling=args.rope_scaling,
        )
        kwargs = {"user_id": 0, "mode": "prefill", "page_table": page_table_tt}
        if kind == "attention":
            out = module(tt_x, current_pos=None, rot_mats=rot, **kwargs)
        else:
            out = module(tt_x, current_pos=None, rot_mats_global=rot, **kwargs)
        got = ttnn.to_torch(
            out,
            mesh_composer=ttnn.ConcatMesh2dToTensor(
                s.mesh, dims=(1, 3), mesh_shape=args.cluster_shape
            ),
        )[:, 0:1, :, : args.dim].view(1, seq, args.dim)
        ref = _hf_layer_prefill(s, hf_module, x)
        return pcc(ref, got)
    xs = torch.randn(1, steps, args.dim)
    worst = 1.0
    for i in range(steps):
        pos = torch.tensor([i] * args.max_batch_size)
        tt_pos = ttnn.from_torch(
            pos,
            device=s.mesh,
            dtype=ttnn.int32,
            mesh_mapper=ttnn.ShardTensor2dMesh(
                s.mesh, dims=(None, None), mesh_shape=args.cluster_shape
            ),
        )
        memcfg = args.model_config[
            "SHARDED_ATTN_INPUT_MEMCFG" if kind == "attention" else "DECODE_RESIDUAL_MEMCFG"
        ]
        tt_x = args.prepare_residual_tensor_decode(
            xs[:, i : i + 1].clone(),
            memcfg,
            force_replicated=kind == "attention" and not args.is_galaxy,
        )
        rot = rope.get_rot_mats(pos)
        if kind == "attention":
            out = module(tt_x, tt_pos, rot_mats=rot, mode="decode", page_table=page_table_tt)
        else:
            out = module(tt_x, tt_pos, rot_mats_global=rot, mode="decode", page_table=page_table_tt)
        got = ttnn.to_torch(
            out,
            mesh_composer=ttnn.ConcatMesh2dToTensor(
                s.mesh, dims=(1, 3), mesh_shape=args.cluster_shape
            ),
        )[:, 0:1, : args.max_batch_size, : args.dim].reshape(1, args.dim)
        ref = _hf_layer_prefill(s, hf_module, xs[:, : i + 1])[0, i : i + 1]
        worst = min(worst, pcc(ref, got))
    if kind == "attention":  # test_attention.py's check_kv_cache, over the positions written
        for ref_cache, got_cache in zip(_hf_kv(s, xs), _tt_kv(s, module, page_table, steps)):
            worst = min(worst, pcc(ref_cache, got_cache))
    return worst


def _hf_kv(s: Setup, x: Any) -> tuple[Any, Any]:
    """Layer 0's K (rotated) and V for ``x`` [1, seq, dim] from transformers, as [kv, seq, hd]
    with K's head dim in tt-metal's order (its checkpoint conversion interleaves the two
    rotary halves: meta[2i + h] = hf[h * hd/2 + i])."""
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    a, attn = s.args, s.hf.model.layers[0].self_attn
    seq = x.shape[1]
    with torch.no_grad():
        k = attn.k_proj(x).view(1, seq, a.n_kv_heads, a.head_dim).transpose(1, 2)
        v = attn.v_proj(x).view(1, seq, a.n_kv_heads, a.head_dim).transpose(1, 2)
        cos, sin = _hf_rope(s, x, torch.arange(seq).unsqueeze(0))
        _, k = apply_rotary_pos_emb(k, k, cos, sin)
    k = k.reshape(1, a.n_kv_heads, seq, 2, a.head_dim // 2).transpose(-1, -2)
    return k.reshape(a.n_kv_heads, seq, a.head_dim), v[0]


def _tt_kv(s: Setup, attention: Any, page_table: Any, seq: int) -> tuple[Any, Any]:
    """Attention's KV cache read back as [kv, seq, hd] for user 0 (paged: blocks put back in
    order through the page table, as test_attention.py does)."""
    ttnn, a = _ttnn(), s.args
    if not a.is_galaxy:
        dims = (0, 1)
    else:  # kv heads over the rows; users (non-paged) or pages over the columns
        dims = (1, 3) if page_table is not None else (1, 0)
    out = []
    for cache in attention.layer_past:
        t = ttnn.to_torch(
            cache,
            mesh_composer=ttnn.ConcatMesh2dToTensor(s.mesh, dims=dims, mesh_shape=a.cluster_shape),
        )
        if page_table is not None:
            blocks = page_table.shape[1]
            t = t[page_table.flatten()][:, : a.n_kv_heads, :, : a.head_dim]
            t = t.reshape(a.max_batch_size, blocks, a.n_kv_heads, PAGE_BLOCK_SIZE, a.head_dim)
            t = t.transpose(1, 2).reshape(a.max_batch_size, a.n_kv_heads, -1, a.head_dim)
        out.append(t[0, :, :seq].float())
    return out[0], out[1]


def first_failing_call(exc: BaseException) -> str:
    """``file:line  source  -> Error: message`` at the innermost tt-metal frame of ``exc``."""
    home = str(Path(os.environ.get("TT_METAL_HOME", "/nonexistent")).resolve())
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if str(Path(f.filename).resolve()).startswith(home)]
    ours = [f for f in frames if Path(f.filename).resolve().parent == Path(__file__).parent]
    where = (inside or ours or frames or [None])[-1]
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    message = message.split(": ttjax does not provide")[0]  # the binding's own explanation
    message = message if len(message) <= 110 else message[:107] + "..."
    what = f"{type(exc).__name__}: {message}"
    if where is None:
        return what
    rel = os.path.relpath(where.filename, home) if inside else os.path.basename(where.filename)
    return f"{rel}:{where.lineno} `{(where.line or '').strip()}` -> {what}"


@dataclass(frozen=True)
class GenerationResult:
    """Prefill logits' PCC; then decode logits' worst PCC and both greedy token sequences, or the
    error that stopped decode."""

    prefill_pcc: float
    decode_pcc: float | None
    tokens: tuple[int, ...]
    reference_tokens: tuple[int, ...]
    decode_error: BaseException | None = None
    prompt: Any = None  # the prompt's token ids, [1, prompt_len]
    logits: tuple[Any, ...] | list[Any] = ()  # the prefill's last logits, then each decode step's


def run_generator_prefill(s: Setup, paged: bool = False, trace: bool = False) -> float:
    """The prefill half of :func:`generate`: PCC of the last position's logits."""
    return generate(s, paged=paged, trace=trace).prefill_pcc


def run_generator_decode(s: Setup, paged: bool = False, trace: bool = False) -> float:
    """The decode half of :func:`generate`: worst decode-step PCC; raises AssertionError when
    the greedy tokens differ from transformers' ``generate`` (greedy) on the same prompt."""
    r = generate(s, paged=paged, trace=trace)
    if r.decode_error is not None:
        raise r.decode_error
    if r.tokens != r.reference_tokens:
        raise AssertionError(f"greedy tokens {r.tokens} != transformers' {r.reference_tokens}")
    assert r.decode_pcc is not None
    return r.decode_pcc


# ModelArgs reads MAX_PREFILL_CHUNK_SIZE (in units of 1024 tokens) when it is built.
CHUNKED_SEQ_LEN = 4096


def setup_chunked(mesh: Any) -> Setup:
    """A 2-layer set-up whose prefill goes in chunks of 2048 tokens (tt-metal's smallest chunk),
    max_seq_len 4096."""
    saved = os.environ.get("MAX_PREFILL_CHUNK_SIZE")
    os.environ["MAX_PREFILL_CHUNK_SIZE"] = "2"
    try:
        return setup(mesh, n_layers=2, max_seq_len=CHUNKED_SEQ_LEN)
    finally:
        if saved is None:
            os.environ.pop("MAX_PREFILL_CHUNK_SIZE")
        else:
            os.environ["MAX_PREFILL_CHUNK_SIZE"] = saved


def run_generator_chunked(s: Setup) -> float:
    """Generator prefill of a 2100-token prompt (padded to 4096) in two chunks of 2048 (chunked
    SDPA over the paged cache), then 2 greedy decode steps; the worst PCC, tokens identical to
    transformers'."""
    r = generate(s, prompt_len=2100, new_tokens=2, paged=True)
    if r.decode_error is not None:
        raise r.decode_error
    if r.tokens != r.reference_tokens:
        raise AssertionError(f"greedy tokens {r.tokens} != transformers' {r.reference_tokens}")
    assert r.decode_pcc is not None
    return min(r.prefill_pcc, r.decode_pcc)


def reference_generate(
    hf: Any, vocab_size: int, prompt_len: int, new_tokens: int
) -> tuple[Any, list[Any], tuple[int, ...]]:
    """A random prompt (seed 0) of ``prompt_len`` tokens, and transformers' greedy ``generate``
    of ``new_tokens + 1`` tokens on it: (prompt [1, prompt_len], each step's logits, tokens)."""
    import torch

    torch.manual_seed(0)
    prompt = torch.randint(3, vocab_size, (1, prompt_len))
    with torch.no_grad():
        out = hf.generate(
            prompt,
            max_new_tokens=new_tokens + 1,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    return prompt, [x[0] for x in out.logits], tuple(int(t) for t in out.sequences[0, prompt_len:])


def generate(
    s: Setup, prompt_len: int = 40, new_tokens: int = 4, paged: bool = False, trace: bool = False
) -> GenerationResult:
    """simple_text_demo.py's path: Transformer + Generator, prefill then greedy decode (cached
    per set-up and options). Decode feeds transformers' greedy tokens back (teacher forcing), so
    every step compares logits over the same context; the tokens compared are each step's own
    argmax. ``paged``: paged KV cache and page table (the demo's default); ``trace``: decode
    through the Generator's captured trace (``enable_trace=True``, the demo's default)."""
    cache: dict[tuple[int, bool, bool], GenerationResult] = s.__dict__.setdefault("_generation", {})
    if (prompt_len, paged, trace) in cache:
        return cache[(prompt_len, paged, trace)]
    from models.tt_transformers.tt.generator import Generator
    from models.tt_transformers.tt.model import Transformer

    ttnn, args = _ttnn(), s.args
    dtype = ttnn.bfloat8_b
    paged_config, page_table = paged_setup(s) if paged else (None, None)
    model = Transformer(
        args=args,
        mesh_device=s.mesh,
        dtype=dtype,
        state_dict=s.state_dict,
        weight_cache_path=args.weight_cache_path(dtype),
        paged_attention_config=paged_config,
    )
    kv_cache = [[layer.attention.layer_past for layer in model.layers]] if paged else None
    gen = Generator([model], [args], s.mesh, tokenizer=args.tokenizer)
    result = greedy_decode(
        gen, s.hf, args.vocab_size, prompt_len, new_tokens, page_table, kv_cache, trace
    )
    cache[(prompt_len, paged, trace)] = result
    return result


def greedy_decode(
    gen: Any,
    hf: Any,
    vocab_size: int,
    prompt_len: int = 40,
    new_tokens: int = 4,
    page_table: Any = None,
    kv_cache: Any = None,
    trace: bool = False,
) -> GenerationResult:
    """A tt_transformers ``Generator`` (whatever model it drives) against transformers' ``hf``:
    a random prompt prefilled, then ``new_tokens`` greedy decode steps fed transformers' own
    greedy tokens (teacher forcing), each step's logits compared with ``generate``'s."""

    prompt, ref_logits, ref_tokens = reference_generate(hf, vocab_size, prompt_len, new_tokens)
    logits = gen.prefill_forward_text(
        prompt, page_table=page_table, kv_cache=kv_cache, prompt_lens=[prompt_len]
    )
    return teacher_forced_decode(
        gen, logits[0, -1], prompt, ref_logits, ref_tokens, vocab_size, page_table, kv_cache, trace
    )


def teacher_forced_decode(
    gen: Any,
    prefill_logits: Any,
    prompt: Any,
    ref_logits: list[Any],
    ref_tokens: tuple[int, ...],
    vocab_size: int,
    page_table: Any = None,
    kv_cache: Any = None,
    trace: bool = False,
) -> GenerationResult:
    """After a ``Generator``'s prefill (its last-position ``prefill_logits``): one greedy decode
    step per reference step after the first, each fed transformers' previous token, its logits
    compared with ``reference_generate``'s (the worst PCC) and its argmax kept."""
    import torch

    prompt_len = prompt.shape[-1]
    steps = [prefill_logits.reshape(-1)[:vocab_size].float()]
    prefill_pcc = pcc(ref_logits[0], steps[0])
    tokens = [int(torch.argmax(steps[0]))]
    worst = 1.0
    try:
        pos = torch.tensor([prompt_len])
        for i in range(len(ref_logits) - 1):
            tok = torch.tensor([[ref_tokens[i]]])
            out = gen.decode_forward_text(
                tok, pos, page_table=page_table, kv_cache=kv_cache, enable_trace=trace
            )
            steps.append(out.reshape(-1)[:vocab_size].float())
            worst = min(worst, pcc(ref_logits[i + 1], steps[-1]))
            tokens.append(int(torch.argmax(steps[-1])))
            pos = pos + 1
    except Exception as e:
        return GenerationResult(prefill_pcc, None, tuple(tokens), ref_tokens, e, prompt, steps)
    return GenerationResult(prefill_pcc, worst, tuple(tokens), ref_tokens, None, prompt, steps)


def run_cases(cases: dict[str, Callable[[], Any]], header: str, picks: list[str] | None) -> int:
    """Run ``picks`` of ``cases`` (all by default) on tt-metal's code as ttnn, printing one
    markdown row each: the case's result, or the call that failed, and its seconds."""
    import sys
    import time

    why = missing_requirements()
    if why:
        print(f"cannot run tt-metal's model code: {why}", file=sys.stderr)
        return 2
    import ttjax.compat

    ttjax.compat.install_as_ttnn()
    np.set_printoptions(precision=5)
    print(f"| {header} | result | seconds |\n| --- | --- | --- |")
    for name in picks or list(cases):
        start = time.time()
        try:
            result = cases[name]()
        except Exception as e:
            result = first_failing_call(e)
        print(f"| {name} | {result} | {time.time() - start:.0f} |", flush=True)
    return 0
