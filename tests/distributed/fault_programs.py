"""Fault programs that ``ttjax-run`` starts in the fault tests: ``python fault_programs.py NAME``.

Each rank joins the job, runs one all_reduce, prints ``ready rank=R pid=P`` and then loops over
all_reduces; NAME decides how rank 1 fails (raise, sigkill, heartbeat) or none does (spin).
Only ttjax is imported, so the ranks start fast.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as a script by ttjax-run: this checkout's ttjax

import ttjax as ttnn  # noqa: E402


def collective_loop(mesh: ttnn.MeshDevice, iterations: int | None = None) -> None:
    t = ttnn.from_torch(
        np.ones((1, 1, 32, 32 * mesh.get_num_devices()), np.float32),
        device=mesh,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3),
    )
    i = 0
    while iterations is None or i < iterations:
        jax.block_until_ready(ttnn.all_reduce(t).value)
        i += 1


def main(name: str) -> int:
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, ttnn.get_num_devices()))
    rank = ttnn.distributed.process_id()
    collective_loop(mesh, 1)
    print(f"ready rank={rank} pid={os.getpid()}", flush=True)
    if name == "raise" and rank == 1:
        raise RuntimeError("boom: rank 1 failed on purpose")
    if name == "sigkill" and rank == 1:
        # Kill this rank from another thread while the main thread is inside collectives.
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGKILL)).start()
    if name == "heartbeat" and rank == 1:
        # Freeze (as a host that dropped off the network would): sockets stay open, so only
        # the missing heartbeats tell rank 0 that its peer is gone.
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGSTOP)).start()
    collective_loop(mesh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
