"""``ttjax-run``: TT-NN's ``tt-run`` for ttjax — one process per rank of a rank-binding file.

The implementation of :mod:`ttjax.run`, whose docstring says more.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ttjax._src.core.errors import ConfigError
from ttjax._src.launch.distributed import lifeline, runtime
from ttjax._src.launch.distributed.bindings import (
    RankBindingError,
    RankBindings,
    load_rank_bindings,
)


def _popen(argv: list[str], **kwargs: object) -> subprocess.Popen:
    """``subprocess.Popen`` with the parent-death signal set between fork and exec.

    The ``preexec_fn`` makes CPython fork, and JAX warns at every fork of a process whose backend
    is up (a launcher called from a notebook or a test). The child only calls ``prctl`` and
    execs, so the warning does not apply here; it is silenced for this call alone.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning
        )
        return subprocess.Popen(argv, **kwargs)  # type: ignore[call-overload]


TAIL_LINES = 20
GRACE_S = float(runtime.DEFAULT_STOP_GRACE_S)  # SIGTERM -> SIGKILL: time for a graceful stop
POLL_S = 0.05
SETTLE_S = 0.3
# JAX warns that proxy variables can hang jax.distributed.initialize; ranks never inherit them.
_DROPPED = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
# What a rank prints when it fails only because a peer died (gloo or the coordination service).
_PEER_LOST = (
    "Connection closed by peer",
    "Connection reset by peer",
    "detected fatal errors",
    "stopped sending heartbeats",
    "Failed to send RPC to coordination service",
)


