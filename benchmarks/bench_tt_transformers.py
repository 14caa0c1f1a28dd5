"""tt-metal's tt_transformers decode (traced, as its ``Generator`` runs it) against ttjax's own
Llama decode of the same config, on the same 1x8 mesh, side by side.

Both models are built from one tiny random Hugging Face Llama checkpoint (``HF_MODEL``, written
here by ``tests.real_models.checkpoint``): tt_transformers' ``Transformer`` + ``Generator`` read
from ``$TT_METAL_HOME`` with ``ttnn`` bound to ttjax, and ``models.llama.TtLlama`` (TP 8) with
the same sizes and dtypes (bfloat16 activations, bfloat8_b weights), batch 32 (tt_transformers
pads decode to 32 users). Two rows:

* the whole step as each generator runs it: host token/position -> device buffers,
  ``execute_trace``, logits read back to the host (target ratio <= 1.2);
* the replay alone (``execute_trace`` + wait): what the captured programs cost on the device;
* tt_transformers' decode captured twice, with and without the trace's reduce-scatter +
  all-gather -> all-reduce fusion (``TTJAX_TRACE_FUSE=0``): what that fusion buys.

torch runs one intra-op thread here (restored after): on the 2-core CPU host, shared with XLA's
eight device threads, torch's default pool made the Generator's ``process_output_decode``
(``.float()`` and ``torch.cat`` of [32, 2048] logits) take 20 ms a step instead of 0.5 ms.

Each row's ``details`` count the traced ops and the compiled HLO's instructions per step.
Skips with one line when ``TT_METAL_HOME`` (or what tt-metal's files import) is missing.
``--breakdown`` profiles replays of both traces instead and prints where their CPU time goes,
by family of op (``benchmarks/_profile.py: hlo_families``).

TT_METAL_HOME=/path/to/tt-metal python -m benchmarks.run --only tt_transformers
TT_METAL_HOME=/path/to/tt-metal python -m benchmarks.bench_tt_transformers --breakdown
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any
from unittest import mock

import numpy as np

import ttjax as ttnn
from benchmarks._harness import Row, compare
from benchmarks._profile import profile_families
from models.llama.config import LlamaConfig
from models.llama.model import TtLlama
from models.llama.weights import random_weights

BATCH = 32
PROMPT = 16
LAYERS = 2


def _hlo_counts(tid: Any) -> dict[str, int]:
    """Instructions of the trace's compiled programs (all, fusions, collectives) and the bytes
    they access per device (XLA's cost analysis)."""
    programs = [c for _, c in ttnn.trace.trace_programs(tid)]
    text = "\n".join(c.as_text() for c in programs)
    entry = [ln for ln in text.splitlines() if re.match(r"\s+(ROOT )?%?\S+ = ", ln)]
    costs = [c.cost_analysis() for c in programs]
    costs = [c[0] if isinstance(c, list) else c for c in costs]
    return {
        "bytes_accessed": int(sum(c.get("bytes accessed", 0) for c in costs)),
        "hlo_instructions": len(entry),
        "fusions": sum(" fusion(" in ln for ln in entry),
        "collectives": sum(
            bool(re.search(r" (all-reduce|all-gather|reduce-scatter|all-to-all)(-start)?\(", ln))
            for ln in entry
        ),
    }


def _trace_counts(tid: Any) -> dict[str, int]:
    """The trace's recorded ops and its programs' input and output buffers."""
    programs = ttnn.trace.trace_info(tid)["programs"]
    return {
        "trace_ops": sum(len(p["ops"]) for p in programs),
        "inputs": sum(p["inputs"] for p in programs),
        "outputs": sum(p["outputs"] for p in programs),
    }


def _tt_transformers(mesh: ttnn.MeshDevice) -> dict[str, Any]:
    """tt_transformers' Transformer + Generator, prefilled, with its decode trace captured."""
    import torch

    from models.tt_transformers.tt.generator import Generator
    from models.tt_transformers.tt.model import Transformer
    from tests.real_models import harness

    s = harness.setup(mesh, n_layers=LAYERS, max_seq_len=128, batch=BATCH)
    args = s.args
    model = Transformer(
        args=args,
        mesh_device=mesh,
        dtype=ttnn.bfloat8_b,
        state_dict=s.state_dict,
        weight_cache_path=args.weight_cache_path(ttnn.bfloat8_b),
    )
    gen = Generator([model], [args], mesh, tokenizer=args.tokenizer)
    seed = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, args.vocab_size, (BATCH, PROMPT), generator=seed)
    gen.prefill_forward_text(prompt, prompt_lens=[PROMPT] * BATCH)
    tok = prompt[:, -1:].clone()
    pos = torch.full((BATCH,), PROMPT)

    def step() -> Any:
        return gen.decode_forward_text(tok, pos, enable_trace=True)

    first = step()  # captures the trace (and runs it once)
    tid = gen.trace_ids_text[0]
    # The same decode captured again, as captured: no reduce-scatter + all-gather fusion.
    unfused = Generator([model], [args], mesh, tokenizer=args.tokenizer)
    with mock.patch.dict(os.environ, {"TTJAX_TRACE_FUSE": "0"}):
        unfused.decode_forward_text(tok, pos, enable_trace=True)

    def replayer(gen: Any) -> Any:
        trace, out = gen.trace_ids_text[0], gen.trace_output_text

        def replay() -> Any:
            ttnn.execute_trace(mesh, trace, cq_id=0, blocking=False)
            return [t.value for t in out] if isinstance(out, (list, tuple)) else out.value

        return replay

    return {
        "step": step,
        "replay": replayer(gen),
        "replay_unfused": replayer(unfused),
        "tid": tid,
        "tid_unfused": unfused.trace_ids_text[0],
        "logits": first,
        "args": args,
    }


