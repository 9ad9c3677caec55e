"""The paper timing (`attenio.model.papertiming`): each rule's closed form on cases small
enough to work by hand, its agreement with the fair models' traffic, and the CLI's
`--timing`, `--bw-eff` and sweeps (fair mode's own contract: test_compare)."""

import dataclasses
import json

import pytest

from attenio import preset
from attenio.baselines import all_baselines
from attenio.config import Budget, Config, Workload
from attenio.errors import ConfigError
from attenio.formats import Int8Format
from attenio.plan import make_plan
from attenio.model.baselinemodel import simulate_baseline
from attenio.model.cyclemodel import simulate
from attenio.model.papertiming import (PaperTiming, analytic_a, attenio_timing, baseline_timing,
                                     break_even_bw, ladder, paper_one, roofline, visited,
                                     without_each)
from attenio.cli import main

# N = 16, d = 4 on 2 x 2 MACs, 2 EXP units, 52 bytes of int8 cache, 16 B/cycle:
# M = 52 elements, so the analytic a = (52 - 4) / (2 * 4 + 4) = 4 and FA-2's
# B_c = ceil(52 / 16) = 4, B_r = min(4, d = 4) = 4.
N, D, P, E = 16, 4, 4, 2
TINY = Config(workload=Workload(seq_len=N, head_dim=D),
              budget=Budget(mac_lines=2, macs_per_line=2, exp_units=E, cache_bytes=52,
                            kv_buffer_bytes=8, bw_bytes_per_cycle=16, latency_cycles=0),
              format=Int8Format(), name="tiny")
