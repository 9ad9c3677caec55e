"""The cycle models: the fast walk equals the event walk, bytes equal the Plans, and sanity."""

import dataclasses
import time
from math import ceil

import pytest

from attenio import FP16Format, analysis, preset, validate
from attenio.baselines import all_baselines
from attenio.hdl.formats import FloatArith, fp
from attenio.hdl.mac import score_period
from attenio.plan import make_plan
from attenio.model.baselinemodel import matmul, simulate_baseline, simulate_baselines
from attenio.model.cyclemodel import COUNTER_KEYS, Mapping, RtlParams, model_counters, simulate
from attenio.model.memmodel import Link, Memory


def config(base="small", **kw):
    c = preset(base)
    w = {k: kw.pop(k) for k in ("seq_len", "head_dim", "heads") if k in kw}
    return dataclasses.replace(c, workload=dataclasses.replace(c.workload, **w),
                               budget=dataclasses.replace(c.budget, **kw))


def paper(n, d):
    return config("paper", seq_len=n, head_dim=d)


# Small and medium shapes chosen to reach every regime: compute-bound, memory-bound
# (bw of 1 byte/cycle), long latency, the softmax interlock (q - 1 + r q/L + latency
# > r d), partial last blocks, several heads, r > 1.
CASES = [
    dict(),
    dict(seq_len=300, heads=3, bw_bytes_per_cycle=2, latency_cycles=200),
    dict(seq_len=1000),
    dict(bw_bytes_per_cycle=1, head_dim=32, seq_len=400),
    dict(mac_lines=4, macs_per_line=8, exp_units=4, head_dim=8, seq_len=500),
    dict(mac_lines=2, macs_per_line=4, exp_units=2, head_dim=16, seq_len=777, heads=2,
         latency_cycles=0, bw_bytes_per_cycle=3),
    dict(seq_len=2048, head_dim=32, cache_bytes=16 * 1024, bw_bytes_per_cycle=4),
]


@pytest.mark.parametrize("kw", CASES, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items())
                         or "small")
@pytest.mark.parametrize("variant", [dict(), dict(causal=True), dict(split=2)],
                         ids=["plain", "causal", "split2"])
def test_fast_walk_equals_event_walk(kw, variant):
    variant = dict(variant)
    plan = make_plan(config(**kw), split=variant.pop("split", 1))
    slow = simulate(plan, fast=False, **variant)
    fast = simulate(plan, fast=True, **variant)
    assert fast.counters() == slow.counters()
    assert fast.interlock_stall == slow.interlock_stall


def test_fast_walk_equals_event_walk_with_rtl_knobs():
    plan = make_plan(config(seq_len=600, bw_bytes_per_cycle=2))
    params = RtlParams.of(plan, lane_latency=30, line_skew=7, normalizer_latency=9, block_gap=5,
                          read_start=3, feed_start=2, write_tail=2, feed_pad_rows=True,
                          room_issue=9, block_command=3)
    memory = Memory.of(plan.budget, burst_overhead=3, axi_rate_cap=True)
    assert simulate(plan, params=params, memory=memory).counters() == \
        simulate(plan, params=params, memory=memory, fast=False).counters()


@pytest.mark.parametrize("kw", CASES[:4])
def test_bytes_equal_the_plan_exactly(kw):
    plan = make_plan(config(**kw))
    res = simulate(plan)
    assert (res.bytes_read, res.bytes_written) == (plan.traffic.read_bytes, plan.traffic.write_bytes)


@pytest.mark.parametrize("n", [8192, 131072])
@pytest.mark.parametrize("d", [64, 128])
def test_paper_bytes_equal_the_plan_exactly(n, d):
    plan = make_plan(paper(n, d))
    c = model_counters(plan)
    assert set(c) == set(COUNTER_KEYS)
    assert c["bytes_read"] == plan.traffic.read_bytes
    assert c["bytes_written"] == plan.traffic.write_bytes


def test_model_counters_at_runtime_n_and_heads():
    plan = make_plan(config(seq_len=256))
    for n, h in ((256, 1), (100, 2), (33, 3), (1, 1)):
        c = model_counters(plan, seq_len=n, heads=h)
        t = plan.traffic_at(seq_len=n, heads=h)
        assert (c["bytes_read"], c["bytes_written"]) == (t.read_bytes, t.write_bytes)
        assert c["pe_busy"] == 2 * plan.rows_per_mac * 16 * n * ceil(n / plan.a) * h
    with pytest.raises(ValueError, match="exceeds the Plan"):
        model_counters(plan, seq_len=257)