def _ttjax_llama(mesh: ttnn.MeshDevice, args: Any) -> dict[str, Any]:
    """ttjax's TtLlama (TP 8) of the same sizes, prefilled, its decode step captured."""
    config = LlamaConfig(
        name="tt-transformers-tiny",
        vocab_size=args.vocab_size,
        dim=args.dim,
        n_layers=LAYERS,
        n_heads=args.n_heads,
        n_kv_heads=args.n_kv_heads,
        ffn_dim=args.hidden_dim,
        norm_eps=args.norm_eps,
        rope_theta=args.rope_theta,
        max_seq_len=128,
    )
    model = TtLlama(
        config,
        random_weights(config, seed=0),
        mesh,
        mode="tp",
        batch=BATCH,
        dtype=ttnn.bfloat16,
        weight_dtype=ttnn.bfloat8_b,
    )
    prompt = np.random.default_rng(0).integers(3, config.vocab_size, (BATCH, PROMPT))
    model.prefill(model.tokens_to_device(prompt))
    tok = model.tokens_to_device(prompt[:, -1:])
    pos = model.positions_to_device(np.full(BATCH, PROMPT))
    tid = ttnn.begin_trace_capture(mesh, cq_id=0)
    out = model.decode(tok, pos)
    ttnn.end_trace_capture(mesh, tid, cq_id=0)
    host_tok = prompt[:, -1:]
    host_pos = np.full(BATCH, PROMPT)

    def step() -> Any:
        ttnn.copy_host_to_device_tensor(model.tokens_to_device(host_tok, device=False), tok)
        ttnn.copy_host_to_device_tensor(model.positions_to_device(host_pos, device=False), pos)
        ttnn.execute_trace(mesh, tid, cq_id=0, blocking=False)
        return model.logits_to_numpy(out)

    def replay() -> Any:
        ttnn.execute_trace(mesh, tid, cq_id=0, blocking=False)
        return out.value

    return {"step": step, "replay": replay, "tid": tid}


@contextlib.contextmanager
def _both(mesh: ttnn.MeshDevice) -> Iterator[tuple[dict[str, Any], dict[str, Any]] | None]:
    """Both decodes captured (tt_transformers', ttjax Llama's), with ``ttnn`` bound to ttjax and
    torch on one thread while inside; None (and one line printed) when tt-metal is missing."""
    from tests.real_models import harness

    why = harness.missing_requirements()
    if why:
        print(f"[tt_transformers] skipped: {why}")
        yield None
        return
    import torch

    import ttjax.compat
    from tests.real_models.checkpoint import TinyLlama, write_tiny_llama

    with tempfile.TemporaryDirectory() as tmp:
        folder = str(write_tiny_llama(os.path.join(tmp, "tiny-llama"), TinyLlama()))
        env = {"HF_MODEL": folder, "TT_CACHE_PATH": os.path.join(tmp, "cache")}
        threads = torch.get_num_threads()
        with mock.patch.dict(os.environ, env):
            ttjax.compat.install_as_ttnn()
            torch.set_num_threads(1)
            try:
                tt = _tt_transformers(mesh)
                yield tt, _ttjax_llama(mesh, tt["args"])
            finally:
                torch.set_num_threads(threads)
                ttjax.compat.uninstall_ttnn()


