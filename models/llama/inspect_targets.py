"""Full-size models compiled on abstract inputs (no weights), for ``ttjax inspect``:

    python -m ttjax.inspect models.llama.inspect_targets:decode_step --mesh t3000 \\
        --arg config=llama-3.1-70b --arg weight_dtype=bfloat8_b --arg context=2048

``decode_step(mesh, ...)`` returns ``(fn, args)``: one TP (or DP) decode step of the model over
abstract parameters and an abstract KV cache of ``context`` positions per user.
"""

from __future__ import annotations

from typing import Any

import ttjax as ttnn
from models.llama.config import get_config
from models.llama.model import TtLlama

_DTYPES = {
    "float32": ttnn.float32,
    "bfloat16": ttnn.bfloat16,
    "bfloat8_b": ttnn.bfloat8_b,
    "bfloat4_b": ttnn.bfloat4_b,
}


def build(
    mesh: ttnn.MeshDevice,
    config: str = "llama-3.1-70b",
    mode: str = "tp",
    batch: int = 32,
    context: int = 2048,
    dtype: str = "bfloat16",
    weight_dtype: str = "bfloat8_b",
    cache_dtype: str = "bfloat16",
    scan_layers: bool = True,
) -> TtLlama:
    """An abstract (weightless) model with a KV cache of ``context`` positions."""
    cfg = get_config(config)
    return TtLlama(
        cfg,
        None,
        mesh,
        mode=mode,
        batch=batch,
        dtype=_DTYPES[dtype],
        weight_dtype=_DTYPES[weight_dtype],
        cache_dtype=_DTYPES[cache_dtype],
        max_seq_len=context,
        scan_layers=scan_layers,
    )


def decode_step(
    mesh: ttnn.MeshDevice, **kwargs: Any
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """``(step, (params, caches, tokens, pos), options)`` for one decode step on abstract inputs;
    the KV cache is donated (updated in place, as in TT-NN)."""
    model = build(mesh, **kwargs)
    b = model.batch
    mapper = ttnn.ShardTensorToMesh(mesh, dim=0) if model.dp > 1 else None
    tokens = ttnn.abstract_tensor((b, 1), ttnn.uint32, device=mesh, mesh_mapper=mapper)
    pos = ttnn.abstract_tensor((b,), ttnn.int32, device=mesh, mesh_mapper=mapper)
    return model.decode_fn(), (model.params, model.caches, tokens, pos), {"donate_argnums": (1,)}