COMPUTE = 2 * D * N * N // P        # 512: the two products of every pair on the whole array
EXP = 2 * N * N // E                # 256: two exponentials a score over the E units
BYTES = N * D + 2 * N * D * (N // 4) + N * D      # 640: Q, K and V four times, O (a = 4)


def test_tiny_case_tilings():
    assert analytic_a(TINY) == 4
    assert all_baselines(TINY)["flashattention2"].tiling == {"B_r": 4, "B_c": 4}
    assert PaperTiming().bandwidth(TINY.budget) == 8          # half the peak


def test_rule2_attenio_softmax_after_its_compute_memory_hidden():
    e = attenio_timing(TINY, PaperTiming(), 4)
    assert e["offchip_bytes"] == BYTES and e["pairs"] == N * N
    assert (e["compute_cycles"], e["exp_cycles"], e["memory_cycles"]) == (COMPUTE, EXP, BYTES / 8)
    assert e["cycles"] == COMPUTE + EXP == 768
    assert e["exposed_memory_cycles"] == 0 and e["stall_fraction"] == 0
    assert e["pe_util"] == COMPUTE / 768 and e["exp_util"] == EXP / 768
    # rule 2 off: the softmax overlaps the products
    assert attenio_timing(TINY, PaperTiming(softmax_exposed=False), 4)["cycles"] == COMPUTE
    # two exponentials a score is a parameter too
    assert attenio_timing(TINY, PaperTiming(exps_per_score=1), 4)["cycles"] == COMPUTE + EXP // 2


def test_rule2_memory_shows_only_where_it_cannot_hide():
    e = attenio_timing(TINY, PaperTiming(bw_eff=0.5), 4)
    assert e["memory_cycles"] == BYTES / 0.5 == 1280
    assert e["cycles"] == 1280 and e["exposed_memory_cycles"] == 1280 - 768


def test_rule1_baselines_pay_traffic_after_compute():
    bls = all_baselines(TINY)
    fa2 = baseline_timing(TINY, PaperTiming(), bls["flashattention2"])
    assert fa2["offchip_bytes"] == BYTES        # B_r = a = 4: the same traffic as AttenIO
    assert fa2["cycles"] == COMPUTE + BYTES / 8 == 592 and fa2["exp_cycles"] == 0
    assert baseline_timing(TINY, PaperTiming(bw_eff=4), bls["flashattention2"])["cycles"] == \
        COMPUTE + BYTES / 4
    # rule 1 off: overlapped, max(compute, traffic / bw_eff)
    assert baseline_timing(TINY, PaperTiming(baselines_serial=False),
                           bls["flashattention2"])["cycles"] == COMPUTE
    # every baseline: the same compute, its own traffic
    for bl in bls.values():
        e = baseline_timing(TINY, PaperTiming(), bl)
        assert e["cycles"] == COMPUTE + bl.traffic.bytes / 8


def test_rule3_analytic_a_or_the_plans():
    a = paper_one(TINY, PaperTiming())
    assert a["a"] == 4 and a["attenio"]["offchip_bytes"] == BYTES
    p = paper_one(TINY, PaperTiming(a_rule="plan"), plan_a=2)
    assert p["a"] == 2 and p["attenio"]["offchip_bytes"] == 2 * N * D + 2 * N * D * (N // 2)
    # with exact 2a/E a K/V row, a changes the traffic, never AttenIO's time
    assert p["attenio"]["cycles"] == a["attenio"]["cycles"]
    with pytest.raises(ValueError, match="needs the Plan's a"):
        paper_one(TINY, PaperTiming(a_rule="plan"))


def test_speedups_and_break_even():
    row = paper_one(TINY, PaperTiming())
    fa2 = row["baselines"]["flashattention2"]
    assert fa2["speedup"] == 592 / 768 and fa2["traffic_ratio"] == 1.0
    # 512 + 640 / b = 768: the baseline catches up at b = 2.5 B/cycle
    assert fa2["break_even_bw"] == pytest.approx(2.5)
    ours = row["attenio"]
    # overlapped, with the same traffic, AttenIO is never faster; with no softmax, always
    assert break_even_bw(ours, fa2, PaperTiming(baselines_serial=False,
                                                softmax_exposed=False)) == 0.0
    no_exp = attenio_timing(TINY, PaperTiming(exps_per_score=0), 4)
    assert break_even_bw(no_exp, fa2, PaperTiming(exps_per_score=0)) == float("inf")


@pytest.mark.parametrize("n, block", [(16, 4), (10, 4), (7, 7), (7, 10), (33, 5)])
def test_visited_pairs_and_rows_against_a_walk(n, block):
    pairs = rows = 0
    for i0 in range(0, n, block):
        r = min(block, n - i0)
        keys = min(n, i0 + r)
        pairs, rows = pairs + r * keys, rows + keys
    assert visited(n, block, True) == (pairs, rows)
    assert visited(n, block, False) == (n * n, n * -(-n // block))


def test_causal_closed_forms():
    t = PaperTiming()
    c = attenio_timing(TINY, t, 4, causal=True)
    pairs = 4 * (4 + 8 + 12 + 16)          # block i of 4 rows sees 4 (i + 1) keys
    assert c["pairs"] == pairs == 160
    assert c["offchip_bytes"] == 2 * N * D + 2 * D * 40
    assert c["cycles"] == 2 * D * pairs / P + 2 * pairs / E
    f = baseline_timing(TINY, t, all_baselines(TINY)["flashattention2"], causal=True)
    assert f["cycles"] == 2 * D * pairs / P + c["offchip_bytes"] / 8
    with pytest.raises(ValueError, match="FlashAttention-2 only"):
        baseline_timing(TINY, t, all_baselines(TINY)["flat"], causal=True)


def test_traffic_equals_the_fair_models():
    """The closed forms move the bytes the cycle models move, causal included."""
    config = preset("small")
    plan = make_plan(config)
    t = PaperTiming(a_rule="plan")
    assert attenio_timing(config, t, plan.a)["offchip_bytes"] == plan.traffic.bytes
    r = simulate(plan, causal=True)
    assert attenio_timing(config, t, plan.a, causal=True)["offchip_bytes"] == \
        r.bytes_read + r.bytes_written
    bl = all_baselines(config)["flashattention2"]
    b = simulate_baseline(config, bl, causal=True)
    assert baseline_timing(config, t, bl, causal=True)["offchip_bytes"] == \
        b.bytes_read + b.bytes_written


def test_paper_preset_closed_form():
    """d = 64, N = 8K: FA-2 (B_r = 64) reads K and V N / 64 times; the speedup is
    (C + T / 64) / (C + 2 N^2 / 128) with C = 2 N^2 64 / 2048, exactly."""
    n, d = 8192, 64
    base = preset("paper")
    config = dataclasses.replace(base, workload=dataclasses.replace(base.workload, seq_len=n))
    assert analytic_a(config) == 1985
    assert analytic_a(dataclasses.replace(config, workload=dataclasses.replace(
        config.workload, head_dim=128))) == 1007
    row = paper_one(config, PaperTiming())
    c = 2 * n * n * d / 2048
    t = 2 * (2 * n * d + 2 * n * d * (n // 64))
    assert row["baselines"]["flashattention2"]["speedup"] == \
        pytest.approx((c + t / 64) / (c + 2 * n * n / 128), rel=1e-12)


def test_ladder_ends_at_the_paper_and_starts_at_the_roofline():
    b = preset("paper").budget
    steps = ladder(b)
    assert steps[0][1] == roofline(b) and steps[-1][1] == PaperTiming()
    assert roofline(b).bandwidth(b) == b.bw_bytes_per_cycle
    assert without_each(b)[0][1] == PaperTiming() and len(without_each(b)) == 5


@pytest.mark.parametrize("kw, message", [
    ({"bw_eff": 0}, "bw_eff must be a positive finite number"),
    ({"bw_eff": True}, "bw_eff must be a positive finite number"),
    ({"a_rule": "fit"}, "a_rule must be one of analytic, plan"),
    ({"exps_per_score": -1}, "exps_per_score must be an integer >= 0"),
    ({"baselines_serial": "yes"}, "baselines_serial must be true or false"),
])
def test_parameters_are_checked(kw, message):
    with pytest.raises(ConfigError, match=message):
        PaperTiming(**kw)


def test_bw_eff_above_the_peak_is_refused():
    with pytest.raises(ConfigError, match="exceeds the peak"):
        PaperTiming(bw_eff=17).bandwidth(TINY.budget)


# --- the command ---------------------------------------------------------------------

def test_cli_paper_timing_json_records_every_parameter(capsys, tmp_path):
    rc = main(["compare", "--preset", "small", "--seq-lens", "128,256", "--head-dims", "16",
               "--timing", "paper", "--json", "-o", str(tmp_path)])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    t = data["timing"]
    assert t["mode"] == "paper"
    assert t["parameters"] == {"bw_eff": 4.0, "bw_eff_from": "half the peak bandwidth",
                               "baselines_serial": True, "softmax_exposed": True,
                               "exps_per_score": 2, "a_rule": "analytic"}
    assert set(t["rules"]) >= {"bw_eff", "baselines_serial", "softmax_exposed",
                               "exps_per_score", "a_rule"}
    for row in data["rows"]:
        assert row["a"] == analytic_a(preset("small")) and row["a_rule"] == "analytic"
        assert set(row["fair"]["speedup"]) == set(row["baselines"])
        for b in row["baselines"].values():
            assert b["speedup"] == pytest.approx(b["cycles"] / row["attenio"]["cycles"])
    assert {"compare.json", "compare.md", "speedup.png", "time.png"} <= \
        {p.name for p in tmp_path.iterdir()}
    assert "paper timing" in (tmp_path / "compare.md").read_text()


def test_cli_paper_timing_table_says_so(capsys, tmp_path):
    assert main(["compare", "--preset", "small", "--timing", "paper", "--bw-eff", "2",
                 "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Paper-timing comparison")
    assert "paper timing:" in out and "bw_eff = 2 B/cycle (given)" in out
    assert "break-even bw_eff" in out and "causal" in out and "  fair  " in out
    assert "reports" not in out         # the paper reports d = 64 and 128 only


def test_cli_bandwidth_sweep(capsys, tmp_path):
    rc = main(["compare", "--preset", "small", "--head-dims", "8,16", "--bw", "2,8,32", "--json",
               "-o", str(tmp_path)])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["timing"]["mode"] == "fair" and data["sweep"]["values"] == [2, 8, 32]
    assert len(data["rows"]) == 6
    assert {(c["head_dim"], c["baseline"]) for c in data["crossovers"]} == \
        {(d, x) for d in (8, 16) for x in ("standard", "flat", "flashattention2",
                                          "flashattention2_fair")}
    for c in data["crossovers"]:
        pts = [r for r in data["rows"] if r["head_dim"] == c["head_dim"]]
        b = pts[0]["baselines"][c["baseline"]]
        assert c["ridge_bw"] == b["offchip_bytes"] / b["pe_busy"]
    assert {"sweep_bw.png", "roofline.png"} <= {p.name for p in tmp_path.iterdir()}


def test_cli_cache_sweep_both_timings(capsys, tmp_path):
    for timing in ("fair", "paper"):
        rc = main(["compare", "--preset", "small", "--cache-kib", "2,4,8", "--timing", timing,
                   "--json", "-o", str(tmp_path / timing)])
        assert rc == 0
        data = json.loads(capsys.readouterr().out)
        assert data["timing"]["mode"] == timing and data["sweep"]["axis"] == "cache"
        assert [r["value"] for r in data["rows"]] == [2048, 4096, 8192]
        assert (tmp_path / timing / "sweep_cache.png").exists()
