"""Paged K/V end to end (docs/microarchitecture.md, "Paged K/V and ragged batches"): K and
V in pages of 16 rows in a seeded random order, found through a block table in memory.

The hardware is tests/test_e2e.py's (small preset, N <= 96) built with page_rows = 16 and
sized for 8 query heads on 2 K/V heads; a float twin in fp16 on tests/e2e_common's 2x2
array. Each run: bit-exact against the golden model (paging moves rows, not values),
bytes equal to the Plan (the table's beats included), every counter against the cycle
model (equal on a deterministic memory, within 1 % of the cycles under random stalls).
"""

import dataclasses

import pytest

from attenio.formats import format_by_name
from attenio.plan import make_plan
from attenio.regmap import ErrorCode, table_beats
from attenio.analysis import block_keys
from attenio.sim.e2e import E2EOptions, run_e2e
from e2e_common import FLOAT_HW, HW, check_run, need

PAGE_ROWS = 16

#: tests/test_e2e_batch.py runs on this file's fast-engine build: one worker for both
pytestmark = pytest.mark.xdist_group("e2e_paged_builds")


def paged(hw, *, kv_len, causal=False):
    return dataclasses.replace(
        hw, name=hw.name + "_paged",
        workload=dataclasses.replace(hw.workload, heads=8, kv_heads=2, kv_len=kv_len,
                                     causal=causal),
        budget=dataclasses.replace(hw.budget, page_rows=PAGE_ROWS))


PAGED = paged(HW, kv_len=96)
FLOAT_PAGED = dataclasses.replace(paged(FLOAT_HW, kv_len=48), format=format_by_name("fp16"))


def check_paged(report, *, exact, n, n_kv, eb=1, beat=8):
    """Good runs bit-exact with the Plan's bytes and the model's counters; the bytes read
    are the contiguous run's plus each block's table beats."""
    gb = report["head_group"] if report["grouped"] else 1
    d = report["head_dim"]
    passes = report["heads"] // gb
    keys = sum(k for _, _, k in block_keys(n, report["a"] // gb, causal=report["causal"],
                                           n_kv=n_kv))
    beats = sum(table_beats(k, PAGE_ROWS, beat)
                for _, _, k in block_keys(n, report["a"] // gb, causal=report["causal"],
                                          n_kv=n_kv))
    element = report["plan_bytes_read"] - passes * beats * beat
    assert element == (report["heads"] * n + passes * 2 * keys) * d * eb
    for run in report["runs"]:
        if not run["bad"]:
            check_run(run, report, exact=exact, pe_floor=0)


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_a_decode_step_over_shuffled_pages_with_random_stalls(tmp_path_factory, simulator,
                                                              seed):
    """One query row of 8 heads (2 K/V heads, grouped blocks) against 70 keys in 5 pages of
    16, shuffled; AxiRam with random latency and back-pressure. Before it, two bad runs: a
    table one entry short (TABLE_SHORT: nothing moves), and a page limit below every page
    (PAGE_OUT_OF_RANGE: its rows are read from page 0, the run ends with the code); the good
    run after them is bit-exact, so neither wrote into Q, K, V or the table."""
    need(simulator)
    out = tmp_path_factory.getbasetemp() / f"e2e_paged_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=1, heads=8,
                      head_group=4, latency=(0.2, 8), backpressure=0.3,
                      bad_runs=({"KV_TABLE_LEN": 4}, {"PAGE_LIMIT": 0x1000}))
    report = run_e2e(dataclasses.replace(PAGED, workload=dataclasses.replace(
        PAGED.workload, kv_len=70)), out, opts)
    short, limit, good = report["runs"]
    assert short["error"] == ErrorCode.TABLE_SHORT and short["status"] == 2
    assert short["o_untouched"]
    assert short["counters"]["BYTES_READ"] == short["counters"]["BYTES_WRITTEN"] == 0
    assert limit["error"] == ErrorCode.PAGE_OUT_OF_RANGE and limit["status"] == 2
    assert limit["counters"]["BYTES_READ"] == report["plan_bytes_read"]
    assert report["grouped"]
    check_paged(report, exact=False, n=1, n_kv=70)