def test_compute_bound_blocks_take_2rdN_plus_qload():
    """No memory stall, no softmax stall: the first row, a*d + 2 r d N per block, the drain.
    With a KV buffer half refilled in the cycle of its release (`row_refill` 0); the RTL's
    cycle after it costs the Q rows, replayed once each, a few cycles a block."""
    plan = make_plan(config(seq_len=1000, exp_units=16))    # four lanes a line: r q/L = 2
    m, p = Mapping.of(plan), RtlParams.of(plan, row_refill=0)
    d, n, a, r = 16, 1000, plan.a, plan.rows_per_mac
    assert m.skew + m.lane_rows + p.lane_latency <= r * d       # no interlock
    res = simulate(plan, params=p)
    blocks = plan.q_blocks
    bw, lat = plan.budget.bw_bytes_per_cycle, plan.budget.latency_cycles
    # the first Q row: its first byte after the latency, then d cycles into the KV buffer,
    # offered to the replay row_ready cycles after its last element
    first = max(lat + ceil(d / bw), lat + 1 + d - 1) + p.row_ready
    start = p.read_start                        # the RTL's own pipeline on the first access
    last_rows = n - (blocks - 1) * a
    # the last block's drain: its reads, the normalizer, the write's response, the tail
    drain = (m.skew + p.drain_start + last_rows * d - 1 + p.normalizer_latency
             + plan.budget.latency_cycles + p.write_tail)
    assert res.pe_busy == 2 * r * d * n * blocks
    # S_0 of a block waits for the previous drain's reads, which began skew + drain_start
    # cycles after its Qload (the last MAC's last O written) and last a*d cycles like a
    # full Qload, and for the replay's issue after them; the last block loads only its
    # valid rows, so it waits the difference too
    wait = ((blocks - 1) * (m.skew + p.drain_start + p.row_issue)
            + (a - last_rows) * d * (blocks > 1))
    qload = (blocks - 1) * a * d + last_rows * d
    assert res.cycles == start + first + qload + blocks * 2 * r * d * n + wait + drain
    # the replay waits from the KV buffer's first fill until it launches the first row
    assert res.mem_stall == start + first - p.row_issue - p.feed_start
    assert res.drain_wait == wait and res.interlock_stall == 0
    published = simulate(plan)
    assert RtlParams.of(plan).row_refill == 1
    assert res.cycles < published.cycles <= res.cycles + 5 * blocks
    assert published.pe_busy == res.pe_busy and published.mem_stall == res.mem_stall


def test_interlock_stalls_the_feed_when_the_lanes_are_slower():
    """SM_j has U_(j-1) and S_(j+1) to hide behind (2 r d cycles), except SM_0 (only S_1)
    and SM_(N-1) (only U_(N-2)): those two wait once the lanes need more than r d."""
    plan = make_plan(config())
    m, n, blocks = Mapping.of(plan), plan.workload.seq_len, plan.q_blocks
    lanes = lambda lat: m.skew + m.lane_rows + lat
    fast = simulate(plan, params=RtlParams.of(plan, lane_latency=4))
    assert fast.interlock_stall == 0
    mid = 40
    assert m.phase < lanes(mid) <= 2 * m.phase
    res = simulate(plan, params=RtlParams.of(plan, lane_latency=mid))
    assert res.interlock_stall == 2 * (lanes(mid) - m.phase) * blocks
    slow = 80
    assert lanes(slow) > 2 * m.phase
    res = simulate(plan, params=RtlParams.of(plan, lane_latency=slow))
    # U_(j-1) waits for SM_(j-1), which had U_(j-2)'s wait, U_(j-2) and S_j to hide behind:
    # two rows take 2 (2 r d) + (lanes - 2 r d) cycles, half of the excess a row
    steady = (lanes(slow) - 2 * m.phase) / 2 * n * blocks
    assert res.interlock_stall == pytest.approx(steady, rel=0.05)
    assert res.cycles == fast.cycles + res.interlock_stall


@pytest.mark.parametrize("banks", [3, 4, 6])
@pytest.mark.parametrize("kw", [dict(), dict(seq_len=45, heads=2), dict(seq_len=300, causal=True)],
                         ids=["small", "partial-block", "causal"])
