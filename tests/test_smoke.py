import numpy as np

import ttjax as ttnn


def test_doc_example_sharding(n300):
    x = np.zeros((1, 1, 32, 64), np.float32)
    x[..., :32] = 1.0
    x[..., 32:] = 2.0
    mapper = ttnn.create_mesh_mapper(
        n300, ttnn.MeshMapperConfig(placements=[ttnn.PlacementReplicate(), ttnn.PlacementShard(3)])
    )
    t = ttnn.from_torch(x, mesh_mapper=mapper, layout=ttnn.TILE_LAYOUT, device=n300)
    shards = ttnn.get_device_tensors(t)
    assert t.shape == (1, 1, 32, 32)
    assert np.all(ttnn.to_numpy(shards[0]) == 1.0)
    assert np.all(ttnn.to_numpy(shards[1]) == 2.0)
