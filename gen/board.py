"""The board build: the accelerator on a ULX3S 85F, to a bitstream, with the PyPI tools.

    python -m attenio.gen.board [shared options] [-o DIR] [--baud B]   (make bitstream)

elaborates `attenio.hdl.board.ULX3SBoard` through amaranth-boards' ULX3S 85F
platform (pins, LPF with the oscillator's 25 MHz), then runs Yosys (synth_ecp5),
nextpnr-ecp5 and ecppack itself, with progress, through the same toolchain
selection as `attenio synth` (YOSYS, NEXTPNR_ECP5, ECPPACK). The design runs
at `--clock-mhz` from the ECP5 PLL; nextpnr derives that clock's constraint from
the PLL's dividers. The narrow products are built from LUTs, as `attenio synth
--lut-mul-width` builds them (`attenio.hdl.formats.dsp.lut_built`), at
`BOARD_LUT_MUL_WIDTH` in every format: with all its products in DSPs the small
preset's 4x4 does not route, nor the fp16 2x2 board at a float format's own
default 6 (docs/synthesis.md, "The bitstream").
Writes `attenio_ulx3s.bit` and `board_report.json` (clock asked and made, PLL
dividers, resources, Fmax, times).

`emit_board` writes the simulation twin, `attenio_board.v` (`BoardCore`: every
thing but the pins, without the PLL), for the cocotb bench.
"""

import json
import re
import sys
import time
from pathlib import Path

from attenio import validate
from attenio.errors import ConfigError
from attenio.formats import FloatFormat
from attenio.plan import make_plan

from .floorplan import BOARD_TOP, lock_dsps
from .synth import (DEVICE, FLOORPLANS, LUT_MUL_WIDTH, PLACER_OPTIONS, pnr_summary,
                    prepare_script, resources_of, run_tool, yosys_cells)
from .verilog import emit

__all__ = ["emit_board", "prepare_board", "board_floorplan", "build_bitstream", "BOARD_NAME",
           "BOARD_LUT_MUL_WIDTH", "ROUTERS", "main"]

BOARD_NAME = "attenio_ulx3s"
ROUTERS = ("router1", "router2")

#: The board's LUT width in every format (int8's `attenio synth` default). The fp16 2x2
#: board routes at 8 (36 router2 iterations, 77.42 MHz for 75), where at 6, a float
#: format's `attenio synth` default, it had 1,851 overused wires after 14 iterations: its
#: seven more DSPs (56) crowd the routes beside the DSP rows.
BOARD_LUT_MUL_WIDTH = LUT_MUL_WIDTH

_DERIVED_RE = re.compile(r"Derived frequency constraint of ([\d.]+) MHz for net (\S+)")


def emit_board(config, out_dir, *, divisor):
    """Write attenio_board.v (BoardCore with `divisor` clocks per UART bit); returns its path."""
    from attenio.hdl.board import BOARD_TOP, BoardCore
    from attenio.hdl.top import check_plan

    plan = make_plan(config)
    check_plan(plan)
    path = Path(out_dir) / f"{BOARD_TOP}.v"
    emit(BoardCore(plan, divisor=divisor), path, name=BOARD_TOP)
    return path


def prepare_board(config, out_dir, *, clock_mhz=None, baud=115200, lut_mul_width=None):
    """Elaborate the ULX3S top of `config` into `out_dir`: RTLIL, LPF, the Yosys script.

    The clock is `clock_mhz` (default: the budget's) from the PLL; ConfigError when the
    PLL cannot make it. Returns (plan, board), the `ULX3SBoard` elaborated.
    """
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    from attenio.hdl.board import OSC_HZ, ULX3SBoard
    from attenio.hdl.ecp5_pll import ecp5_pll
    from attenio.hdl.top import check_plan

    mhz = clock_mhz or config.budget.clock_mhz
    if lut_mul_width is None:
        lut_mul_width = BOARD_LUT_MUL_WIDTH
    validate.integer("board", "lut_mul_width", lut_mul_width, lo=0, error=ConfigError)
    plan = make_plan(config)
    check_plan(plan)
    try:
        pll = ecp5_pll(OSC_HZ, round(mhz * 1_000_000))
    except ValueError as exc:
        raise ConfigError(f"board: {exc}") from None
    board = ULX3SBoard(plan, pll=pll, baud=baud)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    overrides = {"script_after_synth": "tee -q -o stat.json stat -json",
                 "ecppack_opts": "--compress"}
    overrides["script_after_read"] = prepare_script(BOARD_NAME, lut_mul_width, check=False)
    platform = ULX3S_85F_Platform()
    # read by attenio.hdl.formats.dsp: the wide products become MULT18X18D primitives
    platform.lut_mul_width = lut_mul_width
    bplan = platform.prepare(board, name=BOARD_NAME, **overrides)
    bplan.extract(str(out))
    return plan, board