@dataclass(frozen=True)
class RankLaunch:
    """One rank's exact command and the environment variables the launcher sets for it."""

    rank: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    def shell(self) -> str:
        """The rank as one copy-pasteable shell line: ``env K=V ... prog args``."""
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        return f"env {assigns} {shlex.join(self.argv)}"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (for the coordinator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def plan(
    bindings: RankBindings,
    program: Sequence[str],
    *,
    coordinator: str,
    cache_root: str,
    heartbeat_timeout_s: int = runtime.DEFAULT_HEARTBEAT_S,
    init_timeout_s: int = runtime.DEFAULT_INIT_TIMEOUT_S,
) -> list[RankLaunch]:
    """Every rank's command and environment (the launcher's variables only, in a fixed order)."""
    table = runtime.format_rank_table(tuple((r.mesh_id, r.visible_devices) for r in bindings.ranks))
    host = socket.gethostname()
    out = []
    for r in bindings.ranks:
        cache = str(Path(cache_root).expanduser() / f"{host}_rank{r.rank}")
        env: dict[str, str] = {
            runtime.ENV_CACHE: cache,
            "JAX_COMPILATION_CACHE_DIR": cache,
            "PYTHONUNBUFFERED": "1",
        }
        env |= dict(bindings.global_env)
        env |= dict(r.env_overrides)
        env |= {
            runtime.ENV_MESH_ID: str(r.mesh_id),
            runtime.ENV_MESH_HOST_RANK: str(r.mesh_host_rank),
            runtime.ENV_VISIBLE: ",".join(str(i) for i in r.visible_devices),
            runtime.ENV_COORDINATOR: coordinator,
            runtime.ENV_NUM_PROCESSES: str(bindings.world_size),
            runtime.ENV_PROCESS_ID: str(r.rank),
            runtime.ENV_RANK_TABLE: table,
            runtime.ENV_HEARTBEAT: str(heartbeat_timeout_s),
            runtime.ENV_INIT_TIMEOUT: str(init_timeout_s),
        }
        if bindings.mesh_graph_desc_path:
            env[runtime.ENV_MGD] = bindings.mesh_graph_desc_path
        out.append(RankLaunch(r.rank, tuple(program), tuple(env.items())))
    return out


def mpirun_argv(launches: Sequence[RankLaunch], mpi_args: str, mpirun: str = "mpirun") -> list[str]:
    """One MPMD ``mpirun`` line: ``mpirun --tag-output ARGS -np 1 -x K=V prog : -np 1 ...``."""
    argv = [mpirun, "--tag-output", *shlex.split(mpi_args)]
    for i, launch in enumerate(launches):
        if i:
            argv.append(":")
        argv += ["-np", "1"]
        for k, v in launch.env:
            argv += ["-x", f"{k}={v}"]
        argv += list(launch.argv)
    return argv


# Gloo prints one of these per process group it builds (16 per training run): kept in the rank's
# log, never on the terminal, never in a fault report.
_GLOO_CHATTER = re.compile(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
STATUS_EVERY_S = 1.0  # a progress line that redraws in place, when the terminal is not a tty


def _visible(raw: bytes) -> str:
    """What a terminal would show for ``raw``: no escape codes, only the text after the last
    carriage return (a progress bar redraws its line with ``\\r``)."""
    text = _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip("\r")
    return text.rsplit("\r", 1)[-1]


class _Terminal:
    """The launcher's stdout: finished lines from every rank, plus rank 0's progress line that
    redraws in place (the bottom line of a tty; at most one line per second otherwise)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()
        isatty = getattr(out, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.width = shutil.get_terminal_size((120, 24)).columns if self.tty else 0
        self.status = ""
        self.status_at = -STATUS_EVERY_S

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.out.write(text)
            self.out.flush()

    def line(self, text: str, ends_status: bool = False) -> None:
        with self.lock:
            if ends_status:
                self.status = ""
            if self.tty and self.status:
                self._write(f"\r\x1b[2K{text}\n{self.status}")
            elif self.tty:
                self._write(f"\r\x1b[2K{text}\n" if ends_status else f"{text}\n")
            else:
                self._write(f"{text}\n")

    def progress(self, text: str) -> None:
        with self.lock:
            if self.tty:
                self.status = text[: max(self.width - 1, 20)]
                self._write(f"\r\x1b[2K{self.status}")
            elif time.monotonic() - self.status_at >= STATUS_EVERY_S:
                self.status_at = time.monotonic()
                self._write(f"{text}\n")

    def close(self) -> None:
        with self.lock:
            if self.tty and self.status:
                self.status = ""
                self._write("\n")


class _Rank:
    def __init__(self, launch: RankLaunch, term: _Terminal, log_dir: Path, grace_s: float) -> None:
        self.launch = launch
        self.term = term
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.chatter = 0  # Gloo connection lines kept out of the terminal
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_error: str | None = None
        self.readers: list[threading.Thread] = []
        self.exit_time = time.monotonic()  # when it exited (set by the waiter thread)
        self.killed_after_grace = False
        self.log_path = log_dir / f"rank{launch.rank}.log"
        self.log = self.log_path.open("w", encoding="utf-8")
        self.log_lock = threading.Lock()
        self._exited = threading.Event()
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        env |= dict(launch.env)
        env[runtime.ENV_LAUNCHER_PID] = str(os.getpid())
        env[runtime.ENV_STOP_GRACE] = str(max(int(grace_s) - 1, 1))
        env[runtime.ENV_RANK_LOG] = str(self.log_path.resolve())
        self.live = launch.rank == 0
        if self.live:  # rank 0's rich progress renders as on a terminal; the launcher redraws it
            prefix = len(self._prefix("stdout"))
            width = term.width - prefix if term.tty else 120
            env |= {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": str(max(width, 40))}
        try:
            self.proc = _popen(
                list(launch.argv),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                start_new_session=True,  # its own process group: the launcher kills it whole
                preexec_fn=lifeline.die_with_parent(os.getpid()),
            )
        except OSError as e:
            self.start_error = f"could not start {launch.argv[0]!r}: {e.strerror or e}"
            self.log.write(f"ttjax-run: {self.start_error}\n")
            self.log.close()
            return
        threading.Thread(target=self._wait, daemon=True).start()
        for name, stream in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            t = threading.Thread(target=self._pump, args=(stream, name), daemon=True)
            t.start()
            self.readers.append(t)

    def _prefix(self, name: str) -> str:
        return f"[1,{self.launch.rank}]<{name}>:"

    def _wait(self) -> None:
        # Blocks in waitpid, so the exit time is exact: the first rank to die is the root cause
        # even when its peers fail (lost connection) before the launcher's next poll.
        assert self.proc is not None
        self.proc.wait()
        self.exit_time = time.monotonic()
        self._exited.set()

    def _pump(self, stream: IO[bytes], name: str) -> None:
        prefix, pending = self._prefix(name), b""
        live = self.live and name == "stdout"
        for chunk in iter(lambda: stream.read(65536), b""):
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                self._line(prefix, _visible(raw), live)
            if live and (b"\r" in pending or b"\x1b" in pending):  # a redraw, not a half line
                status = _visible(pending).strip()
                if status:
                    self.term.progress(f"{prefix}{status}")
        if pending:
            self._line(prefix, _visible(pending), live)

    def _line(self, prefix: str, line: str, live: bool) -> None:
        with self.log_lock:
            if not self.log.closed:
                self.log.write(f"{line}\n")
                self.log.flush()
        if _GLOO_CHATTER.match(line):
            self.chatter += 1
            return
        self.tail.append(line)
        self.term.line(f"{prefix}{line}", ends_status=live)

    def close(self) -> None:
        """Wait for the output to drain, then close the pipes and the log."""
        for t in self.readers:
            t.join(timeout=5)
        if self.proc is not None:
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()
        with self.log_lock:
            self.log.close()

    def poll(self) -> int | None:
        if self.start_error is not None:
            return 127
        assert self.proc is not None
        return self.proc.returncode if self._exited.is_set() else None

    def signal_group(self, sig: int) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def describe_exit(self) -> str:
        if self.start_error is not None:
            return self.start_error
        code = self.poll()
        if code is not None and code < 0:
            late = " after the stop grace period" if self.killed_after_grace else ""
            return f"was killed by signal {-code} ({signal.Signals(-code).name}){late}"
        return f"exited with code {code}"


def _stop(ranks: Sequence[_Rank], grace_s: float = GRACE_S) -> None:
    """SIGTERM every rank's process group (a rank may stop gracefully, e.g. checkpoint at the
    step boundary), then SIGKILL what is left after ``grace_s``."""
    for r in ranks:
        if r.poll() is None:
            r.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(r.poll() is None for r in ranks):
        time.sleep(POLL_S)
    for r in ranks:
        if r.poll() is None and r.proc is not None:
            r.killed_after_grace = True
        r.signal_group(signal.SIGKILL)
    for r in ranks:
        if r.proc is not None:
            r._exited.wait(timeout=5)
        r.close()


def _root_cause(failed: Sequence[_Rank]) -> _Rank:
    """The rank that failed first, not counting ranks that only lost a peer (their message says
    so); exit times break the tie, as measured by each rank's waiter thread."""
    primary = [r for r in failed if not any(p in line for line in r.tail for p in _PEER_LOST)]
    return min(primary or failed, key=lambda r: r.exit_time)


def _report(bad: _Rank, ranks: Sequence[_Rank], err: IO[str]) -> None:
    others = [r.launch.rank for r in ranks if r is not bad]
    err.write(
        f"ttjax-run: rank {bad.launch.rank} {bad.describe_exit()}; stopped the other ranks "
        f"{others}.\n"
    )
    if bad.tail:
        err.write(f"ttjax-run: last {len(bad.tail)} lines of rank {bad.launch.rank}:\n")
        for line in bad.tail:
            err.write(f"  {line}\n")
    exits = ", ".join(f"rank {r.launch.rank} {r.describe_exit()}" for r in ranks)
    err.write(f"ttjax-run: exits: {exits}.\n")
    err.write(f"ttjax-run: every rank's full output: {bad.log_path.parent}/rank<N>.log\n")
    err.flush()


def _exit_code(rank: _Rank) -> int:
    code = rank.poll()
    assert code is not None
    return 128 - code if code < 0 else code


class _Signalled(Exception):
    """SIGTERM or SIGHUP reached the launcher (SIGINT arrives as KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, frame: object) -> None:
    raise _Signalled(signum)


_STOPPED_BY: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated (SIGTERM)"}
if hasattr(signal, "SIGHUP"):
    _STOPPED_BY[signal.SIGHUP] = "hung up (SIGHUP)"


@contextlib.contextmanager
def _stop_signals_ignored():
    """A second Ctrl-C (or SIGTERM) must not cut the ranks' graceful stop short."""
    main = threading.current_thread() is threading.main_thread()
    sigs = [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]
    before = {s: signal.signal(s, signal.SIG_IGN) for s in sigs} if main else {}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def launch_local(
    launches: Sequence[RankLaunch],
    *,
    timeout_s: float = 0,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    log_dir: str | os.PathLike[str] | None = None,
    grace_s: float = GRACE_S,
) -> int:
    """Run every rank on this host and watch them; returns the launcher's exit code.

    Every rank's output goes to ``log_dir/rankN.log`` in full and to ``out`` tagged with its
    rank, less Gloo's connection chatter; rank 0's progress bar redraws live.
    """
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    logs = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="ttjax-run-"))
    logs.mkdir(parents=True, exist_ok=True)
    term = _Terminal(out)
    ranks: list[_Rank] = []
    start = time.monotonic()
    try:
        for launch in launches:
            ranks.append(_Rank(launch, term, logs, grace_s))
        while True:
            codes = [r.poll() for r in ranks]
            if any(c not in (None, 0) for c in codes):
                # A peer that lost its partner dies a moment after it: let both exits register
                # before the launcher kills anything, then name the one that did not just react.
                time.sleep(SETTLE_S)
                failed = [r for r in ranks if r.poll() not in (None, 0)]
                with _stop_signals_ignored():
                    _stop(ranks, grace_s)
                term.close()
                cause = _root_cause(failed)
                _report(cause, ranks, err)
                return _exit_code(cause)
            if all(c == 0 for c in codes):
                for r in ranks:
                    r.close()
                term.close()
                return 0
            if timeout_s and time.monotonic() - start > timeout_s:
                running = [r.launch.rank for r, c in zip(ranks, codes) if c is None]
                with _stop_signals_ignored():
                    _stop(ranks, grace_s)
                term.close()
                err.write(
                    f"ttjax-run: ranks {running} still running after --timeout "
                    f"{timeout_s:g} s; stopped every rank.\n"
                )
                return 124
            time.sleep(POLL_S)
    except (KeyboardInterrupt, _Signalled) as e:
        signum = e.signum if isinstance(e, _Signalled) else signal.SIGINT
        with _stop_signals_ignored():
            _stop(ranks, grace_s)
        term.close()
        exits = ", ".join(f"rank {r.launch.rank} {r.describe_exit()}" for r in ranks)
        err.write(
            f"ttjax-run: {_STOPPED_BY.get(signum, f'signal {signum}')}; stopped ranks "
            f"{[r.launch.rank for r in ranks]}.\nttjax-run: {exits}; logs in {logs}.\n"
        )
        err.flush()
        return 128 + signum


