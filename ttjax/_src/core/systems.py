"""The Wormhole systems' published figures (per-chip DRAM bandwidth and size, Tensix FLOP rates,
Ethernet link bandwidth and hop latency) and the systems built from them, which ``ttjax.cost``
predicts step times with. They sit apart from the hardware knobs of :mod:`ttjax._src.core.hardware`
because they describe the machine, not a TT-NN setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ttjax._src.core.errors import ConfigError
from ttjax._src.core.hardware import MathFidelity

# ---------------------------------------------------------------------------------------------
# Wormhole systems: the figures tt-metal's own documents give (tt-metal 821525122af5, paths under
# tech_reports/ unless said otherwise). Nothing here is fitted; ttjax.cost fits its few free
# parameters on published step times, on top of these.
# ---------------------------------------------------------------------------------------------

# Saturating_DRAM_bandwidth/Saturating_DRAM_bandwidth.md, results table: "DRAM spec speed 288"
# GB/s at 12 GBps (also FlashAttention/FlashAttention.md §Wormhole: "12 channels of 1GB GDDR6,
# totaling 288 GB/s DRAM bandwidth").
WORMHOLE_DRAM_BANDWIDTH = 288e9
# Same table: "DRAM u-benchmark 267", "Llama3-70 decode 239-260" GB/s measured at 12 GBps.
WORMHOLE_DRAM_MEASURED = {"u-benchmark": 267e9, "llama3-70b decode": (239e9, 260e9)}
# FlashAttention/FlashAttention.md §Wormhole: "12 channels of 1GB GDDR6" = 12 GB per chip.
WORMHOLE_DRAM_BYTES = 12 * 10**9
# GEMM_FLOPS/GEMM_FLOPS.md §Matrix Multiplication TFLOPS on Wormhole: the matrix engine does
# 8x16 x 16x16 per cycle = 4096 FLOPs/cycle, "At 1GHz, this is 4 TFLOPS per matrix engine", one
# per Tensix core; MATH_FIDELITY divides it (LoFi 1, HiFi2 2, HiFi3 3, HiFi4 4 passes; §Utilization
# derivation formula: 16/32/48/64 cycles per tile).
WORMHOLE_TENSIX_FLOPS_PER_CYCLE = 4096
WORMHOLE_CLOCK_HZ = 1e9
FIDELITY_PASSES = {
    MathFidelity.LoFi: 1,
    MathFidelity.HiFi2: 2,
    MathFidelity.HiFi3: 3,
    MathFidelity.HiFi4: 4,
}
# GEMM_FLOPS/GEMM_FLOPS.md §Utilization derivation formula: "the maximum number of cores
# available for compute. Currently the max available is 8x8" (of the 8x10 Tensix grid,
# FlashAttention.md §Wormhole).
WORMHOLE_COMPUTE_CORES = 64
# EthernetMultichip/BasicEthernetGuide.md §Galaxy: "Ethernet link speeds are the same at 12.5 GB/s
# per direction per link" (§Ethernet Link: 100 Gbps per direction, all Wormhole parts).
ETHERNET_LINK_BANDWIDTH = 12.5e9
# EthernetMultichip/BasicEthernetGuide.md §Ring Ping Latency: "around 650ns per hop".
ETHERNET_HOP_SECONDS = 650e-9


def tensix_flops(fidelity: MathFidelity, cores: int = WORMHOLE_COMPUTE_CORES) -> float:
    """Peak matmul FLOP/s of one Wormhole chip at a math fidelity on ``cores`` Tensix cores.

    >>> tensix_flops(MathFidelity.LoFi) / 1e12
    262.144
    """
    per_core = WORMHOLE_TENSIX_FLOPS_PER_CYCLE * WORMHOLE_CLOCK_HZ / FIDELITY_PASSES[fidelity]
    return per_core * cores


@dataclass(frozen=True)
class System:
    """A Wormhole system: its chips as a mesh and its Ethernet between neighbours.

    ``links`` is the Ethernet links a collective may use between two neighbouring chips;
    ``ring_size`` the group size that closes into a ring (tt_transformers'
    ``ModelArgs.ccl_topology``, models/tt_transformers/tt/model_config.py: Ring for 8 devices on
    a T3K or a 6U Galaxy submesh, Linear for every other multi-chip group).
    """

    name: str
    mesh_shape: tuple[int, ...]
    links: int
    ring_size: int | None
    source: str = field(default="", compare=False)
    dram_bandwidth: float = WORMHOLE_DRAM_BANDWIDTH
    dram_bytes: int = WORMHOLE_DRAM_BYTES
    compute_cores: int = WORMHOLE_COMPUTE_CORES
    link_bandwidth: float = ETHERNET_LINK_BANDWIDTH
    hop_seconds: float = ETHERNET_HOP_SECONDS

    @property
    def num_chips(self) -> int:
        return int(np.prod(self.mesh_shape))

    def topology(self, group_size: int) -> str:
        """``"ring"`` or ``"line"`` for a collective over ``group_size`` chips of this system."""
        return "ring" if self.ring_size is not None and group_size == self.ring_size else "line"


SYSTEMS = {
    "n150": System("n150", (1, 1), links=0, ring_size=None, source="one Wormhole chip"),
    # BasicEthernetGuide.md §N300: two chips, 200 Gbps per direction (2 links), "one of the links"
    # reserved by the Dispatcher: "100 Gbps ... per direction for user kernels" = 1 link.
    "n300": System(
        "n300", (1, 2), links=1, ring_size=None, source="BasicEthernetGuide.md §N300: 1 user link"
    ),
    # BasicEthernetGuide.md §T3000: four N300s as a 2x4 mesh, "As with the N300 part, one link
    # from the local to the remote chip is still reserved": the ring's slowest hop has 1 link.
    "t3000": System(
        "t3000",
        (2, 4),
        links=1,
        ring_size=8,
        source="BasicEthernetGuide.md §T3000: N300 pairs keep 1 user link; ring of 8",
    ),
    # BasicEthernetGuide.md §Galaxy: 32 chips as a 4x8 mesh (no torus without extra cables);
    # TT-Fabric/TT-Fabric-Architecture.md §routing planes: "On WH, for each of the East, West,
    # North, South directions, we have 4 ethernet links".
    "galaxy": System(
        "galaxy",
        (8, 4),
        links=4,
        ring_size=8,
        source="BasicEthernetGuide.md §Galaxy, TT-Fabric-Architecture.md: 4 links per direction",
    ),
}


def get_system(name: str | System) -> System:
    """The :class:`System` called ``name`` (``n150``, ``n300``, ``t3000``, ``galaxy``).

    >>> get_system("t3000").num_chips
    8
    """
    if isinstance(name, System):
        return name
    key = str(name).lower()
    key = {"t3k": "t3000", "tg": "galaxy", "quietbox": "t3000"}.get(key, key)
    if key not in SYSTEMS:
        raise ConfigError(
            f"unknown system {name!r}.\nfix: use one of {sorted(SYSTEMS)} (or a ttnn.hardware.System)."
        )
    return SYSTEMS[key]


__all__ = [
    "ETHERNET_HOP_SECONDS",
    "ETHERNET_LINK_BANDWIDTH",
    "FIDELITY_PASSES",
    "SYSTEMS",
    "WORMHOLE_COMPUTE_CORES",
    "WORMHOLE_DRAM_BANDWIDTH",
    "WORMHOLE_DRAM_BYTES",
    "WORMHOLE_DRAM_MEASURED",
    "System",
    "get_system",
    "tensix_flops",
]
