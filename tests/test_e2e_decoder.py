"""Decoder shapes end to end: N query rows against N_kv key rows, g query heads a K/V head.

The hardware is tests/test_e2e.py's (small preset, N <= 96) and so are its build
directories: KV_LEN, HEAD_GROUP and MODE.CAUSAL are run-time registers, so these runs
reuse its Verilog and its simulator builds. Each test is one simulation, seeded and
printed; bit-exact against the golden model (per query head against K/V head h // g),
bytes equal to the Plan, counters against the cycle model. Where blocks that serve a
whole K/V group move less (`attenio.plan.wins_grouped`), the run sets MODE.GROUPED, as
the e2e does by default: K and V are then read once a group.
"""

import dataclasses

import pytest

from attenio.analysis import block_keys
from attenio.plan import make_plan
from attenio.regmap import ErrorCode
from attenio.sim.e2e import E2EOptions, run_e2e
from e2e_common import FLOAT_HW, HW, SHARED_BUILDS, check_run, need, workload

pytestmark = SHARED_BUILDS


def kv_keys(n, n_kv, rows_a, causal):
    """K/V rows one pass reads over blocks of `rows_a` rows of each head."""
    return sum(k for _, _, k in block_keys(n, rows_a, causal=causal, n_kv=n_kv))


