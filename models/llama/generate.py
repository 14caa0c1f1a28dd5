"""Batched generation with a KV cache: prefill, then decode steps, eager or replayed as a trace.

``Generator`` drives one model per mesh (TP or DP) or one TP model per submesh (hybrid DP+TP,
TT-NN guide 8.3: users are split across the submeshes). With ``trace=True`` one decode step of
*every* model is captured once and replayed with ``execute_trace``; greedy decoding then stays on
device (the step writes its argmax into the token buffer and advances the positions in place),
so the host only reads each step's tokens back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import ttjax as ttnn
from models.llama.config import LlamaConfig
from models.llama.model import TtLlama
from models.llama.sampling import sample


@dataclass
class GenerationResult:
    tokens: np.ndarray  # [B, prompt + new]
    prefill_logits: np.ndarray  # [B, S, vocab] (last position used to pick the first token)
    decode_logits: list[np.ndarray] = field(default_factory=list)  # per step [B, vocab]
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    decode_steps: int = 0

    @property
    def batch(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def tokens_per_second(self) -> float:
        return self.batch * self.decode_steps / self.decode_seconds if self.decode_seconds else 0.0

    @property
    def tokens_per_second_per_user(self) -> float:
        return self.decode_steps / self.decode_seconds if self.decode_seconds else 0.0


class Generator:
    """Generation over one or several models (hybrid: one per submesh, trace spanning them all).

    >>> gen = Generator.build(config, weights, galaxy, mode="hybrid", submesh=(2, 4), batch=32)
    >>> result = gen.generate(prompt_tokens, max_new_tokens=16, trace=True)
    """

    def __init__(self, models: list[TtLlama], root_mesh: ttnn.MeshDevice) -> None:
        self.models = models
        self.root = root_mesh
        self.config: LlamaConfig = models[0].config
        self._trace: Any = None
        self._trace_greedy = True
        self._bufs: list[tuple[ttnn.Tensor, ttnn.Tensor]] = []
        self._logits: list[ttnn.Tensor] = []

    @staticmethod
    def build(
        config: LlamaConfig,
        weights: dict[str, np.ndarray],
        mesh_device: ttnn.MeshDevice,
        *,
        mode: str,
        batch: int,
        submesh: tuple[int, int] | None = None,
        **model_kwargs: Any,
    ) -> Generator:
        """Models for ``mode`` ``"tp"``, ``"dp"`` or ``"hybrid"`` (TP per ``submesh``, DP across)."""
        if mode == "hybrid":
            if submesh is None:
                raise ValueError("mode='hybrid' needs submesh=(rows, cols)")
            subs = mesh_device.create_submeshes(ttnn.MeshShape(submesh))
            if batch % len(subs):
                raise ValueError(f"batch={batch} must divide over {len(subs)} submeshes")
            per = batch // len(subs)
            models = [
                TtLlama(config, weights, sub, mode="tp", batch=per, **model_kwargs) for sub in subs
            ]
        else:
            models = [TtLlama(config, weights, mesh_device, mode=mode, batch=batch, **model_kwargs)]
        return Generator(models, mesh_device)

    # ------------------------------------------------------------------------------------------

    def _split(self, arr: np.ndarray) -> list[np.ndarray]:
        return np.split(arr, len(self.models), axis=0)

    def _logits_host(self, logits: list[ttnn.Tensor]) -> np.ndarray:
        return np.concatenate([m.logits_to_numpy(t) for m, t in zip(self.models, logits)], axis=0)

    def prefill(self, prompt: np.ndarray) -> np.ndarray:
        """Run the prompts [B, S]; returns logits [B, S, vocab] (host).

        The KV cache is not cleared: the prompt overwrites positions 0..S-1, each decode step
        writes its own position, and attention never reads past a user's position. Keeping the
        same cache tensors lets a captured decode trace be replayed across generate() calls.
        """
        outs = [m.prefill(m.tokens_to_device(p)) for m, p in zip(self.models, self._split(prompt))]
        return self._logits_host(outs)

    def _step_ops(self, greedy: bool) -> list[ttnn.Tensor]:
        """One decode step of every model on its persistent buffers (recorded into the trace)."""
        outs = []
        for m, (tok, pos) in zip(self.models, self._bufs):
            logits = m.decode(tok, pos)
            if greedy:
                ttnn.copy(m.greedy_tokens(logits), tok)  # next token, on device
            ttnn.add(pos, 1, output_tensor=pos)
            outs.append(logits)
        return outs

    def _tokens_host(self) -> np.ndarray:
        parts = []
        for m, (tok, _) in zip(self.models, self._bufs):
            if m.dp > 1:
                parts.append(
                    ttnn.to_numpy(tok, mesh_composer=ttnn.ConcatMeshToTensor(m.mesh, dim=0))
                )
            else:
                parts.append(ttnn.to_numpy(ttnn.get_device_tensors(tok)[0]))
        return np.concatenate(parts, axis=0).reshape(-1)

    def generate(
        self,
        prompt: np.ndarray,
        max_new_tokens: int,
        *,
        trace: bool = False,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int = 0,
        keep_logits: bool = True,
        on_token: Callable[[int, np.ndarray], None] | None = None,
    ) -> GenerationResult:
        """Greedy (``temperature=0``) or top-k/top-p sampled generation of ``max_new_tokens``."""
        prompt = np.asarray(prompt)
        s = prompt.shape[1]
        if s + max_new_tokens > self.models[0].max_seq_len:
            raise ValueError(
                f"prompt {s} + {max_new_tokens} new tokens exceed the KV cache "
                f"({self.models[0].max_seq_len}); raise max_seq_len"
            )
        greedy = temperature == 0.0
        rng = np.random.default_rng(seed)
        pick: Callable[[np.ndarray], np.ndarray] = (
            (lambda lg: lg.argmax(-1))
            if greedy
            else (lambda lg: sample(lg, temperature=temperature, top_k=top_k, top_p=top_p, rng=rng))
        )
        t0 = time.perf_counter()
        prefill_logits = self.prefill(prompt)
        first = pick(prefill_logits[:, -1]).astype(np.uint32)
        prefill_s = time.perf_counter() - t0
        tokens = [first]
        if on_token:
            on_token(0, first)
        result = GenerationResult(np.empty(0), prefill_logits, prefill_seconds=prefill_s)
        self._set_buffers(first, s)
        if self._trace is not None and self._trace_greedy != greedy:
            self._release_trace()  # the captured step differs (on-device argmax or not)
        t0 = time.perf_counter()
        for step in range(1, max_new_tokens):
            if trace and self._trace is None:
                self._trace_greedy = greedy
                tid = ttnn.begin_trace_capture(self.root, cq_id=0)
                self._logits = self._step_ops(greedy)  # recorded, and run once
                ttnn.end_trace_capture(self.root, tid, cq_id=0)
                self._trace = tid
            elif trace:
                ttnn.execute_trace(self.root, self._trace, cq_id=0, blocking=False)
            else:
                self._logits = self._step_ops(greedy)
            if greedy:
                nxt = self._tokens_host().astype(np.uint32)
                if keep_logits:
                    result.decode_logits.append(self._logits_host(self._logits)[:, 0])
            else:
                lg = self._logits_host(self._logits)[:, 0]
                nxt = pick(lg).astype(np.uint32)
                if keep_logits:
                    result.decode_logits.append(lg)
                for m, (tok, _), part in zip(self.models, self._bufs, self._split(nxt)):
                    ttnn.copy_host_to_device_tensor(
                        m.tokens_to_device(part[:, None], device=False), tok
                    )
            tokens.append(nxt)
            if on_token:
                on_token(step, nxt)
        result.decode_seconds = time.perf_counter() - t0
        result.decode_steps = max_new_tokens - 1
        result.tokens = np.concatenate([prompt, np.stack(tokens, axis=1)], axis=1)
        return result

    def _set_buffers(self, tokens: np.ndarray, position: int) -> None:
        """Load each user's token and position into the persistent device buffers (created once,
        then refreshed in place, so a captured trace keeps reading them)."""
        parts = self._split(np.asarray(tokens, np.uint32))
        if not self._bufs or any(len(p) != m.batch for m, p in zip(self.models, parts)):
            self._release_trace()
            self._bufs = [
                (m.tokens_to_device(p[:, None]), m.positions_to_device(np.full(len(p), position)))
                for m, p in zip(self.models, parts)
            ]
            return
        for m, p, (tok, pos) in zip(self.models, parts, self._bufs):
            ttnn.copy_host_to_device_tensor(m.tokens_to_device(p[:, None], device=False), tok)
            ttnn.copy_host_to_device_tensor(
                m.positions_to_device(np.full(len(p), position), device=False), pos
            )

    def release(self) -> None:
        """Free the captured decode trace (if any)."""
        self._release_trace()

    def _release_trace(self) -> None:
        if self._trace is not None:
            ttnn.release_trace(self.root, self._trace)
            self._trace = None

    def decode_trace_reports(self, prompt: np.ndarray) -> list[Any]:
        """Capture one decode step (after a prefill of ``prompt``) and inspect its programs."""
        self.prefill(prompt)
        self._set_buffers(np.zeros(len(prompt), np.uint32), prompt.shape[1])
        tid = ttnn.begin_trace_capture(self.root)
        self._step_ops(greedy=True)
        ttnn.end_trace_capture(self.root, tid)
        try:
            return ttnn.inspect.inspect_trace(self.root, tid)
        finally:
            ttnn.release_trace(self.root, tid)
