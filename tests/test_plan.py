"""The Plan (its rounding, mapping and refusals), the planner's choice of the mapping, and
every baseline's closed form, checked against the executor."""

import dataclasses
import time

import numpy as np
import pytest

from attenio import Budget, Config, ConfigError, FP16Format, Int8Format, Workload, preset
from attenio.baselines import all_baselines
from attenio.executor import (reference_attention, run_attenio, run_flashattention2, run_flat,
                              run_standard)
from attenio.plan import (Candidate, cache_bytes_used, check_split, kv_prefetch_depth, make_plan,
                          rows_options, valid_splits)
from attenio.model import planner
from attenio.model.cyclemodel import MAX_WALKED_BLOCKS, simulate
from attenio.model.planner import choose_plan


def config(n, d, cache_bytes, *, fmt=None, heads=1, macs=(2, 2), kv=64, latency=10, bw=8):
    return Config(workload=Workload(seq_len=n, head_dim=d, heads=heads),
                  budget=Budget(mac_lines=macs[0], macs_per_line=macs[1], exp_units=2,
                                cache_bytes=cache_bytes, kv_buffer_bytes=kv,
                                bw_bytes_per_cycle=bw, latency_cycles=latency),
                  format=fmt or FP16Format())


def per_tensor(transfers):
    out = {}
    for t in transfers:
        out[t.tensor] = out.get(t.tensor, 0) + t.elements
    return out


def walk(name, plan, q, k, v, capacity):
    t = plan.tiling
    if name == "standard":
        return run_standard(q, k, v, x=t["x"], y=t["y"], x_pv=t["x_pv"], y_pv=t["y_pv"],
                            row_fits=t["row_fits"], capacity=capacity)
    if name == "flat":
        return run_flat(q, k, v, r=t["R"], spill=t["spill"], capacity=capacity)
    return run_flashattention2(q, k, v, br=t["B_r"], bc=t["B_c"], capacity=capacity)


# (N, d, M elements): spilling FLAT and two-pass Standard; roomy; in between.
CASES = [(24, 2, 20), (24, 2, 200), (16, 4, 120), (20, 3, 64)]


@pytest.mark.parametrize("n, d, m", CASES)
def test_every_baseline_moves_exactly_what_its_closed_form_says(rng, n, d, m):
    cfg = config(n, d, 2 * m)   # fp16: M elements = cache bytes / 2
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    ref = reference_attention(q, k, v)
    for name, plan in all_baselines(cfg).items():
        capacity = max(m, plan.onchip_elements)
        if plan.onchip_elements > m:
            assert name == "flashattention2" and plan.notes, (name, plan.tiling)
        chip = walk(name, plan, q, k, v, capacity)
        assert np.allclose(chip.mem["O"], ref), name
        assert dict(chip.reads) == per_tensor(plan.traffic.reads), name
        assert dict(chip.writes) == per_tensor(plan.traffic.writes), name
        assert chip.peak <= plan.onchip_elements, (name, chip.peak, plan.onchip_elements)


def test_spill_paths_are_exercised():
    b = all_baselines(config(24, 2, 40))
    assert b["flat"].tiling["spill"] and not b["standard"].tiling["row_fits"]
    assert b["flat"].notes and b["standard"].notes
    assert b["flat"].traffic.write_bytes == (24 * 24 + 24 * 2) * 2


