"""The cycle model against the RTL's counters, exactly, on a deterministic memory.

`RtlParams.of(plan)` takes every latency from the blocks the Plan generates (the
format's pipelines, the MAC, the lanes, the replay, the normalizer, the path
around the core), so the model must predict each counter of the generated
design to the cycle: on the in-design memory model (fixed latency, one beat per
cycle; the fast engine, `attenio.sim.fast`, whose counters equal the cocotb bench's:
tests/test_fast_sim.py), with a partial last block and two heads. The configurations differ in
array shape, lanes per line, head dimension, the reciprocal's Newton steps (the
normalizer's latency), p_frac, the memory latency, the rows' split over s MACs and
the score banks B (`attenio.hdl.kv_buffer.kv_order`); some of them are bound by the
softmax interlock rather than by the feed. Some also run with the causal mask (the
short block first, fewer keys a block, the sequencer's N mod a before the first
block), on the same build.
"""

import dataclasses

import pytest

from attenio import preset
from attenio.formats import FloatFormat, Int8Format
from attenio.plan import make_plan
from attenio.model.cyclemodel import COUNTER_KEYS, RtlParams
from attenio.sim.e2e import E2EOptions, run_e2e
from attenio.sim.runner import simulator_available


def _config(name, *, macs, exp_units, head_dim, recip_iters, p_frac=16, latency=20,
            cache_bytes=4096, split=1, fmt="int8", kv_heads=None, banks=None):
    base = preset("small")
    return dataclasses.replace(
        base, name=f"timing_{name}", split=split, banks=banks,
        workload=dataclasses.replace(base.workload, seq_len=64, head_dim=head_dim, heads=2,
                                     kv_heads=kv_heads),
        budget=dataclasses.replace(base.budget, mac_lines=macs[0], macs_per_line=macs[1],
                                   exp_units=exp_units, latency_cycles=latency,
                                   cache_bytes=cache_bytes),
        format=(Int8Format(p_frac=p_frac, recip_iters=recip_iters) if fmt == "int8" else
                FloatFormat(name=fmt, p_frac=p_frac, recip_iters=recip_iters)))


CONFIGS = {
    # the small preset's array and format
    "4x4_e4_d16_it2": _config("a", macs=(4, 4), exp_units=4, head_dim=16, recip_iters=2),
    # another array, no Newton step (the shortest normalizer)
    "2x4_e2_d16_it0": _config("b", macs=(2, 4), exp_units=2, head_dim=16, recip_iters=0),
    # d = 8, one row per MAC (a = 16) and one lane for 8 MACs: every U_j waits for the
    # lanes (interlock-bound)
    "2x8_e2_d8_it1": _config("c", macs=(2, 8), exp_units=2, head_dim=8, recip_iters=1,
                             cache_bytes=1024),
    # two lanes per line, three Newton steps, wider P, a slower memory
    "4x4_e8_d16_it3": _config("d", macs=(4, 4), exp_units=8, head_dim=16, recip_iters=3,
                              p_frac=20, latency=40),
    # rows split over s MACs: the small preset at s = 2 (a = 32, r = 4); one group per lane
    # (two lanes of 2 MACs a line); s = 4 with two chunks a row, interlock-bound
    "4x4_e4_d16_s2": _config("e", macs=(4, 4), exp_units=4, head_dim=16, recip_iters=2,
                             split=2),
    "2x4_e4_d16_s2": _config("f", macs=(2, 4), exp_units=4, head_dim=16, recip_iters=1,
                             split=2, latency=40),
    "2x8_e2_d8_s4": _config("g", macs=(2, 8), exp_units=2, head_dim=8, recip_iters=1,
                            cache_bytes=1024, split=4),
    # the float formats, whose K rows go chunk by chunk (`attenio.hdl.mac.score_period`): the
    # small preset's array at s = 2 (r = 4 < L_acc: three sub-sums a slot); s = 4 (r = 8, two
    # sub-sums); two chunks a row at a MAC (d/s = 2: two sub-sums and a longer period);
    # grouped heads (one K/V head for both); s = 1 (r = 2: five sub-sums, folded in every MAC)
    "4x4_e4_d16_fp16_s2": _config("h", macs=(4, 4), exp_units=4, head_dim=16, recip_iters=2,
                                  split=2, fmt="fp16"),
    "4x4_e4_d16_bf16_s4": _config("i", macs=(4, 4), exp_units=4, head_dim=16, recip_iters=2,
                                  split=4, fmt="bf16"),
    "2x8_e2_d8_bf16_s4": _config("j", macs=(2, 8), exp_units=2, head_dim=8, recip_iters=1,
                                 cache_bytes=1024, split=4, fmt="bf16"),
    "2x4_e4_d16_fp16_s2_gqa": _config("k", macs=(2, 4), exp_units=4, head_dim=16,
                                      recip_iters=1, split=2, latency=40, fmt="fp16",
                                      kv_heads=1),
    "4x4_e4_d16_fp16_s1": _config("l", macs=(4, 4), exp_units=4, head_dim=16, recip_iters=2,
                                  fmt="fp16"),
    # B > 2 score banks (S runs B - 1 K rows ahead of U, the last B - 1 U rows of a block
    # follow each other): the interlock-bound arrays, at B = 3 and, with s = 4, at B = 4 (a =
    # 12: the causal run's first block has 9 rows); a float one with grouped heads at B = 3
    "2x8_e2_d8_it1_b3": _config("m", macs=(2, 8), exp_units=2, head_dim=8, recip_iters=1,
                                cache_bytes=1024, banks=3),
    "2x8_e2_d8_s4_b4": _config("n", macs=(2, 8), exp_units=2, head_dim=8, recip_iters=1,
                               cache_bytes=1024, split=4, banks=4),
    "2x4_e4_d16_fp16_s2_gqa_b3": _config("o", macs=(2, 4), exp_units=4, head_dim=16,
                                         recip_iters=1, split=2, latency=40, fmt="fp16",
                                         kv_heads=1, banks=3),
    # the small preset's own fp16 mapping (the planner's at N = 256): s = 4, r = 7 (two
    # sub-sums a slot), four banks, a = 28 (the causal run's first block has 17 rows)
    "4x4_e4_d16_fp16_s4_b4": _config("p", macs=(4, 4), exp_units=4, head_dim=16,
                                     recip_iters=2, split=4, fmt="fp16", banks=4),
}
SEQ_LEN, HEADS = 45, 2          # at a = 32 (16) two (three) blocks a head, the last partial

