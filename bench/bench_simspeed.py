"""Simulation speed of the small preset on both paths, and the long run the fast path makes possible.

For N = 256, 1024 and 4096 (hardware generated for that N, the planner's mapping) it
runs the same Verilog (`attenio_sim_top`, the in-design memory model) on the cocotb
bench and on the fast C++ harness (`attenio.sim.fast`) and prints simulated cycles
per second of the run itself (the builds are timed apart), beside bit-exactness, bytes
against the Plan and cycles against the cycle model. A cocotb run whose estimate (from
the rate measured at the previous N) exceeds 15 minutes is skipped and its time
extrapolated, labelled as such. N = 16384 runs on the fast path only. The table is
written into docs/simulation.md between its markers.

ATTENIO_SIMSPEED_NS=256,1024 picks other sizes (the 16384 run included only if listed).
"""

import dataclasses
import os
import re
import sys
import time
from pathlib import Path

from attenio import preset
from attenio.report import table
from attenio.sim.e2e import E2EOptions, compute_bound_cycles, run_e2e
from attenio.model.planner import choose_plan

SIZES = (256, 1024, 4096, 16384)
FAST_ONLY = 16384
COCOTB_LIMIT_S = 15 * 60
DOC = Path(__file__).parent.parent / "docs" / "simulation.md"
BEGIN, END = "<!-- bench_simspeed: begin -->", "<!-- bench_simspeed: end -->"


def quiet(_message):
    pass


def config_for(n):
    base = preset("small")
    config = dataclasses.replace(base, name=f"small_n{n}",
                                 workload=dataclasses.replace(base.workload, seq_len=n))
    plan = choose_plan(config)
    return dataclasses.replace(config, split=plan.split, rows_per_mac=plan.rows_per_mac), plan


def mapping(plan):
    return f"s={plan.split} r={plan.rows_per_mac} a={plan.a}"


def measure(config, plan, n, engine):
    t0 = time.perf_counter()
    r = run_e2e(config, f"build/bench_simspeed/n{n}",
                E2EOptions(memory="model", engine=engine, seed=n), log=quiet)
    total = time.perf_counter() - t0
    run = r["runs"][0]
    return {"n": n, "engine": engine, "mapping": mapping(plan),
            "cycles": run["counters"]["CYCLES"],
            "bit_exact": run["bit_exact"], "bytes": run["bytes_match_plan"],
            "vs_model": r["cycles_vs_model"], "rate": r["sim_cycles_per_second"],
            "cpu_rate": r["sim_cycles_per_cpu_second"],
            "sim_s": run["sim_cycles"] / max(r["sim_cycles_per_second"], 1),
            "golden_s": r["golden_seconds"], "total_s": total}


def row(m):
    return [m["n"], m["mapping"], m["engine"], m["cycles"], "yes" if m["bit_exact"] else "NO",
            "=" if m["bytes"] else "!=", f"{m['vs_model']:.4f}", f"{m['sim_s']:.1f}",
            f"{m['rate']:,}", f"{m['cpu_rate']:,}", f"{m['total_s']:.0f}"]


def main():
    sizes = [int(x) for x in os.environ.get("ATTENIO_SIMSPEED_NS", "").split(",") if x] or SIZES
    rows, results, cocotb_rate = [], [], None
    for n in sizes:
        config, plan = config_for(n)
        for engine in ("fast", "cocotb"):
            if engine == "cocotb" and n == FAST_ONLY:
                continue
            cycles = compute_bound_cycles(plan, seq_len=n, heads=1)
            if engine == "cocotb" and cocotb_rate and cycles / cocotb_rate > COCOTB_LIMIT_S:
                est = cycles / cocotb_rate
                rows.append([n, mapping(plan), "cocotb", f"~{cycles}", "-", "-", "-",
                             f"~{est:.0f} (extrapolated)", f"~{cocotb_rate:,.0f}", "-",
                             "skipped"])
                print(f"N = {n}, cocotb: skipped, about {est / 60:.0f} min at the "
                      f"{cocotb_rate:,.0f} cycles/s measured at the previous N (extrapolated, "
                      f"not run)", flush=True)
                continue
            print(f"N = {n}, {engine}: generating, building and simulating (a = {plan.a}, "
                  f"s = {plan.split}, about {cycles / 1e6:.1f}M cycles) ...", flush=True)
            m = measure(config, plan, n, engine)
            if engine == "cocotb":
                cocotb_rate = m["rate"]
            results.append(m)
            rows.append(row(m))
            print(f"  {m['rate']:,} cycles/s ({m['cpu_rate']:,} per CPU second), "
                  f"{m['sim_s']:.1f} s simulated, "
                  f"{'bit-exact' if m['bit_exact'] else 'MISMATCH'}, {m['total_s']:.0f} s in all "
                  f"(golden model {m['golden_s']:.0f} s)", flush=True)
    head = ["N", "mapping", "path", "cycles", "bit-exact", "bytes vs Plan", "RTL / model", "sim s",
            "cycles/s", "cycles/CPU-s", "total s"]
    text = table(head, rows)
    print(text)
    speedups = [(f["n"], f["rate"] / c["rate"]) for f in results for c in results
                if f["n"] == c["n"] and f["engine"] == "fast" and c["engine"] == "cocotb"]
    for n, x in speedups:
        print(f"N = {n}: the fast path simulates {x:.1f}x the cycles per second of cocotb")
    write_doc(text, speedups)
    return 0 if all(m["bit_exact"] and m["bytes"] for m in results) else 1


def write_doc(text, speedups):
    load = os.getloadavg()
    body = "\n".join([
        BEGIN,
        f"Measured by `bench/bench_simspeed.py` on {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} cores (load average {load[0]:.1f} at the end: the machine "
        f"was shared, so wall-clock rates are lower bounds).",
        "",
        "```", text, "```", "",
        *[f"- N = {n}: fast / cocotb = {x:.1f}x" for n, x in speedups],
        "",
        "`mapping` is the planner's choice for that N (each Q row over s MACs, r rows a "
        "group, Q blocks of a rows): the hardware differs between the rows. "
        "`cycles/s` is simulated cycles per second of wall time, `cycles/CPU-s` per second of "
        "the simulator process's own CPU time (what the other users of a shared machine do not "
        "change). "
        "`sim s` is the run alone (the cycles over the rate); `total s` adds generating the "
        "Verilog, building the model and the golden model. Both paths run the same "
        "`attenio_sim_top` (the in-design memory model); cocotb's rate is the "
        "`--engine cocotb --memory model` path.",
        END])
    doc = DOC.read_text() if DOC.exists() else f"# Simulation\n\n{BEGIN}\n{END}\n"
    doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: body, doc, flags=re.S)
    DOC.write_text(doc)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    sys.exit(main())
