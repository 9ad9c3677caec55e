"""The latencies the hardware builders publish, on the small and paper presets in int8, fp16
and bf16; writes docs/latencies.md.

docs/microarchitecture.md names every latency by the property that computes it and gives
its formula; this page gives the values, asked of the builders at the planner's mapping
(nothing is elaborated): the core's (`attenio.hdl.core.AttentionCore.from_plan(plan)`,
its `timing`, a `CoreTiming`), the setup before LAUNCH (`Controller.setup_cycles`), and
every latency the cycle model takes from the RTL (`attenio.model.rtl_params.RtlParams.of`,
from `CoreTiming` and `TopTiming`). The last table is the cycle model's time at those
mappings. `python bench/bench_latencies.py` (or `make bench`) rewrites the page;
tests/test_latency_table.py checks that its tables ask the builders.
"""

import dataclasses
import gc
import sys
import time
import warnings
from dataclasses import fields
from pathlib import Path

from attenio.formats import FORMATS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "latencies.md"

#: (preset, N): the small preset at its own N, the paper's at N = 8K (its d = 64)
SHAPES = (("small", None), ("paper", 8192))

#: the core table's columns: (heading, what computes it)
CORE_COLUMNS = (
    ("L_acc", "`FloatArith.accumulate_latency`: an fp32 addition (float formats)"),
    ("L_mul", "`MAC.float_product_latency`: a float MAC's q * k, from its word (in fp32: "
              "widened at the array's entry) to the adder (the operands' register, the "
              "multiplier's operands selected, the product)"),
    ("P", "`CoreTiming.score_period`: cycles per chunk of a K row, r, or the float MACs' "
          "`attenio.hdl.mac.score_period`"),
    ("score", "`MAC.score_latency`: the last K word at a group's last MAC to "
              "the row's score in its bank"),
    ("S", "`SoftmaxLane.stages(arith)`: a lane's stages from a row's issue to its "
          "write-back of m and l"),
    ("lane", "`CoreTiming.lane_latency`: score + `SoftmaxLane.ready_stage` + "
             "`PEArray.ready_latency` + `RowReplay.issue_latency(arith)`"),
    ("L_sm", "`CoreTiming.sm_latency`: (q - 1) + r q/(L s) + lane"),
    ("(P+r)d/s", "the work of one K/V row (its S and U) that covers L_sm"),
    ("slack", "`AttentionCore.interlock_slack`: (B - 1)(P + r) d/s - L_sm, B the banks "
              "(S runs B - 1 K rows ahead of U); negative: U_j waits"),
    ("pass", "the shortest time between a lane's passes: max(r q/(L s), S + 1)"),
    ("norm", "`Normalizer.latency(arith)`: a drain issue to its byte in the output FIFO"),
    ("setup", "`Controller.setup_cycles()`: START's checks to LAUNCH, uncounted: "
              "bits(a) + bits(N_max) + bits(HEADS) + 1 + bits(g_max)"),
)


def config_of(preset_name, format_name, seq_len=None):
    """The preset in `format_name`, at `seq_len` query rows (default the preset's)."""
    from attenio.config import resolve

    config = resolve(preset_name=preset_name, format_name=format_name)
    if seq_len is not None:
        config = dataclasses.replace(
            config, workload=dataclasses.replace(config.workload, seq_len=seq_len))
    return config


def planned():
    """The planner's Plan of every preset, N and format this page covers."""
    from attenio.model.planner import choose_plan

    return [choose_plan(config_of(p, f, n)) for p, n in SHAPES for f in FORMATS]


def _name(plan):
    return f"{plan.config.name}, {plan.config.format.name}"


def core_row(plan):
    """The core table's cells for `plan`, as CORE_COLUMNS orders them (after the mapping)."""
    from amaranth.hdl import UnusedElaboratable

    with warnings.catch_warnings():     # the core and controller are built only to be asked
        warnings.simplefilter("ignore", UnusedElaboratable)
        cells = _core_cells(plan)
        gc.collect()                    # they hold cycles: collect them inside the filter
    return cells


