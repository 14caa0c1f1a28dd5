"""The per-op cost model: each rule against a hand computation from the published figures,
monotonicity, capture of a ttjax program's TT-NN ops, the model programs, and the CLIs."""

import itertools
import json
import math
import time

import pytest

import ttjax as ttnn
from ttjax._src.core.errors import ConfigError
from ttjax._src.tools import opcost, opgalaxy, opmodels, opvision
from ttjax._src.tools.opcost import OpCalibration, OpRecord, TensorInfo, price, price_op
from ttjax.inspect import main

# A calibration whose every factor shows in the result: a rule that multiplies where it should
# divide, or uses another bandwidth, gives another number. Each op costs the larger of its rule's
# work and the per-op floor (5 us decode, 50 us prefill here).
CAL = OpCalibration(0.8, 0.5, {"decode": 5e-6, "prefill": 50e-6}, "test")
CCL_LATENCY = 8e-6  # opcost.CCL_OP_LATENCY_SECONDS, from the Galaxy Llama's CI timings


def _linear(rows, k, n, wdt="bfloat8_b", sharded=True, fid=None, cores=None, buf="L1"):
    settings = {}
    if fid:
        settings["fidelity"] = fid
    if cores:
        settings["cores"] = cores
    x = TensorInfo((rows, k), "bfloat16", buf, True)
    w = TensorInfo((k, n), wdt, "DRAM", sharded)
    return OpRecord("linear", (x, w), (TensorInfo((rows, n), "bfloat16", buf, True),), settings)


def test_decode_matmul_is_its_weight_read_at_the_dram_sharded_rate():
    # 3072 columns: 96 tiles, 8 on each of the 12 DRAM banks
    c = price_op(_linear(32, 4096, 3072, fid="hifi2"), "n150", "decode", CAL)
    weight = 4096 * 3072 * 1.0625  # bfloat8_b: 1088 bytes per 32x32 tile
    assert c.bound == "DRAM"
    assert c.seconds == pytest.approx(weight / (240e9 * 0.8), rel=1e-9)
    interleaved = price_op(_linear(32, 4096, 3072, sharded=False), "n150", "decode", CAL)
    assert interleaved.seconds == pytest.approx(weight / (190e9 * 0.8), rel=1e-9)


def test_a_dram_sharded_weight_is_read_as_whole_tiles_on_each_of_twelve_banks():
    # model_config.py create_dram_sharded_mem_config pads N to 12 x 32 columns; each bank's
    # reader reads ceil(Nt / 12) tiles per row of K (the DRAM-sharded program factory, line 140)
    c = price_op(_linear(32, 4096, 4096, fid="hifi2"), "n150", "decode", CAL)
    assert c.seconds == pytest.approx(4096 * 32 * 132 * 1.0625 / (240e9 * 0.8), rel=1e-9)
    # 40 tiles (Llama-3.1-70B's QKV per T3000 chip): 4 per bank, read as 48
    qkv = price_op(_linear(32, 8192, 1280, fid="hifi2"), "t3000", "decode", CAL)
    assert qkv.seconds == pytest.approx(8192 * 48 * 32 * 1.0625 / (240e9 * 0.8), rel=1e-9)
    # interleaved weights are read as they are
    inter = price_op(_linear(32, 4096, 4096, sharded=False), "n150", "decode", CAL)
    assert inter.seconds == pytest.approx(4096 * 4096 * 1.0625 / (190e9 * 0.8), rel=1e-9)


def test_a_dram_sharded_matmul_computes_on_the_twelve_bank_cores_at_the_ideal_rate():
    # the DRAM-sharded program factory computes on the 12 reader cores, ceil(96 / 12) = 8 output
    # tiles each; at matmul_op.cpp's ideal rate (no fitted efficiency): 2 x 128 x 96 tile products
    # x 64 cycles (HiFi4) / 12 cores, over its weight read (mlp.py: "FLOP-bound ... with HiFi4")
    c = price_op(_linear(64, 4096, 3072, fid="hifi4", cores=64), "n150", "decode", CAL)
    assert c.bound == "compute" and "/ 12 cores" in c.rule
    assert c.seconds == pytest.approx(2 * 128 * 96 * 64 / 12 / 1e9, rel=1e-9)
    # at HiFi2 it is its weight read (the report's Llama3-70 decode matmuls: DRAM-bound)
    hifi2 = price_op(_linear(64, 4096, 3072, fid="hifi2"), "n150", "decode", CAL)
    assert hifi2.seconds == pytest.approx(4096 * 3072 * 1.0625 / (240e9 * 0.8), rel=1e-9)
    # a prefetcher's ring matmul computes on its own cores at the fitted efficiency
    ring = _linear(64, 4096, 3072, fid="hifi4", cores=16)
    ring = OpRecord(ring.name, ring.inputs, ring.outputs, {**ring.settings, "ring": True})
    r = price_op(ring, "n150", "decode", CAL)
    assert r.seconds == pytest.approx(2 * 128 * 96 * 64 / 16 / 1e9 / 0.5, rel=1e-9)


def test_a_matmul_with_few_output_tiles_computes_on_fewer_cores():
    # 4 x 4 output tiles on a 2-D grid: 16 cores of the 64 (one output tile each)
    rec = _linear(128, 4096, 128, sharded=False, fid="hifi4")
    rec = OpRecord(rec.name, rec.inputs, rec.outputs, {**rec.settings, "mcast": "2d"})
    c = price_op(rec, "n150", "decode", CAL)
    assert c.bound == "compute"
    assert c.seconds == pytest.approx(4 * 128 * 4 * 64 / 16 / 1e9 / 0.5, rel=1e-9)
    # without a 2-D program config TT-NN may split the output's tiles 1-D: 4 x 4 -> 4 cores x 4
    one_d = price_op(_linear(128, 4096, 128, sharded=False, fid="hifi4"), "n150", "decode", CAL)
    assert one_d.seconds == pytest.approx(c.seconds)


