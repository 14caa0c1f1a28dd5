"""The jitted train step: DDP, TP and TP+DDP follow the single-device run step for step.

Same data, same seed: per-step losses over 20 AdamW steps (warmup + cosine, clipping, gradient
accumulation) equal the 1x1 run within float32 tolerance, and the gradients equal plain
single-device ``jax.grad`` of the model's loss (no shard_map, no collectives).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import yaml
from _reference import unordered_sums
from _tiny import CONFIG, OPT, batches, losses, mesh, params, train_step

import ttjax
from models.nanogpt.model import GPT
from models.nanogpt.weights import param_specs
from ttjax.errors import ConfigError
from ttjax.ttml.config import load_config
from ttjax.ttml.context import ParallelismContext
from ttjax.ttml.train import (
    OptimizerSettings,
    TrainStep,
    clip_by_norm,
    make_optimizer,
    mixed_precision,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def single() -> np.ndarray:
    return losses("single")


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param("ddp", marks=pytest.mark.slow),
        pytest.param("tp", marks=pytest.mark.slow),
        "tp_ddp",
    ],
)
def test_losses_equal_single_device(single, layout):
    got = losses(layout)
    assert single[-1] < single[0] - 0.3  # it learns
    np.testing.assert_allclose(got, single, rtol=2e-5, atol=2e-5)


@pytest.mark.slow
def test_losses_equal_single_device_4x8(single):
    np.testing.assert_allclose(losses("tp_ddp_4x8"), single, rtol=2e-5, atol=2e-5)


@pytest.mark.slow
def test_gradients_equal_single_device_jax_grad():
    p, tokens = params(), batches(1)[0]
    loss, grads = train_step("tp_ddp").grads(
        jax.device_put(p, train_step("tp_ddp").param_shardings), tokens
    )

    def plain(p):  # the mean over micro-batches of the whole-batch loss, on one device
        model = GPT(CONFIG)
        per = [model.loss(p, t[:, :-1], t[:, 1:]) for t in jnp.asarray(tokens)]
        return sum(per) / len(per)

    want_loss, want = jax.jit(jax.value_and_grad(plain))(p)
    assert abs(float(loss) - float(want_loss)) < 1e-5
    flat_got, flat_want = jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(want)
    assert len(flat_got) == len(flat_want)
    for g, w in zip(flat_got, flat_want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=2e-6)
    # And the whole step's update equals optax on the single-device gradients.
    assert float(optax.tree.norm(grads)) == pytest.approx(float(optax.tree.norm(want)), 1e-5)


@pytest.fixture(scope="module")
def single_3_steps() -> np.ndarray:
    return losses("single", 3)


def _lowered(step, state) -> str:
    """The whole train step's StableHLO (what the policy in effect traces)."""
    return jax.jit(step).lower(state, batches(1)[0]).as_text()


def _deterministic_run(layout: str, fresh: bool, steps: int = 3) -> tuple[np.ndarray, list, str]:
    """Losses, final parameters and the step's StableHLO of ``steps`` AdamW steps under
    ``ttjax.numerics("deterministic")``; ``fresh``: a new TrainStep, traced and compiled again."""
    step = train_step.__wrapped__(layout) if fresh else train_step(layout)
    state = step.init_state(params())
    with ttjax.numerics("deterministic"):
        text = _lowered(step, state)
        out = []
        for tokens in batches(steps):
            state, metrics = step(state, tokens)
            out.append(np.asarray(metrics["loss"]))
    return np.asarray(out), jax.tree_util.tree_leaves(jax.device_get(state.params)), text


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param("tp_ddp_1x8", marks=pytest.mark.slow),
        pytest.param("tp_ddp", marks=pytest.mark.slow),  # 2x4
        pytest.param("tp_ddp_8x1", marks=pytest.mark.slow),
    ],
)
def test_deterministic_tp_ddp_is_bitwise_reproducible(single_3_steps, layout):
    """TP+DDP under the deterministic policy: every sum of the step is in device order (none left
    to XLA), and two runs, each traced and compiled afresh, give bitwise the same losses and
    parameters, within 1e-6 of the single-device run. (Bitwise equality across the meshes 1x8,
    2x4, 8x1 does not hold: TP splits each matmul's contraction, so the partial sums differ.)"""
    losses_a, params_a, text = _deterministic_run(layout, fresh=False)
    losses_b, params_b, _ = _deterministic_run(layout, fresh=True)
    assert unordered_sums(text) == []
    step = train_step(layout)  # the fast policy leaves the sums to XLA: the check sees them
    assert unordered_sums(_lowered(step, step.init_state(params())))
    np.testing.assert_array_equal(losses_a, losses_b)
    for a, b in zip(params_a, params_b):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(losses_a, single_3_steps, rtol=0, atol=1e-6)


