"""tt-metal's Falcon-7B data-parallel modules (``models/demos/falcon7b_common/tt``, which the
T3000 demo runs on 1x8 and the Galaxy demo on 8x4), unchanged, against transformers' Falcon.

``python -m tests.real_models.falcon7b MODULE MODE MESH [CONFIG]`` (MODULE ``mlp`` or
``causallm``; MODE ``prefill`` or ``decode``; MESH ``1x8`` or ``8x4``; CONFIG one of the
model config strings, ``BFLOAT16-DRAM`` by default) prints ``PCC <value>``. It builds the module
and its inputs as tt-metal's ``tests/test_falcon_*.py`` do: every device holds all weights and
its own users (the batch split over the mesh), so the output gathered along the batch is
compared with one torch model run on the whole batch.

Sizes: ``model_config.py`` reads ``FalconConfig.from_pretrained("tiiuae/falcon-7b-instruct")``
at import; with no hub this module writes Falcon-7B's published config into a private
``HF_HOME`` (read offline). The MLP runs at hidden 256; attention cannot: TT-NN's
``nlp_create_qkv_heads_falcon7b`` takes only Falcon-7B's fused QKV width (4672 = 71 + 2 heads
of 64), so ``causallm`` runs the real width (4544) with one decoder layer and a 1024-token
vocabulary (the vocabulary is no config's concern).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

FALCON_7B: dict[str, Any] = {
    "alibi": False,
    "apply_residual_connection_post_layernorm": False,
    "architectures": ["FalconForCausalLM"],
    "attention_dropout": 0.0,
    "bias": False,
    "bos_token_id": 11,
    "eos_token_id": 11,
    "hidden_dropout": 0.0,
    "hidden_size": 4544,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "falcon",
    "multi_query": True,
    "new_decoder_architecture": False,
    "num_attention_heads": 71,
    "num_hidden_layers": 32,
    "parallel_attn": True,
    "vocab_size": 65024,
}
HUB_NAME = "tiiuae/falcon-7b-instruct"
MAX_POSITIONS = 2048
SIZES = {"mlp": 256, "causallm": 4544}  # hidden size each module runs at (see the docstring)


def write_hub_config(home: Path) -> Path:
    """Falcon-7B's config in the layout of a Hugging Face hub cache under ``home`` (HF_HOME)."""
    repo = home / "hub" / f"models--{HUB_NAME.replace('/', '--')}"
    revision = "0" * 40
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    (snapshot / "config.json").write_text(json.dumps(FALCON_7B))
    return home


def run(module: str, mode: str, mesh_name: str, config: str = "BFLOAT16-DRAM") -> float:
    """PCC of tt-metal's Falcon ``module`` in ``mode`` on ``mesh_name`` against torch.
    Needs ``HF_HOME`` from :func:`write_hub_config` and ``HF_HUB_OFFLINE=1`` set before
    transformers is imported (``main`` does both)."""
    import torch
    from transformers import FalconConfig, FalconForCausalLM

    from models.demos.falcon7b_common.tt.model_config import get_model_config
    from tests.conftest import mesh_of
    from tests.real_models.harness import MESHES, pcc

    hidden = SIZES[module]
    cfg = FalconConfig(
        **{
            **FALCON_7B,
            "hidden_size": hidden,
            "num_attention_heads": hidden // 64,
            "num_hidden_layers": 1,
            "vocab_size": 1024,
        }
    )
    torch.manual_seed(0)
    hf = FalconForCausalLM(cfg).eval()
    mesh = mesh_of(MESHES[mesh_name])
    n = mesh.get_num_devices()
    batch, seq = (32, 1) if mode == "decode" else (1, 128)
    mc = get_model_config(config, seq if mode == "prefill" else 0, 32)
    run_module = _mlp if module == "mlp" else _causallm
    # the modules write their weight cache (hundreds of MB at width 4544): removed afterwards
    with tempfile.TemporaryDirectory(prefix="falcon7b-cache-") as cache, torch.no_grad():
        return pcc(*run_module(hf, mesh, n, mode, batch, seq, mc, Path(cache)))


