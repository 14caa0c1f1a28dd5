"""Decoder LLMs as TT-NN programs to price op by op: any Hugging Face ``config.json`` (Llama
3.1/3.2, Qwen 2.5/3, Mistral, Mixtral, Falcon, Phi) written out as the ops tt-metal's
``tt_transformers`` runs per decode step or prefill, then the calibration fit, the published
rows and the layout search that :mod:`ttjax._src.tools.opcost` prices.

The program follows tt-metal 821525122af5 models/tt_transformers/tt/ (decoder.py, attention.py,
mlp.py, lm_head.py, model_config.py): per layer an RMSNorm, the fused QKV matmul, the decode
head ops, rotary embedding of Q and K, the KV-cache update, SDPA (decode: FlashDecode over the
positions so far; prefill: causal at HiFi4), WO, an all-reduce over the TP chips, the residual
add, a second norm, FF1/FF3 (bfloat4_b at LoFi in *performance* mode) and FF2 (bfloat8_b at HiFi2)
with SiLU-multiply, another all-reduce and add; decode matmuls read DRAM-sharded weights
(``create_dram_sharded_mem_config``) from L1-sharded activations padded to 32 rows, prefill ones
run on the 8x8 grid from DRAM-interleaved weights. One decoder layer is written and counted
``n_layers`` times; the embedding and the LM head are at full size.

    python -m ttjax._src.tools.opmodels table            # published rows vs predicted
    python -m ttjax._src.tools.opmodels calibrate --write
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from ttjax._src.core.errors import ConfigError
from ttjax._src.core.systems import System, get_system
from ttjax._src.tools.opcost import (
    DTYPE_BYTES,
    OP_CALIBRATION,
    OpCalibration,
    OpPrediction,
    OpRecord,
    TensorInfo,
    price,
    save_op_calibration,
)
from ttjax._src.tools.opfalcon import FALCON_DECODE_ATTENTION, FALCON_PREFILL_CORES, host_logits
from ttjax._src.tools.opgalaxy import GALAXY_OP_TO_OP_SECONDS, galaxy_program
from ttjax._src.tools.ophead import prefill_logits_to_host
from ttjax._src.tools.opvision import cross_attention, cross_mlp_gate, vision_encoder

TILE = 32
PROMPT = 128  # tokens prefilled for a TTFT row (PERF.md's runs)
CONTEXT = 256  # KV positions a decode step reads (128-token prompt + up to 200 tokens)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder LLM's shapes (what a Hugging Face config.json says)."""

    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    vocab: int
    experts: int = 0  # Mixture of experts: experts per layer (0: dense)
    gated: bool = True  # SwiGLU (FF1, FF3, FF2); False: Falcon's GELU MLP (two matmuls)
    qkv_bias: bool = False
    recipe: str = "performance"
    qk_norm: bool = False  # Qwen3: RMSNorm of each head of Q and K (attention.py q_norm/k_norm)
    # decode weights DRAM-sharded (tt_transformers); Falcon's own programs (falcon7b_common,
    # t3000/falcon40b) read them DRAM-interleaved with core_grid matmuls (falcon_mlp.py)
    dram_sharded: bool = True
    # model_config.py PAD_MLP_CORES defaults: the FFN dim padded to a multiple of
    # cores x 32 x devices (Qwen2.5-7B 16, QwQ-32B 16, Qwen2.5-72B 32)
    mlp_pad_cores: int = 0
    # Llama 3.2 Vision: cross-attention blocks beside the ``n_layers`` text layers, run by the
    # multimodal program only (model_config.py 1517-1520 drops them for the text demo)
    cross_layers: int = 0


_falcon = partial(ModelSpec, gated=False, recipe="bfp8", dram_sharded=False)
_qwen7 = partial(ModelSpec, qkv_bias=True, recipe="bfp8-mlp-bf16-attn")
MODELS = {
    s.name: s
    for s in (
        ModelSpec("llama-3.2-1b", 2048, 16, 32, 8, 64, 8192, 128256),
        ModelSpec("llama-3.2-3b", 3072, 28, 24, 8, 128, 8192, 128256),
        ModelSpec("llama-3.1-8b", 4096, 32, 32, 8, 128, 14336, 128256),
        ModelSpec("llama-3.1-70b", 8192, 80, 64, 8, 128, 28672, 128256),
        # Llama 3.2 Vision: 32 (80) text layers and 8 (20) cross-attention blocks of 40 (100)
        ModelSpec("llama-3.2-11b", 4096, 32, 32, 8, 128, 14336, 128256, cross_layers=8),
        ModelSpec("llama-3.2-90b", 8192, 80, 64, 8, 128, 28672, 128256, cross_layers=20),
        # PERF.md: Qwen2.5-7B runs bfp8 MLP and bf16 attention
        _qwen7("qwen2.5-7b", 3584, 28, 28, 4, 128, 18944, 152064, mlp_pad_cores=16),
        ModelSpec("qwen2.5-32b", 5120, 64, 40, 8, 128, 27648, 152064, qkv_bias=True),
        ModelSpec(
            "qwen2.5-72b", 8192, 80, 64, 8, 128, 29568, 152064, qkv_bias=True, mlp_pad_cores=32
        ),
        ModelSpec("qwq-32b", 5120, 64, 40, 8, 128, 27648, 152064, qkv_bias=True, mlp_pad_cores=16),
        ModelSpec("qwen3-32b", 5120, 64, 64, 8, 128, 25600, 151936, qk_norm=True),
        ModelSpec("mistral-7b", 4096, 32, 32, 8, 128, 14336, 32768),
        ModelSpec("mixtral-8x7b", 4096, 32, 32, 8, 128, 14336, 32000, experts=8),
        # falcon7b_common, t3000/falcon40b: GELU MLP, bfloat8_b, DRAM-interleaved decode weights
        _falcon("falcon-7b", 4544, 32, 71, 1, 64, 18176, 65024),
        _falcon("falcon-40b", 8192, 60, 128, 8, 64, 32768, 65024),
        ModelSpec("phi-3.5-mini", 3072, 32, 32, 32, 96, 8192, 32064),
        ModelSpec("phi-4", 5120, 40, 40, 10, 128, 17920, 100352),
    )
}
ALIASES = {
    "llama-3.1-70b-instruct": "llama-3.1-70b",
    "deepseek-r1-distill-llama-70b": "llama-3.1-70b",
    "qwen2.5-coder-32b": "qwen2.5-32b",
    "phi-3-mini-128k": "phi-3.5-mini",
}

# Weight dtypes and math fidelity per matmul, and the KV cache's dtype and SDPA decode's fidelity
# ("kv", bfloat8_b at HiFi2 where absent) (model_config.py ModelOptimizations; Qwen2.5-7B's
# performance mode 162-180: bfloat16 WQKV, WO and KV cache, HiFi4 QKV, WO and SDPA).
RECIPES: dict[str, dict[str, tuple[str, str]]] = {
    "performance": {"ff13": ("bfloat4_b", "lofi"), "ff2": ("bfloat8_b", "hifi2"),
                    "qkv": ("bfloat8_b", "hifi2"), "wo": ("bfloat8_b", "hifi2")},
    "bfp8": {"ff13": ("bfloat8_b", "hifi2"), "ff2": ("bfloat8_b", "hifi2"),
             "qkv": ("bfloat8_b", "hifi2"), "wo": ("bfloat8_b", "hifi2")},
    "bfp8-mlp-bf16-attn": {"ff13": ("bfloat8_b", "hifi2"), "ff2": ("bfloat8_b", "hifi2"),
                           "qkv": ("bfloat16", "hifi4"), "wo": ("bfloat16", "hifi4"),
                           "kv": ("bfloat16", "hifi4")},
}  # fmt: skip