#: the default suite's configurations (each a build of its own; the others are slow): the
#: small preset's in int8 and in fp16 as the planner maps them, and an interlock-bound one
#: at B = 4 (its B = 2 twin, 2x8_e2_d8_s4, is slow: tests/test_e2e.py's s = 4 runs hold B = 2
#: exact to the model)
_DEFAULT = ("4x4_e4_d16_it2", "4x4_e4_d16_fp16_s4_b4", "2x8_e2_d8_s4_b4")
#: configurations that also run with the causal mask: the small preset's, an interlock-bound
#: one, float ones
_CAUSAL = ("4x4_e4_d16_it2", "2x8_e2_d8_s4", "4x4_e4_d16_fp16_s2", "4x4_e4_d16_fp16_s4_b4",
           "2x8_e2_d8_s4_b4")


def _params():
    out = []
    for name in sorted(CONFIGS):
        marks = () if name in _DEFAULT else (pytest.mark.slow,)
        out.append(pytest.param((name, False), marks=marks, id=name))
        if name in _CAUSAL:     # on the same build, so in the same suite
            out.append(pytest.param((name, True), marks=marks, id=f"{name}-causal"))
    return out


@pytest.fixture(scope="module", params=_params())
def run(request, tmp_path_factory):
    if not simulator_available("verilator"):
        pytest.skip("verilator is not installed on this machine")
    name, masked = request.param
    config = CONFIGS[name]
    if masked:
        plan = make_plan(config)
        config = dataclasses.replace(
            config, workload=dataclasses.replace(config.workload, causal=True),
            split=plan.split, rows_per_mac=plan.rows_per_mac)
    out = tmp_path_factory.getbasetemp() / f"timing_{name}"     # one build for both masks
    report = run_e2e(config, out, E2EOptions(simulator="verilator", seed=7, quick_build=True,
                                             seq_len=SEQ_LEN, heads=HEADS, memory="model",
                                             engine="fast"),
                     log=lambda line: None)
    assert report["causal"] == masked
    return name + ("-causal" if masked else ""), config, report


def test_the_interlock_binds_in_one_configuration():
    """The set covers both regimes: a feed-bound array and an interlock-bound one."""
    slack, drain = {}, set()
    for name, config in CONFIGS.items():
        plan = make_plan(config)
        b, t = plan.budget, RtlParams.of(plan)
        lane_rows = plan.rows_per_mac * b.macs_per_line * b.mac_lines // b.exp_units // plan.split
        sm_latency = t.line_skew + lane_rows + t.lane_latency
        slack[name] = 2 * plan.rows_per_mac * config.workload.head_dim // plan.split - sm_latency
        drain.add(t.normalizer_latency)
    # 0..3 Newton steps of 10 stages each (their operands' registers included); the float
    # formats' fp32 stages
    assert drain == {16, 26, 36, 46, 43, 53}
    assert sorted(make_plan(c).split for c in CONFIGS.values()) == [1] * 6 + [2] * 5 + [4] * 5
    assert sorted(make_plan(c).banks for c in CONFIGS.values()) == [2] * 12 + [3, 3, 4, 4]
    assert min(slack.values()) < 0 < max(slack.values()), slack


def test_output_is_bit_exact_and_bytes_equal_the_plan(run):
    name, config, report = run
    (result,) = report["runs"]
    assert result["bit_exact"], f"{name}: {result['mismatches']} bytes differ from the golden model"
    c = result["counters"]
    assert (c["BYTES_READ"], c["BYTES_WRITTEN"]) == (report["plan_bytes_read"],
                                                   report["plan_bytes_written"])


@pytest.mark.parametrize("counter", COUNTER_KEYS)
def test_counter_equals_the_model(run, counter):
    name, config, report = run
    (result,) = report["runs"]
    rtl, model = result["counters"][counter.upper()], report["model"][counter]
    print(f"{name}: {counter} RTL {rtl}, model {model}")
    assert rtl == model, f"{name}: {counter} RTL {rtl} != model {model}"
