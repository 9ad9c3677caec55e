"""Synthesis scaling: LUT/FF/DSP/BRAM and Fmax against the MAC array, and the cost per MAC.

For each array (d = 16, int8, N = 256, one EXP unit per line) it runs
`attenio synth --target ecp5` (synth_ecp5, then nextpnr-ecp5 on the LFE5U-85F
when the design fits) and, for the `--generic` arrays, Yosys's generic flow
(word-level cell counts, no device). Prints the table, the marginal cost per MAC (a
least-squares line through the rows: the slope is the cost of one more MAC, the
intercept the fixed part: DMA, CSRs, controller, softmax lanes), and writes
build/bench_synth/scaling.json. An array whose DSPs do not fit is tried again with
its narrow products in LUTs (`--lut-mul-width 8`: the int8 q*k products and the
narrow pieces of the wide ones) and both rows are shown; the cost-per-MAC line uses the DSP-only rows.

    python bench/bench_synth.py [--arrays 2x2,4x4,8x4,8x8] [--generic 16x16] [--reuse]

`--reuse` takes a configuration's report from an earlier run when present
(build/bench_synth/<PxQ>/synth_<target>.json) instead of running the tools.
Synthesis of the larger arrays takes many minutes with the YoWASP tools.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout too

from attenio.config import resolve  # noqa: E402
from attenio.errors import ConfigError  # noqa: E402
from attenio.gen.synth import DEVICE, synthesize  # noqa: E402

OUT = Path("build/bench_synth")


def config_for(p, q, *, head_dim, seq_len):
    return resolve(name=f"synth_{p}x{q}", workload={"seq_len": seq_len, "head_dim": head_dim,
                                                    "heads": None},
                   budget={"mac_lines": p, "macs_per_line": q, "exp_units": p})


def run(p, q, target, args, level="gate", lut_mul_width=0):
    out = OUT / (f"{p}x{q}" + (f"_lutmul{lut_mul_width}" if lut_mul_width else ""))
    saved = out / f"synth_{target}.json"
    if args.reuse and saved.exists():
        return json.loads(saved.read_text())
    config = config_for(p, q, head_dim=args.head_dim, seq_len=args.seq_len)
    t0 = time.perf_counter()
    # generated afresh (seconds): Verilog left from an earlier run may be of older RTL
    r = synthesize(config, out, target=target,
                   generic_level=level, lut_mul_width=lut_mul_width,
                   log=lambda s: print(f"    {s}", flush=True))
    print(f"  {p}x{q} {target}: {time.perf_counter() - t0:.0f} s", flush=True)
    return r


def fit(xs, ys):
    n = len(xs)
    if n < 2:
        return None, None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None, None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def arrays(text):
    return [tuple(int(v) for v in a.lower().split("x")) for a in text.split(",") if a]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arrays", type=arrays, default=arrays("2x2,4x4,8x4,8x8"))
    ap.add_argument("--generic", type=arrays, default=arrays("16x16"),
                    help="arrays for generic gate counts only (default 16x16)")
    ap.add_argument("--head-dim", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--reuse", action="store_true")
    args = ap.parse_args()
    rows = []
    for p, q in args.arrays:
        try:
            e = run(p, q, "ecp5", args)
        except (ConfigError, RuntimeError) as exc:
            print(f"  {p}x{q} ecp5: {exc}", flush=True)
            continue
        rows.append(("ecp5", p, q, e))
        if not e["fits"] and e["resources"]["DSP"] > DEVICE["DSP"]:
            try:
                rows.append(("ecp5-lutmul", p, q, run(p, q, "ecp5", args, lut_mul_width=8)))
            except (ConfigError, RuntimeError) as exc:
                print(f"  {p}x{q} ecp5 --lut-mul-width 8: {exc}", flush=True)
    for p, q in args.arrays + args.generic:
        try:
            rows.append(("generic", p, q, run(p, q, "generic", args, level="word")))
        except (ConfigError, RuntimeError) as exc:
            print(f"  {p}x{q} generic: {exc}", flush=True)

    print(f"\nECP5 ({DEVICE['name']}: {DEVICE['LUT']} LUT, {DEVICE['DSP']} DSP, {DEVICE['BRAM']} BRAM), "
          f"d = {args.head_dim}, int8, N = {args.seq_len}, E = P")
    print(f"{'array':>14} {'MACs':>5} {'LUT':>7} {'FF':>7} {'DSP':>5} {'BRAM':>5} {'LUTRAM':>6} "
          f"{'fits':>5} {'Fmax MHz':>9} {'yosys s':>8} {'pnr s':>6}")
    ecp5 = [(p, q, r) for t, p, q, r in rows if t == "ecp5"]
    for t, p, q, r in rows:
        if not t.startswith("ecp5"):
            continue
        res = r["resources"]
        fmax = f"{r['fmax_mhz']:.1f}" if r.get("fmax_mhz") else "-"
        name = f"{p}x{q}" + (" LUT narrow" if t == "ecp5-lutmul" else "")
        print(f"{name:>14} {p * q:5d} {res['LUT']:7d} {res['FF']:7d} {res['DSP']:5d} {res['BRAM']:5d} "
              f"{res['LUTRAM']:6d} {'yes' if r['fits'] else 'no':>5} {fmax:>9} "
              f"{r['yosys']['seconds']:8.0f} {r.get('nextpnr', {}).get('seconds', '-')!s:>6}")
        if not r["fits"]:
            print(f"{'':14} {r['why_not_placed']}")
    macs = [p * q for p, q, _ in ecp5]
    print("\ncost per MAC (least-squares slope over the ECP5 rows; intercept = fixed logic):")
    for key in ("LUT", "FF", "DSP", "BRAM"):
        slope, icpt = fit(macs, [r["resources"][key] for _, _, r in ecp5])
        if slope is not None:
            print(f"  {key:5s} {slope:8.1f} per MAC + {icpt:8.0f}")
    gen = [(p, q, r) for t, p, q, r in rows if t == "generic"]
    if gen:
        print("\ngeneric word-level counts (Yosys synth -flatten -run begin:fine):")
        print(f"{'array':>6} {'MACs':>5} {'cells':>8} {'FF cells':>8} {'per MAC':>8}")
        for p, q, r in gen:
            cells = r["yosys"]["cells_by_type"]
            ffs = sum(v for k, v in cells.items() if "dff" in k.lower())
            print(f"{p}x{q:<4} {p * q:5d} {r['yosys']['num_cells']:8d} {ffs:7d} "
                  f"{r['yosys']['num_cells'] / (p * q):8.0f}")
        slope, icpt = fit([p * q for p, q, _ in gen], [r["yosys"]["num_cells"] for _, _, r in gen])
        if slope is not None:
            print(f"  cells: {slope:.0f} per MAC + {icpt:.0f} fixed")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scaling.json").write_text(json.dumps(
        [{"target": t, "array": f"{p}x{q}", "report": r} for t, p, q, r in rows], indent=2) + "\n")
    print(f"\nwrote {OUT / 'scaling.json'}")


if __name__ == "__main__":
    main()
