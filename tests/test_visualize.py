"""ttjax.visualize: TT-NN's printed mesh/tensor grids (checked with capsys) and mesh_layout."""

from __future__ import annotations

import logging
import sys

import jax
import numpy as np
import pytest
from _reference import coords, shard, shard_1d
from conftest import mesh_of

import ttjax as ttnn
from ttjax import visualize
from ttjax.placements import PlacementLocal

# ---------------------------------------------------------------------------------------------
# Reading the printed grid back
# ---------------------------------------------------------------------------------------------


def grid_cells(out: str, table: int = 0) -> list[list[list[str]]]:
    """The ``table``-th box grid in ``out`` as rows x cols x (non-empty lines of the cell)."""
    lines = out.splitlines()
    tops = [i for i, line in enumerate(lines) if line.lstrip().startswith("┌")]
    rows: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in lines[tops[table] + 1 :]:
        s = line.strip()
        if s.startswith(("├", "└")):
            assert current is not None
            rows.append(current)
            current = None
            if s.startswith("└"):
                break
            continue
        parts = s.split("│")[1:-1]
        if current is None:
            current = [[] for _ in parts]
        assert len(parts) == len(current), line
        for cell, part in zip(current, parts):
            if part.strip():
                cell.append(part.strip())
    return rows


def panel_lines(out: str) -> list[str]:
    """The lines inside the first rounded panel (``╭ ... ╰``)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("╭"))
    body = []
    for line in lines[start + 1 :]:
        if line.lstrip().startswith("╰"):
            break
        body.append(line.strip().strip("│").strip())
    return body


def _data(shape: tuple[int, ...]) -> np.ndarray:
    """Distinct values, so equal blocks mean equal positions in the global array."""
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


# ---------------------------------------------------------------------------------------------
# visualize_mesh_device
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(1, 2), (2, 4), (8, 4)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_mesh_device_grid_is_row_major(shape, capsys):
    mesh = mesh_of(shape)
    ttnn.visualize_mesh_device(mesh)
    out = capsys.readouterr().out
    assert f"MeshDevice(rows={shape[0]}, cols={shape[1]})" in out
    cells = grid_cells(out)
    assert (len(cells), len(cells[0])) == shape
    ids = mesh.get_device_ids()
    for k, (r, c) in enumerate(coords(shape)):
        assert cells[r][c] == [f"Dev. ID: {ids[k]}", f"({r}, {c})"]
        assert ids[k] == mesh.devices[r, c].id


def test_mesh_device_grid_of_a_submesh_keeps_parent_ids(capsys):
    sub = mesh_of((2, 4)).create_submesh(ttnn.MeshShape(2, 2), offset=(0, 2))
    ttnn.visualize_mesh_device(sub)
    cells = grid_cells(capsys.readouterr().out)
    assert [[cell[0] for cell in row] for row in cells] == [
        ["Dev. ID: 2", "Dev. ID: 3"],
        ["Dev. ID: 6", "Dev. ID: 7"],
    ]


def test_mesh_device_with_tensor_shows_shard_shape_and_placements(t3000, capsys):
    x = _data((2, 1, 32, 256))
    t = ttnn.from_torch(
        x,
        layout=ttnn.TILE_LAYOUT,
        device=t3000,
        mesh_mapper=ttnn.ShardTensor2dMesh(t3000, mesh_shape=(2, 4), dims=(None, 3)),
    )
    ttnn.visualize_mesh_device(t3000, tensor=t)
    cells = grid_cells(capsys.readouterr().out)
    ids = t3000.get_device_ids()
    for k, (r, c) in enumerate(coords((2, 4))):
        assert cells[r][c] == [
            f"Dev. ID: {ids[k]}",
            f"({r}, {c})",
            "Shard: [2, 1, 32, 64]",
            "[R, S(3)]",
        ]


def test_mesh_device_with_fully_sharded_tensor_on_galaxy(galaxy, capsys):
    t = ttnn.from_torch(
        _data((1, 1, 64, 1024)), device=galaxy, mesh_mapper=ttnn.ShardTensorToMesh(galaxy, dim=3)
    )
    ttnn.visualize_mesh_device(galaxy, t)
    cells = grid_cells(capsys.readouterr().out)
    assert len(cells) == 8 and all(len(row) == 4 for row in cells)
    for row in cells:
        for cell in row:
            assert cell[2:] == ["Shard: [1, 1, 64, 32]", "[S(3), S(3)]"]


# ---------------------------------------------------------------------------------------------
# visualize_tensor
# ---------------------------------------------------------------------------------------------

# (mesh shape, ShardTensor2dMesh dims or "1d:<dim>" (ShardTensorToMesh) or "replicate",
#  expected panel lines)
PLACEMENT_CASES = [
    (
        (1, 2),
        (None, 3),
        ["Tensor shards REPLICATED across mesh dim 0", "Tensor dim 3 SHARDED across mesh dim 1"],
    ),
    (
        (2, 4),
        (0, 3),
        ["Tensor dim 0 SHARDED across mesh dim 0", "Tensor dim 3 SHARDED across mesh dim 1"],
    ),
    (
        (2, 4),
        (2, None),
        ["Tensor dim 2 SHARDED across mesh dim 0", "Tensor shards REPLICATED across mesh dim 1"],
    ),
    (
        (2, 4),
        "replicate",
        [
            "Tensor shards REPLICATED across mesh dim 0",
            "Tensor shards REPLICATED across mesh dim 1",
        ],
    ),
    (
        (2, 4),
        "1d:3",
        ["Tensor dim 3 SHARDED across mesh dim 0", "Tensor dim 3 SHARDED across mesh dim 1"],
    ),
]


def _mapper(mesh: ttnn.MeshDevice, spec):
    if spec == "replicate":
        return ttnn.ReplicateTensorToMesh(mesh)
    if isinstance(spec, str):
        return ttnn.ShardTensorToMesh(mesh, dim=int(spec.split(":")[1]))
    return ttnn.ShardTensor2dMesh(mesh, mesh_shape=tuple(mesh.shape), dims=spec)


def _expected_shard_number(spec, mesh_shape, coord) -> int:
    """Which distinct block a device holds, straight from the mapper's definition."""
    cols = mesh_shape[1]
    r, c = coord
    if spec == "replicate":
        return 0
    if isinstance(spec, str):  # ShardTensorToMesh: chunk k goes to device k, row-major
        return r * cols + c
    row_dim, col_dim = spec
    if row_dim is not None and col_dim is not None:
        return r * cols + c
    return r if row_dim is not None else c