def spec_from_hf(config: dict[str, Any], name: str = "model") -> ModelSpec:
    """A :class:`ModelSpec` from a Hugging Face ``config.json`` dict (Llama, Mistral, Mixtral,
    Qwen2/3, Falcon, Phi3)."""
    cross = len(config.get("text_config", {}).get("cross_attention_layers", ()))
    config = {**config, **config.get("text_config", {})}  # mllama: the text decoder's config
    try:
        dim = int(config["hidden_size"])
        heads = int(config.get("num_attention_heads", config.get("n_head", 0)))
        layers = int(config.get("num_hidden_layers", config.get("n_layer", 0)))
        kv = config.get("num_key_value_heads", config.get("num_kv_heads"))
        if kv is None:
            kv = 1 if config.get("multi_query") else heads
        mt = str(config.get("model_type", ""))
        falcon = mt == "falcon"
        ffn = config.get("intermediate_size") or config.get("ffn_hidden_size") or 4 * dim
        return ModelSpec(
            name=name,
            dim=dim,
            n_layers=layers - cross,
            n_heads=heads,
            n_kv_heads=int(kv),
            head_dim=int(config.get("head_dim") or dim // heads),
            ffn_dim=int(ffn),
            vocab=int(config["vocab_size"]),
            experts=int(config.get("num_local_experts", 0) or 0),
            gated=not falcon,
            qkv_bias=mt == "qwen2" or bool(config.get("attention_bias", False)),
            recipe="bfp8" if falcon else "performance",
            qk_norm=mt == "qwen3",
            dram_sharded=not falcon,
            cross_layers=cross,
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        raise ConfigError(
            f"{name}: config.json lacks or mistypes {e}.\nfix: give a decoder LLM's Hugging Face "
            "config.json (hidden_size, num_attention_heads, num_hidden_layers, vocab_size, ...)."
        ) from None


def get_model(model: str | ModelSpec) -> ModelSpec:
    """A listed model name (see ``MODELS``) or a path to a Hugging Face ``config.json``."""
    if isinstance(model, ModelSpec):
        return model
    key = str(model).lower()
    key = ALIASES.get(key, key)
    if key in MODELS:
        return MODELS[key]
    p = Path(model)
    if p.is_dir():
        p = p / "config.json"
    if p.suffix == ".json" and p.exists():
        return spec_from_hf(json.loads(p.read_text()), p.parent.name or p.stem)
    raise ConfigError(
        f"unknown config {model!r}: neither a listed model nor a config.json path.\n"
        f"fix: one of {', '.join(sorted(MODELS))}, or a Hugging Face config.json."
    )


# ---------------------------------------------------------------------------------------------
# The program
# ---------------------------------------------------------------------------------------------


def _l1(*shape: int, dtype: str = "bfloat16") -> TensorInfo:
    return TensorInfo(tuple(shape), dtype, "L1", True)


def _dram(*shape: int, dtype: str = "bfloat16", sharded: bool = False) -> TensorInfo:
    return TensorInfo(tuple(shape), dtype, "DRAM", sharded)


def _mesh_2d(system: System, tp: int) -> tuple[int, int] | None:
    """The (rows, cols) of a TP group that tt_transformers fractures 2-D (a Galaxy's 8x4: TG);
    None for a 1-D group (N300, T3K, a Galaxy submesh of at most 8 chips)."""
    if tp <= 8:
        return None
    rows, cols = system.mesh_shape
    return (rows, tp // rows) if tp % rows == 0 else (tp // cols, cols)


def _lm_grid(d: int, n: int) -> tuple[int, int]:
    """model_config.py 885-898: the LM head's core grid (rows, cores per row) for dim ``d`` on
    ``n`` chips (TG: at most 4 rows)."""
    lm_rows, lm_cols = (4, 8) if n == 32 else (8, 8)
    while n == 32 and lm_rows > 1 and d % (32 * 32 * lm_rows):
        lm_rows -= 1
    while d % (TILE * lm_rows * lm_cols) and lm_cols:
        lm_rows -= 1
        if lm_rows == 0:
            lm_rows, lm_cols = 8, lm_cols - 1
    return lm_rows, lm_cols


def model_program(
    model: str | ModelSpec,
    system: System | str,
    *,
    tp: int | None = None,
    batch: int = 1,
    phase: str = "decode",
    context: int = CONTEXT,
    prompt: int = PROMPT,
    recipe: str | None = None,
    num_links: int = 1,
    ccl_dtype: str = "bfloat8_b",
    argmax_on_device: bool = True,
    vision: bool = False,
) -> list[OpRecord]:
    """The per-chip TT-NN ops of one replica (TP over ``tp`` chips) for one step: a decode step
    of ``batch`` users at ``context`` positions, or the prefill of one ``prompt``-token user.

    1-D TP (decoder.py, attention.py, mlp.py, distributed_norm.py, ccl.py): the residual stream
    is fractured over the chips; each norm all-gathers it, attention all-gathers its heads into
    WO (``all_gather_matmul_async`` on a ring), FF2's partial sums are reduce-scattered. TG (a
    Galaxy's 8x4): weights fractured 2-D, distributed norms (stats all-gathered), QKV and FF1/FF3
    reduced along the 4-chip axis, WO and FF2 all-reduced along the 8-chip axis.
    ``argmax_on_device``: greedy decoding's argmax on device (PERF.md's runs); else the logits
    go to the host. ``vision``: Llama 3.2 Vision's multimodal program (:mod:`opvision`): its
    cross-attention blocks, and for prefill the image path of one image.
    """
    m = get_model(model)
    s = get_system(system)
    n = int(tp or s.num_chips)
    if n < 1 or s.num_chips % n:
        raise ConfigError(
            f"tp={n} does not divide {s.name}'s {s.num_chips} chips.\nfix: a divisor."
        )
    rec = RECIPES[recipe or m.recipe]
    kv_dt, kv_fid = rec.get("kv", ("bfloat8_b", "hifi2"))
    if phase not in ("decode", "prefill"):
        raise ConfigError(f"phase={phase!r}.\nfix: 'decode' or 'prefill'.")
    decode = phase == "decode"
    b = int(batch)
    rows = TILE * math.ceil(b / TILE) if decode else int(prompt)
    d, hd = m.dim, m.head_dim
    grid = _mesh_2d(s, n)
    # TP split of heads (columns of QKV) and of the model dim (rows of QKV, TG only)
    col = grid[0] if grid else n  # chips sharing the heads / FFN columns
    row = grid[1] if grid else 1  # chips sharing the model dim (TG)
    nh = max(1, math.ceil(m.n_heads / col))
    nkv = max(1, math.ceil(m.n_kv_heads / col))
    qkv = (nh + 2 * nkv) * hd
    ffn_dim = m.ffn_dim
    if m.mlp_pad_cores:
        step = m.mlp_pad_cores * TILE * n
        ffn_dim = math.ceil(ffn_dim / step) * step
    ffn = ffn_dim if m.experts else math.ceil(ffn_dim / col)
    dl = math.ceil(d / row)  # model dim each chip's matmuls read
    act = _l1 if decode else _dram  # decode activations sit L1-sharded, prefill in DRAM
    topo1 = s.topology(n)

    def op(name: str, ins: Sequence[TensorInfo], outs: Sequence[TensorInfo], **kw: Any) -> OpRecord:
        return OpRecord(name, tuple(ins), tuple(outs), kw)

    def mm(name: str, k: int, nn: int, which: str, r: int = rows) -> OpRecord:
        dt, fid = rec[which]
        sharded = decode and m.dram_sharded
        w = _dram(k, nn, dtype=dt, sharded=sharded)
        mcast = {} if decode else {"mcast": "2d"}  # prefill: model_config.py's 2-D configs
        cores = s.compute_cores
        if not decode and not m.dram_sharded:  # Falcon's prefill: core_grid 8x7, no 2-D config
            mcast, cores = {}, FALCON_PREFILL_CORES
        return op(name, (act(r, k), w), (act(r, nn),), fidelity=fid, dram_sharded=sharded,
                  cores=cores, **mcast)  # fmt: skip

    def ccl(name: str, kind: str, x: TensorInfo, y: TensorInfo, group: int, links: int,
            topo: str) -> OpRecord:  # fmt: skip
        return op(name, (x,), (y,), kind=kind, group_size=group, num_links=links, topology=topo)

    def move(name: str, width: int, r: int = rows) -> OpRecord:
        return op(name, (act(r, width),), (act(r, width),))

    def cast(width: int, src: str, dst: str) -> OpRecord:  # a kernel even at src == dst
        return op("typecast", (act(rows, width, dtype=src),), (act(rows, width, dtype=dst),))

    layer: list[OpRecord] = []
    norm = "rms_norm" if m.gated else "layer_norm"

    def norm_ops() -> list[OpRecord]:
        if grid:  # tt_sharded_distributed_rmsnorm: stats gathered along the 4-chip axis on 1 link
            st = act(rows, TILE * row)
            return [move("to_memory_config", dl), op(f"{norm}_pre_all_gather", (act(rows, dl),), (act(rows, TILE),)),
                    ccl("all_gather_async", "all-gather", act(rows, TILE), st, row, 1, "line"),
                    op(f"{norm}_post_all_gather", (act(rows, dl), st), (act(rows, dl),))]  # fmt: skip
        if n > 1:  # the fractured residual gathered, then the norm
            return [ccl("all_gather_async", "all-gather", act(rows, math.ceil(d / n)), act(rows, d), n,
                        num_links, topo1), op(norm, (act(rows, d),), (act(rows, d),))]  # fmt: skip
        return [move("to_memory_config", d), op(norm, (act(rows, d),), (act(rows, d),))]

    def all_reduce_2d(width: int, group: int, composite: bool = False,
                      cast: bool = False) -> list[OpRecord]:  # fmt: skip
        """ccl.py tt_all_reduce on TG: all-gather along the axis (decode: gathered into L1),
        fast_reduce_nc, the reshape back (prefill: the input to DRAM first); ``composite`` (WO
        and FF2 at dim 8192): reduce-scatter, all-gather, reshape. ``cast`` (mlp.py's FF1/FF3
        all-reduces, called without ``dtype``: bfloat8_b outputs gathered as bfloat16, ccl.py
        121-124): typecast to L1 interleaved and back to sharded first."""
        if cast and decode:
            return [move("to_memory_config", width), move("to_memory_config", width),
                    *_ar2d(width, group, "bfloat16")]  # fmt: skip
        return _ar2d(width, group, ccl_dtype, composite)

    def _ar2d(width: int, group: int, dt: str, composite: bool = False) -> list[OpRecord]:
        x = act(rows, width, dtype=dt)
        if composite:
            return [ccl("reduce_scatter_minimal_async", "reduce-scatter", x,
                        act(rows, math.ceil(width / group), dtype=ccl_dtype), group, 1, "line"),
                    ccl("all_gather_async", "all-gather", act(rows, math.ceil(width / group), dtype=ccl_dtype),
                        x, group, 2, "line"), move("reshape", width)]  # fmt: skip
        g = act(rows * group, width, dtype=dt)
        out = [ccl("all_gather_async", "all-gather", x, g, group, 2, "line"),
               move("to_memory_config", width, rows * group),
               op("fast_reduce_nc", (g,), (act(rows, width),)), move("reshape", width)]  # fmt: skip
        return out if decode else [move("to_memory_config", width), *out[:1], *out[2:]]

    # attention
    layer += norm_ops()
    layer.append(mm("linear_qkv", dl, qkv, "qkv"))
    if grid:
        layer += all_reduce_2d(qkv, row)
    if m.qkv_bias:
        layer.append(move("add_bias", qkv))
    if decode and not m.dram_sharded:
        # falcon7b_common falcon_attention.py decode (l1_sharded, Wormhole): explicit attention
        layer += [move(x, qkv) for x in FALCON_DECODE_ATTENTION]
    elif decode:
        if grid:  # attention.py 427-434: slice_mat @ QKV picks this chip's 8 users (TG)
            layer.append(op("matmul_slice", (act(rows, rows), act(rows, qkv)), (act(rows, qkv),),
                            cores=32))  # fmt: skip
        else:
            layer.append(move("sharded_to_interleaved", qkv))
        layer.append(move("reshape_padded", qkv))
        layer.append(move("nlp_create_qkv_heads_decode", qkv))
        if m.qk_norm:  # attention.py norm_reshard: to L1 interleaved, RMSNorm, back, for Q and K
            for w in (nh * hd, nkv * hd):
                layer += [move("to_memory_config", w), op("rms_norm", (act(rows, w),), (act(rows, w),)),
                          move("to_memory_config", w)]  # fmt: skip
        for w in (nh * hd, nkv * hd):
            layer.append(op("rotary_embedding_llama", (act(rows, w),) * 3, (act(rows, w),)))
        new = _l1(b, nkv * hd)
        layer += [op("paged_update_cache", (new,), (_dram(b, nkv * hd, dtype=kv_dt),))] * 2
        q = _l1(1, b, nh, hd)
        cache = _dram(b, nkv, context, hd, dtype=kv_dt)
        layer.append(op("scaled_dot_product_attention_decode", (q, cache, cache), (q,),
                        positions=context, decode=True, fidelity=kv_fid))  # fmt: skip
        layer.append(move("to_memory_config", nh * hd))
        layer.append(move("nlp_concat_heads_decode", nh * hd))
    else:
        layer.append(move("nlp_create_qkv_heads", qkv))
        if m.qk_norm:
            layer += [op("rms_norm", (act(rows, w),), (act(rows, w),)) for w in (nh * hd, nkv * hd)]
        # tt_transformers' attention.py (not Falcon's) typecasts: 738-751 Q and K to bfloat16 for
        # the rotary embedding where QKV's output (690) is not, 767/776 K and V to the cache's
        # dtype, 817 Q to bfloat8_b for SDPA
        tt, qkv_dt = m.dram_sharded, ccl_dtype if grid else "bfloat16"
        if tt and qkv_dt != "bfloat16":
            layer += [cast(nh * hd, qkv_dt, "bfloat16"), cast(nkv * hd, qkv_dt, "bfloat16")]
        for w in (nh * hd, nkv * hd):
            layer.append(op("rotary_embedding_llama", (act(rows, w),) * 3, (act(rows, w),)))
        if tt:
            layer += [cast(nkv * hd, "bfloat16", kv_dt), cast(nkv * hd, qkv_dt, kv_dt)]
        kv_in = kv_dt if tt else "bfloat16"
        layer += [op("fill_cache", (act(rows, nkv * hd, dtype=kv_in),),
                     (_dram(rows, nkv * hd, dtype=kv_dt),))] * 2  # fmt: skip
        if tt:
            layer.append(cast(nh * hd, "bfloat16", "bfloat8_b"))
        q = _dram(1, nh, rows, hd, dtype="bfloat8_b" if tt else "bfloat16")
        kv = _dram(1, nkv, rows, hd, dtype=kv_in)
        layer.append(op("scaled_dot_product_attention", (q, kv, kv), (q,), causal=True))
        layer.append(move("nlp_concat_heads", nh * hd))
    if grid:  # users gathered along the 4-chip axis, WO, all-reduce along the 8-chip axis
        layer.append(ccl("all_gather_async", "all-gather", act(rows, nh * hd), act(rows * row, nh * hd),
                         row, 2, "line"))  # fmt: skip
        if decode:  # attention.py: gathered users to L1, the user-selection matmul
            layer.append(move("to_memory_config", nh * hd, rows * row))
        layer.append(mm("matmul_user_selection", rows * row, nh * hd, "wo"))
        layer.append(mm("linear_wo", nh * hd, dl, "wo"))
        layer += all_reduce_2d(dl, col, composite=d == 8192)
    elif n == 8 and (d // TILE // n) % n == 0:
        # model_config.py USE_FUSED_ALL_GATHER_MATMUL: heads gathered into WO on a ring, WO from
        # DRAM interleaved on an (8, 1) core grid, its output fractured
        # (prefill: all_gather_async, then WO on the prefill 2-D grid)
        layer.append(move("to_memory_config", nh * hd))
        layer.append(ccl("all_gather_matmul_async" if decode else "all_gather_async", "all-gather",
                         act(rows, nh * hd), act(rows, nh * hd * n), n, num_links, topo1))  # fmt: skip
        wo = mm("linear_wo", nh * hd * n, math.ceil(d / n), "wo")
        if decode:
            wo = replace(wo, inputs=(wo.inputs[0], replace(wo.inputs[1], sharded=False)),
                         settings={**wo.settings, "cores": 8, "dram_sharded": False})  # fmt: skip
        layer.append(wo)
        layer.append(move("to_memory_config", math.ceil(d / n)))
    elif n > 1:  # WO's partial sums reduce-scattered (ccl.py tt_all_reduce on a 1-D mesh)
        layer.append(mm("linear_wo", nh * hd, d, "wo"))
        layer.append(ccl("reduce_scatter_minimal_async", "reduce-scatter", act(rows, d, dtype=ccl_dtype),
                         act(rows, math.ceil(d / n), dtype=ccl_dtype), n, num_links, topo1))  # fmt: skip
        layer.append(move("to_memory_config", math.ceil(d / n)))
    else:
        layer.append(mm("linear_wo", nh * hd, d, "wo"))
        layer.append(move("to_memory_config", d))
    res = dl if grid else math.ceil(d / n)
    mlp_start = len(layer) + int(m.gated)  # the second norm, the MLP, the residual add
    if m.gated:  # sequential attention then MLP (Falcon runs them in parallel)
        layer.append(op("add", (act(rows, res),) * 2, (act(rows, res),)))
        layer += norm_ops()
    if grid and decode:  # decoder.py: the norm's output to the MLP's activation config (TG)
        layer.append(move("to_memory_config", dl))
    experts = max(1, math.ceil(m.experts / n)) if m.experts else 1
    if m.experts:  # mixtral_moe.py: gate logits masked to the 8 experts, top-2 weights
        layer += [
            mm("linear_gate", d, TILE, "qkv"),
            op("add", (act(rows, 2 * TILE),) * 2, (act(rows, 2 * TILE),)),
        ]
        if decode:
            layer.append(op("moe", (act(rows, 2 * TILE),) * 3, (act(rows, TILE),)))
        else:
            layer += [op(name, (act(rows, 2 * TILE),), (act(rows, TILE),))
                      for name in ("topk", "add", "eqz", "typecast", "softmax", "mul", "sum")]  # fmt: skip
    for _ in range(experts):
        if m.gated:
            layer.append(mm("linear_ff1", dl, ffn, "ff13"))
            layer.append(mm("linear_ff3", dl, ffn, "ff13"))
            if grid and decode and d < 8192:  # mlp.py: FF1's and FF3's outputs all-reduced
                layer += all_reduce_2d(ffn, row, cast=True) + all_reduce_2d(ffn, row, cast=True)
                layer.append(op("mul_silu", (act(rows, ffn),) * 2, (act(rows, ffn),)))
            elif grid:  # dim 8192 or prefill: reduce-scattered, multiplied, all-gathered
                x = act(rows, ffn, dtype=ccl_dtype)
                y = act(rows, math.ceil(ffn / row), dtype=ccl_dtype)
                layer += [
                    ccl("reduce_scatter_minimal_async", "reduce-scatter", x, y, row, 1, "line")
                ] * 2
                f2 = math.ceil(ffn / row)
                layer.append(op("mul_silu", (act(rows, f2),) * 2, (act(rows, f2),)))
                layer.append(ccl("all_gather_async", "all-gather", act(rows, f2), act(rows, ffn), row, 2,
                                 "line"))  # fmt: skip
                if decode:
                    layer.append(move("to_memory_config", ffn))
            else:
                layer.append(op("mul_silu", (act(rows, ffn),) * 2, (act(rows, ffn),)))
                if decode:  # mlp.py 215-217: to FF2's sharded input config in decode only
                    layer.append(move("to_memory_config", ffn))
        else:
            layer.append(mm("linear_h_to_4h_gelu", dl, ffn, "ff13"))
        layer.append(mm("linear_ff2", ffn, dl, "ff2"))
    if m.experts and decode:
        # mixtral_mlp.py: the expert's matmuls on dram_matmul_config(..., num_cores=8)
        expert_mm = ("linear_ff1", "linear_ff3", "linear_ff2", "linear_h_to_4h_gelu")
        layer = [replace(x, settings={**x.settings, "cores": 8}) if x.name in expert_mm else x
                 for x in layer]  # fmt: skip
    if m.experts and not decode:  # mixtral_moe.py 130-132: the weights unsqueezed to [1, 1, S, 1]
        layer.append(move("reshape", TILE))
    if m.experts:  # the expert's output times its routing weight
        layer.append(op("mul", (act(rows, d), act(rows, TILE)), (act(rows, d),)))
    if grid:  # mlp.py: FF2 all-reduced, reshaped
        layer += all_reduce_2d(dl, col, composite=d == 8192) + [move("reshape", dl)]
    elif n > 1:
        layer.append(ccl("reduce_scatter_minimal_async", "reduce-scatter", act(rows, d, dtype=ccl_dtype),
                         act(rows, math.ceil(d / n), dtype=ccl_dtype), n, num_links, topo1))  # fmt: skip
    if m.experts:  # mixtral_moe.py: reshaped, to the residual config, to DRAM
        layer += [move("reshape", res), move("to_memory_config", res)]
    if decode or m.experts or not m.dram_sharded:  # mlp.py 281-285: in decode only
        layer.append(move("to_memory_config", res))
    layer.append(op("add", (act(rows, res),) * 2, (act(rows, res),)))
    if decode:
        layer.append(move("to_memory_config", res))  # the residual into the next layer's config
    if grid and decode:
        # TG decode matmul configs: QKV 1-D multicast on an (8, 5) grid at 70B/90B, else (8, lm
        # rows) (model_config.py 1047-1059); WO and the user selection on core_grid 4x8 with no
        # program config (attention.py 611-627, "Fix this once self.TG supports dram-sharded
        # matmuls"): their weights DRAM-interleaved; FF1, FF3 and FF2 from DRAM-interleaved
        # weights (mlp.py 59: DRAM_MEMORY_CONFIG on TG) on 1-D configs on an 8x2 grid at dim >=
        # 4096 (mlp.py 106-109, model_config.py 1101-1135), else TT-NN's own config (the grid)
        qkv_rows = 5 if d == 8192 else _lm_grid(d, n)[0]
        ff = 16 if d >= 4096 else s.compute_cores
        tg = {"linear_qkv": (8 * qkv_rows, False), "linear_wo": (32, False),
              "matmul_user_selection": (32, False), "linear_ff1": (ff, False),
              "linear_ff3": (ff, False), "linear_ff2": (ff, False)}  # fmt: skip

        def tg_mm(x: OpRecord) -> OpRecord:
            cores, shard = tg[x.name]
            ins = (x.inputs[0], replace(x.inputs[1], sharded=shard), *x.inputs[2:])
            return replace(
                x, inputs=ins, settings={**x.settings, "cores": cores, "dram_sharded": shard}
            )

        layer = [tg_mm(x) if x.name in tg else x for x in layer]
    ops = [replace(r, count=m.n_layers) for r in layer]
    if vision and m.cross_layers:  # llama_cross_block.py: norm, cross-attention, the text MLP
        xattn = cross_attention(d, m.n_heads, m.n_kv_heads, hd, n, rows, b, decode, topo1)
        cross = [*norm_ops(), *xattn, *layer[mlp_start:], *cross_mlp_gate(d, n, rows, decode)]
        ops += [replace(r, count=m.cross_layers) for r in cross]
        if not decode:  # the image path runs before the prompt's prefill (one image)
            ops = vision_encoder(d, n) + ops

    # embedding and LM head at full size (prefill: the LM head on the last tile of rows only)
    idx = TensorInfo((b if decode else rows,), "uint32", "L1")
    # Falcon's prefill multiplies every prompt row by the LM head (falcon_causallm.py 158-176)
    head_rows = TILE * math.ceil(b / TILE) if decode else (TILE if m.dram_sharded else rows)
    vocab = math.ceil(m.vocab / n)
    head: list[OpRecord] = []
    if decode:  # rope.py: cos/sin rows of this position looked up, laid out per user
        table = _dram(context, hd)  # sized by max_seq_len
        for _ in range(2):
            head.append(
                op("embedding", (TensorInfo((b,), "uint32", "L1"), table), (act(rows, hd),))
            )
            head += [move("reshape", hd), move("permute", hd), move("getitem", hd),
                     move("interleaved_to_sharded", hd)]  # fmt: skip
    head.append(
        op("embedding", (idx, _dram(m.vocab, math.ceil(d / n))), (act(rows, math.ceil(d / n)),))
    )
    head += [move("reshape", math.ceil(d / n)), move("to_memory_config", math.ceil(d / n))]
    tail = [move("slice", res, head_rows)] if not decode and m.dram_sharded else []
    ops = head + ops + tail + norm_ops()
    # lm_head.py: the vocabulary split so no core holds over 668 columns (model_config.py
    # lm_head_core_grid, max_columns_per_device_lm_head); one matmul and a move per split, concat
    lm_rows, lm_cols = _lm_grid(d, n)
    lm_cores = max(1, lm_rows * lm_cols) if m.dram_sharded else s.compute_cores  # not Falcon's
    splits = max(1, math.ceil((m.vocab // n) / (668 * lm_cores))) if m.dram_sharded else 1
    full = m.vocab
    if grid:
        # lm_head.py 38-67 (TG): one [dim/4, 128k/8] weight, DRAM-sharded (interleaved at dim
        # 2048), its partial sums all-reduced along the 4-chip axis (composite, not sharded:
        # to DRAM, reduce-scatter, all-gather, reshape); model.py 425-441: the vocabulary
        # gathered along the 8-chip axis on 2 links
        vocab, full, splits = 128 * 1024 // col, 128 * 1024, 1
    if not m.dram_sharded:  # Falcon's demos: every chip's logits to the host (opfalcon)
        return ops + [mm("linear_lm_head", dl, vocab, "ff2", head_rows),
                      *host_logits(act(head_rows, vocab), s.name)]  # fmt: skip
    # decode and prefill alike (model.py 508-523: prefill slices the last tile of rows and
    # reshards it to the LM head's grid): DRAM-sharded weights, dram_matmul_config (lm_head.py)
    if not decode:
        ops.append(move("interleaved_to_sharded", dl, head_rows))
    dt, fid = rec["ff2"]
    shard = not (grid and d == 2048)
    lg = partial(_l1, head_rows, dtype="bfloat8_b")  # the logits: lm_head.py 144, bfloat8_b
    for _ in range(splits):
        nn = math.ceil(vocab / splits)
        lm = op("linear_lm_head", (_l1(head_rows, dl), _dram(dl, nn, dtype=dt, sharded=shard)),
                (lg(nn),), fidelity=fid, dram_sharded=shard, cores=lm_cores)  # fmt: skip
        ops += [lm, op("sharded_to_interleaved", (lg(nn),), (lg(nn),))]
    ops.append(op("concat", (lg(vocab),), (lg(vocab),)))
    if grid:
        part = _dram(head_rows, math.ceil(vocab / row), dtype=ccl_dtype)
        logits = _dram(head_rows, vocab, dtype=ccl_dtype)
        ops += [move("to_memory_config", vocab, head_rows),
                ccl("reduce_scatter_minimal_async", "reduce-scatter", logits, part, row, 1, "line"),
                ccl("all_gather_async", "all-gather", part, logits, row, 2, "line"),
                move("reshape", vocab, head_rows)]  # fmt: skip
        if decode:
            ops.append(ccl("all_gather_async", "all-gather", act(head_rows, vocab, dtype=ccl_dtype),
                           act(head_rows, full, dtype=ccl_dtype), col, 2, "line"))  # fmt: skip
    elif n > 1 and decode:
        ops.append(
            ccl("all_gather_async", "all-gather", lg(vocab), lg(m.vocab), n, num_links, topo1)
        )
    if not decode:  # no vocabulary gather on device: to row-major, every chip's logits read
        return ops + prefill_logits_to_host(lg(vocab), s.name)
    if argmax_on_device:
        # model.py ttnn_decode_forward with greedy sampling (PERF.md's runs): untilize, argmax,
        # the positions incremented on device (plus_one x 2), the token copied into the input
        ops += [move("untilize", full, head_rows),
                op("argmax", (act(head_rows, full),), (act(head_rows, 1, dtype="uint32"),)),
                op("plus_one", (TensorInfo((b,), "int32", "L1"),), (TensorInfo((b,), "int32", "L1"),)),
                op("plus_one", (TensorInfo((b,), "int32", "L1"),), (TensorInfo((b,), "int32", "L1"),)),
                op("copy", (TensorInfo((b,), "uint32", "L1"),), (TensorInfo((b,), "uint32", "L1"),))]  # fmt: skip
    else:  # logits to the host: untilized, moved to DRAM
        ops += [move("untilize", full, head_rows), move("to_memory_config", full, head_rows)]
    return ops


def resident_bytes(
    model: str | ModelSpec, tp: int, batch: int, context: int, recipe: str | None = None
) -> float:
    """Bytes one chip holds: its share of the weights and the KV cache of its users."""
    m = get_model(model)
    r = RECIPES[recipe or m.recipe]
    b = lambda k: DTYPE_BYTES[r[k][0]]  # noqa: E731
    d, hd = m.dim, m.head_dim
    attn = d * (m.n_heads + 2 * m.n_kv_heads) * hd * b("qkv") + m.n_heads * hd * d * b("wo")
    mlp = (2 if m.gated else 1) * d * m.ffn_dim * b("ff13") + m.ffn_dim * d * b("ff2")
    mlp *= max(1, m.experts)
    per_layer = (attn + mlp) / tp
    kv_bytes = DTYPE_BYTES[r.get("kv", ("bfloat8_b", ""))[0]]
    kv = 2 * batch * max(1, math.ceil(m.n_kv_heads / tp)) * context * hd * kv_bytes
    head = 2 * m.vocab * d * 2 / tp
    return m.n_layers * (per_layer + kv) + head


def predict_model(
    model: str | ModelSpec,
    system: System | str,
    *,
    tp: int | None = None,
    batch: int = 1,
    phase: str = "decode",
    context: int = CONTEXT,
    prompt: int = PROMPT,
    recipe: str | None = None,
    num_links: int = 1,
    ccl_dtype: str = "bfloat8_b",
    calibration: OpCalibration | None = None,
    program: str = "tt_transformers",
) -> OpPrediction:
    """The per-op prediction of one step of ``model`` on ``system``: DP replicas of TP=``tp``
    (default every chip) sharing ``batch`` users (decode) or one user's prefill (TTFT).
    ``program="llama3_70b_galaxy"``: tt-metal's Galaxy Llama decode (TP=32 on a Galaxy, its
    prefetcher, fused CCLs and its measured op-to-op gap; :mod:`opgalaxy`); its prefill, traced,
    as tt_transformers' TG prefill ops at that op-to-op gap."""
    s = get_system(system)
    n = int(tp or s.num_chips)
    if batch < 1:
        raise ConfigError(f"batch={batch}.\nfix: batch >= 1.")
    if program not in PROGRAMS:
        raise ConfigError(f"program={program!r}.\nfix: one of {PROGRAMS}.")
    if program == "llama3_70b_galaxy":
        m = get_model(model)
        if s.num_chips != 32 or n != 32:
            raise ConfigError(
                f"the Galaxy Llama program is TP=32 on a 32-chip Galaxy (got {s.name}, tp={n})."
                "\nfix: --system galaxy; or program='tt_transformers'."
            )
        if phase == "prefill":
            # its prefill is traced (tt/generator.py 135, 244-245: enable_trace=True,
            # _easy_trace_prefill); its op list is not written out: tt_transformers' TG prefill
            # ops, each at least the Galaxy's measured traced op-to-op gap
            pre = model_program(m, s, tp=32, phase="prefill", prompt=prompt, recipe=recipe)
            return price(pre, s, phase="prefill", calibration=calibration,
                         dispatch=GALAXY_OP_TO_OP_SECONDS)  # fmt: skip
        g = galaxy_program(m.dim, m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, m.ffn_dim,
                           batch=batch, context=context)  # fmt: skip
        return price(g, s, phase="decode", users=batch, calibration=calibration,
                     resident_bytes=resident_bytes(model, n, batch, context, recipe),
                     dispatch=GALAXY_OP_TO_OP_SECONDS)  # fmt: skip
    vision = program == "llama_vision"
    if vision and (not get_model(model).cross_layers or _mesh_2d(s, n)):
        raise ConfigError(f"program='llama_vision' needs a Llama 3.2 Vision model at TP <= 8 (got "
                          f"{get_model(model).name}, tp={n}).\nfix: program='tt_transformers'.")  # fmt: skip
    replicas = s.num_chips // n if n else 1
    per = max(1, math.ceil(batch / replicas))
    ops = model_program(
        model, s, tp=n, batch=per, phase=phase, context=context, prompt=prompt, recipe=recipe,
        num_links=num_links, ccl_dtype=ccl_dtype, vision=vision,
    )  # fmt: skip
    return price(
        ops, s, phase=phase, users=per if phase == "decode" else 1, replicas=replicas,
        calibration=calibration, resident_bytes=resident_bytes(model, n, per, context, recipe),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Published rows: the calibration rows and every other Wormhole LLM row (out of sample)
# ---------------------------------------------------------------------------------------------

PROGRAMS = ("tt_transformers", "llama3_70b_galaxy", "llama_vision")
PERF_MD = "models/tt_transformers/PERF.md (performance mode, batch 1)"
README = "models/README.md LLM table"
SEED = "seed guide §8.2 (llama2_70b demo)"


@dataclass(frozen=True)
class Row:
    """A published figure: decode tok/s/user or TTFT ms, of ``model`` at TP=``tp`` on ``system``."""

    label: str
    model: str
    system: str
    tp: int
    batch: int
    metric: str  # "tok/s/u" or "TTFT ms"
    value: float
    source: str
    fitted: bool = False
    ccl_dtype: str = "bfloat8_b"
    program: str = "tt_transformers"

    @property
    def phase(self) -> str:
        return "decode" if self.metric == "tok/s/u" else "prefill"

    def predicted(self, cal: OpCalibration | None = None) -> tuple[float, OpPrediction]:
        p = predict_model(self.model, self.system, tp=self.tp, batch=self.batch, phase=self.phase,
                          ccl_dtype=self.ccl_dtype, calibration=cal, program=self.program)  # fmt: skip
        v = p.tokens_per_second_per_user if self.phase == "decode" else p.step_seconds * 1e3
        return v, p


def _perf(
    model: str, system: str, tp: int, toks: float, ttft: float | None, fit: bool = False
) -> list[Row]:
    label = f"{model} {system.upper()}" + (f" TP={tp}" if tp not in (1, 2, 8, 32) else "")
    sysname = {"tg": "galaxy", "t3k": "t3000"}.get(system, system)
    out = [Row(label, model, sysname, tp, 1, "tok/s/u", toks, PERF_MD, fit)]
    if ttft is not None:
        out.append(Row(label, model, sysname, tp, 1, "TTFT ms", ttft, PERF_MD, fit))
    return out


_G, _G70, _L70 = "llama3_70b_galaxy", "llama-3.1-70b Galaxy TP=32", "llama-3.1-70b"
_V = "llama-3.2-11b"
ROWS: tuple[Row, ...] = tuple(
    _perf("llama-3.1-8b", "n150", 1, 28.3, 104, True)
    + _perf("llama-3.1-8b", "n300", 2, 44.2, 67, True)
    + _perf("llama-3.1-8b", "t3k", 8, 64.3, 53, True)
    + _perf("llama-3.1-70b", "t3k", 8, 16.6, 164, True)
    + [
        Row(f"{_L70} {hw} batch {b}", _L70, sy, 8, b, "tok/s/u", v, SEED, True, "bfloat16")
        for hw, sy, b, v in (("T3000", "t3000", 32, 15.1), ("Galaxy 4x(2x4)", "galaxy", 128, 14.3))
    ]
    + _perf("llama-3.2-1b", "n150", 1, 87.8, 26)
    + _perf("llama-3.2-1b", "n300", 2, 105.9, 22)
    + _perf("llama-3.2-1b", "t3k", 8, 119.8, 32)
    + _perf("llama-3.2-1b", "tg", 32, 51.0, None)
    + _perf("llama-3.2-3b", "n150", 1, 54.0, 55)
    + _perf("llama-3.2-3b", "n300", 2, 68.0, 39)
    + _perf("llama-3.2-3b", "t3k", 8, 68.5, 52)
    + _perf("llama-3.2-3b", "tg", 32, 33.5, None)
    + _perf("llama-3.1-8b", "tg", 32, 29.5, None)
    + [
        Row("llama-3.1-8b T3K DP=4", "llama-3.1-8b", "t3000", 2, 4, "tok/s/u", 39.6, PERF_MD),
        Row("llama-3.1-8b T3K DP=4", "llama-3.1-8b", "t3000", 2, 4, "TTFT ms", 58, PERF_MD),
        Row("llama-3.1-8b T3K DP=8", "llama-3.1-8b", "t3000", 1, 8, "tok/s/u", 24.9, PERF_MD),
        Row("llama-3.1-8b T3K DP=8", "llama-3.1-8b", "t3000", 1, 8, "TTFT ms", 86, PERF_MD),
    ]
    + _perf("llama-3.2-11b", "n150", 1, 55.5, 58)
    + _perf("llama-3.2-11b", "n300", 2, 44.1, 67)
    + _perf("llama-3.2-11b", "t3k", 8, 62.7, 47)
    + _perf("llama-3.2-11b", "tg", 32, 29.5, None)
    + _perf("llama-3.1-70b", "tg", 32, 12.7, None)
    + [
        Row("llama-3.1-70b TG DP=4", "llama-3.1-70b", "galaxy", 8, 4, "tok/s/u", 14.8, PERF_MD),
        Row("llama-3.1-70b TG DP=4", "llama-3.1-70b", "galaxy", 8, 4, "TTFT ms", 189, PERF_MD),
    ]
    + _perf("llama-3.2-90b", "t3k", 8, 6.0, 5535)
    + _perf("qwen2.5-7b", "n300", 2, 24.6, 92)
    + _perf("qwen2.5-72b", "t3k", 8, 15.2, 225)
    + _perf("qwen2.5-32b", "t3k", 8, 22.4, 190)
    + _perf("qwen3-32b", "t3k", 8, 22.9, 123)
    + _perf("phi-3.5-mini", "n150", 1, 43.2, 98)
    + _perf("phi-3.5-mini", "n300", 2, 57.8, 62)
    + _perf("phi-3.5-mini", "t3k", 8, 48.8, 51)
    + _perf("mistral-7b", "n150", 1, 29.75, 100.24)
    + _perf("mistral-7b", "n300", 2, 47.01, 65.95)
    + _perf("mistral-7b", "t3k", 8, 67.82, 53.93)
    + _perf("phi-3-mini-128k", "n150", 1, 45.0, 73.32)
    + _perf("phi-3-mini-128k", "n300", 2, 60.87, 114.94)
    + _perf("phi-4", "n300", 2, 37.34, 123.33)
    + _perf("mixtral-8x7b", "t3k", 8, 67.82, 53.93)
    + [
        # models/demos/llama3_70b_galaxy: its own decode program (TTFT: its traced prefill, the
        # op list not written out: tt_transformers' TG prefill at its traced op-to-op gap)
        Row(f"{_G70} batch 32", "llama-3.1-70b", "galaxy", 32, 32, met, v, README, program=_G)
        for met, v in (("tok/s/u", 72.5), ("TTFT ms", 53))
    ]
    + [  # vLLM's Llama 3.2 11B Vision: the multimodal program (cross-attention, image path)
        Row(f"{_V} n300 batch 16", _V, "n300", 2, 16, met, v, README, program="llama_vision")
        for met, v in (("tok/s/u", 18.1), ("TTFT ms", 714))
    ]
    + [
        Row(f"{mo} {hw} batch {b}", mo, sy, tp, b, met, v, README)
        for mo, hw, sy, tp, b, met, v in (
            ("qwen3-32b", "QuietBox", "t3000", 8, 32, "tok/s/u", 22.1),
            ("qwen3-32b", "QuietBox", "t3000", 8, 32, "TTFT ms", 109),
            ("qwq-32b", "QuietBox", "t3000", 8, 32, "tok/s/u", 25.2),
            ("qwq-32b", "QuietBox", "t3000", 8, 32, "TTFT ms", 133),
            ("deepseek-r1-distill-llama-70b", "QuietBox", "t3000", 8, 32, "tok/s/u", 15.9),
            ("deepseek-r1-distill-llama-70b", "QuietBox", "t3000", 8, 32, "TTFT ms", 159),
            ("llama-3.1-70b", "QuietBox", "t3000", 8, 32, "tok/s/u", 15.9),
            ("llama-3.1-70b", "QuietBox", "t3000", 8, 32, "TTFT ms", 159),
            ("qwen2.5-7b", "n300", "n300", 2, 32, "tok/s/u", 24.6),
            ("qwen2.5-7b", "n300", "n300", 2, 32, "TTFT ms", 86),
            ("qwen2.5-72b", "QuietBox", "t3000", 8, 32, "tok/s/u", 15.4),
            ("qwen2.5-72b", "QuietBox", "t3000", 8, 32, "TTFT ms", 223),
            ("falcon-7b", "n150", "n150", 1, 32, "tok/s/u", 18.5),
            ("falcon-7b", "n150", "n150", 1, 32, "TTFT ms", 70),
            ("falcon-7b", "QuietBox DP=8", "t3000", 1, 256, "tok/s/u", 15.9),
            ("falcon-7b", "QuietBox DP=8", "t3000", 1, 256, "TTFT ms", 87),
            ("falcon-7b", "Galaxy DP=32", "galaxy", 1, 1024, "tok/s/u", 13.2),
            ("falcon-7b", "Galaxy DP=32", "galaxy", 1, 1024, "TTFT ms", 121),
            ("falcon-40b", "QuietBox TP=8", "t3000", 8, 32, "tok/s/u", 11.9),
            ("llama-3.1-8b", "n150", "n150", 1, 32, "tok/s/u", 26.0),
            ("llama-3.1-8b", "n150", "n150", 1, 32, "TTFT ms", 104),
            ("llama-3.2-1b", "n150", "n150", 1, 32, "tok/s/u", 80.5),
            ("llama-3.2-1b", "n150", "n150", 1, 32, "TTFT ms", 23),
            ("llama-3.2-3b", "n150", "n150", 1, 32, "tok/s/u", 46.6),
            ("llama-3.2-3b", "n150", "n150", 1, 32, "TTFT ms", 52),
            ("mistral-7b", "n150", "n150", 1, 32, "tok/s/u", 28.7),
            ("mistral-7b", "n150", "n150", 1, 32, "TTFT ms", 99),
            ("mixtral-8x7b", "QuietBox", "t3000", 8, 32, "tok/s/u", 24.9),
            ("mixtral-8x7b", "QuietBox", "t3000", 8, 32, "TTFT ms", 122),
        )
    ]
)


def evaluate_rows(
    rows: Sequence[Row] = ROWS, cal: OpCalibration | None = None
) -> list[dict[str, Any]]:
    """Each row published vs predicted: error and the dominant op family."""
    out = []
    for r in rows:
        v, p = r.predicted(cal)
        out.append({
            "label": r.label, "metric": r.metric, "published": r.value, "predicted": v,
            "error": v / r.value - 1, "dominant": p.dominant, "fitted": r.fitted,
            "source": r.source,
        })  # fmt: skip
    return out


def fit_per_op(rows: Sequence[Row] = ROWS) -> OpCalibration:
    """Least squares (log error) of the per-op model's four factors on the calibration rows
    only: DRAM and compute efficiency, the dispatch cost per op of a traced decode and of a
    host-dispatched prefill."""
    import numpy as np
    from scipy.optimize import least_squares

    rows = [r for r in rows if r.fitted]

    def cal_of(x: Any, note: str = "") -> OpCalibration:
        return OpCalibration(float(x[0]), float(x[1]),
                             {"decode": float(x[2]) * 1e-6, "prefill": float(x[3]) * 1e-6}, note)  # fmt: skip

    def res(x: Any) -> Any:
        c = cal_of(x)
        return np.array([math.log(r.predicted(c)[0] / r.value) for r in rows])

    sol = least_squares(res, np.array([0.9, 0.5, 6.0, 30.0]),
                        bounds=([0.3, 0.05, 0.0, 0.0], [1.3, 1.0, 200.0, 2000.0]))  # fmt: skip
    rms = float(np.sqrt(np.mean(sol.fun**2)))
    return cal_of(sol.x, f"fitted on {len(rows)} calibration rows (PERF.md Llama-3.1-8B/70B "
                         f"batch 1, seed §8.2), rms log error {rms:.3f}")  # fmt: skip


def markdown_table(results: Sequence[dict[str, Any]]) -> str:
    lines = ["| row | metric | published | predicted | error | dominant op family | source |",
             "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in results:
        lines.append(
            f"| {r['label']}{' (fitted)' if r['fitted'] else ''} | {r['metric']} | "
            f"{r['published']:g} | {r['predicted']:.1f} | {r['error']:+.0%} | {r['dominant']} | "
            f"{r['source']} |"
        )
    return "\n".join(lines)


def summary(results: Sequence[dict[str, Any]]) -> str:
    oos = [abs(r["error"]) for r in results if not r["fitted"]]
    cal = [abs(r["error"]) for r in results if r["fitted"]]
    return (
        f"out of sample: {len(oos)} rows, median |error| {statistics.median(oos):.1%}, "
        f"{sum(e <= 0.10 for e in oos)} within 10%, {sum(e <= 0.25 for e in oos)} within 25%; "
        f"calibration: {len(cal)} rows, max |error| {max(cal):.1%}"
    )


# ---------------------------------------------------------------------------------------------
# Layout search
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpPlanRow:
    """One layout: DP replicas x TP chips, its weight recipe and its per-op prediction."""

    layout: str
    tp: int
    dp: int
    batch_per_replica: int
    recipe: str
    prediction: OpPrediction

    @property
    def fits(self) -> bool:
        return self.prediction.fits

    def to_dict(self) -> dict[str, Any]:
        p = self.prediction
        return {"layout": self.layout, "tp": self.tp, "dp": self.dp,
                "batch_per_replica": self.batch_per_replica, "recipe": self.recipe,
                "fits": self.fits, **p.to_dict()}  # fmt: skip


def plan_model(
    model: str,
    system: str,
    batch: int | None = None,
    batch_per_replica: int | None = None,
    context: int = CONTEXT,
    num_links: int | None = None,
    phase: str = "decode",
) -> list[OpPlanRow]:
    """Every TP size that divides the system (DP replicas fill it) under each weight recipe,
    priced op by op and ranked: layouts that fit first, by tok/s/user, then tok/s."""
    m = get_model(model)
    s = get_system(system)
    rows = []
    for tp in [t for t in range(1, s.num_chips + 1) if s.num_chips % t == 0]:
        dp = s.num_chips // tp
        per = batch_per_replica or max(1, math.ceil((batch or 1) / dp))
        if per > 32 and phase == "decode":
            continue  # tt_transformers decodes at most 32 users per replica
        for recipe in dict.fromkeys((m.recipe, "bfp8")):
            p = predict_model(m, s, tp=tp, batch=per * dp, phase=phase, context=context,
                        recipe=recipe, num_links=num_links or 1)  # fmt: skip
            layout = f"TP={tp}" if dp == 1 else f"DP={dp} x TP={tp}"
            rows.append(OpPlanRow(layout, tp, dp, per, recipe, p))
        if tp == 32 and phase == "decode" and per <= 32:
            try:  # tt-metal's Galaxy Llama, where the model's shapes fit its 8x4 program
                g = predict_model(
                    m, s, tp=32, batch=per, context=context, program="llama3_70b_galaxy"
                )
            except ConfigError:
                continue
            rows.append(OpPlanRow("TP=32 (llama3_70b_galaxy)", 32, 1, per, "galaxy", g))
    if not rows:
        raise ConfigError(
            f"{m.name} on {s.name} at batch {batch}: more than 32 users per replica in every "
            "layout.\nfix: a batch of at most 32 x the system's chips."
        )
    return sorted(rows, key=lambda r: (not r.fits, -round(r.prediction.tokens_per_second_per_user, 6),
                                       -r.prediction.tokens_per_second))  # fmt: skip


def plan_table(rows: Sequence[OpPlanRow], title: str) -> Any:
    """A compact ``rich`` table of ranked layouts (fits a 100-column terminal)."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in ("#", "layout", "users/rep", "weights", "GB/chip", "fits", "tok/s/u", "tok/s",
                "step ms", "dominant"):  # fmt: skip
        t.add_column(
            col, justify="left" if col in ("layout", "weights", "fits", "dominant") else "right"
        )
    for i, r in enumerate(rows):
        p = r.prediction
        t.add_row(str(i + 1), r.layout, str(r.batch_per_replica), r.recipe,
                  "?" if p.resident_bytes is None else f"{p.resident_bytes / 1e9:.1f}",
                  "yes" if r.fits else "NO", f"{p.tokens_per_second_per_user:.1f}",
                  f"{p.tokens_per_second:.0f}", f"{p.step_seconds * 1e3:.2f}", p.dominant)  # fmt: skip
    return t


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ttjax._src.tools.opmodels {table,calibrate} [--write]``."""
    ap = argparse.ArgumentParser(prog="opmodels")
    ap.add_argument("command", choices=("table", "calibrate"))
    ap.add_argument("--write", action="store_true", help="store the fit (calibrate)")
    ns = ap.parse_args(argv)
    cal = OP_CALIBRATION
    if ns.command == "calibrate":
        cal = fit_per_op()
        print(cal.to_dict())
        if ns.write:
            save_op_calibration(cal)
    results = evaluate_rows(ROWS, cal)
    print(markdown_table(results))
    print(summary(results))
    return 0


__all__ = [
    "MODELS", "ROWS", "ModelSpec", "OpPlanRow", "Row", "evaluate_rows", "fit_per_op", "get_model",
    "markdown_table", "model_program", "plan_model", "plan_table", "predict_model",
    "resident_bytes", "spec_from_hf", "summary"
]  # fmt: skip

if __name__ == "__main__":
    sys.exit(main())
