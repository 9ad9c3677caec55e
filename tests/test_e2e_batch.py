"""A ragged batch in one launch (docs/microarchitecture.md, "Paged K/V and ragged
batches"): sequences of their own lengths, 8 query heads on 2 K/V heads, their K/V in
pages of 16 rows drawn from one pool in a seeded random order, run from a descriptor list
with one DONE. Every sequence bit-exact against the golden model, the bytes equal to the
Plan (`batch_traffic`: pages, table beats, descriptors), the counters to the cycle model
(`batch_counters`).

The default suite runs a small batch on the paged hardware of tests/test_e2e_paged.py
(N <= 96) and the malformed batches; the issue's batch (kv_len 1 to 1,000, one chunk of 16
rows) is in the slow suite, on Verilator and Icarus, int8 and fp16.
"""

import dataclasses

import pytest

from attenio.plan import BatchSequence, make_plan
from attenio.regmap import ErrorCode
from attenio.sim.batch import BatchOptions, run_batch
from e2e_common import need
from test_e2e_paged import FLOAT_PAGED, PAGED

pytestmark = pytest.mark.xdist_group("e2e_paged_builds")

SMALL = [BatchSequence(1, 17), BatchSequence(1, 90), BatchSequence(8, 40, causal=True),
         BatchSequence(1, 1), BatchSequence(1, 33)]
# the issue's batch: eight decode rows against 1 to 1,000 keys and a chunk of 16 rows
LONG = [BatchSequence(1, n) for n in (1, 17, 90, 300, 512, 733, 1000, 64)] + [
    BatchSequence(16, 80, causal=True)]


def long_hw(hw):
    return dataclasses.replace(hw, name=hw.name + "_long", workload=dataclasses.replace(
        hw.workload, seq_len=1000, kv_len=None))


def check_batch(report, *, exact=True):
    assert report["error"] == "NONE" and report["status"] == 2
    bad = [s for s in report["sequences"] if not s["bit_exact"]]
    assert not bad, bad
    c, model = report["counters"], report["model"]
    assert c["BYTES_READ"] == report["plan_bytes_read"] == model["bytes_read"]
    assert c["BYTES_WRITTEN"] == report["plan_bytes_written"] == model["bytes_written"]
    for key in ("cycles", "pe_busy", "exp_busy", "mem_stall"):
        if exact:
            assert c[key.upper()] == model[key], (key, c, model)
        else:
            assert abs(c[key.upper()] - model[key]) <= 0.01 * c["CYCLES"], (key, c, model)


def test_a_small_ragged_batch_runs_exact_in_one_launch(tmp_path_factory, seed):
    """Five sequences (one a causal chunk of 8 rows) in one launch on the fast engine,
    every counter equal to the model's; the batch moves its descriptors' bytes on top of
    its sequences' runs."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_paged_fast"
    report = run_batch(PAGED, out, SMALL, BatchOptions(seed=seed))
    check_batch(report)
    plan = make_plan(PAGED)
    runs = sum(plan.traffic_at(seq_len=s.seq_len, heads=8, kv_len=s.kv_len, causal=s.causal,
                               grouped=True, group=4).read_bytes for s in SMALL)
    assert report["plan_bytes_read"] == runs + 32 * len(SMALL)


def test_a_batch_takes_each_heads_c_from_the_scale_table(tmp_path_factory, seed):
    """DescFlag.HEAD_SCALES: every sequence's query heads take their c from the batch's one
    SCALE_C_TABLE (the first sequence's scales a K/V head), grouped, bit-exact."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_paged_fast"
    report = run_batch(PAGED, out, SMALL[:3], BatchOptions(seed=seed, head_scales=True))
    check_batch(report)
    assert report["head_scales"] and len(set(report["head_c"])) == 2


def test_malformed_batches_end_with_their_code_and_leave_the_inputs_alone(
        tmp_path_factory, seed):
    """Three malformed launches before a good one: a descriptor with KV_LEN = 0
    (KV_LEN_ZERO) and one whose table has fewer entries than its kv_len needs (TABLE_SHORT),
    each after a good descriptor that runs first, and a table entry past the memory
    (PAGE_OUT_OF_RANGE: its rows are read from page 0, the batch ends with the code).
    Each ends with DONE and its code; the good launch after them is bit-exact with the
    Plan's bytes, so none of them wrote into Q, the pages, the tables or the descriptors."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_paged_fast"
    bad = ({"upto": 2, "fields": {"kv_len": 0}},
           {"upto": 2, "fields": {"table_len": 5}},     # 90 keys need 6 pages
           {"upto": 1, "bad_page": (1, 0x7FFF_0000)})
    report = run_batch(PAGED, out, SMALL, BatchOptions(seed=seed, bad_batches=bad))
    codes = [r["error"] for r in report["bad_runs"]]
    assert codes == ["KV_LEN_ZERO", "TABLE_SHORT", "PAGE_OUT_OF_RANGE"]
    assert all(r["status"] == 2 for r in report["bad_runs"])
    # the refused descriptors moved nothing of their own: the first sequence's run (and
    # its descriptors) only
    plan = make_plan(PAGED)
    first = plan.traffic_at(seq_len=1, heads=8, kv_len=17, grouped=True, group=4)
    for r in report["bad_runs"][:2]:
        assert r["counters"]["BYTES_READ"] == first.read_bytes + 2 * 32
        assert r["counters"]["BYTES_WRITTEN"] == first.write_bytes
    check_batch(report)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["int8", "fp16"])
def test_the_issues_batch_on_verilator(tmp_path_factory, fmt, seed):
    need("verilator")
    hw = long_hw(PAGED if fmt == "int8" else FLOAT_PAGED)
    out = tmp_path_factory.getbasetemp() / f"e2e_batch_long_{fmt}"
    check_batch(run_batch(hw, out, LONG, BatchOptions(seed=seed)))


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["int8", "fp16"])
def test_the_issues_batch_on_icarus(tmp_path_factory, fmt, seed):
    """The cocotb bench on Icarus, the in-design memory."""
    need("icarus")
    hw = long_hw(PAGED if fmt == "int8" else FLOAT_PAGED)
    out = tmp_path_factory.getbasetemp() / f"e2e_batch_long_{fmt}_icarus"
    check_batch(run_batch(hw, out, LONG, BatchOptions(seed=seed, engine="cocotb",
                                                      simulator="icarus")))