def test_prefill_matmul_is_tiles_times_cycles_over_cores_at_its_fidelity():
    rec = _linear(2048, 4096, 4096, wdt="bfloat4_b", fid="lofi", buf="DRAM", sharded=False)
    c = price_op(rec, "n150", "prefill", CAL)
    tiles = (2048 // 32) * (4096 // 32) * (4096 // 32)
    compute = tiles * 16 / 64 / 1e9 / 0.5  # 16 cycles per tile at LoFi on 64 cores, eff 0.5
    assert c.bound == "compute"
    assert c.seconds == pytest.approx(compute, rel=1e-9)
    hifi4 = _linear(2048, 4096, 4096, fid="hifi4", buf="DRAM", sharded=False)
    hifi4 = price_op(hifi4, "n150", "prefill", CAL)
    assert hifi4.seconds == pytest.approx(4 * compute, rel=1e-9)
    # a batch folds into M, as TT-NN folds it: [64, 32, K] @ [K, N] is one 2048-row product
    x3 = TensorInfo((64, 32, 4096), "bfloat16", "DRAM")
    rec3 = OpRecord("matmul", (x3, rec.inputs[1]), (TensorInfo((64, 32, 4096), "bfloat16", "DRAM"),),
                    {"fidelity": "lofi"})  # fmt: skip
    assert price_op(rec3, "n150", "prefill", CAL).seconds == pytest.approx(c.seconds)


def test_sdpa_decode_reads_k_and_v_for_the_positions_at_flashdecode_rate():
    q = TensorInfo((1, 32, 8, 128), "bfloat16", "L1", True)
    cache = TensorInfo((32, 1, 1024, 128), "bfloat8_b", "DRAM")
    rec = OpRecord("scaled_dot_product_attention_decode", (q, cache, cache), (q,),
                   {"positions": 256, "decode": True})  # fmt: skip
    c = price_op(rec, "t3000", "decode", CAL)
    kv = 2 * 32 * 1 * 256 * 128 * 1.0625
    assert c.seconds == pytest.approx(kv / (180e9 * 0.8), rel=1e-9)


def test_ccl_all_reduce_on_the_t3000_ring_by_hand():
    x = TensorInfo((32, 8192), "bfloat8_b", "L1", True)
    rec = OpRecord("all_reduce", (x,), (x,), {"group_size": 8, "num_links": 1, "kind": "all-reduce",
                                              "topology": "ring"})  # fmt: skip
    c = price_op(rec, "t3000", "decode", CAL)
    per_chip = 2 * 32 * 8192 * 1.0625 * 7 / 8  # reduce-scatter + all-gather
    hops = 2 * math.ceil(7 / 2)  # both ring directions, two phases
    assert c.seconds == pytest.approx(
        CCL_LATENCY + hops * 650e-9 + per_chip / (2 * 12.5e9), rel=1e-9
    )
    line = price_op(OpRecord("all_gather", (x,), (x,), {"group_size": 4, "topology": "line"}),
                    "galaxy", "decode", CAL)  # fmt: skip
    gathered = 32 * 8192 * 1.0625 * 3 / 4
    assert line.seconds == pytest.approx(
        CCL_LATENCY + 3 * 650e-9 + gathered * 4 / 6 / 12.5e9, rel=1e-9
    )


def test_embedding_and_bandwidth_ops_by_hand():
    idx = TensorInfo((32,), "uint32", "L1")
    table = TensorInfo((128256, 4096), "bfloat16", "DRAM")
    out = TensorInfo((32, 4096), "bfloat16", "L1", True)
    # no floor (dispatch=0): the rule's own figure
    c = price_op(OpRecord("embedding", (idx, table), (out,)), "n150", "decode", CAL, dispatch=0.0)
    l1 = 32 * 4096 * 2 / (64 * 28 * 1e9)
    assert c.seconds == pytest.approx(32 * 4096 * 2 / (190e9 * 0.8) + l1, rel=1e-9)
    add = OpRecord("add", (out, out), (out,), {"cores": 16})
    assert price_op(add, "n150", "decode", CAL, dispatch=0.0).seconds == pytest.approx(
        3 * 32 * 4096 * 2 / (16 * 28 * 1e9), rel=1e-9
    )
    dram = TensorInfo((32, 4096), "bfloat16", "DRAM")
    norm = price_op(OpRecord("rms_norm", (dram,), (dram,)), "n150", "decode", CAL, dispatch=0.0)
    assert norm.seconds == pytest.approx(2 * 32 * 4096 * 2 / (190e9 * 0.8), rel=1e-9)


def test_an_op_costs_its_work_or_the_per_op_floor_whichever_is_larger():
    out = TensorInfo((32, 4096), "bfloat16", "L1", True)
    add = OpRecord("add", (out, out), (out,), {"cores": 16})
    work = 3 * 32 * 4096 * 2 / (16 * 28 * 1e9)  # 0.88 us
    short = price_op(add, "n150", "decode", CAL)
    assert short.seconds == pytest.approx(5e-6) and short.bound == "dispatch"
    assert price_op(add, "n150", "decode", CAL, dispatch=0.5e-6).seconds == pytest.approx(work)
    assert price_op(add, "n150", "prefill", CAL).seconds == pytest.approx(50e-6)


def test_the_step_is_the_sum_along_the_program_and_the_prefetcher_overlaps_weight_reads():
    mm = _linear(32, 8192, 8192)  # a prefetcher's ring matmul (the Galaxy Llama's) on 64 cores
    mm = OpRecord(mm.name, mm.inputs, mm.outputs, {"ring": True})
    add = OpRecord("add", mm.outputs * 2, mm.outputs)
    ops = [OpRecord(mm.name, mm.inputs, mm.outputs, mm.settings, count=80), add]
    p = price(ops, "n150", calibration=CAL)
    a, b = price_op(mm, "n150", "decode", CAL), price_op(add, "n150", "decode", CAL)
    assert p.step_seconds == pytest.approx(80 * a.seconds + b.seconds)
    assert p.dispatch_seconds == pytest.approx(5e-6)  # the add is at the floor, the matmul not
    pre = price([*ops, OpRecord("dram_prefetcher", (), ())], "n150", calibration=CAL)
    weights = 80 * 8192 * 264 * 32 * 1.0625 / (240e9 * 0.8)  # 256 tiles read as 12 x 22
    assert pre.prefetch_seconds == pytest.approx(weights)
    # with the weights prefetched the matmul is its compute (256 x 32 cycles / 64 cores) or the
    # L1 traffic of its activations, or the floor; the prefetcher op and the add at the floor
    compute = 256 * 256 * 32 / 64 / 1e9 / 0.5
    act = 2 * 32 * 8192 * 2 / (64 * 28 * 1e9)
    assert pre.ops_seconds == pytest.approx(80 * max(compute, act, 5e-6) + 2 * 5e-6)
    assert pre.step_seconds == pytest.approx(max(weights, pre.ops_seconds))
    assert pre.step_seconds < p.step_seconds
    # an op that reads its own weights with the prefetcher running (the Galaxy's LM head)
    own = OpRecord(mm.name, mm.inputs, mm.outputs, {**mm.settings, "prefetched": False})
    both = price([*ops, own, OpRecord("dram_prefetcher", (), ())], "n150", calibration=CAL)
    assert both.prefetch_seconds == pytest.approx(weights)
    assert both.ops_seconds == pytest.approx(pre.ops_seconds + a.seconds)


@pytest.mark.parametrize("rows", [32, 4096])
def test_more_cores_lower_fidelity_more_links_are_never_slower(rows):
    def t(**kw):
        return price_op(
            _linear(rows, 4096, 14336, buf="DRAM", **kw), "n150", "prefill", CAL
        ).seconds

    by_cores = [t(cores=c, fid="hifi2") for c in (8, 16, 32, 64)]
    assert all(x >= y for x, y in itertools.pairwise(by_cores))
    by_fid = [t(fid=f) for f in ("hifi4", "hifi3", "hifi2", "lofi")]
    assert all(x >= y for x, y in itertools.pairwise(by_fid))
    x = TensorInfo((rows, 8192), "bfloat16", "DRAM")
    by_links = [
        price_op(
            OpRecord("all_gather", (x,), (x,), {"group_size": 8, "num_links": n}),
            "galaxy",
            "decode",
            CAL,
        ).seconds
        for n in (1, 2, 3, 4)
    ]
    assert all(x > y for x, y in itertools.pairwise(by_links))


def test_bad_settings_name_the_value_and_the_fix():
    with pytest.raises(ttnn.errors.ConfigError, match="fix:"):
        price_op(_linear(32, 64, 64, fid="hifi9"), "n150")
    x = TensorInfo((32, 64))
    with pytest.raises(ttnn.errors.ConfigError, match="num_links"):
        price_op(OpRecord("all_gather", (x,), (x,), {"num_links": 0}), "t3000")
    with pytest.raises(ttnn.errors.ConfigError, match="unknown config 'llama-9'"):
        opmodels.get_model("llama-9")


def test_capture_reads_each_ops_settings_and_scan_counts_its_body(n300):
    a = ttnn.abstract_tensor((32, 256), ttnn.bfloat16, device=n300, layout=ttnn.TILE_LAYOUT)
    w = ttnn.abstract_tensor((3, 256, 256), ttnn.bfloat4_b, device=n300)
    ckc = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi3)

    def step(x, ws):
        def body(h, wi):
            h = ttnn.linear(h, wi, compute_kernel_config=ckc)
            return ttnn.add(h, h), None

        h, _ = ttnn.scan(body, x, ws)
        return ttnn.all_gather(h, dim=1, num_links=1)

    ops = opcost.capture(step, a, w)
    names = [(o.name, o.count) for o in ops]
    assert names == [("linear", 3), ("add", 3), ("all_gather", 1)]
    lin = ops[0]
    assert lin.settings["fidelity"] == "hifi3" and lin.inputs[1].dtype == "bfloat4_b"
    assert lin.inputs[1].shape == (256, 256)
    assert ops[2].settings["num_links"] == 1 and ops[2].settings["group_size"] == 2
    p = price(ops, "n300", calibration=CAL)
    by_hand = sum(price_op(o, "n300", "decode", CAL).seconds * o.count for o in ops)
    assert p.step_seconds == pytest.approx(by_hand)