def _case_id(mesh_shape, spec) -> str:
    return f"{mesh_shape[0]}x{mesh_shape[1]}-{spec}".replace(" ", "")


@pytest.mark.parametrize(
    "mesh_shape,spec,lines", PLACEMENT_CASES, ids=[_case_id(m, s) for m, s, _ in PLACEMENT_CASES]
)
def test_visualize_tensor_panel_and_cells(mesh_shape, spec, lines, capsys):
    mesh = mesh_of(mesh_shape)
    t = ttnn.from_torch(
        _data((2, 1, 64, 256)),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=_mapper(mesh, spec),
    )
    ttnn.visualize_tensor(t)
    out = capsys.readouterr().out
    assert panel_lines(out) == lines
    assert "Placement Configuration" in out
    assert "Tensor(storage: StorageType::DEVICE)" in out
    cells = grid_cells(out)
    ids = mesh.get_device_ids()
    shape = str(list(t.shape))
    for k, (r, c) in enumerate(coords(mesh_shape)):
        n = _expected_shard_number(spec, mesh_shape, (r, c))
        assert cells[r][c] == [
            f"Dev. ID: {ids[k]}",
            f"({r}, {c})",
            f"Shard {n}",
            f"Shape: {shape}",
            "Dtype: BFLOAT16",
            "Layout: TILE",
        ]


