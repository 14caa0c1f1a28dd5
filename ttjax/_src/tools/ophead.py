"""tt_transformers' prefill tail (tt-metal 821525122af5 ``models/tt_transformers/tt``): the
LM head of the prompt's last tile of rows and its logits read to the host, the ops
:mod:`ttjax._src.tools.opmodels` writes after a prefill's decoder layers."""

from __future__ import annotations

from ttjax._src.tools.opcost import REMOTE_CHIPS_PER_PCIE, OpRecord, TensorInfo


def prefill_logits_to_host(logits: TensorInfo, system: str) -> list[OpRecord]:
    """After the LM head's concat in prefill: no gather on device (lm_head.py's
    ``tt_all_reduce`` returns a 1-D mesh's input, ccl.py 85-86; model.py's vocabulary
    all-gather is decode-only, 425-441), the logits to row-major in DRAM (model.py 521-522
    ``to_layout``), then every chip's read to the host (generator.py 128-129 ->
    model.py 312-317 ``process_output_prefill``: ``tt_out.cpu()``, concatenated on the host)."""
    row_major = TensorInfo(logits.shape, "bfloat16", "DRAM")
    remote = REMOTE_CHIPS_PER_PCIE.get(system, 0)
    return [OpRecord("to_layout", (logits,), (row_major,)),
            OpRecord("to_host", (row_major,), (row_major,), {"remote_chips": remote})]  # fmt: skip


__all__ = ["prefill_logits_to_host"]
