"""tt-metal's Mixtral 8x7B for a T3000 (models/demos/t3000/mixtral8x7b/tt), at tiny sizes.

Mirrors test_mixtral_mlp.py and test_mixtral_moe.py: ``TtModelArgs`` with dummy weights (its
reference ``Transformer`` at the sizes below: a subclass shrinks the class attributes, tt-metal's
class is untouched), the expert MLP and the MoE layer in decode (32 rows), compared with the
plain-torch reference that ships beside it (``mixtral8x7b/reference``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tests.real_models.harness import pcc

# Bits of magnitude per value of Tenstorrent's block floats (16 values share one exponent).
MAG_BITS = {"bfloat8_b": 7, "bfloat4_b": 3}
# The dtypes tt-metal's tests store the expert weights in (test_mixtral_mlp.py).
EXPERT_DTYPES = {"w1": "bfloat4_b", "w2": "bfloat8_b", "w3": "bfloat4_b"}

TINY = {
    # Mixtral's attention hard-codes 4 query heads and 1 KV head per device (32 and 8 over 8
    # devices), and its program configs (checked when each matmul runs, as TT-NN does) need
    # Mixtral's own head_dim 128 (ROT_MAT_MM_PROGCFG reads K = head_dim in blocks of 4 tiles)
    # and so its dim 4096; the experts and the vocabulary stay small
    "dim": 4096,
    # the expert's w2 program config (FF2_OUTPUT_PROGCFG) reads K in blocks of in0_block_w = 7
    # tiles and w1/w3 write 7 tiles per core (per_core_N): TT-NN's matmul wants K and N to be
    # whole multiples of 7 tiles, so 56 tiles (Mixtral's 14336 is 448)
    "hidden_dim": 1792,
    "n_layers": 1,
    "n_heads": 32,
    "n_kv_heads": 8,
    "head_dim": 128,
    "vocab_size": 1024,
    # the reference Transformer reads it; TtModelArgs lacks it at 821525122af5 (its dummy-weight
    # path fails without it)
    "is_mixture_of_experts": True,
}


def blockfloat_round(x: np.ndarray, mag_bits: int, group: int = 16) -> np.ndarray:
    """Round to Tenstorrent block floats along the last dim (shared largest exponent per 16
    values, sign plus ``mag_bits`` bits each, round half to even, saturating): exact rounding,
    equal to ``tests/_reference.blockfloat_quantize`` (TT-NN's bit-level rule) on normal values
    bfloat16 holds; TT-NN first drops the bits shifted out by the exponent gap."""
    x = np.asarray(x, np.float64)
    g = x.reshape(*x.shape[:-1], x.shape[-1] // group, group)
    _, e = np.frexp(np.where(g == 0, 0.0, g))
    e = np.where(g == 0, np.iinfo(np.int32).min, e).max(axis=-1, keepdims=True)
    e = np.where(e == np.iinfo(np.int32).min, 0, e)
    step = np.ldexp(1.0, e - mag_bits)
    limit = 2**mag_bits - 1
    return (np.clip(np.round(g / step), -limit, limit) * step).reshape(x.shape)


def stored_weights(state: dict[str, Any]) -> dict[str, Any]:
    """Expert weights as TT-NN stores them: transposed to [K, N], rounded to EXPERT_DTYPES."""
    import torch

    out = {}
    for k, v in state.items():
        name = k.split(".")[-2]
        if name in EXPERT_DTYPES:
            bits = MAG_BITS[EXPERT_DTYPES[name]]
            v = torch.tensor(blockfloat_round(v.T.double().numpy(), bits).T, dtype=v.dtype)
        out[k] = v
    return out


@dataclass
class MixtralSetup:
    mesh: Any
    args: Any
    state_dict: dict[str, Any]


def setup(mesh: Any) -> MixtralSetup:
    """Tiny ``TtModelArgs`` (dummy weights) and its state dict on ``mesh`` (8 devices)."""
    import torch

    from models.demos.t3000.mixtral8x7b.tt.model_config import TtModelArgs

    tiny = type("TinyMixtralArgs", (TtModelArgs,), dict(TINY))
    args = tiny(mesh, dummy_weights=True, max_seq_len=128, max_batch_size=32)
    # The reference builds its Linears with torch's skip_init (uninitialised memory): draw the
    # values here, as nn.Linear would (uniform +-1/sqrt(fan_in)); norm weights near 1.
    gen = torch.Generator().manual_seed(0)
    state = {}
    for k, v in args.load_state_dict().items():
        if v.dim() >= 2:
            bound = v.shape[-1] ** -0.5
            state[k] = (torch.rand(v.shape, generator=gen) * 2 - 1) * bound
        else:
            state[k] = 1 + 0.1 * torch.randn(v.shape, generator=gen)
    return MixtralSetup(mesh, args, state)


def _experts(s: MixtralSetup) -> Any:
    import ttnn

    from models.demos.t3000.mixtral8x7b.tt.mixtral_mlp import TtMixtralMLP

    dtypes = {"w1": ttnn.bfloat4_b, "w2": ttnn.bfloat8_b, "w3": ttnn.bfloat4_b}
    return TtMixtralMLP(
        mesh_device=s.mesh, state_dict=s.state_dict, args=s.args, layer_num=0, dtypes=dtypes
    )


def _decode_input(s: MixtralSetup, x: Any) -> Any:
    import ttnn

    return ttnn.from_torch(
        x,
        device=s.mesh,
        dtype=ttnn.bfloat16,
        memory_config=ttnn.L1_MEMORY_CONFIG,
        layout=ttnn.TILE_LAYOUT,
        mesh_mapper=ttnn.ReplicateTensorToMesh(s.mesh),
    )


def run_mlp(s: MixtralSetup, rounded: bool = True, seed: int = 0) -> float:
    """test_mixtral_mlp.py: expert 0 of layer 0 (each device holds one expert). With ``rounded``
    the reference holds the weights as TT-NN stores them (bfloat4_b/bfloat8_b), which separates
    ttjax's arithmetic from the format's loss (at random weights bfloat4_b alone costs ~0.01 PCC)."""
    import torch
    import ttnn

    from models.demos.t3000.mixtral8x7b.reference.model import FeedForward

    ref = FeedForward(args=s.args)
    prefix = "layers.0.feed_forward.experts.0."
    part = {k[len(prefix) :]: v for k, v in s.state_dict.items() if k.startswith(prefix)}
    ref.load_state_dict(stored_weights(part) if rounded else part)
    x = torch.rand(1, 1, 32, s.args.dim, generator=torch.Generator().manual_seed(seed)) * 2 - 1
    out = _experts(s)(_decode_input(s, x))
    got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(s.mesh, dim=0))[0]
    with torch.no_grad():
        return pcc(ref(x)[0], got)


def run_moe(s: MixtralSetup, rounded: bool = True, seed: int = 0) -> float:
    """test_mixtral_moe.py: gate + top-2 of 8 experts, one expert per device, summed (``rounded``:
    as in :func:`run_mlp`), over the tokens whose top-2 choice is clear (at least 24 of 32)."""
    import torch
    import ttnn

    from models.demos.t3000.mixtral8x7b.reference.model import FeedForward
    from models.demos.t3000.mixtral8x7b.reference.moe import MoeLayer
    from models.demos.t3000.mixtral8x7b.tt.mixtral_ccl import TT_CCL
    from models.demos.t3000.mixtral8x7b.tt.mixtral_moe import TtMoeLayer

    a = s.args
    ref = MoeLayer(
        experts=[FeedForward(args=a) for _ in range(8)],
        gate=torch.nn.Linear(a.dim, 8, bias=False),
        moe_args=a,
    )
    prefix = "layers.0.feed_forward."
    part = {k[len(prefix) :]: v for k, v in s.state_dict.items() if k.startswith(prefix)}
    ref.load_state_dict(stored_weights(part) if rounded else part)
    moe = TtMoeLayer(
        mesh_device=s.mesh,
        tt_ccl=TT_CCL(s.mesh),
        state_dict=s.state_dict,
        experts=_experts(s),
        args=a,
        layer_num=0,
        dtype=ttnn.bfloat8_b,
    )
    x = torch.rand(32, 1, a.dim, generator=torch.Generator().manual_seed(seed)) * 2 - 1
    out = moe(_decode_input(s, x.view(1, 1, 32, a.dim)))
    got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(s.mesh, dim=0))[0]
    with torch.no_grad():
        want = ref(x).view(32, a.dim)
        # TT-NN routes on bfloat16 gate logits: a token whose 2nd and 3rd experts are within
        # 1% of its logit range may pick either, so only decisively routed tokens are compared
        logits = (x.view(32, a.dim) @ part["gate.weight"].T).sort(dim=-1, descending=True).values
        decisive = (logits[:, 1] - logits[:, 2]) > 0.01 * (logits[:, 0] - logits[:, -1])
    if int(decisive.sum()) < 24:
        raise AssertionError(f"only {int(decisive.sum())} of 32 tokens are routed decisively")
    return pcc(want[decisive], got.reshape(32, a.dim)[decisive])


def run_model(s: MixtralSetup, steps: int = 3, rounded: bool = True) -> float:
    """test_mixtral_model.py: TtTransformer (1 layer here), 32 users decoding from position 0 with
    teacher forcing; the worst step's PCC of the logits against the reference Transformer."""
    import torch
    import ttnn

    from models.demos.t3000.mixtral8x7b.reference.model import Transformer
    from models.demos.t3000.mixtral8x7b.tt.mixtral_common import prepare_inputs_ttnn
    from models.demos.t3000.mixtral8x7b.tt.mixtral_model import TtTransformer

    a, batch = s.args, 32
    ref = Transformer(args=a)
    ref.load_state_dict(stored_weights(s.state_dict) if rounded else s.state_dict)
    ref.eval()
    model = TtTransformer(
        mesh_device=s.mesh,
        state_dict=s.state_dict,
        args=a,
        layers=list(range(a.n_layers)),
        start_pos_ids=[0] * batch,
        dtype=ttnn.bfloat8_b,
    )
    emb = s.state_dict["tok_embeddings.weight"]
    tokens = torch.randint(0, a.vocab_size, (batch,), generator=torch.Generator().manual_seed(0))
    worst = 1.0
    for pos in range(steps):
        x = emb[tokens].view(batch, 1, a.dim)
        out = model(prepare_inputs_ttnn(x, a.dim, s.mesh), [pos] * batch)
        got = ttnn.to_torch(out, mesh_composer=ttnn.ConcatMeshToTensor(s.mesh, dim=0))[0]
        got = got.squeeze(1).view(32, 1, -1)[:batch, :, : a.vocab_size].float()
        with torch.no_grad():
            want = ref(x, torch.LongTensor([pos])).float()
        worst = min(worst, pcc(want.view(batch, -1), got.view(batch, -1)))
        tokens = want.view(batch, -1).argmax(-1)  # teacher forcing, as the tt-metal test
    return worst


def cases() -> list[tuple[str, Any, Callable[[Any], float]]]:
    """(module, set-up key, runner) rows for report.py."""
    return [
        ("mixtral8x7b mlp (expert), decode", "mixtral", run_mlp),
        (
            "mixtral8x7b mlp (expert), decode, vs float weights",
            "mixtral",
            lambda s: run_mlp(s, False),
        ),
        ("mixtral8x7b moe, decode", "mixtral", run_moe),
        ("mixtral8x7b moe, decode, vs float weights", "mixtral", lambda s: run_moe(s, False)),
        ("mixtral8x7b model (1 layer), decode", "mixtral", run_model),
    ]
