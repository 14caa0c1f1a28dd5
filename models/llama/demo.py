"""The flagship demo: Llama decode on a virtual TT-NN mesh, TP, DP or hybrid DP+TP with trace.

    python -m models.llama.demo --mesh galaxy --mode hybrid --submesh 2x4 --trace
    python -m models.llama.demo --mesh t3000 --mode tp --config tiny
    python -m models.llama.demo --mesh 1x4 --mode dp --checkpoint path/to/hf-llama
    python -m models.llama.demo --frontend spmd --config tiny   # torch-xla's mark_sharding

It prints the mesh layout, the generated text per user, tokens/s and tokens/s/user, the PCC of
the logits against the single-device Flax reference, and the collectives of one decode step.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import ttjax as ttnn
from models.llama.config import LlamaConfig, get_config
from models.llama.generate import GenerationResult, Generator
from models.llama.spmd import run_demo as run_spmd_demo
from models.llama.tokenizer import ByteTokenizer, load_tokenizer
from models.llama.weights import load_hf_checkpoint, random_weights

PROMPTS = [
    "The mesh of devices",
    "Tensor parallel layers",
    "Data parallel replicas",
    "A collective gathers",
]


def _pcc(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return 1.0 if np.array_equal(a, b) else float(np.corrcoef(a, b)[0, 1])


def reference_logits(
    config: LlamaConfig, weights: dict[str, np.ndarray], tokens: np.ndarray, prompt_len: int
) -> tuple[np.ndarray, list[np.ndarray], float]:
    """The Flax reference fed the same tokens: prefill logits, decode logits, decode tokens/s."""
    from models.llama.reference import LlamaReference

    model = LlamaReference(config, weights)
    ref = model.jitted()
    b, total = tokens.shape
    cache = model.init_cache(b)
    prefill, cache = ref.prefill(jax.numpy.asarray(tokens[:, :prompt_len]), cache)
    steps = []
    start = time.perf_counter()
    for t in range(prompt_len, total - 1):
        pos = np.full((b,), t, np.int32)
        logits, cache = ref.decode(jax.numpy.asarray(tokens[:, t : t + 1]), pos, cache)
        steps.append(np.asarray(logits)[:, 0])
        if len(steps) == 1:
            start = time.perf_counter()  # the first step compiled the decode program
    seconds = time.perf_counter() - start
    tps = b * (len(steps) - 1) / seconds if len(steps) > 1 and seconds else 0.0
    return np.asarray(prefill), steps, tps


def transformers_comparison(
    checkpoint: str | Path, tokens: np.ndarray, prompt_len: int, result: GenerationResult
) -> str | None:
    """PCC, max difference and greedy agreement against transformers' own model of the
    checkpoint, fed the same tokens; None when transformers (or torch) is not installed."""
    try:
        import torch
        import transformers
    except ImportError:
        return None
    hf = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = hf(torch.from_numpy(np.asarray(tokens[:, :-1], np.int64))).logits.float().numpy()
    ours = [result.prefill_logits, *[lg[:, None] for lg in result.decode_logits]]
    theirs = [logits[:, :prompt_len]] + [
        logits[:, prompt_len + i : prompt_len + i + 1] for i in range(len(result.decode_logits))
    ]
    a = np.concatenate([o.reshape(o.shape[0], -1) for o in ours], axis=1)
    b = np.concatenate([t.reshape(t.shape[0], -1) for t in theirs], axis=1)
    same = bool(np.array_equal(logits[:, prompt_len - 1 :].argmax(-1), tokens[:, prompt_len:]))
    return (
        f"vs transformers {type(hf).__name__}: PCC {_pcc(a, b):.6f}, max |diff| "
        f"{float(np.max(np.abs(a - b))):.2e}, same greedy tokens: {same}"
    )


def _collective_table(reports: list[Any], n_layers: int) -> Table:
    table = Table(title="collectives of one decode step (per program = per submesh)")
    for col in (
        "program",
        "mesh",
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "other",
        "per layer",
        "bytes/device",
    ):
        table.add_column(col)
    for i, r in enumerate(reports):
        c = r.collective_counts()
        other = c["collective-permute"] + c["all-to-all"]
        table.add_row(
            str(i),
            "x".join(map(str, r.mesh_shape)),
            str(c["all-reduce"]),
            str(c["all-gather"]),
            str(c["reduce-scatter"]),
            str(other),
            f"{(r.layer_loop.collectives_per_iteration['all-reduce'] if r.layer_loop else c['all-reduce'] / n_layers):.1f} all-reduce",
            f"{r.bytes_per_device / 1024:.1f} KiB",
        )
    return table


def _weights(ns: argparse.Namespace, console: Console) -> tuple[LlamaConfig, dict[str, Any]]:
    """The checkpoint's weights, or random ones, saying which (random weights give gibberish)."""
    if ns.checkpoint:
        config, weights = load_hf_checkpoint(ns.checkpoint)
        console.print(f"weights: {ns.checkpoint} (Hugging Face checkpoint)")
        return config, weights
    config = get_config(ns.config)
    console.print(
        f"weights: RANDOM (config {config.name}, seed 0; no --checkpoint). A model with random "
        "weights predicts arbitrary tokens, so the continuations below are gibberish; the "
        "demo checks the numbers against the reference instead. Pass --checkpoint for text."
    )
    return config, random_weights(config, seed=0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mesh", default="galaxy", help="galaxy, t3000, n300 or RxC")
    p.add_argument("--mode", default="hybrid", choices=["tp", "dp", "hybrid"])
    p.add_argument("--submesh", default="2x4", help="submesh shape for --mode hybrid")
    p.add_argument("--config", default="small", help="tiny or small (ignored with --checkpoint)")
    p.add_argument(
        "--checkpoint", default=None, help="Hugging Face folder: config.json + *.safetensors"
    )
    p.add_argument(
        "--batch", type=int, default=None, help="users (default: 32 hybrid, 8 otherwise)"
    )
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--trace", action="store_true", help="capture one decode step and replay it")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--no-reference", action="store_true", help="skip the Flax reference check")
    p.add_argument(
        "--frontend",
        default="ttnn",
        choices=["ttnn", "spmd"],
        help="ttnn: explicit TT-NN model; spmd: torch-xla mark_sharding annotations (8 devices)",
    )
    ns = p.parse_args(argv)
    console = Console(width=120)
    if ns.frontend == "spmd":
        console.rule("ttjax Llama demo: mark_sharding (torch-xla SPMD)")
        config, weights = _weights(ns, console)
        console.print("prompt: random token ids (the frontend demo compares logits, not text)")
        prompt = np.random.default_rng(0).integers(0, config.vocab_size, (ns.batch or 2, 8))
        run_spmd_demo(config, weights, prompt, min(ns.max_new_tokens, 4), console)
        return 0

    mesh = ttnn.open_mesh_device(ttnn.parse_mesh_shape(ns.mesh))
    console.rule(f"ttjax Llama demo: {ns.mode} on {mesh!r}")
    ttnn.visualize_mesh_device(mesh, compact=mesh.get_num_devices() > 8)
    config, weights = _weights(ns, console)
    tokenizer = load_tokenizer(ns.checkpoint, config.vocab_size)
    if isinstance(tokenizer, ByteTokenizer):
        why = "the checkpoint has no tokenizer.json" if ns.checkpoint else "no --checkpoint"
        console.print(f"tokenizer: byte-level fallback (one token per UTF-8 byte; {why})")
    else:
        console.print(f"tokenizer: {Path(ns.checkpoint or '') / 'tokenizer.json'}")
    batch = ns.batch or (32 if ns.mode == "hybrid" else 8)
    submesh = tuple(int(v) for v in ns.submesh.split("x")) if ns.mode == "hybrid" else None
    dtype = ttnn.float32 if ns.dtype == "float32" else ttnn.bfloat16
    console.print(
        f"config {config.name}: {config.num_params() / 1e6:.1f}M parameters, {config.n_layers} "
        f"layers, {config.n_heads} heads ({config.n_kv_heads} KV), dim {config.dim}; batch {batch}, "
        f"{'submesh ' + ns.submesh if submesh else ''} trace={ns.trace}"
    )
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    progress.start()
    placing = progress.add_task("placing weights on the mesh", total=1)
    start = time.perf_counter()
    gen = Generator.build(
        config, weights, mesh, mode=ns.mode, batch=batch, submesh=submesh, dtype=dtype
    )
    progress.update(placing, completed=1)
    placed_s = time.perf_counter() - start

    encoded = [tokenizer.encode(PROMPTS[i % len(PROMPTS)]) for i in range(batch)]
    length = min(len(e) for e in encoded)
    prompt = np.array([e[:length] for e in encoded], dtype=np.int64) % config.vocab_size

    # A first run compiles every op; the second is timed (tokens only); the third keeps every
    # step's logits for the comparison with the reference.
    sampling = dict(trace=ns.trace, temperature=ns.temperature, top_k=ns.top_k, top_p=ns.top_p)
    compiling = progress.add_task("compiling (first prefill + decode steps)", total=2)
    gen.generate(
        prompt, 2, keep_logits=False, on_token=lambda s, _: progress.advance(compiling), **sampling
    )
    n = ns.max_new_tokens
    prefill = progress.add_task("prefill", total=1)
    decode = progress.add_task("decode", total=max(n - 1, 0))

    def advance(step: int, _: np.ndarray) -> None:
        progress.advance(prefill if step == 0 else decode)

    timed: GenerationResult = gen.generate(
        prompt, n, keep_logits=False, on_token=advance, **sampling
    )
    checking = progress.add_task("decode again, keeping every step's logits", total=n)
    result = gen.generate(
        prompt,
        n,
        keep_logits=not ns.no_reference or bool(ns.checkpoint),
        on_token=lambda s, _: progress.advance(checking),
        **sampling,
    )
    progress.stop()
    console.print(f"weights placed in {placed_s:.1f} s")
    if submesh:
        for i, m in enumerate(gen.models):
            console.print(f"  replica {i}: {m.mesh!r}, device ids {m.mesh.get_device_ids()}")

    table = Table(title="generated (first users)")
    table.add_column("user")
    table.add_column("prompt")
    table.add_column("continuation")
    for i in range(min(batch, 4)):
        table.add_row(
            str(i),
            repr(tokenizer.decode(prompt[i].tolist())),
            repr(tokenizer.decode(result.tokens[i, length:].tolist())),
        )
    console.print(table)
    console.print(
        f"prefill {timed.prefill_seconds * 1e3:.1f} ms; decode {timed.decode_steps} steps: "
        f"{timed.tokens_per_second:.1f} tokens/s, {timed.tokens_per_second_per_user:.2f} "
        f"tokens/s/user ({'trace replay' if ns.trace else 'eager'})"
    )

    if not ns.no_reference:
        ref_prefill, ref_steps, ref_tps = reference_logits(config, weights, result.tokens, length)
        pccs = [_pcc(result.prefill_logits, ref_prefill)]
        pccs += [_pcc(a, b) for a, b in zip(result.decode_logits, ref_steps)]
        same = bool(
            ns.temperature == 0.0
            and all(
                np.array_equal(np.asarray(s).argmax(-1), result.tokens[:, length + 1 + i])
                for i, s in enumerate(ref_steps)
            )
        )
        console.print(
            f"PCC vs single-device Flax reference: prefill {pccs[0]:.6f}, decode min "
            f"{min(pccs[1:], default=1.0):.6f} over {len(pccs) - 1} steps; greedy tokens identical: "
            f"{same}; reference decode {ref_tps:.1f} tokens/s (after its first, compiling step)"
        )
        console.print(
            f"about the speeds: the {mesh.get_num_devices()} virtual devices are threads sharing "
            f"this machine's {os.cpu_count()} CPU cores, and every op synchronises them; the "
            "one-device reference runs one jitted program on all cores. The ratio measures "
            "dispatch overhead on a CPU, not what a Tenstorrent mesh would do."
        )
    if ns.checkpoint:
        line = transformers_comparison(ns.checkpoint, result.tokens, length, result)
        console.print(line or "transformers is not installed: skipped the comparison with it")

    reports = gen.decode_trace_reports(prompt)
    console.print(_collective_table(reports, config.n_layers))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