def breakdown(mesh: ttnn.MeshDevice, steps: int = 20, rounds: int = 3) -> dict[str, Any]:
    """CPU ms per replay of each trace by family of op, summed over the 8 devices' threads: the
    median of ``rounds`` profiles of ``steps`` replays, the two traces taking turns."""
    with _both(mesh) as both:
        if both is None:
            return {}
        tt, ours = both
        sides = {"tt": tt, "ours": ours}
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
        for _ in range(rounds):
            for side, t in sides.items():
                ((_, compiled),) = ttnn.trace.trace_programs(t["tid"])
                runs[side].append(profile_families(t["replay"], compiled, steps))
    out = {
        side: {f: statistics.median(r.get(f, 0.0) for r in rs) for f in set().union(*rs)}
        for side, rs in runs.items()
    }
    for side in out:
        out[side]["compute (all but collectives)"] = sum(
            v for f, v in out[side].items() if not f.startswith("collective")
        )
    families = sorted(set(out["tt"]) | set(out["ours"]), key=lambda f: -out["tt"].get(f, 0))
    print(f"{'CPU ms per replay (8 devices)':48s} {'tt_transformers':>16s} {'ttjax Llama':>12s}")
    for f in families:
        print(f"{f:48s} {out['tt'].get(f, 0):16.2f} {out['ours'].get(f, 0):12.2f}")
    return out


def run(mesh: ttnn.MeshDevice) -> list[Row]:
    from tests.real_models.checkpoint import TinyLlama

    with _both(mesh) as both:
        if both is None:
            return []
        tt, ours = both
        details = {
            "config": {**asdict(TinyLlama()), "num_hidden_layers": LAYERS, "batch": BATCH},
            "tt_transformers": {**_trace_counts(tt["tid"]), **_hlo_counts(tt["tid"])},
            "tt_transformers_unfused": {
                **_trace_counts(tt["tid_unfused"]),
                **_hlo_counts(tt["tid_unfused"]),
            },
            "ttjax_llama": {**_trace_counts(ours["tid"]), **_hlo_counts(ours["tid"])},
        }
        steps = {"tt": tt["step"], "ours": ours["step"]}
        replays = {"tt": tt["replay"], "unfused": tt["replay_unfused"], "ours": ours["replay"]}
        t_step = compare(steps, repeats=15, number=10)
        t_replay = compare(replays, repeats=15, number=10)
    name = f"{LAYERS}-layer tiny Llama, TP {tuple(mesh.shape)}, batch {BATCH}"
    return [
        Row(
            f"decode step as the Generator runs it (host in/out), {name}",
            "tt_transformers Generator (trace)",
            "ttjax Llama (trace)",
            t_step["tt"],
            t_step["ours"],
            "ratio <= 1.2",
            details,
        ),
        Row(
            f"decode replay alone (execute_trace), {name}",
            "tt_transformers trace",
            "ttjax Llama trace",
            t_replay["tt"],
            t_replay["ours"],
            "-",
            details,
        ),
        Row(
            f"tt_transformers replay, reduce-scatter + all-gather fused or not, {name}",
            "as captured (TTJAX_TRACE_FUSE=0)",
            "fused into all-reduces",
            t_replay["unfused"],
            t_replay["tt"],
            "-",
            details,
        ),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--breakdown", action="store_true", help="profile replays by op family")
    parser.add_argument("--steps", type=int, default=20, help="replays per profile")
    parser.add_argument("--rounds", type=int, default=3, help="profiles per trace, taking turns")
    ns = parser.parse_args()
    mesh = ttnn.open_mesh_device(ttnn.MeshShape((1, 8)))
    if ns.breakdown:
        breakdown(mesh, ns.steps, ns.rounds)
    else:
        from benchmarks._harness import report

        report("ttjax benchmarks: tt_transformers", run(mesh))
