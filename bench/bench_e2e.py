"""End-to-end figures of the small preset: the RTL on the in-design memory model.

In int8, fp16 and bf16, for N = 256 and 1024 (hardware generated for that N, with the
mapping the planner chooses, `attenio.model.planner.choose_plan`: s MACs a Q row, r
rows a group, B score banks) it prints s, r, B, cycles, PE-busy and stall fractions,
bytes against the Plan, bit-exactness, cycles against max(compute bound, memory
bound), the cycle model's prediction, and the simulator's wall time and cycles per
second (the fast engine, `attenio.sim.fast`, as `attenio sim` chooses for these runs).
N = 4096 (33 M cycles) runs only with ATTENIO_BENCH_LONG=1; otherwise its line is
the cycle model's projection, marked as such.
"""

import dataclasses
import os
import sys
import time

from attenio.config import resolve
from attenio.formats import FORMATS
from attenio.report import table
from attenio.model.cyclemodel import model_counters
from attenio.sim.e2e import E2EOptions, run_e2e
from attenio.model.planner import choose_plan




def quiet(_message):
    pass


def row_of(fmt, n, long):
    """The table's row of the small preset in `fmt` at N = `n`: the RTL's run, or for
    N = 4096 unless `long` the cycle model's projection."""
    base = resolve(preset_name="small", format_name=fmt)     # as `attenio sim --format`
    config = dataclasses.replace(base, name=f"small_{fmt}_n{n}",
                                 workload=dataclasses.replace(base.workload, seq_len=n))
    plan = choose_plan(config)
    config = dataclasses.replace(config, split=plan.split, rows_per_mac=plan.rows_per_mac,
                                 banks=plan.banks)
    compute = plan.q_blocks * n * 2 * plan.rows_per_mac * plan.workload.head_dim // plan.split
    mapping = [fmt, n, plan.split, plan.rows_per_mac, plan.banks, plan.a]
    if n == 4096 and not long:
        m = model_counters(plan)
        return mapping + ["model only", m["cycles"], f"{m['pe_busy'] / m['cycles']:.3f}",
                          f"{m['mem_stall'] / m['cycles']:.4f}",
                          "=" if m["bytes_read"] == plan.traffic.read_bytes else "!=", "-",
                          f"{m['cycles'] / compute:.4f}", "-", "-", "-"]
    print(f"{fmt}, N = {n}: generating and simulating (s = {plan.split}, r = "
          f"{plan.rows_per_mac}, B = {plan.banks}, a = {plan.a}) ...", flush=True)
    t0 = time.perf_counter()
    r = run_e2e(config, f"build/bench_e2e/{fmt}_n{n}",
                E2EOptions(memory="model", engine="fast", seed=n),
                log=quiet)
    total = time.perf_counter() - t0
    run = r["runs"][0]
    return mapping + ["RTL", run["counters"]["CYCLES"], f"{r['pe_busy_fraction']:.3f}",
                      f"{r['mem_stall_fraction']:.4f}",
                      "=" if run["bytes_match_plan"] else "!=",
                      "yes" if run["bit_exact"] else "NO",
                      f"{r['cycles_over_bound']:.4f}", f"{r['cycles_vs_model']:.4f}",
                      f"{r['wall_seconds']:.0f} ({total:.0f})", r["sim_cycles_per_second"]]


def main():
    long = os.environ.get("ATTENIO_BENCH_LONG") == "1"
    rows = [row_of(fmt, n, long) for fmt in FORMATS for n in (256, 1024, 4096)]
    print(table(["format", "N", "s", "r", "B", "a", "source", "cycles", "PE busy", "stall",
                 "bytes vs Plan", "bit-exact", "cycles / bound", "RTL / model",
                 "sim s (total s)", "cycles/s"], rows))
    print("bound = max(compute: blocks * N * 2 r d / s, memory: Plan bytes / bw); the model "
          "lines for N = 4096 show cycles / compute bound")
    return 0 if all(r[11] in ("yes", "-") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
