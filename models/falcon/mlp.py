"""TtFalconMLP, written with ttjax ops exactly as in the TT-NN guide, plus its two set-ups.

Data parallel (guide section 6): the batch is sharded over the mesh, weights are replicated, and
no device talks to another. Tensor parallel (section 7): activations are replicated, both
weights are sharded on their width (last dim), and one ``all_gather`` of the gelu output on dim 3
gives every device the full hidden activation before the second linear.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ttjax as ttnn


class TtFalconMLP:
    """Falcon's MLP on a mesh; ``tensor_parallel=True`` inserts the guide's all_gather."""

    def __init__(self, parameters: Any, tensor_parallel: bool = False) -> None:
        self.dense_h_to_4h_weights = parameters.dense_h_to_4h.weight
        self.dense_4h_to_h_weights = parameters.dense_4h_to_h.weight
        self.tensor_parallel = tensor_parallel

    def __call__(self, x: ttnn.Tensor) -> ttnn.Tensor:
        ff1_linear = ttnn.linear(x, self.dense_h_to_4h_weights)
        gelu = ttnn.gelu(ff1_linear)
        if self.tensor_parallel:
            # Invoke CCL Ring All-Gather on gelu before passing to ff2_linear
            gelu = ttnn.all_gather(gelu, dim=3, num_links=1)
        return ttnn.linear(gelu, self.dense_4h_to_h_weights)


def setup_data_parallel(
    mesh_device: ttnn.MeshDevice, model: Any, hidden_states: np.ndarray, dtype: ttnn.DataType
) -> tuple[TtFalconMLP, ttnn.Tensor]:
    """Guide section 6.1: batch sharded on dim 0, parameters replicated."""
    with ttnn.distribute(ttnn.ShardTensorToMesh(mesh_device, dim=0)):
        x = ttnn.from_torch(hidden_states, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh_device)
    with ttnn.distribute(ttnn.ReplicateTensorToMesh(mesh_device)):
        parameters = ttnn.model_preprocessing.preprocess_model_parameters(
            initialize_model=lambda: model, device=mesh_device, dtype=dtype
        )
    return TtFalconMLP(parameters), x


def setup_tensor_parallel(
    mesh_device: ttnn.MeshDevice, model: Any, hidden_states: np.ndarray, dtype: ttnn.DataType
) -> tuple[TtFalconMLP, ttnn.Tensor]:
    """Guide section 7.1: activations replicated, parameters sharded on the width (dim -1)."""
    with ttnn.distribute(ttnn.ReplicateTensorToMesh(mesh_device)):
        x = ttnn.from_torch(hidden_states, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh_device)
    with ttnn.distribute(ttnn.ShardTensorToMesh(mesh_device, dim=-1)):
        parameters = ttnn.model_preprocessing.preprocess_model_parameters(
            initialize_model=lambda: model, device=mesh_device, dtype=dtype
        )
    return TtFalconMLP(parameters, tensor_parallel=True), x


def compose_output(mesh_device: ttnn.MeshDevice, out: ttnn.Tensor, mode: str) -> np.ndarray:
    """Read the result back as the guide does: concat the batch (DP, dim 0) or the width-sharded
    output columns (TP, dim 3)."""
    dim = 0 if mode == "dp" else 3
    with ttnn.distribute(ttnn.ConcatMeshToTensor(mesh_device, dim=dim)):
        return ttnn.to_numpy(out).astype(np.float32)
