"""A tiny random-weight Llama as a local Hugging Face folder (what ``HF_MODEL`` names).

    python -m tests.real_models.checkpoint path/to/tiny-llama [--galaxy]

Written with transformers' own ``LlamaConfig``/``LlamaForCausalLM.save_pretrained`` and a
word-level ``tokenizers`` tokenizer, so tt-metal's ``ModelArgs`` reads it as it reads a real
checkpoint, with no download.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class TinyLlama:
    """Sizes that divide over 8 devices in tiles of 32 (heads and kv heads: 8 per mesh row)."""

    vocab_size: int = 2048
    hidden_size: int = 512
    intermediate_size: int = 1024
    num_hidden_layers: int = 2
    num_attention_heads: int = 8
    num_key_value_heads: int = 8
    head_dim: int = 64
    max_position_embeddings: int = 4096
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0


# tt-metal's Galaxy (TG, 8x4) paths: ModelArgs needs dim % 1024 == 0 (its LM-head core grid,
# model_config.py "if self.num_devices == 32") and dim // 8 // 32 a multiple of 8 (its
# GATHER_USERS_MEMCFG core grid, num_to_coregrid), so dim 2048; QKV_OUT_GATHERED_MEMCFG sizes
# the fused QKV for Llama-3.2-1B's heads at that dim (32 heads, 8 kv heads of 64: 12 cores x 32
# columns per mesh row); Attention puts one kv head per mesh row (n_kv_heads = 8).
GALAXY = TinyLlama(
    hidden_size=2048,
    intermediate_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
)


# Llama-70B's Galaxy sizes at dim 8192 (64 heads, 8 kv heads of 128), the only dim where the TG
# MLP decodes (below it, ccl.py's all-reduce casts to a shard spec TT-NN refuses); hidden 7168
# (70B: 28672) keeps FF1_OUT_REDUCE_SCATTER_MEMCFG's shards (hidden // 28 // 8) tile-wide.
GALAXY_DIM_8192 = TinyLlama(
    hidden_size=8192,
    intermediate_size=7168,
    num_hidden_layers=1,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=128,
)


def galaxy_70b_sizes(dim: int = 1024) -> TinyLlama:
    """Sizes for ``models/demos/llama3_70b_galaxy`` at a width its configs take (dim % 1024 == 0):
    heads of 64, MLP twice the width."""
    return TinyLlama(hidden_size=dim, intermediate_size=2 * dim, num_attention_heads=dim // 64)


def sizes_for(mesh_name: str) -> TinyLlama:
    """The checkpoint sizes a mesh's tests use: :data:`GALAXY` on 8x4, else the default."""
    return GALAXY if mesh_name == "8x4" else TinyLlama()


def write_tiny_llama(folder: str | Path, sizes: TinyLlama = TinyLlama(), seed: int = 0) -> Path:
    """Write config.json, model.safetensors and tokenizer files for ``sizes`` into ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(**asdict(sizes), bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    config._name_or_path = folder.name
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # HF's init (std 0.02) leaves norms at 1; spread them so they matter
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
        # Embeddings 10x HF's init (std 0.2) so each token stays a large part of its residual
        # stream next to the layers' outputs, and the LM head reads a shuffled copy of them:
        # after token t the logits peak at perm[t] by a wide margin, so greedy decoding walks a
        # cycle of distinct tokens that bfloat8_b rounding cannot flip (a random head gives
        # near-ties, where any rounding may pick another token).
        model.model.embed_tokens.weight.mul_(10.0)
        perm = torch.randperm(sizes.vocab_size)
        model.lm_head.weight.copy_(model.model.embed_tokens.weight[torch.argsort(perm)])
    model.save_pretrained(folder, safe_serialization=True)
    # transformers 5 writes rope_theta under rope_parameters only; 4.x (tt-metal's) reads the key
    raw = json.loads((folder / "config.json").read_text())
    raw["rope_theta"] = sizes.rope_theta
    (folder / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
    write_word_tokenizer(folder, sizes.vocab_size)
    return folder


def write_word_tokenizer(folder: str | Path, vocab_size: int) -> None:
    """A word-level tokenizer (``<unk>``, ``<s>``, ``</s>``, then ``w3`` ...) of ``vocab_size``
    words, saved as a fast tokenizer in ``folder``: what ``AutoTokenizer`` loads for any model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"w{i}": i for i in range(3, vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    ).save_pretrained(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a tiny random Llama as an HF folder.")
    parser.add_argument("folder", help="where to write it (then HF_MODEL=that folder)")
    parser.add_argument("--galaxy", action="store_true", help="the 8x4 (TG) sizes: dim 2048")
    parser.add_argument(
        "--dim",
        type=int,
        help="another width (heads of 64, MLP 2 x dim), e.g. 1024 for the Galaxy Llama 70B",
    )
    opts = parser.parse_args(argv)
    sizes = GALAXY if opts.galaxy else TinyLlama()
    if opts.dim:
        sizes = galaxy_70b_sizes(opts.dim)
    folder = write_tiny_llama(opts.folder, sizes)
    print(f"HF_MODEL={folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
