"""The board build: the accelerator on a ULX3S 85F, to a bitstream, with the PyPI tools.

    python -m attenio.gen.board [shared options] [-o DIR] [--baud B]   (make bitstream)

elaborates `attenio.hdl.board.ULX3SBoard` through amaranth-boards' ULX3S 85F
platform (pins, LPF, 25 MHz clock constraint), then runs Yosys (synth_ecp5),
nextpnr-ecp5 and ecppack itself, with progress, through the same toolchain
selection as `attenio synth` (YOSYS, NEXTPNR_ECP5, ECPPACK). Writes
`attenio_ulx3s.bit` and `board_report.json` (resources, Fmax, times).

`emit_board` writes the simulation twin, `attenio_board.v` (`BoardCore`: every
thing but the pins), for the cocotb bench.
"""

import json
import sys
import time
from pathlib import Path

from attenio.plan import make_plan

from .synth import DEVICE, _pnr_summary, _yosys_cells, resources_of, run_tool
from .verilog import emit

__all__ = ["emit_board", "build_bitstream", "BOARD_NAME", "main"]

BOARD_NAME = "attenio_ulx3s"
CLK_HZ = 25_000_000


def emit_board(config, out_dir, *, divisor):
    """Write attenio_board.v (BoardCore with `divisor` clocks per UART bit); returns its path."""
    from attenio.hdl.board import BOARD_TOP, BoardCore
    from attenio.hdl.top import check_plan

    plan = make_plan(config)
    check_plan(plan)
    path = Path(out_dir) / f"{BOARD_TOP}.v"
    emit(BoardCore(plan, divisor=divisor), path, name=BOARD_TOP)
    return path


def build_bitstream(config, out_dir, *, baud=115200, seed=1, log=print):
    """Build the ULX3S 85F bitstream of `config`; returns the report (also board_report.json)."""
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    from attenio.hdl.board import ULX3SBoard, board_memory_bytes
    from attenio.hdl.top import check_plan

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    plan = make_plan(config)
    check_plan(plan)
    t0 = time.monotonic()
    log(f"elaborating the ULX3S 85F top ({plan.budget.mac_lines}x{plan.budget.macs_per_line} MACs, "
        f"d = {plan.workload.head_dim}, N <= {plan.workload.seq_len}, "
        f"{board_memory_bytes(plan)} bytes of block RAM, UART {baud} baud) ...")
    platform = ULX3S_85F_Platform()
    bplan = platform.prepare(ULX3SBoard(plan, baud=baud, clk_hz=CLK_HZ), name=BOARD_NAME,
                             script_after_synth="tee -q -o stat.json stat -json",
                             ecppack_opts="--compress")
    bplan.extract(str(out))
    elaborate_s = time.monotonic() - t0
    report = {"board": "ULX3S 85F", "device": DEVICE["name"], "clock_mhz": CLK_HZ / 1e6,
              "baud": baud, "memory_bytes": board_memory_bytes(plan),
              "config": {"macs": f"{plan.budget.mac_lines}x{plan.budget.macs_per_line}",
                         "head_dim": plan.workload.head_dim, "seq_len": plan.workload.seq_len,
                         "heads": plan.workload.heads, "exp_units": plan.budget.exp_units},
              "elaborate_seconds": round(elaborate_s, 1)}
    log("yosys synth_ecp5 ...")
    secs = run_tool("yosys", ["-l", f"{BOARD_NAME}.rpt", f"{BOARD_NAME}.ys"], cwd=out,
                    log_path=out / "yosys.log", log=log)
    cells = _yosys_cells(out / "stat.json", BOARD_NAME)
    report["yosys"] = {"seconds": round(secs, 1), **cells}
    report["resources"] = resources_of(cells["cells_by_type"])
    log("nextpnr-ecp5 ...")
    args = [*DEVICE["nextpnr"], "--json", f"{BOARD_NAME}.json", "--lpf", f"{BOARD_NAME}.lpf",
            "--textcfg", f"{BOARD_NAME}.config", "--report", "pnr_report.json", "--seed", str(seed),
            # router1 routes this board (nextpnr 873 s, docs/synthesis.md); router2 ran
            # for more than an hour on its netlist without finishing (congestion in the
            # DSP rows)
            "--timing-allow-fail", "--router", "router1"]
    secs = run_tool("nextpnr-ecp5", args, cwd=out, log_path=out / "nextpnr.log", log=log)
    pnr = _pnr_summary(out / "pnr_report.json")
    report["nextpnr"] = {"seconds": round(secs, 1), **pnr}
    fmax = min((v["achieved_mhz"] for v in pnr["fmax"].values()), default=None)
    report["fmax_mhz"] = fmax
    report["timing_met"] = fmax is not None and fmax >= CLK_HZ / 1e6
    log("ecppack ...")
    secs = run_tool("ecppack", ["--compress", "--input", f"{BOARD_NAME}.config",
                                "--bit", f"{BOARD_NAME}.bit"], cwd=out,
                    log_path=out / "ecppack.log", log=log)
    report["ecppack_seconds"] = round(secs, 1)
    bit = out / f"{BOARD_NAME}.bit"
    report["bitstream"] = str(bit)
    report["bitstream_bytes"] = bit.stat().st_size
    report["total_seconds"] = round(time.monotonic() - t0, 1)
    (out / "board_report.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def main(argv=None):
    import argparse

    from attenio.cli import _Parser, _shared_options, config_from_args
    from attenio.errors import ConfigError

    p = _Parser(prog="python -m attenio.gen.board", description="Build the ULX3S 85F bitstream.")
    _shared_options(p)
    p.add_argument("-o", "--out", metavar="DIR", help="output directory (default build/<name>/ulx3s)")
    p.add_argument("--baud", type=int, default=115200, help="UART baud rate (default 115200)")
    args = p.parse_args(argv)
    try:
        config = config_from_args(args)
        out = Path(args.out) if args.out else Path("build") / config.name / "ulx3s"
        r = build_bitstream(config, out, baud=args.baud,
                            log=lambda s: print(s, file=sys.stderr, flush=True))
    except ConfigError as exc:
        print(f"{p.prog}: error: {exc}", file=sys.stderr)
        return 2
    res = r["resources"]
    print(f"wrote {r['bitstream']} ({r['bitstream_bytes']} bytes) in {r['total_seconds']} s "
          f"(yosys {r['yosys']['seconds']} s, nextpnr {r['nextpnr']['seconds']} s)")
    print(f"  {r['config']['macs']} MACs, d = {r['config']['head_dim']}, N <= {r['config']['seq_len']}: "
          f"LUT {res['LUT']}, FF {res['FF']}, DSP {res['DSP']}, BRAM {res['BRAM']}; "
          f"Fmax {r['fmax_mhz']} MHz at {r['clock_mhz']} MHz "
          f"({'met' if r['timing_met'] else 'NOT MET'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
