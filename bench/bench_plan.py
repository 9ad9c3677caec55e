"""Traffic of every baseline relative to AttenIO on the paper's hardware (N = 8K..128K).

Prints, for d = 64 and 128, the chosen a with and without the hardware
reservations and each baseline's off-chip bytes divided by AttenIO's (the
hardware plan, and in brackets the plan without reservations), with geometric
means over N.
"""

import dataclasses
import math
import time

from attenio import preset
from attenio.baselines import all_baselines
from attenio.plan import make_plan
from attenio.report import table

SEQ_LENS = [8192, 16384, 32768, 65536, 131072]
NAMES = ["standard", "flat", "flashattention2", "flashattention2_fair"]


def main():
    t0 = time.perf_counter()
    base = preset("paper")
    for d in (64, 128):
        rows, ratios = [], {n: [] for n in NAMES}
        ideal_ratios = {n: [] for n in NAMES}
        for n in SEQ_LENS:
            c = dataclasses.replace(base, workload=dataclasses.replace(base.workload, seq_len=n,
                                                                       head_dim=d))
            plan, bl = make_plan(c), all_baselines(c)
            row = [n, f"{plan.a_ideal} / {plan.a}", f"{plan.traffic.bytes / 2**30:.2f}"]
            for name in NAMES:
                r = bl[name].traffic.bytes / plan.traffic.bytes
                ri = bl[name].traffic.bytes / plan.traffic_ideal.bytes
                ratios[name].append(r)
                ideal_ratios[name].append(ri)
                row.append(f"{r:.2f} ({ri:.2f})")
            rows.append(row)
        geo = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
        rows.append(["geomean", "", ""] + [f"{geo(ratios[n]):.2f} ({geo(ideal_ratios[n]):.2f})"
                                          for n in NAMES])
        print(f"\npaper preset, d = {d}: baseline traffic / AttenIO traffic "
              f"(hardware a; in brackets the a without reservations)")
        print(table(["N", "a ideal / hw", "AttenIO GiB", *NAMES], rows))
    print(f"\nplanned {2 * len(SEQ_LENS)} configurations in {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
