"""A demo's whole text model decoding a few tokens through tt_transformers' ``Generator``
(prefill, then greedy decode with a paged KV cache), as the demo's text path runs it, against
transformers' ``generate`` on the same random checkpoint.

    TT_METAL_HOME=~/tt-metal python -m ttjax.ttnn_run -m tests.real_models.text_decode gemma3-text

Writes the demo's checkpoint (``demos.CHECKPOINTS``) to a temporary folder, opens the 1x8 mesh a
T3000 demo opens, and prints ``prefill PCC``, ``decode PCC`` (the worst step) and the greedy tokens
of both. Exits 1 when a PCC is under 0.99 or the tokens differ. tt-metal's own whole-model test
(``test_model.py``) passes no local rope to Gemma-3's sliding layers, hence this script.
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


if __name__ == "__main__":
    sys.exit(main())
