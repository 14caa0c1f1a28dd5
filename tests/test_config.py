"""Environment handling in ``ttjax._config``: device counts and visible device ids."""

from __future__ import annotations

import jax
import pytest
from _bounded import run_bounded

import ttjax as ttnn
from ttjax._src.core import config as _config


def test_default_and_env_device_count(monkeypatch):
    monkeypatch.delenv("TTJAX_NUM_DEVICES", raising=False)
    assert _config.requested_num_devices() == 32
    monkeypatch.setenv("TTJAX_NUM_DEVICES", " ")
    assert _config.requested_num_devices() == 32
    monkeypatch.setenv("TTJAX_NUM_DEVICES", "8")
    assert _config.requested_num_devices() == 8


@pytest.mark.parametrize("value", ["abc", "2.5", "0", "-4"])
def test_bad_device_count_names_value_and_fix(monkeypatch, value):
    monkeypatch.setenv("TTJAX_NUM_DEVICES", value)
    with pytest.raises(ttnn.ConfigError, match=f"TTJAX_NUM_DEVICES='{value}'") as info:
        _config.requested_num_devices()
    assert "fix:" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_xla_flag_count_parsing(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--foo=1 --xla_force_host_platform_device_count=12 --bar")
    assert _config._xla_flag_count() == 12
    monkeypatch.setenv("XLA_FLAGS", "--foo=1")
    assert _config._xla_flag_count() is None


@pytest.fixture(autouse=True)
def _keep_config_state(monkeypatch):
    """configure_virtual_devices records its outcome in a module dict; keep other tests' view."""
    monkeypatch.setattr(_config, "_state", dict(_config._state))


def test_configure_after_backend_started_reports_false():
    jax.devices()  # the suite's backend is up with 32 devices
    assert _config.configure_virtual_devices(8) is False
    assert _config._state["configured"] is False
    assert len(jax.devices()) == 32


def test_init_matching_count_is_fine_other_count_raises():
    ttnn.init(32)
    with pytest.raises(
        ttnn.ConfigError, match=r"already started with 32 CPU device\(s\); ttjax\.init\(8\)"
    ) as info:
        ttnn.init(8)
    assert "fix:" in str(info.value)


@pytest.mark.parametrize(
    ("env", "value", "expect"),
    [
        ("TT_VISIBLE_DEVICES", "0,1", [0, 1]),
        ("TT_VISIBLE_DEVICES", " 3 , 1 ,", [3, 1]),
        ("TTJAX_VISIBLE_DEVICES", "7", [7]),
        ("TT_VISIBLE_DEVICES", "", None),
    ],
)
def test_visible_device_ids(monkeypatch, env, value, expect):
    monkeypatch.delenv("TT_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("TTJAX_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv(env, value)
    assert _config.visible_device_ids() == expect


def test_visible_device_ids_unset(monkeypatch):
    monkeypatch.delenv("TT_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("TTJAX_VISIBLE_DEVICES", raising=False)
    assert _config.visible_device_ids() is None


@pytest.mark.parametrize(
    ("value", "match"), [("0,a", "holds 'a'"), ("1,2,1", r"\[1\] more than once")]
)
def test_bad_visible_device_ids(monkeypatch, value, match):
    monkeypatch.delenv("TTJAX_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("TT_VISIBLE_DEVICES", value)
    with pytest.raises(ttnn.ConfigError, match=match) as info:
        _config.visible_device_ids()
    assert f"TT_VISIBLE_DEVICES='{value}'" in str(info.value)
    assert "fix:" in str(info.value)


def test_launch_pool_size_two_threads_per_device_when_cpus_are_fewer():
    assert _config.launch_pool_size(8, cpus=2) == 16
    assert _config.launch_pool_size(32, cpus=2) == 64
    assert _config.launch_pool_size(8, cpus=16) is None


def test_size_launch_pool_keeps_the_users_and_recomputes_a_parents(monkeypatch):
    monkeypatch.setattr(_config.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.setenv("PJRT_NPROC", "5")
    monkeypatch.delenv(_config._POOL_MARK, raising=False)
    _config.size_launch_pool(8)
    assert _config.os.environ["PJRT_NPROC"] == "5"  # the user's
    monkeypatch.setenv("PJRT_NPROC", "64")
    monkeypatch.setenv(_config._POOL_MARK, "64")  # set by a parent ttjax with 32 devices
    _config.size_launch_pool(8)
    assert _config.os.environ["PJRT_NPROC"] == _config.os.environ[_config._POOL_MARK] == "16"
    assert _config.launch_pool_sized(8)
    assert not _config.launch_pool_sized(32)  # a backend of 32 devices on that pool


def test_launch_pool_sized_false_under_a_smaller_users_pool_or_none(monkeypatch):
    monkeypatch.setenv("PJRT_NPROC", "8")
    monkeypatch.delenv(_config._POOL_MARK, raising=False)
    _config.size_launch_pool(8)
    assert not _config.launch_pool_sized(8)  # 8 threads for 8 devices: the window stays on
    _config._state.pop("pool")
    assert not _config.launch_pool_sized(8)  # JAX started before ttjax sized it


# 64 programs of 8 devices with a psum, dispatched without waiting on any: with XLA's default
# launch pool (one thread per device on a small machine) the 33rd launch on a device blocks a
# pool thread and the running psum waits forever for its last device (the hang gemma3's and
# gpt_oss's demos met); the pool ttjax sizes on import runs them all.
EAGER_PSUMS = """
import numpy as np
import ttjax
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((8,), ("x",), devices=jax.devices()[:8])
f = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a @ a.T, "x"), mesh=mesh, in_specs=P("x"),
                          out_specs=P("x")))
a = np.random.default_rng(0).standard_normal((8 * 256, 256)).astype(np.float32) / 16
x = jax.device_put(a, NamedSharding(mesh, P("x")))
outs = [f(x) for _ in range(64)]
want = sum(b @ b.T for b in a.reshape(8, 256, 256))
print(max(float(np.abs(np.asarray(o) - np.tile(want, (8, 1))).max()) for o in outs[-2:]))
"""


@pytest.mark.slow
def test_eager_collective_programs_past_xla_in_flight_limit_do_not_hang():
    out = run_bounded(EAGER_PSUMS, {"TTJAX_NUM_DEVICES": "8"})
    assert float(out.split()[-1]) < 1e-3
