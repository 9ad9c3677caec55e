"""A long run past one process: 1 shard against 2 on Ray, and a sample of N = 131,072.

For the small preset at N (ATTENIO_SHARDS_N, default 16384; the hardware generated for
that N, the planner's mapping) it runs the whole run in one launch (`attenio sim`) and
the same run in 2 shards on a local Ray (`attenio sim --shards 2`, each shard a process
on the one fast model built first), and prints their wall times side by side, with the
checks that make them the same run: O bit for bit, bytes and PE/EXP-busy cycles summed
against the unsharded run, every shard's cycles against the model. From the shards'
measured rate it projects N = 131,072 on K machines (the whole run's cycles by the cycle
model, split K ways). Then it runs `--blocks first,last` at N = 131,072 (two of its 4,096
blocks, bit-exact and exact against the Plan and the model), unless
ATTENIO_SHARDS_SAMPLE=0. The tables go into docs/simulation.md between its markers.
"""

import dataclasses
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from attenio.model.cyclemodel import model_counters
from attenio.report import table
from attenio.sim.e2e import (E2EOptions, build_fast_model, compute_bound_cycles, run_e2e,
                             simulated_memory)
from attenio.sim.shards import ADDITIVE, run_shards

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the hardware for each N as the simulation-speed bench generates it: one definition
from bench_simspeed import config_for, mapping, quiet  # noqa: E402

DOC = Path(__file__).parent.parent / "docs" / "simulation.md"
BEGIN, END = "<!-- bench_shards: begin -->", "<!-- bench_shards: end -->"
LONG = 131072
MACHINES = (1, 2, 8, 32, 128, 512)


def compare(n):
    """The unsharded run and 2 shards at N = n on one build: (rows of the table, checks, the
    shards' rate, the build's seconds and C++ level)."""
    config, plan = config_for(n)
    out = Path(f"build/bench_shards/n{n}")
    opts = E2EOptions(memory="model", engine="fast", seed=n)
    # one build for both, first: the runs are timed on it
    print(f"N = {n:,} ({mapping(plan)}): the Verilog and the fast model ...", flush=True)
    t0 = time.perf_counter()
    cycles = compute_bound_cycles(plan, seq_len=n, heads=1)
    opts = dataclasses.replace(opts, cxx_opt=build_fast_model(config, out, opts, cycles=cycles,
                                                              log=quiet))
    build_s = time.perf_counter() - t0
    print(f"  {build_s:.0f} s (C++ {opts.cxx_opt})", flush=True)
    print(f"N = {n:,}: the unsharded run ...", flush=True)
    t0 = time.perf_counter()
    whole = run_e2e(config, out, opts, log=quiet)
    whole_s = time.perf_counter() - t0
    o_whole = np.load(out / "sim_outputs.npz")["rtl"]
    run = whole["runs"][0]
    print(f"  {whole_s:.0f} s, {run['counters']['CYCLES']:,} cycles", flush=True)
    print(f"N = {n:,}: 2 shards on Ray ...", flush=True)
    t0 = time.perf_counter()
    sharded = run_shards(config, out, opts, 2, log=quiet)
    sharded_s = time.perf_counter() - t0
    c = run["counters"]
    checks = {
        "same O": bool(np.array_equal(sharded.get("o"), o_whole)),
        "every shard ok": sharded["all_ok"],
        "bytes = Plan": sharded["bytes_equal_plan"],
        "summed bytes, PE and EXP busy = unsharded": all(
            sharded["counters"][k] == c[k.upper()] for k in ADDITIVE),
        "unsharded bit-exact, cycles = model": run["bit_exact"] and whole["model_agrees"],
    }
    shards = sharded["shards"]
    rate_1 = whole["sim_cycles_per_second"]
    rows = [[n, mapping(plan), 1, f"{c['CYCLES']:,}", f"{run['sim_cycles']:,}", f"{rate_1:,}",
             f"{run['sim_cycles'] / rate_1:.0f}", f"{whole_s:.0f}"],
            [n, mapping(plan), 2, f"{sharded['counters']['cycles']:,}",
             " + ".join(f"{s['sim_cycles']:,}" for s in shards),
             " / ".join(f"{s['sim_cycles_per_second']:,}" for s in shards),
             f"{sharded['wall_seconds']:.0f}", f"{sharded_s:.0f}"]]
    rate = sum(s["sim_cycles_per_second"] for s in shards) / len(shards)
    return rows, checks, rate, build_s, opts.cxx_opt


