"""One ``jax.distributed`` job per ``ttjax-run``: read the launcher's environment and start the runtime.

The implementation of :mod:`ttjax.distributed.runtime`, whose docstring says more.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax

from ttjax._src.core import mesh as _mesh
from ttjax._src.core.errors import ConfigError, TTJaxError
from ttjax._src.launch.distributed import lifeline

# The launcher's environment contract (tt-run's names plus JAX's coordinator settings).
ENV_MESH_ID = "TT_MESH_ID"
ENV_MESH_HOST_RANK = "TT_MESH_HOST_RANK"
ENV_VISIBLE = "TT_VISIBLE_DEVICES"
ENV_MGD = "TT_MESH_GRAPH_DESC_PATH"
ENV_CACHE = "TT_METAL_CACHE"
ENV_COORDINATOR = "TTJAX_COORDINATOR"
ENV_NUM_PROCESSES = "TTJAX_NUM_PROCESSES"
ENV_PROCESS_ID = "TTJAX_PROCESS_ID"
ENV_RANK_TABLE = "TTJAX_RANK_TABLE"
ENV_HEARTBEAT = "TTJAX_HEARTBEAT_TIMEOUT"
ENV_INIT_TIMEOUT = "TTJAX_INIT_TIMEOUT"
ENV_LAUNCHER_PID = "TTJAX_LAUNCHER_PID"
ENV_STOP_GRACE = "TTJAX_STOP_GRACE"
ENV_RANK_LOG = "TTJAX_RANK_LOG"

DEFAULT_HEARTBEAT_S = 10
DEFAULT_INIT_TIMEOUT_S = 60
DEFAULT_STOP_GRACE_S = 30


@dataclass(frozen=True)
class LauncherEnv:
    """What ``ttjax-run`` told this rank: its rank, mesh, devices and where the coordinator is."""

    process_id: int
    num_processes: int
    coordinator: str
    mesh_id: int
    mesh_host_rank: int
    visible_devices: tuple[int, ...]
    rank_table: tuple[tuple[int, tuple[int, ...]], ...]  # per rank: (mesh_id, global device ids)
    heartbeat_timeout_s: int = DEFAULT_HEARTBEAT_S
    init_timeout_s: int = DEFAULT_INIT_TIMEOUT_S
    mesh_graph_desc_path: str | None = None
    launcher_pid: int | None = None  # the rank stops when its parent is no longer this process
    stop_grace_s: int = DEFAULT_STOP_GRACE_S  # SIGTERM -> graceful stop -> exit within this

    def mesh_ranks(self, mesh_id: int | None = None) -> tuple[int, ...]:
        """The ranks that make up mesh ``mesh_id`` (default: this rank's mesh)."""
        m = self.mesh_id if mesh_id is None else mesh_id
        return tuple(r for r, (mid, _) in enumerate(self.rank_table) if mid == m)


def format_rank_table(table: tuple[tuple[int, tuple[int, ...]], ...]) -> str:
    """``((0, (0, 1)), (1, (0, 1)))`` -> ``"0:0,1;1:0,1"`` (one entry per rank)."""
    return ";".join(f"{m}:{','.join(str(i) for i in ids)}" for m, ids in table)


def _bad(name: str, raw: str, what: str) -> ConfigError:
    return ConfigError(
        f"{name}={raw!r} {what}.\nfix: start the program with ttjax-run, which sets {name}; or "
        "unset the TTJAX_* launcher variables to run as one process."
    )


def _int_env(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        if default is None:
            raise _bad(name, "", "is missing")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _bad(name, raw, "is not an integer") from None
    if value < 0:
        raise _bad(name, raw, "is negative")
    return value


def _ids(name: str, raw: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in raw.replace(" ", "").split(",") if p)
    except ValueError:
        raise _bad(name, raw, "is not a comma-separated list of device ids") from None


def launcher_env(environ: Mapping[str, str] | None = None) -> LauncherEnv | None:
    """The launcher's settings from the environment, or None when not run by ``ttjax-run``."""
    env = os.environ if environ is None else environ
    if not env.get(ENV_NUM_PROCESSES):
        return None
    n = _int_env(env, ENV_NUM_PROCESSES)
    pid = _int_env(env, ENV_PROCESS_ID)
    if pid >= n:
        raise _bad(ENV_PROCESS_ID, str(pid), f"is not below {ENV_NUM_PROCESSES}={n}")
    raw_table = env.get(ENV_RANK_TABLE, "")
    table = []
    for entry in raw_table.split(";") if raw_table else []:
        mesh, _, ids = entry.partition(":")
        if not mesh.isdigit():
            raise _bad(ENV_RANK_TABLE, raw_table, f"holds {entry!r}, not MESH_ID:IDS")
        table.append((int(mesh), _ids(ENV_RANK_TABLE, ids)))
    if len(table) != n:
        raise _bad(ENV_RANK_TABLE, raw_table, f"has {len(table)} entries for {n} processes")
    coordinator = env.get(ENV_COORDINATOR, "")
    if ":" not in coordinator:
        raise _bad(ENV_COORDINATOR, coordinator, "is not HOST:PORT")
    mesh_id, visible = table[pid]
    if env.get(ENV_VISIBLE) and _ids(ENV_VISIBLE, env[ENV_VISIBLE]) != visible:
        raise _bad(ENV_VISIBLE, env[ENV_VISIBLE], f"disagrees with rank {pid}'s entry {visible}")
    return LauncherEnv(
        process_id=pid,
        num_processes=n,
        coordinator=coordinator,
        mesh_id=_int_env(env, ENV_MESH_ID, mesh_id),
        mesh_host_rank=_int_env(env, ENV_MESH_HOST_RANK, 0),
        visible_devices=visible,
        rank_table=tuple(table),
        heartbeat_timeout_s=_int_env(env, ENV_HEARTBEAT, DEFAULT_HEARTBEAT_S),
        init_timeout_s=_int_env(env, ENV_INIT_TIMEOUT, DEFAULT_INIT_TIMEOUT_S),
        mesh_graph_desc_path=env.get(ENV_MGD) or None,
        launcher_pid=_int_env(env, ENV_LAUNCHER_PID) if env.get(ENV_LAUNCHER_PID) else None,
        stop_grace_s=_int_env(env, ENV_STOP_GRACE, DEFAULT_STOP_GRACE_S),
    )


_state: dict[str, LauncherEnv | None] = {"env": None}


def is_initialized() -> bool:
    """True once :func:`initialize` has started the distributed runtime in this process."""
    return _state["env"] is not None


def current() -> LauncherEnv:
    """This rank's launcher settings; starts the runtime first if needed."""
    env = _state["env"]
    return env if env is not None else initialize()


def initialize(env: LauncherEnv | None = None) -> LauncherEnv:
    """Start ``jax.distributed`` from the launcher's environment (idempotent).

    Uses gloo for CPU collectives and sets the heartbeat timeout, so that a rank whose peer died
    aborts within ``TTJAX_HEARTBEAT_TIMEOUT`` seconds instead of hanging in a collective. Then
    installs the :mod:`~ttjax.distributed.lifeline`: SIGTERM ends the rank (gracefully where a
    handler such as the TTML trainer's is installed), and so does the launcher's death.
    """
    if _state["env"] is not None:
        if env is not None and env != _state["env"]:
            raise ConfigError(
                f"ttjax.distributed is already initialized as rank {_state['env'].process_id} of "
                f"{_state['env'].num_processes}; a second initialize asked for {env!r}.\n"
                "fix: initialize once per process."
            )
        return _state["env"]
    env = env if env is not None else launcher_env()
    if env is None:
        raise ConfigError(
            f"ttjax.distributed.initialize() found no launcher environment ({ENV_NUM_PROCESSES} "
            "is unset).\nfix: run the program with `ttjax-run --rank-binding config.yaml python "
            "prog.py`."
        )
    host, _, port = env.coordinator.rpartition(":")
    local = host in ("127.0.0.1", "localhost", "::1", "[::1]")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(
            coordinator_address=env.coordinator,
            num_processes=env.num_processes,
            process_id=env.process_id,
            initialization_timeout=env.init_timeout_s,
            heartbeat_timeout_seconds=env.heartbeat_timeout_s,
            shutdown_timeout_seconds=max(env.heartbeat_timeout_s, 5),
            # A single-host run listens on loopback only (JAX binds every interface by default).
            coordinator_bind_address=f"{host}:{port}" if local else None,
        )
    except RuntimeError as e:
        msg = str(e)
        if "before any JAX" in msg or "already" in msg:
            raise ConfigError(
                f"Rank {env.process_id}: jax.distributed could not start: {msg.splitlines()[0]}\n"
                "fix: call ttjax.distributed.initialize() (or open_mesh_device) before any JAX "
                "computation, e.g. before jax.devices() or jnp.ones()."
            ) from None
        raise TTJaxError(
            f"Rank {env.process_id}: could not join the job at {env.coordinator} within "
            f"{env.init_timeout_s} s: {msg.splitlines()[0] if msg else type(e).__name__}\n"
            "fix: check that every rank started and that the coordinator address is reachable."
        ) from None
    local_devices = jax.local_devices()
    if jax.default_backend() == "cpu" and len(local_devices) != len(env.visible_devices):
        raise ConfigError(
            f"Rank {env.process_id} has {len(local_devices)} CPU devices but {ENV_VISIBLE} lists "
            f"{len(env.visible_devices)} ({env.visible_devices}).\nfix: import ttjax before JAX "
            "starts its backend, so that the device count follows TT_VISIBLE_DEVICES."
        )
    _state["env"] = env
    # After jax.distributed: its preemption notifier took SIGTERM, which made ranks unkillable.
    if threading.current_thread() is threading.main_thread():
        lifeline.install(
            env.launcher_pid, env.stop_grace_s, env.process_id, os.environ.get(ENV_RANK_LOG)
        )
    _mesh.set_device_source(lambda: mesh_devices(env.mesh_id))
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = _exit_on_uncaught
    return env


def _exit_on_uncaught(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    """Print the traceback and leave at once: JAX's exit-time shutdown barrier would otherwise
    wait for the peers (and then abort), hiding the real error behind a barrier timeout."""
    sys.__excepthook__(kind, exc, tb)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130 if issubclass(kind, KeyboardInterrupt) else 1)


def _devices_by_global_id(mesh_id: int) -> list[tuple[int, jax.Device]]:
    env = current()
    by_process: dict[int, list[jax.Device]] = {}
    for d in jax.devices():
        by_process.setdefault(d.process_index, []).append(d)
    pairs = []
    for rank in env.mesh_ranks(mesh_id):
        devices = sorted(by_process.get(rank, []), key=lambda d: d.id)
        ids = env.rank_table[rank][1]
        if len(devices) < len(ids):
            raise ConfigError(
                f"Rank {rank} of mesh {mesh_id} has {len(devices)} devices but binds {len(ids)} "
                f"({ids}).\nfix: give each rank TT_VISIBLE_DEVICES matching its device count."
            )
        pairs += list(zip(ids, devices))
    if not pairs:
        raise ConfigError(
            f"No rank is bound to mesh {mesh_id}; the job has meshes "
            f"{sorted({m for m, _ in env.rank_table})}.\nfix: name a mesh_id from the rank bindings."
        )
    return sorted(pairs, key=lambda p: p[0])


def mesh_devices(mesh_id: int | None = None) -> list[jax.Device]:
    """The JAX devices of mesh ``mesh_id`` (default: this rank's), ordered by global device id."""
    return [d for _, d in _devices_by_global_id(current().mesh_id if mesh_id is None else mesh_id)]


def global_device_ids(mesh_device: _mesh.MeshDevice) -> list[int]:
    """The launcher's global ids (``TT_VISIBLE_DEVICES``) of a mesh's devices, row-major."""
    env = current()
    by_device = {}
    for mesh_id in sorted({m for m, _ in env.rank_table}):
        by_device.update({d: i for i, d in _devices_by_global_id(mesh_id)})
    return [by_device[d] for d in mesh_device.get_devices()]


def process_id() -> int:
    """This rank (0 when not under the launcher)."""
    return _state["env"].process_id if _state["env"] is not None else 0


def _auto_initialize() -> list[jax.Device]:
    return mesh_devices(initialize().mesh_id)


def install_launcher_hook() -> None:
    """Under ``ttjax-run``, let the first device query (e.g. ``open_mesh_device``) start the job."""
    if launcher_env() is not None and not is_initialized():
        _mesh.set_device_source(_auto_initialize)


__all__ = [
    "LauncherEnv",
    "current",
    "format_rank_table",
    "global_device_ids",
    "initialize",
    "install_launcher_hook",
    "is_initialized",
    "launcher_env",
    "mesh_devices",
    "process_id",
]