def _core_cells(plan):
    from attenio.formats import FloatFormat
    from attenio.hdl.controller import Controller
    from attenio.hdl.core import AttentionCore
    from attenio.hdl.mac import MAC
    from attenio.hdl.normalizer import Normalizer
    from attenio.hdl.softmax import SoftmaxLane
    from attenio.hdl.top import ADDR_WIDTH

    core = AttentionCore.from_plan(plan)
    arith, t = core.arith, core.timing
    w, b = plan.workload, plan.budget
    d, s, r = w.head_dim, plan.split, plan.rows_per_mac
    is_float = isinstance(plan.config.format, FloatFormat)
    stages = SoftmaxLane.stages(arith)
    controller = Controller(addr_width=ADDR_WIDTH, max_seq_len=w.max_keys,
                            beat_bytes=b.axi_data_bits // 8, block_rows=plan.a)
    return [arith.accumulate_latency if is_float else "-",
            MAC.float_product_latency(arith) if is_float else "-",
            t.score_period,
            MAC.score_latency(arith, s, rows_per_mac=r, head_dim=d),
            stages, t.lane_latency,
            t.sm_latency, (t.score_period + r) * d // s, core.interlock_slack,
            max(t.lane_rows, stages + 1), Normalizer.latency(arith), controller.setup_cycles()]


def _table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def latency_tables(plans):
    """The page's latency tables for `plans`, as Markdown: (the core's, the cycle model's
    RtlParams)."""
    from attenio.model.rtl_params import RtlParams

    core = _table(["design", "N", "d", "s", "r", "B", *(h for h, _ in CORE_COLUMNS)],
                  [[_name(p), p.workload.seq_len, p.workload.head_dim, p.split, p.rows_per_mac,
                    p.banks, *core_row(p)] for p in plans])
    params = [RtlParams.of(p) for p in plans]
    rtl = _table(["field", *(_name(p) for p in plans)],
                 [[f"`{f.name}`", *(getattr(x, f.name) for x in params)]
                  for f in fields(RtlParams)])
    return core, rtl


def model_table(plans):
    """The cycle model's cycles and PE time at each Plan's mapping (the planner's candidate)."""
    rows = []
    for p in plans:
        c = p.mapping_choice.candidate(p.split, p.rows_per_mac, p.banks)
        rows.append([_name(p), p.workload.seq_len, p.split, p.rows_per_mac, p.banks, p.a,
                     c.cycles, f"{c.pe_util:.1%}"])
    return _table(["design", "N", "s", "r", "B", "a", "cycles", "PE time"], rows) + "\n"


#: the float designs the alternatives table times: (preset, N, d)
ALTERNATIVE_SHAPES = (("small", None, None), ("paper", 8192, 64), ("paper", 8192, 128))


def _one_sum_params(plan):
    """`RtlParams` of `plan` as if its float MACs kept one sum a slot (no interleave): the
    period max(r, L_acc) and the score latency without the fold, from `CoreTiming.of`."""
    from attenio import validate
    from attenio.hdl.core import CoreTiming
    from attenio.hdl.formats import arith_of
    from attenio.model.rtl_params import RtlParams

    w, b = plan.workload, plan.budget
    arith = arith_of(plan.config.format, max_seq_len=w.max_keys, head_dim=w.head_dim)
    lanes = validate.lanes_per_line(exp_units=b.exp_units, mac_lines=b.mac_lines,
                                    macs_per_line=b.macs_per_line)
    one = CoreTiming.of(arith, macs_per_line=b.macs_per_line, rows_per_mac=plan.rows_per_mac,
                        lanes=lanes, split=plan.split, head_dim=w.head_dim, interleave=False)
    return RtlParams.of(plan, **{f: getattr(one, f) for f in
                                 ("score_period", "lane_latency", "lane_start")})


def best_of(config, *, interleave, max_banks):
    """(cycles, PE time, (s, r, B)) of the fastest mapping of `config` with at most
    `max_banks` banks, its float MACs interleaving their sums or not (the cycle model)."""
    from attenio.errors import ConfigError
    from attenio.model.cyclemodel import simulate
    from attenio.plan import BANKS, make_plan, rows_options, valid_splits

    best = None
    for b in range(BANKS, max_banks + 1):
        for s in valid_splits(config):
            try:
                rs = rows_options(config, s, b)
            except ConfigError:
                continue
            for r in rs:
                try:
                    plan = make_plan(config, split=s, rows_per_mac=r, banks=b)
                    res = simulate(plan, params=None if interleave else _one_sum_params(plan))
                except ConfigError:
                    continue
                if best is None or res.cycles < best[0]:
                    best = (res.cycles, res.pe_util, (s, r, b))
    return best


def alternatives_table():
    """The fp16 design with and without each of its two full-rate mechanisms, each at its
    fastest mapping: why the built design has both."""
    from attenio.model.planner import MAX_BANKS, choose_plan

    rows = []
    for preset_name, n, d in ALTERNATIVE_SHAPES:
        config = config_of(preset_name, "fp16", n)
        if d is not None:
            config = dataclasses.replace(
                config, workload=dataclasses.replace(config.workload, head_dim=d))
        w = config.workload
        shape = f"{preset_name}, N = {w.seq_len}, d = {w.head_dim}"
        for label, interleave, banks in (("one sum a slot, 2 banks", False, 2),
                                         ("interleaved sums, 2 banks", True, 2),
                                         (f"one sum a slot, up to {MAX_BANKS} banks", False,
                                          MAX_BANKS)):
            cycles, pe, (s, r, b) = best_of(config, interleave=interleave, max_banks=banks)
            rows.append([shape, label, f"s = {s}, r = {r}, B = {b}", f"{cycles:,}", f"{pe:.1%}"])
        plan = choose_plan(config)
        c = plan.mapping_choice.candidate(plan.split, plan.rows_per_mac, plan.banks)
        rows.append([shape, "interleaved sums and the planner's B (as built)",
                     f"s = {c.split}, r = {c.rows_per_mac}, B = {c.banks}", f"{c.cycles:,}",
                     f"{c.pe_util:.1%}"])
    return _table(["fp16 design", "float MACs", "fastest mapping", "cycles", "PE time"], rows)


def render(plans):
    legend = "\n".join(f"* **{h}**: {what}" for h, what in CORE_COLUMNS)
    core, rtl = latency_tables(plans)
    return f"""# Latencies of the generated hardware

Generated by `make bench` (bench/bench_latencies.py) from the hardware builders; do not
edit by hand. docs/microarchitecture.md gives each latency's formula and role; here
are their values at the planner's mapping (`attenio plan`) of the small preset and of
the paper preset at N = 8K, in each format. Cycles throughout.

## The core

{legend}

{core}

## Around the core

Every latency the cycle model takes from the RTL (`RtlParams.of(plan)`, the fields
documented in `attenio.model.rtl_params`), from `CoreTiming` and `TopTiming`:

{rtl}

## What they cost

The cycle model (`attenio.model.cyclemodel`, equal to the RTL's counters) at the same
mappings, one head: the float formats' longer pipelines would leave the array idle in
the K rows' empty slots (P > r) and at the interlock (slack < 0); the interleaved
sub-sums (P = r wherever d/s allows) and the planner's B banks take both away.

{model_table(plans)}
## Why both the interleave and the banks

Each float mechanism alone, timed by the same cycle model at its own fastest mapping
(every s, r and B the planner would weigh; "one sum a slot" takes the period
max(r, L_acc) and the score latency without the fold, `CoreTiming.of(interleave=False)`):

{alternatives_table()}
"""


def main():
    t0 = time.perf_counter()
    plans = planned()
    text = render(plans)
    print(text)
    DOC.write_text(text)
    print(f"(written to {DOC.relative_to(ROOT)}; {time.perf_counter() - t0:.1f} s, the planner "
          f"included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