def projection(rate):
    """N = 131,072 on K machines at `rate` simulated cycles per second a shard."""
    config, plan = config_for(LONG)
    whole = model_counters(plan, seq_len=LONG, memory=simulated_memory(plan, "model"))
    rows = []
    for k in MACHINES:
        hours = whole["cycles"] / k / rate / 3600
        rows.append([k, f"{whole['cycles'] / k / 1e6:,.0f}M", f"{hours:,.1f} h"
                     if hours >= 1 else f"{hours * 60:.0f} min"])
    return rows, whole["cycles"], mapping(plan)


def sample():
    """`attenio sim --blocks first,last` at N = 131,072."""
    config, plan = config_for(LONG)
    out = Path(f"build/bench_shards/n{LONG}")
    total = -(-LONG // plan.a)
    t0 = time.perf_counter()
    r = run_e2e(config, out, E2EOptions(memory="model", engine="fast", seed=1,
                                        blocks=((0, 1), (total - 1, 1))), log=quiet)
    wall = time.perf_counter() - t0
    rows = []
    for run in r["runs"]:
        c = run["counters"]
        rows.append([run["first"], f"{run['row0']:,} .. {run['row0'] + run['rows'] - 1:,}",
                     "yes" if run["bit_exact"] and run["only_its_rows_written"] else "NO",
                     f"{c['BYTES_READ']:,} / {c['BYTES_WRITTEN']:,}",
                     "=" if run["bytes_match_plan"] else "!=", f"{c['CYCLES']:,}",
                     f"{run['model']['cycles']:,}", "=" if run["cycles_match_model"] else "!="])
    return rows, wall, r, mapping(plan)


def main():
    n = int(os.environ.get("ATTENIO_SHARDS_N", "16384"))
    rows, checks, rate, build_s, cxx_opt = compare(n)
    head = ["N", "mapping", "shards", "cycles (sum)", "simulated cycles", "cycles/s", "sim s",
            "wall s"]
    text = table(head, rows)
    print(text)
    for what, ok in checks.items():
        print(f"  {what}: {'yes' if ok else 'NO'}")
    proj, cycles, long_mapping = projection(rate)
    proj_text = table(["machines", "cycles each", "simulated in"], proj)
    print(proj_text)
    sample_text = sample_note = None
    if os.environ.get("ATTENIO_SHARDS_SAMPLE", "1") != "0":
        srows, wall, r, smap = sample()
        sample_text = table(["block", "rows", "bit-exact", "bytes read / written", "vs Plan",
                             "cycles", "model", "vs model"], srows)
        print(sample_text)
        sample_note = (f"`attenio sim --preset small --seq-len 131072 --blocks first,last` "
                       f"({smap}, {r['blocks_per_pass']:,} blocks a pass): {wall:.0f} s wall "
                       f"with the Verilog, the fast model's build and the golden model of the "
                       f"two blocks; the whole run by the model: "
                       f"{r['whole_run_model']['cycles']:,} cycles.")
    write_doc(text, checks, rate, build_s, cxx_opt, proj_text, cycles, long_mapping, sample_text,
              sample_note)
    return 0 if all(checks.values()) else 1


def write_doc(text, checks, rate, build_s, cxx_opt, proj_text, cycles, long_mapping, sample_text,
              sample_note):
    load = os.getloadavg()
    body = [
        BEGIN,
        f"Measured by `bench/bench_shards.py` on {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} cores (load average {load[0]:.1f} at the end: the machine was "
        f"shared, so wall times are upper bounds).",
        "", "```", text, "```", "",
        *[f"- {what}: {'yes' if ok else 'NO'}" for what, ok in checks.items()], "",
        "`cycles (sum)` is the counters' CYCLES, summed over the shards (each launch starts "
        "its own pipeline, so the sum is a little more than the one launch's); `cycles/s` "
        "each process's simulated cycles per second of wall time; `sim s` the simulation "
        "alone (for 2 shards from the first dispatch to the last shard's end), `wall s` the "
        f"run with its golden model and checks, both on one fast model built before them "
        f"({build_s:.0f} s with the Verilog, C++ {cxx_opt}, not counted).", "",
        f"N = 131,072 ({long_mapping}), whole run by the cycle model: {cycles:,} cycles; at "
        f"the shards' measured {rate:,.0f} simulated cycles per second each, split over K "
        f"machines (one shard each, each its own fast model; the build, about a minute, "
        f"not counted):", "", "```", proj_text, "```", ""]
    if sample_text:
        body += [sample_note, "", "```", sample_text, "```", ""]
    body.append(END)
    doc = DOC.read_text()
    if BEGIN not in doc:
        doc += f"\n{BEGIN}\n{END}\n"
    doc = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: "\n".join(body), doc,
                 flags=re.S)
    DOC.write_text(doc)
    print(f"wrote {DOC}")


if __name__ == "__main__":
    sys.exit(main())
