"""NanoGPT against Hugging Face's GPT-2 (transformers, PyTorch) with the same weights, on one
device and split over a 2x4 mesh (DDP 2 x TP 4, vocab-parallel logits assembled for the check)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _reference import assert_trees_close
from jax.sharding import PartitionSpec as P

import ttjax as ttnn
from models.nanogpt.model import GPT, GPTConfig
from models.nanogpt.weights import init_params, param_specs
from ttjax.errors import ConfigError
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.stacked import unstack_blocks

CONFIG = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32)


def _hf_model(params, tied=True):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    c = CONFIG
    hf = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            vocab_size=c.vocab_size,
            n_positions=c.block_size,
            n_embd=c.n_embd,
            n_layer=c.n_layer,
            n_head=c.n_head,
            activation_function="gelu_new",
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            layer_norm_epsilon=1e-5,
            tie_word_embeddings=tied,
        )
    ).eval()
    hd, d, h = c.n_embd // c.n_head, c.n_embd, c.n_head

    def t(a):
        return torch.tensor(np.asarray(a))

    def qkv_cols(a):  # ours: columns (head, q/k/v, hd) -> GPT-2's (q/k/v, head, hd)
        a = np.asarray(a)
        lead = a.shape[:-1]
        return a.reshape(*lead, h, 3, hd).swapaxes(-3, -2).reshape(*lead, 3 * d)

    sd = {
        "transformer.wte.weight": t(params["wte"]["weight"]),
        "transformer.wpe.weight": t(params["wpe"]),
        "transformer.ln_f.weight": t(params["ln_f"]["scale"]),
        "transformer.ln_f.bias": t(params["ln_f"]["bias"]),
    }
    for i, b in enumerate(unstack_blocks(params["blocks"])):
        p = f"transformer.h.{i}."
        sd |= {
            p + "ln_1.weight": t(b["ln_1"]["scale"]),
            p + "ln_1.bias": t(b["ln_1"]["bias"]),
            p + "attn.c_attn.weight": t(qkv_cols(b["c_attn"]["weight"])),
            p + "attn.c_attn.bias": t(qkv_cols(b["c_attn"]["bias"])),
            p + "attn.c_proj.weight": t(b["attn_proj"]["weight"]),
            p + "attn.c_proj.bias": t(b["attn_proj"]["bias"]),
            p + "ln_2.weight": t(b["ln_2"]["scale"]),
            p + "ln_2.bias": t(b["ln_2"]["bias"]),
            p + "mlp.c_fc.weight": t(b["c_fc"]["weight"]),
            p + "mlp.c_fc.bias": t(b["c_fc"]["bias"]),
            p + "mlp.c_proj.weight": t(b["mlp_proj"]["weight"]),
            p + "mlp.c_proj.bias": t(b["mlp_proj"]["bias"]),
        }
    if not tied:
        sd["lm_head.weight"] = t(params["lm_head"]["weight"])
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    assert not unexpected and all(k == "lm_head.weight" or "attn.bias" in k for k in missing)
    return hf, torch


@pytest.fixture(scope="module")
def setup():
    # Non-trivial norms and biases, so a mix-up of any of them would show.
    params = init_params(CONFIG, 7)
    leaves, tree = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    leaves = [x + 0.05 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)]
    params = jax.tree_util.tree_unflatten(tree, leaves)
    ids = np.random.default_rng(0).integers(0, CONFIG.vocab_size, (4, 17)).astype(np.int32)
    hf, torch = _hf_model(params)
    with torch.no_grad():
        out = hf(
            torch.tensor(ids[:, :-1], dtype=torch.long),
            labels=torch.tensor(ids[:, :-1], dtype=torch.long),
        )
        logits = out.logits.numpy()
        loss = torch.nn.functional.cross_entropy(
            out.logits.reshape(-1, CONFIG.vocab_size),
            torch.tensor(ids[:, 1:].reshape(-1), dtype=torch.long),
        ).item()
    return params, ids, logits, loss


@pytest.mark.torch
def test_single_device_matches_gpt2(setup):
    params, ids, logits, loss = setup
    model = GPT(CONFIG)
    got = jax.jit(lambda p, x: model(p, x))(params, ids[:, :-1])
    np.testing.assert_allclose(np.asarray(got), logits, atol=2e-5, rtol=1e-5)
    got_loss = jax.jit(lambda p, x, y: model.loss(p, x, y))(params, ids[:, :-1], ids[:, 1:])
    assert float(got_loss) == pytest.approx(loss, abs=1e-5)


@pytest.mark.torch
def test_tp_ddp_logits_and_loss_match_gpt2(setup):
    params, ids, logits, loss = setup
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
    par = ParallelismContext.from_axes(mesh, ddp_axis=0, tp_axis=1)
    specs = param_specs(CONFIG, par)
    model = GPT(CONFIG)

    def local(p, x, y):
        return model(p, x), jax.lax.pmean(model.loss(p, x, y), "dp")

    fn = jax.jit(
        jax.shard_map(
            local,
            mesh=par.jax_mesh,
            in_specs=(specs, P("dp"), P("dp")),
            out_specs=(P("dp", None, "tp"), P()),
            check_vma=False,
        )
    )
    got, got_loss = fn(params, jnp.asarray(ids[:, :-1]), jnp.asarray(ids[:, 1:]))
    np.testing.assert_allclose(np.asarray(got), logits, atol=2e-5, rtol=1e-5)
    assert float(got_loss) == pytest.approx(loss, abs=1e-5)


@pytest.mark.torch
def test_untied_lm_head_matches_gpt2_untied_on_tp_ddp():
    """TTML's weight_tying: disabled: NanoGPT's own vocab-parallel ``lm_head`` (split over TP like
    wte) against transformers' GPT-2 with ``tie_word_embeddings=False`` and the same weights."""
    config = GPTConfig(
        vocab_size=64, block_size=16, n_layer=1, n_head=4, n_embd=32, tie_weights=False
    )
    params = init_params(config, 7)
    assert params["lm_head"]["weight"].shape == params["wte"]["weight"].shape
    assert not np.allclose(params["lm_head"]["weight"], params["wte"]["weight"])
    tied = init_params(dataclasses.replace(config, tie_weights=True), 7)
    assert_trees_close(tied, {k: v for k, v in params.items() if k != "lm_head"}, 0, 0)
    ids = np.random.default_rng(1).integers(0, 64, (4, 9)).astype(np.int32)
    global CONFIG
    saved, CONFIG = CONFIG, config
    try:
        hf, torch = _hf_model(params, tied=False)
    finally:
        CONFIG = saved
    with torch.no_grad():
        want = hf(torch.tensor(ids, dtype=torch.long)).logits.numpy()
    par = ParallelismContext.from_axes(
        ttnn.open_mesh_device(ttnn.MeshShape(2, 4)), ddp_axis=0, tp_axis=1
    )
    model = GPT(config)
    fn = jax.jit(
        jax.shard_map(
            lambda p, x: model(p, x),
            mesh=par.jax_mesh,
            in_specs=(param_specs(config, par), P("dp")),
            out_specs=P("dp", None, "tp"),
            check_vma=False,
        )
    )
    np.testing.assert_allclose(np.asarray(fn(params, ids)), want, atol=2e-5, rtol=1e-5)