def test_hf_config_json_becomes_a_program(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
           "num_key_value_heads": 2, "num_hidden_layers": 3, "intermediate_size": 512,
           "vocab_size": 1000}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec = opmodels.get_model(str(path))
    assert (spec.dim, spec.n_layers, spec.head_dim, spec.n_kv_heads) == (256, 3, 64, 2)
    ops = opmodels.model_program(spec, "n300", batch=1)
    mats = [o for o in ops if o.family == "matmul" and o.count == 3]
    # per layer on 2 chips: QKV (2 + 2 x 1 heads of 64 per chip); WO and FF2 give partial sums,
    # FF1, FF3 512 / 2 columns each
    assert [o.inputs[1].shape for o in mats] == [
        (256, 256),
        (128, 256),
        (256, 256),
        (256, 256),
        (256, 256),
    ]
    ccls = [o.name for o in ops if o.family == "ccl" and o.count == 3]
    # each norm gathers the fractured residual; WO's and FF2's sums are reduce-scattered
    assert ccls == ["all_gather_async", "reduce_scatter_minimal_async"] * 2
    # on a T3000 ring with dim/32/8 a multiple of 8, WO is all_gather_matmul_async: the heads
    # gathered, WO from DRAM interleaved on the (8, 1) grid (model_config.py)
    ops8 = opmodels.model_program("llama-3.1-8b", "t3000", batch=1)
    wo = next(o for o in ops8 if o.name == "linear_wo")
    assert wo.inputs[1].shape == (4096, 512) and wo.settings["cores"] == 8
    assert "all_gather_matmul_async" in [o.name for o in ops8]
    assert sum(o.count for o in ops8 if o.name == "linear_qkv") == 32
    falcon = opmodels.spec_from_hf({"model_type": "falcon", "hidden_size": 4544, "n_head": 71,
                                    "n_layer": 32, "multi_query": True, "vocab_size": 65024})  # fmt: skip
    assert (falcon.n_kv_heads, falcon.ffn_dim, falcon.gated) == (1, 4 * 4544, False)


def test_calibration_rows_stay_within_ten_percent():
    results = opmodels.evaluate_rows([r for r in opmodels.ROWS if r.fitted])
    assert len(results) == 10
    assert max(abs(r["error"]) for r in results) < 0.10, results


