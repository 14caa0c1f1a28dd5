"""MoE programs compiled on abstract inputs (no weights), for ``ttjax inspect``:

    python -m ttjax.inspect models.moe.inspect_targets:moe_layer --mesh t3000 --arg tokens=64
    python -m ttjax.inspect models.moe.inspect_targets:mixtral_decode --mesh t3000

and :func:`all_to_all_table`, which lists each MoE layer's dispatch and combine ``all_to_all``
with its bytes per device.
"""

from __future__ import annotations

from typing import Any

import ttjax as ttnn
from models.moe.config import MoEConfig
from models.moe.layer import MoELayer
from models.moe.mixtral import MIXTRAL_8X7B, TtMixtral, tiny_mixtral_config

_DTYPES = {"float32": ttnn.float32, "bfloat16": ttnn.bfloat16}


def moe_layer(
    mesh: ttnn.MeshDevice,
    dim: int = 4096,
    ffn_dim: int = 14336,
    n_experts: int = 8,
    top_k: int = 2,
    tokens: int = 32,
    capacity_factor: float | None = 1.25,
    ep_axis: int = 1,
    tp_axis: int | None = None,
    dtype: str = "bfloat16",
) -> tuple[Any, tuple[Any, ...]]:
    """One MoE layer (Mixtral-8x7B's shape by default) over ``tokens`` per data device."""
    config = MoEConfig(dim, ffn_dim, n_experts, top_k=top_k, capacity_factor=capacity_factor)
    layer = MoELayer(config, mesh, ep_axis=ep_axis, tp_axis=tp_axis, dtype=_DTYPES[dtype])

    def moe_layer(params: Any, x: ttnn.Tensor) -> ttnn.Tensor:
        return layer(params, x).out

    return moe_layer, (layer.abstract_params(), layer.abstract_tokens(tokens))


def mixtral_decode(
    mesh: ttnn.MeshDevice,
    config: str = "mixtral-8x7b",
    layers: int = 2,
    batch: int = 32,
    context: int = 512,
    ep_axis: int = 1,
    dtype: str = "bfloat16",
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """One decode step of Mixtral (``layers`` of its layers) on abstract weights and KV cache."""
    base = MIXTRAL_8X7B if config == "mixtral-8x7b" else tiny_mixtral_config()
    cfg = type(base)(**{**base.__dict__, "n_layers": layers})
    dt = _DTYPES[dtype]
    model = TtMixtral(cfg, None, mesh, batch=batch, ep_axis=ep_axis, dtype=dt, max_seq_len=context)
    tokens = ttnn.abstract_tensor(
        (batch, 1), ttnn.uint32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )
    pos = ttnn.abstract_tensor(
        (batch,), ttnn.int32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )
    return model.decode_fn(), (model.params, model.caches, tokens, pos), {"donate_argnums": (1,)}


def all_to_all_table(report: Any, title: str = "MoE all_to_all per layer") -> Any:
    """A ``rich.table.Table`` of a report's all-to-alls, paired per layer (dispatch, combine)."""
    from rich.table import Table

    a2a = [c for c in report.collectives if c.kind == "all-to-all"]
    table = Table(title=f"{title}: {len(a2a)} all_to_all, {len(a2a) // 2} MoE layer(s)")
    for col in ("layer", "step", "mesh axes", "dtype", "shape", "bytes", "bytes/device sent"):
        table.add_column(col, justify="right" if "bytes" in col else "left")
    for i, c in enumerate(a2a):
        table.add_row(
            str(i // 2),
            "dispatch" if i % 2 == 0 else "combine",
            ",".join(c.mesh_axes),
            c.dtype,
            str(list(c.shape)),
            f"{c.bytes:,}",
            f"{c.bytes_per_device:,.0f}",
        )
    return table
