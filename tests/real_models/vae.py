"""tt_dit's VAE blocks (tt-metal's ``models/experimental/tt_dit``) on ttjax against diffusers.

    TT_METAL_HOME=/tmp/ttm-full .venv-ttmetal/bin/python -m tests.real_models.vae [--case NAME]

Each case builds one of tt_dit's VAE modules from a diffusers module with random weights (its
``from_torch`` / ``torch_ref`` constructor, as tt_dit's own tests do), runs both on the same
input, and prints the PCC of tt_dit's output (bfloat16 on the mesh) against diffusers' (float32):
SD3.5-Large's ``ResnetBlock`` and whole ``VAEDecoder`` (group norm, conv2d, attention, upsample;
tensor parallel over a 1x4 mesh, as ``test_vae_sd35.py`` runs them), Mochi's ``ResBlock`` (group
norm, context-parallel causal ``conv3d`` with replicate padding over a 2x2 mesh) and Wan 2.1's
``WanResidualBlock`` (RMS norm, causal ``conv3d``). Sizes are small (latents of 16 to 32) so a run
takes minutes on two cores; the channel widths are the released models'.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from tests.real_models import harness


class _AnySize(dict[Any, Any]):
    """tt_dit looks some blocking choices up in tables of the released sizes only (Conv2d's DRAM
    slice count, Mochi ResBlock's group-norm ``num_out_blocks``); at this run's smaller sizes a
    missing entry is ``default`` (1 slice, one output block: they change no values)."""

    def __init__(self, table: Any = (), default: Any = 1) -> None:
        super().__init__(table)
        self.default = default

    def __missing__(self, key: Any) -> Any:
        return self.default


def _sd35_setup(mesh_shape: tuple[int, int] = (1, 4)) -> tuple[Any, Any, Any]:
    import ttnn

    from models.experimental.tt_dit.layers.conv2d import Conv2d
    from models.experimental.tt_dit.parallel.config import ParallelFactor, VAEParallelConfig
    from models.experimental.tt_dit.parallel.manager import CCLManager

    Conv2d.slice_params[mesh_shape] = _AnySize(Conv2d.slice_params.get(mesh_shape, {}))
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(*mesh_shape))
    ccl = CCLManager(mesh, topology=ttnn.Topology.Linear)
    config = VAEParallelConfig(tensor_parallel=ParallelFactor(factor=mesh_shape[1], mesh_axis=1))
    return mesh, ccl, config


def _nhwc_on_mesh(mesh: Any, x: Any, *, shard: bool) -> Any:
    import ttnn

    return ttnn.from_torch(
        x.permute(0, 2, 3, 1),
        dtype=ttnn.bfloat16,
        device=mesh,
        layout=ttnn.TILE_LAYOUT if shard else ttnn.ROW_MAJOR_LAYOUT,
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1)
        if shard
        else ttnn.ReplicateTensorToMesh(mesh),
    )


def sd35_resnet_block(in_ch: int = 256, out_ch: int = 128, size: int = 64) -> str:
    """SD3.5-Large VAE's ResnetBlock (``test_sd35_vae_resnet_block``'s 256 -> 128 channels, 32
    groups; 64x64 here, 1024x1024 there) against diffusers' ResnetBlock2D."""
    import torch
    import ttnn
    from diffusers.models.resnet import ResnetBlock2D

    from models.experimental.tt_dit.models.vae import vae_sd35
    from models.experimental.tt_dit.parallel.config import vae_all_gather

    torch.manual_seed(0)
    ref = ResnetBlock2D(
        in_channels=in_ch, out_channels=out_ch, temb_channels=None, groups=32
    ).eval()
    mesh, ccl, config = _sd35_setup()
    tt = vae_sd35.ResnetBlock.from_torch(
        torch_ref=ref, mesh_device=mesh, parallel_config=config, ccl_manager=ccl
    )
    x = torch.randn(1, in_ch, size, size)
    with torch.no_grad():
        want = ref(x, None)
    out = vae_all_gather(ccl, tt(_nhwc_on_mesh(mesh, x, shard=True)))
    got = ttnn.to_torch(ttnn.get_device_tensors(out)[0]).reshape(1, size, size, out_ch)
    p = harness.pcc(want, got.permute(0, 3, 1, 2))
    return f"ResnetBlock {in_ch}->{out_ch} at {size}x{size} on 1x4: PCC {p:.5f}"


