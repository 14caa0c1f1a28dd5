"""Peak host memory of converting one weight onto a mesh (``from_torch`` / ``as_tensor``).

Each case runs in a fresh process: it builds the torch input (the caller's copy, not counted),
resets the kernel's peak-RSS mark (``/proc/self/clear_refs``), converts, and reports the peak
RSS increase against the bytes the converted tensor holds (all devices' storage: on the CPU
backend that is host memory too) and against the weight's bfloat16 size.

    python -m benchmarks.bench_convert_memory                 # 256 MiB fp32 weight, 8x4 mesh
    python -m benchmarks.bench_convert_memory --mib 64 --only bfloat8_b
    python -m benchmarks.bench_convert_memory --galaxy-mlp    # Llama-70B MLP layer, 8192 x 28672

A watchdog ends a case whose RSS passes ``--limit-gb`` (default 12) instead of letting the
kernel's OOM killer pick a process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

GIB = 1 << 30
MIB = 1 << 20

DTYPES = ("bfloat16", "float32", "bfloat8_b", "bfloat4_b")
# (name, mapper) on an 8x4 mesh: the Galaxy's mappers for an MLP weight, a 1-D split, replication
MAPPERS = ("shard2d", "shard1d", "replicate", "host")


def _status(field: str) -> int:
    """A /proc/self/status figure in bytes (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """Set the kernel's peak-RSS mark (VmHWM) to the current RSS (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def _watchdog(limit: int) -> None:
    def watch() -> None:
        while True:
            rss = _status("VmRSS")
            if rss > limit:
                print(
                    json.dumps(
                        {"error": f"RSS {rss / GIB:.2f} GB passed the {limit / GIB:.1f} GB guard"}
                    ),
                    flush=True,
                )
                os._exit(3)
            time.sleep(0.02)

    threading.Thread(target=watch, daemon=True).start()


def _stored_bytes(t: Any) -> int:
    """Bytes a converted tensor holds: every device's storage (or the host array)."""
    import jax
    import numpy as np

    total = 0
    for leaf in jax.tree_util.tree_leaves(t.value):
        if isinstance(leaf, jax.Array):
            total += sum(s.data.nbytes for s in leaf.addressable_shards)
        else:
            total += np.asarray(leaf).nbytes
    return total


def _mapper(ttnn: Any, mesh: Any, kind: str, dims: tuple[int | None, int | None]) -> Any:
    if kind == "shard2d":
        return ttnn.ShardTensor2dMesh(mesh, dims=dims, mesh_shape=tuple(mesh.shape))
    if kind == "shard1d":
        return ttnn.ShardTensorToMesh(mesh, dim=-1)
    return ttnn.ReplicateTensorToMesh(mesh)


def child(case: dict[str, Any]) -> dict[str, Any]:
    """One conversion case, measured in this (fresh) process."""
    _watchdog(int(case["limit_gb"] * GIB))
    import jax
    import torch

    import ttjax as ttnn

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(8, 4))
    gen = torch.Generator().manual_seed(0)
    weights = case["weights"]  # [(rows, cols, dtype, dims), ...], as the model holds them
    if case.get("transposed"):
        # the model's own view: the checkpoint's [out, in] transposed, two leading ones (no copy)
        inputs = [torch.randn(c, r, generator=gen) for r, c, _, _ in weights]
        views = [w.transpose(-2, -1).unsqueeze(0).unsqueeze(0) for w in inputs]
    else:
        inputs = [torch.randn(1, 1, r, c, generator=gen) for r, c, _, _ in weights]
        views = inputs
    # JAX and ttjax set up on a tiny tensor first: not part of any weight's figure
    ttnn.from_torch(torch.ones(1, 1, 32, 32), dtype=ttnn.bfloat16, device=mesh)
    cache = case.get("cache_dir")
    out: dict[str, Any] = {}
    for attempt in (case.get("attempt", "convert"),):
        results: list[Any] = []
        jax.block_until_ready(jax.numpy.zeros(1))
        base = _status("VmRSS")
        _reset_peak()
        start = time.perf_counter()
        todo = list(zip(views, weights)) * case.get("copies", 1)
        for i, (view, (_, _, dtype, dims)) in enumerate(todo):
            kind = case["mapper"]
            dt = getattr(ttnn, dtype)
            if kind == "host":
                mapper = _mapper(ttnn, mesh, "shard2d", tuple(dims))
                results.append(
                    ttnn.from_torch(view, dtype=dt, layout=ttnn.TILE_LAYOUT, mesh_mapper=mapper)
                )
                continue
            results.append(
                ttnn.as_tensor(
                    view,
                    dtype=dt,
                    layout=ttnn.TILE_LAYOUT,
                    device=mesh,
                    mesh_mapper=_mapper(ttnn, mesh, kind, tuple(dims)),
                    memory_config=ttnn.DRAM_MEMORY_CONFIG,
                    cache_file_name=os.path.join(cache, f"w{i}") if cache else None,
                )
            )
        for r in results:
            jax.block_until_ready(r.value)
        seconds = time.perf_counter() - start
        peak = _status("VmHWM") - base
        kept = _status("VmRSS") - base
        stored = sum(_stored_bytes(r) for r in results)
        values = sum(r * c for r, c, _, _ in weights) * case.get("copies", 1)
        out[attempt] = {
            "peak_gb": peak / GIB,
            "kept_gb": kept / GIB,
            "stored_gb": stored / GIB,
            "bf16_gb": 2 * values / GIB,
            "peak_over_stored": peak / stored,
            "peak_over_bf16": peak / (2 * values),
            "seconds": seconds,
        }
        del results
    out["input_gb"] = sum(w.numel() * w.element_size() for w in inputs) / GIB
    return out