def test_unknown_attention_implementation_is_a_config_error():
    with pytest.raises(ConfigError, match="attention='flash'"):
        GPTConfig(attention="flash")


def test_unknown_remat_policy_is_a_config_error():
    with pytest.raises(ConfigError, match="remat_policy='some'") as info:
        GPTConfig(remat_policy="some")
    assert str(info.value).splitlines()[-1].startswith("fix: one of ['full', 'dots', 'none']")


def _unrolled_loss(params, idx, targets):
    """NanoGPT's loss with its blocks in a Python loop over the rows of the stacked parameters."""
    model = GPT(CONFIG)
    x = model.wte(params["wte"], idx) + params["wpe"][: idx.shape[-1]]
    for p in unstack_blocks(params["blocks"]):
        x = model.block(p, x)
    logits = model.wte.attend(params["wte"], model.ln_f(params["ln_f"], x))
    logp = jax.nn.log_softmax(logits, -1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], -1))


@pytest.mark.parametrize(
    "policy",
    [
        pytest.param("full", marks=pytest.mark.slow),
        pytest.param("dots", marks=pytest.mark.slow),
        pytest.param("none", marks=pytest.mark.slow),
    ],
)
def test_scanned_blocks_equal_the_unrolled_loop(policy):
    """The scan over stacked blocks (each remat policy): loss and gradients of the Python loop."""
    params = init_params(CONFIG, 7)
    ids = jnp.asarray(np.random.default_rng(2).integers(0, CONFIG.vocab_size, (2, 17)), jnp.int32)
    model = GPT(GPTConfig(**{**CONFIG.__dict__, "remat_policy": policy}))
    loss, grads = jax.jit(jax.value_and_grad(lambda p: model.loss(p, ids[:, :-1], ids[:, 1:])))(
        params
    )
    want_loss, want = jax.jit(
        jax.value_and_grad(lambda p: _unrolled_loss(p, ids[:, :-1], ids[:, 1:]))
    )(params)
    assert float(loss) == pytest.approx(float(want_loss), abs=1e-6)
    assert_trees_close(grads, want)
