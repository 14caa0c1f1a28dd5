"""Rank 0 shows a rich progress bar (as the TTML trainer does) while every rank prints Gloo-like
chatter; started by ``ttjax-run`` in the lifecycle tests: ``python progress_program.py STEPS``.

Rich is the only import, so the ranks start fast. Each rank prints ``ready rank=R pid=P`` first
and ``done rank=R`` last; rank 0 advances its bar every 0.25 s.
"""

from __future__ import annotations

import os
import sys
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn


def main(steps: int) -> int:
    rank = int(os.environ.get("TTJAX_PROCESS_ID", "0"))
    print(f"ready rank={rank} pid={os.getpid()}", flush=True)
    print(
        f"[Gloo] Rank {rank} is connected to 1 peer ranks. Expected number of connected peer "
        "ranks is : 1",
        flush=True,
    )
    if rank == 0:
        with Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn()) as bar:
            task = bar.add_task("train", total=steps)
            for _ in range(steps):
                time.sleep(0.25)
                bar.update(task, advance=1)
    else:
        time.sleep(0.25 * steps)
    print(f"done rank={rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