def test_more_banks_run_s_ahead_and_hide_the_lanes(banks, kw):
    """B banks let S run B - 1 K rows ahead of U: the lanes' latency is covered by (B - 1)
    row pairs, so a latency that stalls two banks stalls B banks by as much less, and the
    fast walk still equals the event walk (a block shorter than the lead included)."""
    causal = kw.pop("causal", False)
    c = config(**kw)
    plan = make_plan(c, split=1, rows_per_mac=1, banks=banks)
    two = make_plan(c, split=1, rows_per_mac=1)
    assert (plan.banks, two.banks, plan.a) == (banks, 2, two.a)
    m = Mapping.of(plan)
    slow = m.skew + m.lane_rows + 3 * m.phase       # three pairs of rows late for two banks
    params = RtlParams.of(plan, lane_latency=slow)
    res = simulate(plan, params=params, causal=causal)
    assert res.counters() == simulate(plan, params=params, causal=causal, fast=False).counters()
    both = simulate(two, params=RtlParams.of(two, lane_latency=slow), causal=causal)
    assert res.interlock_stall < both.interlock_stall
    assert (res.bytes_read, res.bytes_written, res.pe_busy) == (
        both.bytes_read, both.bytes_written, both.pe_busy)
    assert res.cycles < both.cycles
    if banks == 6 and not causal:
        # (B - 1) pairs of 2 r d cycles cover the lanes but at a block's first and last rows
        assert res.interlock_stall < both.interlock_stall / 10


@pytest.mark.parametrize("kw", [dict(), dict(head_dim=32, seq_len=400), dict(seq_len=700)])
def test_more_bandwidth_or_less_latency_is_never_slower(kw):
    """The same Plan (tiling and prefetch depth) on faster and faster memory."""
    c = config(**kw)
    plan = make_plan(c)
    on = lambda **b: dataclasses.replace(plan, config=dataclasses.replace(
        c, budget=dataclasses.replace(c.budget, **b)))
    for knob, values in (("bw_bytes_per_cycle", (1, 2, 3, 4, 8, 16, 64)),
                         ("latency_cycles", (400, 200, 100, 20, 0))):
        cycles = [simulate(on(**{knob: v})).cycles for v in values]
        assert cycles == sorted(cycles, reverse=True), (knob, cycles)


def test_memory_bound_run_is_bound_by_the_link():
    """fp16 rows at 1 byte a cycle take 2 d cycles to arrive and d cycles to use (with the
    one-cycle accumulator of a what-if; the fp16 RTL's own, interleaved, replays a K row in
    P d cycles, P = `attenio.hdl.mac.score_period`, and is memory bound too)."""
    c = dataclasses.replace(config(bw_bytes_per_cycle=1, head_dim=32, seq_len=400,
                                   cache_bytes=8192, mac_lines=8, macs_per_line=8,
                                   exp_units=8), format=FP16Format())
    plan = make_plan(c)
    assert plan.rows_per_mac == 1
    params = RtlParams.of(plan, score_period=None)
    res = simulate(plan, params=params)
    link = plan.traffic.bytes       # 1 byte per cycle
    assert link <= res.cycles < link * 1.05
    # a K/V row takes 2 d cycles to arrive and d to use: the array waits about half the
    # time, less what the lanes overlap (the stall counter counts only idle cycles)
    assert res.stall_fraction > 0.2
    assert res.counters() == simulate(plan, params=params, fast=False).counters()
    # as built, the interleaved sub-sums leave no idle slot that would make it compute bound
    assert simulate(plan).cycles < link * 1.05


def test_split_rows_fill_the_idle_macs_at_d128():
    plan = make_plan(paper(16384, 128))
    split = make_plan(paper(16384, 128), split=2)
    assert plan.a < plan.budget.macs // 2 and (split.a, split.rows_per_mac) == (659, 1)
    plain, two = simulate(plan), simulate(split)
    assert two.mapping.phase == plain.mapping.phase // 2 == 64
    # the same 25 blocks of N K/V rows each, at half the cycles per row
    assert two.spatial_util == pytest.approx(2 * plain.spatial_util, rel=1e-12)
    # a K row costs P d/s cycles, P = `score_period` (1 at s = 1, 2 at s = 2: d/s = 64 is too
    # few chunks for nine sub-sums), a V row d/s
    periods = [RtlParams.of(p).score_period for p in (plan, split)]
    assert periods == [1, 2]
    assert plain.cycles / two.cycles > 0.99 * (1 + 1) * 128 / ((2 + 1) * 64)
    for res, p in ((plain, plan), (two, split)):
        assert (res.bytes_read, res.bytes_written) == (p.traffic.read_bytes, p.traffic.write_bytes)


