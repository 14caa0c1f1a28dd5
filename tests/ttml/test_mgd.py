"""Mesh graph descriptors: schema, shipped files, selection by environment or device count, mesh rule."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import ttjax.mgd
from ttjax.ttml import mgd
from ttjax.ttml.errors import MeshGraphDescriptorError, TopologyMismatchError

PROTO_DIR = Path(ttjax.mgd.__file__).parent / "proto"

# Independent table (ttml_api.md section 1.2): file -> (arch, dims, channels, policy).
SHIPPED = {
    "n150_mesh_graph_descriptor.textproto": ("WORMHOLE_B0", (1, 1), 1, "RELAXED"),
    "n300_mesh_graph_descriptor.textproto": ("WORMHOLE_B0", (1, 2), 2, "RELAXED"),
    "t3k_1x8_mesh_graph_descriptor.textproto": ("WORMHOLE_B0", (1, 8), 2, "STRICT"),
    "t3k_mesh_graph_descriptor.textproto": ("WORMHOLE_B0", (2, 4), 2, "RELAXED"),
    "galaxy_1x32_mesh_graph_descriptor.textproto": ("WORMHOLE_B0", (1, 32), 4, "RELAXED"),
    "single_galaxy_mesh_graph_descriptor.textproto": ("WORMHOLE_B0", (8, 4), 4, "RELAXED"),
    "bh_galaxy_4_8_line_line.textproto": ("BLACKHOLE", (4, 8), 2, "RELAXED"),
}

MESH = """mesh_descriptors {{
  name: "M0"
  arch: {arch}
  device_topology {{ dims: [ {dims} ]{extra} }}
  host_topology {{ dims: [ {host} ] }}
  channels {{ count: 2 }}
}}
top_level_instance {{ mesh {{ mesh_descriptor: "M0" mesh_id: 0 }} }}
"""


def text(dims: str = "2, 4", extra: str = "", arch: str = "WORMHOLE_B0", host: str = "") -> str:
    """One mesh M0; the host topology defaults to one host (a 1 per device dimension)."""
    host = host or ", ".join("1" for _ in dims.split(","))
    return MESH.format(dims=dims, extra=extra, arch=arch, host=host)


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in mgd.ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def test_shipped_set_is_the_documented_one() -> None:
    assert set(mgd.shipped_descriptors()) == set(SHIPPED)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_descriptor_parses(name: str) -> None:
    d = mgd.load_mesh_graph_descriptor(mgd.shipped_descriptors()[name])
    arch, dims, channels, policy = SHIPPED[name]
    assert (d.mesh.arch, d.device_topology, d.mesh.channels, d.mesh.policy) == (
        arch,
        dims,
        channels,
        policy,
    )
    assert d.mesh.dim_types == ("LINE",) * len(dims)
    assert d.num_devices == dims[0] * dims[1]


def test_generated_module_matches_the_schema(tmp_path: Path) -> None:
    """The committed *_pb2.py(i) are exactly what grpcio-tools' protoc makes from the shipped .proto."""
    pytest.importorskip("grpc_tools")
    proto = "mesh_graph_descriptor.proto"
    out = [f"--python_out={tmp_path}", f"--pyi_out={tmp_path}"]
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}", *out, proto],
        check=True,
        timeout=60,
    )
    for name in ("mesh_graph_descriptor_pb2.py", "mesh_graph_descriptor_pb2.pyi"):
        assert (tmp_path / name).read_text() == (PROTO_DIR / name).read_text(), name


def test_both_spellings_of_dim_types() -> None:
    old = mgd.parse_mesh_graph_descriptor(text(extra=" types: [ RING ]"))
    new = mgd.parse_mesh_graph_descriptor(text(extra=" dim_types: [ RING, LINE ]"))
    assert old.mesh.dim_types == new.mesh.dim_types == ("RING", "LINE")
    with pytest.raises(MeshGraphDescriptorError, match="both `types` and `dim_types`"):
        mgd.parse_mesh_graph_descriptor(text(extra=" types: [ RING ] dim_types: [ RING ]"))


