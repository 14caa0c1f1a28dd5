"""``nlp_create_qkv_heads(num_kv_heads=0)``: tt_dit's Wan attention splits q, k and v each on its
own; TT-NN's ``nlp_create_qkv_heads.cpp`` takes head_dim = width / num_heads, k and v empty."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import mesh_of

import ttjax as ttnn


def test_zero_kv_heads_gives_the_q_heads_and_empty_k_v():
    mesh = mesh_of((1, 2))
    x = np.random.default_rng(0).standard_normal((1, 1, 64, 4 * 32)).astype(np.float32)
    t = ttnn.from_torch(x, layout=ttnn.TILE_LAYOUT, device=mesh)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads(
        t, num_heads=4, num_kv_heads=0, transpose_k_heads=False
    )
    assert tuple(k.shape) == tuple(v.shape) == (1, 0, 64, 32)
    want = x[:, 0].reshape(1, 64, 4, 32).transpose(0, 2, 1, 3)
    for part in ttnn.get_device_tensors(q):
        np.testing.assert_array_equal(ttnn.to_numpy(part), want)
    with pytest.raises(ttnn.ShapeMismatchError, match="not divisible"):
        ttnn.experimental.nlp_create_qkv_heads(t, num_heads=3, num_kv_heads=0)
