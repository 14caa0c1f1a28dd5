"""tt-metal's Galaxy Llama (``models/demos/llama3_70b_galaxy``) written out as the TT-NN ops one
decode step runs on each chip of the 8x4 mesh, to price op by op (:mod:`ttjax._src.tools.opcost`).

It is another program than tt_transformers' TG branch: a ``dram_prefetcher`` on its own
sub-device streams every decoder weight into a global circular buffer while the other ops run,
the matmuls run on a 24-core ring from that buffer, and the CCLs are fused with the ops around
them. Per layer 16 ops (tt-metal 821525122af5, ``tt/llama_decoder.py`` ``forward``,
``tt/llama_attention.py`` ``forward_decode``, ``tt/llama_mlp.py`` ``forward``,
``tt/llama_ccl.py``), the same 16 its CI times per decoder layer
(``tests/decoder_perf_targets_4u.json``); after the layers the 22 ops of its ``model_tail``
list (norm, LM head, all-reduce, on-device top-k sampling).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ttjax._src.core.errors import ConfigError
from ttjax._src.tools.opcost import OpRecord, TensorInfo

TILE = 32
RING_CORES = 24  # model_config.py: RING_SIZE = 24 (the prefetcher's receiver cores)
ROWS, COLS = 8, 4  # the 8x4 mesh: cluster_axis 0 has 8 chips, cluster_axis 1 has 4
# model_config.py: GALAXY_NUM_LINKS {"6U": 4, "4U": 3}, CCL_TOPOLOGY {"6U": Ring, "4U": Linear}
GALAXY_LINKS = {"6U": 4, "4U": 3}
GALAXY_TOPOLOGY = {"6U": "ring", "4U": "line"}
# tests/decoder_perf_targets_4u.json: the op-to-op gap of every one of the 16 decoder ops is
# 0.67-1.05 us (traced, sub-devices); the program's per-op floor, measured, not fitted.
GALAXY_OP_TO_OP_SECONDS = 0.8e-6
PADDED_VOCAB = 128 * 1024  # model_config.py: padded_vocab_size = 128 * 1024


def _ring_pad(n: int) -> int:
    """A ring matmul's N per chip, padded to whole tiles on each of the 24 ring cores
    (model_config.py's "Use padded N": 1280 -> 1536, 2048 -> 2304, 3584 -> 3840)."""
    step = TILE * RING_CORES
    return math.ceil(n / step) * step


def galaxy_program(
    dim: int,
    n_layers: int,
    n_heads: int,
    n_kv_heads: int,
    head_dim: int,
    ffn_dim: int,
    *,
    batch: int = 32,
    context: int = 256,
    galaxy: str = "6U",
) -> list[OpRecord]:
    """The per-chip TT-NN ops of one decode step of the Galaxy Llama at ``batch`` users (at most
    32: 8 per column of 4 chips in SDPA) reading ``context`` KV positions."""
    if galaxy not in GALAXY_LINKS:
        raise ConfigError(f"galaxy={galaxy!r}.\nfix: one of {sorted(GALAXY_LINKS)}.")
    if not 1 <= batch <= 32 or n_heads % ROWS or n_kv_heads % ROWS or dim != 8192:
        raise ConfigError(
            f"the Galaxy Llama runs 1..32 users of a dim-8192 model (fused_rms_1_1_32_8192) with "
            f"heads and kv heads split over 8 (got batch={batch}, heads={n_heads}/{n_kv_heads}, "
            f"dim={dim}).\nfix: a Llama-3.1/3.3-70B-like config, batch <= 32."
        )
    links, topo = GALAXY_LINKS[galaxy], GALAXY_TOPOLOGY[galaxy]
    r = TILE  # decode rows: 32 users (padded) per chip
    users = math.ceil(batch / COLS)  # users per chip in SDPA (batch_size_per_device_group)
    d4 = dim // COLS
    qkv = (n_heads + 2 * n_kv_heads) * head_dim  # configuration.qkv_size
    nh, nkv = n_heads // ROWS, n_kv_heads // ROWS
    ffn8 = math.ceil(ffn_dim / ROWS)

    def l1(*shape: int, dtype: str = "bfloat16") -> TensorInfo:
        return TensorInfo(tuple(shape), dtype, "L1", True)

    def weight(k: int, n: int, dtype: str) -> TensorInfo:
        return TensorInfo((k, n), dtype, "DRAM", True)

    def op(name: str, ins: Sequence[TensorInfo], outs: Sequence[TensorInfo], **kw: Any) -> OpRecord:
        return OpRecord(name, tuple(ins), tuple(outs), kw)

    def ring_mm(name: str, k: int, n: int, dtype: str, fid: str, out_dtype: str) -> OpRecord:
        # matmul_1d_ring_config on the 24 ring cores, weights from the prefetcher's buffer
        return op(name, (l1(r, k), weight(k, n, dtype)), (l1(r, n, dtype=out_dtype),),
                  fidelity=fid, cores=RING_CORES, dram_sharded=True, ring=True)  # fmt: skip

    def ccl(name: str, kind: str, x: TensorInfo, y: TensorInfo, axis: int,
            nlinks: int = links, fused: OpRecord | None = None) -> OpRecord:  # fmt: skip
        kw: dict[str, Any] = {"kind": kind, "group_size": COLS if axis == 1 else ROWS,
                              "num_links": nlinks, "topology": topo}  # fmt: skip
        if fused is not None:
            kw["fused"] = fused
        return op(name, (x,), (y,), **kw)

    def rms() -> OpRecord:
        # llama_ccl.py tt_sharded_distributed_rmsnorm: ttnn.fused_rms_1_1_32_8192, residual add
        # and the stats' all-gather along cluster_axis 1 on one link
        local = op("rms_norm", (l1(r, d4), l1(r, d4)), (l1(r, d4),))
        return ccl("fused_rms_1_1_32_8192", "all-gather", l1(r, TILE), l1(r, TILE * COLS), 1,
                   nlinks=1, fused=local)  # fmt: skip

    qkv_n = _ring_pad(qkv // ROWS)
    wo_k, wo_n = qkv // ROWS, _ring_pad(d4)
    ff_n = _ring_pad(ffn8)
    q, kv1 = l1(1, users, nh, head_dim), l1(1, users, nkv, head_dim)
    cache = TensorInfo((users, nkv, context, head_dim), "bfloat8_b", "DRAM", False)
    layer = [
        rms(),
        ring_mm("matmul_qkv", d4, qkv_n, "bfloat8_b", "hifi2", "bfloat16"),
        # llama_rs_create_heads: QKV partial sums reduce-scattered along cluster_axis 1 into heads
        ccl("llama_rs_create_heads", "reduce-scatter", l1(r, qkv_n), l1(users, qkv_n), 1,
            fused=op("create_heads", (l1(users, qkv // ROWS),), (q, kv1, kv1))),
        op("rotary_embedding_llama_fused_qk", (q, kv1, l1(users, head_dim), l1(users, head_dim)),
           (q, kv1)),
        op("paged_fused_update_cache", (kv1, kv1), (TensorInfo((users, nkv, head_dim), "bfloat8_b", "DRAM"),)),
        op("scaled_dot_product_attention_decode", (q, cache, cache), (q,), positions=context,
           decode=True),
        # all_gather_concat: every column's users gathered along cluster_axis 1, heads concatenated
        ccl("all_gather_concat", "all-gather", l1(users, nh * head_dim), l1(r, wo_k), 1),
        ring_mm("matmul_wo", wo_k, wo_n, "bfloat8_b", "hifi2", "bfloat8_b"),
        ccl("all_reduce_async", "all-reduce", l1(r, d4), l1(r, d4), 0),
        rms(),
        # llama_rs_matmul: FF1 and FF3 on the ring (bfloat4_b, LoFi), FF1's reduce-scatter fused
        ccl("llama_rs_matmul", "reduce-scatter", l1(r, ff_n, dtype="bfloat8_b"),
            l1(r, ff_n // COLS, dtype="bfloat8_b"), 1,
            fused=op("matmul_ff1_ff3", (l1(r, d4), weight(d4, 2 * ff_n, "bfloat4_b")),
                     (l1(r, 2 * ff_n, dtype="bfloat8_b"),), fidelity="lofi", cores=RING_CORES,
                     dram_sharded=True, ring=True)),
        ccl("llama_reduce_scatter", "reduce-scatter", l1(r, ff_n, dtype="bfloat8_b"),
            l1(r, ff_n // COLS, dtype="bfloat8_b"), 1),
        op("mul", (l1(r, ff_n // COLS, dtype="bfloat8_b"),) * 2, (l1(r, ff_n // COLS, dtype="bfloat8_b"),)),
        ccl("all_gather_async", "all-gather", l1(r, ff_n // COLS, dtype="bfloat8_b"),
            l1(r, ffn8, dtype="bfloat8_b"), 1),
        ring_mm("matmul_ff2", ffn8, wo_n, "bfloat8_b", "hifi2", "bfloat8_b"),
        ccl("all_reduce_async", "all-reduce", l1(r, d4), l1(r, d4), 0),
    ]  # fmt: skip
    ops = [op("dram_prefetcher", (), ())]
    ops += [replace(x, count=n_layers) for x in layer]
    vocab = PADDED_VOCAB // ROWS
    tail = [
        rms(),
        op("linear_lm_head", (l1(r, d4), weight(d4, vocab, "bfloat8_b")), (l1(r, vocab),),
           fidelity="hifi2", cores=RING_CORES, dram_sharded=True, ring=True, prefetched=False),
        ccl("all_reduce_async", "all-reduce", l1(r, vocab), l1(r, vocab), 1),
        # sampling.py: top-k per chip, values and indices gathered along cluster_axis 0, sampled
        op("typecast", (l1(r, vocab, dtype="bfloat8_b"),), (l1(r, vocab),)),
        op("topk", (l1(r, vocab),), (l1(r, TILE), l1(r, TILE, dtype="uint16"))),
        ccl("all_gather_async", "all-gather", l1(r, TILE), l1(r, TILE * ROWS), 0),
        ccl("all_gather_async", "all-gather", l1(r, TILE, dtype="uint16"),
            l1(r, TILE * ROWS, dtype="uint16"), 0),
        op("typecast", (l1(r, TILE * ROWS, dtype="uint16"),), (l1(r, TILE * ROWS, dtype="uint32"),)),
        op("typecast", (l1(r, TILE * ROWS, dtype="uint32"),), (l1(r, TILE * ROWS, dtype="int32"),)),
        op("interleaved_to_sharded", (l1(r, TILE * ROWS, dtype="int32"),), (l1(r, TILE * ROWS, dtype="int32"),)),
        op("add", (l1(r, TILE * ROWS, dtype="int32"),) * 2, (l1(r, TILE * ROWS, dtype="int32"),)),
        op("sharded_to_interleaved", (l1(r, TILE * ROWS, dtype="int32"),), (l1(r, TILE * ROWS, dtype="int32"),)),
        op("untilize", (l1(r, TILE * ROWS, dtype="int32"),), (l1(r, TILE * ROWS, dtype="int32"),)),
        op("interleaved_to_sharded", (l1(r, TILE * ROWS),), (l1(r, TILE * ROWS),)),
        op("reshard", (l1(r, TILE * ROWS),), (l1(r, TILE * ROWS),)),
        op("interleaved_to_sharded", (l1(r, TILE * ROWS),), (l1(r, TILE * ROWS),)),
        op("reshard", (l1(r, TILE * ROWS),), (l1(r, TILE * ROWS),)),
        op("sampling", (l1(r, TILE * ROWS), l1(r, TILE * ROWS, dtype="int32")), (l1(r, TILE, dtype="uint32"),)),
        op("sharded_to_interleaved", (l1(r, TILE * ROWS),), (l1(r, TILE * ROWS),)),
        op("add", (l1(r, d4),) * 2, (l1(r, d4),)),
        op("plus_one", (l1(1, batch, dtype="int32"),), (l1(1, batch, dtype="int32"),)),
        op("plus_one", (l1(1, batch, dtype="int32"),), (l1(1, batch, dtype="int32"),)),
    ]  # fmt: skip
    return ops + tail


__all__ = ["GALAXY_OP_TO_OP_SECONDS", "galaxy_program"]
