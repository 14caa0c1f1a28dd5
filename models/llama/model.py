"""Llama-3.x written with ttjax ops and CCL calls, TT-NN style (``import ttjax as ttnn``).

Every op runs per device; the only communication is explicit:

* ``mode="tp"`` (Megatron): QKV, gate and up are column-parallel and O and down row-parallel,
  heads are split across the devices of the mesh, and each attention and each MLP block ends in
  one ``all_reduce`` — the two collectives per layer of the Megatron optimum. The embedding is
  sharded on the hidden dim and the LM head on the vocabulary; one ``all_gather`` follows each.
  Options bring decode to the hand-written collective count: ``embedding="vocab_parallel"``
  shards the table on the vocabulary (a masked local lookup + one ``all_reduce``), and
  ``gather_logits=False`` leaves the logits vocab-sharded; :meth:`TtLlama.greedy_tokens` then
  takes the argmax over the shards by gathering one candidate (value, index) per device.
  ``fuse_gate_up=True`` stores gate and up as one column-parallel weight (each device's columns
  ``[gate_i | up_i]``): one matmul per MLP reads both, which a decode GEMV streams in one pass.
* ``mode="dp"``: weights are replicated, the batch is sharded over the devices, and nothing is
  communicated.
* Hybrid DP+TP (TT-NN guide 8.3) runs one ``mode="tp"`` model per submesh; see ``generate.py``.

Activations are ``[B, S, dim]`` per device. A KV cache ``[B, n_kv_heads, max_seq_len, head_dim]``
per layer (kv heads split like the query heads) serves prefill (``fill_cache``) and decode
(``paged_update_cache`` at each user's position, held on device so a decode step can be traced).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ttjax as ttnn
from models.llama.axes import BATCH_AXES
from models.llama.config import LlamaConfig
from models.llama.sharding import WEIGHT_GROUPS, LlamaSharding


class TtLlama(LlamaSharding):
    """A Llama (or Falcon-style) decoder on one mesh; ``mode`` is ``"tp"`` or ``"dp"``.

    >>> model = TtLlama(config, weights, mesh, mode="tp")
    >>> logits = model.prefill(tokens)              # [B, S, vocab]
    >>> logits = model.decode(next_tokens, pos)     # [B, 1, vocab]
    """

    def __init__(
        self,
        config: LlamaConfig,
        weights: dict[str, np.ndarray] | None,
        mesh_device: ttnn.MeshDevice,
        *,
        mode: str = "tp",
        batch: int = 1,
        dtype: ttnn.DataType = ttnn.float32,
        weight_dtype: ttnn.DataType | None = None,
        cache_dtype: ttnn.DataType | None = None,
        max_seq_len: int | None = None,
        scan_layers: bool = False,
        transpose_weights: bool = False,
        embedding: str = "hidden_sharded",
        gather_logits: bool = True,
        fuse_gate_up: bool = False,
        weight_dtypes: dict[str, ttnn.DataType] | None = None,
    ) -> None:
        if mode not in ("tp", "dp"):
            raise ttnn.errors.ConfigError(
                f"TtLlama: mode={mode!r} is not a parallel mode.\n"
                "fix: use 'tp' or 'dp' (hybrid = one 'tp' model per submesh)."
            )
        if embedding not in ("hidden_sharded", "vocab_parallel"):
            raise ttnn.errors.ConfigError(
                f"TtLlama: embedding={embedding!r} is not an embedding layout.\n"
                "fix: use 'hidden_sharded' (all_gather after the lookup) or 'vocab_parallel' "
                "(masked lookup + all_reduce)."
            )
        if fuse_gate_up and config.mlp != "swiglu":
            raise ttnn.errors.ConfigError(
                f"TtLlama: fuse_gate_up=True needs a SwiGLU MLP (gate and up), but config.mlp="
                f"{config.mlp!r}.\nfix: leave fuse_gate_up=False for this model."
            )
        self.fuse_gate_up = fuse_gate_up
        unknown = sorted(set(weight_dtypes or {}) - set(WEIGHT_GROUPS))
        if unknown:
            raise ttnn.errors.ConfigError(
                f"TtLlama: weight_dtypes names {unknown}, which are not weights of a layer.\n"
                f"fix: use names from {list(WEIGHT_GROUPS)}."
            )
        self.weight_dtypes = dict(weight_dtypes or {})
        self.config = config
        self.mesh = mesh_device
        self.mode = mode
        self.batch = batch
        self.dtype = dtype
        self.weight_dtype = weight_dtype or dtype
        self.cache_dtype = cache_dtype or dtype
        self.max_seq_len = max_seq_len or config.max_seq_len
        self.abstract = weights is None  # shapes only: for ttjax.inspect on full-size models
        # Stacked layers run under ttnn.scan: one compiled layer body (for jit / inspect).
        self.scan_layers = scan_layers
        # Store linear weights [out, in] (torch's layout) and multiply with transpose_b=True
        # instead of TT-NN's [in, out]; GPUs read row-major GEMV operands faster this way.
        self.transpose_weights = transpose_weights
        n = mesh_device.get_num_devices()
        self.tp = n if mode == "tp" else 1
        # Both options only change anything under TP (one device holds the whole vocab in DP).
        self.vocab_parallel = embedding == "vocab_parallel" and self.tp > 1
        self.gather_logits = gather_logits or self.tp == 1
        self.dp = n if mode == "dp" else 1
        self._check_divisible()
        self.q_heads = config.n_heads // self.tp
        # With fewer KV heads than devices, each KV head is replicated on tp / n_kv_heads devices.
        self.kv_heads = max(1, config.n_kv_heads // self.tp)
        self._load(weights or {})
        self.reset_cache()

    # ------------------------------------------------------------------------------------------
    # Inputs
    # ------------------------------------------------------------------------------------------

    def _batch_mapper(self) -> Any:
        return self._mapper(BATCH_AXES)  # split over dp, replicated under tp

    def tokens_to_device(self, tokens: np.ndarray, device: bool = True) -> ttnn.Tensor:
        """Token ids [B, S] -> a uint32 tensor (batch sharded in DP, replicated in TP)."""
        return ttnn.from_torch(
            np.asarray(tokens, np.uint32),
            dtype=ttnn.uint32,
            layout=ttnn.TILE_LAYOUT,  # what the on-device argmax of TILE logits writes back
            device=self.mesh if device else None,
            mesh_mapper=self._batch_mapper(),
        )

    def positions_to_device(self, positions: np.ndarray, device: bool = True) -> ttnn.Tensor:
        """Each user's current position [B] -> an int32 tensor laid out like the batch."""
        return ttnn.from_torch(
            np.asarray(positions, np.int32),
            dtype=ttnn.int32,
            device=self.mesh if device else None,
            mesh_mapper=self._batch_mapper(),
        )

    # ------------------------------------------------------------------------------------------
    # Forward
    # ------------------------------------------------------------------------------------------

    def _norm(self, x: ttnn.Tensor, weight: ttnn.Tensor, bias: ttnn.Tensor | None) -> ttnn.Tensor:
        eps = self.config.norm_eps
        if self.config.norm == "layer":
            return ttnn.layer_norm(x, epsilon=eps, weight=weight, bias=bias)
        return ttnn.rms_norm(x, epsilon=eps, weight=weight)

    def _rope(self, x: ttnn.Tensor, cos: ttnn.Tensor, sin: ttnn.Tensor) -> ttnn.Tensor:
        """Rotate-half RoPE: x * cos + rotate_half(x) * sin, x [B, S, heads, hd]."""
        half = self.config.head_dim // 2
        x1 = x[..., :half]
        x2 = x[..., half:]
        rotated = ttnn.concat([ttnn.neg(x2), x1], dim=-1)
        return ttnn.add(ttnn.multiply(x, cos), ttnn.multiply(rotated, sin))

    def _linear(self, x: ttnn.Tensor, w: ttnn.Tensor, **kwargs: Any) -> ttnn.Tensor:
        return ttnn.linear(x, w, transpose_b=self.transpose_weights, **kwargs)

    def _reduce(self, x: ttnn.Tensor) -> ttnn.Tensor:
        return ttnn.all_reduce(x) if self.tp > 1 else x

    def _attention(
        self,
        layer: dict[str, Any],
        cache: list[ttnn.Tensor],
        x: ttnn.Tensor,
        cos: ttnn.Tensor,
        sin: ttnn.Tensor,
        pos: ttnn.Tensor | None,
    ) -> ttnn.Tensor:
        hd = self.config.head_dim
        b, s = x.shape[0], x.shape[1]
        qh, kvh = self.q_heads, self.kv_heads
        qkv = self._linear(x, layer["wqkv"])  # [B, S, (qh + 2 kvh) * hd]
        q = ttnn.reshape(qkv[..., : qh * hd], (b, s, qh, hd))
        k = ttnn.reshape(qkv[..., qh * hd : (qh + kvh) * hd], (b, s, kvh, hd))
        v = ttnn.reshape(qkv[..., (qh + kvh) * hd :], (b, s, kvh, hd))
        q = self._rope(q, cos, sin)
        k = self._rope(k, cos, sin)
        cache_k, cache_v = cache
        if pos is None:  # prefill: positions 0..S-1 of every user
            q, k, v = (ttnn.permute(a, (0, 2, 1, 3)) for a in (q, k, v))  # [B, heads, S, hd]
            ttnn.fill_cache(cache_k, ttnn.typecast(k, cache_k.dtype), 0)
            ttnn.fill_cache(cache_v, ttnn.typecast(v, cache_v.dtype), 0)
            out = ttnn.transformer.scaled_dot_product_attention(q, k, v, is_causal=True)
            out = ttnn.reshape(ttnn.permute(out, (0, 2, 1, 3)), (b, s, qh * hd))
        else:  # decode one token per user at its own position
            k, v = (ttnn.permute(a, (1, 0, 2, 3)) for a in (k, v))  # [1, B, kvh, hd]
            ttnn.experimental.paged_update_cache(cache_k, k, update_idxs_tensor=pos)
            ttnn.experimental.paged_update_cache(cache_v, v, update_idxs_tensor=pos)
            out = ttnn.transformer.scaled_dot_product_attention_decode(
                ttnn.permute(q, (1, 0, 2, 3)), cache_k, cache_v, cur_pos_tensor=pos
            )  # [1, B, qh, hd]
            out = ttnn.reshape(out, (b, 1, qh * hd))
        out = self._linear(out, layer["wo"])  # row-parallel: partial sums on every device
        return self._reduce(out)

    def _mlp(self, layer: dict[str, Any], x: ttnn.Tensor) -> ttnn.Tensor:
        if layer["w_gate_up"] is not None:  # fuse_gate_up: this device's [gate_i | up_i]
            gate_up = self._linear(x, layer["w_gate_up"])
            f = gate_up.shape[-1] // 2
            h = ttnn.multiply(ttnn.silu(gate_up[..., :f]), gate_up[..., f:])
        elif layer["w_up"] is not None:
            gate = self._linear(x, layer["w_in"], activation="silu")
            h = ttnn.multiply(gate, self._linear(x, layer["w_up"]))
        else:
            h = self._linear(x, layer["w_in"], activation="gelu")
        return self._reduce(self._linear(h, layer["w_out"]))

    def forward(
        self,
        tokens: ttnn.Tensor,
        pos: ttnn.Tensor | None = None,
        params: dict[str, Any] | None = None,
        caches: list[list[ttnn.Tensor]] | None = None,
    ) -> ttnn.Tensor:
        """Logits [B, S, vocab] for token ids [B, S]; ``pos`` [B] selects decode (S == 1).

        ``params``/``caches`` default to the model's own; passing them makes this a pure function
        of its arguments (caches are updated in place), which is what ``jax.jit`` needs.
        """
        c = self.config
        p = self.params if params is None else params
        caches = self.caches if caches is None else caches
        b, s = tokens.shape[0], tokens.shape[1]
        x = self._embed(tokens, p)
        if pos is None:
            ids = ttnn.reshape(ttnn.arange(0, s, 1, ttnn.int32, device=self.mesh), (1, s))
        else:
            ids = ttnn.reshape(pos, (b, 1))
        cos = ttnn.reshape(ttnn.embedding(ids, p["cos"]), (-1, s, 1, c.head_dim))
        sin = ttnn.reshape(ttnn.embedding(ids, p["sin"]), (-1, s, 1, c.head_dim))

        def block(x: ttnn.Tensor, layer: dict[str, Any], cache: list[ttnn.Tensor]) -> ttnn.Tensor:
            h = self._norm(x, layer["attn_norm"], layer["attn_norm_bias"])
            attn = self._attention(layer, cache, h, cos, sin, pos)
            if c.parallel_block:
                return ttnn.add(x, ttnn.add(attn, self._mlp(layer, h)))
            x = ttnn.add(x, attn)
            h = self._norm(x, layer["mlp_norm"], layer["mlp_norm_bias"])
            return ttnn.add(x, self._mlp(layer, h))

        if self.scan_layers:

            def step(x: ttnn.Tensor, xs: Any) -> Any:
                layer, cache = xs
                return block(x, layer, cache), cache

            x, new_caches = ttnn.scan(step, x, (p["layers"], list(caches)))
            for old, new in zip(caches, new_caches):  # caches are updated in place, as in TT-NN
                ttnn.copy(new, old)
        else:
            for layer, cache in zip(p["layers"], caches):
                x = block(x, layer, cache)
        x = self._norm(x, p["norm"], p["norm_bias"])
        logits = self._linear(x, p["lm_head"])  # [B, S, vocab / tp]
        if self.tp > 1 and self.gather_logits:
            logits = ttnn.all_gather(logits, dim=-1)
        return logits

    def _embed(self, tokens: ttnn.Tensor, p: dict[str, Any]) -> ttnn.Tensor:
        """Token ids [B, S] -> [B, S, dim] on every device.

        Vocab-parallel: each device looks up the ids in its own rows (ids shifted by its first
        row, ``vocab_start``; uint32 wrap-around sends smaller ids out of range too), zeroes the
        rows it does not own, and one ``all_reduce`` sums the single owner's row into place.
        """
        if not self.vocab_parallel:
            x = ttnn.embedding(tokens, p["embed"], layout=ttnn.TILE_LAYOUT)
            if x.shape[-1] != self.config.dim:
                x = ttnn.all_gather(x, dim=-1)  # the embedding is sharded on the hidden dim
            return x
        b, s = tokens.shape[0], tokens.shape[1]
        local = ttnn.subtract(tokens, self.vocab_start)  # [B, S] uint32
        owned = ttnn.lt(local, self.config.vocab_size // self.tp)
        rows = ttnn.embedding(local, p["embed"], layout=ttnn.TILE_LAYOUT)  # out of range: clipped
        rows = ttnn.where(ttnn.reshape(owned, (b, s, 1)), rows, 0.0)
        return ttnn.all_reduce(rows)

    def greedy_tokens(self, logits: ttnn.Tensor) -> ttnn.Tensor:
        """Greedy next token [B, S] (uint32, on every device) of logits [B, S, vocab(/tp)].

        Logits left vocab-sharded are not gathered: each device takes its local max and argmax,
        one ``all_gather`` brings the tp (value, global index) candidates to every device, and
        the smallest index among the best values wins (numpy's argmax tie rule). Indices travel
        as float32, exact for vocabularies below 2**24.
        """
        if self.gather_logits:
            return ttnn.argmax(logits, dim=-1)
        b, s = logits.shape[0], logits.shape[1]
        values = ttnn.typecast(ttnn.max(logits, dim=-1, keepdim=True), ttnn.float32)
        index = ttnn.add(ttnn.argmax(logits, dim=-1, keepdim=True), self.vocab_start)
        pair = ttnn.concat([values, ttnn.typecast(index, ttnn.float32)], dim=-1)  # [B, S, 2]
        pairs = ttnn.reshape(ttnn.all_gather(pair, dim=-1), (b, s, self.tp, 2))
        values, index = pairs[..., 0], pairs[..., 1]  # [B, S, tp] each
        best = ttnn.eq(values, ttnn.max(values, dim=-1, keepdim=True))
        token = ttnn.min(ttnn.where(best, index, float(2**24)), dim=-1)
        return ttnn.typecast(token, ttnn.uint32)

    def prefill(self, tokens: ttnn.Tensor) -> ttnn.Tensor:
        """Run the prompt [B, S] (positions 0..S-1), filling the KV cache; logits [B, S, vocab]."""
        return self.forward(tokens, None)

    def decode(self, tokens: ttnn.Tensor, pos: ttnn.Tensor) -> ttnn.Tensor:
        """One decode step: tokens [B, 1] at positions ``pos`` [B]; logits [B, 1, vocab]."""
        return self.forward(tokens, pos)

    def decode_fn(self) -> Any:
        """``step(params, caches, tokens, pos) -> (logits, caches)``: a pure decode step to jit or
        to hand to ``ttjax.inspect`` (with abstract params it compiles without weights)."""

        def step(params: Any, caches: Any, tokens: ttnn.Tensor, pos: ttnn.Tensor) -> Any:
            logits = self.forward(tokens, pos, params, caches)
            return logits, caches

        return step

    def logits_to_numpy(self, logits: ttnn.Tensor) -> np.ndarray:
        """Device logits -> host [B, S, vocab] (one copy per user, whatever the mode)."""
        if logits.shape[-1] != self.config.vocab_size:  # vocab-sharded (gather_logits=False)
            return ttnn.to_numpy(logits, mesh_composer=ttnn.ConcatMeshToTensor(self.mesh, dim=-1))
        if self.dp > 1:
            return ttnn.to_numpy(logits, mesh_composer=ttnn.ConcatMeshToTensor(self.mesh, dim=0))
        return ttnn.to_numpy(ttnn.get_device_tensors(logits)[0])
