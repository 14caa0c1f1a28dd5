"""Independent numpy references for TT-NN's distribution semantics (loops, no ttjax internals).

Like JAX's ``shmap_reference``: walk every mesh coordinate, slice with numpy, apply the op per
device. These follow TT-NN's documented algorithm (ttnn_api.md sections 3.2-3.3) directly.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from models.llama.reference import LlamaReference


def coords(mesh_shape: Sequence[int]) -> list[tuple[int, ...]]:
    """Mesh coordinates in row-major order."""
    return list(itertools.product(*[range(s) for s in mesh_shape]))


def shard(
    x: np.ndarray, mesh_shape: Sequence[int], dims: Sequence[int | None]
) -> dict[tuple[int, ...], np.ndarray]:
    """TT-NN mapping with one entry per mesh dim: ``dims[i]`` is the tensor dim split along mesh
    dim ``i`` (None replicates). Returns each coordinate's shard."""
    out = {}
    for c in coords(mesh_shape):
        piece = x
        for i, d in enumerate(dims):
            if d is not None:
                piece = np.split(piece, mesh_shape[i], axis=d)[c[i]]
        out[c] = piece
    return out


def shard_1d(
    x: np.ndarray, mesh_shape: Sequence[int], dim: int
) -> dict[tuple[int, ...], np.ndarray]:
    """ShardTensorToMesh: split ``dim`` into N pieces; piece k goes to the k-th device row-major."""
    n = int(np.prod(mesh_shape))
    pieces = np.split(x, n, axis=dim)
    return {c: pieces[k] for k, c in enumerate(coords(mesh_shape))}


def concat(
    shards: Sequence[np.ndarray], dist_shape: Sequence[int], dims: Sequence[int]
) -> np.ndarray:
    """TT-NN composition: shards in row-major order over ``dist_shape``; concatenate along
    ``dims[-1]`` within the innermost mesh dim first, then outward."""
    arr = np.empty(len(shards), dtype=object)
    for i, s in enumerate(shards):
        arr[i] = s
    grid = arr.reshape(tuple(dist_shape))
    for axis in reversed(range(len(dist_shape))):
        d = dims[axis]
        moved = np.moveaxis(grid, axis, -1)
        flat = moved.reshape(-1, moved.shape[-1])
        merged = np.empty(flat.shape[0], dtype=object)
        for r in range(flat.shape[0]):
            merged[r] = np.concatenate(list(flat[r]), axis=d)
        grid = merged.reshape(moved.shape[:-1])
    return grid.item() if grid.ndim == 0 else grid


def per_device(
    fn: Callable[..., np.ndarray], *inputs: dict[tuple[int, ...], np.ndarray]
) -> dict[tuple[int, ...], np.ndarray]:
    """Apply ``fn`` on every device's shards."""
    return {c: fn(*[inp[c] for inp in inputs]) for c in inputs[0]}


