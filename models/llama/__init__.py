"""Llama-3.x on ttjax: config, canonical weights, a Flax NNX reference, tokenizer and sampling.

Import the submodules directly (``models.llama.config``, ``models.llama.reference``, ...); this
package imports nothing heavy.
"""