# A clipping norm below the tiny model's gradient norm: every step clips.
CLIP_OPT = dataclasses.replace(OPT, clip_grad_norm_max_norm=0.5)


def _clip_step(layout: str, in_step: bool) -> TrainStep:
    """The tiny TrainStep clipping at 0.5: by the step (``clip_norm``, its norm summed through
    ``ttjax.numerics``) or by the optimizer (optax's ``clip_by_global_norm``, the reference)."""
    return train_step(layout, CLIP_OPT, step_clips=in_step)


def _run(step: TrainStep, steps: int = 2) -> tuple[list, list]:
    state = step.init_state(params())
    norms = []
    for tokens in batches(steps):
        state, metrics = step(state, tokens)
        norms.append(float(metrics["grad_norm"]))
    return norms, jax.tree_util.tree_leaves(jax.device_get(state.params))


@pytest.mark.slow
def test_step_clipping_equals_optax_clip_by_global_norm():
    """The step's clipping (norm summed by ``ttjax.numerics``) is optax's ``clip_by_global_norm``:
    on one device, and on TP+DDP 2x4 under the deterministic policy, the parameters after two
    clipped AdamW steps equal the one-device optax run; the optimizer state keeps its layout."""
    want_norms, want = _run(_clip_step("single", in_step=False))
    assert min(want_norms) > 0.5  # the clipping acts
    got_norms, got = _run(_clip_step("single", in_step=True))
    np.testing.assert_allclose(got_norms, want_norms, rtol=1e-6)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)
    with ttjax.numerics("deterministic"):
        mesh_norms, on_mesh = _run(_clip_step("tp_ddp", in_step=True))
    np.testing.assert_allclose(mesh_norms, want_norms, rtol=1e-5)
    for g, w in zip(on_mesh, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5)
    p = params()
    clipping, stepped = make_optimizer(CLIP_OPT), make_optimizer(CLIP_OPT, clip=False)
    assert jax.tree.structure(clipping.init(p)) == jax.tree.structure(stepped.init(p))


@pytest.mark.slow  # `make test-all`: keeps `make test` under 10 minutes (test_step_clipping_equals_optax_clip_by_global_norm stays)
def test_clipped_gradients_equal_optax_on_one_device():
    """The clipped gradients themselves (Adam's update hides a common scale): TP+DDP 2x4 under
    the deterministic policy, norm by ``step.grad_norm``, equal optax's ``clip_by_global_norm``
    of the one-device gradients."""
    single, tokens = _clip_step("single", in_step=False), batches(1)[0]
    _, want_grads = single.grads(single.place_params(params()), tokens)
    want, _ = optax.clip_by_global_norm(0.5).update(want_grads, optax.EmptyState())
    step = _clip_step("tp_ddp", in_step=True)
    with ttjax.numerics("deterministic"):
        _, grads = step.grads(step.place_params(params()), tokens)
        got = jax.jit(lambda g: clip_by_norm(g, step.grad_norm(g), 0.5))(grads)
    assert float(optax.tree.norm(want_grads)) > 0.5
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=0, atol=1e-6)


@pytest.mark.slow
def test_deterministic_clipped_step_leaves_no_sum_to_xla():
    """Under the deterministic policy the whole compiled step (the partitioner's collectives
    included) has no all-reduce that adds when the step clips and reports grad_norm; optax's
    clipping on the global gradients leaves one to XLA (what the check catches)."""

    def compiled(step: TrainStep) -> str:
        state = step.init_state(params())
        return jax.jit(step).lower(state, batches(1)[0]).compile().as_text()

    with ttjax.numerics("deterministic"):
        assert unordered_sums(compiled(_clip_step("tp_ddp", in_step=True))) == []
        assert unordered_sums(compiled(_clip_step("tp_ddp", in_step=False)))


