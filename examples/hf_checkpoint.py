"""Load a Hugging Face Llama checkpoint (config.json + *.safetensors) into the tensor-parallel
ttjax model and compare its logits with transformers' own model.

    python examples/hf_checkpoint.py [path/to/hf-llama]

Without a path it first writes a tiny randomly initialised Llama with transformers into a
temporary folder (offline: nothing is downloaded), so the example runs anywhere.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import ttjax as ttnn
from models.llama.model import TtLlama
from models.llama.weights import load_hf_checkpoint


def write_tiny_checkpoint(folder: Path) -> None:
    """A 2-layer random Llama saved by transformers (safetensors)."""
    import torch
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)


def main(path: str | None = None) -> float:
    import torch
    import transformers

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(path) if path else Path(tmp)
        if path is None:
            write_tiny_checkpoint(folder)
        config, weights = load_hf_checkpoint(folder)
        print(f"loaded {config.name}: {config.num_params() / 1e6:.2f}M parameters from {folder}")
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
        model = TtLlama(config, weights, mesh, mode="tp", batch=2)
        tokens = np.random.default_rng(0).integers(0, config.vocab_size, (2, 8))
        got = model.logits_to_numpy(model.prefill(model.tokens_to_device(tokens)))
        hf = transformers.LlamaForCausalLM.from_pretrained(folder).eval()
        with torch.no_grad():
            want = hf(torch.from_numpy(tokens)).logits.float().numpy()
        ttnn.close_mesh_device(mesh)
    err = float(np.max(np.abs(got - want)))
    pcc = float(np.corrcoef(got.ravel(), want.ravel())[0, 1])
    same = bool(np.array_equal(got.argmax(-1), want.argmax(-1)))
    print(f"vs transformers: PCC {pcc:.6f}, max |diff| {err:.2e}, same argmax tokens: {same}")
    return err


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