def test_visualize_tensor_panel_matches_placements(t3000, capsys):
    """The panel is a faithful reading of ``tensor.placements``, one line per mesh dim."""
    t = ttnn.from_torch(
        _data((2, 1, 32, 128)),
        device=t3000,
        mesh_mapper=ttnn.create_mesh_mapper(
            t3000,
            ttnn.MeshMapperConfig([ttnn.PlacementShard(0), ttnn.PlacementShard(-1)]),
        ),
    )
    ttnn.visualize_tensor(t)
    lines = panel_lines(capsys.readouterr().out)
    assert len(lines) == len(t.placements)
    for i, (line, p) in enumerate(zip(lines, t.placements)):
        assert isinstance(p, ttnn.PlacementShard)
        assert line == f"Tensor dim {p.dim} SHARDED across mesh dim {i}"


def test_visualize_host_tensor_has_no_device_ids(n300, capsys):
    t = ttnn.from_torch(_data((1, 1, 32, 64)), mesh_mapper=ttnn.ShardTensorToMesh(n300, dim=3))
    assert t.storage_type() == ttnn.StorageType.HOST
    ttnn.visualize_tensor(t)
    out = capsys.readouterr().out
    assert "Tensor(storage: StorageType::HOST)" in out
    assert "Dev. ID" not in out
    cells = grid_cells(out)
    assert cells[0][1][:3] == ["(0, 1)", "Shard 1", "Shape: [1, 1, 32, 32]"]
    assert cells[0][1][3:] == ["Dtype: FLOAT32", "Layout: ROW_MAJOR"]


def test_visualize_tensor_with_local_placement(n300, capsys):
    t = ttnn.from_torch(_data((1, 1, 32, 64)), device=n300)
    local = ttnn.combine_device_tensors(ttnn.get_device_tensors(t))
    assert any(isinstance(p, PlacementLocal) for p in local.placements)
    ttnn.visualize_tensor(local)
    lines = panel_lines(capsys.readouterr().out)
    for i, p in enumerate(local.placements):
        if isinstance(p, PlacementLocal):
            assert "per-device values" in lines[i] and f"mesh dim {i}" in lines[i]


# ---------------------------------------------------------------------------------------------
# visualize_system_mesh
# ---------------------------------------------------------------------------------------------


def test_visualize_system_mesh_is_galaxy(capsys):
    ttnn.visualize_system_mesh()
    out = capsys.readouterr().out
    assert len(jax.devices()) == 32
    assert "SystemMesh Global Shape: MeshShape([8, 4])" in out
    assert "SystemMesh Local Shape: MeshShape([8, 4])" in out
    assert "SystemMesh Global Shape: (8, 4) | Local Shape: (8, 4)" in out
    assert out.index("Global Shape: MeshShape") < out.index("Local Shape: MeshShape")
    cells = grid_cells(out)
    grid = np.array(jax.devices()[:32], dtype=object).reshape(8, 4)
    assert (len(cells), len(cells[0])) == (8, 4)
    for r, c in coords((8, 4)):
        assert cells[r][c] == [f"Dev. ID: {grid[r, c].id}", f"({r}, {c})"]


# ---------------------------------------------------------------------------------------------
# Errors are logged, never raised (TT-NN); colours only on terminals
# ---------------------------------------------------------------------------------------------


def test_errors_are_logged_not_raised(n300, t3000, caplog, capsys):
    caplog.set_level(logging.ERROR, logger="ttjax.visualize")
    t = ttnn.from_torch(_data((1, 1, 32, 64)), device=n300)
    assert ttnn.visualize_tensor("not a tensor") is None
    assert ttnn.visualize_mesh_device(object()) is None
    assert ttnn.visualize_mesh_device(t3000, tensor=t) is None  # tensor lives on a 1x2 mesh
    assert ttnn.visualize_tensor(ttnn.from_torch(_data((2, 2)))) is None  # not distributed
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4
    assert "visualize_tensor expects a ttnn Tensor, got str" in messages[0]
    assert "expects a MeshDevice, got object" in messages[1]
    assert "MeshShape([1, 2])" in messages[2]
    assert "not distributed over any mesh" in messages[3]


