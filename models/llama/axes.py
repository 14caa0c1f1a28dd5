"""Llama's parameters' logical axes, stated once, and how each of its four variants reads them.

Every Llama here starts from the canonical (Hugging Face) weight dict of ``weights.py``;
:data:`TOP_AXES` and :data:`LAYER_AXES` give each of its weights' dims a logical name (linears as
stored there, ``[out, in]``). The rule table of :mod:`ttjax.plan` maps the names to roles
(``vocab``, ``heads``, ``kv_heads``, ``mlp`` -> tp; ``layers`` -> pp; ``embed`` and ``norm`` stay
whole), so the Megatron plan (q/k/v, gate/up and the LM head split by output, o/down by input,
the embedding by vocabulary, norms replicated) follows from the names. The TT-NN Llama
(``sharding.py``, through :func:`ttjax.plan_mesh_mapper`), the TTML Llama (``train_model.py``), the
``mark_sharding`` Llama (``spmd.py``, through :func:`ttjax.spmd.mesh_axis_spec`) and the
``ttjax.dist`` Llama (``dist_decode.py``, through :func:`ttjax.dist.shard_spec`) all read these.

>>> weight_axes("model.layers.3.self_attn.k_proj.weight")
LogicalAxes('kv_heads', 'embed')
>>> in_out(weight_axes("model.layers.3.self_attn.k_proj.weight"))   # TT-NN / TTML: [in, out]
LogicalAxes('embed', 'kv_heads')
>>> ParallelDims.from_sizes(dp=2, tp=4).spec(weight_axes("lm_head.weight"))
P('tp',)
"""

from __future__ import annotations

import re

from ttjax.errors import ShardingError
from ttjax.plan import LogicalAxes

#: Weights outside the decoder layers (``lm_head`` is absent when the embeddings are tied).
TOP_AXES: dict[str, LogicalAxes] = {
    "model.embed_tokens.weight": LogicalAxes("vocab", "embed"),
    "model.norm.weight": LogicalAxes("norm"),
    "model.norm.bias": LogicalAxes("norm"),
    "lm_head.weight": LogicalAxes("vocab", "embed"),
}

#: Each decoder layer's weights, by their name after ``model.layers.{i}.``.
LAYER_AXES: dict[str, LogicalAxes] = {
    "input_layernorm.weight": LogicalAxes("norm"),
    "input_layernorm.bias": LogicalAxes("norm"),
    "self_attn.q_proj.weight": LogicalAxes("heads", "embed"),
    "self_attn.k_proj.weight": LogicalAxes("kv_heads", "embed"),
    "self_attn.v_proj.weight": LogicalAxes("kv_heads", "embed"),
    "self_attn.o_proj.weight": LogicalAxes("embed", "heads"),
    "post_attention_layernorm.weight": LogicalAxes("norm"),
    "post_attention_layernorm.bias": LogicalAxes("norm"),
    "mlp.gate_proj.weight": LogicalAxes("mlp", "embed"),
    "mlp.up_proj.weight": LogicalAxes("mlp", "embed"),
    "mlp.down_proj.weight": LogicalAxes("embed", "mlp"),
    "mlp.dense_h_to_4h.weight": LogicalAxes("mlp", "embed"),  # Falcon's GELU MLP
    "mlp.dense_4h_to_h.weight": LogicalAxes("embed", "mlp"),
}

#: Tensors that are not weights: RoPE tables ``[positions, head_dim]``, token ids and positions
#: ``[batch, ...]``, a KV cache ``[batch, kv_heads, positions, head_dim]``.
ROPE_AXES = LogicalAxes("positions", "head_dim")
BATCH_AXES = LogicalAxes("batch")
KV_CACHE_AXES = LogicalAxes("batch", "kv_heads", "positions", "head_dim")

#: TT-NN's hidden-sharded embedding table (tt-metal's default): the rule for that one weight
#: splits ``embed`` over tp instead of ``vocab`` (an all-gather follows the lookup).
HIDDEN_SHARDED_EMBEDDING_RULES: tuple[tuple[str, str], ...] = (("embed", "tp"),)

_LAYER = re.compile(r"model\.layers\.\d+\.(.+)")


def weight_axes(name: str) -> LogicalAxes:
    """The logical axes of one weight of the canonical dict (full name, as ``weights.py`` has it)."""
    m = _LAYER.fullmatch(name)
    axes = LAYER_AXES.get(m.group(1)) if m else TOP_AXES.get(name)
    if axes is None:
        raise ShardingError(
            f"Llama weight {name!r} has no logical axes.\n"
            "fix: add it to TOP_AXES or LAYER_AXES in models/llama/axes.py."
        )
    return axes


def in_out(axes: LogicalAxes) -> LogicalAxes:
    """A linear's axes with its last two dims swapped: ``[out, in]`` (torch) <-> ``[in, out]``."""
    *lead, a, b = axes.names
    return LogicalAxes(*lead, b, a)


def split_axis(name: str) -> str:
    """The logical axis a linear splits on (``"heads"``, ``"kv_heads"``, ``"mlp"``, ``"vocab"``),
    for TTML's ``ColumnParallelLinear`` / ``RowParallelLinear`` ``split`` field; ``name`` is a
    full name or a layer weight's name after ``model.layers.{i}.``."""
    axes = LAYER_AXES.get(name) or weight_axes(name)
    (axis,) = (n for n in axes.names if n != "embed")
    assert axis is not None
    return axis


__all__ = [
    "BATCH_AXES",
    "HIDDEN_SHARDED_EMBEDDING_RULES",
    "KV_CACHE_AXES",
    "LAYER_AXES",
    "ROPE_AXES",
    "TOP_AXES",
    "in_out",
    "split_axis",
    "weight_axes",
]
