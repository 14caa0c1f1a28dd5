"""Price a TT-NN program op by op on a Wormhole system: one rule per op family, each citing its
source, each op at least a fixed per-op floor; the step is the sum along the program.

The op list is either captured from a ttjax program on abstract tensors (:func:`capture`: every
TT-NN op it dispatches, with its shapes, dtypes, memory configs and the settings it was called
with) or written out by :mod:`ttjax._src.tools.opmodels` for a model a user names. Rules
(tt-metal 821525122af5):

- matmul: ``ceil(M/32) ceil(K/32) ceil(N/32)`` tile products x 16 cycles at LoFi x the math
  fidelity's passes, over the cores of its program config (ttnn/cpp/ttnn/operations/matmul/
  device/matmul_op.cpp ``create_op_performance_model_for_matmul``; tech_reports/GEMM_FLOPS), a
  DRAM-sharded one's over the 12 DRAM-bank reader cores at the ideal rate (its program factory;
  tech_reports/Saturating_DRAM_bandwidth);
  its DRAM bytes at 240 GB/s DRAM-sharded or 190 GB/s interleaved (tech_reports/LLMs/llms.md
  §4.6.1); the larger of the two.
- elementwise, norms, data movement: bytes in and out, DRAM at 190 GB/s, L1 at 28 B/cycle per
  core over the NoC (ttnn/cpp/ttnn/operations/data_movement/common/common.cpp ``common_tm_bw_model``
  measured tables, 2 KB transactions).
- SDPA decode: the KV cache positions read at FlashDecode's measured 180 GB/s
  (tech_reports/FlashAttention/FlashDecode.md), or its matmuls at HiFi2, the larger; prefill:
  Q rows x K positions at HiFi4 (half of them causal).
- CCLs: ring or line on the system's Ethernet, ``num_links`` x 12.5 GB/s, 650 ns per hop
  (tech_reports/EthernetMultichip/BasicEthernetGuide.md; :func:`ttjax.cost.collective_time`).
- embedding: the rows gathered, at DRAM interleaved rate.
- host read (``to_host``): a chip's bytes at tt-metal's measured device-to-host rate, PCIe or
  tunnelled through a PCIe chip (perf_microbenchmark/dispatch/benchmark_rw_buffer_golden.json).
- every op: at least a fixed per-op floor (op-to-op gap, "below 6us" traced, llms.md §4.5.5, plus
  the small fixed costs the rules do not see; fitted per phase, as traced decode and
  host-dispatched prefill differ): an op takes the larger of its work and the floor.

With ``dram_prefetcher`` in the program (tt-metal's Galaxy Llama), weight reads run on the
prefetcher's cores beside the other ops: the step is the larger of the ops' sum (matmuls without
their DRAM reads) and the weight reads.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ttjax._src.core import capture as _capture
from ttjax._src.core.errors import ConfigError
from ttjax._src.core.hardware import MathFidelity
from ttjax._src.core.systems import (
    FIDELITY_PASSES,
    WORMHOLE_CLOCK_HZ,
    System,
    get_system,
)
from ttjax._src.tools.cost import (
    CALIBRATION_FILE,
    DTYPE_BYTES,
    PHASES,
    collective_time,
    read_calibration,
)

TILE = 32
# GEMM_FLOPS.md §Utilization derivation formula: a 32x32x32 tile product takes 16 cycles at LoFi
# (4096 multiply-adds per cycle, matmul_op.cpp `tensix_mul_adds_per_cycle_lofi`).
CYCLES_PER_TILE_LOFI = 16
# LLMs/llms.md §4.6.1 Data movement: "A matmul can expect to read around 190 GB/s on a Wormhole"
# (DRAM interleaved); "DRAM Sharded ... achieves around 240 GB/s on a Wormhole".
DRAM_INTERLEAVED_BW = 190e9
DRAM_SHARDED_BW = 240e9
# A DRAM-sharded weight is split over Wormhole's 12 DRAM banks, its width padded to 12 tiles
# (tt_transformers model_config.py 2022-2030 create_dram_sharded_mem_config: "WH has 12 dram
# cores", padded_size = ceil(n / (32 x 12)) x 32 x 12); each bank's reader reads ceil(Nt / 12)
# tiles per row of K (matmul_op_multi_core_reuse_mcast_dram_sharded_program_factory.cpp 140:
# per_core_N_in1_sender = ceil(N / num_dram_banks)), so the banks finish together only when 12
# divides Nt (Saturating_DRAM_bandwidth.md, Future Work: "the last bank could have uneven
# sharding width")
DRAM_BANKS = 12
# FlashAttention/FlashDecode.md: "FlashDecode achieved up to 180 Gb/s memory bandwidth".
SDPA_DECODE_BW = 180e9
# data_movement/common/common.cpp common_tm_bw_model: measured Wormhole NoC rates per core at
# 2 KB transactions, L1 read 29.7 / write 27.8 / local 27.9 bytes per cycle: 28 B/cycle per core.
L1_BYTES_PER_CYCLE_PER_CORE = 28.0
# An async CCL op's own latency beyond its hops: tt-metal's Galaxy Llama CI times its smallest
# fabric CCLs at 9.6-10.1 us (models/demos/llama3_70b_galaxy/tests/decoder_perf_targets_4u.json:
# all_gather_concat of 64 KB over 4 chips 10.08 us, llama_rs_create_heads 9.73 us;
# tg_perf_unit_tests/test_ccl_async_perf_TG_llama.py targets 9.6 / 9.7 us) where 2 hops x 650 ns
# and the bytes take ~2 us: ~8 us of launch and semaphore handshakes per op.
CCL_OP_LATENCY_SECONDS = 8e-6
# Device-to-host reads, 2 KB pages from DRAM, measured by tt-metal's dispatch benchmark
# (tests/tt_metal/tt_metal/perf_microbenchmark/dispatch/benchmark_rw_buffer_golden.json,
# "Read/2048/67108864/0/0" 10.15 GB/s from the PCIe chip, "Read/2048/67108864/0/1" 4.51 GB/s from
# the chip behind it over Ethernet; benchmark_rw_buffer.cpp 67, 137-139: buffer type 0 is DRAM,
# device 1 "assuming it's a remote device"). The host reads each device on its own reader thread
# (tt_metal/distributed/fd_mesh_command_queue.cpp 787-822): chips on separate PCIe links in
# parallel, a tunnelled chip after the PCIe chip it goes through.
HOST_READ_BW_PCIE = 10.15e9
HOST_READ_BW_REMOTE = 4.51e9
# chips the host reads through one PCIe chip's Ethernet tunnel besides it (BasicEthernetGuide.md
# §N300, §T3000: each N300's right chip; a 6U Galaxy has 32 PCIe chips:
# llama3_70b_galaxy/tt/model_config.py 608 "6U" if ttnn.GetNumPCIeDevices() == 32)
REMOTE_CHIPS_PER_PCIE = {"n150": 0, "n300": 1, "t3000": 1, "galaxy": 0}
FAMILIES = ("matmul", "sdpa", "ccl", "embedding", "norm", "elementwise", "data movement", "host")


@dataclass(frozen=True)
class TensorInfo:
    """One operand of an op as a chip holds it: per-device shape, dtype, DRAM or L1, sharded."""

    shape: tuple[int, ...]
    dtype: str = "bfloat16"
    buffer: str = "L1"
    sharded: bool = False

    @property
    def rows(self) -> int:
        """The leading dims folded into rows (as TT-NN folds a batch into a matmul's M)."""
        return int(np.prod(self.shape[:-1])) if len(self.shape) > 1 else 1

    @property
    def nbytes(self) -> float:
        """Bytes on one chip, tile-padded: rows and the last dim to 32 (rank >= 2)."""
        if len(self.shape) < 2:
            return float(np.prod(self.shape or (1,))) * DTYPE_BYTES.get(self.dtype, 2.0)
        rows = -(-self.rows // TILE) * TILE
        cols = -(-self.shape[-1] // TILE) * TILE
        return float(rows * cols) * DTYPE_BYTES.get(self.dtype, 2.0)


@dataclass(frozen=True)
class OpRecord:
    """One TT-NN op of a program: its name, operands, the settings it ran with, how many times.

    ``settings`` may hold ``fidelity`` (a MathFidelity name), ``cores`` (its program config's
    core grid), ``dram_sharded``, ``num_links``, ``topology``, ``group_size``, ``kind`` (a CCL's
    all-gather / reduce-scatter / all-reduce), ``positions`` (an SDPA decode's KV length),
    ``causal``; ``count`` is how many times one step runs it (decoder layers x repeats).
    """

    name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    count: int = 1

    @property
    def family(self) -> str:
        return family_of(self.name)


def family_of(name: str) -> str:
    """The op family of a TT-NN op name (which rule prices it).

    >>> family_of("linear"), family_of("all_gather_async"), family_of("rms_norm_pre_all_gather")
    ('matmul', 'ccl', 'norm')
    """
    n = name.lower()
    if n == "to_host":
        return "host"  # a device-to-host read (logits sampled on the host)
    if n.endswith(("norm_pre_all_gather", "norm_post_all_gather")):
        return "norm"  # the local halves of a distributed norm; the gather is its own op
    if n.startswith(("fused_rms", "llama_rs_", "llama_reduce_scatter")):
        return "ccl"  # the Galaxy Llama's CCLs fused with a norm, a matmul or the heads
    if "all_gather" in n or "reduce_scatter" in n or "all_reduce" in n or "all_to_all" in n:
        return "ccl"
    if "scaled_dot_product_attention" in n or "sdpa" in n:
        return "sdpa"
    if n.startswith(("matmul", "linear")) or n in ("bmm", "dram_prefetcher_matmul"):
        return "matmul"
    if n.startswith("embedding"):
        return "embedding"
    if "norm" in n:
        return "norm"
    movement = ("reshape", "concat", "slice", "transpose", "permute", "to_memory_config", "heads",
                "interleaved_to_sharded", "sharded_to_interleaved", "copy", "update_cache",
                "fill_cache", "to_layout", "tilize", "untilize", "pad", "split", "repeat")  # fmt: skip
    if any(m in n for m in movement):
        return "data movement"
    return "elementwise"


@dataclass(frozen=True)
class OpCalibration:
    """The fitted factors of the per-op model: DRAM and compute efficiency (1 = the measured
    rates above) and the fixed cost of one op per phase."""

    dram_efficiency: float = 1.0
    compute_efficiency: float = 1.0
    dispatch_seconds: Mapping[str, float] = field(
        default_factory=lambda: {"decode": 6e-6, "prefill": 6e-6}
    )
    note: str = "unfitted: measured rates, llms.md's 6 us op-to-op gap"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "dispatch_seconds": dict(self.dispatch_seconds)}


def load_op_calibration(path: str | Path = CALIBRATION_FILE) -> OpCalibration:
    """The per-op calibration stored under ``"per_op"`` in ``path`` (default if absent)."""
    raw = read_calibration(path, "per_op", "dispatch_seconds",
                           "python -m ttjax._src.tools.opmodels calibrate --write")  # fmt: skip
    return OpCalibration() if raw is None else OpCalibration(**raw)


def save_op_calibration(cal: OpCalibration, path: str | Path = CALIBRATION_FILE) -> None:
    """Store ``cal`` under ``"per_op"`` in ``path``, keeping its other keys."""
    p = Path(path)
    raw = json.loads(p.read_text()) if p.exists() else {}
    raw["per_op"] = cal.to_dict()
    p.write_text(json.dumps(raw, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpCost:
    """One op's price: seconds per run (the larger of its work and the per-op floor), what bounds
    it ("dispatch" when the floor does), the rule, and the matmul's share the prefetcher takes."""

    record: OpRecord
    seconds: float
    bound: str
    rule: str
    weight_read_seconds: float = 0.0  # the matmul's DRAM weight read (the prefetcher's share)
    streamed_seconds: float | None = None  # seconds per run with the weights prefetched

    @property
    def total_seconds(self) -> float:
        return self.seconds * self.record.count


def _fidelity(rec: OpRecord, default: MathFidelity) -> MathFidelity:
    f = rec.settings.get("fidelity")
    if f is None:
        return default
    if isinstance(f, MathFidelity):
        return f
    try:
        return MathFidelity(str(getattr(f, "value", f)).lower())
    except ValueError:
        raise ConfigError(
            f"{rec.name}: math fidelity {f!r} is unknown.\nfix: one of "
            f"{[m.value for m in MathFidelity]}."
        ) from None


def _cores(rec: OpRecord, system: System) -> int:
    c = int(rec.settings.get("cores") or system.compute_cores)
    if c < 1:
        raise ConfigError(f"{rec.name}: cores={c} in its settings.\nfix: a core grid >= 1.")
    return c


def _bytes_time(
    tensors: Sequence[TensorInfo], cores: int, dram_bw: float, cal: OpCalibration
) -> tuple[float, float, float]:
    """``(seconds, dram seconds, l1 seconds)`` of moving ``tensors`` (DRAM and L1 overlap)."""
    dram = sum(t.nbytes for t in tensors if t.buffer == "DRAM")
    l1 = sum(t.nbytes for t in tensors if t.buffer != "DRAM")
    dram_s = dram / (dram_bw * cal.dram_efficiency)
    l1_s = l1 / (cores * L1_BYTES_PER_CYCLE_PER_CORE * WORMHOLE_CLOCK_HZ)
    return max(dram_s, l1_s), dram_s, l1_s


def matmul_cost(rec: OpRecord, system: System, cal: OpCalibration) -> OpCost:
    """matmul_op.cpp's ideal cycles on the op's cores at its fidelity, or its DRAM reads at the
    DRAM-sharded / interleaved matmul rate (llms.md §4.6.1): the larger."""
    a, b = rec.inputs[0], rec.inputs[1]
    out = rec.outputs[0]
    k, n = a.shape[-1], out.shape[-1]
    if len(b.shape) <= 2 or int(np.prod(b.shape[:-2])) == 1:
        batch, m = 1, a.rows  # one weight: the batch folds into M
    else:
        batch, m = int(np.prod(out.shape[:-2])), a.shape[-2]
    tiles = batch * math.ceil(m / TILE) * math.ceil(k / TILE) * math.ceil(n / TILE)
    # no compute_kernel_config: tt_transformers' recipe, bfloat4_b weights at LoFi, else HiFi2
    fid = _fidelity(rec, MathFidelity.LoFi if b.dtype == "bfloat4_b" else MathFidelity.HiFi2)
    cores = _cores(rec, system)
    sharded = bool(rec.settings.get("dram_sharded", b.sharded and b.buffer == "DRAM"))
    if not sharded:
        # each core computes at least one output tile: a 2-D multicast grid uses at most Mt rows x
        # Nt columns of the 8x8, a 1-D one at most max(Mt, Nt) cores (matmul_op.cpp's program
        # configs); ``mcast="2d"`` (tt_transformers' prefill configs) forces the 2-D grid
        side = math.isqrt(cores)
        mt, nt = math.ceil(m / TILE), math.ceil(n / TILE)
        two_d = min(side, mt) * min(side, nt)
        one_d = 0 if rec.settings.get("mcast") == "2d" else max(mt, nt)
        cores = max(1, min(cores, max(two_d, one_d)))
    cycles = tiles * CYCLES_PER_TILE_LOFI * FIDELITY_PASSES[fid] / cores
    compute = cycles / WORMHOLE_CLOCK_HZ / cal.compute_efficiency
    bw = DRAM_SHARDED_BW if sharded else DRAM_INTERLEAVED_BW
    move, dram_s, l1_s = _bytes_time((*rec.inputs, *rec.outputs), cores, bw, cal)
    mm_cores = cores
    if sharded and b.buffer == "DRAM":  # each bank reads ceil(Nt / 12) tiles per row of K
        nt = math.ceil(b.shape[-1] / TILE)
        b = replace(b, shape=(*b.shape[:-1], math.ceil(nt / DRAM_BANKS) * DRAM_BANKS * TILE))
        move, dram_s, l1_s = _bytes_time((a, b, *rec.inputs[2:], *rec.outputs), cores, bw, cal)
    if sharded and b.buffer == "DRAM" and not rec.settings.get("ring"):
        # the DRAM-sharded program (not a prefetcher's ``ring`` matmul) computes on the 12 reader
        # cores, ceil(Nt / 12) output tiles each (its program factory 132, 232: num_worker_cores
        # = num_dram_banks; Saturating_DRAM_bandwidth.md: "The compute kernels are placed on the
        # same coordinate as the DRAM reader") at matmul_op.cpp's ideal rate, not the fitted one:
        # the report measures these matmuls DRAM-bound (Llama3-70 decode 239-260 GB/s) and mlp.py
        # 123 has them "FLOP-bound on 12 cores with HiFi4" (not at HiFi2): both hold at the ideal
        # rate, neither at the fitted one
        tiles = batch * math.ceil(m / TILE) * math.ceil(k / TILE) * b.shape[-1] // TILE
        mm_cores = DRAM_BANKS
        compute = (
            tiles * CYCLES_PER_TILE_LOFI * FIDELITY_PASSES[fid] / DRAM_BANKS / WORMHOLE_CLOCK_HZ
        )
    weight = b.nbytes / (bw * cal.dram_efficiency) if b.buffer == "DRAM" else 0.0
    rest = (a, *rec.inputs[2:], *rec.outputs) if b.buffer == "DRAM" else (*rec.inputs, *rec.outputs)
    streamed: float | None = max(compute, _bytes_time(rest, cores, bw, cal)[0])
    if rec.settings.get("prefetched") is False:  # reads its own weights with the prefetcher on
        weight, streamed = 0.0, None
    bound = "compute" if compute >= move else ("DRAM" if dram_s >= l1_s else "L1")
    mb = sum(t.nbytes for t in (a, b, *rec.inputs[2:])) / 1e6
    rule = (
        f"{tiles} tiles x {CYCLES_PER_TILE_LOFI * FIDELITY_PASSES[fid]} cycles ({fid.name}) / "
        f"{mm_cores} cores = {compute * 1e6:.1f} us vs {mb:.2f} MB at {bw / 1e9:.0f} GB/s"
        f"{' (DRAM-sharded, 12 banks)' if sharded else ''} = {move * 1e6:.1f} us"
    )
    return OpCost(rec, max(compute, move), bound, rule, weight, streamed)


def sdpa_cost(rec: OpRecord, system: System, cal: OpCalibration) -> OpCost:
    """SDPA decode: K and V read for the attended positions at FlashDecode's 180 GB/s, or the
    QK and PV matmuls at HiFi2; prefill (``causal``): the matmuls at HiFi4 over half the square."""
    q, kc = rec.inputs[0], rec.inputs[1]
    hd = q.shape[-1]
    cores = _cores(rec, system)
    decode = rec.settings.get("decode", "decode" in rec.name)
    if decode:
        # q [1, b, nh, hd]; cache [b, nkv, S, hd]
        b, nh = int(np.prod(q.shape[:-2])), q.shape[-2]
        nkv, s = kc.shape[-3], kc.shape[-2]
        pos = int(rec.settings.get("positions", s))
        kv_bytes = 2 * b * nkv * pos * hd * DTYPE_BYTES.get(kc.dtype, 2.0)
        flops = 2.0 * 2 * b * max(nh, TILE) * pos * hd  # heads padded to a tile row
        fid = _fidelity(rec, MathFidelity.HiFi2)
        mem = kv_bytes / (SDPA_DECODE_BW * cal.dram_efficiency)
    else:
        # q [b, nh, Sq, hd]; k [b, nkv, Skv, hd] (Skv > Sq: a cross-attention over image tokens)
        b, nh, s = int(np.prod(q.shape[:-3])) or 1, q.shape[-3], q.shape[-2]
        frac = 0.5 if rec.settings.get("causal", True) else 1.0
        flops = 2.0 * 2 * b * nh * s * kc.shape[-2] * hd * frac
        fid = _fidelity(rec, MathFidelity.HiFi4)
        kv_bytes = sum(t.nbytes for t in rec.inputs)
        mem = _bytes_time((*rec.inputs, *rec.outputs), cores, DRAM_INTERLEAVED_BW, cal)[0]
    rate = cores * 4096 * WORMHOLE_CLOCK_HZ / FIDELITY_PASSES[fid]
    compute = flops / rate / cal.compute_efficiency
    bound = "compute" if compute >= mem else "DRAM"
    rule = (
        f"{flops / 1e9:.3f} GFLOP ({fid.name}, {cores} cores) = {compute * 1e6:.1f} us vs "
        f"{kv_bytes / 1e6:.2f} MB KV = {mem * 1e6:.1f} us"
    )
    return OpCost(rec, max(compute, mem), bound, rule)


_CCL_KIND = {"all_gather": "all-gather", "reduce_scatter": "reduce-scatter",
             "all_reduce": "all-reduce", "all_to_all": "all-to-all"}  # fmt: skip


def ccl_kind(rec: OpRecord) -> str:
    kind = rec.settings.get("kind")
    if kind:
        return str(kind)
    for key, k in _CCL_KIND.items():
        if key in rec.name:
            return k
    return "all-gather"


def ccl_cost(rec: OpRecord, system: System, cal: OpCalibration) -> OpCost:
    """A CCL on the system's Ethernet: each chip's ring-formula bytes over ``num_links`` links,
    ring or line by group size (``ttjax.cost.collective_time``)."""
    n = int(rec.settings.get("group_size", system.num_chips))
    kind = ccl_kind(rec)
    links = int(rec.settings.get("num_links", 1))
    if links < 1:
        raise ConfigError(f"{rec.name}: num_links={links}.\nfix: a CCL uses at least one link.")
    big = max((t.nbytes for t in (*rec.inputs, *rec.outputs)), default=0.0)
    if kind == "all-gather":
        per = big * (n - 1) / n if n > 1 else 0.0
    elif kind == "reduce-scatter":
        per = big * (n - 1) / n if n > 1 else 0.0
    else:  # all-reduce: reduce-scatter + all-gather of the whole
        per = 2 * big * (n - 1) / n if n > 1 else 0.0
    links = min(links, max(system.links, 1))
    topo_kw = rec.settings.get("topology")
    s = system
    if topo_kw is not None:
        s = replace(system, ring_size=n if "ring" in str(topo_kw).lower() else None)
    topo, hops, lat, xfer = collective_time(
        "all-reduce" if kind == "all-reduce" else "all-gather", per, n, s, links
    )
    rule = (
        f"{kind} of {n} ({topo}, {hops} hops x {s.hop_seconds * 1e9:.0f} ns), "
        f"{per / 1e6:.3f} MB/chip on {links} link(s) x {s.link_bandwidth / 1e9:.1f} GB/s"
    )
    lat += CCL_OP_LATENCY_SECONDS
    rule += f" + {CCL_OP_LATENCY_SECONDS * 1e6:.0f} us op latency"
    fused = rec.settings.get("fused")
    if isinstance(fused, OpRecord):  # a CCL fused with a local op (a norm, a matmul, heads)
        local = RULES[fused.family](fused, system, cal)
        rule += f" + {fused.name}: {local.seconds * 1e6:.1f} us ({local.rule})"
        return OpCost(rec, lat + xfer + local.seconds, "Ethernet", rule,
                      local.weight_read_seconds,
                      None if local.streamed_seconds is None else lat + xfer + local.streamed_seconds)  # fmt: skip
    return OpCost(rec, lat + xfer, "Ethernet", rule)


def embedding_cost(rec: OpRecord, system: System, cal: OpCalibration) -> OpCost:
    """An embedding gathers one table row per index from DRAM (interleaved) and writes them."""
    idx, table = rec.inputs[0], rec.inputs[1]
    rows = int(np.prod(idx.shape)) if idx.shape else 1
    row_bytes = table.shape[-1] * DTYPE_BYTES.get(table.dtype, 2.0)
    read = rows * row_bytes / (DRAM_INTERLEAVED_BW * cal.dram_efficiency)
    write = _bytes_time(rec.outputs, _cores(rec, system), DRAM_INTERLEAVED_BW, cal)[0]
    rule = f"{rows} rows x {row_bytes / 1e3:.1f} KB at {DRAM_INTERLEAVED_BW / 1e9:.0f} GB/s"
    return OpCost(rec, read + write, "DRAM", rule)


def bandwidth_cost(rec: OpRecord, system: System, cal: OpCalibration) -> OpCost:
    """Elementwise, norm and data-movement ops: bytes in and out, DRAM at 190 GB/s, L1 at
    28 B/cycle per core (common_tm_bw_model's measured NoC rates)."""
    cores = _cores(rec, system)
    t, dram_s, l1_s = _bytes_time((*rec.inputs, *rec.outputs), cores, DRAM_INTERLEAVED_BW, cal)
    moved = sum(x.nbytes for x in (*rec.inputs, *rec.outputs))
    rule = f"{moved / 1e6:.3f} MB in+out ({'DRAM' if dram_s >= l1_s else 'L1'}, {cores} cores)"
    return OpCost(rec, t, "DRAM" if dram_s >= l1_s else "L1", rule)


def host_read_cost(rec: OpRecord, system: System, cal: OpCalibration) -> OpCost:
    """A chip's tensor read to the host at the measured PCIe rate, plus the ``remote_chips``
    read through the same PCIe chip's Ethernet tunnel at the tunnelled rate (serial on that
    link; other links read in parallel)."""
    nbytes = rec.inputs[0].nbytes
    remote = int(rec.settings.get("remote_chips", 0))
    t = nbytes / HOST_READ_BW_PCIE + remote * nbytes / HOST_READ_BW_REMOTE
    rule = (f"{nbytes / 1e6:.2f} MB at {HOST_READ_BW_PCIE / 1e9:.2f} GB/s (PCIe) + {remote} x at "
            f"{HOST_READ_BW_REMOTE / 1e9:.2f} GB/s (tunnelled)")  # fmt: skip
    return OpCost(rec, t, "host", rule)


RULES: dict[str, Callable[[OpRecord, System, OpCalibration], OpCost]] = {
    "matmul": matmul_cost,
    "sdpa": sdpa_cost,
    "ccl": ccl_cost,
    "embedding": embedding_cost,
    "norm": bandwidth_cost,
    "elementwise": bandwidth_cost,
    "data movement": bandwidth_cost,
    "host": host_read_cost,
}
RULE_TEXT = {
    "matmul": "max(tiles x 16 x fidelity passes / cores cycles [matmul_op.cpp; DRAM-sharded: "
    "12 bank cores, ideal rate], DRAM bytes at 240 GB/s sharded or 190 GB/s interleaved "
    "[llms.md 4.6.1])",
    "sdpa": "decode: max(K+V positions at 180 GB/s [FlashDecode.md], QK+PV at HiFi2); prefill: "
    "causal QK+PV at HiFi4",
    "ccl": "8 us op latency [Galaxy Llama CI] + ring/line hops x 650 ns + ring bytes / "
    "(num_links x 12.5 GB/s) [BasicEthernetGuide.md] (+ a fused op's own rule)",
    "embedding": "rows x row bytes at 190 GB/s",
    "norm": "bytes in+out: DRAM 190 GB/s or L1 28 B/cycle/core [common_tm_bw_model]",
    "elementwise": "bytes in+out: DRAM 190 GB/s or L1 28 B/cycle/core",
    "data movement": "bytes in+out: DRAM 190 GB/s or L1 28 B/cycle/core",
    "host": "device-to-host read at 10.15 GB/s (PCIe) / 4.51 GB/s (tunnelled) "
    "[benchmark_rw_buffer_golden.json]",
}


def price_op(
    rec: OpRecord,
    system: System | str,
    phase: str = "decode",
    cal: OpCalibration | None = None,
    dispatch: float | None = None,
) -> OpCost:
    """The :class:`OpCost` of one op on one chip of ``system``: its rule's work, or the per-op
    floor (``dispatch``, default the calibration's for ``phase``) where that is larger: a traced
    step issues the next op's commands while one runs, so an op shorter than the floor waits
    for it and a longer one hides it."""
    s = get_system(system)
    c = cal if cal is not None else OP_CALIBRATION
    if phase not in PHASES:
        raise ConfigError(f"phase={phase!r} is not a step kind.\nfix: one of {PHASES}.")
    floor = c.dispatch_seconds[phase] if dispatch is None else float(dispatch)
    w = RULES[rec.family](rec, s, c)
    streamed = None if w.streamed_seconds is None else max(w.streamed_seconds, floor)
    if w.seconds >= floor:
        return replace(w, streamed_seconds=streamed)
    return replace(w, seconds=floor, bound="dispatch", streamed_seconds=streamed)


# ---------------------------------------------------------------------------------------------
# A step
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpPrediction:
    """A step priced op by op: every op's cost, the total, and what it means for tokens."""

    system: System
    phase: str
    users: int
    replicas: int
    costs: tuple[OpCost, ...]
    prefetcher: bool = False
    resident_bytes: float | None = None
    calibration: OpCalibration = field(default_factory=OpCalibration)

    @property
    def ops_seconds(self) -> float:
        if not self.prefetcher:
            return float(sum(c.total_seconds for c in self.costs))
        # weights stream on the prefetcher's cores: matmuls pay their compute / L1 time only
        return float(
            sum(
                (c.seconds if c.streamed_seconds is None else c.streamed_seconds) * c.record.count
                for c in self.costs
            )
        )

    @property
    def prefetch_seconds(self) -> float:
        return float(sum(c.weight_read_seconds * c.record.count for c in self.costs))

    @property
    def step_seconds(self) -> float:
        ops = max(self.ops_seconds, self.prefetch_seconds) if self.prefetcher else self.ops_seconds
        return max(ops, 1e-9)

    @property
    def tokens_per_second_per_user(self) -> float:
        return 1.0 / self.step_seconds

    @property
    def tokens_per_second(self) -> float:
        return self.users * self.replicas / self.step_seconds

    @property
    def fits(self) -> bool:
        return self.resident_bytes is None or self.resident_bytes <= self.system.dram_bytes

    def _seconds(self, c: OpCost) -> float:
        """One op's seconds per step in this program (its weights prefetched or not)."""
        if self.prefetcher and c.streamed_seconds is not None:
            return c.streamed_seconds * c.record.count
        return c.total_seconds

    def by_family(self) -> list[tuple[str, float, int, str]]:
        """``(family, seconds per step, ops per step, rule)``, most expensive first (every op
        at least the per-op floor: RULE_TEXT's rule or the floor, the larger)."""
        acc: dict[str, list[float]] = {}
        for c in self.costs:
            a = acc.setdefault(c.record.family, [0.0, 0.0])
            a[0] += self._seconds(c)
            a[1] += c.record.count
        rows = [(f, s, int(n), RULE_TEXT[f]) for f, (s, n) in acc.items()]
        return sorted(rows, key=lambda r: -r[1])

    @property
    def dominant(self) -> str:
        """The op family that takes the most time (dispatch included)."""
        fams = self.by_family()
        return fams[0][0] if fams else "none"

    @property
    def dispatch_seconds(self) -> float:
        """Seconds of the step spent in ops the per-op floor bounds (shorter than the floor)."""
        return float(sum(self._seconds(c) for c in self.costs if c.bound == "dispatch"))

    def top_ops(self, n: int = 10) -> list[tuple[str, float, int, str, str]]:
        """``(op name, seconds per step, runs, bound, rule)`` of the ``n`` costliest op kinds
        (same name and shapes summed)."""
        acc: dict[tuple[str, str], list[Any]] = {}
        for c in self.costs:
            key = (c.record.name, c.rule)
            pre = self.prefetcher and c.streamed_seconds is not None and c.weight_read_seconds
            a = acc.setdefault(key, [0.0, 0, "prefetched" if pre else c.bound])
            a[0] += self._seconds(c)
            a[1] += c.record.count
        rows = [(k[0], v[0], v[1], v[2], k[1]) for k, v in acc.items()]
        return sorted(rows, key=lambda r: -r[1])[:n]

    def headline(self) -> str:
        where = self.system.name + (f" ({self.replicas} replicas)" if self.replicas > 1 else "")
        if self.phase == "prefill":
            return (
                f"per-op model on {where}: time to first token {self.step_seconds * 1e3:.1f} ms "
                f"(dominant: {self.dominant})"
            )
        return (
            f"per-op model on {where}: {self.tokens_per_second_per_user:.1f} tok/s/user, "
            f"{self.tokens_per_second:.1f} tok/s at {self.users * self.replicas} users (step "
            f"{self.step_seconds * 1e3:.2f} ms, {sum(c.record.count for c in self.costs)} ops, "
            f"dominant: {self.dominant})"
        )

    def summary_lines(self, top: int = 10) -> list[str]:
        lines = [self.headline()]
        for fam, s, n, rule in self.by_family():
            lines.append(f"  {fam:<14} {s * 1e3:9.3f} ms  {n:6d} ops  {rule}")
        if self.prefetcher:
            lines.append(f"  prefetcher weight reads {self.prefetch_seconds * 1e3:.3f} ms")
        lines.append(f"  of which ops at the per-op floor {self.dispatch_seconds * 1e3:.3f} ms")
        lines.append(f"  calibration: {self.calibration.note}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.system.name,
            "phase": self.phase,
            "users": self.users,
            "replicas": self.replicas,
            "step_seconds": self.step_seconds,
            "tokens_per_second_per_user": self.tokens_per_second_per_user,
            "tokens_per_second": self.tokens_per_second,
            "dominant": self.dominant,
            "fits": self.fits,
            "families": [
                {"family": f, "seconds": s, "ops": n, "rule": r} for f, s, n, r in self.by_family()
            ],
            "top_ops": [
                {"op": o, "seconds": s, "runs": n, "bound": b, "rule": r}
                for o, s, n, b, r in self.top_ops()
            ],
        }


def price(
    ops: Sequence[OpRecord],
    system: System | str,
    *,
    phase: str = "decode",
    users: int = 1,
    replicas: int = 1,
    calibration: OpCalibration | None = None,
    resident_bytes: float | None = None,
    dispatch: float | None = None,
) -> OpPrediction:
    """Price every op of a program on ``system``: the step is the sum along the program (the
    larger of it and the weight reads when the program runs ``dram_prefetcher``). ``dispatch``
    replaces the calibration's per-op floor (a program with its own measured op-to-op gap).

    >>> x = TensorInfo((32, 4096)); w = TensorInfo((4096, 4096), "bfloat8_b", "DRAM", True)
    >>> price([OpRecord("linear", (x, w), (x,))], "n150").step_seconds > 0
    True
    """
    s = get_system(system)
    cal = calibration if calibration is not None else OP_CALIBRATION
    if int(users) < 1 or int(replicas) < 1:
        raise ConfigError(f"users={users}, replicas={replicas}.\nfix: both >= 1.")
    costs = tuple(price_op(r, s, phase, cal, dispatch) for r in ops)
    pre = any("prefetcher" in r.name for r in ops)
    return OpPrediction(s, phase, int(users), int(replicas), costs, pre, resident_bytes, cal)


# ---------------------------------------------------------------------------------------------
# Capturing a ttjax program's TT-NN ops (abstract tensors, no data)
# ---------------------------------------------------------------------------------------------

_SETTING_KEYS = ("program_config", "compute_kernel_config", "core_grid", "num_links", "topology",
                 "cluster_axis", "dim", "scale", "is_causal", "cur_pos_tensor")  # fmt: skip
_SRC = str(Path(__file__).resolve().parents[1])  # .../ttjax/_src


def _info(t: Any) -> TensorInfo:
    spec = t._spec
    mc = spec.memory_config
    return TensorInfo(
        tuple(int(d) for d in spec.shape),
        spec.dtype.value,
        "DRAM" if getattr(mc.buffer_type, "name", "DRAM") == "DRAM" else "L1",
        bool(mc.is_sharded()),
    )


def _settings_from(locals_: Mapping[str, Any], mesh: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ckc = locals_.get("compute_kernel_config")
    fid = getattr(ckc, "math_fidelity", None)
    if fid is not None:
        out["fidelity"] = str(getattr(fid, "value", fid)).lower()
    pc = locals_.get("program_config")
    grid = getattr(pc, "compute_with_storage_grid_size", None)
    if grid is not None:
        gx, gy = (grid.x, grid.y) if hasattr(grid, "x") else tuple(grid)
        out["cores"] = int(gx) * int(gy)
    if pc is not None and "DRAMSharded" in type(pc).__name__:
        out["dram_sharded"] = True
    cg = locals_.get("core_grid")
    if cg is not None and hasattr(cg, "x"):
        out["cores"] = int(cg.x) * int(cg.y)
    if locals_.get("num_links") is not None:
        out["num_links"] = int(locals_["num_links"])
    if locals_.get("topology") is not None:
        out["topology"] = str(locals_["topology"])
    shape = tuple(getattr(mesh, "shape", ()) or ())
    axis = locals_.get("cluster_axis")
    if shape:
        out["group_size"] = int(shape[int(axis)]) if axis is not None else int(np.prod(shape))
    return out


class _Recorder:
    """A capture recorder (the protocol of ``ttjax.trace``) that keeps each op's record and
    reads the settings its TT-NN call was given from the calling frames."""

    id = "pricing"
    error: BaseException | None = None
    allows_host_io = True  # it only observes: eager code may still read and write the host

    def __init__(self) -> None:
        self.ops: list[OpRecord] = []

    def record(
        self, prog: Any, mesh: Any, tensors: Sequence[Any], scalars: Any, results: Any
    ) -> None:
        frame: Any = sys._getframe(1)
        locs: dict[str, Any] = {}
        count = 1
        depth = 0
        while frame is not None:
            code = frame.f_code
            # the op's own frames (TT-NN settings), up to the first frame outside ttjax/_src
            if depth < 6 and code.co_filename.startswith(_SRC):
                for k in _SETTING_KEYS:
                    if k not in locs and frame.f_locals.get(k) is not None:
                        locs[k] = frame.f_locals[k]
                depth += 1
            # ttnn.scan runs its body once for `n` steps (decoder layers): multiply
            if code.co_name == "scan" and code.co_filename.endswith("transforms.py"):
                n = frame.f_locals.get("n")
                if isinstance(n, int) and n > 0:
                    count *= n
            frame = frame.f_back
        settings = _settings_from(locs, mesh)
        self.ops.append(
            OpRecord(
                prog.name,
                tuple(_info(t) for t in tensors),
                tuple(_info(t) for t in results),
                settings,
                count,
            )
        )

    def alias(self, result: Any, target: Any) -> None:
        pass

    def forward(self, result: Any, source: Any) -> bool:
        return False

    def interrupted(self, e: BaseException) -> None:
        self.error = e


def capture(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[OpRecord]:
    """Every TT-NN op ``fn(*args, **kwargs)`` dispatches, traced with ``jax.jit`` (nothing is
    compiled or run; abstract tensors work). Ops inside ``ttnn.scan`` count once per step.

    >>> a = ttnn.from_torch(torch.rand(32, 64), layout=ttnn.TILE_LAYOUT, device=mesh)
    >>> b = ttnn.from_torch(torch.rand(64, 32), layout=ttnn.TILE_LAYOUT, device=mesh)
    >>> ops = ttnn.cost.capture(lambda a, b: ttnn.matmul(a, b), a, b)
    >>> ops[0].name, ops[0].inputs[0].shape
    ('matmul', (32, 64))
    """
    import jax

    rec = _Recorder()
    _capture.begin(rec)
    try:
        # a fresh wrapper: JAX would replay a cached trace of ``fn`` without running its ops
        jax.jit(lambda *a, **k: fn(*a, **k)).trace(*args, **kwargs)
    finally:
        _capture.end()
    return rec.ops


@contextlib.contextmanager
def recording() -> Iterator[list[OpRecord]]:
    """Record every TT-NN op dispatched in the block, eagerly run or traced (any code, e.g.
    tt-metal's own model files with ``ttnn`` bound to ttjax); the list fills as ops run.

    >>> with ttnn.cost.recording() as ops:
    ...     _ = ttnn.add(x, x)
    >>> ops[0].name
    'add'
    """
    rec = _Recorder()
    _capture.begin(rec)
    try:
        yield rec.ops
    finally:
        _capture.end()


OP_CALIBRATION = load_op_calibration() if CALIBRATION_FILE.exists() else OpCalibration()


__all__ = [
    "DRAM_INTERLEAVED_BW",
    "DRAM_SHARDED_BW",
    "FAMILIES",
    "HOST_READ_BW_PCIE",
    "HOST_READ_BW_REMOTE",
    "L1_BYTES_PER_CYCLE_PER_CORE",
    "OP_CALIBRATION",
    "REMOTE_CHIPS_PER_PCIE",
    "SDPA_DECODE_BW",
    "OpCalibration",
    "OpCost",
    "OpPrediction",
    "OpRecord",
    "TensorInfo",
    "capture",
    "family_of",
    "load_op_calibration",
    "price",
    "price_op",
    "recording",
    "save_op_calibration",
]