def test_plan_cli_takes_a_config_json_and_lists_the_models(tmp_path, capsys):
    cfg = {"hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 2,
           "intermediate_size": 1024, "vocab_size": 2048}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out_json = tmp_path / "plan.json"
    assert main(["plan", "--model", str(path), "--system", "t3000", "--batch", "8",
                 "--json", str(out_json)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "per-op model" in out and "TP=8" in out
    rows = json.loads(out_json.read_text())
    assert (
        len(rows) == 8
        and rows[0]["tokens_per_second_per_user"] >= rows[-1]["tokens_per_second_per_user"]
    )
    assert (
        main(["plan", "--model", "llama-3.2-1b", "--system", "n300", "--batch", "1", "--ttft"]) == 0
    )
    assert "time to first token" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert "llama-3.2-1b" in capsys.readouterr().out


def lookup_target(mesh, dtype="bfloat16", batch=1):
    """A target whose ``dtype`` is looked up in a table (as models.llama.inspect_targets does)."""
    table = {"bfloat16": ttnn.bfloat16, "bfloat8_b": ttnn.bfloat8_b}
    t = ttnn.abstract_tensor((32 * batch, 64), table[dtype], device=mesh, layout=ttnn.TILE_LAYOUT)
    return (lambda x: ttnn.add(x, x)), (t,)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--arg", "dtype=bf8"], "--arg dtype=bf8: tests.test_opcost:lookup_target does not know 'bf8'.\nfix: valid values: bfloat16, bfloat8_b."),
        (["--arg", "dtyp=bfloat16"], "has no argument 'dtyp'.\nfix: one of dtype, batch"),
    ],
)  # fmt: skip
def test_inspect_arg_errors_name_the_valid_keys_and_values(args, needle, capsys):
    assert main(["inspect", "tests.test_opcost:lookup_target", "--mesh", "1x2", *args]) == 1
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_inspect_lists_a_targets_arguments_and_prices_its_ops(capsys):
    assert main(["inspect", "tests.test_opcost:lookup_target", "--list-args"]) == 0
    out = capsys.readouterr().out
    assert "dtype" in out and "default 'bfloat16'" in out and "batch" in out
    assert (
        main(["inspect", "tests.test_opcost:lookup_target", "--mesh", "1x2", "--system", "n300"])
        == 0
    )
    out = capsys.readouterr().out
    assert "per-op model on n300" in out and "costliest ops" in out
    # the op is captured although the compile before it traced the same function
    assert "1 ops, dominant: elementwise" in out and "    add " in out


@pytest.mark.slow
def test_capturing_and_pricing_a_70b_decode_takes_under_two_minutes():
    from models.llama import perf

    start = time.perf_counter()
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 4))
    fn, args, _ = perf.decode_target(mesh, "llama-3.1-70b", batch=32)
    ops = opcost.capture(fn, *args)
    p = price(ops, "t3000", users=32)
    assert time.perf_counter() - start < 120
    assert sum(o.count for o in ops if o.family == "matmul") >= 80 * 5
    assert 1.0 < p.tokens_per_second_per_user < 100.0


def test_distributed_norm_halves_are_norms_and_galaxy_fused_ops_are_ccls():
    fam = opcost.family_of
    assert fam("rms_norm_pre_all_gather") == fam("layer_norm_post_all_gather") == "norm"
    assert fam("all_gather_async") == fam("all_gather_concat") == "ccl"
    assert fam("fused_rms_1_1_32_8192") == fam("llama_rs_create_heads") == "ccl"
    assert fam("llama_rs_matmul") == fam("llama_reduce_scatter") == "ccl"


def test_a_fused_ccl_is_its_collective_plus_its_local_op_by_hand():
    x = TensorInfo((32, 2048), "bfloat16", "L1", True)
    stats = TensorInfo((32, 32), "bfloat16", "L1", True)
    local = OpRecord("rms_norm", (x, x), (x,))
    rec = OpRecord("fused_rms_1_1_32_8192", (stats,), (TensorInfo((32, 128)),),
                   {"kind": "all-gather", "group_size": 4, "num_links": 1, "topology": "ring",
                    "fused": local})  # fmt: skip
    c = price_op(rec, "galaxy", "decode", CAL)
    gathered = 32 * 128 * 2 * 3 / 4  # the stats of 4 chips, 3 of them from the others
    norm = 3 * 32 * 2048 * 2 / (64 * 28e9)  # x, residual in, out: L1 at 28 B/cycle on 64 cores
    ring = 2 * 650e-9 + gathered / (2 * 12.5e9)  # 4 chips: ceil(3/2) hops, half the bytes each way
    assert c.seconds == pytest.approx(CCL_LATENCY + ring + norm, rel=1e-9)
    assert c.record.family == "ccl" and c.bound == "Ethernet"


def test_the_galaxy_llama_program_by_hand():
    spec = opmodels.get_model("llama-3.1-70b")
    ops = opgalaxy.galaxy_program(spec.dim, spec.n_layers, spec.n_heads, spec.n_kv_heads,
                                  spec.head_dim, spec.ffn_dim, batch=32)  # fmt: skip
    layer = [o for o in ops if o.count == 80]
    assert len(layer) == 16  # decoder_perf_targets_4u.json times 16 ops per decoder layer
    assert len([o for o in ops if o.count == 1]) == 1 + 22  # the prefetcher + its model tail
    mats = {o.name: o.inputs[1].shape for o in layer if o.family == "matmul"}
    # per chip, N padded to whole tiles on the 24 ring cores (model_config.py "padded N")
    assert mats == {"matmul_qkv": (2048, 1536), "matmul_wo": (1280, 2304),
                    "matmul_ff2": (3584, 2304)}  # fmt: skip
    ff13 = next(o for o in layer if o.name == "llama_rs_matmul").settings["fused"]
    assert ff13.inputs[1].shape == (2048, 2 * 3840) and ff13.inputs[1].dtype == "bfloat4_b"
    p = price(ops, "galaxy", users=32, calibration=CAL, dispatch=opgalaxy.GALAXY_OP_TO_OP_SECONDS)
    assert p.prefetcher
    # every decoder weight streams from the prefetcher: QKV, WO, FF2 bfloat8_b, FF1+FF3 bfloat4_b
    per_layer = (2048 * 1536 + 1280 * 2304 + 3584 * 2304) * 1.0625 + 2048 * 7680 * 0.5625
    assert p.prefetch_seconds == pytest.approx(80 * per_layer / (240e9 * 0.8))
    assert p.step_seconds == pytest.approx(max(p.ops_seconds, p.prefetch_seconds))
    with pytest.raises(ttnn.errors.ConfigError, match="TP=32 on a 32-chip Galaxy"):
        opmodels.predict_model("llama-3.1-70b", "t3000", batch=32, program="llama3_70b_galaxy")
    plan = opmodels.plan_model("llama-3.1-70b", "galaxy", batch=32)
    assert "TP=32 (llama3_70b_galaxy)" in [r.layout for r in plan]
    small = opmodels.plan_model("llama-3.2-1b", "galaxy", batch=32)  # the program is dim 8192's
    assert "TP=32 (llama3_70b_galaxy)" not in [r.layout for r in small]


