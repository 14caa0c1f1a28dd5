"""Rank-binding files are validated before any rank starts; --dry-run shows each rank exactly."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from _launch import ROOT, write_bindings

from ttjax.distributed import (
    LauncherEnv,
    RankBindingError,
    descriptor_mesh_sizes,
    launcher_env,
    load_rank_bindings,
    parse_rank_bindings,
)
from ttjax.errors import ConfigError
from ttjax.run import main as run_main
from ttjax.run import mpirun_argv, plan

CONFIGS = ROOT / "configs" / "rank_bindings"


def test_shipped_big_mesh_binding():
    b = load_rank_bindings(CONFIGS / "2x4_big_mesh.yaml")
    assert [(r.rank, r.mesh_id, r.mesh_host_rank, r.visible_devices) for r in b.ranks] == [
        (0, 0, 0, (0, 1, 2, 3)),
        (1, 0, 1, (4, 5, 6, 7)),
    ]
    assert b.mesh_devices(0) == tuple(range(8))
    assert dict(b.global_env) == {"TT_METAL_LOGGER_LEVEL": "INFO"}
    assert b.mesh_graph_desc_path == str((CONFIGS / "t3k_2x4_two_hosts.textproto").resolve())


def test_shipped_pipeline_binding_and_descriptor():
    b = load_rank_bindings(CONFIGS / "2_stage_pipeline.yaml")
    assert b.mesh_ids() == (0, 1)
    assert [r.mesh_host_rank for r in b.ranks] == [0, 0]  # tt-run's default
    text = (CONFIGS / "two_1x4_meshes.textproto").read_text()
    assert descriptor_mesh_sizes(text) == {0: 4, 1: 4}


def _yaml(ranks: str, extra: str = "") -> str:
    return f"rank_bindings:\n{ranks}{extra}"


R0 = '  - {rank: 0, mesh_id: 0, mesh_host_rank: 0, env_overrides: {TT_VISIBLE_DEVICES: "0,1"}}\n'
R1 = '  - {rank: 1, mesh_id: 0, mesh_host_rank: 1, env_overrides: {TT_VISIBLE_DEVICES: "2,3"}}\n'


@pytest.mark.parametrize(
    "text,where,what",
    [
        (_yaml(R0 + R0), "rank 0", "appears twice"),
        (_yaml(R1), "rank_bindings", "ranks [0] are missing"),
        (_yaml(R0 + R1.replace("rank: 1", "rank: 2")), "rank_bindings", "ranks [1] are missing"),
        (_yaml(R0 + R1.replace("mesh_host_rank", "mesh_hots_rank")), "rank 1", "unknown key"),
        (_yaml(R0 + R1, "extra_env: {A: 1}\n"), "top level", "unknown key(s) ['extra_env']"),
        (
            _yaml(R0 + R1.replace('"2,3"', '"1,2"')),
            "rank 1.env_overrides.TT_VISIBLE_DEVICES",
            "device 1 of mesh 0 is also visible to rank 0",
        ),
        (
            _yaml(R0 + R1.replace("mesh_host_rank: 1", "mesh_host_rank: 0")),
            "rank 1.mesh_host_rank",
            "already taken in mesh 0 by rank 0",
        ),
        (
            _yaml(R0 + R1.replace('"2,3"', '"2,x"')),
            "rank 1.env_overrides.TT_VISIBLE_DEVICES",
            "'x'",
        ),
        (
            _yaml(
                R0 + R1.replace('env_overrides: {TT_VISIBLE_DEVICES: "2,3"}', "env_overrides: {}")
            ),
            "rank 1.env_overrides",
            "sets no TT_VISIBLE_DEVICES",
        ),
        (_yaml(R0 + R1.replace("mesh_id: 0", "mesh_id: -1")), "rank 1.mesh_id", "non-negative"),
        ("rank_bindings: [\n", "YAML", ""),
        ("- 1\n- 2\n", "top level", "must be a mapping"),
        ("rank_bindings: !!python/object/apply:os.system ['true']\n", "YAML", ""),
    ],
    ids=[
        "duplicate",
        "missing-0",
        "gap",
        "unknown-key",
        "unknown-top",
        "overlap",
        "host-rank",
        "bad-id",
        "no-visible",
        "negative",
        "syntax",
        "not-mapping",
        "unsafe-tag",
    ],
)
def test_bad_bindings_are_rejected(text, where, what):
    with pytest.raises(RankBindingError) as e:
        parse_rank_bindings(text, "b.yaml")
    msg = str(e.value)
    assert f"b.yaml: {where}" in msg and what in msg and "\nfix: " in msg
    assert isinstance(e.value, ConfigError) and isinstance(e.value, ValueError)


def test_descriptor_device_count_must_match(tmp_path):
    (tmp_path / "m.textproto").write_text((CONFIGS / "t3k_2x4_two_hosts.textproto").read_text())
    text = _yaml(R0 + R1, 'mesh_graph_desc_path: "m.textproto"\n')
    with pytest.raises(
        RankBindingError,
        match=r"rank 0\.env_overrides\.TT_VISIBLE_DEVICES: mesh 0 "
        r"has 8 devices in .* but its ranks bind 4 \(rank 0: 2, rank 1: 2\)",
    ):
        parse_rank_bindings(text, "b.yaml", str(tmp_path))
    other = text.replace("mesh_id: 0, mesh_host_rank: 1", "mesh_id: 1, mesh_host_rank: 0")
    with pytest.raises(RankBindingError, match=r"rank 1\.mesh_id: mesh 1 is not an instance"):
        parse_rank_bindings(other, "b.yaml", str(tmp_path))
    with pytest.raises(RankBindingError, match="does not exist"):
        parse_rank_bindings(_yaml(R0, 'mesh_graph_desc_path: "nope.textproto"\n'), "b.yaml", ".")
    (tmp_path / "bad.textproto").write_text('mesh_descriptors { name: "M0" ')
    with pytest.raises(RankBindingError, match="cannot be read as an MGD"):
        parse_rank_bindings(
            _yaml(R0, 'mesh_graph_desc_path: "bad.textproto"\n'), "b.yaml", str(tmp_path)
        )


def test_cli_rejects_a_bad_file_before_starting_anything(tmp_path, capsys):
    marker = tmp_path / "started"
    bad = tmp_path / "b.yaml"
    bad.write_text(_yaml(R0 + R0))
    assert run_main(["--rank-binding", str(bad), "--", "touch", str(marker)]) == 2
    err = capsys.readouterr().err
    assert "rank 0: appears twice" in err and "fix:" in err
    assert not marker.exists()


def test_dry_run_prints_each_rank_and_starts_nothing(tmp_path, capsys):
    b = write_bindings(tmp_path / "b.yaml", ["0,1", "2,3"], global_env={"FOO": "bar baz"})
    marker = tmp_path / "started"
    argv = ["--rank-binding", str(b), "--dry-run", "--cache-root", str(tmp_path)]
    assert run_main([*argv, "touch", str(marker)]) == 0
    assert not marker.exists()
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split(":", 1)[0] for ln in lines] == ["rank 0", "rank 1"]
    for rank, line in enumerate(lines):
        words = shlex.split(line.split(":", 1)[1])
        assert words[0] == "env" and words[-2:] == ["touch", str(marker)]
        env = dict(w.split("=", 1) for w in words[1:-2])
        assert env["TT_MESH_ID"] == "0" and env["TT_MESH_HOST_RANK"] == str(rank)
        assert env["TT_VISIBLE_DEVICES"] == ["0,1", "2,3"][rank]
        assert env["TTJAX_PROCESS_ID"] == str(rank) and env["TTJAX_NUM_PROCESSES"] == "2"
        assert env["TTJAX_COORDINATOR"].startswith("127.0.0.1:")
        assert env["TT_METAL_CACHE"] == env["JAX_COMPILATION_CACHE_DIR"]
        assert env["TT_METAL_CACHE"].startswith(str(tmp_path))
        assert env["TT_METAL_CACHE"].endswith(f"_rank{rank}")
        assert env["FOO"] == "bar baz"
        # What the rank will read back from that environment:
        got = launcher_env(env)
        assert isinstance(got, LauncherEnv)
        assert (got.process_id, got.mesh_id) == (rank, 0)
        assert got.visible_devices == ((0, 1), (2, 3))[rank]


def test_mpi_dry_run_is_one_mpmd_mpirun_line():
    b = load_rank_bindings(CONFIGS / "2x4_big_mesh.yaml")
    launches = plan(b, ["python", "prog.py"], coordinator="host1:1234", cache_root="/c")
    argv = mpirun_argv(launches, "--rankfile hosts.txt --mca btl tcp")
    assert argv[:6] == ["mpirun", "--tag-output", "--rankfile", "hosts.txt", "--mca", "btl"]
    assert argv.count(":") == 1 and argv.count("-np") == 2
    first, second = " ".join(argv).split(" : ")
    assert "-x TTJAX_PROCESS_ID=0" in first and "-x TT_VISIBLE_DEVICES=0,1,2,3" in first
    assert "-x TTJAX_PROCESS_ID=1" in second and "-x TT_MESH_HOST_RANK=1" in second
    assert first.endswith("python prog.py") and second.endswith("python prog.py")


def test_plan_env_overrides_beat_global_env(tmp_path):
    b = write_bindings(tmp_path / "b.yaml", ["0", "1"], global_env={"A": "g", "B": "g"})
    doc = yaml.safe_load(b.read_text())
    doc["rank_bindings"][1]["env_overrides"]["A"] = "r1"
    b.write_text(yaml.safe_dump(doc))
    launches = plan(load_rank_bindings(b), ["prog"], coordinator="127.0.0.1:1", cache_root="/c")
    assert [dict(x.env)["A"] for x in launches] == ["g", "r1"]
    assert [dict(x.env)["B"] for x in launches] == ["g", "g"]


def test_launcher_env_rejects_inconsistent_settings():
    good = {
        "TTJAX_NUM_PROCESSES": "2",
        "TTJAX_PROCESS_ID": "1",
        "TTJAX_COORDINATOR": "127.0.0.1:5",
        "TTJAX_RANK_TABLE": "0:0,1;0:2,3",
        "TT_VISIBLE_DEVICES": "2,3",
        "TT_MESH_ID": "0",
    }
    assert launcher_env(good).visible_devices == (2, 3)
    assert launcher_env({}) is None
    for key, value, what in [
        ("TTJAX_PROCESS_ID", "2", "is not below"),
        ("TTJAX_RANK_TABLE", "0:0,1", "has 1 entries for 2 processes"),
        ("TT_VISIBLE_DEVICES", "0,1", "disagrees with rank 1"),
        ("TTJAX_COORDINATOR", "nohost", "is not HOST:PORT"),
    ]:
        with pytest.raises(ConfigError, match=what):
            launcher_env(good | {key: value})


def test_no_launcher_env_means_initialize_refuses():
    from ttjax.distributed import initialize

    with pytest.raises(ConfigError, match="no launcher environment"):
        initialize()


def test_shipped_configs_parse(tmp_path):
    for path in sorted(Path(CONFIGS).glob("*.yaml")):
        assert load_rank_bindings(path).world_size >= 2


def test_rank_device_count_follows_visible_devices(monkeypatch):
    """Under ttjax-run a rank asks XLA for one CPU device per id in TT_VISIBLE_DEVICES."""
    from ttjax._src.core import config as _config

    monkeypatch.setenv("TTJAX_NUM_DEVICES", "32")
    monkeypatch.setenv("TT_VISIBLE_DEVICES", "4,5,6,7")
    assert _config.requested_num_devices() == 32  # not launched: the usual count
    monkeypatch.setenv("TTJAX_NUM_PROCESSES", "2")
    assert _config.requested_num_devices() == 4


def test_initialize_after_jax_started_says_how_to_fix():
    """In this (pytest) process JAX's backend is already up: joining a job must fail clearly."""
    import jax

    from ttjax.distributed import initialize, is_initialized

    jax.devices()
    before = jax.config.jax_cpu_collectives_implementation
    env = LauncherEnv(0, 2, "127.0.0.1:1", 0, 0, (0,), ((0, (0,)), (0, (1,))), 3, 3)
    try:
        with pytest.raises(
            ConfigError, match=r"(?s)Rank 0: jax.distributed could not start.*fix: "
        ):
            initialize(env)
    finally:
        jax.config.update("jax_cpu_collectives_implementation", before)
    assert not is_initialized()


