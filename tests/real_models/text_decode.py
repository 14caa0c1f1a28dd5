"""A demo's whole text model decoding a few tokens through tt_transformers' ``Generator``
(prefill, then greedy decode with a paged KV cache), as the demo's text path runs it, against
transformers' ``generate`` on the same random checkpoint.

    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run -m tests.real_models.text_decode gemma3-text

Writes the demo's checkpoint (``demos.CHECKPOINTS``) to a temporary folder, opens the 1x8 mesh a
T3000 demo opens, and prints ``prefill PCC``, ``decode PCC`` (the worst step) and the greedy tokens
of both. Exits 1 when a PCC is under 0.99 or the tokens differ. tt-metal's own whole-model test
(``test_model.py``) passes no local rope to Gemma-3's sliding layers, hence this script.

``qwen25_vl`` runs qwen25_vl's own text model and ``Generator`` (``tt/model.py``'s mrope
``Transformer``, ``tt/generator.py``) the way its ``demo/demo.py`` does on a text-only prompt:
embeddings from the reference model's ``embed_tokens``, the prompt padded to 128 by
``preprocess_inputs_prefill``, cos/sin from ``multimodal_rope_from_hf`` (transformers'
``get_rope_index`` and mrope), ``update_cos_sin`` before decode.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from tests.real_models import demos, harness


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", choices=sorted(demos.CHECKPOINTS))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=4, help="decode steps")
    opts = parser.parse_args(argv)
    import ttnn

    with tempfile.TemporaryDirectory(prefix="ttjax-decode-") as tmp:
        os.environ.update(demos.CHECKPOINTS[opts.checkpoint](Path(tmp)))
        os.environ.setdefault("TT_CACHE_PATH", str(Path(tmp) / "cache"))
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
        try:
            s = harness.setup(mesh, n_layers=opts.layers, max_seq_len=256)
            if opts.checkpoint == "qwen25_vl":
                r = qwen25_vl_generate(s, new_tokens=opts.tokens)
            else:
                r = harness.generate(s, new_tokens=opts.tokens, paged=True)
        finally:
            ttnn.close_mesh_device(mesh)
    print(f"prefill PCC: {r.prefill_pcc:.5f}")
    if r.decode_error is not None:
        print(f"decode stops: {type(r.decode_error).__name__}: {r.decode_error}")
        return 1
    assert r.decode_pcc is not None
    print(f"decode PCC: {r.decode_pcc:.5f}")
    print(f"tokens {list(r.tokens)}, transformers' {list(r.reference_tokens)}")
    ok = min(r.prefill_pcc, r.decode_pcc) >= harness.PCC_REQUIRED and r.tokens == r.reference_tokens
    return 0 if ok else 1


def qwen25_vl_generate(
    s: harness.Setup, prompt_len: int = 40, new_tokens: int = 4
) -> harness.GenerationResult:
    """qwen25_vl's demo path on a text-only prompt (prefill, then greedy decode with a paged KV
    cache, no trace), against transformers' Qwen2.5-VL ``generate``; decode feeds transformers'
    tokens back, as :func:`harness.generate` does."""
    import torch
    import ttnn
    from transformers import BatchFeature

    from models.demos.qwen25_vl.tt.common import multimodal_rope_from_hf, preprocess_inputs_prefill
    from models.demos.qwen25_vl.tt.generator import Generator
    from models.demos.qwen25_vl.tt.model import Transformer

    args, hf = s.args, s.hf
    paged_config, page_table = harness.paged_setup(s)
    dtype = ttnn.bfloat8_b
    model = Transformer(
        args=args,
        dtype=dtype,
        mesh_device=s.mesh,
        state_dict=s.state_dict,
        weight_cache_path=args.weight_cache_path(dtype),
        paged_attention_config=paged_config,
    )
    kv_cache = [layer.attention.layer_past for layer in model.layers]
    gen = Generator(model, args, s.mesh, tokenizer=args.tokenizer)
    prompt, ref_logits, ref_tokens = harness.reference_generate(s, prompt_len, new_tokens)
    with torch.no_grad():
        inputs = BatchFeature({"input_ids": prompt, "attention_mask": torch.ones_like(prompt)})
        embed = hf.model.language_model.embed_tokens
        input_embeds = embed(prompt)
        prefill, decoding_pos, _ = preprocess_inputs_prefill(
            input_embeds, args, inputs.attention_mask, pad_embedding=embed(torch.tensor(0))
        )
        cos, sin = multimodal_rope_from_hf(inputs, input_embeds, hf, args, pad_token_id=0)
    logits = gen.prefill_forward_text(
        prefill, rot_mats=(cos, sin), page_table=page_table, kv_cache=kv_cache,
        prompt_lens=decoding_pos,
    )  # fmt: skip
    gen.update_cos_sin(cos_matrix_pt=cos, sin_matrix_pt=sin)
    first = logits.reshape(-1)[: args.vocab_size]
    prefill_pcc = harness.pcc(ref_logits[0], first)
    tokens = [int(torch.argmax(first))]
    worst = 1.0
    try:
        pos = torch.tensor([prompt_len])
        for i in range(new_tokens):
            tok = torch.tensor([[ref_tokens[i]]])
            out = gen.decode_forward_text(
                tok, pos, page_table=page_table, kv_cache=kv_cache, enable_trace=False
            )
            step = out.reshape(-1)[: args.vocab_size]
            worst = min(worst, harness.pcc(ref_logits[i + 1], step))
            tokens.append(int(torch.argmax(step)))
            pos = pos + 1
    except Exception as e:
        return harness.GenerationResult(prefill_pcc, None, tuple(tokens), ref_tokens, e)
    for i, (mine, theirs) in enumerate(zip(tokens, ref_tokens)):
        if mine != theirs:  # how close transformers' own logits were
            r = ref_logits[i]
            print(
                f"step {i}: transformers' logits give {theirs} {float(r[theirs]):.4f} and {mine} "
                f"{float(r[mine]):.4f} (their std {float(r.std()):.4f})"
            )
    return harness.GenerationResult(prefill_pcc, worst, tuple(tokens), ref_tokens)


if __name__ == "__main__":
    sys.exit(main())