def test_causal_skips_rows_past_each_block_and_their_traffic():
    plan = make_plan(config(seq_len=1000))
    full, causal = simulate(plan), simulate(plan, causal=True)
    n, d, a = 1000, 16, plan.a
    assert n % a                                               # a short block, first
    kv_rows = sum(n % a + i for i in range(0, n, a))           # up to each block's last row
    assert causal.bytes_read == n * d + 2 * kv_rows * d        # int8: 1 byte an element
    assert causal.bytes_read == analysis.attention_io(n, d, a, causal=True)[0]
    shorter_last = sum(min(n, i + a) for i in range(0, n, a))
    assert kv_rows < shorter_last
    assert causal.bytes_written == full.bytes_written
    assert causal.pe_busy == 2 * plan.rows_per_mac * d * kv_rows
    assert causal.cycles < 0.6 * full.cycles
    assert causal.useful_macs == 2 * d * n * (n + 1) // 2


def test_paper_preset_is_fast_and_sane():
    """N = 128K in the model: the array busy 2 r d cycles a K/V row, and the cycles those
    rows take, (P + r) d with the fp16 RTL's P = `attenio.hdl.mac.score_period` cycles a K
    chunk, plus under 1 %."""
    for d in (64, 128):
        plan = make_plan(paper(131072, d))
        res = simulate(plan)
        ideal = 2 * plan.rows_per_mac * d * 131072 * plan.q_blocks
        assert res.pe_busy == ideal
        period = RtlParams.of(plan).score_period
        arith = FloatArith(fp.FP16, max_seq_len=131072, head_dim=d)
        assert period == score_period(arith, plan.rows_per_mac, head_dim=d, split=plan.split)
        rows = (period + plan.rows_per_mac) * d * 131072 * plan.q_blocks
        assert rows < res.cycles < 1.01 * rows
        assert res.spatial_util == pytest.approx(131072 / (plan.q_blocks * plan.a), rel=1e-9) \
            or res.spatial_util < plan.a / plan.budget.macs


# --- memory ------------------------------------------------------------------------

def test_link_latency_is_paid_once_per_stream_and_writes_fill_idle_time():
    mem = Memory(bw_bytes=8, latency=100, axi_bytes=8)
    link = Link(mem)
    arrivals = [link.read(0, 64) for _ in range(4)]
    assert arrivals == [108, 116, 124, 132]
    link.write(0, 80)                       # 10 cycles, sent before a later read
    assert link.read(200, 8) == 301
    assert link.free == 301 and not link.debt
    assert Memory(bw_bytes=128, latency=0, axi_bytes=64, axi_rate_cap=True).transfer_cycles(256) == 4
    assert Memory(bw_bytes=128, latency=0, axi_bytes=64).transfer_cycles(256) == 2
    with pytest.raises(ValueError):
        Memory(bw_bytes=0, latency=1)


# --- baselines ---------------------------------------------------------------------

def test_matmul_mapping_and_spatial_utilization():
    assert matmul(64, 1024, 64, 64, 32).busy == 32 * 64          # 64 x 1024 outputs, 32 passes
    mm = matmul(113, 1024, 64, 64, 32)
    assert mm.busy == 64 * 64 and mm.useful == 113 * 1024 * 64
    one_row = matmul(1, 4096, 64, 64, 32)                        # one row: 1/32 of the array
    assert one_row.busy == 64 * 64 and one_row.useful * 32 == one_row.busy * 64 * 32


@pytest.mark.parametrize("n, d", [(8192, 64), (65536, 128)])
def test_baselines_report_their_plan_traffic_exactly(n, d):
    c = paper(n, d)
    bls = all_baselines(c)
    for name, res in simulate_baselines(c, bls).items():
        assert res.bytes_read == bls[name].traffic.read_bytes
        assert res.bytes_written == bls[name].traffic.write_bytes
        assert 0 < res.pe_util <= 1 and 0 < res.spatial_util <= 1 and 0 <= res.stall_fraction < 1
        assert res.useful_macs == 2 * n * n * d