def test_launcher_reads_the_descriptor_with_the_schema_checked_parser(tmp_path):
    """ttjax-run checks the MGD with ttjax.mgd (TTML's parser): tt-metal's refusals name the
    mesh, and a field the schema lacks is skipped with a warning naming it."""
    good = (CONFIGS / "t3k_2x4_two_hosts.textproto").read_text()
    bad = tmp_path / "bad.textproto"
    bad.write_text(
        good.replace("host_topology { dims: [ 2, 1 ] }", "host_topology { dims: [ 2 ] }")
    )
    r1 = R1.replace('"2,3"', '"4,5,6,7"')
    text = _yaml(R0.replace('"0,1"', '"0,1,2,3"') + r1, 'mesh_graph_desc_path: "bad.textproto"\n')
    with pytest.raises(RankBindingError) as e:
        parse_rank_bindings(text, "b.yaml", str(tmp_path))
    msg = str(e.value)
    assert "b.yaml: mesh_graph_desc_path:" in msg
    assert "Device and host topology dimensions must be the same size (Mesh: M0)" in msg
    assert "\nfix: give host_topology one entry per device dimension" in msg
    future = tmp_path / "future.textproto"
    future.write_text(good.replace('  name: "M0"\n', '  name: "M0"\n  express_lanes: 4\n'))
    text = text.replace("bad.textproto", "future.textproto")
    with pytest.warns(UserWarning, match=r"future.textproto:4:3: field 'express_lanes'"):
        b = parse_rank_bindings(text, "b.yaml", str(tmp_path))
    assert b.mesh_devices(0) == tuple(range(8))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"rank_bindings:\n  - rank: 0 # \xe9\n", r"b.yaml:2: rank-binding file is not UTF-8"),
        (b"\n", r"rank-binding file '.*b.yaml' is empty\.\nfix: "),
        (b"rank_bindings: {0: 1}\n", r"rank_bindings.*must be a non-empty list"),
        (b"rank_bindings:\n  - [0, 1]\n", r"rank_bindings\[0\]"),
    ],
)
def test_binding_file_bytes_and_shapes(tmp_path, content, message):
    path = tmp_path / "b.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_rank_bindings(path)


