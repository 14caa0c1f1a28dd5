"""Environment handling: how many virtual devices XLA exposes, and which device ids are visible.

XLA reads the host-device count once, when its backend starts. Importing ``ttjax`` before JAX has
started therefore sets ``jax_num_cpu_devices`` (default 32, ``TTJAX_NUM_DEVICES`` overrides), so a
T3000 (2x4) or Galaxy (8x4) mesh opens on a laptop with no flag from the user.
"""

from __future__ import annotations

import os
import re

from ttjax._src.core.errors import ConfigError

DEFAULT_NUM_DEVICES = 32

_state: dict[str, object] = {"configured": None, "reason": ""}


def _backend_started() -> bool:
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not an integer.\n"
            f"fix: set {name} to a positive device count, e.g. {name}=8 or {name}=32."
        ) from None
    if value <= 0:
        raise ConfigError(f"{name}={raw!r} must be a positive device count.\nfix: e.g. {name}=8.")
    return value


def _env_set(name: str) -> bool:
    raw = os.environ.get(name)
    return raw is not None and raw.strip() != ""


def launched() -> bool:
    """True in a rank started by ``ttjax-run`` (it sets ``TTJAX_NUM_PROCESSES``)."""
    return _env_set("TTJAX_NUM_PROCESSES")


def requested_num_devices() -> int:
    """The virtual device count asked for by ``TTJAX_NUM_DEVICES`` (default 32).

    A rank started by ``ttjax-run`` gets one device per id in its ``TT_VISIBLE_DEVICES``.
    """
    if launched():
        visible = visible_device_ids()
        if visible:
            return len(visible)
    return _env_int("TTJAX_NUM_DEVICES", DEFAULT_NUM_DEVICES)


def _xla_flag_count() -> int | None:
    match = re.search(
        r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", "")
    )
    return int(match.group(1)) if match else None


def configure_virtual_devices(num_devices: int | None = None) -> bool:
    """Make XLA expose ``num_devices`` host devices, if the JAX backend has not started yet.

    Returns True when the setting took effect. Called once on ``import ttjax``; call it again
    (through :func:`ttjax.init`) before any JAX computation to pick another count.
    """
    import jax

    n = requested_num_devices() if num_devices is None else int(num_devices)
    if _backend_started():
        _state["configured"] = False
        _state["reason"] = "backend already started"
        return False
    if (
        num_devices is None
        and _xla_flag_count() is not None
        and not _env_set("TTJAX_NUM_DEVICES")
        and not launched()
    ):
        # The user forced a count through XLA_FLAGS (and did not ask ttjax for one): respect it.
        size_launch_pool(_xla_flag_count() or n)
        _state["configured"] = True
        _state["reason"] = "XLA_FLAGS"
        return True
    size_launch_pool(n)
    jax.config.update("jax_num_cpu_devices", n)
    _state["configured"] = True
    _state["reason"] = f"jax_num_cpu_devices={n}"
    return True


def launch_pool_size(num_devices: int, cpus: int) -> int | None:
    """The launch threads XLA's CPU client needs for ``num_devices`` virtual devices on ``cpus``
    CPUs (None: its default of one per CPU is enough).

    XLA's CPU client runs a multi-device program's per-device launches and executions on one pool
    of ``max(CPUs, devices)`` threads. A launch that finds its device already running 32 programs
    (``max_inflight_computations_per_device``) blocks its pool thread, while the running program's
    collective waits in a rendezvous for a device thread no free pool thread is left to run: with
    one thread per device, 33 eagerly dispatched programs with a collective freeze. One launching
    thread blocks at most one pool thread per device, so twice the devices always leaves every
    device of the running program a thread.

    >>> launch_pool_size(8, cpus=2)
    16
    >>> launch_pool_size(8, cpus=64) is None
    True
    """
    return 2 * num_devices if cpus < 2 * num_devices else None


_POOL_MARK = "_TTJAX_PJRT_NPROC"  # the PJRT_NPROC ttjax set (a child process recomputes it)


def size_launch_pool(num_devices: int) -> None:
    """Set ``PJRT_NPROC`` (read by XLA's CPU client when JAX starts its backend,
    xla/pjrt/cpu/cpu_client.cc ``DefaultThreadPoolSize``) to :func:`launch_pool_size`, unless the
    user set it. A value ttjax set in a parent process (marked in ``_TTJAX_PJRT_NPROC``) is
    recomputed for this process's device count."""
    given = os.environ.get("PJRT_NPROC")
    if given is not None and given != os.environ.get(_POOL_MARK):
        _state["pool"] = int(given) if given.strip().isdigit() else None
        return
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    size = launch_pool_size(num_devices, cpus)
    if size is None:
        os.environ.pop("PJRT_NPROC", None)
        os.environ.pop(_POOL_MARK, None)
    else:
        os.environ["PJRT_NPROC"] = os.environ[_POOL_MARK] = str(size)
    _state["pool"] = size or cpus


def launch_pool_sized(num_devices: int) -> bool:
    """Whether XLA's CPU client started with two launch threads per device (of ``num_devices``):
    False when JAX started its backend before ttjax could size the pool, or under a smaller
    ``PJRT_NPROC`` of the user's (ttjax's eager dispatch then bounds its run-ahead instead)."""
    given = _state.get("pool")
    if not isinstance(given, int):
        return False
    return max(given, num_devices) >= 2 * num_devices


def visible_device_ids() -> list[int] | None:
    """Device ids named by ``TTJAX_VISIBLE_DEVICES`` (or TT-NN's ``TT_VISIBLE_DEVICES``), else None."""
    return visible_devices_env()[1]


def visible_devices_env() -> tuple[str, list[int] | None]:
    """``(variable name, ids)`` of the visibility variable in effect (ids None when unset)."""
    for name in ("TTJAX_VISIBLE_DEVICES", "TT_VISIBLE_DEVICES"):
        raw = os.environ.get(name)
        if raw is None or raw.strip() == "":
            continue
        ids: list[int] = []
        for part in raw.replace(" ", "").split(","):
            if not part:
                continue
            try:
                ids.append(int(part))
            except ValueError:
                raise ConfigError(
                    f"{name}={raw!r} holds {part!r}, which is not a device id.\n"
                    f"fix: a comma-separated list of ids, e.g. {name}=0,1."
                ) from None
        dups = sorted({i for i in ids if ids.count(i) > 1})
        if dups:
            raise ConfigError(
                f"{name}={raw!r} names device id(s) {dups} more than once; a device can hold only "
                f"one mesh position.\nfix: list each id once, e.g. {name}="
                f"{','.join(str(i) for i in dict.fromkeys(ids))}."
            )
        return name, ids
    return "TT_VISIBLE_DEVICES", None
