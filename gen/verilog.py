"""Emit Verilog from Amaranth components, and lint it with Verilator."""

import subprocess
import time
from pathlib import Path

from amaranth.back import verilog

__all__ = ["emit", "lint", "LINT_WAIVERS"]


def emit(component, path, *, name):
    """Convert `component` to Verilog with top module `name` at `path`; returns seconds taken."""
    t0 = time.perf_counter()
    text = verilog.convert(component, name=name, emit_src=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return time.perf_counter() - t0


# Warnings `verilator --lint-only -Wall` raises on Amaranth's output, each waived for a reason.
LINT_WAIVERS = {
    "UNUSEDSIGNAL": "Amaranth keeps every named signal; bits that feed nothing (unused address "
                    "bits, the upper halves of products it truncates) are reported here",
    "UNUSEDPARAM": "Amaranth emits no parameters; kept for safety against future versions",
    "DECLFILENAME": "one file holds every module Amaranth emits, named after the top",
    "WIDTHEXPAND": "Amaranth extends operands explicitly in its own semantics; Yosys's Verilog "
                   "backend leaves some implicit",
    "WIDTHTRUNC": "the same, for truncation to the destination width",
    "UNDRIVEN": "Amaranth ties off unused outputs of library cells with no driver",
    "PINCONNECTEMPTY": "unused outputs of submodule instances are left unconnected on purpose",
    "GENUNNAMED": "not emitted by Amaranth; kept for safety",
    "CASEINCOMPLETE": "Yosys emits partial case statements with a default assignment before them",
    "PROCASSINIT": "Amaranth gives every register its initial value with a declaration "
                   "initializer and then assigns it in a process; that is intended",
}


def lint(path, *, top, verilator="verilator"):
    """Run `verilator --lint-only -Wall` with the waivers; returns (ok, output)."""
    args = [verilator, "--lint-only", "-Wall", "--top-module", top]
    args += [f"-Wno-{w}" for w in LINT_WAIVERS]
    args.append(str(path))
    r = subprocess.run(args, capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()