def test_baselines_more_bandwidth_is_never_slower():
    for name in ("standard", "flat", "flashattention2", "flashattention2_fair"):
        prev = None
        for bw in (8, 16, 32, 64, 128, 256):
            c = config("paper", seq_len=16384, head_dim=64, bw_bytes_per_cycle=bw)
            cyc = simulate_baseline(c, all_baselines(c)[name]).cycles
            assert prev is None or cyc <= prev, (name, bw)
            prev = cyc


def test_fa2_causal_skips_blocks_past_the_diagonal():
    c = paper(16384, 64)
    bl = all_baselines(c)["flashattention2"]
    full, causal = simulate_baseline(c, bl), simulate_baseline(c, bl, causal=True)
    assert causal.cycles < 0.6 * full.cycles
    assert causal.bytes_read < full.bytes_read and causal.bytes_written == full.bytes_written
    with pytest.raises(ValueError, match="FlashAttention-2 only"):
        simulate_baseline(c, all_baselines(c)["flat"], causal=True)


def test_fa2_decoder_shapes_read_each_query_heads_kv():
    """FA-2 with N_kv != N and grouped heads: every query head reads its K/V head's rows
    (no pass serves a group), so its K/V bytes are heads x 2 N_kv d, g times AttenIO's
    grouped blocks'; the other baselines have no decoder model and say so."""
    c = paper(8192, 128)
    w = dataclasses.replace(c.workload, seq_len=1, kv_len=4096, heads=8, kv_heads=1)
    c = dataclasses.replace(c, workload=w)
    bls = all_baselines(c)
    fa2 = simulate_baseline(c, bls["flashattention2"])
    eb = c.format.element_bytes
    assert fa2.bytes_read == 8 * (128 + 2 * 4096 * 128) * eb
    assert fa2.bytes_written == 8 * 128 * eb
    ours = make_plan(c)
    assert ours.grouped and ours.traffic.read_bytes == (8 * 128 + 2 * 4096 * 128) * eb
    with pytest.raises(ValueError, match="FlashAttention-2 only, not flat"):
        simulate_baseline(c, bls["flat"])


def test_rtl_params_are_the_hardware_latencies():
    """`RtlParams.of` reads every field from the blocks (`CoreTiming`, `TopTiming`), the
    what-if `block_gap` aside, and the normalizer follows the reciprocal's Newton steps
    (10 stages each); tests/test_rtl_timing.py holds the result to the RTL's counters
    exactly."""
    from attenio.formats import Int8Format
    from attenio.hdl.core import CoreTiming
    from attenio.hdl.formats import arith_of
    from attenio.hdl.top import TopTiming
    small = make_plan(preset("small"))
    b, w = small.budget, small.workload
    arith = arith_of(small.config.format, max_seq_len=w.max_keys, head_dim=w.head_dim)
    core = CoreTiming.of(arith,
                         macs_per_line=b.macs_per_line, rows_per_mac=small.rows_per_mac,
                         lanes=validate.lanes_per_line(exp_units=b.exp_units,
                                                       mac_lines=b.mac_lines,
                                                       macs_per_line=b.macs_per_line),
                         split=small.split, head_dim=w.head_dim)
    top = TopTiming.of(small, arith)
    params = RtlParams.of(small)
    for f in dataclasses.fields(RtlParams):
        if f.name not in ("block_gap", "banks"):
            timing = core if hasattr(core, f.name) else top
            assert getattr(params, f.name) == getattr(timing, f.name), f.name
    assert params.block_gap == 0 and params.line_skew == b.macs_per_line - 1
    assert params.banks == small.banks == 2
    drains = []
    for iters in range(4):
        fmt = Int8Format(p_frac=16, recip_iters=iters)
        plan = make_plan(dataclasses.replace(preset("small"), format=fmt))
        drains.append(RtlParams.of(plan).normalizer_latency)
    assert drains == [16, 26, 36, 46]
    assert RtlParams.of(small, write_tail=0).write_tail == 0            # overrides
    assert RtlParams.of(small, block_gap=3).block_gap == 3
    assert RtlParams.of(make_plan(preset("paper"))).line_skew == 31     # fp16: int8 stands in