def check_good(report, n, n_kv, heads, group, *, exact, eb=1, grouped=None):
    """Every good run: bit-exact, bytes equal to the Plan, counters against the cycle model
    (equal when the memory is deterministic, within 1 % of the cycles when it stalls at
    random). Each block reads N_kv K/V rows, causal ones up to its last row's limit; with
    grouped blocks (a div g rows of each of g heads) once a group, not once a query head."""
    causal = report["causal"]
    if grouped is not None:
        assert report["grouped"] == grouped
    gb = group if report["grouped"] else 1
    keys = kv_keys(n, n_kv, report["a"] // gb, causal)
    d = report["head_dim"]
    assert (report["seq_len"], report["kv_len"], report["heads"]) == (n, n_kv, heads)
    assert (report["head_group"], report["kv_heads"]) == (group, heads // group)
    assert report["plan_bytes_read"] == (heads * n + heads // gb * 2 * keys) * d * eb
    assert report["plan_bytes_written"] == heads * n * d * eb
    for run in report["runs"]:
        if not run["bad"]:
            check_run(run, report, exact=exact, pe_floor=(heads // gb * keys * 2
                                                          * report["rows_per_mac"] * d
                                                          // report["split"]))


@pytest.mark.parametrize("simulator, group", [("verilator", 2),
                                               pytest.param("icarus", 2, marks=pytest.mark.slow),
                                               ("verilator", 4),
                                               pytest.param("icarus", 4, marks=pytest.mark.slow)])
def test_decode_one_query_row_against_70_keys_grouped(tmp_path_factory, simulator, group, seed):
    """A decode step: one query row of each of four query heads against a cache of 70 keys,
    g query heads a K/V head; random latency and back-pressure and a random layout; N_kv
    comes from the Workload. Each block holds the row of every head of a group (block row h
    is head h's), so K/V is read 4 / g times, not 4: g times less than blocks of one head."""
    need(simulator)
    out = tmp_path_factory.getbasetemp() / f"e2e_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=1, heads=4,
                      head_group=group, latency=(0.2, 8), backpressure=0.3, random_layout=True)
    report = run_e2e(workload(HW, kv_len=70), out, opts)
    check_good(report, 1, 70, 4, group, exact=False, grouped=True)
    d = report["head_dim"]
    kv_read = report["runs"][0]["counters"]["BYTES_READ"] - 4 * d     # Q: one row a head
    assert kv_read == 4 // group * 2 * 70 * d
    one_head = make_plan(HW).traffic_at(seq_len=1, heads=4, kv_len=70, grouped=False)
    assert one_head.read_bytes - 4 * d == group * kv_read


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_causal_20_rows_against_45_keys_mqa(tmp_path_factory, simulator, seed):
    """Causal, rows aligned at the end: query row i sees keys up to i + 25, one block of 20
    rows (partial) reading 45 keys, its diagonal masked in the lanes; two query heads share
    the one K/V head (MQA). Input kind "ascending" moves every row's max at every key, so a
    masked key that moved it would show. The memory is deterministic: counters exact."""
    need(simulator)
    out = tmp_path_factory.getbasetemp() / f"e2e_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=20, kv_len=45,
                      heads=2, head_group=2, input_kind="ascending")
    report = run_e2e(workload(HW, causal=True), out, opts)
    assert report["causal"]
    check_good(report, 20, 45, 2, 2, exact=True, grouped=True)


def test_grouped_causal_prefill_45_rows(tmp_path_factory, seed):
    """Causal self-attention of 45 rows, two query heads on one K/V head, grouped: blocks of
    16 rows of each head (13 + 16 + 16, the short one first), 32 block rows, each row's
    threshold stepping by 2 a key; K/V read 13 + 29 + 45 rows once, not 13 + 45 per head.
    Deterministic memory: counters exact."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    opts = E2EOptions(simulator="verilator", seed=seed, quick_build=True, seq_len=45, kv_len=45,
                      heads=2, head_group=2, input_kind="ascending")
    report = run_e2e(workload(HW, causal=True), out, opts)
    check_good(report, 45, 45, 2, 2, exact=True, grouped=True)
    assert kv_keys(45, 45, 16, True) == 13 + 29 + 45 < 2 * kv_keys(45, 45, 32, True)


def test_mqa_four_heads_more_queries_than_keys(tmp_path_factory, seed):
    """Four query heads on one K/V head (MQA, g = 4), 45 query rows (32 + 13: a partial
    block) against 30 key rows (cross-attention, N_kv < N), random back-pressure; blocks of
    one head (MODE.GROUPED clear), so the K/V head down-counter is exercised."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    opts = E2EOptions(simulator="verilator", seed=seed, quick_build=True, seq_len=45, kv_len=30,
                      heads=4, head_group=4, backpressure=0.2, random_layout=True, grouped=False)
    report = run_e2e(HW, out, opts)
    check_good(report, 45, 30, 4, 4, exact=False, grouped=False)


def test_bad_decoder_runs_set_their_error_and_leave_the_machine_usable(tmp_path_factory,
                                                                       seed):
    """N_kv above the hardware's, causal with N_kv < N, HEAD_GROUP = 0, above 255, above the
    block's 32 rows with MODE.GROUPED, grouped with HEADS not a multiple of it, and 257 heads
    with MODE.HEAD_SCALES (the table holds 256): each run ends with its code and moves no
    byte; then a good grouped run on the same machine."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    bad = ({"KV_LEN": 97}, {"MODE": 1, "KV_LEN": 19}, {"HEAD_GROUP": 0}, {"HEAD_GROUP": 256},
           {"MODE": 2, "HEAD_GROUP": 33}, {"MODE": 2, "HEADS": 3}, {"MODE": 4, "HEADS": 257})
    codes = [ErrorCode.KV_LEN_TOO_LARGE, ErrorCode.CAUSAL_KV_SHORT, ErrorCode.HEAD_GROUP_ZERO,
             ErrorCode.HEAD_GROUP_TOO_LARGE, ErrorCode.GROUP_OVER_BLOCK,
             ErrorCode.HEADS_NOT_GROUPED, ErrorCode.SCALE_TABLE_SHORT]
    opts = E2EOptions(simulator="verilator", seed=seed, quick_build=True, seq_len=20, kv_len=33,
                      heads=2, head_group=2, bad_runs=bad)
    report = run_e2e(HW, out, opts)
    for run, code in zip(report["runs"], codes):
        assert run["bad"] and run["error"] == code, run
        assert run["status"] == 2 and run["o_untouched"]
        assert run["counters"]["BYTES_WRITTEN"] == 0 and run["counters"]["BYTES_READ"] == 0
    check_good(report, 20, 33, 2, 2, exact=True)


@pytest.mark.slow
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
@pytest.mark.parametrize("n, n_kv, heads, group, causal", [
    (1, 96, 2, 1, True), (33, 70, 4, 2, True), (96, 1, 2, 2, False), (7, 90, 3, 3, False)])
def test_more_decoder_shapes(tmp_path_factory, simulator, n, n_kv, heads, group, causal, seed):
    """More (N, N_kv, heads, g) on both simulators with random latency and back-pressure."""
    need(simulator)
    out = tmp_path_factory.getbasetemp() / f"e2e_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=n, kv_len=n_kv,
                      heads=heads, head_group=group, latency=(0.2, 8), backpressure=0.3,
                      random_layout=True, input_kind="ascending" if causal else "gaussian")
    report = run_e2e(workload(HW, causal=causal), out, opts)
    check_good(report, n, n_kv, heads, group, exact=False)


@pytest.mark.slow
def test_decode_on_the_memory_model_is_exact_to_the_cycle_model(tmp_path_factory, seed):
    """The fast engine (the in-design memory, fixed latency): every counter equals the
    model's for a grouped decode step against 90 keys."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    report = run_e2e(workload(HW, kv_len=90), out,
                     E2EOptions(simulator="verilator", engine="fast", seed=seed, quick_build=True,
                                seq_len=1, heads=1, memory="model"))
    check_good(report, 1, 90, 1, 1, exact=True)


@pytest.mark.slow
@pytest.mark.parametrize("fmt, split, simulator", [("fp16", 2, "verilator"),
                                                   ("bf16", 1, "icarus")])
def test_float_decoder_shapes(tmp_path_factory, fmt, split, simulator, seed):
    """The float formats with N_kv and grouped heads: a causal 9-row block of each of two
    query heads (g = 2) against 40 keys, random latency and back-pressure; 16-bit
    elements, so two bytes an element."""
    from attenio.formats import format_by_name
    need(simulator)
    hw = dataclasses.replace(FLOAT_HW, name=f"e2e_{fmt}", format=format_by_name(fmt),
                             split=split)
    out = tmp_path_factory.getbasetemp() / f"e2e_{fmt}_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=9, kv_len=40,
                      heads=2, head_group=2, latency=(0.2, 8), backpressure=0.3,
                      random_layout=True)
    report = run_e2e(workload(hw, causal=True), out, opts)
    check_good(report, 9, 40, 2, 2, exact=False, eb=2)