def _mlp(hf: Any, mesh: Any, n: int, mode: str, batch: int, seq: int, mc: Any, cache: Path) -> Any:
    import torch
    import ttnn

    from models.common.utility_functions import tt_tensors_to_torch_tensors
    from models.demos.falcon7b_common.tests.test_utils import tt_from_torch
    from models.demos.falcon7b_common.tt.falcon_mlp import TtFalconMLPDecode, TtFalconMLPPrefill

    hidden = hf.config.hidden_size
    # prefill: users along dim 0; decode: the users are the rows (dim 2), as tt-metal's test
    x = torch.rand(batch * n, 1, seq, hidden) * 2 - 1
    dim = 0
    if mode == "decode":
        x, dim = torch.rand(1, 1, batch * n, hidden) * 2 - 1, 2
    cls = TtFalconMLPPrefill if mode == "prefill" else TtFalconMLPDecode
    mlp = cls(mesh, hf.state_dict(), "transformer.h", 0, hidden, MAX_POSITIONS, mc, cache)
    tx = tt_from_torch(
        x,
        dtype=mc["DEFAULT_DTYPE"],
        device=mesh,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=dim),
    )
    got = tt_tensors_to_torch_tensors(mlp(tx), mesh, concat_dim=dim)
    return hf.transformer.h[0].mlp(x), got


def _causallm(
    hf: Any, mesh: Any, n: int, mode: str, batch: int, seq: int, mc: Any, cache: Path
) -> Any:
    import torch
    from transformers.cache_utils import DynamicCache

    from models.common.utility_functions import tt_tensors_to_torch_tensors
    from models.demos.falcon7b_common.tests.test_utils import get_rand_falcon_inputs
    from models.demos.falcon7b_common.tt.falcon_causallm import TtFalconCausalLM

    cfg = hf.config
    kv_cache_len = 32 if mode == "decode" else 0
    users = batch * n
    ids = torch.arange(seq * users).reshape(users, seq) % cfg.vocab_size
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    past, tt_past, kv_len = get_rand_falcon_inputs(
        mode, seq, batch, kv_cache_len, mesh, users, head_dim, MAX_POSITIONS, cfg, mc,
        num_layers=1, generate_attention_inputs=False,
    )  # fmt: skip
    ref_past = None
    if past is not None:  # the random KV cache tt-metal's helper made, as a transformers cache
        ref_past = DynamicCache()
        for i, (k, v) in enumerate(past):
            ref_past.update(k, v, i)
    ref = hf(input_ids=ids, past_key_values=ref_past, use_cache=True, return_dict=False)[0]
    lm = TtFalconCausalLM(mesh, hf.state_dict(), "", 1, cfg, MAX_POSITIONS, mc, cache, seq)
    if mode == "prefill":
        tt_ids, mask = lm.model_preprocessing(mode, ids, 0, num_input_tokens=seq)
        out, _ = lm(
            input_ids=tt_ids, llm_mode=mode, attention_mask=mask, user_id=0,
            layer_past=tt_past, layer_past_len=0, use_cache=True,
        )  # fmt: skip
        got = tt_tensors_to_torch_tensors(out, mesh, concat_dim=0).squeeze(1)
    else:
        tt_ids, mask = lm.model_preprocessing(mode, ids, kv_cache_len, num_input_tokens=kv_len)
        out, _ = lm(
            input_ids=tt_ids, llm_mode=mode, attention_mask=mask,
            layer_past=tt_past, layer_past_len=kv_cache_len, use_cache=True,
        )  # fmt: skip
        got = tt_tensors_to_torch_tensors(out, mesh, concat_dim=2).squeeze(1).transpose(0, 1)
    return ref, got.reshape(ref.shape)


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4) or argv[0] not in SIZES or argv[1] not in ("prefill", "decode"):
        print(__doc__, file=sys.stderr)
        return 2
    home = Path(os.environ.get("TT_CACHE_PATH") or tempfile.mkdtemp()) / "falcon-hf-home"
    os.environ["HF_HOME"] = str(write_hub_config(home))
    os.environ["HF_HUB_OFFLINE"] = "1"
    import ttjax.compat

    ttjax.compat.install_as_ttnn()
    print(f"PCC {run(*argv):.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