def test_a_field_no_block_publishes_is_an_error_not_a_default():
    """A knob the hardware does not publish (a timing field renamed, say) must not fall
    back to a number: `of` names it, and the dataclass has no defaults to fall back on."""
    @dataclasses.dataclass(frozen=True)
    class Renamed(RtlParams):
        lane_tail: int = 0

    with pytest.raises(ValueError, match="no block publishes lane_tail"):
        Renamed.of(make_plan(preset("small")))
    with pytest.raises(TypeError):
        RtlParams(lane_latency=30)


def test_the_model_refuses_the_budgets_the_rtl_refuses():
    """EXP units that do not spread evenly over the lanes of a line: the Plan exists (the
    I/O analysis needs no lanes), but neither the RTL nor the cycle model can time it, and
    both say so in the same words (`attenio.validate.lanes_per_line`)."""
    from attenio.errors import ConfigError
    from attenio.hdl.top import check_plan
    # 3 EXP units over 4 lines; 12 make 3 lanes a line, which do not share its 4 MACs evenly
    for exp_units in (3, 12):
        plan = make_plan(config(exp_units=exp_units))
        with pytest.raises(ConfigError) as rtl:
            check_plan(plan)
        with pytest.raises(ConfigError) as model:
            simulate(plan)
        assert str(model.value) == str(rtl.value)
        assert "exp_units" in str(model.value)


@pytest.mark.parametrize("n, n_kv, causal", [(1, 1000, False), (1, 1000, True),
                                             (300, 1000, True), (1000, 77, False),
                                             (259, 777, False)])
def test_kv_len_apart_from_seq_len(n, n_kv, causal):
    """N query rows against N_kv key rows: each block streams N_kv K/V rows (causal: up to
    causal_limit of its last row, rows aligned at the end), the walks agree, the bytes are
    the Plan's and the PE array is busy 2 r d a K/V row of each block."""
    plan = make_plan(config(seq_len=1000))
    d, a = 16, plan.a
    fast = simulate(plan, seq_len=n, kv_len=n_kv, heads=2, causal=causal)
    slow = simulate(plan, seq_len=n, kv_len=n_kv, heads=2, causal=causal, fast=False)
    assert fast.counters() == slow.counters()
    kv_rows = sum(analysis.causal_limit(r0 + rows - 1, n, n_kv) if causal else n_kv
                  for r0, rows in analysis.q_blocks(n, a, causal=causal))
    assert fast.bytes_read == 2 * (n * d + 2 * kv_rows * d)
    t = plan.traffic_at(seq_len=n, heads=2, causal=causal, kv_len=n_kv)
    assert (fast.bytes_read, fast.bytes_written) == (t.read_bytes, t.write_bytes)
    assert fast.pe_busy == 2 * 2 * plan.rows_per_mac * d * kv_rows
    pairs = n * (n + 1) // 2 + n * (n_kv - n) if causal else n * n_kv
    assert fast.useful_macs == 2 * 2 * d * pairs


def test_kv_len_defaults_and_limits():
    """kv_len follows the workload (None: the run's N), the hardware's max_keys bounds both."""
    c = config(seq_len=64)
    c = dataclasses.replace(c, workload=dataclasses.replace(c.workload, kv_len=200))
    plan = make_plan(c)
    assert plan.workload.max_keys == 200
    assert model_counters(plan, seq_len=1) == model_counters(plan, seq_len=1, kv_len=200)
    plain = make_plan(config(seq_len=64))
    assert model_counters(plain, seq_len=10) == model_counters(plain, seq_len=10, kv_len=10)
    with pytest.raises(ValueError, match="kv_len 201 exceeds"):
        model_counters(plan, seq_len=1, kv_len=201)
    with pytest.raises(ValueError, match="kv_len >= seq_len"):
        model_counters(plan, seq_len=64, kv_len=63, causal=True)


@pytest.mark.parametrize("n, n_kv, causal, g", [(1, 300, False, 2), (1, 300, False, 4),
                                                (45, 45, True, 2), (20, 45, True, 2),
                                                (100, 70, False, 4)])