def tt_dit_group_norm(channels: int = 512, size: int = 128) -> str:
    """tt_dit's GroupNorm layer as its ``test_group_norm`` runs it (512 channels, 32 groups,
    128x128, ``core_grid`` 8x8, gamma/beta from ``torch.nn.init.normal_``, bfloat16 input), both
    replicated (8 virtual columns of 64 channels) and split over a 1x4 mesh (``mesh_axis=1``:
    4 columns of 32 per device), against torch's GroupNorm."""
    import torch
    import ttnn

    from models.experimental.tt_dit.layers.normalization import GroupNorm

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 4))
    torch.manual_seed(0)
    ref = torch.nn.GroupNorm(num_groups=32, num_channels=channels)
    torch.nn.init.normal_(ref.weight)
    torch.nn.init.normal_(ref.bias)
    x = torch.randn(1, channels, size, size, dtype=torch.bfloat16)
    with torch.no_grad():
        want = ref(x.float())
    found = []
    for axis in (None, 1):
        tt = GroupNorm.from_torch(
            torch_ref=ref, mesh_device=mesh, mesh_axis=axis, core_grid=ttnn.CoreGrid(x=8, y=8)
        )
        split = ttnn.ShardTensorToMesh(mesh, dim=-1) if axis is not None else None
        out = tt(
            ttnn.from_torch(
                x.permute(0, 2, 3, 1), dtype=ttnn.bfloat16, device=mesh, mesh_mapper=split,
                layout=ttnn.TILE_LAYOUT,
            )
        )  # fmt: skip
        got = ttnn.to_torch(
            out if axis is not None else ttnn.get_device_tensors(out)[0],
            mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=-1) if axis is not None else None,
        )
        cols = tt.num_virtual_cols
        found.append(
            f"mesh_axis={axis} ({cols} columns): {harness.pcc(want, got.permute(0, 3, 1, 2)):.5f}"
        )
    return f"GroupNorm {channels} ch, 32 groups, {size}x{size} on 1x4: PCC " + ", ".join(found)


def sd35_vae_decoder(latent: int = 16) -> str:
    """SD3.5-Large's whole VAE decoder (its released widths: 16 latent channels, blocks 128, 256,
    512, 512, 2 resnets each, 32 groups, mid-block attention) against diffusers' Decoder, as
    ``test_sd35_vae_vae_decoder`` runs it (input replicated, TP=4 inside)."""
    import torch
    import ttnn
    from diffusers.models.autoencoders.vae import Decoder

    from models.experimental.tt_dit.models.vae import vae_sd35

    torch.manual_seed(0)
    ref = Decoder(
        in_channels=16,
        out_channels=3,
        up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(128, 256, 512, 512),
        layers_per_block=2,
        norm_num_groups=32,
    ).eval()
    mesh, ccl, config = _sd35_setup()
    tt = vae_sd35.VAEDecoder.from_torch(
        torch_ref=ref, mesh_device=mesh, parallel_config=config, ccl_manager=ccl
    )
    x = torch.randn(1, 16, latent, latent)
    with torch.no_grad():
        want = ref(x)
    out = tt(_nhwc_on_mesh(mesh, x, shard=False))
    got = ttnn.to_torch(ttnn.get_device_tensors(out)[0]).permute(0, 3, 1, 2)
    p = harness.pcc(want, got.reshape(want.shape))
    side = latent * 8
    return f"VAEDecoder 16x{latent}x{latent} -> 3x{side}x{side} on 1x4: PCC {p:.5f}"


def _mochi_mesh_input(mesh: Any, config: Any, x: Any) -> Any:
    """The input as test_vae_mochi.py lays it out: [N, T, H, W, C], T split over the mesh's
    columns, H and then W over its rows."""
    import ttnn

    n, c, t, h, w = x.shape
    hf, wf = config.h_parallel.factor, config.w_parallel.factor
    v = x.permute(0, 2, 3, 4, 1).reshape(n, t, hf, h // hf, wf, w // wf, c)
    v = v.permute(0, 1, 2, 4, 3, 5, 6).reshape(n, t, hf * wf, h // hf, w // wf, c)
    tt = ttnn.from_torch(
        v, device=mesh, dtype=ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, mesh_shape=tuple(mesh.shape), dims=[2, 1]),
    )  # fmt: skip
    return ttnn.squeeze(tt, 2)


def _mochi_mesh_output(mesh: Any, config: Any, out: Any, shape: tuple[int, ...]) -> Any:
    import ttnn

    n, c, t, h, w = shape
    hf, wf = config.h_parallel.factor, config.w_parallel.factor
    got = ttnn.to_torch(
        ttnn.unsqueeze(out, 2),
        mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, mesh_shape=tuple(mesh.shape), dims=[2, 0]),
    )
    got = got.reshape(n, t, hf, wf, h // hf, w // wf, c).permute(0, 1, 2, 4, 3, 5, 6)
    return got.reshape(n, t, h, w, c).permute(0, 4, 1, 2, 3)


def mochi_resblock(channels: int = 128, t: int = 4, size: int = 16) -> str:
    """Mochi VAE's ResBlock (group norm over 32 groups after an all-gather, two causal 3x3x3
    conv3d with replicate padding; T split over the mesh's 2 columns, H and W each over 2 of its
    4 rows, with halo exchanges) against diffusers' MochiResnetBlock3D, on a 4x2 mesh."""
    import torch
    import ttnn
    from diffusers.models.autoencoders.autoencoder_kl_mochi import MochiResnetBlock3D

    from models.experimental.tt_dit.models.vae.vae_mochi import ResBlock
    from models.experimental.tt_dit.parallel.config import MochiVAEParallelConfig, ParallelFactor
    from models.experimental.tt_dit.parallel.manager import CCLManager

    torch.manual_seed(0)
    ref = MochiResnetBlock3D(in_channels=channels).eval()
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(4, 2))
    ccl = CCLManager(mesh, topology=ttnn.Topology.Linear, num_links=1)
    config = MochiVAEParallelConfig(  # as on a Galaxy (8x4: H over 4, W over 2, T over 4)
        time_parallel=ParallelFactor(factor=2, mesh_axis=1),
        h_parallel=ParallelFactor(factor=2, mesh_axis=0),
        w_parallel=ParallelFactor(factor=2, mesh_axis=0),
    )
    tt = ResBlock(mesh_device=mesh, parallel_config=config, ccl_manager=ccl, torch_ref=ref)
    tt.num_out_blocks_map = _AnySize(
        {c: _AnySize(sizes) for c, sizes in tt.num_out_blocks_map.items()}, default=_AnySize()
    )
    x = torch.randn(1, channels, t, size, size)
    with torch.no_grad():
        want = ref(x)
    want = want[0] if isinstance(want, tuple) else want
    got = _mochi_mesh_output(mesh, config, tt(_mochi_mesh_input(mesh, config, x)), tuple(x.shape))
    p, branch = harness.pcc(want, got), harness.pcc(want - x, got.float() - x)
    return (
        f"Mochi ResBlock C={channels}, T={t}, {size}x{size} on 4x2: PCC {p:.5f} "
        f"(the block's branch, output - input: {branch:.5f})"
    )