def test_any_value_at_any_key_path_is_a_binding_error_or_bindings(tmp_path):
    """Untrusted rank-binding files: hypothesis puts any YAML value at any key path of a valid
    file; parsing gives bindings or a RankBindingError naming the file, never another error."""
    from hypothesis import given
    from hypothesis import strategies as st

    base = yaml.safe_load((ROOT / "configs" / "rank_bindings" / "2x4_big_mesh.yaml").read_text())
    base["mesh_graph_desc_path"] = str(
        ROOT / "configs" / "rank_bindings" / "t3k_2x4_two_hosts.textproto"
    )
    paths = [("rank_bindings",), ("global_env",), ("mesh_graph_desc_path",)]
    for i, entry in enumerate(base["rank_bindings"]):
        paths += [("rank_bindings", i, k) for k in entry]
        paths += [("rank_bindings", i, "env_overrides", "TT_VISIBLE_DEVICES")]
    values = st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-3, 10), st.floats(), st.text(max_size=6)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=2)
        ),
        max_leaves=5,
    )

    @given(st.sampled_from(paths), values)
    def check(path, value):
        doc = yaml.safe_load(yaml.safe_dump(base))
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        try:
            parse_rank_bindings(yaml.safe_dump(doc), "b.yaml", str(tmp_path))
        except RankBindingError as e:
            assert str(e).startswith("b.yaml") and "\nfix: " in str(e), str(e)

    check()


def test_a_rank_without_visible_devices_gets_a_fix_line_with_an_example():
    """The whole fix line, word for word (it once read "entry.g." for "e.g.")."""
    no_env = R0 + R1.replace('env_overrides: {TT_VISIBLE_DEVICES: "2,3"}', "env_overrides: {}")
    with pytest.raises(RankBindingError) as e:
        parse_rank_bindings(_yaml(no_env), "b.yaml")
    assert str(e.value).splitlines()[-1] == (
        'fix: list the global device ids this rank drives, e.g. TT_VISIBLE_DEVICES: "0,1".'
    )
