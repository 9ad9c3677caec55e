"""AttenIO against the baselines through the cycle models, paper preset, N = 8K..128K, d = 64, 128.

Prints the tables of `attenio compare --preset paper --seq-lens 8K,16K,32K,64K,128K
--head-dims 64,128` (speedups of AttenIO over each baseline, traffic ratios, PE
time / spatial / EXP utilization, stall fractions, the split-rows and causal
what-ifs), the split-rows what-if at s = 2 (the smallest change to the array),
geometric means over N, a bandwidth sweep showing where AttenIO's traffic
advantage turns into speed, and the wall time of each part.
"""

import dataclasses
import math
import time

from attenio import preset
from attenio.baselines import all_baselines
from attenio.plan import make_plan
from attenio.report import table
from attenio.sim.baselinemodel import BASELINE_ORDER, simulate_baseline
from attenio.sim.compare import TITLES, compare, render_text
from attenio.sim.cyclemodel import simulate

SEQ_LENS = [8192, 16384, 32768, 65536, 131072]
HEAD_DIMS = [64, 128]


def geo(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def with_(config, **kw):
    w = {k: kw.pop(k) for k in ("seq_len", "head_dim") if k in kw}
    return dataclasses.replace(config, workload=dataclasses.replace(config.workload, **w),
                               budget=dataclasses.replace(config.budget, **kw))


def main():
    base = preset("paper")
    t0 = time.perf_counter()
    data = compare(base, SEQ_LENS, HEAD_DIMS)
    t_compare = time.perf_counter() - t0
    print(render_text(data))

    print("\nGeometric means over N of the speedup of AttenIO over X (cycles(X) / cycles(AttenIO)) "
          "and of the traffic ratio")
    rows = []
    for d in HEAD_DIMS:
        rs = [r for r in data["rows"] if r["head_dim"] == d]
        for name in BASELINE_ORDER:
            rows.append([d, TITLES[name], f"{geo([r['baselines'][name]['speedup'] for r in rs]):.2f}x",
                         f"{geo([r['baselines'][name]['traffic_ratio'] for r in rs]):.2f}x"])
        rows.append([d, "AttenIO split (auto s) vs FA-2",
                     f"{geo([r['baselines']['flashattention2']['cycles'] / r['attenio_split']['cycles'] for r in rs]):.2f}x",
                     ""])
    print(table(["d", "X", "speedup", "traffic"], rows, ["<", "<", ">", ">"]))

    t1 = time.perf_counter()
    print("\nSplit rows at s = 2 (two MACs per Q row: the smallest change to the array)")
    rows = []
    for d in HEAD_DIMS:
        for n in SEQ_LENS:
            plan = make_plan(with_(base, seq_len=n, head_dim=d))
            plain, two = simulate(plan), simulate(plan, split=2)
            fa2 = next(r for r in data["rows"] if r["head_dim"] == d and r["seq_len"] == n)
            rows.append([d, n, plan.a, f"{plain.spatial_util:.1%}", f"{two.spatial_util:.1%}",
                         f"{plain.cycles / two.cycles:.2f}x",
                         f"{fa2['baselines']['flashattention2']['cycles'] / two.cycles:.2f}x"])
    print(table(["d", "N", "a", "spatial s=1", "spatial s=2", "gain", "speedup over FA-2"], rows))
    t_split = time.perf_counter() - t1

    t2 = time.perf_counter()
    n = 65536
    print(f"\nBandwidth sweep at N = {n}: speedup of AttenIO over X (cycles(X) / cycles(AttenIO)) "
          f"and AttenIO's stall fraction")
    for d in HEAD_DIMS:
        rows = []
        for bw in (4, 8, 16, 32, 64, 128, 256):
            c = with_(base, seq_len=n, head_dim=d, bw_bytes_per_cycle=bw)
            plan = make_plan(c)
            ours = simulate(plan)
            bls = all_baselines(c)
            row = [bw, plan.a, f"{ours.cycles / 1e6:.1f}", f"{ours.stall_fraction:.1%}"]
            for name in BASELINE_ORDER:
                row.append(f"{simulate_baseline(c, bls[name]).cycles / ours.cycles:.2f}x")
            rows.append(row)
        print(f"d = {d}")
        print(table(["B/cycle", "a", "AttenIO Mcycles", "AttenIO stall"]
                    + [TITLES[x] for x in BASELINE_ORDER], rows))
    t_sweep = time.perf_counter() - t2
    print(f"\nwall time: comparison {t_compare:.2f} s ({len(data['rows'])} configurations), "
          f"split s = 2 {t_split:.2f} s, bandwidth sweep {t_sweep:.2f} s")


if __name__ == "__main__":
    main()
