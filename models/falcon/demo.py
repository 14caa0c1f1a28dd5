"""The TT-NN guide's Falcon-7B MLP examples (sections 6.1 and 7.1), runnable on the CPU mesh.

    python -m models.falcon.demo --mode dp --mesh 1x4      # batch sharded, weights replicated
    python -m models.falcon.demo --mode tp --mesh t3000    # weights width-sharded, one all_gather
    python -m models.falcon.demo --mode dp --mesh galaxy --batch 32 --dtype bfloat16

Prints the per-device shapes, the PCC against the Flax reference FalconMLP and the collectives.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import numpy as np
from flax import nnx

import ttjax as ttnn
from models.falcon.mlp import (
    TtFalconMLP,
    compose_output,
    setup_data_parallel,
    setup_tensor_parallel,
)
from models.falcon.reference import FalconMLP, FalconMLPConfig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=["dp", "tp"], default="dp")
    p.add_argument("--mesh", default=None, help="default: 1x4 for dp, t3000 (2x4) for tp")
    p.add_argument("--batch", type=int, default=None, help="default: 4 for dp, 1 for tp")
    p.add_argument("--seq", type=int, default=None, help="default: 128 for dp, 256 for tp")
    p.add_argument("--hidden", type=int, default=4544, help="Falcon-7B: 4544 (ffn is 4x)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ns = p.parse_args(argv)
    dp = ns.mode == "dp"
    mesh = ttnn.open_mesh_device(ttnn.parse_mesh_shape(ns.mesh or ("1x4" if dp else "t3000")))
    batch = ns.batch or (4 if dp else 1)
    seq = ns.seq or (128 if dp else 256)
    dtype = ttnn.float32 if ns.dtype == "float32" else ttnn.bfloat16
    config = FalconMLPConfig(hidden_size=ns.hidden, ffn_hidden_size=4 * ns.hidden)
    print(f"{ns.mode.upper()} Falcon MLP {config} on {mesh!r}, batch {batch}, seq {seq}, {dtype!r}")
    print(
        "weights: RANDOM (Flax init, seed 0) and a random input: the demo checks that ttjax "
        "computes the same numbers as the Flax reference, not what a trained Falcon would say."
    )
    model = FalconMLP(config, rngs=nnx.Rngs(0))
    rng = np.random.default_rng(0)
    x = (rng.random((batch, 1, seq, config.hidden_size), np.float32) * 2) - 1

    reference = jax.jit(model.__call__)
    jax.block_until_ready(reference(x))  # compile first: the timing below is one run
    start = time.perf_counter()
    want = np.asarray(jax.block_until_ready(reference(x)))
    ref_s = time.perf_counter() - start
    setup = setup_data_parallel if dp else setup_tensor_parallel
    tt_model, hidden = setup(mesh, model, x, dtype)
    start = time.perf_counter()
    out = tt_model(hidden)
    got = compose_output(mesh, out, ns.mode)
    first_s = time.perf_counter() - start
    start = time.perf_counter()
    got = compose_output(mesh, tt_model(hidden), ns.mode)
    tt_s = time.perf_counter() - start

    a, b = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    pcc = float(np.corrcoef(a, b)[0, 1])
    print(
        f"input per device {hidden.shape!r}, weight h_to_4h per device "
        f"{tt_model.dense_h_to_4h_weights.shape!r}, output per device {out.shape!r}"
    )
    print(
        f"PCC vs Flax FalconMLP: {pcc:.6f}; time per run: ttjax {tt_s:.3f} s (first run with "
        f"compiles {first_s:.2f} s), one-device reference {ref_s:.3f} s (compiled beforehand)"
    )
    print(
        f"about the speeds: the {mesh.get_num_devices()} virtual devices are threads sharing this "
        f"machine's {os.cpu_count()} CPU cores, so sharding adds no compute; each ttjax op is its "
        "own program that synchronises every device, while the reference runs one fused program. "
        "The ratio measures CPU dispatch overhead, not a Tenstorrent mesh."
    )
    params = ttnn.model_preprocessing.make_parameter_dict(
        {
            "dense_h_to_4h": {"weight": tt_model.dense_h_to_4h_weights},
            "dense_4h_to_h": {"weight": tt_model.dense_4h_to_h_weights},
        }
    )
    tp = tt_model.tensor_parallel
    report = ttnn.inspect.inspect(
        lambda p, t: TtFalconMLP(p, tensor_parallel=tp)(t), params, hidden
    )
    print(f"collectives: { {k: v for k, v in report.collective_counts().items() if v} or 'none' }")
    return 0 if pcc >= (0.99 if dtype is ttnn.float32 else 0.98) else 1


if __name__ == "__main__":
    raise SystemExit(main())