def _derived_clocks(log_path):
    """{net: MHz} of the clock constraints nextpnr derived (the PLL's output)."""
    text = Path(log_path).read_text(errors="replace")
    return {net: float(mhz) for mhz, net in _DERIVED_RE.findall(text)}


def board_floorplan(config):
    """The board's default floorplan: "dsp" in a float format, "none" in int8. Left to
    HeAP, the fp16 2x2 board put a MAC's DSPs 80 tiles from its operand registers and
    router2 did not converge; with its DSPs pinned it routes and meets 75 MHz
    (docs/synthesis.md, "The bitstream"). int8 meets 75 MHz without."""
    return "dsp" if isinstance(config.format, FloatFormat) else "none"


def build_bitstream(config, out_dir, *, clock_mhz=None, baud=115200,
                    lut_mul_width=None, router="router2", seed=1, floorplan=None, log=print):
    """Build the ULX3S 85F bitstream of `config`; returns the report (also board_report.json).

    `clock_mhz`: the clock asked of the PLL (default: the budget's). `router`: nextpnr's
    router (router2 routed the standalone 4x4 where router1 did not, docs/synthesis.md).
    `lut_mul_width`: as `attenio.gen.synth.synthesize` takes it (None:
    `BOARD_LUT_MUL_WIDTH`). `floorplan`: one of `FLOORPLANS` ("dsp": each unit's DSPs
    pinned side by side before placement, `attenio.gen.floorplan`), None:
    `board_floorplan`.
    """
    from attenio.hdl.board import board_memory_bytes

    if lut_mul_width is None:
        lut_mul_width = BOARD_LUT_MUL_WIDTH
    if floorplan is None:
        floorplan = board_floorplan(config)
    validate.one_of("board", "floorplan", floorplan, FLOORPLANS, error=ConfigError)
    if router not in ROUTERS:
        raise ConfigError(f"board: router must be one of {', '.join(ROUTERS)}, not {router!r}")
    out = Path(out_dir).resolve()
    t0 = time.monotonic()
    asked = clock_mhz or config.budget.clock_mhz
    b, w = config.budget, config.workload
    log(f"elaborating the ULX3S 85F top ({b.mac_lines}x{b.macs_per_line} MACs, E = {b.exp_units}, "
        f"d = {w.head_dim}, N <= {w.seq_len}, {asked} MHz asked of the PLL, UART {baud} baud) ...")
    plan, board = prepare_board(config, out, clock_mhz=asked, baud=baud,
                                lut_mul_width=lut_mul_width)
    pll = board.pll
    made = float(pll.fout_hz) / 1e6
    log(f"  PLL: 25 MHz / {pll.clki_div} x {pll.clkfb_div} = {made:.3f} MHz "
        f"(VCO {float(pll.fvco_hz) / 1e6:.1f} MHz, CLKOP_DIV {pll.clkop_div}); "
        f"{board_memory_bytes(plan)} bytes of block RAM; UART divisor {board.divisor}")
    report = {"board": "ULX3S 85F", "device": DEVICE["name"],
              "clock_mhz_asked": asked, "clock_mhz": round(made, 3),
              "pll": {"clki_div": pll.clki_div, "clkfb_div": pll.clkfb_div,
                      "clkop_div": pll.clkop_div, "vco_mhz": round(float(pll.fvco_hz) / 1e6, 3)},
              "baud": baud, "uart_divisor": board.divisor,
              "memory_bytes": board_memory_bytes(plan),
              "config": {"macs": f"{b.mac_lines}x{b.macs_per_line}", "head_dim": w.head_dim,
                         "seq_len": w.seq_len, "heads": w.heads, "exp_units": b.exp_units,
                         "format": config.format.name, "a": plan.a, "split": plan.split,
                         "rows_per_mac": plan.rows_per_mac},
              "lut_mul_width": lut_mul_width, "router": router,
              "elaborate_seconds": round(time.monotonic() - t0, 1)}
    log("yosys synth_ecp5 ...")
    secs = run_tool("yosys", ["-l", f"{BOARD_NAME}.rpt", f"{BOARD_NAME}.ys"], cwd=out,
                    log_path=out / "yosys.log", log=log)
    cells = yosys_cells(out / "stat.json", BOARD_NAME)
    report["yosys"] = {"seconds": round(secs, 1), **cells}
    report["resources"] = resources_of(cells["cells_by_type"])
    report["floorplan"] = floorplan
    if floorplan == "dsp":
        units = lock_dsps(out / f"{BOARD_NAME}.json", top=BOARD_TOP)
        log(f"floorplan: {sum(len(s) for _, s in units)} MULT18X18D of {len(units)} units pinned")
    log(f"nextpnr-ecp5 ({router}) ...")
    args = [*DEVICE["nextpnr"], "--json", f"{BOARD_NAME}.json", "--lpf", f"{BOARD_NAME}.lpf",
            "--textcfg", f"{BOARD_NAME}.config", "--report", "pnr_report.json", "--seed", str(seed),
            "--timing-allow-fail", "--router", router, *PLACER_OPTIONS]
    secs = run_tool("nextpnr-ecp5", args, cwd=out, log_path=out / "nextpnr.log", log=log)
    pnr = pnr_summary(out / "pnr_report.json")
    report["nextpnr"] = {"seconds": round(secs, 1), "options": args[len(DEVICE["nextpnr"]):],
                         "derived_clocks_mhz": _derived_clocks(out / "nextpnr.log"), **pnr}
    clocks = pnr["fmax"].values()
    report["fmax_mhz"] = min((v["achieved_mhz"] for v in clocks), default=None)
    # Met when every clock nextpnr timed reaches its constraint (the PLL's, derived).
    report["timing_met"] = bool(clocks) and all(v["achieved_mhz"] >= v["constraint_mhz"]
                                                for v in clocks)
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
    from attenio.options import (Parser, add_lut_mul_width, add_shared_options, config_from_args,
                                 planned_config)

    p = Parser(prog="python -m attenio.gen.board", description="Build the ULX3S 85F bitstream.")
    add_shared_options(p)
    p.add_argument("-o", "--out", metavar="DIR",
                   help="output directory (default build/<name>/ulx3s)")
    p.add_argument("--baud", type=int, default=115200, help="UART baud rate (default 115200)")
    add_lut_mul_width(p, default=f"{BOARD_LUT_MUL_WIDTH} in every format")
    p.add_argument("--router", choices=ROUTERS, default="router2", help="nextpnr's router")
    p.add_argument("--seed", type=int, default=1, help="nextpnr's placement seed")
    p.add_argument("--floorplan", choices=FLOORPLANS, default=None,
                   help="dsp pins each unit's MULT18X18D side by side before placement; "
                        "none leaves them to the placer (default: dsp in a float format, "
                        "none in int8)")
    args = p.parse_args(argv)
    try:
        # The mapping the planner chooses, as `attenio gen` and `attenio synth` build it.
        config = planned_config(config_from_args(args))
        out = Path(args.out) if args.out else Path("build") / config.name / "ulx3s"
        r = build_bitstream(config, out, baud=args.baud, lut_mul_width=args.lut_mul_width,
                            router=args.router, seed=args.seed, floorplan=args.floorplan,
                            log=lambda s: print(s, file=sys.stderr, flush=True))
    except ConfigError as exc:
        print(f"{p.prog}: error: {exc}", file=sys.stderr)
        return 2
    res, c = r["resources"], r["config"]
    print(f"wrote {r['bitstream']} ({r['bitstream_bytes']} bytes) in {r['total_seconds']} s "
          f"(yosys {r['yosys']['seconds']} s, nextpnr {r['nextpnr']['seconds']} s)")
    print(f"  {c['macs']} MACs, E = {c['exp_units']}, d = {c['head_dim']}, N <= {c['seq_len']}: "
          f"LUT {res['LUT']}, FF {res['FF']}, DSP {res['DSP']}, BRAM {res['BRAM']}; "
          f"Fmax {r['fmax_mhz']} MHz at the PLL's {r['clock_mhz']} MHz "
          f"({r['clock_mhz_asked']} asked; {'met' if r['timing_met'] else 'NOT MET'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
