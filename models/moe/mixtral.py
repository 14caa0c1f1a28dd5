"""Mixtral: the ttjax Llama decoder with an MoE layer in place of each dense MLP.

Attention runs data-parallel (each device holds whole users and their KV cache, TtLlama's
``mode="dp"``); each MoE layer sends each device's tokens to the devices that own their experts
over the ``ep`` mesh axis and back, two ``all_to_all`` calls per layer and no gathering of tokens
(DeepSeek-V3's "DP attention + EP experts" inference layout). Checkpoints are Hugging Face
``MixtralForCausalLM`` folders (``block_sparse_moe.gate`` and ``experts.{j}.w1/w2/w3``).

>>> config, weights = load_mixtral_checkpoint(folder)
>>> model = TtMixtral(config, weights, mesh, batch=8)          # 1x8: 8 experts, one per device
>>> result = Generator([model], mesh).generate(prompt, max_new_tokens=8)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import ttjax as ttnn
from models.llama.config import LlamaConfig
from models.llama.model import TtLlama
from models.llama.sharding import WeightRecipe
from models.moe.config import MoEConfig
from models.moe.layer import MoELayer, MoEParams
from ttjax.errors import ConfigError


@dataclass(frozen=True)
class MixtralConfig(LlamaConfig):
    """A Llama config whose MLPs are mixtures of ``n_experts`` SwiGLU experts of ``ffn_dim``.

    ``capacity_factor=None`` is Mixtral's router (no capacity limit, nothing dropped).
    """

    n_experts: int = 8
    top_k: int = 2
    capacity_factor: float | None = None

    @property
    def moe(self) -> MoEConfig:
        return MoEConfig(
            dim=self.dim,
            ffn_dim=self.ffn_dim,
            n_experts=self.n_experts,
            top_k=self.top_k,
            capacity_factor=self.capacity_factor,
            normalize_gates=True,
        )

    def num_params(self) -> int:
        dense = super().num_params()
        mlp = 3 * self.dim * self.ffn_dim
        return dense + self.n_layers * ((self.n_experts - 1) * mlp + self.dim * self.n_experts)


def tiny_mixtral_config(**changes: Any) -> MixtralConfig:
    """The test model: 2 layers, 8 experts of 64, top-2, dims that suit 1x8 and 2x4 meshes."""
    base = MixtralConfig(
        name="tiny-mixtral",
        vocab_size=256,
        dim=64,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        ffn_dim=64,
        rope_theta=1e6,
        max_seq_len=32,
        n_experts=8,
        top_k=2,
    )
    return MixtralConfig(**{**base.__dict__, **changes})


MIXTRAL_8X7B = MixtralConfig(
    name="mixtral-8x7b",
    vocab_size=32000,
    dim=4096,
    n_layers=32,
    n_heads=32,
    n_kv_heads=8,
    ffn_dim=14336,
    rope_theta=1e6,
    max_seq_len=2048,
    n_experts=8,
    top_k=2,
)


def mixtral_config_from_hf(raw: dict[str, Any], name: str = "mixtral") -> MixtralConfig:
    """A Hugging Face ``config.json`` of ``MixtralForCausalLM`` -> :class:`MixtralConfig`."""
    if raw.get("model_type") != "mixtral":
        raise ConfigError(
            f"config.json has model_type={raw.get('model_type')!r}, not 'mixtral'.\n"
            "fix: load Llama checkpoints with models.llama.weights.load_hf_checkpoint."
        )
    hf = {k: v for k, v in raw.items() if not (k == "head_dim" and v is None)}
    base = LlamaConfig.from_hf(hf, name=raw.get("_name_or_path") or name)
    return MixtralConfig(
        **base.__dict__,
        n_experts=int(raw["num_local_experts"]),
        top_k=int(raw["num_experts_per_tok"]),
    )


def _moe_prefix(i: int) -> str:
    return f"model.layers.{i}.block_sparse_moe."


def moe_weights_of_layer(weights: dict[str, np.ndarray], i: int, config: MixtralConfig) -> Any:
    """Layer ``i``'s HF expert tensors -> the MoE layer's ``{router, w_gate, w_up, w_down}``.

    HF stores ``gate.weight`` [E, D] and per expert ``w1`` (gate) and ``w3`` (up) [F, D] and
    ``w2`` (down) [D, F], all ``[out, in]``; the layer wants TT-NN's ``[in, out]``.
    """
    p = _moe_prefix(i)
    experts = range(config.n_experts)

    def stack(name: str) -> np.ndarray:
        return np.stack([np.asarray(weights[f"{p}experts.{j}.{name}.weight"]).T for j in experts])

    return {
        "router": np.asarray(weights[p + "gate.weight"]).T,
        "w_gate": stack("w1"),
        "w_up": stack("w3"),
        "w_down": stack("w2"),
    }


def load_mixtral_checkpoint(path: str | Path) -> tuple[MixtralConfig, dict[str, np.ndarray]]:
    """Read a Hugging Face Mixtral folder (``config.json`` + ``*.safetensors``) as float32."""
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy for safetensors)
    from safetensors import safe_open

    folder = Path(path)
    config = mixtral_config_from_hf(json.loads((folder / "config.json").read_text()), folder.name)
    weights: dict[str, np.ndarray] = {}
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{folder}: no *.safetensors files.\nfix: point at a saved model folder.")
    for file in files:
        with safe_open(file, framework="numpy") as f:
            for name in f.keys():
                weights[name] = np.asarray(f.get_tensor(name)).astype(np.float32, copy=False)
    missing = [
        k
        for i in range(config.n_layers)
        for k in [_moe_prefix(i) + "gate.weight"]
        + [
            f"{_moe_prefix(i)}experts.{j}.{w}.weight"
            for j in range(config.n_experts)
            for w in ("w1", "w2", "w3")
        ]
        if k not in weights
    ]
    if missing:
        raise ConfigError(
            f"{folder}: {len(missing)} Mixtral expert tensors are missing, e.g. {missing[:3]}.\n"
            "fix: save the checkpoint with transformers' MixtralForCausalLM.save_pretrained."
        )
    return config, weights


class _NoDenseMLP(dict):  # type: ignore[type-arg]
    """The weight dict as TtLlama reads it, with no dense MLP (the MoE layer holds the experts)."""

    def __missing__(self, key: str) -> None:
        if ".mlp." in key:
            return None
        raise KeyError(key)


class TtMixtral(TtLlama):
    """TtLlama (data-parallel attention) whose MLPs are :class:`MoELayer` over ``ep_axis``.

    >>> model = TtMixtral(config, weights, mesh_2x4, batch=8, ep_axis=1)  # EP 4, DP 2 for experts
    """

    def __init__(
        self,
        config: MixtralConfig,
        weights: dict[str, np.ndarray] | None,
        mesh_device: ttnn.MeshDevice,
        *,
        mode: str = "dp",
        ep_axis: int = 1,
        **kwargs: Any,
    ) -> None:
        if mode != "dp":
            raise ConfigError(
                f"TtMixtral: mode={mode!r}; the MoE layers need each device to own its tokens.\n"
                "fix: mode='dp' (attention data-parallel, experts split over ep_axis)."
            )
        if kwargs.get("scan_layers"):
            raise ConfigError(
                "TtMixtral: scan_layers=True is not supported (each MoE layer has its own "
                "routing statistics).\nfix: scan_layers=False."
            )
        self.moe = MoELayer(
            config.moe, mesh_device, ep_axis=ep_axis, dtype=kwargs.get("dtype", ttnn.float32)
        )
        super().__init__(config, weights, mesh_device, mode=mode, **kwargs)

    def _layer_specs(self, w: dict[str, np.ndarray], i: int) -> dict[str, WeightRecipe]:
        specs = super()._layer_specs(_NoDenseMLP(w), i)
        for name in ("w_in", "w_up", "w_out"):
            specs[name] = WeightRecipe.absent()  # the experts live in the MoE layer: see _load
        return specs

    def _load(self, w: dict[str, np.ndarray]) -> None:
        super()._load(w)
        for i, layer in enumerate(self.params["layers"]):
            layer["moe"] = (
                self.moe.abstract_params()
                if self.abstract
                else self.moe.weights_to_device(moe_weights_of_layer(w, i, self.config))
            )

    def _mlp(self, layer: dict[str, Any], x: ttnn.Tensor) -> ttnn.Tensor:
        params: MoEParams = layer["moe"]
        return self.moe(params, x).out
