"""Falcon's own programs (tt-metal 821525122af5 ``models/demos/falcon7b_common``,
``models/demos/t3000/falcon40b``): the facts :mod:`ttjax._src.tools.opmodels` writes Falcon's
ops from where they differ from tt_transformers' (decode attention, prefill core grid, the
logits read to the host every step)."""

from __future__ import annotations

from ttjax._src.tools.opcost import REMOTE_CHIPS_PER_PCIE, OpRecord, TensorInfo

# falcon_attention.py's decode ops between the fused QKV matmul and the dense matmul
FALCON_DECODE_ATTENTION = (
    "nlp_create_qkv_heads_falcon7b", "rotary_embedding", "rotary_embedding", "update_cache",
    "slice", "interleaved_to_sharded", "pad", "transpose", "reshape", "interleaved_to_sharded",
    "transpose", "attn_matmul", "scale_mask_softmax_in_place", "update_cache", "slice",
    "interleaved_to_sharded", "attn_matmul", "sharded_to_interleaved", "transpose", "transpose",
    "nlp_concat_heads",
)  # fmt: skip
# falcon7b_common: prefill matmuls (QKV, dense, MLP at 128 tokens) take ``core_grid`` 8x7
# (tt/model_utils.py 64-68 get_falcon_default_core_grid; tt/falcon_attention.py 342-348 and
# 466-472, tt/falcon_mlp.py 253-266), TT-NN picking the program config: no 2-D configs
FALCON_PREFILL_CORES = 56


def host_logits(logits: TensorInfo, system: str) -> list[OpRecord]:
    """Falcon's demos read every chip's logits each step and sample on the host (no gather, no
    argmax on device): untilized on one core, then read (falcon7b_common/demo/demo.py 376, 439
    -> models/common/utility_functions.py 216-233 ``untilize(use_multicore=False)``;
    t3000/falcon40b/demo/demo.py 498-507)."""
    remote = REMOTE_CHIPS_PER_PCIE.get(system, 0)
    return [OpRecord("untilize", (logits,), (logits,), {"cores": 1}),
            OpRecord("to_host", (logits,), (logits,), {"remote_chips": remote})]  # fmt: skip


__all__ = ["FALCON_DECODE_ATTENTION", "FALCON_PREFILL_CORES", "host_logits"]