def test_default_policy_is_strict_and_graph_top_level() -> None:
    t = text().replace("top_level_instance", "#")
    t += (
        'graph_descriptors { name: "G0" type: "FABRIC" '
        'instances { mesh { mesh_descriptor: "M0" mesh_id: 0 } } '
        'instances { mesh { mesh_descriptor: "M0" mesh_id: 1 } } }\n'
        'top_level_instance { graph { graph_descriptor: "G0" graph_id: 0 } }\n'
    )
    d = mgd.parse_mesh_graph_descriptor(t)
    assert (d.top_level, d.device_topology, d.mesh.policy) == ("M0", (2, 4), "STRICT")


def test_malformed_file_names_file_line_and_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.textproto"
    bad.write_text(text().replace("  arch: WORMHOLE_B0", "  arch WORMHOLE_B0"))
    with pytest.raises(MeshGraphDescriptorError) as e:
        mgd.load_mesh_graph_descriptor(bad)
    assert str(e.value).startswith(f"{bad}:3:8: malformed mesh graph descriptor (line 3, column 8)")
    assert 'Expected ":"' in str(e.value) and "\nfix:" in str(e.value)

    bad.write_text(text().replace("[ 2, 4 ]", "[ 2, 4 "))
    with pytest.raises(MeshGraphDescriptorError, match=re.escape(f"{bad}:4:")):
        mgd.load_mesh_graph_descriptor(bad)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (text(dims="1, 2, 4"), "Mesh has 3 dimensions but arch WORMHOLE_B0 supports at most 2."),
        (text(dims="0, 4"), "dims [0, 4]"),
        (text(arch="INVALID_ARCHITECTURE"), "arch INVALID_ARCHITECTURE"),
        (
            text(arch="INVALID_ARCHITECTURE"),
            "Mesh descriptor must have a valid architecture (Mesh: M0)",
        ),
        (text().replace("count: 2", "count: 0"), "channels count 0"),
        (text().split("top_level_instance")[0], "top_level_instance is missing"),
        (text().replace('mesh_descriptor: "M0"', 'mesh_descriptor: "M9"'), "mesh 'M9'"),
        ("", "no mesh_descriptors"),
    ],
)
def test_invalid_descriptor(source: str, message: str) -> None:
    with pytest.raises(MeshGraphDescriptorError, match=re.escape(message)):
        mgd.parse_mesh_graph_descriptor(source, "x.textproto")


def test_blackhole_allows_three_dims() -> None:
    assert mgd.parse_mesh_graph_descriptor(text("2, 2, 2", arch="BLACKHOLE")).num_devices == 8


def test_defaults_by_device_count() -> None:
    assert mgd.select_mesh_graph_descriptor(1).device_topology == (1, 1)
    assert mgd.select_mesh_graph_descriptor(2).device_topology == (1, 2)
    assert mgd.select_mesh_graph_descriptor(8).device_topology == (1, 8)
    assert mgd.select_mesh_graph_descriptor(32).device_topology == (1, 32)
    with pytest.raises(MeshGraphDescriptorError) as e:
        mgd.select_mesh_graph_descriptor(4)
    msg = str(e.value)
    assert "No default mesh graph descriptor for 4 devices" in msg
    assert "TT_MESH_GRAPH_DESC_PATH" in msg and "TTJAX_MESH_GRAPH_DESC_PATH" in msg
    # the meshes the defaults open (N150, N300, T3000's 1x8 line, Galaxy's 1x32 line)
    assert "1x1; 1x2, 2x1; 1x8, 2x4, 4x2, 8x1; 1x32, 2x16, 4x8, 8x4, 16x2, 32x1." in msg