def main(argv: Sequence[str] | None = None) -> int:
    """The ``ttjax-run`` command line."""
    p = argparse.ArgumentParser(
        prog="ttjax-run",
        description="Start one process per rank of a tt-run rank-binding file over jax.distributed.",
    )
    p.add_argument("--rank-binding", required=True, help="tt-run rank-binding YAML file")
    p.add_argument(
        "--mpi-args", default=None, help='extra mpirun arguments, e.g. "--rankfile hosts"'
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print each rank's command, start nothing"
    )
    p.add_argument("--verbose", action="store_true", help="print the plan before starting")
    p.add_argument(
        "--coordinator",
        default=None,
        help="HOST:PORT of rank 0's coordinator (default 127.0.0.1:<free port>, or this "
        "host's name with --mpi-args)",
    )
    p.add_argument(
        "--cache-root",
        default="~/.cache/ttjax",
        help="per-rank cache directories go under it (HOST_rankN)",
    )
    p.add_argument(
        "--heartbeat-timeout",
        type=int,
        default=runtime.DEFAULT_HEARTBEAT_S,
        help="seconds after which a rank whose peer vanished aborts",
    )
    p.add_argument(
        "--init-timeout",
        type=int,
        default=runtime.DEFAULT_INIT_TIMEOUT_S,
        help="seconds a rank waits for the others to join",
    )
    p.add_argument(
        "--timeout", type=float, default=0, help="stop every rank after this many seconds"
    )
    p.add_argument(
        "--stop-grace",
        type=float,
        default=GRACE_S,
        help="seconds a stopped rank gets between SIGTERM (graceful stop, e.g. a checkpoint at "
        "the step boundary) and SIGKILL",
    )
    p.add_argument(
        "--log-dir",
        default=None,
        help="every rank's full output goes to LOG_DIR/rankN.log (default: CACHE_ROOT/logs/"
        "<time>-<pid>)",
    )
    p.add_argument("program", nargs=argparse.REMAINDER, help="program and its arguments")
    args = p.parse_args(argv)
    if not args.program:
        p.error("give the program to run, e.g. ttjax-run --rank-binding b.yaml python prog.py")
    try:
        bindings = load_rank_bindings(args.rank_binding)
    except (RankBindingError, ConfigError) as e:
        print(f"ttjax-run: {e}", file=sys.stderr)
        return 2
    mpirun = shutil.which("mpirun") if args.mpi_args is not None else None
    if args.mpi_args is not None and mpirun is None:
        print(
            "ttjax-run: --mpi-args given but mpirun is not on PATH; starting the ranks on this "
            "host instead.",
            file=sys.stderr,
        )
    if args.coordinator is None:
        host = socket.gethostname() if mpirun else "127.0.0.1"
        args.coordinator = f"{host}:{free_port('' if mpirun else '127.0.0.1')}"
    launches = plan(
        bindings,
        args.program,
        coordinator=args.coordinator,
        cache_root=args.cache_root,
        heartbeat_timeout_s=args.heartbeat_timeout,
        init_timeout_s=args.init_timeout,
    )
    log_dir = Path(args.log_dir or Path(args.cache_root) / "logs" / time.strftime("%Y%m%d-%H%M%S"))
    log_dir = log_dir.expanduser()
    if args.log_dir is None:
        log_dir = log_dir.with_name(f"{log_dir.name}-{os.getpid()}")
    if args.verbose or args.dry_run:
        meshes = {m: bindings.mesh_devices(m) for m in bindings.mesh_ids()}
        print(
            f"ttjax-run: {bindings.world_size} ranks, meshes {meshes}, coordinator "
            f"{args.coordinator}" + ("" if mpirun or args.dry_run else f", logs in {log_dir}"),
            file=sys.stderr,
        )
    if mpirun:
        cmd = mpirun_argv(launches, args.mpi_args, mpirun)
        if args.dry_run:
            print(shlex.join(cmd))
            return 0
        _catch_stop_signals()
        proc = _popen(
            cmd,
            start_new_session=True,
            preexec_fn=lifeline.die_with_parent(os.getpid()),
        )
        try:
            return proc.wait()
        except (KeyboardInterrupt, _Signalled) as e:
            signum = e.signum if isinstance(e, _Signalled) else signal.SIGINT
            os.killpg(proc.pid, signal.SIGTERM)  # mpirun forwards it to every rank
            try:
                proc.wait(timeout=args.stop_grace)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
            return 128 + signum
    if args.dry_run:
        for launch in launches:
            print(f"rank {launch.rank}: {launch.shell()}")
        return 0
    _catch_stop_signals()
    return launch_local(launches, timeout_s=args.timeout, log_dir=log_dir, grace_s=args.stop_grace)


def _catch_stop_signals() -> None:
    """SIGTERM and SIGHUP (a closed SSH session) stop the ranks as Ctrl-C does."""
    signal.signal(signal.SIGTERM, _on_signal)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, _on_signal)


if __name__ == "__main__":
    sys.exit(main())