@pytest.mark.parametrize("fmt", [FP16Format(), Int8Format()])
@pytest.mark.parametrize("n, d, cache, heads", [(24, 4, 1024, 1), (30, 2, 600, 2), (17, 4, 2048, 1)])
def test_attenio_plan_traffic_matches_the_executor(rng, fmt, n, d, cache, heads):
    plan = make_plan(config(n, d, cache, fmt=fmt, heads=heads))
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    chip = run_attenio(q, k, v, a=plan.a, capacity=10 ** 9)
    assert np.allclose(chip.mem["O"], reference_attention(q, k, v))
    eb = fmt.element_bytes
    assert plan.traffic.read_bytes == chip.total_reads * eb * heads
    assert plan.traffic.write_bytes == chip.total_writes * eb * heads
    assert {t: e // heads for t, e in per_tensor(plan.traffic.reads).items()} == dict(chip.reads)


@pytest.mark.parametrize("name, d", [("paper", 64), ("paper", 128), ("small", 16)])
def test_a_fit_is_the_largest_a_the_reservations_allow(name, d):
    c = preset(name)
    c = dataclasses.replace(c, workload=dataclasses.replace(c.workload, head_dim=d))
    plan = make_plan(c)
    depth = kv_prefetch_depth(c)
    assert cache_bytes_used(c, plan.a_fit, depth) <= c.budget.cache_bytes
    assert cache_bytes_used(c, plan.a_fit + 1, depth) > c.budget.cache_bytes
    assert plan.cache_used_bytes <= c.budget.cache_bytes
    assert plan.a <= plan.a_fit <= plan.a_ideal
    if plan.a >= c.budget.macs:
        assert plan.a == plan.rows_per_mac * c.budget.macs
    items = {r.item for r in plan.reservations}
    assert {"Q block", "O accumulators", "score registers", "running max m", "running sum l",
            "K/V staging", "KV buffer"} <= items


def test_paper_preset_ideal_a_follows_the_design_formula():
    for d, a in ((64, 1985), (128, 1007)):
        c = preset("paper")
        c = dataclasses.replace(c, workload=dataclasses.replace(c.workload, head_dim=d))
        assert make_plan(c).a_ideal == a == (262144 - d) // (2 * d + 4)


def test_rounding_to_the_array_and_its_cost_are_reported():
    plan = make_plan(config(64, 4, 550, fmt=Int8Format(), macs=(2, 2)))
    assert (plan.a_fit, plan.a, plan.rows_per_mac) == (11, 8, 2)
    d = plan.to_dict()
    assert d["rounding_cost_bytes"] == plan.traffic.bytes - plan.traffic_unrounded.bytes > 0
    assert d["offchip_bytes"] == d["offchip_read_bytes"] + d["offchip_write_bytes"]


def test_a_is_capped_by_the_sequence_length():
    plan = make_plan(config(8, 4, 4096, macs=(2, 2)))
    assert plan.a == 8 and plan.q_blocks == 1 and plan.rows_per_mac == 2


@pytest.mark.parametrize("split", [1, 2, 4])
def test_mapping_gives_every_row_one_owner(split):
    plan = make_plan(preset("small"), split=split)
    b = plan.budget
    rows = [plan.row_of(line, group, slot) for slot in range(plan.rows_per_mac)
            for line in range(b.mac_lines) for group in range(b.macs_per_line // split)]
    assert sorted(rows) == list(range(plan.a))


def test_row_of_a_split_of_two():
    # small preset at s = 2: G = 8 groups (2 a line), r = 4: row = slot*8 + line*2 + group
    plan = make_plan(preset("small"), split=2)
    assert (plan.groups, plan.rows_per_mac, plan.a) == (8, 4, 32)
    assert [plan.row_of(0, g, 0) for g in range(2)] == [0, 1]
    assert [plan.row_of(line, 0, 0) for line in range(4)] == [0, 2, 4, 6]
    assert plan.row_of(1, 1, 2) == 19 and plan.row_of(3, 1, 3) == 31


def paper(d, **workload):
    c = preset("paper")
    return dataclasses.replace(c, workload=dataclasses.replace(c.workload, head_dim=d, **workload))


@pytest.mark.parametrize("d, expect", [
    # s: (a_fit, r, a); the deeper K/V staging of a wider split takes a few rows of a_fit
    # (tests/test_format_config.py derives a_fit at s = 1 from the widths by hand)
    (64, {1: (1279, 1, 1279), 2: (1279, 1, 1024), 4: (1278, 2, 1024), 8: (1276, 4, 1024),
          16: (1272, 9, 1152)}),
    (128, {1: (659, 1, 659), 2: (659, 1, 659), 4: (658, 1, 512), 8: (657, 2, 512),
           16: (655, 5, 640)}),
])
def test_paper_preset_rounds_a_to_the_groups_of_each_split(d, expect):
    c = paper(d)
    assert valid_splits(c) == tuple(expect)
    for s, (a_fit, r, a) in expect.items():
        plan = make_plan(c, split=s)
        assert (plan.split, plan.a_fit, plan.rows_per_mac, plan.a) == (s, a_fit, r, a)
        assert plan.groups == 2048 // s
        assert plan.macs_active == min(a, 2048 // s) * s
        assert plan.a_unsplit == expect[1][2]
        assert cache_bytes_used(c, a_fit, plan.kv_depth) <= c.budget.cache_bytes
        assert cache_bytes_used(c, a_fit + 1, plan.kv_depth) > c.budget.cache_bytes


def test_small_preset_rounds_a_to_the_groups_of_each_split():
    # d = 16, 4x4 MACs, one lane a line: s in {1, 2, 4}; depth 1 + ceil(22 / (16/s));
    # ~101 bytes a row, so a_fit = 40, 39, 39; G = 16, 8, 4
    c = preset("small")
    assert valid_splits(c) == (1, 2, 4)
    got = {s: make_plan(c, split=s) for s in (1, 2, 4)}
    assert {s: (p.kv_depth, p.a_fit, p.groups, p.rows_per_mac, p.a, p.macs_active)
            for s, p in got.items()} == {1: (3, 40, 16, 2, 32, 16), 2: (4, 39, 8, 4, 32, 16),
                                         4: (7, 39, 4, 9, 36, 16)}


def test_a_short_sequence_leaves_groups_idle_unless_split():
    c = dataclasses.replace(preset("small"), workload=Workload(seq_len=8, head_dim=16))
    got = {s: make_plan(c, split=s) for s in (1, 2, 4)}
    assert {s: (p.a, p.rows_per_mac, p.macs_active) for s, p in got.items()} == {
        1: (8, 1, 8), 2: (8, 1, 16), 4: (8, 2, 16)}


def test_what_a_split_costs_in_traffic_against_s_1():
    # d = 64: s = 2 and s = 8 round a to 1024 (64 Q blocks instead of 52 of 1279 rows);
    # s = 16 keeps 57 blocks of 1152
    c = paper(64)
    two, eight, sixteen, one = (make_plan(c, split=s) for s in (2, 8, 16, 1))
    assert two.traffic_unsplit == one.traffic
    assert two.split_cost_bytes == 2 * 65536 * 64 * 2 * (64 - 52)     # K and V, fp16
    assert eight.split_cost_bytes == two.split_cost_bytes
    assert sixteen.split_cost_bytes == 2 * 65536 * 64 * 2 * (57 - 52)
    assert one.split_cost_bytes == 0
    d = two.to_dict()
    assert (d["split"], d["groups"], d["a_unsplit"], d["split_cost_bytes"]) == (
        2, 1024, 1279, two.split_cost_bytes)
    assert d["mapping"] is None


def test_make_plan_takes_the_split_of_the_config_unless_given():
    c = dataclasses.replace(preset("small"), split=4)
    assert make_plan(c).split == 4
    assert make_plan(c, split=2).split == 2
    assert make_plan(preset("small")).split == 1


def test_prefetch_depth_covers_latency():
    assert kv_prefetch_depth(config(64, 16, 4096, latency=0, bw=16)) == 2
    assert kv_prefetch_depth(config(64, 16, 4096, latency=100, bw=16)) == 1 + -(-(100 + 2) // 16)


def test_prefetch_depth_follows_the_split():
    # paper, d = 64: a 128-byte row arrives 100 + 1 cycles after its request and is
    # consumed in 64/s cycles: 1 + ceil(101 / (64/s))
    c = paper(64)
    assert {s: kv_prefetch_depth(c, s) for s in (1, 2, 4, 8, 16)} == {
        1: 3, 2: 5, 4: 8, 8: 14, 16: 27}
    assert all(make_plan(c, split=s).kv_depth == kv_prefetch_depth(c, s) for s in (1, 2, 16))


def _small(**budget):
    c = preset("small")
    return dataclasses.replace(c, budget=dataclasses.replace(c.budget, **budget))


@pytest.mark.parametrize("cfg, split, message", [
    (preset("small"), 0, "mapping: split must be a positive integer, not 0"),
    (preset("small"), True, "mapping: split must be a positive integer, not True"),
    (preset("small"), 3, "mapping: split 3 must divide the head dimension d = 16"),
    (preset("small"), 8, "mapping: split 8 must divide the 4 MACs of one EXP lane (4 MACs a "
                         "line over 1 lane(s)), so no MAC group straddles two lanes"),
    (_small(exp_units=8), 4, "mapping: split 4 must divide the 2 MACs of one EXP lane (4 MACs a "
                             "line over 2 lane(s)), so no MAC group straddles two lanes"),
    (_small(exp_units=3), 2, "mapping: split 2: the softmax lanes need exp_units (3) to be a "
                             "multiple of the MAC lines (4)"),
    (dataclasses.replace(_small(axi_data_bits=32), format=FP16Format()), 4,
     "mapping: split 4 feeds chunks of 8 bytes of fp16 a cycle, which must divide the 32-bit "
     "AXI beat (4 bytes)"),
    (paper(64), 32, "mapping: split 32 must divide the 16 MACs of one EXP lane"),
])
def test_impossible_splits_are_refused_naming_the_rule(cfg, split, message):
    refusals = [lambda: check_split(cfg, split), lambda: make_plan(cfg, split=split),
                lambda: kv_prefetch_depth(cfg, split)]
    if split is not True and split > 0:     # else the Config refuses it (test_config)
        refusals.append(lambda: choose_plan(dataclasses.replace(cfg, split=split)))
        assert split not in valid_splits(cfg)
    for refuse in refusals:
        with pytest.raises(ConfigError) as info:
            refuse()
        assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_lane_budget_the_rtl_refuses_still_plans_unsplit():
    assert valid_splits(_small(exp_units=3)) == (1,)
    assert make_plan(_small(exp_units=3)).split == 1


# --- the planner ---------------------------------------------------------------------------

def cand(split, cycles, traffic=1, r=1, banks=2):
    return Candidate(split=split, groups=16 // split, rows_per_mac=r, a=16, macs_active=16,
                     kv_depth=2, cycles=cycles, pe_util=1.0, spatial_util=1.0,
                     offchip_bytes=traffic, banks=banks)


@pytest.mark.parametrize("cands, chosen, runner_up", [
    ([(1, 1000), (2, 996), (4, 900)], 4, 2),              # the fastest; the rest by cycles
    ([(1, 100000), (2, 99950)], 1, 2),                    # within 0.1 %: a tie, the smaller s
    ([(1, 100000), (2, 99800), (4, 99800)], 2, 4),        # 0.2 % apart; equal: the smaller s
    ([(1, 100000, 5), (2, 99950, 7), (8, 100040, 5)], 1, 8),  # tied: least traffic, then s
    ([(2, 99950, 7), (8, 100040, 5)], 8, 2),              # within 0.1 %: less traffic wins
    ([(2, 99950, 7), (8, 100100, 5)], 2, 8),              # 0.15 % slower: cycles decide
    ([(1, 1000)], 1, None),
])
def test_near_ties_go_to_the_least_traffic_then_the_smaller_split(cands, chosen, runner_up):
    assert planner.TOLERANCE == 0.001
    assert planner.pick_mapping([cand(*c) for c in cands]) == (
        (chosen, 1, 2), None if runner_up is None else (runner_up, 1, 2))


def test_a_tie_in_cycles_traffic_and_split_goes_to_the_larger_r():
    assert planner.pick_mapping([cand(4, 100000, 5, 2), cand(4, 100000, 5, 3), cand(4, 99990, 6, 4)]) == (
        (4, 3, 2), (4, 2, 2))


def test_a_tie_in_cycles_and_traffic_goes_to_the_fewer_banks_before_the_split():
    assert planner.pick_mapping([cand(4, 100000, 5, 2, banks=3), cand(8, 100000, 5, 2),
                                 cand(2, 101000, 4, 2)]) == ((8, 2, 2), (4, 2, 3))


def test_rows_options_are_the_fewest_rows_for_each_number_of_blocks():
    # small: N = 256; s = 4 gives 4 groups and up to 9 rows each (a = 36, 8 blocks);
    # 8..16 blocks need ceil(64 / blocks) rows
    c = preset("small")
    assert {s: rows_options(c, s) for s in (1, 2, 4)} == {
        1: (2, 1), 2: (4, 3, 2), 4: (8, 7, 6, 5, 4)}
    assert rows_options(paper(64, seq_len=8192), 16) == (8, 7, 6, 5, 4)
    # a < G: every row has a group of its own, whatever a is
    assert rows_options(config(64, 16, 4096, macs=(16, 16)), 1) == (1,)


def test_a_plan_of_fewer_rows_a_group_is_r_times_the_groups():
    c = preset("small")
    largest, fewer = make_plan(c, split=4), make_plan(c, split=4, rows_per_mac=8)
    assert (largest.rows_per_mac, largest.a, largest.a_largest) == (9, 36, 36)
    assert (fewer.rows_per_mac, fewer.a, fewer.a_largest, fewer.q_blocks) == (8, 32, 36, 8)
    assert fewer.traffic == largest.traffic                 # 8 blocks either way
    assert fewer.cache_used_bytes < largest.cache_used_bytes
    forced = dataclasses.replace(c, split=4, rows_per_mac=8)
    assert make_plan(forced) == dataclasses.replace(fewer, config=forced)


@pytest.mark.parametrize("r, message", [
    (10, "mapping: 10 rows per group of 4 MAC(s) do not fit the cache (at most 9 at s = 4)"),
    (0, "mapping: rows_per_mac must be a positive integer, not 0"),
])
def test_rows_that_do_not_fit_are_refused_in_one_line(r, message):
    with pytest.raises(ConfigError) as info:
        make_plan(preset("small"), split=4, rows_per_mac=r)
    assert str(info.value) == message


def test_choose_plan_models_every_split_with_its_rows_options():
    c = preset("small")
    plan = choose_plan(dataclasses.replace(c, banks=2))
    choice = plan.mapping_choice
    assert choice.mode == "auto" and (choice.seq_len, choice.heads) == (256, 1)
    expect = [(s, r, 2) for s in (1, 2, 4) for r in rows_options(c, s)]
    assert [x.mapping for x in choice.candidates] == expect
    for x in choice.candidates:
        p = make_plan(c, split=x.split, rows_per_mac=x.rows_per_mac)
        assert (x.groups, x.rows_per_mac, x.a, x.macs_active, x.kv_depth, x.offchip_bytes) == (
            p.groups, p.rows_per_mac, p.a, p.macs_active, p.kv_depth, p.traffic.bytes)
        assert x.cycles == simulate(p).cycles
    assert (choice.chosen, choice.runner_up) == planner.pick_mapping(choice.candidates)
    assert dataclasses.replace(plan, mapping_choice=None) == make_plan(
        dataclasses.replace(c, banks=2), *choice.chosen)
    d = plan.to_dict()["mapping"]
    assert (d["mode"], d["chosen"]) == ("auto", {"split": plan.split, "banks": 2,
                                                 "rows_per_mac": plan.rows_per_mac})
    assert [(x["split"], x["rows_per_mac"], x["banks"]) for x in d["candidates"]] == expect
    assert set(d["candidates"][0]) == {"split", "groups", "rows_per_mac", "a", "macs_active",
                                       "kv_depth", "cycles", "pe_util", "spatial_util",
                                       "offchip_bytes", "banks"}


def test_more_banks_are_weighed_where_the_lanes_held_the_array_up_at_one_fewer():
    """fp16 on the small preset: the lanes' float latency stalls two banks; the planner
    weighs a bank more for each (s, r) whose interlock stalled by more than a tie at one
    bank fewer, and stops when none did."""
    c = dataclasses.replace(preset("small"), format=FP16Format())
    plan = choose_plan(c)
    cands = plan.mapping_choice.candidates
    assert plan.banks > 2 and plan.mapping_choice.chosen == (plan.split, plan.rows_per_mac,
                                                             plan.banks)
    by = {x.mapping: x for x in cands}
    for x in cands:
        p = make_plan(c, split=x.split, rows_per_mac=x.rows_per_mac, banks=x.banks)
        result = simulate(p)
        assert (x.cycles, x.a) == (result.cycles, p.a)
        if x.banks > 2:
            fewer = by[x.split, x.rows_per_mac, x.banks - 1]
            stall = simulate(make_plan(c, split=x.split, rows_per_mac=x.rows_per_mac,
                                       banks=x.banks - 1)).interlock_stall
            assert stall > planner.TOLERANCE * fewer.cycles
    assert max(x.banks for x in cands) <= planner.MAX_BANKS
    two = min((x for x in cands if x.banks == 2), key=lambda x: x.cycles)
    assert simulate(plan).cycles < two.cycles


def test_a_full_last_block_beats_a_partial_one():
    # s = 4 on the small preset: 9 rows a group (a = 36) leave the 8th block 4 rows
    # full, yet every pass of it costs 9 d / s cycles; 8 rows (a = 32) fill all 8
    small = preset("small")
    choice = choose_plan(dataclasses.replace(small, split=4)).mapping_choice
    largest = make_plan(small, split=4)
    assert largest.rows_per_mac == 9 and (4, 9, 2) not in [x.mapping for x in choice.candidates]
    fewer = choice.candidate(4, 8)
    assert fewer.offchip_bytes == largest.traffic.bytes
    assert fewer.cycles < 0.95 * simulate(largest).cycles


def test_choose_plan_keeps_a_forced_mapping_and_models_it_alone():
    forced = dataclasses.replace(preset("small"), split=2, rows_per_mac=4, banks=2)
    plan = choose_plan(forced, seq_len=64, heads=2)
    choice = plan.mapping_choice
    assert (plan.split, choice.mode, choice.chosen, choice.runner_up) == (
        2, "forced", (2, 4, 2), None)
    assert (choice.seq_len, choice.heads, len(choice.candidates)) == (64, 2, 1)
    assert choice.candidates[0].cycles == simulate(plan, seq_len=64, heads=2).cycles


def test_a_forced_split_still_weighs_its_rows():
    plan = choose_plan(dataclasses.replace(preset("small"), split=2, banks=2))
    choice = plan.mapping_choice
    assert plan.split == 2 and choice.mode == "auto"
    assert [x.mapping for x in choice.candidates] == [(2, 4, 2), (2, 3, 2), (2, 2, 2)]


def test_choose_plan_reports_progress_once_it_is_slow(monkeypatch):
    # the planner's clock: half a second a modelled candidate, whatever the machine's load
    clock = iter(0.5 * i for i in range(1000))
    monkeypatch.setattr(planner.time, "perf_counter", lambda: next(clock))
    heard = []
    plan = choose_plan(preset("small"), progress=heard.append)
    n = len(plan.mapping_choice.candidates)
    # quiet for the first second (t = 0.5, 1.0), then a line for each candidate after
    assert [m.split(":")[0] for m in heard] == [f"mapping {i}" for i in range(3, n + 1)]
    assert heard[-1].endswith(f"cycles modelled ({0.5 * n:.1f} s so far)")


@pytest.mark.parametrize("d", [64, 128])
def test_on_the_paper_preset_the_choice_fills_the_array(d):
    plan = choose_plan(paper(d, seq_len=8192))
    choice = plan.mapping_choice
    assert plan.split > 1 and plan.macs_active == 2048
    assert choice.candidate(*choice.chosen).cycles < choice.candidate(1, 1).cycles


def test_cache_too_small_for_one_row_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"cannot hold one query row .* \(needs \d+ bytes\)"):
        make_plan(config(64, 64, 256))


@pytest.mark.parametrize("n, n_kv, causal", [(1, 200, False), (1, 200, True), (45, 70, True),
                                             (100, 30, False), (33, 33, True)])
def test_plan_traffic_with_kv_len(n, n_kv, causal):
    """Per head: Q and O once (N d each), K and V N_kv rows per block (causal: the block's
    last row's limit, rows aligned at the end); with blocks of one head the K/V heads do not
    change it, with blocks serving a group of g = 2 (the Plan's choice where it moves less)
    K and V are read once a group over blocks of a // 2 rows of each head; max_keys sizes the
    hardware's widths and MAX_SEQ_LEN."""
    from attenio.analysis import causal_limit, grouped_blocks_win, q_blocks
    from attenio.regmap import register_map
    base = preset("small")
    w = dataclasses.replace(base.workload, seq_len=n, kv_len=n_kv, heads=4, kv_heads=2,
                            causal=causal)
    plan = make_plan(dataclasses.replace(base, workload=w))
    d, a = w.head_dim, plan.a

    def keys(rows_a):
        return sum(causal_limit(r0 + rows - 1, n, n_kv) if causal else n_kv
                   for r0, rows in q_blocks(n, rows_a, causal=causal))
    one_head = 4 * (n * d + 2 * d * keys(a))
    # a block must hold a row of each head of the group
    grouped = 4 * n * d + 2 * 2 * d * keys(a // 2) if a >= 2 else one_head
    assert plan.grouped == grouped_blocks_win(n, d, a, heads=2, causal=causal, n_kv=n_kv)
    assert plan.grouped == (grouped < one_head)
    assert plan.traffic.read_bytes == min(one_head, grouped)
    assert plan.traffic.write_bytes == 4 * n * d
    mha = make_plan(dataclasses.replace(base, workload=dataclasses.replace(w, kv_heads=None)))
    assert not mha.grouped and mha.traffic.read_bytes == one_head
    assert plan.traffic_at(seq_len=n, heads=4) == plan.traffic
    assert plan.traffic_at(seq_len=n, heads=4, grouped=False) == mha.traffic
    assert register_map(plan)["MAX_SEQ_LEN"].value == max(n, n_kv) == w.max_keys
    assert plan.to_dict()["max_keys"] == max(n, n_kv)


def test_traffic_at_takes_kv_len_and_refuses_it_above_max_keys():
    plan = make_plan(dataclasses.replace(preset("small"), workload=dataclasses.replace(
        preset("small").workload, seq_len=96)))
    d = 16
    t = plan.traffic_at(seq_len=1, heads=2, kv_len=70)
    assert t.read_bytes == 2 * (d + 2 * 70 * d) and t.write_bytes == 2 * d
    assert plan.traffic_at(seq_len=45, heads=1) == plan.traffic_at(seq_len=45, heads=1, kv_len=45)
    with pytest.raises(ConfigError, match="kv_len"):
        plan.traffic_at(seq_len=1, heads=1, kv_len=97)


def test_rows_options_and_splits_take_no_time_at_any_32_bit_sequence_length():
    """Closed forms, not a walk over every number of blocks or every split up to d: a
    plan at N = 2^32 - 1 (the register's largest) is made and timed at once."""
    c = paper(64, seq_len=2**32 - 1)
    t0 = time.perf_counter()
    # 9 rows a group of 16 fit; for N / 144 .. N / 72 blocks, 9 down to 5 rows
    assert rows_options(c, 16) == (9, 8, 7, 6, 5)
    plan = choose_plan(c)
    assert plan.q_blocks == -(-(2**32 - 1) // plan.a)
    assert time.perf_counter() - t0 < 30


def test_the_cycle_model_refuses_to_walk_causal_blocks_past_its_bound():
    c = preset("small")
    c = dataclasses.replace(c, workload=dataclasses.replace(
        c.workload, seq_len=16 * (MAX_WALKED_BLOCKS + 1)))
    plan = make_plan(c, split=1, rows_per_mac=1)
    with pytest.raises(ConfigError, match=r"the cycle model walks causal Q blocks one by one, "
                       r"at most 16,384 a pass; N = 262,160 in blocks of 16 rows makes 16,385"):
        simulate(plan, causal=True)
    assert simulate(plan, causal=False).cycles > 0


def test_each_bank_beyond_two_reserves_a_scores_and_pairs_and_a_shrinks_to_fit():
    c = dataclasses.replace(preset("small"), format=FP16Format())
    two, four = make_plan(c, split=4), make_plan(c, split=4, banks=4)
    rows = lambda plan: {r.item: r.count for r in plan.reservations}
    assert rows(two)["score registers"] == 2 * two.a and rows(four)["score registers"] == 4 * four.a
    assert rows(four)["P, alpha as (up, e)"] == 4 * four.a
    # 4 KiB: two banks more of (32-bit score, 33-bit pair) a row cost a row of each group
    assert (four.banks, four.a, four.rows_per_mac) == (4, 28, 7) and two.a == 32
    assert four.cache_used_bytes <= c.budget.cache_bytes
    with pytest.raises(ConfigError, match="mapping: banks must be an integer >= 2, not 1"):
        make_plan(c, banks=1)
    with pytest.raises(ConfigError, match=r"mapping: 8 rows per group of 4 MAC\(s\) do not fit the "
                       r"cache \(at most 7 at s = 4 and 4 banks\)"):
        make_plan(c, split=4, rows_per_mac=8, banks=4)


def test_forced_banks_skip_the_mappings_whose_o_updates_would_overlap():
    """A float MAC writes O back `MAC.update_latency` cycles after reading it: at B > 2 the
    last updates of a block follow each other r d/s cycles apart, so the planner keeps only
    the (s, r) with r d/s above that, and a forced one below it is refused, naming both."""
    from attenio.hdl.formats import arith_of
    from attenio.hdl.mac import MAC

    c = dataclasses.replace(preset("small"), format=FP16Format(), banks=3)
    update = MAC.update_latency(arith_of(c.format, max_seq_len=256, head_dim=16))
    assert 16 < update < 24             # so that both sides of it have mappings below
    plan = choose_plan(c)
    assert plan.banks == 3
    assert all(x.banks == 3 and x.rows_per_mac * 16 // x.split > update
               for x in plan.mapping_choice.candidates)
    r = update // 4                     # s = 4: r d/s = 4 r, at most the update's cycles
    with pytest.raises(ConfigError, match=rf"mapping: an O element would be read before its "
                       rf"update is written \(r\*d/s = {4 * r}, L_sm = \d+, 3 banks; the update "
                       rf"takes {update} cycles\)"):
        choose_plan(dataclasses.replace(c, split=4, rows_per_mac=r))
