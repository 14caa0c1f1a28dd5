"""Mixture-of-experts on ttjax: a top-k routed SwiGLU MoE layer over an expert-parallel mesh axis.

``config`` (the layer's shape and routing rule), ``layer`` (the ttjax layer: router, capacity,
one ``all_to_all`` to dispatch and one to combine), ``reference`` (a dense single-device JAX
twin), ``mixtral`` (Llama decode with MoE layers, HF Mixtral checkpoints), ``train`` (a tiny MoE
language model trained with optax) and ``picture`` (tokens per expert per device). Import the
submodules directly; this package imports nothing heavy.
"""
