"""ttjax.plan: the role-named mesh, TTML's axis rule, logical axes -> specs, and the errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from ttjax.errors import ConfigError, ParallelPlanError
from ttjax.plan import ROLES, LogicalAxes, ParallelDims


def test_from_sizes_names_axes_by_role():
    dims = ParallelDims.from_sizes(tp=4, dp=2)  # keyword order does not matter: ROLES order does
    assert dims.shape == (2, 4) and dims.roles == ("dp", "tp")
    assert dims.axis_names == ("dp", "tp")
    assert (dims.axis("tp"), dims.size("tp"), dims.size("cp"), dims.axis("cp")) == (1, 4, 1, None)
    assert repr(dims) == "ParallelDims(dp=2, tp=4)"
    assert dims.describe() == "dp 2 over mesh axis 0, tp 4 over mesh axis 1"


@pytest.mark.parametrize(
    "shape,enabled,roles",
    [
        ((2, 4), ["dp", "tp"], ("dp", "tp")),
        ((8, 4), ["tp", "fsdp"], ("fsdp", "tp")),  # TTML's TP 4 x FSDP 8 Galaxy layout
        ((2, 4), ["cp", "dp"], ("dp", "cp")),
        ((1, 8), ["tp"], (None, "tp")),  # a line mesh: the one role takes the long axis
        ((8, 1), ["dp"], ("dp", None)),
        ((1, 1), [], (None, None)),
        ((2, 2, 2), ["dp", "tp", "pp"], ("dp", "tp", "pp")),
    ],
)
def test_from_flags_follows_ttmls_axis_order(shape, enabled, roles):
    assert ParallelDims.from_flags(shape, enabled).roles == roles


@pytest.mark.parametrize("shape,enabled", [((2, 4), ["dp"]), ((2, 4), ["dp", "tp", "cp"])])
def test_from_flags_refuses_a_count_that_does_not_fit(shape, enabled):
    with pytest.raises(ParallelPlanError, match=r"must be equal to the number of mesh shape"):
        ParallelDims.from_flags(shape, enabled)


def test_errors_are_config_errors_and_name_the_value():
    with pytest.raises(ConfigError, match=r"'tensor' is not a role.*\nfix: use one of dp, fsdp"):
        ParallelDims((2,), ("tensor",))
    with pytest.raises(ValueError, match=r"role 'tp' is given more than one mesh axis"):
        ParallelDims((2, 4), ("tp", "tp"))
    with pytest.raises(ParallelPlanError, match=r"tp=0 is not a positive int"):
        ParallelDims.from_sizes(tp=0)
    with pytest.raises(ParallelPlanError, match=r"LogicalAxes.*3 is not an axis name"):
        LogicalAxes("embed", 3)  # type: ignore[arg-type]


def test_spec_maps_logical_axes_through_the_rule_table():
    dims = ParallelDims.from_sizes(dp=2, tp=4)
    assert dims.spec(LogicalAxes("embed", "mlp")) == P(None, "tp")
    assert dims.spec(LogicalAxes("mlp", "embed")) == P("tp")
    assert dims.spec(LogicalAxes("vocab", "embed")) == P("tp")
    assert dims.spec(LogicalAxes("norm")) == P()
    # A role splits one dimension of a parameter at most: the first that maps to it.
    assert dims.spec(LogicalAxes("heads", "mlp")) == P("tp")
    # A role of size 1 does not split anything.
    assert ParallelDims.from_flags((1, 8), ["dp"]).spec(LogicalAxes("vocab", "embed")) == P()


def test_custom_rules_and_several_roles_on_one_dim():
    rules = (("batch", "dp"), ("batch", "fsdp"), ("embed", "fsdp"))
    dims = ParallelDims((2, 4), ("dp", "fsdp"), rules)
    assert dims.split_roles("batch") == ("dp", "fsdp")
    assert dims.spec(LogicalAxes("batch", "embed")) == P(("dp", "fsdp"))
    assert dims.spec(LogicalAxes("embed", "batch")) == P("fsdp", "dp")
    assert dims.check_batch(16) == 2
    with pytest.raises(ParallelPlanError, match=r"batch_size=12 must be divisible by the "):
        dims.check_batch(12)


def test_specs_check_every_split_dimension_and_name_the_parameter():
    dims = ParallelDims.from_sizes(dp=2, tp=4)
    logical = {"wte": LogicalAxes("vocab", "embed"), "blocks": [{"w": LogicalAxes("embed", "mlp")}]}
    shapes = {"wte": jnp.zeros((64, 8)), "blocks": [{"w": jnp.zeros((8, 32))}]}
    assert dims.specs(logical, shapes) == {"wte": P("tp"), "blocks": [{"w": P(None, "tp")}]}
    bad = {"wte": jnp.zeros((64, 8)), "blocks": [{"w": jnp.zeros((8, 30))}]}
    with pytest.raises(ParallelPlanError, match=r"parameter blocks.0.w of shape \[8, 30\]: dim 1"):
        dims.specs(logical, bad)
    with pytest.raises(ParallelPlanError, match=r"has shape \[64\] but 2 logical axes"):
        dims.specs({"wte": LogicalAxes("vocab", "embed")}, {"wte": jnp.zeros((64,))})


def test_jax_mesh_is_named_by_role():
    dims = ParallelDims.from_flags((1, 8), ["dp"])
    mesh = dims.jax_mesh(np.array(jax.devices()[:8]))
    assert mesh.axis_names == ("_0", "dp") and mesh.devices.shape == (1, 8)


def test_gather_over_fsdp():
    rules = (("embed", "fsdp"), ("mlp", "tp"))
    dims = ParallelDims((8,), ("fsdp",), rules)
    w = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    logical = {"w": LogicalAxes("embed", "mlp"), "n": LogicalAxes("norm")}
    mesh = dims.jax_mesh(np.array(jax.devices()[:8]))
    gathered = jax.shard_map(
        lambda t: dims.gather(t, logical),
        mesh=mesh,
        in_specs=({"w": P("fsdp"), "n": P()},),
        out_specs={"w": P(), "n": P()},
        check_vma=False,
    )({"w": w, "n": np.ones(3, np.float32)})
    np.testing.assert_array_equal(np.asarray(gathered["w"]), w)
    # Without an fsdp role, gather is the identity.
    tree = {"w": w}
    assert ParallelDims.from_sizes(tp=2).gather(tree, {"w": logical["w"]}) is tree


def _seen_inside(mesh, shape=(8, 4)):
    """``ParallelDims.current()`` as the traced step sees it, and each axis's size from it."""
    seen = []

    def body(x):
        dims = ParallelDims.current()
        seen.append(dims)
        return x * dims.size("tp") + dims.size("cp")

    out = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(), out_specs=P(), check_vma=False))(
        np.zeros(shape, np.float32)
    )
    return seen[0], np.asarray(out)


def test_current_is_the_role_named_mesh_inside_the_step():
    dims = ParallelDims.from_sizes(dp=2, tp=4)
    seen, out = _seen_inside(dims.jax_mesh(np.array(jax.devices()[:8])))
    assert seen == dims and seen.name("tp") == "tp" and seen.name("cp") is None
    np.testing.assert_array_equal(out, np.full((8, 4), 1.0))  # 0 * 4 + cp size 1


def test_current_outside_a_role_named_mesh_splits_nothing():
    outside = ParallelDims.current()
    assert outside.shape == () and outside.num_devices == 1
    assert all(outside.size(r) == 1 and outside.name(r) is None for r in ROLES)
    # A mesh whose axes are not named by role: its axes play no role.
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    seen, _ = _seen_inside(mesh)
    assert seen.roles == (None, None) and seen.shape == (2, 4)
    assert all(seen.name(r) is None for r in ROLES)


def test_roles_are_ttmls_order():
    assert ROLES[:4] == ("dp", "fsdp", "cp", "tp")
