"""The per-op cost model's tt_transformers program is the one tt-metal runs: one decode step of
tt-metal's own ``Transformer`` + ``Generator`` (read from ``$TT_METAL_HOME``, ``ttnn`` bound to
ttjax, the session's tiny checkpoint on a 1x8 mesh) recorded op by op, against
``ttjax.cost.model_program`` of the same config: the same ops, layer by layer."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.real_models import harness
from ttjax import cost


def _decode_ops(n_layers: int) -> list[Any]:
    import torch

    import ttjax as ttnn
    from models.tt_transformers.tt.generator import Generator
    from models.tt_transformers.tt.model import Transformer

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 8))
    s = harness.setup(mesh, n_layers)
    args = s.args
    model = Transformer(
        args=args,
        mesh_device=mesh,
        dtype=ttnn.bfloat8_b,
        state_dict=s.state_dict,
        weight_cache_path=args.weight_cache_path(ttnn.bfloat8_b),
    )
    gen = Generator([model], [args], mesh, tokenizer=args.tokenizer)
    gen.prefill_forward_text(torch.randint(0, args.vocab_size, (1, 40)), prompt_lens=[40])
    with cost.recording() as ops:
        gen.decode_forward_text(torch.tensor([[5]]), torch.tensor([40]), enable_trace=False)
    return list(ops)


@pytest.mark.slow
def test_the_written_out_decode_program_is_the_one_tt_transformers_dispatches(ttnn_bound):
    one, two = _decode_ops(1), _decode_ops(2)
    per_layer = collections.Counter(o.family for o in two) - collections.Counter(
        o.family for o in one
    )
    cfg = json.loads((Path(os.environ["HF_MODEL"]) / "config.json").read_text())
    spec = cost.spec_from_hf({**cfg, "num_hidden_layers": 2}, "tiny")
    # decode_forward_text without sampling_params: logits to the host, no argmax on device
    ours = cost.model_program(spec, "t3000", tp=8, batch=1, argmax_on_device=False)
    ours_layer = collections.Counter(o.family for o in ours if o.count == 2)
    assert per_layer == ours_layer, (per_layer, ours_layer)
    total = collections.Counter(o.family for o in ours for _ in range(o.count))
    assert collections.Counter(o.family for o in two) == total
    assert len(two) == sum(o.count for o in ours)