def test_a_causal_chunk_of_16_rows_over_shuffled_pages_is_exact(tmp_path_factory, seed):
    """A chunked prefill: 16 query rows of 8 heads, causal, against 96 keys (the last 16
    are theirs), on the deterministic in-design memory with the fast engine: every counter
    equal to the model's."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_paged_fast"
    opts = E2EOptions(seed=seed, quick_build=True, seq_len=16, heads=8, head_group=4,
                      memory="model", engine="fast")
    report = run_e2e(paged(HW, kv_len=96, causal=True), out, opts)
    assert report["causal"]
    check_paged(report, exact=True, n=16, n_kv=96)


@pytest.mark.parametrize("grouped", [True, False])
def test_fp16_decode_over_shuffled_pages_is_exact(tmp_path_factory, grouped, seed):
    """The float design (fp16, 2x2 MACs, d = 8) reads the same pages: a decode row of 8
    heads against 45 keys, grouped blocks and blocks of one head (8 passes over the pages,
    each reading its table again)."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_paged_fp16_fast"
    opts = E2EOptions(seed=seed, quick_build=True, seq_len=1, heads=8, head_group=4,
                      grouped=grouped, memory="model", engine="fast")
    report = run_e2e(dataclasses.replace(FLOAT_PAGED, workload=dataclasses.replace(
        FLOAT_PAGED.workload, kv_len=45)), out, opts)
    assert report["grouped"] == grouped
    # cycles, PE and EXP busy equal the model's; memory stalls within 1 % (blocks of one
    # head wait on each block's first table beat, which the model counts a cycle or two
    # apart in a pass)
    assert report["runs"][0]["counters"]["CYCLES"] == report["model"]["cycles"]
    check_paged(report, exact=grouped, n=1, n_kv=45, eb=2)


def test_fp16_decode_over_shuffled_pages_on_icarus(tmp_path_factory, seed):
    """The float design on Icarus with AxiRam's random stalls (about 30 s with its build)."""
    need("icarus")
    out = tmp_path_factory.getbasetemp() / "e2e_paged_fp16_icarus"
    opts = E2EOptions(simulator="icarus", seed=seed, quick_build=True, seq_len=1, heads=8,
                      head_group=4, latency=(0.2, 8), backpressure=0.3)
    report = run_e2e(dataclasses.replace(FLOAT_PAGED, workload=dataclasses.replace(
        FLOAT_PAGED.workload, kv_len=45)), out, opts)
    check_paged(report, exact=False, n=1, n_kv=45, eb=2)


def test_the_paged_plan_is_the_contiguous_one_plus_its_table():
    contiguous = make_plan(dataclasses.replace(PAGED, budget=HW.budget))
    plan = make_plan(PAGED)
    assert (plan.a, plan.split, plan.rows_per_mac) == (contiguous.a, contiguous.split,
                                                       contiguous.rows_per_mac)
    reads = dict((t.tensor, t.bytes) for t in plan.traffic.reads)
    assert reads.pop("table") > 0
    assert reads == dict((t.tensor, t.bytes) for t in contiguous.traffic.reads)


def test_block_ranges_of_a_grouped_causal_prefill_over_pages(tmp_path_factory, seed):
    """Q-block ranges (Q_BLOCK_FIRST, Q_BLOCK_COUNT) of a paged run: 90 causal rows of 8 query
    heads on 2 K/V heads against 96 keys, blocks of 8 rows of each of a group's 4 heads (12
    blocks, the short one of 2 rows first): the first block, a middle run and the last, each
    bit-exact with the rest of O untouched, bytes equal to the Plan's for the range (its
    blocks' table beats included) and every counter to the model's."""
    need("verilator")
    print(f"seed {seed}")
    out = tmp_path_factory.getbasetemp() / "e2e_paged_fast"
    config = paged(HW, kv_len=96, causal=True)
    opts = E2EOptions(seed=seed, quick_build=True, seq_len=90, heads=8, head_group=4,
                      grouped=True, memory="model", engine="fast",
                      blocks=((0, 1), (5, 3), (11, 0)))
    report = run_e2e(config, out, opts)
    plan = make_plan(config)
    assert report["blocks_per_pass"] == 12 and report["grouped"] and report["a_g"] == 8
    assert [(r["row0"], r["rows"], r["kv_len"]) for r in report["runs"]] == [
        (0, 2, 8), (34, 24, 64), (82, 8, 96)]
    for r in report["runs"]:
        assert r["error_name"] == "NONE" and r["bit_exact"] and r["only_its_rows_written"]
        t = plan.traffic_at(seq_len=90, heads=8, kv_len=96, causal=True, grouped=True, group=4,
                            blocks=(r["first"], r["count"]))
        assert (r["counters"]["BYTES_READ"], r["counters"]["BYTES_WRITTEN"]) == (
            t.read_bytes, t.write_bytes)
        assert t.reads[-1].tensor == "table" and t.reads[-1].elements > 0
        assert {k.lower(): v for k, v in r["counters"].items()} == r["model"]
