"""The reference ``text_decode``'s gpt_oss case holds its logits to: torch with the experts as
gpt_oss's own ``tt/experts.py`` stores them. ``stored_experts`` must equal, value for value, what
that code leaves on each device (bfloat4_b), or the 0.99 bar would measure the wrong rounding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import mesh_of

from tests.real_models import demos, text_decode


def test_gpt_oss_stored_experts_are_what_its_experts_store(ttnn_bound: Any, tmp_path: Path) -> None:
    why = demos.missing(next(c for c in demos.CASES if c.demo == "gpt_oss"))
    if why:
        pytest.skip(why)
    import numpy as np
    import torch
    import ttnn
    from safetensors.torch import load_file
    from transformers import AutoConfig

    from models.demos.gpt_oss.config import MeshConfig
    from models.demos.gpt_oss.tt.experts import Experts

    demos.gpt_oss_checkpoint(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    prefix = "model.layers.0.mlp.experts."
    state = {k: v for k, v in load_file(tmp_path / "model.safetensors").items() if prefix in k}
    want = text_decode.stored_experts(state)
    mesh = mesh_of((1, 8))
    # as gpt_oss's ModelArgs.load_state_dict hands them over: bfloat16
    part = {k[len(prefix) :]: v.to(torch.bfloat16) for k, v in state.items()}
    experts = Experts(mesh, config, part, None, mesh_config=MeshConfig((1, 8), tp=8, ep=1))
    e, h, i = config.num_local_experts, config.hidden_size, config.intermediate_size
    gate_up = want[prefix + "gate_up_proj"]
    expected = {
        "gate_proj": (gate_up[..., ::2].reshape(1, e, h, i), -1),
        "up_proj": (gate_up[..., 1::2].reshape(1, e, h, i), -1),
        "down_proj": (want[prefix + "down_proj"].reshape(1, e, i, h), -2),
    }
    for name, (ref, dim) in expected.items():
        shards = np.split(ref.double().numpy(), 8, axis=dim)
        for k, dev in enumerate(ttnn.get_device_tensors(getattr(experts, name))):
            got = ttnn.to_torch(dev).double().numpy()
            np.testing.assert_array_equal(got, shards[k], err_msg=f"{name}, device {k}")
