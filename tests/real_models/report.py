"""Print "module | mesh | result" for tt-metal's own model modules run on ttjax.

    TT_METAL_HOME=~/tt-metal python -m tests.real_models.report [--mesh 1x8] [--only mlp]

Writes a tiny random Llama checkpoint (``HF_MODEL`` unless already set), binds ``ttnn`` to
ttjax, runs every case of :data:`CASES` on each mesh, and prints a Markdown table whose result
column is the PCC against transformers, or the first tt-metal call that failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tests.real_models import harness, mixtral


def _cases() -> list[tuple[str, int, Callable[[harness.Setup], float]]]:
    """(module, layers its ModelArgs needs, runner) in the order of docs/tt_metal.md's table."""
    h = harness
    return [
        ("rmsnorm + distributed_norm, prefill", 1, lambda s: h.run_rmsnorm(s, "prefill")),
        ("rmsnorm + distributed_norm, decode", 1, lambda s: h.run_rmsnorm(s, "decode")),
        ("embedding", 1, h.run_embedding),
        ("mlp, prefill", 1, lambda s: h.run_mlp(s, "prefill")),
        ("mlp, decode", 1, lambda s: h.run_mlp(s, "decode")),
        ("lm_head", 1, h.run_lm_head),
        ("attention, prefill", 1, lambda s: h.run_attention_like(s, "attention", "prefill")),
        ("attention, decode", 1, lambda s: h.run_attention_like(s, "attention", "decode")),
        ("decoder, prefill", 1, lambda s: h.run_attention_like(s, "decoder", "prefill")),
        ("decoder, decode", 1, lambda s: h.run_attention_like(s, "decoder", "decode")),
        (
            "attention, prefill, paged KV",
            1,
            lambda s: h.run_attention_like(s, "attention", "prefill", paged=True),
        ),
        (
            "attention, decode, paged KV",
            1,
            lambda s: h.run_attention_like(s, "attention", "decode", paged=True),
        ),
        ("model + generator, prefill", 2, h.run_generator_prefill),
        ("model + generator, decode (greedy tokens)", 2, h.run_generator_decode),
        (
            "model + generator, paged KV, prefill",
            2,
            lambda s: h.run_generator_prefill(s, paged=True, trace=True),
        ),
        (
            "model + generator, paged KV, traced decode (greedy tokens)",
            2,
            lambda s: h.run_generator_decode(s, paged=True, trace=True),
        ),
        (
            "model + generator, chunked prefill (2 x 2048) + decode",
            "chunked",
            h.run_generator_chunked,
        ),
    ]


def _galaxy_wide_cases() -> list[tuple[str, str, Callable[[harness.Setup], float]]]:
    """8x4 only: decode at Llama-70B's dim 8192 (1 layer), where tt-metal's TG MLP decodes. (The
    Generator there pads the LM head to 128K x 8192, more memory than this machine has.)"""
    h = harness
    return [
        ("mlp, decode, dim 8192", "wide", lambda s: h.run_mlp(s, "decode")),
        (
            "decoder, decode, dim 8192",
            "wide",
            lambda s: h.run_attention_like(s, "decoder", "decode"),
        ),
    ]


def _setup(mesh: Any, key: int | str) -> Any:
    """The set-up a case names: a layer count, "chunked", "wide" (8x4, dim 8192) or "mixtral"."""
    if key == "wide":
        return harness.setup(mesh, 1, wide=True)
    if key == "mixtral":
        return mixtral.setup(mesh)
    if key == "chunked":
        return harness.setup_chunked(mesh)
    return harness.setup(mesh, int(key))


def run(meshes: list[str], only: str | None = None) -> list[tuple[str, str, str]]:
    """Every case on every mesh: (module, mesh, result)."""
    import ttjax.compat

    ttnn = ttjax.compat.install_as_ttnn()
    rows: list[tuple[str, str, str]] = []
    tt_transformers = _cases()
    wide = _galaxy_wide_cases()
    all_cases: list[tuple[str, Any, Callable[[Any], float]]] = [
        *tt_transformers,
        *wide,
        *mixtral.cases(),
    ]
    no_reference = harness.missing_llama_reference()
    for mesh_name in meshes:
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*harness.MESHES[mesh_name]))
        setups: dict[Any, Any] = {}
        for name, layers, fn in all_cases:
            if only and only not in name:
                continue
            if mesh_name == "8x4" and (name, layers, fn) not in [*tt_transformers, *wide]:
                continue  # mixtral8x7b is tt-metal's T3000 (1x8) demo
            if mesh_name != "8x4" and layers == "wide":
                continue
            if mesh_name == "8x4" and layers == "chunked":
                # 2 x 2048 tokens over 32 virtual devices: on 2 CPU cores XLA's CPU collectives
                # miss their 40 s rendezvous and abort the process (docs/tt_metal.md)
                rows.append((name, mesh_name, "not run (XLA CPU rendezvous timeout)"))
                continue
            if no_reference and (name, layers, fn) in [*tt_transformers, *wide]:
                rows.append((name, mesh_name, f"skipped: {no_reference}"))
                continue
            t0 = time.perf_counter()
            try:
                if layers not in setups:
                    try:
                        setups[layers] = _setup(mesh, layers)
                    except Exception as e:
                        setups[layers] = e
                if isinstance(setups[layers], Exception):
                    raise setups[layers]
                value = fn(setups[layers])
                ok = value >= harness.PCC_REQUIRED
                result = f"{'PCC' if ok else 'LOW PCC'} {value:.5f}"
            except Exception as e:  # the table records where tt-metal's code stopped
                result = harness.first_failing_call(e)
            rows.append((name, mesh_name, result))
            print(
                f"{name} | {mesh_name} | {result}  ({time.perf_counter() - t0:.0f}s)",
                file=sys.stderr,
            )
        ttnn.close_mesh_device(mesh)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mesh", action="append", choices=sorted(harness.MESHES))
    parser.add_argument("--only", help="run the modules whose name contains this")
    opts = parser.parse_args(argv)
    why = harness.missing_requirements()
    if why:
        print(f"cannot run tt-metal's model code: {why}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="ttjax-real-models-")
    if "HF_MODEL" not in os.environ:
        from tests.real_models.checkpoint import write_tiny_llama

        os.environ["HF_MODEL"] = str(write_tiny_llama(os.path.join(tmp, "tiny-llama")))
    os.environ.setdefault("TT_CACHE_PATH", os.path.join(tmp, "cache"))
    rows = run(opts.mesh or list(harness.MESHES), opts.only)
    print("| module | mesh | result |\n| --- | --- | --- |")
    for name, mesh, result in rows:
        cell = result.replace("|", "\\|")
        print(f"| {name} | {mesh} | {cell} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