def test_clip_norm_must_be_positive():
    par = ParallelismContext.from_axes(mesh((1, 1)), None, None)
    with pytest.raises(ConfigError, match=r"clip_norm=0.0 must be > 0"):
        TrainStep(
            GPT(CONFIG).loss, param_specs(CONFIG, par), par, make_optimizer(OPT), clip_norm=0.0
        )


def test_same_init_on_every_mesh():
    a = train_step("tp_ddp").init_state(params())
    b = train_step("ddp").init_state(params())
    for x, y in zip(jax.tree_util.tree_leaves(a.params), jax.tree_util.tree_leaves(b.params)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_batch_not_divisible_by_ddp_size():
    step = train_step("tp_ddp")
    state = step.init_state(params())
    bad = np.zeros((2, 3, 9), np.int32)
    with pytest.raises(
        ConfigError, match=r"batch_size=3 must be divisible by the data-parallel size 2"
    ):
        step(state, bad)


def _leaves(tree) -> list:
    return jax.tree_util.tree_leaves(tree)


@pytest.mark.parametrize("layout", ["single", pytest.param("ddp_2", marks=pytest.mark.slow)])
def test_step_donates_its_state_and_trains_alike(layout):
    """The step writes the new state over the one it is given (deleted), with the losses and
    parameters of a step that keeps it; the caller's parameters, already placed (on 1x1 the
    state would share their buffers, on 1x2 a replica on device 0), are never donated."""
    donating = train_step(layout)
    keeping = TrainStep(
        GPT(CONFIG).loss,
        donating.param_specs,
        donating.par,
        make_optimizer(OPT),
        accum=donating.accum,
        schedule=OPT.schedule(),
        donate=False,
    )
    whole = params()
    mine = jax.device_put(whole, donating.param_shardings)
    state, other = donating.init_state(mine), keeping.init_state(mine)
    # Both compiled with XLA's own CPU emitters, as a user's step is: under the suite's cheaper
    # loop emitters (tests/conftest.py) the program that writes in place rounds one fused
    # update otherwise (an ulp), which says nothing of the donation.
    for step, st in ((donating, state), (keeping, other)):
        step.compiled(st, batches(1)[0], compiler_options={"xla_cpu_use_fusion_emitters": True})
    got, want = [], []
    for tokens in batches(3):
        old, before = state, other
        state, m = donating(state, tokens)
        got.append(float(m["loss"]))
        other, m = keeping(other, tokens)
        want.append(float(m["loss"]))
        assert all(a.is_deleted() for a in _leaves(old))
        assert not any(a.is_deleted() for a in _leaves(before))
    assert got == want
    for a, b in zip(_leaves(state), _leaves(other), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for a, b in zip(_leaves(mine), _leaves(whole), strict=True):
        assert not a.is_deleted()
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # XLA's own figure: the new state is written over the donated one
    shapes = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), whole)
    alias = [
        s.compiled(*s.abstract_inputs(shapes, 8, 8)).memory_analysis().alias_size_in_bytes
        for s in (donating, keeping)
    ]
    state_bytes = sum(a.addressable_shards[0].data.nbytes for a in _leaves(state))
    assert alias == [state_bytes, 0]


def test_heads_and_vocab_must_divide_tp():
    from _tiny import mesh

    from models.nanogpt.weights import param_specs

    par = ParallelismContext.from_axes(mesh((1, 8)), None, 1)
    with pytest.raises(ConfigError, match="n_head=4 must be divisible by the TP size 8"):
        param_specs(CONFIG.__class__(n_head=4, n_embd=32, vocab_size=64), par)
    with pytest.raises(
        ConfigError,
        match=r"wte.weight of shape \[60, 32\]: dim 0 \(.vocab., size 60\) does not divide by tp=8",
    ):
        param_specs(CONFIG.__class__(n_head=8, n_embd=32, vocab_size=60), par)


def test_optimizer_settings_from_ttml_yaml():
    run = load_config(ROOT / "configs" / "training_nanogpt_tp_ddp.yaml")
    opt = OptimizerSettings.from_config(run)
    assert (opt.learning_rate, opt.beta2, opt.warmup_steps, opt.min_lr) == (0.003, 0.95, 20, 0.0003)
    assert opt.clip_grad_norm_max_norm == 1.0 and opt.scheduler_type == "warmup_cosine"
    lr = opt.schedule()
    assert float(lr(0)) == 0.0 and float(lr(20)) == pytest.approx(0.003)
    assert float(lr(opt.total_steps)) == pytest.approx(0.0003)
    assert OPT.total_steps == 20


