# ruff: noqa: I001  (the seed's import lines stay as the seed writes them)
"""Seed 004 as a torch-xla user runs it: their PyTorch Llama, sharded with ``mark_sharding``.

    python -m ttjax.torch_xla_run examples/seed004_torch_xla.py

Under the runner ``torch_xla`` is ttjax (``ttjax.compat.install_as_torch_xla``) and torch's
``jax`` device holds ``jax.Array``s (torchax). Each ``# seed:`` section below is one code block of
seed 004 ("Modifying Llama Models for Tensor Parallelism with Torch-XLA"), in the seed's order and
as written, with one line changed (``SEED_CHANGES``): the config is a tiny random Llama (no hub
downloads here, and 8B weights do not fit a test). ``# glue:`` lines are what the seed leaves to
the reader: ``create_mesh``, the single-device reference, the loss and the optimizer.

Checks: transformers' ``LlamaModel`` on the (1, 8) mesh against the same model on the CPU
(PCC), in bfloat16, one SGD step whose gradients come out sharded like their weights and equal
to the CPU's, and the (1, 8) -> (2, 4) re-shard of the same parameters.
"""

from __future__ import annotations

from typing import Any

#: Seed line -> the line this file runs instead (everything else of the seed's blocks is verbatim).
SEED_CHANGES = {
    'config = LlamaConfig.from_pretrained("meta-llama/Meta-Llama-3.1-8B")': (
        "config = LlamaConfig(**TINY_LLAMA)  # glue: no hub download; 2 layers, dim 64"
    ),
}

#: A Llama with seed 004's divisibility (8 heads, dims divisible by 8), small enough to test.
TINY_LLAMA = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=8,
    num_key_value_heads=8,
    max_position_embeddings=1024,
)


def _spec(t: Any) -> Any:
    import torch_xla.distributed.spmd as xs

    return xs.get_partition_spec(t)