def pcc(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two arrays (TT-NN's accuracy metric)."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    if np.array_equal(a, b):
        return 1.0
    return float(np.corrcoef(a, b)[0, 1])


def dist_coords(mesh_shape: Sequence[int]) -> list[tuple[int, ...]]:
    """Alias of :func:`coords` used where the order itself is under test: last dim fastest."""
    out = []
    n = int(np.prod(mesh_shape))
    for k in range(n):
        c = []
        for s in reversed(mesh_shape):
            c.append(k % s)
            k //= s
        out.append(tuple(reversed(c)))
    return out


def tile_padded(shape: Sequence[int], tile: int = 32) -> tuple[int, ...]:
    """TT-NN's padded_shape in TILE layout: the last two dims rounded up to ``tile``."""
    s = list(shape)
    for k in range(max(0, len(s) - 2), len(s)):
        s[k] = ((s[k] + tile - 1) // tile) * tile
    return tuple(s)


def blockfloat_quantize(x: np.ndarray, mag_bits: int, group: int = 16) -> np.ndarray:
    """Tenstorrent block floats, one scalar at a time: every ``group`` consecutive values of the
    last dim share the largest exponent among them; each value keeps a sign and ``mag_bits`` bits
    of magnitude relative to it (round to nearest even, saturating). Returns float64 values."""
    import math

    x = np.asarray(x, np.float64)
    flat = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    out = np.zeros_like(flat)
    limit = 2**mag_bits - 1
    for r in range(flat.shape[0]):
        for g0 in range(0, flat.shape[1], group):
            vals = [float(v) for v in flat[r, g0 : g0 + group]]
            # frexp: v = f * 2**e with 0.5 <= |f| < 1. Zeros carry no exponent (as in IEEE,
            # where a zero's biased exponent is the smallest), so they never set the shared one.
            emax = max((math.frexp(v)[1] for v in vals if v != 0), default=0)
            step = 2.0 ** (emax - mag_bits)
            for i, v in enumerate(vals):
                m = min(max(round(v / step), -limit), limit)
                out[r, g0 + i] = m * step
    return out.reshape(x.shape)


def blockfloat_encode_frexp(xp: Any, x: Any, mag_bits: int, group: int = 16) -> tuple[Any, Any]:
    """Block-float encoding as ttjax first wrote it, per element with ``frexp`` and ``ldexp``
    (numpy or jax.numpy): the (int8 mantissas, uint8 biased exponents) that ``_blockfloat.encode``
    must reproduce bit for bit. ``x``: float32, last dim a multiple of ``group``."""
    g = xp.reshape(x, (*x.shape[:-1], x.shape[-1] // group, group))
    _, e = xp.frexp(g)
    e = xp.where(g == 0, -127, e)
    emax = xp.clip(xp.max(e, axis=-1, keepdims=True), -127, 128)
    shifted = xp.ldexp(g, xp.broadcast_to(mag_bits - emax, g.shape).astype(xp.int32))
    limit = 2**mag_bits - 1
    m = xp.clip(xp.round(shifted), -limit, limit).astype(xp.int8)
    return xp.reshape(m, x.shape), xp.reshape((emax + 127).astype(xp.uint8), emax.shape[:-1])


def llama_teacher_forced(
    config: Any, weights: dict[str, np.ndarray], tokens: np.ndarray, prompt_len: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The Flax reference on a whole token sequence: the prefill logits of its first
    ``prompt_len`` tokens, then the [B, vocab] logits of each teacher-forced decode step (token
    ``t`` at position ``t``, for every ``t`` from ``prompt_len`` up to the last token, excluded)."""
    model = LlamaReference(config, weights)
    fns = model.jitted()
    b = tokens.shape[0]
    prefill, cache = fns.prefill(tokens[:, :prompt_len], model.init_cache(b))
    steps = []
    for t in range(prompt_len, tokens.shape[1] - 1):
        logits, cache = fns.decode(tokens[:, t : t + 1], np.full((b,), t, np.int32), cache)
        steps.append(np.asarray(logits)[:, 0])
    return np.asarray(prefill), steps


def save_tiny_hf_llama(folder: Any) -> None:
    """A tiny random transformers ``LlamaForCausalLM`` (GQA, 2 layers) saved to ``folder``."""
    import torch
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)


_COLLECTIVE_OP = re.compile(
    r'"stablehlo\.(all_reduce|reduce_scatter)"[^\n]*\n[^\n]*\n\s*%\S+ = stablehlo\.(\w+)'
)
# Compiled HLO (``.compile().as_text()``, after SPMD partitioning): a collective names its
# reduction computation (to_apply=%name), whose ROOT instruction says what it does.
_HLO_COLLECTIVE = re.compile(r"\b(all-reduce|reduce-scatter)(?:-start)?\(.*?to_apply=(%[\w.\-]+)")
_HLO_COMPUTATION = re.compile(r"^(%[\w.\-]+) [^\n]*\{\n(.*?)^\}", re.M | re.S)
_HLO_ROOT = re.compile(r"ROOT %\S+ = \S+ ([\w\-]+)\(")


def unordered_sums(text: str) -> list[str]:
    """The all-reduces and reduce-scatters that add, in a lowered program's StableHLO text
    (``jax.jit(f).lower(...).as_text()``) or in its compiled HLO (``.compile().as_text()``,
    which also holds the collectives XLA's partitioner inserts for global arrays): XLA picks
    their order, so under ``ttjax.numerics("deterministic")`` a program should have none."""
    if "stablehlo." in text:
        return [kind for kind, op in _COLLECTIVE_OP.findall(text) if op == "add"]
    roots = {}
    for name, body in _HLO_COMPUTATION.findall(text):
        root = _HLO_ROOT.search(body)
        roots[name] = root.group(1) if root else ""
    return [
        kind.replace("-", "_")
        for kind, region in _HLO_COLLECTIVE.findall(text)
        if roots.get(region) == "add"
    ]


def assert_trees_close(got: Any, want: Any, rtol: float = 1e-5, scale_atol: float = 1e-6) -> None:
    """Leaf by leaf ``allclose`` of two pytrees, ``atol`` relative to each leaf's largest value;
    a failure names the leaf's path."""
    import jax

    for (path, g), w in zip(
        jax.tree_util.tree_leaves_with_path(got), jax.tree_util.tree_leaves(want), strict=True
    ):
        w = np.asarray(w)
        np.testing.assert_allclose(
            np.asarray(g),
            w,
            rtol=rtol,
            atol=scale_atol * float(np.max(np.abs(w))),
            err_msg=jax.tree_util.keystr(path),
        )