def test_captured_output_is_plain_text(t3000, capsys, monkeypatch):
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(var, raising=False)
    t = ttnn.from_torch(
        _data((1, 1, 32, 128)),
        device=t3000,
        mesh_mapper=ttnn.ShardTensor2dMesh(t3000, mesh_shape=(2, 4), dims=(None, 3)),
    )
    ttnn.visualize_tensor(t)
    ttnn.visualize_mesh_device(t3000, t)
    assert "\x1b[" not in capsys.readouterr().out


def test_colour_sets_replicated_and_sharded_apart(n300, capsys, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    t = ttnn.from_torch(
        _data((1, 1, 32, 64)),
        device=n300,
        mesh_mapper=ttnn.ShardTensor2dMesh(n300, mesh_shape=(1, 2), dims=(None, 3)),
    )
    ttnn.visualize_tensor(t)
    out = capsys.readouterr().out
    assert "\x1b[" in out

    def style_before(word: str) -> str:
        i = out.index(word)
        return out[out.rindex("\x1b[", 0, i) : i]

    assert style_before("REPLICATED") != style_before("SHARDED")


# ---------------------------------------------------------------------------------------------
# mesh_layout
# ---------------------------------------------------------------------------------------------


def _expected_index(spec, mesh_shape, coord, gshape):
    """(start, stop) per tensor dim of the block a device holds, from the mapper's definition."""
    rows, cols = mesh_shape
    r, c = coord
    out = [(0, s) for s in gshape]
    if spec == "replicate":
        return tuple(out)
    if isinstance(spec, str):
        d = int(spec.split(":")[1]) % len(gshape)
        size = gshape[d] // (rows * cols)
        k = r * cols + c
        out[d] = (k * size, (k + 1) * size)
        return tuple(out)
    for d, n, i in zip(spec, mesh_shape, coord):
        if d is not None:
            size = gshape[d] // n
            out[d] = (i * size, (i + 1) * size)
    return tuple(out)


LAYOUT_CASES = [
    ((1, 2), (None, 3)),
    ((2, 4), (0, 3)),
    ((2, 4), (2, None)),
    ((2, 4), "1d:-1"),
    ((8, 4), (2, 3)),
    ((8, 4), "replicate"),
]


@pytest.mark.parametrize("mesh_shape,spec", LAYOUT_CASES, ids=[_case_id(*c) for c in LAYOUT_CASES])
def test_mesh_layout_ranges(mesh_shape, spec):
    mesh = mesh_of(mesh_shape)
    gshape = (2, 1, 64, 256)
    x = _data(gshape)
    t = ttnn.from_torch(x, device=mesh, mesh_mapper=_mapper(mesh, spec))
    layout = visualize.mesh_layout(t)
    if spec == "replicate":
        blocks = {c: x for c in coords(mesh_shape)}
    elif isinstance(spec, str):
        blocks = shard_1d(x, mesh_shape, int(spec.split(":")[1]) % x.ndim)
    else:
        blocks = shard(x, mesh_shape, spec)
    shards = ttnn.get_device_tensors(t)
    assert [e["coord"] for e in layout] == coords(mesh_shape)
    assert [e["device_id"] for e in layout] == mesh.get_device_ids()
    for entry, dev in zip(layout, shards):
        c = entry["coord"]
        assert entry["index"] == _expected_index(spec, mesh_shape, c, gshape)
        assert entry["global_shape"] == gshape
        assert entry["shard_shape"] == tuple(t.shape)
        assert entry["placements"] == tuple(str(p) for p in t.placements)
        sl = tuple(slice(a, b) for a, b in entry["index"])
        np.testing.assert_array_equal(x[sl], blocks[c])
        np.testing.assert_array_equal(ttnn.to_numpy(dev), x[sl])


def test_mesh_layout_shard_numbers_group_replicas(t3000):
    t = ttnn.from_torch(
        _data((2, 1, 32, 64)),
        device=t3000,
        mesh_mapper=ttnn.ShardTensor2dMesh(t3000, mesh_shape=(2, 4), dims=(0, None)),
    )
    layout = visualize.mesh_layout(t)
    by_shard: dict[int, set] = {}
    for entry in layout:
        by_shard.setdefault(entry["shard"], set()).add(entry["index"])
    assert sorted(by_shard) == [0, 1]
    assert all(len(indices) == 1 for indices in by_shard.values())  # replicas: same block


def test_mesh_layout_local_and_host(n300):
    t = ttnn.from_torch(_data((1, 1, 32, 64)), device=n300)
    local = ttnn.combine_device_tensors(ttnn.get_device_tensors(t))
    layout = visualize.mesh_layout(local)
    assert [e["index"] for e in layout] == [None, None]
    assert [e["shard"] for e in layout] == [0, 1]
    host = visualize.mesh_layout(ttnn.from_torch(_data((3, 5))))
    assert host == [
        {
            "device_id": None,
            "coord": (),
            "shard_shape": (3, 5),
            "placements": (),
            "shard": 0,
            "global_shape": (3, 5),
            "index": ((0, 3), (0, 5)),
        }
    ]
    with pytest.raises(ttnn.TTJaxError, match="expects a ttnn Tensor"):
        visualize.mesh_layout(np.zeros(3))


def test_mesh_layout_works_inside_jit(n300):
    t = ttnn.from_torch(
        _data((1, 1, 32, 64)), device=n300, mesh_mapper=ttnn.ShardTensorToMesh(n300, dim=3)
    )
    seen = []

    @jax.jit
    def f(t):
        seen.append(visualize.mesh_layout(t))
        return t

    f(t)
    assert seen[0] == visualize.mesh_layout(t)


# ---------------------------------------------------------------------------------------------
# PNG
# ---------------------------------------------------------------------------------------------


def test_save_png_without_matplotlib_names_the_fix(n300, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    with pytest.raises(ImportError, match="pip install matplotlib") as info:
        visualize.save_mesh_layout_png(n300, tmp_path / "mesh.png")
    assert isinstance(info.value, ttnn.TTJaxError)


def test_save_png(t3000, tmp_path):
    pytest.importorskip("matplotlib")
    t = ttnn.from_torch(
        _data((2, 1, 32, 128)),
        device=t3000,
        mesh_mapper=ttnn.ShardTensor2dMesh(t3000, mesh_shape=(2, 4), dims=(None, 3)),
    )
    for obj, name in [(t, "tensor.png"), (t3000, "mesh.png")]:
        path = visualize.save_mesh_layout_png(obj, tmp_path / name)
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ttnn.TTJaxError, match="Tensor or MeshDevice"):
        visualize.save_mesh_layout_png("x", tmp_path / "x.png")


def test_compact_galaxy_picture_fits_a_screen(capsys):
    galaxy = mesh_of((8, 4))
    ttnn.visualize_mesh_device(galaxy, compact=True)
    lines = capsys.readouterr().out.rstrip("\n").splitlines()
    assert len(lines) <= 24 and max(len(line.rstrip()) for line in lines) <= 80
    assert "MeshDevice(rows=8, cols=4)" in lines[0]
    ids = galaxy.get_device_ids()
    rows = [line.split() for line in lines if line.strip().startswith(str(ids[0]))]
    body = [line for line in lines if "(7, 3)" in line]
    assert body and f"{ids[31]} (7, 3)" in body[0]
    assert rows and rows[0][0] == str(ids[0])
