"""Collective orbax checkpoint under ``ttjax-run``: ``python checkpoint_program.py CKPT_DIR OUTDIR``.

Both ranks of the 2x4 big mesh save one sharded state (a weight split over both mesh axes, whose
shards live in two processes, and a replicated step counter) with ``ttjax.ttml``'s Checkpointer,
restore it onto the same shardings, and write what they got back (gathered) to ``rank{R}.npz``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as a script by ttjax-run: this checkout's ttjax

import ttjax as ttnn  # noqa: E402
from ttjax.ttml.checkpoint import Checkpointer  # noqa: E402

STEP = 2


def weight() -> np.ndarray:
    return np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 7.0


def main(ckpt_dir: str, outdir: str) -> int:
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4)).jax_mesh
    rank = jax.process_index()
    names = mesh.axis_names
    w = jax.make_array_from_callback(
        (8, 16), NamedSharding(mesh, P(names[0], names[1])), lambda idx: weight()[idx]
    )
    assert not w.is_fully_addressable  # half the shards live in the other process
    step = jax.device_put(jnp.int32(STEP), NamedSharding(mesh, P()))
    state = {"w": w, "step": step}
    ckpt = Checkpointer(ckpt_dir)
    ckpt.save(STEP, state, meta={"history": [{"step": 1, "loss": 1.5}]})
    ckpt.wait()
    like = {"w": jnp.zeros_like(w), "step": jnp.zeros_like(step)}
    got, meta = ckpt.restore(ckpt.latest_step(), like)
    ckpt.close()
    assert got["w"].sharding == w.sharding
    np.savez(
        Path(outdir) / f"rank{rank}.npz",
        w=multihost_utils.process_allgather(got["w"], tiled=True),
        step=np.asarray(got["step"]),
        local_shards=np.array(len(got["w"].addressable_shards)),
        loss=np.array(meta["history"][0]["loss"]),
    )
    print(f"done rank={rank} pid={os.getpid()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
