"""Llama 3.2 Vision (Mllama) as tt_transformers' multimodal code runs it, written out as TT-NN
ops to price op by op (:mod:`ttjax._src.tools.opcost`): the cross-attention blocks of the text
decoder and, for the time to first token, the image path (vision encoder, projection, the
cross-attention K/V of every cross layer).

tt-metal 821525122af5, models/tt_transformers/tt/multimodal/: ``llama_cross_block.py``
``forward`` (gated cross-attention and gated MLP), ``llama_cross_attention.py``
``forward_decode`` 206-304 / ``forward_prefill`` 306-400 / ``compute_xattn_kv_cache`` 131-204,
``llama_cross_attention_transformer_text.py`` (``setup_cache`` 254-277: a bfloat16 K and V
cache of ``vision_max_num_chunks x nearest_32(vision_chunk_ntok)`` positions per cross layer;
``_init_fusion_schedule``: one cross block before every fifth text layer),
``llama_vision_encoder.py``, ``llama_image_attention.py``, ``llama_image_mlp.py``,
``llama_cross_attention_transformer_vision.py`` (the projection). The text demo
(``simple_text_demo.py``, PERF.md's rows) runs none of this: model_config.py 1517-1520 drops
the cross-attention layers from ``n_layers`` (32 of 40 at 11B, 80 of 100 at 90B).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ttjax._src.tools.opcost import OpRecord, TensorInfo

TILE = 32


@dataclass(frozen=True)
class VisionSpec:
    """Mllama's vision encoder (Llama-3.2-11B/90B-Vision config.json ``vision_config``)."""

    dim: int = 1280  # hidden_size
    layers: int = 32  # num_hidden_layers (local)
    global_layers: int = 8  # num_global_layers
    heads: int = 16  # num_attention_heads
    mlp: int = 5120  # intermediate_size
    chunks: int = 4  # max_num_tiles
    image: int = 560  # image_size
    patch: int = 14  # patch_size
    output_dim: int = 7680  # vision_output_dim: the last layer and 5 intermediate ones

    @property
    def chunk_tokens(self) -> int:
        """model_config.py ``vision_chunk_ntok``: patches per chunk plus the class token."""
        return (self.image // self.patch) ** 2 + 1

    @property
    def seq(self) -> int:
        """The cross-attention cache length (``setup_cache``): chunks x the tile-padded chunk."""
        return self.chunks * TILE * math.ceil(self.chunk_tokens / TILE)

    @property
    def head_dim_padded(self) -> int:
        """model_config.py 1216-1226: the fused QKV uses ``nearest_32(vision_head_dim)``."""
        return TILE * math.ceil(self.dim // self.heads / TILE)


MLLAMA_VISION = VisionSpec()


def _t(*shape: int, dtype: str = "bfloat16", buf: str = "DRAM") -> TensorInfo:
    return TensorInfo(tuple(shape), dtype, buf, False)


def _op(name: str, ins: Sequence[TensorInfo], outs: Sequence[TensorInfo], **kw: Any) -> OpRecord:
    return OpRecord(name, tuple(ins), tuple(outs), kw)


def _mm(name: str, m: int, k: int, n: int, buf: str = "DRAM", fidelity: str = "hifi4",
        **kw: Any) -> OpRecord:  # fmt: skip
    """A matmul of bfloat16 weights from DRAM interleaved (the multimodal code's dtype,
    simple_vision_demo.py ``dtype=ttnn.bfloat16``) at HiFi4 (``compute_kernel_config_hifi4``)."""
    return _op(name, (_t(m, k, buf=buf), _t(k, n)), (_t(m, n, buf=buf),), fidelity=fidelity,
               dram_sharded=False, **kw)  # fmt: skip


def cross_attention(
    dim: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    chips: int,
    rows: int,
    batch: int,
    decode: bool,
    topology: str,
    vision: VisionSpec = MLLAMA_VISION,
) -> list[OpRecord]:
    """The cross-attention half of one ``TtLlamaCrossAttentionTransformerBlock`` on one of
    ``chips`` TP chips (heads split over them), up to its gated residual add: decode for
    ``batch`` users (``rows`` tile-padded), or the prefill of a ``rows``-token prompt (with the
    K/V of the image computed and cached, ``compute_xattn_kv_cache``). The norms and the MLP
    are the text layers' own ops (``RMSNorm``, ``MLP`` of tt/)."""
    nh, nkv = max(1, n_heads // chips), max(1, n_kv_heads // chips)
    s = vision.seq
    buf = "L1" if decode else "DRAM"
    x, q = _t(rows, dim, buf=buf), _t(rows, nh * head_dim, buf=buf)
    cache = _t(batch if decode else 1, nkv, s, head_dim)  # bfloat16, DRAM (setup_cache)
    mm = {"cores": 64} if decode else {"mcast": "2d"}
    ops: list[OpRecord] = []
    if not decode:  # compute_xattn_kv_cache: xk, xv of the image tokens, k_norm, to the cache
        kv = _t(s, nkv * head_dim)
        ops += [_mm("linear_xk", s, dim, nkv * head_dim, mcast="2d"),
                _mm("linear_xv", s, dim, nkv * head_dim, mcast="2d")]  # fmt: skip
        ops += [_op(n, (kv,), (kv,)) for n in ("reshape", "reshape", "nlp_create_qkv_heads")]
        ops += [_op("rms_norm", (kv,), (kv,))]
        ops += [_op(n, (kv,), (kv,)) for n in ("interleaved_to_sharded",) * 2]
        ops += [_op("fill_cache", (kv,), (cache,))] * 2
    ops.append(_op("sharded_to_interleaved" if decode else "reshape", (x,), (x,)))
    ops.append(_mm("linear_xq", rows, dim, nh * head_dim, buf, **mm))
    heads = ("nlp_create_qkv_heads", "to_layout", "slice", "transpose", "to_layout") if decode \
        else ("nlp_create_qkv_heads",)  # fmt: skip
    ops += [_op(n, (q,), (q,)) for n in heads]
    ops.append(_op("rms_norm", (q,), (q,)))  # q_norm
    if decode:  # SDPA decode over the image's positions, no causal mask, K and V bfloat16
        q4 = _t(1, batch, nh, head_dim, buf="L1")
        ops.append(_op("scaled_dot_product_attention_decode", (q4, cache, cache), (q4,),
                       positions=s, decode=True))  # fmt: skip
    else:
        q4 = _t(1, nh, rows, head_dim)
        ops.append(_op("scaled_dot_product_attention", (q4, cache, cache), (q4,), causal=False))
    ops.append(_op("mul", (q, q), (q,)))  # full_text_row_masked_out_mask
    tail = ("to_layout", "transpose", "slice", "to_layout", "nlp_concat_heads", "reshape") \
        if decode else ("nlp_concat_heads",)  # fmt: skip
    ops += [_op(n, (q,), (q,)) for n in tail]
    ops.append(_mm("linear_wo_x", rows, nh * head_dim, dim, buf, **mm))
    if chips > 1:  # reduce_scatter_minimal_async, num_links=1
        ops.append(_op("reduce_scatter_minimal_async", (_t(rows, dim, buf=buf),),
                       (_t(rows, math.ceil(dim / chips), buf=buf),), kind="reduce-scatter",
                       group_size=chips, num_links=1, topology=topology))  # fmt: skip
    part = _t(rows, math.ceil(dim / chips), buf=buf)
    ops += [_op("to_memory_config", (part,), (part,)), _op("to_memory_config", (part,), (part,)),
            _op("tanh", (_t(1, dim),), (_t(1, dim),)), _op("mul", (part, part), (part,)),
            _op("add", (part, part), (part,))]  # fmt: skip
    return ops


def cross_mlp_gate(dim: int, chips: int, rows: int, decode: bool) -> list[OpRecord]:
    """llama_cross_block.py: the MLP's output masked and gated by ``tanh(gate_ffwd)`` (its
    move to DRAM and the residual add are the text layer's own ops)."""
    part = _t(rows, math.ceil(dim / chips), buf="L1" if decode else "DRAM")
    return [_op("mul", (part, part), (part,)), _op("tanh", (_t(1, dim),), (_t(1, dim),)),
            _op("mul", (part, part), (part,))]  # fmt: skip


def vision_encoder(text_dim: int, chips: int, vision: VisionSpec = MLLAMA_VISION) -> list[OpRecord]:
    """The image path of one image (``vision.chunks`` tiles) on one of ``chips`` TP chips:
    the patch embedding as a matmul, ``layers + global_layers`` encoder layers over the whole
    padded sequence (layer norm, fused QKV with heads padded to 32, SDPA without a causal mask,
    WO, GELU MLP; each TP output all-gathered on 1 link and summed with ``fast_reduce_nc``,
    llama_image_attention.py 290-307, llama_image_mlp.py 105-120), then the projection of the
    concatenated intermediate layers to the text dim (llama_cross_attention_transformer_vision.py
    95-117: all-gathered on 1 link, line)."""
    s, d, c = vision.seq, vision.dim, chips
    hp = vision.head_dim_padded
    heads = max(1, vision.heads // c)
    x = _t(s, d)
    patches = vision.chunks * (vision.image // vision.patch) ** 2
    ops = [_mm("linear_patch_embedding", patches, 3 * vision.patch**2, d, mcast="2d")]
    ops += [_op(n, (x,), (x,)) for n in ("add", "add", "layer_norm", "concat")]

    def all_reduce() -> list[OpRecord]:
        if c == 1:
            return []
        g = _t(c * s, d)
        return [_op("all_gather_async", (x,), (g,), kind="all-gather", group_size=c,
                    num_links=1, topology="line"), _op("fast_reduce_nc", (g,), (x,))]  # fmt: skip

    layer = [_op("layer_norm", (x,), (x,)),
             _mm("linear_image_qkv", s, d, 3 * hp * heads, mcast="2d"),
             _op("nlp_create_qkv_heads", (_t(s, 3 * hp * heads),), (_t(s, 3 * hp * heads),)),
             _op("scaled_dot_product_attention", (_t(1, heads, s, hp),) * 3, (_t(1, heads, s, hp),),
                 causal=False),
             _op("nlp_concat_heads", (_t(s, hp * heads),), (_t(s, hp * heads),)),
             _mm("linear_image_wo", s, hp * heads, d, mcast="2d"), *all_reduce(),
             _op("add", (x, x), (x,)), _op("layer_norm", (x,), (x,)),
             _mm("linear_image_fc1_gelu", s, d, math.ceil(vision.mlp / c), mcast="2d"),
             _mm("linear_image_fc2", s, math.ceil(vision.mlp / c), d, mcast="2d"), *all_reduce(),
             _op("add", (x, x), (x,))]  # fmt: skip
    ops += [OpRecord(r.name, r.inputs, r.outputs, r.settings, vision.layers + vision.global_layers)
            for r in layer]  # fmt: skip
    ops += [_op("layer_norm", (x,), (x,)), _op("concat", (_t(s, vision.output_dim),), (_t(s, vision.output_dim),)),
            _mm("linear_vision_projection", s, vision.output_dim, math.ceil(text_dim / c), mcast="2d")]  # fmt: skip
    if c > 1:
        y = _t(s, text_dim)
        ops.append(_op("all_gather_async", (_t(s, math.ceil(text_dim / c)),), (y,),
                       kind="all-gather", group_size=c, num_links=1, topology="line"))  # fmt: skip
    return ops


__all__ = ["MLLAMA_VISION", "VisionSpec", "cross_attention", "cross_mlp_gate", "vision_encoder"]
