"""The hardware planner and every baseline's closed form, checked against the executor."""

import dataclasses

import numpy as np
import pytest

from attenio import Budget, Config, ConfigError, FP16Format, Int8Format, Workload, preset
from attenio.baselines import all_baselines
from attenio.executor import (reference_attention, run_attenio, run_flashattention2, run_flat,
                              run_standard)
from attenio.plan import _cache_bytes, kv_prefetch_depth, make_plan


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
    assert _cache_bytes(c, plan.a_fit, depth) <= c.budget.cache_bytes
    assert _cache_bytes(c, plan.a_fit + 1, depth) > c.budget.cache_bytes
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


def test_mapping_gives_every_row_one_owner():
    plan = make_plan(preset("small"))
    b = plan.budget
    rows = [plan.row_of(line, mac, slot) for slot in range(plan.rows_per_mac)
            for line in range(b.mac_lines) for mac in range(b.macs_per_line)]
    assert sorted(rows) == list(range(plan.a))


def test_prefetch_depth_covers_latency():
    assert kv_prefetch_depth(config(64, 16, 4096, latency=0, bw=16)) == 2
    assert kv_prefetch_depth(config(64, 16, 4096, latency=100, bw=16)) == 1 + -(-(100 + 2) // 16)


def test_cache_too_small_for_one_row_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"cannot hold one query row .* \(needs \d+ bytes\)"):
        make_plan(config(64, 64, 256))
