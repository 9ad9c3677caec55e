"""Sustained DMA throughput against the AXI width: quiet bus, back-pressure, latency.

Builds the DMA for each data width, runs the cocotb bench's `test_throughput` on
Verilator (AxiRam, long transfers of `--beats` beats per direction) and prints
bytes per cycle next to the bus's bytes per beat. Three loads: "quiet"; "pressure",
20% random pauses on every AXI channel with the DMA's own streams throttled to
80%; "latency", a quiet bus whose reads answer `--latency` cycles after AR
(pipelined). Reads and writes use separate AXI channels, so "both" can reach twice
the width; "small" is 1024 one-beat commands each way at once (per-command cost,
and under latency the cost of too few transactions in flight). For the `--deep`
widths the DMA is also built with a read FIFO deep enough to cover the latency
(latency + 2 maximal bursts, rounded up to a power of two, and max_reads to
match), to show what the default FIFO costs.

    python bench/bench_dma.py [--widths 32,64,128,256,512] [--deep 512] [--latency 100]
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout too

from attenio.sim.benches.bench_dma import launch  # noqa: E402
from attenio.sim.runner import simulator_available  # noqa: E402

KINDS = ("read", "write", "both", "small")
LOADS = ("quiet", "pressure", "latency")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="32,64,128,256,512")
    ap.add_argument("--simulator", default="verilator")
    ap.add_argument("--beats", type=int, default=4096, help="beats per transfer and direction")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--latency", type=int, default=100, help="read latency in cycles")
    ap.add_argument("--deep", default="512", help="widths also run with a latency-sized FIFO")
    args = ap.parse_args(argv)
    if not simulator_available(args.simulator):
        sys.exit(f"bench_dma: {args.simulator} is not installed")
    widths = [int(w) for w in args.widths.split(",")]
    deep = [int(w) for w in args.deep.split(",") if w]
    runs = [(w, None, 4) for w in widths]
    for w in deep:
        burst = min(256, 4096 // (w // 8))
        depth = 1 << (args.latency + 2 * burst - 1).bit_length()
        runs.append((w, depth, max(4, -(-depth // burst))))
    rows = []
    for width, fifo, reads in runs:
        t0 = time.perf_counter()
        report = Path("build/bench_dma") / f"throughput_d{width}_f{fifo}_{args.simulator}.json"
        report.parent.mkdir(parents=True, exist_ok=True)
        report.unlink(missing_ok=True)
        launch(simulator=args.simulator, data_width=width, read_fifo_depth=fifo, max_reads=reads,
               seed=args.seed, testcase="test_throughput", throughput_beats=args.beats,
               latency=args.latency, report=str(report.resolve()))
        result = json.loads(report.read_text())
        result["wall_s"] = time.perf_counter() - t0
        rows.append(result)

    print(f"\nDMA sustained throughput, {args.simulator}, AxiRam, {args.beats} beats per "
          f"direction, read latency {args.latency} cycles in the 'latency' load.")
    print("bytes/cycle, and in brackets the fraction of one AXI channel (bytes per beat)\n")
    head = (f"{'width':>5} {'B/beat':>6} {'rdFIFO':>6} {'maxR':>4} "
            + " ".join(f"{k[:2] + ' ' + l[:5]:>14}" for l in LOADS for k in KINDS)
            + f" {'wall s':>6}")
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = []
        for load in LOADS:
            for kind in KINDS:
                x = r[f"{kind}_{load}"]["bytes_per_cycle"]
                cells.append(f"{x:6.2f} ({x / r['bytes_per_beat']:4.2f})")
        print(f"{r['data_width']:>5} {r['bytes_per_beat']:>6} {r['read_fifo_depth']:>6} "
              f"{r['max_reads']:>4} " + " ".join(f"{c:>14}" for c in cells)
              + f" {r['wall_s']:6.1f}")
    print("\nmost reads in flight under latency: " + ", ".join(
        f"{r['data_width']}b/fifo {r['read_fifo_depth']}: "
        f"{r['read_latency']['max_reads_in_flight']}" for r in rows))
    print(json.dumps({"simulator": args.simulator, "beats": args.beats, "results": rows}))


if __name__ == "__main__":
    main()