def test_qwen3_normalises_q_and_k_and_qwen_pads_its_mlp():
    q3 = opmodels.model_program("qwen3-32b", "t3000", batch=1)
    q25 = opmodels.model_program("qwen2.5-32b", "t3000", batch=1)
    per_layer = lambda ops: sum(1 for o in ops if o.count == 64)  # noqa: E731
    # attention.py norm_reshard: to_memory_config, rms_norm, to_memory_config for Q and for K
    assert per_layer(q3) - per_layer(q25) == 6 - 1  # Qwen2.5 adds the QKV bias instead
    # model_config.py PAD_MLP_CORES=32 for Qwen2.5-72B: 29568 -> a multiple of 32 x 32 x 8
    ff1 = next(o for o in opmodels.model_program("qwen2.5-72b", "t3000") if o.name == "linear_ff1")
    assert ff1.inputs[1].shape == (8192, 32768 // 8)


def test_greedy_decode_takes_the_argmax_on_device():
    on = [o.name for o in opmodels.model_program("llama-3.2-1b", "n150", batch=1)]
    off = [o.name for o in opmodels.model_program("llama-3.2-1b", "n150", argmax_on_device=False)]
    assert on[-5:] == ["untilize", "argmax", "plus_one", "plus_one", "copy"]
    assert off[-2:] == ["untilize", "to_memory_config"]
    # lm_head.py: 128256 columns over at most 668 per core on 64 cores: 3 splits of 42752
    ops = opmodels.model_program("llama-3.2-1b", "n150", batch=1)
    heads = [o for o in ops if o.name == "linear_lm_head"]
    assert [o.inputs[1].shape for o in heads] == [(2048, 42752)] * 3
    assert on.index("concat") == on.index("linear_lm_head") + 6


def test_prefill_lm_head_is_dram_sharded_and_every_chips_logits_are_read_by_hand():
    # model.py 508-523: the last tile of rows sliced, normed, resharded to the LM head's grid;
    # lm_head.py: DRAM-sharded weights and dram_matmul_config in prefill as in decode
    pre = opmodels.model_program("llama-3.1-8b", "n300", phase="prefill")
    names = [o.name for o in pre]
    heads = [o for o in pre if o.name == "linear_lm_head"]
    assert len(heads) == 2  # 64128 columns per chip, at most 668 x 64 per split
    lm = heads[0]
    assert lm.inputs[0].shape == (32, 4096) and lm.inputs[1].sharded and lm.settings["dram_sharded"]
    assert lm.outputs[0].dtype == "bfloat8_b"  # lm_head.py 144
    c = price_op(lm, "n300", "prefill", CAL, dispatch=0.0)
    # 32064 columns: 1002 tiles, 84 per DRAM bank (1008), at the DRAM-sharded rate
    assert c.bound == "DRAM"
    assert c.seconds == pytest.approx(4096 * 1008 * 32 * 1.0625 / (240e9 * 0.8), rel=1e-9)
    assert names[names.index("linear_lm_head") - 1] == "interleaved_to_sharded"
    assert "slice" in names[names.index("linear_lm_head") - 5 :]
    # no gather on device (ccl.py 85-86, model.py's gather is decode-only): to_layout, then
    # every chip's logits read (generator.py 128-129 -> model.py 312-317 tt_out.cpu())
    assert names[-3:] == ["concat", "to_layout", "to_host"]
    assert "all_gather_async" not in names[names.index("linear_lm_head") :]
    host = price_op(pre[-1], "n300", "prefill", CAL, dispatch=0.0)
    nbytes = 32 * 64128 * 2  # row-major bfloat16, the PCIe chip then the one behind it
    assert host.seconds == pytest.approx(nbytes / 10.15e9 + nbytes / 4.51e9, rel=1e-9)
    # decode gathers the bfloat8_b logits (model.py 425-441), half the bytes of bfloat16
    dec = opmodels.model_program("llama-3.1-8b", "n300")
    ag = [o for o in dec if o.name == "all_gather_async"][-1]
    assert ag.inputs[0].dtype == ag.outputs[0].dtype == "bfloat8_b"
    assert ag.outputs[0].shape == (32, 128256)


def test_one_reader_checks_both_calibrations(tmp_path):
    bad = tmp_path / "cal.json"
    bad.write_text('{"per_op": {"dram_efficiency": 0.9, "compute_efficiency": 0.5}}')
    with pytest.raises(ttnn.errors.ConfigError, match=r"per_op lacks or mistypes.*\n.*opmodels"):
        opcost.load_op_calibration(bad)
    bad.write_text('{"per_op": {"dram_efficiency": 3, "compute_efficiency": 0.5, '
                   '"dispatch_seconds": {"decode": 1e-5, "prefill": 1e-5}}}')  # fmt: skip
    with pytest.raises(ttnn.errors.ConfigError, match=r"outside \(0, 1.5\]"):
        opcost.load_op_calibration(bad)
    bad.write_text("{}")
    assert opcost.load_op_calibration(bad) == OpCalibration()


def test_calibration_rows_through_the_plan_cli_stay_within_ten_percent(tmp_path, capsys):
    """As a user asks: ``ttjax plan --model M --system S --batch B [--ttft] --json F``, the row of
    the layout each calibration row publishes."""
    for i, r in enumerate(r for r in opmodels.ROWS if r.fitted):
        out = tmp_path / f"{i}.json"
        argv = ["plan", "--model", r.model, "--system", r.system, "--batch", str(r.batch),
                "--json", str(out)] + (["--ttft"] if r.metric == "TTFT ms" else [])  # fmt: skip
        assert main(argv) == 0
        row = next(x for x in json.loads(out.read_text())
                   if x["tp"] == r.tp and x["recipe"] == "performance")  # fmt: skip
        got = (
            row["tokens_per_second_per_user"]
            if r.metric == "tok/s/u"
            else row["step_seconds"] * 1e3
        )
        assert abs(got / r.value - 1) < 0.10, (r.label, r.metric, got, r.value)
    capsys.readouterr()


def test_tg_all_reduces_and_mixtral_experts_follow_the_code():
    ops = [
        o.name for o in opmodels.model_program("llama-3.1-8b", "galaxy", batch=1) if o.count == 32
    ]
    # ccl.py tt_all_reduce on TG (decode, sharded): all-gather, to L1, fast_reduce_nc, reshape;
    # at dim 4096 for QKV, WO, FF1, FF3 (mlp.py: dim < 8192) and FF2
    assert ops.count("fast_reduce_nc") == 5
    i = ops.index("fast_reduce_nc")
    assert ops[i - 2 : i + 2] == [
        "all_gather_async",
        "to_memory_config",
        "fast_reduce_nc",
        "reshape",
    ]
    moe = opmodels.model_program("mixtral-8x7b", "t3000", batch=32)
    experts = [o for o in moe if o.name.startswith(("linear_ff", "linear_gate")) and o.count == 32]
    # mixtral_mlp.py: dram_matmul_config(..., num_cores=8) for the expert's three matmuls
    assert [o.settings["cores"] for o in experts] == [64, 8, 8, 8]
    assert "moe" in [o.name for o in moe]
    # mixtral_moe.py 117-132 (prefill): top-k routing, the weights unsqueezed, then multiplied
    pre = [o.name for o in opmodels.model_program("mixtral-8x7b", "t3000", phase="prefill")]
    i = pre.index("linear_ff2")
    assert pre[i + 1 : i + 3] == ["reshape", "mul"]
    assert pre.count("reshape") == 1 + 2  # the embedding's, the unsqueeze, the all-reduce's


def test_tg_matmul_configs_and_the_ff1_ff3_all_reduce_cast_follow_the_code():
    ops = opmodels.model_program("llama-3.1-8b", "galaxy", batch=1)
    layer = [o for o in ops if o.count == 32]
    names = [o.name for o in layer]
    # mlp.py: FF1/FF3 outputs bfloat8_b all-reduced without dtype (bfloat16): ccl.py casts them to
    # L1 interleaved and back to sharded first, and gathers 2 bytes per element
    i = names.index("linear_ff3") + 1
    assert names[i : i + 6] == ["to_memory_config", "to_memory_config", "all_gather_async",
                                "to_memory_config", "fast_reduce_nc", "reshape"]  # fmt: skip
    assert layer[i + 2].inputs[0].dtype == "bfloat16"
    # attention.py: slice_mat @ QKV instead of sharded_to_interleaved on TG
    assert "matmul_slice" in names and "sharded_to_interleaved" not in names
    by = {o.name: o for o in layer}
    # WO on core_grid 4x8 from DRAM-interleaved weights, by hand: k = 32/8 heads x 128, n = 4096/4
    wo = by["linear_wo"]
    assert wo.settings["cores"] == 32 and not wo.inputs[1].sharded
    c = price_op(wo, "galaxy", "decode", CAL, dispatch=0.0)
    assert c.bound == "DRAM"
    assert c.seconds == pytest.approx(512 * 1024 * 1.0625 / (190e9 * 0.8), rel=1e-9)
    # QKV 1-D multicast on (8, lm rows = 4 at dim 4096); FF1, FF3, FF2 1-D on the 8x2 grid from
    # DRAM-interleaved weights (mlp.py 59, 106-109), by hand: FF2 k = 14336/8, n = 4096/4, HiFi2
    assert (by["linear_qkv"].settings["cores"], by["linear_qkv"].settings["dram_sharded"]) == (
        32,
        False,
    )
    for name in ("linear_ff1", "linear_ff3", "linear_ff2"):
        assert by[name].settings["cores"] == 16 and not by[name].inputs[1].sharded, name
    ff2 = price_op(by["linear_ff2"], "galaxy", "decode", CAL, dispatch=0.0)
    assert ff2.seconds == pytest.approx(max(56 * 32 * 32 / 16 / 1e9 / 0.5,
                                            1792 * 1024 * 1.0625 / (190e9 * 0.8)), rel=1e-9)  # fmt: skip
    big = opmodels.model_program("llama-3.1-70b", "galaxy", batch=1)
    assert next(o for o in big if o.name == "linear_qkv").settings["cores"] == 40  # (8, 5) at 70B
    # lm_head.py (TG): one [dim/4, 128k/8] weight, DRAM-sharded (interleaved at dim 2048), by hand
    lm = next(o for o in ops if o.name == "linear_lm_head")
    assert lm.inputs[1].shape == (1024, 16384) and lm.inputs[1].sharded
    c = price_op(lm, "galaxy", "decode", CAL, dispatch=0.0)
    # 512 tiles on 12 banks: 43 each
    assert c.seconds == pytest.approx(1024 * 516 * 32 * 1.0625 / (240e9 * 0.8), rel=1e-9)
    one_b = opmodels.model_program("llama-3.2-1b", "galaxy", batch=1)
    assert not next(o for o in one_b if o.name == "linear_lm_head").inputs[1].sharded
    # its partial sums all-reduced over the 4-chip axis, the vocabulary gathered over the 8
    tail = [(o.name, o.settings.get("group_size")) for o in ops if o.count == 1][-9:-5]
    assert tail == [("reduce_scatter_minimal_async", 4), ("all_gather_async", 4), ("reshape", None),
                    ("all_gather_async", 8)]  # fmt: skip
    assert next(o for o in ops if o.name == "argmax").inputs[0].shape == (32, 128 * 1024)


def test_the_galaxy_llama_prefill_is_traced_at_its_op_to_op_gap():
    # tt/generator.py: the Galaxy Llama traces its prefill; the TG prefill ops at its 0.8 us gap
    p = opmodels.predict_model("llama-3.1-70b", "galaxy", tp=32, phase="prefill",
                               program="llama3_70b_galaxy", calibration=CAL)  # fmt: skip
    ops = opmodels.model_program("llama-3.1-70b", "galaxy", tp=32, phase="prefill")
    floors = [max(price_op(o, "galaxy", "prefill", CAL, dispatch=0.0).seconds, 0.8e-6) * o.count
              for o in ops]  # fmt: skip
    assert p.step_seconds == pytest.approx(sum(floors), rel=1e-9)
    untraced = opmodels.predict_model("llama-3.1-70b", "galaxy", tp=32, phase="prefill",
                                      calibration=CAL)  # fmt: skip
    assert untraced.step_seconds > p.step_seconds  # 50 us host-dispatched floor in CAL


def test_falcon_decodes_with_its_own_explicit_attention_and_interleaved_weights():
    ops = opmodels.model_program("falcon-7b", "n150", batch=32)
    layer = [o.name for o in ops if o.count == 32]
    # falcon_attention.py decode: QK and PV as attn_matmul around scale_mask_softmax, no SDPA
    assert layer.count("attn_matmul") == 2 and "scale_mask_softmax_in_place" in layer
    assert not any("scaled_dot_product" in x for x in layer)
    qkv = next(o for o in ops if o.name == "linear_qkv")
    assert not qkv.inputs[1].sharded and not qkv.settings["dram_sharded"]  # falcon_mlp.py


def test_llama_vision_text_demo_drops_cross_layers_and_the_multimodal_program_runs_them():
    # model_config.py 1517-1520: the text demo's n_layers excludes the cross-attention layers
    cfg = {"model_type": "mllama", "vision_config": {"hidden_size": 1280},
           "text_config": {"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
                           "num_hidden_layers": 10, "intermediate_size": 512, "vocab_size": 1000,
                           "cross_attention_layers": [3, 8]}}  # fmt: skip
    spec = opmodels.spec_from_hf(cfg, "tiny-vision")
    assert (spec.dim, spec.n_layers, spec.cross_layers) == (256, 8, 2)
    assert (
        opmodels.MODELS["llama-3.2-11b"].n_layers,
        opmodels.MODELS["llama-3.2-90b"].n_layers,
    ) == (32, 80)
    text = opmodels.model_program(spec, "n300", batch=4)
    assert not any(o.count == 2 for o in text)
    mm = opmodels.model_program(spec, "n300", batch=4, vision=True)
    cross = [o for o in mm if o.count == 2]
    # llama_cross_block.py: norm (gather + rms), cross-attention, the text layer's MLP half, gates
    names = [o.name for o in cross]
    assert names[:2] == ["all_gather_async", "rms_norm"] and "linear_xq" in names
    assert names[-3:] == ["mul", "tanh", "mul"] and names.count("linear_ff1") == 1
    sdpa = next(o for o in cross if o.family == "sdpa")
    # setup_cache: bfloat16 K/V of 4 chunks x nearest_32(40 x 40 + 1) = 6528 image positions,
    # 1 of 2 kv heads per chip; FlashDecode reads K and V of every position for 4 users
    assert sdpa.settings["positions"] == 6528 == opvision.MLLAMA_VISION.seq
    c = price_op(sdpa, "n300", "decode", CAL)
    assert c.seconds == pytest.approx(2 * 4 * 1 * 6528 * 64 * 2 / (180e9 * 0.8), rel=1e-9)
    with pytest.raises(ConfigError, match="llama_vision"):
        opmodels.predict_model("llama-3.1-8b", "n300", program="llama_vision")


def test_the_image_path_is_priced_before_the_vision_prefill_by_hand():
    pre = opmodels.model_program("llama-3.2-11b", "n300", phase="prefill", vision=True)
    enc = [o for o in pre if o.name.startswith("linear_image")]
    assert {o.count for o in enc} == {40}  # 32 local + 8 global encoder layers
    qkv = next(o for o in enc if o.name == "linear_image_qkv")
    # model_config.py 1216: fused QKV with head_dim 80 padded to 96, 16 heads / 2 chips
    assert qkv.inputs[1].shape == (1280, 3 * 96 * 8) and qkv.inputs[0].shape == (6528, 1280)
    c = price_op(qkv, "n300", "prefill", CAL)
    tiles = (6528 // 32) * (1280 // 32) * (3 * 96 * 8 // 32)
    assert c.seconds == pytest.approx(tiles * 64 / 64 / 1e9 / 0.5, rel=1e-9)  # HiFi4, 64 cores
    # llama_image_attention.py 290-307: the TP output all-gathered on 1 link (line), then summed
    ag = next(o for o in pre if o.name == "all_gather_async" and o.count == 40)
    c = price_op(ag, "n300", "prefill", CAL)
    per = 2 * 6528 * 1280 * 2 / 2  # the gathered [2 x S, 1280] bfloat16, half from the other chip
    assert c.seconds == pytest.approx(CCL_LATENCY + 650e-9 + per / 12.5e9, rel=1e-6)
    # the cross-attention prefill: Q of the prompt against all image positions (not causal)
    xs = next(o for o in pre if o.family == "sdpa" and o.count == 8)
    c = price_op(xs, "n300", "prefill", CAL)
    flops = 4 * 1 * 16 * 128 * 6528 * 128
    assert c.seconds == pytest.approx(flops / (64 * 4096e9 / 4) / 0.5, rel=1e-9)
    text = opmodels.predict_model("llama-3.2-11b", "n300", phase="prefill")
    vis = opmodels.predict_model("llama-3.2-11b", "n300", phase="prefill", program="llama_vision")
    assert vis.step_seconds > 5 * text.step_seconds


def test_falcon_reads_every_chips_logits_to_the_host_and_prefills_on_its_core_grid():
    # falcon7b_common demo.py 439 -> utility_functions.py 216-233: untilize on one core, read
    # every chip's [32, vocab] logits, sample on the host (no gather, no argmax on device)
    ops = opmodels.model_program("falcon-7b", "t3000", tp=1, batch=32)
    assert [o.name for o in ops[-3:]] == ["linear_lm_head", "untilize", "to_host"]
    assert not any(o.name == "argmax" for o in ops)
    read = ops[-1]
    assert read.family == "host" and read.settings["remote_chips"] == 1  # T3000: 4 of 8 on PCIe
    c = price_op(read, "t3000", "decode", CAL, dispatch=0.0)
    nbytes = 32 * 65024 * 2  # bfloat16, 65024 = 2032 tiles
    # benchmark_rw_buffer_golden.json: 10.15 GB/s from the PCIe chip, 4.51 GB/s tunnelled
    assert c.seconds == pytest.approx(nbytes / 10.15e9 + nbytes / 4.51e9, rel=1e-9)
    solo = price_op(opmodels.model_program("falcon-7b", "galaxy", tp=1, batch=32)[-1], "galaxy",
                    "decode", CAL, dispatch=0.0)  # fmt: skip
    assert solo.seconds == pytest.approx(nbytes / 10.15e9, rel=1e-9)  # 6U: 32 PCIe chips
    untilize = price_op(ops[-2], "t3000", "decode", CAL, dispatch=0.0)
    assert untilize.seconds == pytest.approx(2 * nbytes / (1 * 28e9), rel=1e-9)  # one core
    # prefill at 128 tokens: core_grid 8x7 (model_utils.py 64-68), TT-NN's own 1-D split of
    # N over the 56 cores, not tt_transformers' 2-D grid; the LM head over every prompt row
    pre = opmodels.model_program("falcon-7b", "n150", phase="prefill")
    ff = next(o for o in pre if o.name == "linear_h_to_4h_gelu")
    assert ff.settings["cores"] == 56 and "mcast" not in ff.settings
    c = price_op(ff, "n150", "prefill", CAL)
    tiles = 4 * (4544 // 32) * (18176 // 32)
    compute = tiles * 32 / 56 / 1e9 / 0.5  # HiFi2 on 56 cores
    dram = (4544 * 18176 * 1.0625 + 128 * (4544 + 18176) * 2) / (190e9 * 0.8)  # interleaved
    assert c.seconds == pytest.approx(max(compute, dram), rel=1e-9)
    assert "56 cores" in c.rule
    assert next(o for o in pre if o.name == "linear_lm_head").inputs[0].shape == (128, 4544)


def test_qwen25_7b_keeps_its_kv_cache_in_bfloat16_and_attends_at_hifi4():
    # model_config.py 162-180: Qwen2.5-7B's performance mode, bfloat16 KV cache, SDPA at HiFi4
    ops = opmodels.model_program("qwen2.5-7b", "n300", batch=1)
    sdpa = next(o for o in ops if o.family == "sdpa")
    assert sdpa.inputs[1].dtype == "bfloat16" and sdpa.settings["fidelity"] == "hifi4"
    c = price_op(sdpa, "n300", "decode", CAL, dispatch=0.0)
    assert c.seconds == pytest.approx(2 * 1 * 2 * 256 * 128 * 2 / (180e9 * 0.8), rel=1e-9)
    llama = next(o for o in opmodels.model_program("llama-3.1-8b", "n300") if o.family == "sdpa")
    assert llama.inputs[1].dtype == "bfloat8_b" and llama.settings["fidelity"] == "hifi2"


def _layer_ops(model, system, phase, **kw):
    ops = opmodels.model_program(model, system, phase=phase, **kw)
    n = opmodels.get_model(model).n_layers
    return [o for o in ops if o.count == n]


def test_prefill_attention_typecasts_and_the_mlp_moves_follow_the_code():
    # attention.py 767/776: K and V to the cache's bfloat8_b, 817: Q to bfloat8_b for SDPA
    layer = _layer_ops("llama-3.1-8b", "n150", "prefill")
    names = [o.name for o in layer]
    i, j = names.index("nlp_create_qkv_heads"), names.index("scaled_dot_product_attention")
    assert names[i + 1 : j] == ["rotary_embedding_llama", "rotary_embedding_llama", "typecast",
                                "typecast", "fill_cache", "fill_cache", "typecast"]  # fmt: skip
    casts = [o for o in layer if o.name == "typecast"]
    assert [(c.inputs[0].dtype, c.outputs[0].dtype) for c in casts] == [
        ("bfloat16", "bfloat8_b")
    ] * 3
    assert [c.inputs[0].shape for c in casts] == [(128, 1024), (128, 1024), (128, 4096)]
    # a typecast by hand: 128 x 1024 bfloat16 in, bfloat8_b out, both in DRAM
    c = price_op(casts[0], "n150", "prefill", CAL, dispatch=0.0)
    assert c.seconds == pytest.approx(128 * 1024 * (2 + 1.0625) / (190e9 * 0.8), rel=1e-9)
    # mlp.py 215-217: the activation moves to FF2's sharded config in decode only; mlp.py 281-285:
    # FF2's output to the residual config in decode only
    assert names[names.index("mul_silu") + 1] == "linear_ff2"
    assert names[names.index("linear_ff2") + 1] == "add"
    dec = [o.name for o in _layer_ops("llama-3.1-8b", "n150", "decode")]
    assert dec[dec.index("mul_silu") + 1] == "to_memory_config"
    assert dec[dec.index("linear_ff2") + 1 :] == ["to_memory_config", "add", "to_memory_config"]
    # TG: QKV's output is bfloat8_b, so Q and K are cast to bfloat16 before the rotary embedding
    tg = [o.name for o in _layer_ops("llama-3.1-8b", "galaxy", "prefill")]
    assert tg.count("typecast") == 5
    assert tg[tg.index("nlp_create_qkv_heads") + 1 : tg.index("nlp_create_qkv_heads") + 3] == [
        "typecast", "typecast"]  # fmt: skip
    # Falcon's own attention (falcon_attention.py) runs none
    assert "typecast" not in [o.name for o in _layer_ops("falcon-7b", "n150", "prefill")]
