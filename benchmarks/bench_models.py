"""Llama decode throughput on the CPU mesh: TP, DP and hybrid DP+TP, eager and trace replay, each
as a ratio to the single-device Flax reference (jitted, with KV cache) measured in the same run.

Figures are seconds per generated token (all users together); ratio > 1 means slower than the
reference. On a laptop the "devices" are XLA host devices sharing the same few cores, so these
ratios measure ttjax's dispatch and communication overhead, not a speed-up.
"""

from __future__ import annotations

import time

import numpy as np

import ttjax as ttnn
from benchmarks._harness import Row
from models.llama.config import get_config
from models.llama.generate import Generator
from models.llama.reference import LlamaReference
from models.llama.weights import random_weights

SETUPS = [  # (label, mesh, mode, submesh)
    ("TP 2x4", (2, 4), "tp", None),
    ("DP 1x4", (1, 4), "dp", None),
    ("hybrid 8x4 (2x4 TP x 4)", (8, 4), "hybrid", (2, 4)),
]


def reference_seconds_per_token(config, weights, prompt, steps: int) -> float:
    model = LlamaReference(config, weights)
    fns = model.jitted()
    b = prompt.shape[0]
    tokens = prompt[:, -1:]
    best = float("inf")
    for _ in range(3):  # the first pass compiles
        _, cache = fns.prefill(prompt, model.init_cache(b))
        start = time.perf_counter()
        for t in range(steps):
            logits, cache = fns.decode(tokens, np.full((b,), prompt.shape[1] + t, np.int32), cache)
            tokens = np.asarray(logits).argmax(-1)
        best = min(best, (time.perf_counter() - start) / (steps * b))
    return best


def run(configs: tuple[str, ...] = ("tiny", "small"), batch: int = 32, steps: int = 8) -> list[Row]:
    rows = []
    for name in configs:
        config = get_config(name)
        weights = random_weights(config, seed=0)
        prompt = np.random.default_rng(0).integers(0, config.vocab_size, (batch, 8))
        ref = reference_seconds_per_token(config, weights, prompt, steps)
        for label, shape, mode, submesh in SETUPS:
            mesh = ttnn.open_mesh_device(ttnn.MeshShape(shape))
            gen = Generator.build(config, weights, mesh, mode=mode, batch=batch, submesh=submesh)
            for trace in (False, True):
                gen.generate(prompt, 3, trace=trace, keep_logits=False)  # compile
                result = gen.generate(prompt, steps + 1, trace=trace, keep_logits=False)
                rows.append(
                    Row(
                        f"{name} decode, {label}",
                        "trace replay" if trace else "eager",
                        "Flax 1 device",
                        1.0 / result.tokens_per_second,
                        ref,
                        "-",
                        {
                            "tokens_per_s": result.tokens_per_second,
                            "tokens_per_s_per_user": result.tokens_per_second_per_user,
                            "reference_tokens_per_s": 1.0 / ref,
                            "batch": batch,
                        },
                    )
                )
            ttnn.close_mesh_device(mesh)
    return rows
