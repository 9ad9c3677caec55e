"""End-to-end figures of the small preset: the RTL on the in-design memory model.

For N = 256 and 1024 (hardware generated for that N, with the mapping the planner
chooses, `attenio.model.planner.choose_plan`: s MACs a Q row, r rows a group) it
prints s, r, cycles, PE-busy and stall fractions, bytes against the Plan,
bit-exactness, cycles against max(compute bound, memory bound), the cycle model's
prediction, and the simulator's wall time and cycles per second. N = 4096 (33 M cycles, about an
hour of Verilator) runs only with ATTENIO_BENCH_LONG=1; otherwise its line is the
cycle model's projection, marked as such.
"""

import dataclasses
import os
import sys
import time

from attenio import preset
from attenio.report import table
from attenio.model.cyclemodel import model_counters
from attenio.sim.e2e import E2EOptions, run_e2e
from attenio.model.planner import choose_plan


def quiet(_message):
    pass


def main():
    long = os.environ.get("ATTENIO_BENCH_LONG") == "1"
    rows = []
    for n in (256, 1024, 4096):
        base = preset("small")
        config = dataclasses.replace(base, name=f"small_n{n}",
                                     workload=dataclasses.replace(base.workload, seq_len=n))
        plan = choose_plan(config)
        config = dataclasses.replace(config, split=plan.split, rows_per_mac=plan.rows_per_mac)
        compute = plan.q_blocks * n * 2 * plan.rows_per_mac * plan.workload.head_dim // plan.split
        if n == 4096 and not long:
            m = model_counters(plan)
            rows.append([n, plan.split, plan.rows_per_mac, plan.a, "model only", m["cycles"],
                         f"{m['pe_busy'] / m['cycles']:.3f}", f"{m['mem_stall'] / m['cycles']:.4f}",
                         "=" if m["bytes_read"] == plan.traffic.read_bytes else "!=", "-",
                         f"{m['cycles'] / compute:.4f}", "-", "-", "-"])
            continue
        print(f"N = {n}: generating and simulating (a = {plan.a}) ...", flush=True)
        t0 = time.perf_counter()
        r = run_e2e(config, f"build/bench_e2e/n{n}", E2EOptions(memory="model", seed=n),
                    log=quiet)
        total = time.perf_counter() - t0
        run = r["runs"][0]
        c = run["counters"]
        rows.append([n, plan.split, plan.rows_per_mac, plan.a, "RTL", c["CYCLES"],
                     f"{r['pe_busy_fraction']:.3f}", f"{r['mem_stall_fraction']:.4f}",
                     "=" if run["bytes_match_plan"] else "!=",
                     "yes" if run["bit_exact"] else "NO",
                     f"{r['cycles_over_bound']:.4f}", f"{r['cycles_vs_model']:.4f}",
                     f"{r['wall_seconds']:.0f} ({total:.0f})", r["sim_cycles_per_second"]])
    print(table(["N", "s", "r", "a", "source", "cycles", "PE busy", "stall", "bytes vs Plan",
                 "bit-exact", "cycles / bound", "RTL / model", "sim s (total s)", "cycles/s"], rows))
    print("bound = max(compute: blocks * N * 2 r d / s, memory: Plan bytes / bw); the model "
          "line for N = 4096 shows cycles / compute bound")
    return 0 if all(r[9] in ("yes", "-") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
