"""MeshShape, MeshCoordinate and MeshDevice: constructors, reprs, device ids, submeshes, errors.

Expected values are TT-NN's (ttnn_api.md sections 1 and 8), written out by hand or derived from
``np.arange`` grids, never from ttjax itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from _reference import coords

import ttjax as ttnn

if len(jax.devices()) != 32:
    pytest.skip(
        f"device ids and system shapes below assume the suite's 32 virtual devices; "
        f"have {len(jax.devices())}",
        allow_module_level=True,
    )

# ---------------------------------------------------------------------------------------------
# MeshShape
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: ttnn.MeshShape(2, 4),
        lambda: ttnn.MeshShape([2, 4]),
        lambda: ttnn.MeshShape((2, 4)),
        lambda: ttnn.MeshShape(y=2, x=4),
        lambda: ttnn.MeshShape(np.int64(2), np.int32(4)),
        lambda: ttnn.MeshShape(ttnn.MeshShape(2, 4)),
    ],
    ids=["positional", "list", "tuple", "keywords", "numpy-ints", "copy"],
)
def test_mesh_shape_constructors_agree(make):
    shape = make()
    assert repr(shape) == "MeshShape([2, 4])"
    assert tuple(shape) == (2, 4)
    assert shape.dims() == 2
    assert shape.mesh_size() == 8
    assert (shape[0], shape[1], shape[-1]) == (2, 4, 4)
    assert (shape.num_rows, shape.num_cols) == (2, 4)


def test_mesh_shape_repr_iteration_unpacking_equality():
    shape = ttnn.MeshShape([1, 2])
    assert repr(shape) == "MeshShape([1, 2])"
    rows, cols = shape
    assert (rows, cols) == (1, 2)
    assert list(shape) == [1, 2]
    assert shape == ttnn.MeshShape(1, 2)
    assert shape != ttnn.MeshShape(2, 1)
    assert shape == (1, 2)
    assert hash(shape) == hash(ttnn.MeshShape((1, 2)))
    assert len({ttnn.MeshShape(1, 2), ttnn.MeshShape([1, 2]), ttnn.MeshShape(2, 1)}) == 2
    assert repr(ttnn.MeshShape([8])) == "MeshShape([8])"
    assert ttnn.MeshShape([8]).dims() == 1
    assert repr(ttnn.MeshShape(2, 2, 2)) == "MeshShape([2, 2, 2])"


def test_mesh_shape_line_topology():
    assert ttnn.MeshShape(1, 8).is_line_topology()
    assert ttnn.MeshShape(8, 1).is_line_topology()
    assert ttnn.MeshShape(1, 1).is_line_topology()
    assert not ttnn.MeshShape(2, 4).is_line_topology()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((), "MeshShape cannot have 0 dimension"),
        (([],), "MeshShape cannot have 0 dimension"),
        ((0, 2), r"MeshShape\(\[0, 2\]\) has dimension 0 = 0"),
        ((2, -4), r"MeshShape\(\[2, -4\]\) has dimension 1 = -4"),
        ((2.0, 4), r"dimension 0 is 2\.0 \(float\)"),
        (("2", 4), r"dimension 0 is '2' \(str\)"),
        ((True, 4), r"dimension 0 is True \(bool\)"),
    ],
    ids=["no-args", "empty-list", "zero", "negative", "float", "str", "bool"],
)
def test_mesh_shape_rejects_bad_values(args, match):
    with pytest.raises(ttnn.MeshShapeError, match=match) as info:
        ttnn.MeshShape(*args)
    assert "fix:" in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ttnn.TTJaxError)


def test_mesh_shape_keywords_need_both():
    with pytest.raises(ttnn.MeshShapeError, match=r"y=2, x=None"):
        ttnn.MeshShape(y=2)


# ---------------------------------------------------------------------------------------------
# MeshCoordinate / MeshCoordinateRange
# ---------------------------------------------------------------------------------------------


def test_mesh_coordinate_repr_iteration_equality_order():
    c = ttnn.MeshCoordinate([0, 1])
    assert repr(c) == "MeshCoordinate([0, 1])"
    assert repr(ttnn.MeshCoordinate(0, 1)) == "MeshCoordinate([0, 1])"
    assert repr(ttnn.MeshCoordinate((3, 2))) == "MeshCoordinate([3, 2])"
    r, col = c
    assert (r, col) == (0, 1)
    assert c == ttnn.MeshCoordinate(0, 1)
    assert c != ttnn.MeshCoordinate(1, 0)
    assert c == (0, 1)
    assert c.dims() == 2
    assert {ttnn.MeshCoordinate(0, 1): "a"}[ttnn.MeshCoordinate((0, 1))] == "a"
    # Lexicographic (row-major) order.
    unsorted = [ttnn.MeshCoordinate(1, 0), ttnn.MeshCoordinate(0, 3), ttnn.MeshCoordinate(0, 1)]
    assert [tuple(x) for x in sorted(unsorted)] == [(0, 1), (0, 3), (1, 0)]


def test_mesh_coordinate_index_out_of_bounds_message():
    with pytest.raises(IndexError, match=r"Index out of bounds: 2 not in \[0, 2\)"):
        ttnn.MeshCoordinate(0, 1)[2]


def test_mesh_coordinate_rejects_non_int():
    with pytest.raises(ttnn.MeshShapeError, match=r"0\.5"):
        ttnn.MeshCoordinate(0.5, 1)


def test_mesh_coordinate_range_is_row_major():
    full = [tuple(c) for c in ttnn.MeshCoordinateRange(ttnn.MeshShape(2, 3))]
    assert full == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    part = ttnn.MeshCoordinateRange(ttnn.MeshCoordinate(1, 1), ttnn.MeshCoordinate(2, 2))
    assert [tuple(c) for c in part] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert len(part) == 4


# ---------------------------------------------------------------------------------------------
# MeshDevice
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (1, 2), (2, 4), (8, 4), (4, 8)])
def test_mesh_device_repr_and_row_major_ids(rows, cols):
    with ttnn.create_mesh_device(ttnn.MeshShape(rows, cols)) as mesh:
        n = rows * cols
        assert repr(mesh) == f"<MeshDevice: {rows}x{cols} grid, {n} devices>"
        assert mesh.shape == ttnn.MeshShape(rows, cols)
        assert tuple(mesh.shape) == (rows, cols)
        assert mesh.get_num_devices() == n
        assert mesh.get_device_ids() == list(range(n))
        # get_device_id(coord) of coordinate (r, c) is r * cols + c.
        for r, c in coords((rows, cols)):
            assert mesh.get_device_id(ttnn.MeshCoordinate(r, c)) == r * cols + c
    assert not mesh.is_open


def test_mesh_device_get_device_id_missing_coordinate():
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 4)) as mesh:
        with pytest.raises(
            ttnn.MeshShapeError,
            match=r"Device ID requested for MeshCoord MeshCoordinate\(\[2, 0\]\)",
        ):
            mesh.get_device_id(ttnn.MeshCoordinate(2, 0))


def test_open_mesh_device_offset_and_physical_ids():
    # The system mesh of 32 devices is a Galaxy 8x4; offset (1, 2) starts at id 1 * 4 + 2.
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 2), offset=ttnn.MeshCoordinate(1, 2)) as mesh:
        assert mesh.get_device_ids() == [6, 7, 10, 11]
    with ttnn.create_mesh_device(ttnn.MeshShape(1, 2), physical_device_ids=[5, 3]) as mesh:
        assert mesh.get_device_ids() == [5, 3]
    with pytest.raises(ttnn.MeshShapeError, match=r"physical_device_ids=\[1, 1\]"):
        ttnn.open_mesh_device(ttnn.MeshShape(1, 2), physical_device_ids=[1, 1])


def test_open_device_is_one_by_one():
    dev = ttnn.open_device(device_id=0)
    try:
        assert dev.shape == ttnn.MeshShape(1, 1)
        assert dev.get_device_ids() == [0]
        assert repr(dev) == "<MeshDevice: 1x1 grid, 1 devices>"
    finally:
        ttnn.close_device(dev)
    dev3 = ttnn.open_device(3)
    assert dev3.get_device_ids() == [3]
    ttnn.close_device(dev3)


def test_open_mesh_device_defaults_to_system_mesh():
    assert ttnn.get_num_devices() == len(jax.devices()) == 32
    assert ttnn.get_device_ids() == list(range(32))
    assert ttnn.system_mesh_shape() == ttnn.MeshShape(8, 4)
    assert ttnn.system_mesh_shape(8) == ttnn.MeshShape(2, 4)
    assert ttnn.system_mesh_shape(2) == ttnn.MeshShape(1, 2)
    with ttnn.create_mesh_device() as mesh:
        assert mesh.shape == ttnn.MeshShape(8, 4)


def test_mesh_larger_than_available_says_how_to_fix():
    with pytest.raises(ttnn.MeshShapeError) as info:
        ttnn.open_mesh_device(ttnn.MeshShape(8, 8))
    msg = str(info.value)
    assert "MeshShape([8, 8])" in msg and "64" in msg and "32" in msg
    assert "fix:" in msg and "TTJAX_NUM_DEVICES=64" in msg


# ---------------------------------------------------------------------------------------------
# Visibility (TT_VISIBLE_DEVICES / TTJAX_VISIBLE_DEVICES)
# ---------------------------------------------------------------------------------------------


def test_tt_visible_devices_restricts_ids(monkeypatch):
    monkeypatch.setenv("TT_VISIBLE_DEVICES", "4,5,6,7")
    assert ttnn.get_num_devices() == 4
    assert ttnn.get_device_ids() == [4, 5, 6, 7]
    assert ttnn.system_mesh_shape() == ttnn.MeshShape(1, 4)
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 2)) as mesh:
        assert mesh.get_device_ids() == [4, 5, 6, 7]  # ids keep their values
    with pytest.raises(ttnn.MeshShapeError, match=r"TT_VISIBLE_DEVICES=\[4, 5, 6, 7\]") as info:
        ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
    assert "fix:" in str(info.value)


def test_ttjax_visible_devices_wins(monkeypatch):
    monkeypatch.setenv("TT_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("TTJAX_VISIBLE_DEVICES", "9, 2")
    assert ttnn.get_device_ids() == [9, 2]


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("0,40", ttnn.MeshShapeError, r"TT_VISIBLE_DEVICES names device ids \[40\]"),
        ("0,x", ttnn.ConfigError, r"TT_VISIBLE_DEVICES='0,x' holds 'x'"),
        ("3,3", ttnn.ConfigError, r"TT_VISIBLE_DEVICES='3,3' names device id\(s\) \[3\] more than"),
    ],
    ids=["missing", "not-int", "duplicate"],
)
def test_tt_visible_devices_bad_values(monkeypatch, value, error, match):
    monkeypatch.setenv("TT_VISIBLE_DEVICES", value)
    with pytest.raises(error, match=match) as info:
        ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    assert "fix:" in str(info.value)


# ---------------------------------------------------------------------------------------------
# Submeshes and reshape
# ---------------------------------------------------------------------------------------------


def test_create_submesh_with_offset_keeps_parent_ids():
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 4)) as parent:
        grid = np.arange(8).reshape(2, 4)  # parent device id at every coordinate
        sub = parent.create_submesh(ttnn.MeshShape(2, 2), offset=ttnn.MeshCoordinate(0, 1))
        assert sub.shape == ttnn.MeshShape(2, 2)
        assert sub.get_device_ids() == grid[0:2, 1:3].ravel().tolist()
        assert sub.get_device_id(ttnn.MeshCoordinate(1, 0)) == grid[1, 1]
        origin = parent.create_submesh(ttnn.MeshShape(1, 4))
        assert origin.get_device_ids() == [0, 1, 2, 3]
        assert parent.get_submeshes() == [sub, origin]


@pytest.mark.parametrize(
    ("shape", "offset", "match"),
    [
        (
            (2, 2),
            (1, 3),
            r"Submesh shape MeshShape\(\[2, 2\]\) and offset MeshCoordinate\(\[1, 3\]\) does not fit within parent mesh \(MeshShape\(\[2, 4\]\)\)",
        ),
        ((3, 1), None, r"does not fit within parent mesh"),
        ((0, 2), None, r"Invalid submesh shape: \(0, 2\)\. All dimensions must be positive"),
        (
            (8,),
            None,
            r"Submesh shape MeshShape\(\[8\]\) and mesh device shape MeshShape\(\[2, 4\]\) must have the same number of dimensions",
        ),
    ],
    ids=["offset-overflow", "too-tall", "zero-dim", "rank"],
)
def test_create_submesh_errors(shape, offset, match):
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 4)) as parent:
        off = ttnn.MeshCoordinate(offset) if offset is not None else None
        with pytest.raises(ttnn.MeshShapeError, match=match) as info:
            parent.create_submesh(shape, offset=off)
        assert "fix:" in str(info.value)


def test_create_submeshes_galaxy_into_t3000s():
    with ttnn.create_mesh_device(ttnn.MeshShape(8, 4)) as galaxy:
        subs = galaxy.create_submeshes(ttnn.MeshShape(2, 4))
        assert len(subs) == 4
        assert [repr(s) for s in subs] == ["<MeshDevice: 2x4 grid, 8 devices>"] * 4
        assert [s.get_device_ids() for s in subs] == [
            list(range(8 * k, 8 * k + 8)) for k in range(4)
        ]


def test_create_submeshes_tiles_in_row_major_tile_order():
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 4)) as parent:
        grid = np.arange(8).reshape(2, 4)
        halves = parent.create_submeshes(ttnn.MeshShape(2, 2))
        assert (
            [s.get_device_ids() for s in halves]
            == [
                grid[:, 0:2].ravel().tolist(),  # cols 0-1: [0, 1, 4, 5]
                grid[:, 2:4].ravel().tolist(),  # cols 2-3: [2, 3, 6, 7]
            ]
        )
        rows = parent.create_submeshes(ttnn.MeshShape(1, 4))
        assert [s.get_device_ids() for s in rows] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        quads = parent.create_submeshes(ttnn.MeshShape(1, 2))
        assert [s.get_device_ids() for s in quads] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    with ttnn.create_mesh_device(ttnn.MeshShape(4, 8)) as wide:
        grid = np.arange(32).reshape(4, 8)
        tiles = wide.create_submeshes(ttnn.MeshShape(2, 4))
        expect = [grid[r : r + 2, c : c + 4].ravel().tolist() for r in (0, 2) for c in (0, 4)]
        assert [s.get_device_ids() for s in tiles] == expect


def test_create_submeshes_not_divisible():
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 4)) as parent:
        with pytest.raises(
            ttnn.MeshShapeError,
            match=r"Shape MeshShape\(\[2, 4\]\) is not divisible by submesh shape MeshShape\(\[2, 3\]\) along dimension 1",
        ):
            parent.create_submeshes(ttnn.MeshShape(2, 3))


def test_reshape_keeps_devices_row_major():
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 4)) as mesh:
        mesh.reshape(ttnn.MeshShape(1, 8))
        assert mesh.shape == ttnn.MeshShape(1, 8)
        assert mesh.get_device_ids() == list(range(8))
        assert mesh.get_device_id(ttnn.MeshCoordinate(0, 5)) == 5
        mesh.reshape(ttnn.MeshShape(4, 2))
        assert mesh.get_device_id(ttnn.MeshCoordinate(2, 1)) == 5
        with pytest.raises(
            ttnn.MeshShapeError,
            match="New shape must have the same number of devices as current shape",
        ):
            mesh.reshape(ttnn.MeshShape(3, 2))


def test_reshape_invalidates_older_tensors():
    with ttnn.create_mesh_device(ttnn.MeshShape(2, 4)) as mesh:
        x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
        t = ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0), device=mesh)
        mesh.reshape(ttnn.MeshShape(1, 8))
        with pytest.raises(ttnn.MeshMismatchError, match="reshaped") as info:
            ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))
        assert "fix:" in str(info.value)


# ---------------------------------------------------------------------------------------------
# Closing
# ---------------------------------------------------------------------------------------------


def test_close_mesh_device_then_using_a_tensor_raises():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    sub = mesh.create_submesh(ttnn.MeshShape(1, 1))
    x = np.ones((2, 4), np.float32)
    t = ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0), device=mesh)
    composer = ttnn.ConcatMeshToTensor(mesh, dim=0)
    assert np.array_equal(ttnn.to_numpy(t, mesh_composer=composer), x)
    assert ttnn.close_mesh_device(mesh) is None
    assert not mesh.is_open and not sub.is_open
    with pytest.raises(ttnn.DeviceClosedError, match="closed") as info:
        ttnn.to_torch(t, mesh_composer=composer)
    assert "fix:" in str(info.value)
    with pytest.raises(ttnn.DeviceClosedError):
        ttnn.get_device_tensors(t)
    with pytest.raises(ttnn.DeviceClosedError):
        ttnn.from_device(t)
    with pytest.raises(ttnn.DeviceClosedError):
        ttnn.add(t, t)
    with pytest.raises(ttnn.DeviceClosedError):
        ttnn.from_torch(x, device=mesh)
    with pytest.raises(ttnn.DeviceClosedError):
        mesh.create_submesh(ttnn.MeshShape(1, 1))


def test_host_tensor_survives_close():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    t = ttnn.from_torch(x, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1), device=mesh)
    host = ttnn.from_device(t)
    ttnn.close_mesh_device(mesh)
    out = ttnn.to_numpy(host, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1))
    assert np.array_equal(out, x)


# ---------------------------------------------------------------------------------------------
# Virtual device count (fresh interpreters: the count is fixed once JAX starts)
# ---------------------------------------------------------------------------------------------


def _python(code: str, env_updates: dict[str, str | None]) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ)
    for k in ("TTJAX_NUM_DEVICES", "XLA_FLAGS", "TT_VISIBLE_DEVICES", "TTJAX_VISIBLE_DEVICES"):
        env.pop(k, None)
    for k, v in env_updates.items():
        if v is not None:
            env[k] = v
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_virtual_device_count_from_import_and_env():
    code = """
        import ttjax, jax
        print(len(jax.devices()), repr(ttjax.system_mesh_shape()))
    """
    default = _python(code, {})
    assert default.returncode == 0, default.stderr
    assert default.stdout.split("\n")[0] == "32 MeshShape([8, 4])"
    eight = _python(
        code, {"TTJAX_NUM_DEVICES": "8", "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    )
    assert eight.returncode == 0, eight.stderr
    assert eight.stdout.split("\n")[0] == "8 MeshShape([2, 4])"


def test_jax_started_first_error_says_how_to_fix():
    code = """
        import jax
        jax.devices()
        import ttjax
        try:
            ttjax.open_mesh_device(ttjax.MeshShape(2, 4))
        except ttjax.MeshShapeError as e:
            print("ERROR:", e)
    """
    res = _python(code, {})
    assert res.returncode == 0, res.stderr
    msg = res.stdout
    assert "ERROR: Requested mesh MeshShape([2, 4]) needs 8 devices, but only 1 cpu" in msg
    assert "fix:" in msg
    assert "already started" in msg
    assert "Import ttjax before the first JAX computation" in msg
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=8" in msg


def test_two_meshes_on_the_same_devices_are_independent():
    """Documented difference: TT-NN opens a device once; ttjax lets several MeshDevice objects
    share virtual devices, and closing one leaves the others working."""
    a = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    b = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
    assert a.get_device_ids() == b.get_device_ids()
    x = ttnn.from_torch(np.ones((1, 4), np.float32), device=a)
    ttnn.close_mesh_device(b)
    out = ttnn.to_numpy(ttnn.exp(x), mesh_composer=ttnn.ConcatMeshToTensor(a, dim=0))
    np.testing.assert_allclose(out, np.full((2, 4), np.e), rtol=1e-6)
    with pytest.raises(ttnn.DeviceClosedError):
        ttnn.from_torch(np.ones((1, 4), np.float32), device=b)
    ttnn.close_mesh_device(a)