def run_child(case: dict[str, Any]) -> dict[str, Any]:
    """``case`` measured in a fresh process; with ``cache``, writing the tensor cache and
    loading it again, each in its own process."""
    if not case.get("cache"):
        return _one_child(case)
    with tempfile.TemporaryDirectory(prefix="ttjax-convmem-") as folder:
        out: dict[str, Any] = {}
        for attempt in ("write", "load"):
            res = _one_child(dict(case, cache_dir=folder, attempt=attempt))
            if "error" in res:
                return res
            out.update(res)
        return out


def _one_child(case: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ, TTJAX_NUM_DEVICES="32")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_convert_memory", "--child", json.dumps(case)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        timeout=case.get("timeout", 900),
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        return {"error": (lines[-1] if lines else proc.stderr.strip().splitlines()[-1:])}
    return json.loads(lines[-1])


def _row(name: str, res: dict[str, Any], attempt: str = "convert") -> str:
    if "error" in res:
        return f"| {name} | error: {res['error']} |"
    r = res[attempt]
    return (
        f"| {name} | {r['stored_gb']:.3f} | {r['peak_gb']:.3f} | {r['peak_over_stored']:.2f} | "
        f"{r['peak_over_bf16']:.2f} | {r['seconds']:.1f} |"
    )


HEADER = (
    "| case | stored GiB | peak RSS increase GiB | peak / stored | peak / bf16 weight | s |\n"
    "| --- | --- | --- | --- | --- | --- |"
)


def sweep(mib: int, dtypes: list[str], mappers: list[str], limit_gb: float) -> list[str]:
    """Every mapper x dtype for one fp32 weight of ``mib`` MiB ([4096, mib * 64] columns split
    over the mesh as the Galaxy splits an MLP weight); replication at 1/8 of that size."""
    rows = [HEADER]
    for kind in mappers:
        cols = mib * MIB // 4 // 4096 // (8 if kind == "replicate" else 1)
        for dtype in dtypes:
            weights = [(4096, cols, dtype, (-2, -1))]
            res = run_child({"weights": weights, "mapper": kind, "limit_gb": limit_gb})
            rows.append(_row(f"{kind} {dtype} [4096, {cols}] fp32 in", res))
            print(rows[-1], flush=True)
    res = run_child(
        {
            "weights": [(4096, mib * MIB // 4 // 4096, "bfloat8_b", (-2, -1))],
            "mapper": "shard2d",
            "cache": True,
            "limit_gb": limit_gb,
        }
    )
    for attempt in ("write", "load"):
        rows.append(_row(f"as_tensor cache_file_name ({attempt}), bfloat8_b shard2d", res, attempt))
        print(rows[-1], flush=True)
    return rows


def galaxy_case(w13: str, cache: bool, limit_gb: float, copies: int = 1) -> dict[str, Any]:
    """llama3_70b_galaxy's TtLlamaMLP weights at real width, as the module converts them
    (``as_tensor`` of the transposed checkpoint views, TILE, DRAM): w1/w3 [8192, 28672] split
    (-1, -2), w2 [28672, 8192] split (-2, -1) over 8x4; w2 bfloat8_b, w1/w3 ``w13``
    (bfloat8_b by default, bfloat4_b with the model's ``bfp4_mlp``). ``copies=2``: each
    converted twice, as the module keeps a ring-sharded and an interleaved copy of each."""
    three = [
        (8192, 28672, w13, (-1, -2)),
        (28672, 8192, "bfloat8_b", (-2, -1)),
        (8192, 28672, w13, (-1, -2)),
    ]
    return {
        "weights": three,
        "copies": copies,
        "mapper": "shard2d",
        "transposed": True,
        "cache": cache,
        "limit_gb": limit_gb,
    }


def galaxy_mlp(limit_gb: float, cache: bool, quick: bool = False) -> list[str]:
    """The 70B MLP layer's three weights, w1/w3 in bfloat8_b and in bfloat4_b, then as the
    module builds them (two copies of each); ``quick``: the first only."""
    rows = [HEADER]
    configs = (("bfloat8_b", 1), ("bfloat4_b", 1), ("bfloat8_b", 2))
    for w13, copies in configs[:1] if quick else configs:
        res = run_child(galaxy_case(w13, cache, limit_gb, copies))
        if "error" not in res:
            print(f"  torch fp32 input (caller's copy, not counted): {res['input_gb']:.2f} GiB")
        for attempt in ("write", "load") if cache else ("convert",):
            label = f"70B MLP w1/w3 {w13}, w2 bfloat8_b"
            label += ", sharded + interleaved copies" if copies == 2 else ""
            label += f" (cache {attempt})" if cache else ""
            rows.append(_row(label, res, attempt))
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--mib", type=int, default=256, help="fp32 size of the swept weight")
    parser.add_argument("--only", default=",".join(DTYPES), help=f"comma list of {DTYPES}")
    parser.add_argument("--mappers", default=",".join(MAPPERS), help=f"comma list of {MAPPERS}")
    parser.add_argument("--galaxy-mlp", action="store_true", help="the 70B MLP layer instead")
    parser.add_argument("--cache", action="store_true", help="galaxy-mlp: through the tensor cache")
    parser.add_argument("--quick", action="store_true", help="galaxy-mlp: w1/w3 bfloat8_b only")
    parser.add_argument("--limit-gb", type=float, default=12.0, help="RSS guard per case")
    ns = parser.parse_args(argv)
    if ns.child:
        print(json.dumps(child(json.loads(ns.child))), flush=True)
        return 0
    if ns.galaxy_mlp:
        rows = galaxy_mlp(ns.limit_gb, ns.cache, ns.quick)
    else:
        rows = sweep(ns.mib, ns.only.split(","), ns.mappers.split(","), ns.limit_gb)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
