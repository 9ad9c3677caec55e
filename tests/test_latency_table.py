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