def _amsgrad_reference(p, grads, lr, wd, b1, b2, eps, decay, raw_max=True):
    """AMSGrad + decoupled weight decay, numpy: PyTorch's and ``moreh_adamw``'s (the maximum of
    the raw second moment, bias-corrected after it), or optax's (``raw_max=False``: the maximum
    of the bias-corrected moment). Returns the parameters and the running maximum."""
    p = {k: v.astype(np.float64) for k, v in p.items()}
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(x) for k, x in p.items()}
    vmax = {k: np.zeros_like(x) for k, x in p.items()}
    for t, g in enumerate(grads, start=1):
        for k in p:
            m[k] = b1 * m[k] + (1 - b1) * g[k]
            v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
            if raw_max:
                vmax[k] = np.maximum(vmax[k], v[k])
                v_hat = vmax[k] / (1 - b2**t)
            else:
                vmax[k] = v_hat = np.maximum(vmax[k], v[k] / (1 - b2**t))
            u = (m[k] / (1 - b1**t)) / (np.sqrt(v_hat) + eps) + wd * p[k] * decay[k]
            p[k] = p[k] - lr * u
    return p, vmax


def test_amsgrad_from_yaml_is_honoured(tmp_path):
    """``optimizer: {amsgrad: true}`` runs AMSGrad (state and updates equal the numpy reference)."""
    doc = {
        "training_config": {
            "scheduler_type": "identity",
            "optimizer": {"amsgrad": True, "lr": 0.1, "weight_decay": 0.1, "beta2": 0.99},
        }
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(doc))
    settings = OptimizerSettings.from_config(load_config(path))
    assert settings.amsgrad and settings.clip_grad_norm_max_norm is None
    opt = make_optimizer(settings)
    rng = np.random.default_rng(0)
    p = {"w": rng.standard_normal((3, 4)).astype(np.float32), "b": np.ones(4, np.float32)}
    # A large first gradient, then small ones: the running maximum keeps step 1's moment.
    grads = [
        {k: (s * rng.standard_normal(a.shape)).astype(np.float32) for k, a in p.items()}
        for s in (5.0, 0.1, 0.1, 0.1)
    ]
    params, state = jax.tree.map(jnp.asarray, p), opt.init(jax.tree.map(jnp.asarray, p))
    for g in grads:
        updates, state = opt.update(jax.tree.map(jnp.asarray, g), state, params)
        params = optax.apply_updates(params, updates)
    want, vmax = _amsgrad_reference(p, grads, 0.1, 0.1, 0.9, 0.99, 1e-8, {"w": 1.0, "b": 0.0})
    for k in p:
        np.testing.assert_allclose(np.asarray(params[k]), want[k], rtol=1e-5, atol=1e-6)
    leaves = jax.tree.leaves(state, is_leaf=lambda s: hasattr(s, "nu_max"))
    nu_max = [s.nu_max for s in leaves if hasattr(s, "nu_max")]  # ScaleByAmsgradState's
    optax_way = _amsgrad_reference(p, grads, 0.1, 0.1, 0.9, 0.99, 1e-8, {"w": 1.0, "b": 0.0}, False)
    assert not np.allclose(want["w"], optax_way[0]["w"], rtol=1e-4)  # the two formulas differ
    assert len(nu_max) == 1
    for k in p:
        np.testing.assert_allclose(np.asarray(nu_max[0][k]), vmax[k], rtol=1e-5)
    # Plain AdamW (what ran before) ends elsewhere: the flag is not silently dropped.
    plain = make_optimizer(dataclasses.replace(settings, amsgrad=False))
    params2, state2 = jax.tree.map(jnp.asarray, p), plain.init(jax.tree.map(jnp.asarray, p))
    for g in grads:
        updates, state2 = plain.update(jax.tree.map(jnp.asarray, g), state2, params2)
        params2 = optax.apply_updates(params2, updates)
    assert not np.allclose(np.asarray(params2["w"]), want["w"], rtol=1e-3)