def test_grouped_blocks_serve_the_group_in_one_pass(n, n_kv, causal, g):
    """Blocks that hold a div g rows of each of g query heads (MODE.GROUPED): heads / g passes,
    each block reads its K/V rows once for the g heads; the walks agree, the bytes are the
    grouped Plan's, the useful MACs those of every query head, and PE busy 2 r d a K/V row."""
    plan = make_plan(config(seq_len=1000))
    d, a, heads = 16, plan.a, 4
    kw = dict(seq_len=n, kv_len=n_kv, heads=heads, causal=causal, grouped=True, group=g)
    fast = simulate(plan, **kw)
    assert fast.counters() == simulate(plan, fast=False, **kw).counters()
    kv_rows = sum(analysis.causal_limit(r0 + rows - 1, n, n_kv) if causal else n_kv
                  for r0, rows in analysis.q_blocks(n, a // g, causal=causal))
    assert fast.bytes_read == heads * n * d + heads // g * 2 * kv_rows * d
    t = plan.traffic_at(seq_len=n, heads=heads, causal=causal, kv_len=n_kv, grouped=True,
                        group=g)
    assert (fast.bytes_read, fast.bytes_written) == (t.read_bytes, t.write_bytes)
    assert fast.pe_busy == heads // g * 2 * plan.rows_per_mac * d * kv_rows
    pairs = n * (n + 1) // 2 + n * (n_kv - n) if causal else n * n_kv
    assert fast.useful_macs == heads * 2 * d * pairs
    one = simulate(plan, seq_len=n, kv_len=n_kv, heads=heads, causal=causal, grouped=False)
    if n == 1:      # a decode step: one pass over the cache per group instead of per head
        assert one.bytes_read - heads * d == g * (fast.bytes_read - heads * d)
        assert fast.cycles < one.cycles


def test_the_fast_walk_finds_periods_longer_than_a_few_steps():
    """Five banks at s = 16, r = 7 on the paper array repeat every 5 (S, U) pairs: the fast
    walk jumps over them and still equals the event walk. (A window of the last four steps
    once stepped every K row: 34 s at N = 2^18, hours at 2^32 - 1; now well under 1 s.)"""
    plan = make_plan(paper(16384, 64), split=16, rows_per_mac=7, banks=5)
    assert simulate(plan, fast=True).counters() == simulate(plan, fast=False).counters()
    huge = make_plan(paper(2**20, 64), split=16, rows_per_mac=7, banks=5)
    t0 = time.process_time()
    assert simulate(huge).bytes_read == huge.traffic.read_bytes
    assert time.process_time() - t0 < 10


@pytest.mark.parametrize("n, n_kv, causal, g, grouped", [
    (777, 777, False, 1, False), (777, 800, True, 1, False), (300, 300, True, 2, True),
    (301, 350, False, 4, True)])
def test_block_ranges_are_runs_of_their_rows_and_partitions_add_up(n, n_kv, causal, g, grouped):
    """A range of Q blocks costs what the run of its rows costs (`Plan.block_range`), for the
    model and the Plan alike; a partition of the blocks into ranges moves the whole run's
    bytes and computes its PE- and EXP-busy cycles, while each launch pays its own start
    (cycles and memory stall: more in all than the whole run)."""
    plan = make_plan(config(seq_len=1000, heads=4))
    kw = dict(seq_len=n, kv_len=n_kv, heads=4, causal=causal, grouped=grouped, group=g)
    whole = simulate(plan, **kw)
    total = analysis.block_count(n, plan.a // (g if grouped else 1))
    cuts = [0, 1, total // 2, total - 1, total]
    parts = []
    for first, end in zip(cuts, cuts[1:]):
        if end == first:
            continue
        r = plan.block_range(first, end - first, seq_len=n, causal=causal, kv_len=n_kv,
                             grouped=grouped, group=g)
        got = simulate(plan, blocks=(first, end - first), **kw)
        assert got.counters() == simulate(plan, **{**kw, "seq_len": r.rows,
                                                   "kv_len": r.n_kv}).counters()
        t = plan.traffic_at(blocks=(first, end - first), **kw)
        assert (got.bytes_read, got.bytes_written) == (t.read_bytes, t.write_bytes)
        parts.append(got)
    for key in ("bytes_read", "bytes_written", "pe_busy", "exp_busy"):
        assert sum(getattr(p, key) for p in parts) == getattr(whole, key)
    assert sum(p.cycles for p in parts) > whole.cycles
    assert simulate(plan, blocks=(0, 0), **kw).counters() == whole.counters()