def main() -> dict[str, Any]:
    """Run every code block of seed 004; return the numbers the test checks."""
    import torch  # glue: the seed's Step 3 uses torch without importing it

    torch.manual_seed(0)  # glue: reproducible inputs
    results: dict[str, Any] = {}

    # seed: ### 1. Device Mesh
    from torch_xla.distributed.spmd import Mesh
    import numpy as np

    num_devices = 8
    mesh_shape = (1, 8)  # (batch_dim, model_dim)
    device_ids = np.array(range(num_devices))
    mesh = Mesh(device_ids, mesh_shape, ("batch", "model"))

    # glue: the tensors the next block annotates
    import torch_xla

    weight = torch.randn(128, 64).to(torch_xla.device())
    tensor = torch.randn(4, 64).to(torch_xla.device())

    # seed: ### 2. Sharding Annotations
    import torch_xla.distributed.spmd as xs

    # Column parallel: shard first dimension (output features)
    xs.mark_sharding(weight, mesh, ("model", None))

    # Row parallel: shard second dimension (input features)
    xs.mark_sharding(weight, mesh, (None, "model"))

    # Replicated: no sharding
    xs.mark_sharding(tensor, mesh, (None, None))

    results["annotations"] = (_spec(weight), _spec(tensor))

    # seed: ### 1. MLP Layer Modifications
    def apply_mlp_sharding(mlp_layer, mesh):
        # Column parallel projections (split output dimension)
        xs.mark_sharding(mlp_layer.up_proj.weight, mesh, ("model", None))
        xs.mark_sharding(mlp_layer.gate_proj.weight, mesh, ("model", None))

        # Row parallel projection (split input dimension)
        xs.mark_sharding(mlp_layer.down_proj.weight, mesh, (None, "model"))

    # seed: ### 2. Attention Layer Modifications
    def apply_attention_sharding(attention_layer, mesh):
        # Column parallel projections (split attention heads)
        xs.mark_sharding(attention_layer.q_proj.weight, mesh, ("model", None))
        xs.mark_sharding(attention_layer.k_proj.weight, mesh, ("model", None))
        xs.mark_sharding(attention_layer.v_proj.weight, mesh, ("model", None))

        # Row parallel output projection
        xs.mark_sharding(attention_layer.o_proj.weight, mesh, (None, "model"))

    # seed: ### 3. Full Model Sharding
    def shard_llama_model(model, mesh):
        # Move model to XLA device
        model = model.to(torch_xla.device())

        # Apply sharding to each decoder layer
        for layer in model.layers:
            # MLP sharding
            xs.mark_sharding(layer.mlp.up_proj.weight, mesh, ("model", None))
            xs.mark_sharding(layer.mlp.gate_proj.weight, mesh, ("model", None))
            xs.mark_sharding(layer.mlp.down_proj.weight, mesh, (None, "model"))

            # Attention sharding
            xs.mark_sharding(layer.self_attn.q_proj.weight, mesh, ("model", None))
            xs.mark_sharding(layer.self_attn.k_proj.weight, mesh, ("model", None))
            xs.mark_sharding(layer.self_attn.v_proj.weight, mesh, ("model", None))
            xs.mark_sharding(layer.self_attn.o_proj.weight, mesh, (None, "model"))

    # seed: ### Step 1: Environment Setup
    import os
    import torch_xla
    import torch_xla.runtime as xr
    import torch_xla.distributed.spmd as xs

    def setup_tensor_parallel_environment():
        # Configure for Tenstorrent backend
        os.environ["PJRT_DEVICE"] = "TT"
        os.environ["XLA_STABLEHLO_COMPILE"] = "1"
        os.environ["ENABLE_AUTO_PARALLEL"] = "TRUE"
        os.environ["MESH_SHAPE"] = "1,8"

        # Register TT plugin (if using Tenstorrent hardware)
        from torch_xla.experimental import plugins

        class TTPjrtPlugin(plugins.DevicePlugin):
            def library_path(self):
                return "path/to/pjrt_plugin_tt.so"

        plugins.register_plugin("TT", TTPjrtPlugin())
        xr.use_spmd()

    # glue: the seed defines the set-up; a user calls it, and create_mesh from "Device Mesh"
    setup_tensor_parallel_environment()
    results["spmd"] = (xr.is_spmd(), xr.global_runtime_device_count())

    def create_mesh():
        return Mesh(device_ids, mesh_shape, ("batch", "model"))

    # glue: the single-device reference: the same random weights, kept on the CPU
    from transformers import LlamaConfig as _Config, LlamaModel as _Model

    torch.manual_seed(1)
    reference = _Model(_Config(**TINY_LLAMA))
    torch.manual_seed(1)

    # seed: ### Step 2: Model Loading and Preparation
    from transformers import LlamaModel, LlamaConfig

    # Load model configuration
    config = LlamaConfig(**TINY_LLAMA)  # glue: no hub download; 2 layers, dim 64
    model = LlamaModel(config)

    # Create device mesh
    mesh = create_mesh()

    # Apply tensor parallelism
    shard_llama_model(model, mesh)

    results["specs_1x8"] = {
        name: _spec(p) for name, p in model.layers[0].named_parameters() if "proj" in name
    }

    # seed: ### Step 3: Input Preparation
    # Prepare inputs
    batch_size = 1
    seq_len = 1024
    input_ids = torch.randint(0, config.vocab_size, (batch_size, seq_len))

    # Move to XLA device and mark sharding
    input_ids = input_ids.to(torch_xla.device())
    xs.mark_sharding(input_ids, mesh, (None, None))  # Replicated inputs

    # seed: ### Step 4: Forward Pass
    # Forward pass with tensor parallelism
    outputs = model(input_ids=input_ids)
    result = outputs.last_hidden_state

    # Move back to CPU if needed
    result_cpu = result.cpu()

    # glue: the two outputs the next block compares
    tp_output = result_cpu.detach()
    with torch.no_grad():
        single_device_output = reference(input_ids=input_ids.cpu()).last_hidden_state

    # seed: ### 1. Correctness Testing
    def compute_pcc(x, y):
        """Compute Pearson Correlation Coefficient for validation."""
        x_flat, y_flat = x.flatten(), y.flatten()
        vx, vy = x_flat - x_flat.mean(), y_flat - y_flat.mean()
        denom = vx.norm() * vy.norm()
        return (vx @ vy) / denom if denom != 0 else torch.tensor(float("nan"))

    # Compare single vs. tensor parallel outputs
    pcc = compute_pcc(tp_output, single_device_output)
    assert pcc > 0.99  # Should be very close

    results["pcc_1x8"] = float(pcc.detach())
    results["max_error_1x8"] = float((tp_output - single_device_output).abs().max())
    print(f"mesh (1, 8): PCC vs single device {float(pcc):.6f}")

    # seed: ### 2. Performance Testing
    import time
    import torch_xla.core.xla_model as xm

    # Measure inference time
    start_time = time.time()
    outputs = model(input_ids)
    xm.mark_step()  # Force XLA execution
    end_time = time.time()

    print(f"Inference time: {end_time - start_time:.3f}s")

    # seed: ### 1. Mixed Precision
    model = model.to(torch.bfloat16)  # Use bfloat16 for weights
    # Sharding still works with mixed precision

    # glue: bfloat16 weights keep their specs; the output against the CPU model in bfloat16
    results["specs_bf16"] = {
        name: (_spec(p), p.dtype) for name, p in model.layers[0].named_parameters()
    }
    with torch.no_grad():
        bf16_output = model(input_ids=input_ids).last_hidden_state.cpu().float()
        reference = reference.to(torch.bfloat16)
        bf16_reference = reference(input_ids=input_ids.cpu()).last_hidden_state.float()
    results["pcc_bf16"] = float(compute_pcc(bf16_output, bf16_reference))
    print(f"bfloat16 weights: PCC vs single device {results['pcc_bf16']:.6f}")

    # glue: train in float32 (both models hold the same bf16-rounded weights), loss and optimizer
    model = model.to(torch.float32)
    reference = reference.to(torch.float32)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    loss = model(input_ids=input_ids).last_hidden_state.pow(2).mean()
    ref_loss = reference(input_ids=input_ids.cpu()).last_hidden_state.pow(2).mean()
    ref_loss.backward()
    ref_optimizer.step()

    # seed: ### 2. Gradient Accumulation
    # Gradients are automatically synchronized across devices
    loss.backward()
    optimizer.step()

    # glue: each annotated weight's gradient sharded like it; every gradient and updated weight
    # equal to the CPU's
    ref_params = dict(reference.named_parameters())
    results["grads"] = {
        name: (
            _spec(p),
            _spec(p.grad),
            float((p.grad.cpu() - ref_params[name].grad).abs().max()),
            float((p.cpu() - ref_params[name].detach()).abs().max()),
        )
        for name, p in model.named_parameters()
    }
    results["loss"] = (float(loss.detach().cpu()), float(ref_loss.detach()))
    print(f"training step: loss {results['loss'][0]:.6f} (single device {results['loss'][1]:.6f})")

    # seed: ### 3. Dynamic Sharding
    # Reshape mesh for different parallelism strategies
    new_mesh = Mesh(device_ids, (2, 4), ("batch", "model"))
    # Re-apply sharding with new mesh

    # glue: the seed's own helpers re-shard the same parameters; no reload
    before = {name: p.cpu() for name, p in model.named_parameters()}
    for layer in model.layers:
        apply_mlp_sharding(layer.mlp, new_mesh)
        apply_attention_sharding(layer.self_attn, new_mesh)
    xs.mark_sharding(input_ids, new_mesh, (None, None))
    results["reshard_kept_values"] = all(
        torch.equal(before[name], p.cpu()) for name, p in model.named_parameters()
    )
    results["specs_2x4"] = {
        name: (_spec(p), p._elem.sharding.mesh.devices.shape)
        for name, p in model.layers[0].named_parameters()
        if "proj" in name
    }
    with torch.no_grad():
        want = reference(input_ids=input_ids.cpu()).last_hidden_state
        got = model(input_ids=input_ids).last_hidden_state.cpu()
    results["pcc_2x4"] = float(compute_pcc(got, want))
    results["max_error_2x4"] = float((got - want).abs().max())
    print(f"mesh (2, 4): PCC vs single device {results['pcc_2x4']:.6f}")
    return results


if __name__ == "__main__":
    main()
