"""`make bench`: run every bench/bench_*.py in name order and print what each measures.

Benchmarks print measured figures (cycles, utilization, bytes, accuracy, wall
time); they are not timed tests and assert nothing about speed.
"""

import subprocess
import sys
import time
from pathlib import Path

here = Path(__file__).parent
scripts = sorted(here.glob("bench_*.py"))
if not scripts:
    sys.exit("bench/: no bench_*.py scripts found")
failed = []
for script in scripts:
    print(f"\n===== {script.name} =====", flush=True)
    t0 = time.perf_counter()
    rc = subprocess.call([sys.executable, str(script)], cwd=here.parent)
    print(f"----- {script.name}: exit {rc}, {time.perf_counter() - t0:.1f} s", flush=True)
    if rc:
        failed.append(script.name)
if failed:
    sys.exit(f"bench scripts failed: {', '.join(failed)}")
