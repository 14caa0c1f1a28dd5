"""The TTML Llama's training step inspected on abstract inputs (``models/llama/inspect_train.py``):
its per-device parameter and optimizer bytes equal those of the real arrays the trainer places, the
FSDP collectives run over the fsdp axis only, and Llama-3.1-70B (FSDP 8 x TP 4 on 8x4) inspects in
under 60 s."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import mesh_of

from models.llama.config import get_config
from models.llama.inspect_train import abstract_step, train_report
from models.llama.train_model import params_from_weights
from models.llama.weights import random_weights


def _device_bytes(tree, device) -> int:
    """Bytes ``device`` really holds of a tree of placed arrays."""
    return sum(
        s.data.nbytes
        for a in jax.tree_util.tree_leaves(tree)
        for s in a.addressable_shards
        if s.device == device
    )


@pytest.mark.slow
def test_abstract_bytes_equal_the_placed_arrays_and_fsdp_collectives_stay_on_fsdp() -> None:
    mesh = mesh_of((2, 4))
    r = train_report(mesh, "tiny", batch=4, seq=16)
    step, _, _ = abstract_step(mesh, "tiny", batch=4, seq=16)
    cfg = get_config("tiny")
    state = step.init_state(params_from_weights(cfg, random_weights(cfg, seed=0)))
    for device in np.asarray(step.mesh.devices).ravel()[:3]:
        assert r["param_bytes_per_device"] == _device_bytes(state.params, device)
        assert r["optimizer_bytes_per_device"] == _device_bytes(state.opt_state, device)
    total = sum(a.nbytes for a in jax.tree_util.tree_leaves(state.params))
    # FSDP 2 x TP 4: every matrix is split 8 ways; only the norms ([dim]) stay whole.
    norms = (2 * cfg.n_layers + 1) * cfg.dim * 4
    assert r["param_bytes_per_device"] == (total - norms) // 8 + norms
    kinds = {(k, axes) for k, axes in r["collectives"]}
    assert ("all-gather", ("fsdp",)) in kinds and ("reduce-scatter", ("fsdp",)) in kinds
    assert {axes for k, axes in kinds if k in ("all-gather", "reduce-scatter")} == {("fsdp",)}
    assert r["temp_bytes_per_device"] > 0


@pytest.mark.slow
def test_llama_70b_fsdp8_tp4_train_step_inspects_under_a_minute() -> None:
    r = train_report(mesh_of((8, 4)), "llama-3.1-70b", batch=8, seq=2048)
    assert r["inspect_seconds"] < 60
    params = r["params"]
    assert 70e9 < params < 71e9
    # 32-way split of fp32 parameters (the norms, a few MB, stay whole over fsdp); AdamW holds two
    # moments per parameter.
    assert abs(r["param_bytes_per_device"] - params * 4 / 32) < 0.01 * params * 4 / 32
    assert abs(r["optimizer_bytes_per_device"] - 2 * r["param_bytes_per_device"]) < 1e6