@pytest.mark.slow
def test_bf16_compute_equals_fp32_within_bf16_rounding():
    """``compute_dtype: bfloat16``: the forward and backward in bf16 on float32 master weights.

    Tolerances, derived: bf16 keeps 8 significant bits, so each rounding errs by at most
    u = 2**-8 relative. On the way from the parameters to the logits z the tiny NanoGPT rounds at
    most R = 4 n_layer + 4 times in sequence (parameter casts, matmul outputs, norms, the
    residual adds), so |dz| <= R u max|z|; the cross-entropy moves by at most 2 max|dz| (its
    gradient in z has L1 norm <= 2). After n steps, AdamW moves each parameter by at most
    ~lr_t per step (|m_hat / sqrt(v_hat)| <= 1 for beta1**2 < beta2), so two runs differ by at most
    2 sum(lr_t) (1 + weight decay).
    """
    par = ParallelismContext.from_axes(mesh((1, 1)))
    steps = {
        dt: TrainStep(
            mixed_precision(GPT(CONFIG).loss, dt),
            param_specs(CONFIG, par),
            par,
            make_optimizer(OPT),
            accum=2,
            schedule=OPT.schedule(),
        )
        for dt in ("float32", "bfloat16")
    }
    p0, tokens = params(), batches(3)
    states, first = {}, {}
    for dt, step in steps.items():
        state = step.init_state(p0)
        for t in tokens:
            state, metrics = step(state, t)
            first.setdefault(dt, float(metrics["loss"]))  # the loss at p0
        states[dt] = state
    z = GPT(CONFIG)(p0, jnp.asarray(tokens[0, 0, :, :-1]))
    bound = 2 * (4 * CONFIG.n_layer + 4) * 2.0**-8 * float(jnp.max(jnp.abs(z)))
    assert 0 < abs(first["bfloat16"] - first["float32"]) <= bound  # bf16 in force, within rounding
    bf16 = steps["bfloat16"]
    grads = jax.eval_shape(bf16._grads, bf16.place_params(p0), tokens[0])[1]
    assert {x.dtype for x in jax.tree.leaves(grads)} == {jnp.dtype("float32")}  # fp32 gradients
    floats = [x for x in jax.tree.leaves(states["bfloat16"]) if x.dtype != jnp.int32]
    assert {x.dtype for x in floats} == {jnp.dtype("float32")}  # master weights, AdamW state
    moved = 2 * sum(float(OPT.schedule()(t)) for t in range(len(tokens))) * (1 + OPT.weight_decay)
    pairs = zip(
        jax.tree.leaves(states["float32"].params), jax.tree.leaves(states["bfloat16"].params)
    )
    assert max(float(jnp.max(jnp.abs(a - b))) for a, b in pairs) <= moved


def test_amsgrad_equals_torch_adamw_amsgrad():
    """``make_optimizer(amsgrad=True)`` against ``torch.optim.AdamW(amsgrad=True)``, 5 steps."""
    torch = pytest.importorskip("torch")
    settings = OptimizerSettings(
        0.05, 0.1, 0.9, 0.99, 1e-8, "identity", clip_grad_norm_max_norm=None, amsgrad=True
    )
    opt = make_optimizer(settings, decay_mask=lambda p: jax.tree.map(lambda _: True, p))
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((4, 6)).astype(np.float32)
    grads = [
        (s * rng.standard_normal(w0.shape)).astype(np.float32) for s in (3.0, 0.1, 1.0, 0.1, 0.1)
    ]
    tw = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    topt = torch.optim.AdamW(
        [tw], lr=0.05, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1, amsgrad=True
    )
    w, state = jnp.asarray(w0), opt.init(jnp.asarray(w0))
    for g in grads:
        tw.grad = torch.from_numpy(g)
        topt.step()
        updates, state = opt.update(jnp.asarray(g), state, w)
        w = optax.apply_updates(w, updates)
    np.testing.assert_allclose(np.asarray(w), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    nu_max = jax.tree.leaves(state, is_leaf=lambda s: hasattr(s, "nu_max"))
    (raw,) = [s.nu_max for s in nu_max if hasattr(s, "nu_max")]
    torch_max = topt.state[tw]["max_exp_avg_sq"].numpy()
    np.testing.assert_allclose(np.asarray(raw), torch_max, rtol=1e-5)
