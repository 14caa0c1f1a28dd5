"""Environment handling in ``ttjax._config``: device counts and visible device ids."""

from __future__ import annotations

import jax
import pytest

import ttjax as ttnn
from ttjax import _config


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
