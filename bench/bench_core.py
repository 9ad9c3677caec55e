"""The compute core: cycles per K/V row against 2*r*d, PE-busy fraction, and the cost
of elaborating and converting it to Verilog, small and at the paper's 64 x 32 MACs.

Cycle figures come from the cocotb bench (`attenio.sim.benches.bench_core`,
`test_stream`) on Verilator: blocks run back to back at full feed rate, every
byte checked against the golden model. "cycles per row" is a block's span from
its first S element to its last U element entering the array, over N; the ideal
is 2*r*d (r*d for the scores, r*d for the update); "array" is the ratio, the
array's utilization while a block's K/V rows stream. "PE busy" is pe_active cycles
over all cycles from the first start to the last output byte (Q loads, fills and
drains included).

The conversion figures are measured in a fresh subprocess per array: wall time,
CPU time (its own and its Yosys child's; wall time grows on a loaded machine),
and peak resident memory (the larger of the Python process and its Yosys child).
Set BENCH_CORE_PAPER=0 to skip the paper array (it takes minutes).
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "bench_core_bench"

# (name, core parameters, blocks [rows_valid, n_keys]); all lanes of all lines run in
# lock step, so one line of the paper's array (32 MACs, 2 lanes of 16) has its timing.
CYCLE_CONFIGS = [
    ("small preset 4x4 r2 d16 E4", dict(mac_lines=4, macs_per_line=4, rows_per_mac=2,
                                        head_dim=16, exp_units=4, max_seq_len=256),
     [[32, 64], [32, 64], [19, 64]]),
    ("2x4 r2 d8 E4", dict(mac_lines=2, macs_per_line=4, rows_per_mac=2, head_dim=8,
                          exp_units=4, max_seq_len=128), [[16, 64], [16, 64], [11, 64]]),
    ("1x8 r1 d4 E1 (interlock-bound)", dict(mac_lines=1, macs_per_line=8, rows_per_mac=1,
                                            head_dim=4, exp_units=1, max_seq_len=64),
     [[8, 64], [8, 64]]),
    ("paper line 1x32 r1 d64 E2", dict(mac_lines=1, macs_per_line=32, rows_per_mac=1,
                                       head_dim=64, exp_units=2, max_seq_len=65536),
     [[32, 32], [32, 32]]),
]

CONVERT = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from amaranth.back import verilog
from attenio.hdl.core import AttentionCore
core = AttentionCore(**json.loads(sys.argv[1]))
text = verilog.convert(core, name="attention_core", emit_src=False)
seconds = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
peak = max(me.ru_maxrss, kids.ru_maxrss) / 1024
cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
print(json.dumps({"seconds": seconds, "cpu_s": cpu, "peak_mb": peak,
                  "verilog_mb": len(text) / 2**20}))
"""


def convert_stats(params):
    r = subprocess.run([sys.executable, "-c", CONVERT, json.dumps(params)], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"conversion failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def cycle_figures(name, params, blocks):
    from attenio.gen.verilog import emit
    from attenio.hdl.core import AttentionCore
    from attenio.sim.runner import run_bench

    tag = "_".join(f"{k[0]}{v}" for k, v in params.items())
    build = BUILD / tag
    shutil.rmtree(build, ignore_errors=True)     # no stale precompiled headers
    core = AttentionCore(**params)
    emit(core, build / "core.v", name="attention_core")
    report = build / "report.json"
    run_bench(simulator="verilator", verilog_sources=[build / "core.v"],
              toplevel="attention_core", module="attenio.sim.benches.bench_core",
              build_dir=build, params=dict(params, blocks=blocks, seed=1, report=str(report)),
              testcase="test_stream", quick_build=True)
    return json.loads(report.read_text()), core.interlock_slack


def main():
    from attenio.config import preset
    from attenio.formats import Int8Format
    from attenio.plan import make_plan
    import dataclasses

    print("## Cycles per K/V row (Verilator, bit-exact against the golden model)\n")
    print(f"{'array':34s} {'rows':>4s} {'N':>4s} {'cyc/row':>8s} {'2rd':>5s} "
          f"{'stalls':>6s} {'slack':>6s} {'array':>6s} {'PE busy':>8s}")
    for name, params, blocks in CYCLE_CONFIGS:
        t0 = time.perf_counter()
        rep, slack = cycle_figures(name, params, blocks)
        for f in rep["blocks"]:
            print(f"{name:34s} {f['rows_valid']:4d} {f['n_keys']:4d} {f['cycles_per_row']:8.2f} "
                  f"{f['ideal_per_row']:5d} {f['stall_cycles']:6d} {slack:6d} "
                  f"{f['ideal_per_row'] / f['cycles_per_row']:6.1%} "
                  f"{rep['pe_busy_fraction']:8.1%}")
        print(f"{'':34s} ({time.perf_counter() - t0:.0f} s with the Verilator build)")

    print("\n## Elaboration + Verilog conversion (fresh process each)\n")
    small = make_plan(preset("small"))
    paper_cfg = dataclasses.replace(preset("paper"), format=Int8Format())
    paper = make_plan(paper_cfg)
    arrays = [("small preset", small)]
    if os.environ.get("BENCH_CORE_PAPER", "1") != "0":
        arrays.append(("paper 64x32, int8", paper))
    for name, plan in arrays:
        b, w = plan.budget, plan.workload
        params = dict(mac_lines=b.mac_lines, macs_per_line=b.macs_per_line,
                      rows_per_mac=plan.rows_per_mac, head_dim=w.head_dim,
                      exp_units=b.exp_units, max_seq_len=w.seq_len)
        s = convert_stats(params)
        print(f"{name:20s} {b.mac_lines}x{b.macs_per_line} MACs, r={plan.rows_per_mac}, "
              f"d={w.head_dim}, E={b.exp_units}, N<={w.seq_len}: {s['seconds']:.1f} s wall, "
              f"{s['cpu_s']:.1f} s CPU, "
              f"peak {s['peak_mb']:.0f} MB, Verilog {s['verilog_mb']:.1f} MB", flush=True)


if __name__ == "__main__":
    main()
