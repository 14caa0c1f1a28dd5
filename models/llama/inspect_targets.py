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
    embedding: str = "hidden_sharded",
    gather_logits: bool = True,
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
        embedding=embedding,
        gather_logits=gather_logits,
    )


def decode_step(
    mesh: ttnn.MeshDevice, **kwargs: Any
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """``(step, (params, caches, tokens, pos), options)`` for one decode step on abstract inputs;
    the KV cache is donated (updated in place, as in TT-NN); ``ttjax inspect --system`` predicts
    it as a decode step serving ``batch`` users."""
    model = build(mesh, **kwargs)
    b = model.batch
    mapper = ttnn.ShardTensorToMesh(mesh, dim=0) if model.dp > 1 else None
    tokens = ttnn.abstract_tensor((b, 1), ttnn.uint32, device=mesh, mesh_mapper=mapper)
    pos = ttnn.abstract_tensor((b,), ttnn.int32, device=mesh, mesh_mapper=mapper)
    options = {"donate_argnums": (1,), "phase": "decode", "users": b}
    return model.decode_fn(), (model.params, model.caches, tokens, pos), options


def full_size_report(
    mesh: ttnn.MeshDevice,
    config: str = "llama-3.1-70b",
    mode: str = "tp",
    batch: int = 32,
    context: int = 2048,
    weight_dtype: str = "bfloat8_b",
    cache_dtype: str = "bfloat8_b",
) -> dict[str, Any]:
    """Per-device memory, collectives per layer and FLOPs per token of one decode step.

    The whole model is compiled once with its layers under ``ttnn.scan`` (seconds, even for 80
    layers); ``ttjax.inspect`` counts the scanned body trip-count times for the per-step figures
    and reports one iteration of the layer loop as the per-layer figures.
    """
    import time

    opts = dict(
        mode=mode, batch=batch, context=context, weight_dtype=weight_dtype, cache_dtype=cache_dtype
    )
    start = time.perf_counter()
    fn, args, kw = decode_step(mesh, config=config, **opts)
    whole = ttnn.inspect.inspect(fn, *args, **kw, name=f"{config} decode step")
    seconds = time.perf_counter() - start
    cfg = get_config(config)
    per_step = whole.flops or 0.0
    layer = whole.layer_loop
    users_per_device = batch // (mesh.get_num_devices() if mode == "dp" else 1)
    counts = whole.collective_counts()
    m = whole.memory
    return {
        "config": config,
        "mesh": "x".join(map(str, mesh.shape)),
        "mode": mode,
        "batch": batch,
        "context": context,
        "weight_dtype": weight_dtype,
        "cache_dtype": cache_dtype,
        "inspect_seconds": seconds,
        "resident_bytes_per_device": m.resident_bytes if m else None,  # weights + KV cache + I/O
        "xla_temp_bytes_per_device": m.temp_bytes if m else None,
        "all_reduce_per_layer": layer.collectives_per_iteration["all-reduce"] if layer else None,
        "collectives_per_step": counts,
        "bytes_sent_per_device_per_step": whole.bytes_per_device,
        "flops_per_device_per_step": per_step,
        "flops_per_token_per_device": per_step / max(users_per_device, 1),
        "flops_per_token_analytic": cfg.flops_per_token(context),
    }