def wan_residual_block(dim: int = 96, t: int = 2, size: int = 16, cache_len: int = 1) -> str:
    """Wan 2.1 VAE's WanResidualBlock (RMS norm, two causal 3x3x3 conv3d with a time cache; 96
    channels: its decoder's last up block), H and W split over a 2x2 mesh with halo exchange, as
    ``test_wan_residual_block`` runs it, against diffusers' WanResidualBlock."""
    import torch
    import ttnn
    from diffusers.models.autoencoders.autoencoder_kl_wan import WanResidualBlock as Ref

    from models.experimental.tt_dit.models.vae.vae_wan2_1 import WanResidualBlock
    from models.experimental.tt_dit.parallel.config import ParallelFactor, VaeHWParallelConfig
    from models.experimental.tt_dit.parallel.manager import CCLManager
    from models.experimental.tt_dit.utils.conv3d import conv_pad_height, conv_unpad_height
    from models.experimental.tt_dit.utils.tensor import bf16_tensor_2dshard

    torch.manual_seed(0)
    ref = Ref(in_dim=dim, out_dim=dim).eval()
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 2))
    ccl = CCLManager(mesh, topology=ttnn.Topology.Linear)
    config = VaeHWParallelConfig(
        height_parallel=ParallelFactor(factor=2, mesh_axis=0),
        width_parallel=ParallelFactor(factor=2, mesh_axis=1),
    )
    tt = WanResidualBlock(
        in_dim=dim, out_dim=dim, mesh_device=mesh, ccl_manager=ccl, parallel_config=config
    )
    tt.load_state_dict(ref.state_dict())

    def to_mesh(v: Any) -> Any:
        padded, logical = conv_pad_height(v.permute(0, 2, 3, 4, 1), 2)
        tensor = bf16_tensor_2dshard(
            padded, mesh, layout=ttnn.ROW_MAJOR_LAYOUT, shard_mapping={0: 2, 1: 3}
        )
        return tensor, logical

    def from_mesh(v: Any, logical: int) -> Any:
        whole = ttnn.to_torch(
            v, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, mesh_shape=(2, 2), dims=[2, 3])
        )
        return conv_unpad_height(whole, logical).permute(0, 4, 1, 2, 3)

    x = torch.randn(1, dim, t, size, size)
    caches = [torch.randn(1, dim, cache_len, size, size) for _ in range(2)]
    tt_x, logical = to_mesh(x)
    tt_caches = [to_mesh(c)[0] for c in caches]
    with torch.no_grad():
        want = ref(x, feat_cache=caches, feat_idx=[0])
    got = from_mesh(tt(tt_x, logical, feat_cache=tt_caches, feat_idx=[0]), logical)
    p, branch = harness.pcc(want, got), harness.pcc(want - x, got.float() - x)
    p_cache = min(harness.pcc(c, from_mesh(tc, logical)) for c, tc in zip(caches, tt_caches))
    return (
        f"WanResidualBlock C={dim}, T={t} (+{cache_len} cached), {size}x{size} on 2x2: "
        f"PCC {p:.5f} (branch, output - input: {branch:.5f}; updated time caches: {p_cache:.5f})"
    )


CASES: dict[str, Callable[[], str]] = {
    "tt_dit_group_norm": tt_dit_group_norm,
    "sd35_resnet_block": sd35_resnet_block,
    "sd35_vae_decoder": sd35_vae_decoder,
    "mochi_resblock": mochi_resblock,
    "wan_residual_block": wan_residual_block,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    return harness.run_cases(CASES, "tt_dit module", parser.parse_args(argv).case)


if __name__ == "__main__":
    sys.exit(main())