def test_environment_selects(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shipped = mgd.shipped_descriptors()
    monkeypatch.setenv(
        "TT_MESH_GRAPH_DESC_PATH", str(shipped["t3k_mesh_graph_descriptor.textproto"])
    )
    assert mgd.select_mesh_graph_descriptor(8).device_topology == (2, 4)
    # Any count: the variable wins over the defaults.
    assert mgd.select_mesh_graph_descriptor(4).device_topology == (2, 4)
    # ttjax's own variable wins over TT-Metal's, and a bare shipped name is enough.
    monkeypatch.setenv("TTJAX_MESH_GRAPH_DESC_PATH", "n300_mesh_graph_descriptor.textproto")
    assert mgd.select_mesh_graph_descriptor(8).device_topology == (1, 2)
    custom = tmp_path / "mine.textproto"
    custom.write_text(text("4, 2"))
    monkeypatch.setenv("TTJAX_MESH_GRAPH_DESC_PATH", str(custom))
    assert mgd.select_mesh_graph_descriptor(8).path == str(custom)


def test_missing_file_names_path_and_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "nope.textproto"
    monkeypatch.setenv("TT_MESH_GRAPH_DESC_PATH", str(missing))
    with pytest.raises(MeshGraphDescriptorError) as e:
        mgd.select_mesh_graph_descriptor(8)
    assert str(missing) in str(e.value)
    assert f"TT_MESH_GRAPH_DESC_PATH={missing}" in str(e.value)


GRID_4x8 = "bh_galaxy_4_8_line_line.textproto"


def test_grid_topology_opens_only_its_shape() -> None:
    d = mgd.load_mesh_graph_descriptor(mgd.shipped_descriptors()[GRID_4x8])
    assert d.accepts([4, 8])
    d.check_mesh_shape([4, 8])
    for shape in ([1, 32], [32, 1], [8, 4], [2, 16], [4, 4]):
        assert not d.accepts(shape)
        with pytest.raises(TopologyMismatchError) as e:
            d.check_mesh_shape(shape)
        assert f"Requested mesh shape: {shape}" in str(e.value)
        assert "MGD device_topology dims: [4, 8]" in str(e.value)


def test_line_topology_accepts_any_mesh_of_its_size() -> None:
    d = mgd.load_mesh_graph_descriptor(
        mgd.shipped_descriptors()["galaxy_1x32_mesh_graph_descriptor.textproto"]
    )
    for shape in ([1, 32], [32, 1], [4, 8], [8, 4], [2, 16]):
        assert d.accepts(shape)
    with pytest.raises(TopologyMismatchError, match="it has 16 devices and the descriptor 32"):
        d.check_mesh_shape([4, 4])


def test_one_dimensional_descriptor_is_a_line() -> None:
    d = mgd.parse_mesh_graph_descriptor(text(dims="8"))
    assert d.device_topology == (8,) and d.mesh.dim_types == ("LINE",)
    assert all(d.accepts(s) for s in ([8], [1, 8], [2, 4], [4, 2], [2, 2, 2]))
    assert not d.accepts([2, 2])


# tt-metal's own MGD test suite (tests/tt_metal/tt_fabric/fabric_router/
# test_mesh_graph_descriptor.cpp), rewritten: what it parses and what it refuses.


def test_unknown_fields_parse_with_a_warning_naming_them(tmp_path: Path) -> None:
    """tt-metal parses with AllowUnknownField/AllowUnknownExtension: a newer descriptor's extra
    fields (here a scalar and a message) must not stop an older parser."""
    source = text().replace(
        '  name: "M0"\n',
        '  name: "M0"\n  dfsdadf: 3\n  future_links { kind: "X" count: 2 }\n',
    )
    f = tmp_path / "future.textproto"
    f.write_text(source)
    with pytest.warns(mgd.UnknownFieldWarning) as seen:
        d = mgd.load_mesh_graph_descriptor(f)
    assert (d.device_topology, d.mesh.arch, d.mesh.channels) == ((2, 4), "WORMHOLE_B0", 2)
    messages = [str(w.message) for w in seen]
    assert len(messages) == 2
    assert messages[0].startswith(f"{f}:3:3: field 'dfsdadf' of tt.tt_fabric.proto.MeshDescriptor")
    assert messages[1].startswith(f"{f}:4:3: field 'future_links'")


def test_misspelt_field_is_skipped_then_the_missing_value_is_refused() -> None:
    """An unknown name is no longer a syntax error; the field it was meant to be stays unset."""
    with (
        pytest.warns(mgd.UnknownFieldWarning, match="'arhc'"),
        pytest.raises(
            MeshGraphDescriptorError,
            match=re.escape("Mesh descriptor must have a valid architecture (Mesh: M0)"),
        ),
    ):
        mgd.parse_mesh_graph_descriptor(text().replace("arch:", "arhc:"))


@pytest.mark.parametrize(
    ("dims", "host", "message"),
    [
        ("2, 4", "1", "Device and host topology dimensions must be the same size (Mesh: M0)"),
        ("8", "1, 1", "Device and host topology dimensions must be the same size (Mesh: M0)"),
        (
            "2, 4",
            "1, 3",
            "Device topology dimensions must be divisible by host topology dimensions",
        ),
    ],
)
def test_host_topology_must_match_the_device_topology(dims: str, host: str, message: str) -> None:
    with pytest.raises(MeshGraphDescriptorError, match=re.escape(message)) as e:
        mgd.parse_mesh_graph_descriptor(text(dims, host=host))
    assert f"host_topology dims [{host}]" in str(e.value) and "\nfix:" in str(e.value)
    # The same mesh with a matching host topology opens.
    ok = mgd.parse_mesh_graph_descriptor(text(dims, host=dims.replace("4", "2")))
    assert ok.mesh.host_dims == tuple(int(x) for x in dims.replace("4", "2").split(","))


def test_meshes_of_mixed_architectures_are_refused() -> None:
    two = text().split("top_level_instance")[0]
    two += text(arch="BLACKHOLE").replace('"M0"', '"M1"').split("top_level_instance")[0]
    top = 'top_level_instance { mesh { mesh_descriptor: "M0" mesh_id: 0 } }\n'
    with pytest.raises(
        MeshGraphDescriptorError,
        match=re.escape("All mesh descriptors must have the same architecture"),
    ) as e:
        mgd.parse_mesh_graph_descriptor(two + top)
    assert "'M1': 'BLACKHOLE'" in str(e.value)
    same = two.replace("BLACKHOLE", "WORMHOLE_B0")
    assert mgd.parse_mesh_graph_descriptor(same + top).mesh_sizes() == {0: 8}


def test_mesh_instances_through_a_graph() -> None:
    """What ``ttjax-run`` checks a rank binding against: every mesh instance's device count."""
    t = text(dims="1, 4").replace("top_level_instance", "#")
    t += (
        'graph_descriptors { name: "G0" type: "FABRIC" '
        'instances { mesh { mesh_descriptor: "M0" mesh_id: 0 } } '
        'instances { mesh { mesh_descriptor: "M0" mesh_id: 3 } } }\n'
        'top_level_instance { graph { graph_descriptor: "G0" graph_id: 0 } }\n'
    )
    assert mgd.parse_mesh_graph_descriptor(t).mesh_sizes() == {0: 4, 3: 4}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b'mesh_descriptors { name: "M\xff" }\n',
            r"m.textproto:1: mesh graph descriptor is not UTF-8",
        ),
        (b"", r"mesh graph descriptor '.*m.textproto' is empty\.\nfix: "),
    ],
)
def test_descriptor_file_bytes(tmp_path, content, message):
    path = tmp_path / "m.textproto"
    path.write_bytes(content)
    with pytest.raises(MeshGraphDescriptorError, match=message):
        mgd.load_mesh_graph_descriptor(path)


def test_any_edit_of_a_descriptor_is_a_descriptor_or_its_error():
    """Untrusted MGD text: hypothesis replaces a span of a shipped descriptor with any text;
    parsing gives a descriptor or a MeshGraphDescriptorError naming the file, never another error."""
    import warnings

    from hypothesis import given
    from hypothesis import strategies as st

    text = mgd.shipped_descriptors()["t3k_mesh_graph_descriptor.textproto"].read_text()

    @given(
        st.integers(0, len(text)),
        st.integers(0, 12),
        st.text(
            alphabet=st.sampled_from(list('{}[]:"_ -0123456789abcdeMNOPRTW\n#\xe9')), max_size=10
        ),
    )
    def check(start, length, new):
        edited = text[:start] + new + text[start + length :]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mgd.UnknownFieldWarning)
            try:
                mgd.parse_mesh_graph_descriptor(edited, "m.textproto")
            except MeshGraphDescriptorError as e:
                assert str(e).startswith("m.textproto") and "\nfix: " in str(e), str(e)

    check()
