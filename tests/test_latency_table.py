"""bench/bench_latencies.py, which writes docs/latencies.md: its tables read each latency from
the builder that computes it. The page itself is refreshed by `make bench`, like every measured
page: a test holding it to today's builders would make a change of a pipeline edit a doc."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("bench_latencies",
                                                  ROOT / "bench" / "bench_latencies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_core_table_reads_its_latencies_from_the_core_it_describes():
    from attenio.config import preset
    from attenio.hdl.core import CoreTiming
    from attenio.hdl.formats import arith_of
    from attenio.plan import make_plan

    bench = _bench()
    plan = make_plan(preset("small"), split=2, rows_per_mac=3)
    cells = dict(zip((h for h, _ in bench.CORE_COLUMNS), bench.core_row(plan)))
    w = plan.workload
    timing = CoreTiming.of(arith_of(plan.config.format, max_seq_len=w.max_keys,
                                    head_dim=w.head_dim),
                           macs_per_line=4, rows_per_mac=3, lanes=1, split=2)
    assert (cells["P"], cells["L_sm"], cells["norm"]) == (
        3, timing.sm_latency, timing.normalizer_latency)
    assert cells["slack"] == (3 + 3) * 16 // 2 - timing.sm_latency
    assert cells["L_acc"] == cells["L_mul"] == "-"          # int8 has no float pipelines


def test_the_slack_counts_the_banks_and_the_model_table_their_candidate():
    """With B banks S runs B - 1 K rows ahead: the slack is (B - 1)(P + r) d/s - L_sm, and
    the cycles shown are those of the candidate with the Plan's B (not B = 2's)."""
    import dataclasses

    from attenio.config import preset
    from attenio.formats import FP16Format
    from attenio.model.planner import choose_plan

    bench = _bench()
    config = dataclasses.replace(preset("small"), format=FP16Format(), split=4, rows_per_mac=7,
                                 banks=4)
    plan = choose_plan(config)
    cells = dict(zip((h for h, _ in bench.CORE_COLUMNS), bench.core_row(plan)))
    assert cells["slack"] == 3 * cells["(P+r)d/s"] - cells["L_sm"]
    row = bench.model_table([plan]).splitlines()[2].split(" | ")
    assert row[4:7] == ["4", str(plan.a), str(plan.mapping_choice.candidates[0].cycles)]
