"""A demo's whole text model decoding a few tokens through tt_transformers' ``Generator``
(prefill, then greedy decode with a paged KV cache), as the demo's text path runs it, against
transformers' ``generate`` on the same random checkpoint.

    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run -m tests.real_models.text_decode gemma3-text
    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run -m tests.real_models.text_decode gpt_oss

Writes the demo's checkpoint (``demos.CHECKPOINTS``) to a temporary folder, opens the 1x8 mesh a
T3000 demo opens, and prints ``prefill PCC``, ``decode PCC`` (the worst step) and the greedy tokens
of both. Exits 1 when a PCC is under its bar or the tokens differ. tt-metal's own whole-model test
(``test_model.py``) passes no local rope to Gemma-3's sliding layers, and gpt_oss's scores tokens
cached from the released model, hence this script.

gpt_oss runs its own ``Model`` the way ``demo/text_demo.py`` builds and drives it
(``prepare_gpt_oss_generator_args``: paged KV cache of 64-token blocks, the demo's page table;
decode traced as the demo traces it on 1x8). Its experts are stored as bfloat4_b, which alone
takes torch's MoE to PCC ~0.96 against float weights: its logits are also compared with torch
holding the experts as TT-NN stores them (:func:`stored_experts`), and that PCC is the one held
to 0.99.

``qwen25_vl`` runs qwen25_vl's own text model and ``Generator`` (``tt/model.py``'s mrope
``Transformer``, ``tt/generator.py``) the way its ``demo/demo.py`` does on a text-only prompt:
embeddings from the reference model's ``embed_tokens``, the prompt padded to 128 by
``preprocess_inputs_prefill``, cos/sin from ``multimodal_rope_from_hf`` (transformers'
``get_rope_index`` and mrope), ``update_cos_sin`` before decode.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.real_models import demos, harness
from tests.real_models.mixtral import MAG_BITS, blockfloat_round

# The demo's sizes (demo/text_demo.py, the 1x8 case): max_seq_len 1024 in 64-token pages.
GPT_OSS_MAX_SEQ_LEN = 1024
GPT_OSS_PAGES = {"page_block_size": 64, "page_max_num_blocks_per_dp": GPT_OSS_MAX_SEQ_LEN // 64}


def stored_experts(state: dict[str, Any]) -> dict[str, Any]:
    """gpt_oss's expert weights as its ``tt/experts.py`` stores them: bfloat16 (its
    ``load_state_dict``), then bfloat4_b in blocks of 16 along each stored tensor's last dim:
    the gate (even) and up (odd) columns of ``gate_up_proj`` apart, ``down_proj`` as is."""
    import torch

    def rounded(v: Any) -> Any:
        x = v.to(torch.bfloat16).double().numpy()
        return torch.tensor(blockfloat_round(x, MAG_BITS["bfloat4_b"]), dtype=v.dtype)

    out = dict(state)
    for k, v in state.items():
        if ".experts.gate_up_proj" in k:
            w = v.clone()
            w[..., ::2] = rounded(v[..., ::2])
            w[..., 1::2] = rounded(v[..., 1::2])
            out[k] = w
        elif ".experts.down_proj" in k:
            out[k] = rounded(v)
    return out


def gpt_oss(
    mesh: Any, prompt_len: int, new_tokens: int, paged: bool = True
) -> tuple[harness.GenerationResult, float | None]:
    """gpt_oss's demo path on ``mesh`` against transformers' ``GptOssForCausalLM``: the
    generation result and the worst step's PCC against torch with bfloat4_b experts (None when
    decode stopped). ``paged=False``: its ``test_model.py``'s path instead (the same set-up
    without paged attention: ``fill_cache`` and unpaged SDPA decode, decode untraced)."""
    import torch
    from transformers import AutoModelForCausalLM

    from models.demos.gpt_oss.demo.text_demo import prepare_gpt_oss_generator_args
    from models.demos.gpt_oss.tests.test_factory import TestFactory
    from models.tt_transformers.tt.generator import Generator

    mesh_config = TestFactory.setup_test(mesh, use_real_weights=True)["mesh_config"]
    torch.manual_seed(0)  # the demo's page table is a random permutation of the blocks
    args, model, page_table, kv_cache, tokenizer, processor, _ = prepare_gpt_oss_generator_args(
        num_devices=mesh.get_num_devices(),
        data_parallel=1,
        mesh_device=mesh,
        instruct=True,
        global_batch_size=1,
        optimizations=None,
        max_seq_len=GPT_OSS_MAX_SEQ_LEN,
        page_params=GPT_OSS_PAGES,
        paged_attention=paged,
        mesh_config=mesh_config,
    )
    gen = Generator(model, args, mesh, processor=processor, tokenizer=tokenizer)
    folder = os.environ["HF_MODEL"]
    hf = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
    # the demo traces decode unless the experts span mesh rows; test_model.py never does
    trace = paged and mesh_config.ep <= 1
    vocab = args[0].vocab_size
    r = harness.greedy_decode(gen, hf, vocab, prompt_len, new_tokens, page_table, kv_cache, trace)
    if r.decode_error is not None:
        return r, None
    ref = copy.deepcopy(hf)
    ref.load_state_dict(stored_experts(hf.state_dict()))
    seq = torch.cat([r.prompt, torch.tensor([r.reference_tokens[:new_tokens]])], dim=-1)
    with torch.no_grad():
        want = ref(seq).logits[0, prompt_len - 1 :]
    return r, min(harness.pcc(w, got) for w, got in zip(want, r.logits, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", choices=sorted(demos.CHECKPOINTS))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=40, help="prompt tokens")
    parser.add_argument("--tokens", type=int, default=4, help="decode steps")
    parser.add_argument(
        "--unpaged", action="store_true", help="gpt_oss: test_model.py's path (no paged attention)"
    )
    opts = parser.parse_args(argv)
    import ttnn

    stored_pcc = None
    with tempfile.TemporaryDirectory(prefix="ttjax-decode-") as tmp:
        os.environ.update(demos.CHECKPOINTS[opts.checkpoint](Path(tmp)))
        os.environ.setdefault("TT_CACHE_PATH", str(Path(tmp) / "cache"))
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
        try:
            if opts.checkpoint == "gpt_oss":
                r, stored_pcc = gpt_oss(mesh, opts.prompt, opts.tokens, paged=not opts.unpaged)
            else:
                s = harness.setup(mesh, n_layers=opts.layers, max_seq_len=256)
                if opts.checkpoint == "qwen25_vl":
                    r = qwen25_vl_generate(s, prompt_len=opts.prompt, new_tokens=opts.tokens)
                else:
                    r = harness.generate(
                        s, prompt_len=opts.prompt, new_tokens=opts.tokens, paged=True
                    )
        finally:
            ttnn.close_mesh_device(mesh)
    print(f"prefill PCC: {r.prefill_pcc:.5f}")
    if r.decode_error is not None:
        print(f"decode stops: {harness.first_failing_call(r.decode_error)}")
        return 1
    assert r.decode_pcc is not None
    print(f"decode PCC: {r.decode_pcc:.5f}")
    if stored_pcc is not None:
        print(f"PCC against torch with bfloat4_b experts (every step): {stored_pcc:.5f}")
    print(f"tokens {list(r.tokens)}, transformers' {list(r.reference_tokens)}")
    worst = stored_pcc if stored_pcc is not None else min(r.prefill_pcc, r.decode_pcc)
    ok = worst >= harness.PCC_REQUIRED and r.tokens == r.reference_tokens
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
    prompt, ref_logits, ref_tokens = harness.reference_generate(
        s.hf, s.args.vocab_size, prompt_len, new_tokens
    )
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
    r = harness.teacher_forced_decode(
        gen, logits, prompt, ref_logits, ref_tokens, args.vocab_size, page_table, kv_cache
    )
    if r.decode_error is not None:
        return r
    for i, (mine, theirs) in enumerate(zip(r.tokens, ref_tokens)):
        if mine != theirs:  # how close transformers' own logits were
            ref = ref_logits[i]
            print(
                f"step {i}: transformers' logits give {theirs} {float(ref[theirs]):.4f} and {mine} "
                f"{float(ref[mine]):.4f} (their std {float(ref.std()):.4f})"
            )
    return r


if __name__ == "__main__":
    sys.exit(main())
